"""Judgment imports are staged outside the store's lock and copied in by one transaction
(``retrieval.judging.staged_writes``): readers never wait for them and never see part of one, a process killed at
any moment leaves all of an import or none, an import is bounded, and the counts (new, changed,
unchanged) are those of one write whichever path it takes."""
from __future__ import annotations

import gc
import html
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.judging import staged_writes as staging
from retrieval.store import JudgmentsStored, Store
from tests.conftest import ROOT


def count(path: Path, corpus: str = "c") -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("select count(*) from judgments where corpus = ?", [corpus]).fetchone()[0]


def staging_tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [r[0] for r in conn.execute("select name from sqlite_master where name like 'staging_judgments_%'")]


def rows(n: int, judge: str = "ann", grade=lambda i: i % 3):
    return ((f"q{i % 997}", "text", f"d{i}", grade(i), judge) for i in range(n))


IMPORTS = st.lists(st.lists(st.tuples(st.sampled_from(["q1", "q2"]), st.sampled_from(["d1", "d2", "d3"]),
                                      st.sampled_from([0, 1, 2]), st.sampled_from(["ann", "bob"])),
                            max_size=12), min_size=1, max_size=4)


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
@pytest.mark.parametrize("direct_up_to, chunk", [(1_000, 20_000), (0, 3)])  # a few in one write; all staged
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(imports=IMPORTS)
def test_an_import_is_counted_and_stored_as_one_write_whichever_path(monkeypatch, direct_up_to, chunk, imports):
    monkeypatch.setattr(staging, "DIRECT_UP_TO", direct_up_to)
    monkeypatch.setattr(staging, "CHUNK", chunk)
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "s.sqlite3")
        held: dict[tuple[str, str, str], int] = {}
        for batch in imports:
            last = {(q, d, j): g for q, d, g, j in batch}  # a pair given twice: its last grade
            new = sum(key not in held for key in last)
            changed = sum(key in held and held[key] != g for key, g in last.items())
            got = store.put_judgments("c", [(q, "text", d, g, j) for q, d, g, j in batch])
            assert got == JudgmentsStored(new, changed, len(last) - new - changed)
            held.update(last)
            assert {(r["query_id"], r["doc_id"], r["judge"]): r["grade"] for r in store.judgments("c")} == held
        assert staging_tables(store.path) == []
        store.close()


def test_an_unchanged_grade_keeps_its_time_and_a_bad_row_late_in_an_import_stores_nothing(store, monkeypatch):
    monkeypatch.setattr(staging, "CHUNK", 100)
    assert store.put_judgments("c", rows(3_000)) == JudgmentsStored(3_000, 0, 0)
    times = {(r["query_id"], r["doc_id"]): r["time"] for r in store.judgments("c")}
    again = list(rows(3_000, grade=lambda i: (i % 3) if i % 2 else (i + 1) % 3))
    assert store.put_judgments("c", again) == JudgmentsStored(0, 1_500, 1_500)
    after = {(r["query_id"], r["doc_id"]): (r["time"], r["grade"]) for r in store.judgments("c")}
    assert all(after[(f"q{i % 997}", f"d{i}")][0] == times[(f"q{i % 997}", f"d{i}")] for i in range(1, 3_000, 2))
    bad = [*rows(2_500, grade=lambda i: 2), ("q1", "text", "d1", 7, "ann")]  # staged 25 chunks, then refused
    with pytest.raises(ValueError, match="a grade is one of 0, 1, 2, not 7"):
        store.put_judgments("c", bad)
    assert {(r["query_id"], r["doc_id"]): (r["time"], r["grade"]) for r in store.judgments("c")} == after
    assert staging_tables(store.path) == []


def test_readers_never_wait_for_an_import_that_waits_to_write(store):
    """Another writer holds SQLite's write lock, so the import has to wait: the store's lock stays
    free and its reads go on (before, the import waited inside the store's lock: every session's
    reads waited with it)."""
    store.put_judgments("c", [("q0", "text", "before", 1, "ann")])
    store.put_run("run", dataset="x", system="bm25", params={}, split="test", k=1, run={"q0": [("d0", 1.0)]})
    blocker = sqlite3.connect(store.path, isolation_level=None)
    blocker.execute("begin immediate")
    done = threading.Event()
    worker = threading.Thread(target=lambda: (store.put_judgments("c", rows(5_000)), done.set()))
    worker.start()
    try:
        time.sleep(0.5)
        assert not done.is_set()  # the import waits for the write lock…
        assert store._lock.acquire(timeout=2)  # …outside the store's lock
        store._lock.release()
        started = time.perf_counter()
        assert len(store.judgments("c")) == 1 and store.get_run("run") == {"q0": [("d0", 1.0)]}
        assert time.perf_counter() - started < 1
    finally:
        blocker.execute("rollback")
        blocker.close()
    worker.join(60)
    assert done.is_set() and count(store.path) == 5_001


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_another_connection_sees_all_of_an_import_or_none(store):
    n = 150_000
    store.put_judgments("c", [("q0", "text", "before", 1, "ann")])
    seen, done = [], threading.Event()
    worker = threading.Thread(target=lambda: (store.put_judgments("c", rows(n)), done.set()))
    worker.start()
    reader = sqlite3.connect(store.path)
    while not done.is_set():
        seen.append(reader.execute("select count(*) from judgments where corpus = 'c'").fetchone()[0])
        seen.append(len(store.judgments("c", query_ids=["q5"])))  # through the store's own connection too
    worker.join()
    seen.append(reader.execute("select count(*) from judgments where corpus = 'c'").fetchone()[0])
    reader.close()
    assert len(seen) > 20  # it read while the import ran
    counts, per_query = set(seen[::2]), set(seen[1::2])
    assert counts <= {1, n + 1} and seen[-1] == n + 1
    assert per_query <= {0, len([i for i in range(n) if i % 997 == 5])}


CHILD = """
import sys
from retrieval.store import Store
store = Store(sys.argv[1])
store.put_judgments("c", ((f"q{i % 997}", "text", f"d{i}", i % 3, "ann") for i in range(int(sys.argv[2]))))
print("done", flush=True)
"""


def _staged_rows(path: Path) -> int | None:
    with sqlite3.connect(path, timeout=5) as conn:
        names = [r[0] for r in conn.execute("select name from sqlite_master where name like 'staging_judgments_%'")]
        try:
            return conn.execute(f"select count(*) from {names[0]}").fetchone()[0] if names else None
        except sqlite3.OperationalError:  # dropped meanwhile
            return None


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
@pytest.mark.parametrize("when", ["staging begins", "half staged", "copy begins", "copy under way"])
def test_kill_9_at_any_moment_of_an_import_leaves_all_of_it_or_none(tmp_path, when):
    n = 120_000
    path = tmp_path / "s.sqlite3"
    Store(path).close()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(n)], cwd=ROOT, stdout=subprocess.PIPE,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and child.poll() is None:
            staged = _staged_rows(path)
            if staged is not None and (when == "staging begins" or (when == "half staged" and staged >= n // 2)
                                       or staged == n):
                break
            time.sleep(0.002)
        if when == "copy under way":
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(30)
    assert child.returncode == -signal.SIGKILL, "the import ended before the kill: nothing tested"
    assert count(path) in (0, n)  # all or nothing, whatever the moment
    if when in ("staging begins", "half staged"):
        assert count(path) == 0
    if count(path) == 0:
        assert staging_tables(path)  # the dead process's staging table is left…
    reopened = Store(path)
    assert staging_tables(path) == []  # …and dropped when the store opens next
    assert len(reopened.judgments("c")) in (0, n)
    reopened.close()


def test_only_a_dead_process_s_staging_table_is_dropped(tmp_path):
    path = tmp_path / "s.sqlite3"
    Store(path).close()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    mine, dead = f"staging_judgments_{os.getpid()}_ab12", f"staging_judgments_{gone.pid}_cd34"
    with sqlite3.connect(path) as conn:
        for name in (mine, dead):
            conn.execute(f"create table {name} (x)")
    Store(path).close()
    assert staging_tables(path) == [mine]  # an import running now (here, this process) is left alone


def test_an_import_of_more_rows_than_the_limit_is_refused_in_one_line(store, monkeypatch, tmp_path, demo):
    from retrieval import cli
    from retrieval.workspace import Workspace
    from ui import judge

    monkeypatch.setattr(staging, "MAX_IMPORT_ROWS", 5)
    with pytest.raises(staging.TooManyRows, match=r"^big\.csv: more than 5 judgments, the most one import may hold"):
        store.put_judgments("c", rows(6), source="big.csv")  # a generator: counted as it is staged
    with pytest.raises(staging.TooManyRows):
        store.put_judgments("c", list(rows(6)))  # a list: refused before a row is written
    assert count(store.path) == 0 and staging_tables(store.path) == []
    assert store.put_judgments("c", rows(5)) == JudgmentsStored(5, 0, 0)  # the limit itself is allowed

    q, docs = list(demo.queries)[0], list(demo.docs)[:6]
    upload = tmp_path / "big.csv"
    upload.write_text("query_id,doc_id,grade\n" + "".join(f"{q},{d},1\n" for d in docs))
    ws = Workspace(demo, store)
    with pytest.raises(Exception) as refused:
        judge.import_judgments(ws, store, str(upload), "ann")
    assert html.unescape(str(refused.value)).strip("'") == ("big.csv: more than 5 judgments, the most one import "
                                                            "may hold; split the file")
    assert store.judgments(demo.corpus_hash) == []
    demo_folder = ROOT / "data" / "demo"
    err = tmp_path / "err.txt"
    with err.open("w") as f:
        monkeypatch.setattr(sys, "stderr", f)
        assert cli.main(["judges", str(demo_folder), "--store", str(store.path), "--import", str(upload)]) == 2
    said = err.read_text().strip().splitlines()
    assert said == [f"error: {upload}: more than 5 judgments, the most one import may hold; split the file"]
    assert store.judgments(demo.corpus_hash) == []


def test_the_count_and_the_copy_agree_when_another_writer_commits_between_them(store, monkeypatch):
    """The counts are read on a snapshot before the write lock is taken; a grade committed by
    another writer in between makes the copy start again under the lock, so the counts stay those of
    the store the import was written into."""
    opened = staging.connect
    injected = []

    def connect(path):
        conn = opened(path)

        def on_statement(sql: str) -> None:
            if sql.startswith("insert or replace into judgments") and not injected:
                injected.append(sql)
                other = sqlite3.connect(path, isolation_level=None)
                other.execute("insert into judgments (corpus, query_id, doc_id, judge, grade, query_text, time) "
                              "values ('c', 'q1', 'd1', 'ann', 1, 'text', 0)")
                other.close()

        conn.set_trace_callback(on_statement)
        return conn

    monkeypatch.setattr(staging, "connect", connect)
    monkeypatch.setattr(staging, "DIRECT_UP_TO", 0)
    got = store.put_judgments("c", [("q1", "text", "d1", 1, "ann"), ("q2", "text", "d2", 2, "ann")])
    assert injected and got == JudgmentsStored(new=1, changed=0, unchanged=1)  # q1/d1 was there, with grade 1
    assert {(r["query_id"], r["grade"]) for r in store.judgments("c")} == {("q1", 1), ("q2", 2)}


def test_yielding_gives_back_the_collector_and_switch_interval_once_the_last_import_ends():
    before = sys.getswitchinterval()
    assert gc.isenabled()
    with staging.yielding():
        assert not gc.isenabled() and sys.getswitchinterval() == pytest.approx(staging.SWITCH_S)
        with staging.yielding():  # a second import at the same time
            pass
        assert not gc.isenabled()  # the first still runs
    assert gc.isenabled() and sys.getswitchinterval() == pytest.approx(before)
    gc.disable()
    try:
        with staging.yielding():
            pass
        assert not gc.isenabled()  # it was off before: left off
    finally:
        gc.enable()


def test_in_background_runs_the_work_in_a_thread_of_its_own_at_the_lowest_priority():
    caller = threading.get_native_id()
    before = os.getpriority(os.PRIO_PROCESS, caller)

    def work():
        return threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, threading.get_native_id()), gc.isenabled()

    thread, priority, collecting = staging.in_background(work)
    assert thread != caller and priority == staging.BACKGROUND_NICE and not collecting
    assert os.getpriority(os.PRIO_PROCESS, caller) == before and gc.isenabled()  # the caller's thread as it was

    def refused():
        raise ValueError("one line")

    with pytest.raises(ValueError, match="^one line$"):  # raised again in the caller's thread
        staging.in_background(refused)
