"""Judges with makers (``retrieval.judging.judge_owners``): on a shared deployment (``--shared`` / ``SPACE_ID``)
a new judge is the browser session's private one, in its own space (another session's judge of that name
is another judge, neither told of the other); only its maker grades under a published name; and a
judge's grades count only in its maker's views (Judge, Evaluate, Runs, Failures, snapshots' check, the
labels applied on open) until it is published. Off a shared deployment nothing changes. Two sessions are
driven through the views' handlers (real store, BM25 and a tiny encoder, the demo), and once through
``gradio_client`` against a real app started with ``shared=True``."""
from __future__ import annotations

import csv
import json
import sqlite3
import threading
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.data.readers import load_dataset
from retrieval.evaluation.failure_gallery import failure_gallery
from retrieval.evaluation.metric_tables import metrics_table
from retrieval.judging import judge_owners, seen
from retrieval.judging.judgments import check_judge, store_judge
from retrieval.safe_names import name_key
from retrieval.sharing.owners import Viewer, app_owner
from retrieval.store import Store
from retrieval.tracking import snapshots
from retrieval.workspace import Workspace
from tests.conftest import DEMO, store_copy
from tests.helpers import app_client
from tests.retrieval.sharing.test_owners import A, B, refusal, shown
from ui import data, evaluate, judge, runs
from ui.registry import Registry


def open_demo(registry: Registry, sessions: tuple[str, ...]) -> list[str]:
    """The demo opened by each of ``sessions`` (one workspace: the same content), its background builds
    over (what each view shows does not change mid-test): each session's key."""
    keys = [data.open_dataset(registry, load_dataset(DEMO), session=s).key for s in sessions]
    for key, session in zip(keys, sessions):
        registry.hold(session, key)
        for build in registry.get(key).builds.values():
            build.follow(None, None, 0.05)
    return keys


@pytest.fixture(scope="module")
def warmed(tmp_path_factory, tiny_model_dir, demo_sparse_store) -> Path:
    """A store that holds the demo's vectors (SPLADE's and the tiny encoder's) and no judgment, judge or
    query set: the demo was opened on it once. Each test's store is a copy, so none encodes the corpus again."""
    path = store_copy(demo_sparse_store, tmp_path_factory.mktemp("judge-owners") / "warm.sqlite3")
    store = Store(path)
    open_demo(Registry(store, model=str(tiny_model_dir), foreground_s=120), (A,))
    store.close()
    return path


@pytest.fixture
def app(tmp_path, tiny_model_dir, warmed):
    """A registry over a fresh store (shared or not; the demo's vectors in it already), the demo opened by
    both sessions: (registry, ana's key, bo's key), one workspace (the same content)."""
    stores = []

    def make(shared: bool = True):
        store = Store(store_copy(warmed, tmp_path / f"app-{len(stores)}.sqlite3"))
        stores.append(store)
        registry = Registry(store, model=str(tiny_model_dir), foreground_s=120, shared=shared)
        return registry, *open_demo(registry, (A, B))

    yield make
    for store in stores:
        store.close()


def labelled_pairs(ws: Workspace) -> list[tuple[str, str, int]]:
    """The demo's labelled test pairs (query, document, grade), in order."""
    qrels = (ws.dataset if isinstance(ws, Workspace) else ws).qrels["test"]
    return [(q, d, g) for q, docs in sorted(qrels.items()) for d, g in sorted(docs.items())]


def grade_all(registry: Registry, key: str, session: str, name: str, pairs) -> None:
    """``name`` grades every pair as the labels say, in ``session``'s Judge tab."""
    ws = registry.get(key)
    for q, d, g in pairs:
        judge.grade_pair(ws, registry.store, name, q, d, g, k=10, viewer=registry.viewer(session))


def judges_in_store(store: Store, corpus: str) -> dict[str, int]:
    return {j: len(store.judgments(corpus, j)) for j in store.judges(corpus)}


def upload(tmp_path, rows, name="grades.csv"):
    path = tmp_path / name
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["query_id", "doc_id", "grade", "judge"])
        w.writerows(rows)
    return str(path)


# ---- a private judge's name is in its maker's space -------------------------------------------
def keys_in_store(store: Store, corpus: str) -> dict[tuple[str, str], int]:
    """(judge name, maker) -> how many grades the store keeps under that judge."""
    makers = store.judge_makers(corpus)
    return {(m["name"], m["owner"]): len(store.judgments(corpus, key)) for key, m in makers.items()}


def test_another_session_grading_under_a_private_judges_name_keeps_a_judge_of_its_own(app):
    """Two sessions may each keep a private judge 'ann': two judges, two sets of grades, neither told of
    the other (a refusal would say the other exists); each session's views read only its own."""
    registry, ka, kb = app()
    ws = registry.get(ka)
    (q, d, g), (q2, d2, _) = labelled_pairs(ws)[:2]
    grade_all(registry, ka, A, "ann", [(q, d, g)])
    grade_all(registry, kb, B, "ann", [(q, d, 2 - g), (q2, d2, 0)])  # bo's ann: the same pair, another grade
    corpus, store = ws.dataset.corpus_hash, registry.store
    assert keys_in_store(store, corpus) == {("ann", app_owner(A)): 1, ("ann", app_owner(B)): 2}
    ana, bo = registry.viewer(A), registry.viewer(B)
    assert [(r["query_id"], r["grade"], r["judge"]) for r in seen.judgments(store, ws.dataset, ana)] == [(q, g, "ann")]
    assert sorted((r["query_id"], r["grade"]) for r in seen.judgments(store, ws.dataset, bo)) == \
        sorted([(q, 2 - g), (q2, 0)])
    assert store.judges(corpus, ana) == store.judges(corpus, bo) == ["ann"]
    assert registry.labelled(ka, A).dataset.qrels["test"][q][d] == g  # her labels: her grade alone


def test_starting_to_judge_claims_nothing_and_a_second_sessions_queue_is_its_own(app):
    registry, ka, kb = app()
    ws = registry.get(kb)
    store, ana, bo = registry.store, registry.viewer(A), registry.viewer(B)
    hers = judge.judging_queue(ws, store, "ann", 10, "all", viewer=ana)  # a queue claims nothing
    assert store.judge_makers(ws.dataset.corpus_hash) == {}
    judge.grade_pair(ws, store, "ann", *hers.pairs[hers.next_unjudged()], 1, 10, "all", viewer=ana)
    hers = judge.judging_queue(ws, store, "ann", 10, "all", viewer=ana)  # kept in the workspace...
    theirs = judge.judging_queue(ws, store, "ann", 10, "all", viewer=bo)  # ...which bo shares
    assert hers.judged_count == 1 and theirs.judged_count == 0  # bo's ann has graded nothing; ana's queue is hers


def test_a_refused_grade_claims_no_name(app):
    registry, ka, kb = app()
    ws = registry.get(ka)
    with pytest.raises(gr.Error, match="no pair"):
        judge.grade_pair(ws, registry.store, "ann", "no-such-query", "d", 1, k=10, viewer=registry.viewer(A))
    with pytest.raises(gr.Error, match="a grade is 0, 1 or 2"):
        judge.grade_pair(ws, registry.store, "ann", *labelled_pairs(ws)[0][:2], 7, k=10, viewer=registry.viewer(A))
    assert registry.store.judge_makers(ws.dataset.corpus_hash) == {}
    grade_all(registry, kb, B, "ann", labelled_pairs(ws)[:1])
    assert [m["owner"] for m in registry.store.judge_makers(ws.dataset.corpus_hash).values()] == [app_owner(B)]


def test_a_published_judges_name_is_refused_to_another_session_all_or_nothing(app, tmp_path):
    registry, ka, kb = app()
    ws = registry.get(kb)
    (q, d, g), (q2, d2, _), (q3, d3, _) = labelled_pairs(ws)[:3]
    grade_all(registry, ka, A, "ann", [(q, d, g)])
    judge.publish_judge(registry.store, ws, "ann", registry.viewer(A))
    corpus = ws.dataset.corpus_hash
    both = upload(tmp_path, [[q2, d2, 1, "bob"], [q3, d3, 0, "ann"]])
    said = refusal(lambda: judge.import_judgments(ws, registry.store, both, "", registry.viewer(B)))
    assert said == ("the judge 'ann' is published by another session: only its maker grades under it; "
                    "choose another name")
    assert keys_in_store(registry.store, corpus) == {("ann", app_owner(A)): 1}  # neither judge's row stored
    boxed = tmp_path / "boxed.csv"  # no judge column: the Judge box's name
    boxed.write_text(f"query_id,doc_id,grade\n{q2},{d2},1\n")
    assert "published by another session" in refusal(lambda: judge.import_judgments(ws, registry.store, str(boxed),
                                                                                    "ann", registry.viewer(B)))
    assert "1 new" in judge.import_judgments(ws, registry.store, str(boxed), "bob", registry.viewer(B))
    assert "1 new" in judge.import_judgments(ws, registry.store, str(boxed), "ann", registry.viewer(A))  # its maker may


def test_an_import_over_the_row_limit_claims_no_judge(app, tmp_path, monkeypatch):
    from retrieval.judging import staged_writes as staging

    registry, ka, kb = app()
    ws = registry.get(kb)
    (q, d, _), (q2, d2, _) = labelled_pairs(ws)[:2]
    monkeypatch.setattr(staging, "MAX_IMPORT_ROWS", 1)
    two = upload(tmp_path, [[q, d, 1, "cy"], [q2, d2, 0, "cy"]])
    said = refusal(lambda: judge.import_judgments(ws, registry.store, two, "", registry.viewer(B)))
    assert "more than 1 judgments" in said
    assert registry.store.judge_makers(ws.dataset.corpus_hash) == {}  # cy is still no one's


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_searchs_metrics_table_counts_the_sessions_judges(app):
    """The Search tab's metrics (after a change of encoder, as on every refresh) are computed with the
    judgments the session counts, on the workspace both share."""
    from ui import search

    registry, ka, kb = app()
    ws = registry.get(kb)
    grade_all(registry, ka, A, "ann", labelled_pairs(ws))
    rows = {s: search.use_encoder(registry, ws, "", session=s)[3] for s in (A, B)}
    assert any("n/m" in cell for row in rows[A] for cell in row)
    assert not any("n/m" in cell for row in rows[B] for cell in row)


def test_lookalikes_meet_only_where_the_asker_sees_both(app, tmp_path):
    """A name that looks like another session's *private* judge is no conflict (refusing it would tell
    bo that ana keeps one); one that looks like a published judge, or like bo's own, is refused naming it."""
    registry, ka, kb = app()
    ws = registry.get(kb)
    grade_all(registry, ka, A, "ann", labelled_pairs(ws)[:1])
    q, d, _ = labelled_pairs(ws)[1]
    bo = registry.viewer(B)
    judge.grade_pair(ws, registry.store, "Ann", q, d, 1, k=10, viewer=bo)  # ana's ann is hers alone
    for lookalike in ("ann", "аnn", "ａｎｎ"):  # bo's own Ann: case, Cyrillic a, fullwidth
        said = refusal(lambda n=lookalike: judge.grade_pair(ws, registry.store, n, q, d, 1, k=10, viewer=bo))
        assert "looks like the existing 'Ann'" in said
    judge.publish_judge(registry.store, ws, "ann", registry.viewer(A))  # bo's Ann stays bo's, beside it
    assert registry.store.judges(ws.dataset.corpus_hash, bo) == ["Ann", "ann"]
    said = refusal(lambda: judge.import_judgments(ws, registry.store, upload(tmp_path, [[q, d, 1, "ANN"]]), "", bo))
    assert "looks like the existing" in said
    assert "published by another session" in refusal(lambda: judge.grade_pair(ws, registry.store, "ann", q, d, 1,
                                                                               k=10, viewer=bo))


@pytest.mark.parametrize("shared", [False, True], ids=["local", "shared"])
def test_a_name_that_passed_then_was_refused_is_held_against_names_stored_since(app, shared):
    """A grade refused after its judge's name passed (no such pair) does not leave the name passed
    for good: 'Ann' after 'ann' was stored is refused as a lookalike, as if it came first."""
    registry, ka, kb = app(shared)
    ws = registry.get(ka)
    with pytest.raises(gr.Error, match="no pair"):
        judge.grade_pair(ws, registry.store, "Ann", "no-such-query", "d", 1, k=10, viewer=registry.viewer(A))
    grade_all(registry, ka, A, "ann", labelled_pairs(ws)[:1])
    q, d, _ = labelled_pairs(ws)[1]
    assert "looks like" in refusal(lambda: judge.grade_pair(ws, registry.store, "Ann", q, d, 1, k=10,
                                                             viewer=registry.viewer(A)))
    assert registry.store.judges(ws.dataset.corpus_hash) == ["ann"]


KILLED_IMPORT = """
import sys, time
from retrieval.judging import staged_writes as staging
from retrieval.judging.judge_claims import Claim

def rows():
    for n in range(staging.DIRECT_UP_TO + 5):
        if n == staging.DIRECT_UP_TO + 2:
            print("staging", flush=True)
            time.sleep(60)  # killed here, mid-import
        yield (f"q{n}", "t", "d", 1, "kim")

staging.put(sys.argv[1], "c", rows(), claim=Claim("app:kim", True, ("kim",)))
"""


def test_an_import_killed_mid_way_leaves_its_judge_names_unclaimed(tmp_path):
    """kill -9 during an import's staging: no grade kept, and its judge's name not claimed either
    (the claim is made in the transaction that copies the grades in)."""
    import os
    import signal
    import subprocess
    import sys

    path = tmp_path / "killed.sqlite3"
    Store(path).close()
    child = subprocess.Popen([sys.executable, "-c", KILLED_IMPORT, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "staging"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    store = Store(path)
    assert store.judge_makers("c") == {} and store.judgments("c") == []
    kim = Viewer("app:kim", True)
    store.put_judgments("c", [("q1", "t", "d", 1, "kim")], claim=judge_owners.claim(kim, ["kim"]))  # still free
    assert [m["owner"] for m in store.judge_makers("c").values()] == ["app:kim"]
    store.close()


def test_lookalike_names_written_at_once_one_wins_in_a_space_and_both_in_two(tmp_path):
    """The look-alike rule is enforced in the write's transaction: two writers of 'race1' and 'RACE1'
    at the same moment, both published (off a shared deployment) or both one session's: one is kept,
    the other refused; two sessions' private ones: both kept."""
    store = Store(tmp_path / "race.sqlite3")

    def write(viewer, name, start, results):
        start.wait()
        try:
            store.put_judgments("c", [(f"q-{name}", "t", "d", 1, name)], claim=judge_owners.claim(viewer, [name]))
            results[name] = "kept"
        except ValueError as err:
            results[name] = str(err)

    for round_ in range(6):
        for viewers, kept in (((Viewer(app_owner(A), False), Viewer(app_owner(B), False)), 1),
                              ((Viewer(app_owner(A), True), Viewer(app_owner(A), True)), 1),
                              ((Viewer(app_owner(A), True), Viewer(app_owner(B), True)), 2)):
            tag = f"{round_}{kept}{viewers[1].shared}"
            names, results, start = (f"race{tag}", f"RACE{tag}"), {}, threading.Barrier(2)
            threads = [threading.Thread(target=write, args=(v, n, start, results)) for v, n in zip(viewers, names)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert sum(r == "kept" for r in results.values()) == kept, results
            assert all(r == "kept" or "looks like" in r for r in results.values()), results
    store.close()


def test_a_session_keeps_at_most_its_limit_of_judges_counted_in_the_write(tmp_path, monkeypatch):
    """One client cannot claim any number of judge names: past ``MAX_JUDGES_PER_MAKER`` of a corpus
    (the store's own records, not the client's) the write is refused and stores nothing; another
    session, and the same session on another corpus, are not held to it."""
    from retrieval.judging import judge_claims

    monkeypatch.setattr(judge_claims, "MAX_JUDGES_PER_MAKER", 3)
    store = Store(tmp_path / "bound.sqlite3")
    ana, bo = Viewer(app_owner(A), True), Viewer(app_owner(B), True)
    store.put_judgments("c", [("q1", "t", "d", 1, n) for n in ("j1", "j2")],
                        claim=judge_owners.claim(ana, ["j1", "j2"]))
    with pytest.raises(judge_owners.JudgeTaken, match="at most 3 judges"):
        store.put_judgments("c", [("q1", "t", "d", 1, n) for n in ("j3", "j4")],
                            claim=judge_owners.claim(ana, ["j3", "j4"]))
    assert len(store.judge_makers("c")) == 2 and len(store.judgments("c")) == 2  # nothing of the refused write
    store.put_judgments("c", [("q2", "t", "d", 1, "j1")], claim=judge_owners.claim(ana, ["j1"]))  # her own: fine
    store.put_judgments("c", [("q1", "t", "d", 1, n) for n in ("j3", "j4", "j5")],
                        claim=judge_owners.claim(bo, ["j3", "j4", "j5"]))
    store.put_judgments("c2", [("q1", "t", "d", 1, n) for n in ("j3", "j4", "j5")],
                        claim=judge_owners.claim(ana, ["j3", "j4", "j5"]))
    store.close()


# ---- a session's views count its own judges and the published ones -----------------------------
@pytest.mark.slow
def test_bs_evaluate_does_not_change_when_a_grades_until_a_publishes(app):
    """A judges the labelled pairs of every test query: the labels are then judged in the app, so
    the verdicts are gated on coverage and the metrics deeper than the judged pool are not
    measurable — in ana's Evaluate only, until she publishes the judge; then in bo's too."""
    registry, ka, kb = app()
    ws = registry.get(kb)
    assert ka == kb  # one workspace, shared by content: what differs travels with the call
    before = evaluate.evaluate(ws, "test", [], registry.viewer(B))
    grade_all(registry, ka, A, "ann", labelled_pairs(ws))
    hers = evaluate.evaluate(ws, "test", [], registry.viewer(A))
    assert any("n/m (pool depth" in cell for row in hers[1] for cell in row)
    assert evaluate.evaluate(ws, "test", [], registry.viewer(B)) == before  # after hers: nothing cached from it
    assert evaluate.summary(ws, "test", [], registry.viewer(B)) != evaluate.summary(ws, "test", [], registry.viewer(A))
    assert "Published the judge" in shown(judge.publish_judge(registry.store, ws, "ann", registry.viewer(A)))
    assert evaluate.evaluate(ws, "test", [], registry.viewer(B)) == hers


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_the_judge_tabs_views_leave_out_anothers_unpublished_grades(app, tmp_path):
    registry, ka, kb = app()
    ws = registry.get(kb)
    pairs = labelled_pairs(ws)[:6]
    grade_all(registry, ka, A, "ann", pairs)
    grade_all(registry, kb, B, "bo", [(q, d, 2 - g) for q, d, g in pairs[:3]])  # bo disagrees on three
    store, ana, bo = registry.store, registry.viewer(A), registry.viewer(B)
    for v in (ana, bo):  # each sees one judge, its own
        assert "1 judge so far" in judge.agreement_note(ws, store, v)[0] and judge.disagreement_rows(ws, store, v) == []
    judge.publish_judge(store, ws, "bo", bo)  # bo's grades now count for ana too; ann's still not for bo
    assert "Krippendorff" in judge.agreement_note(ws, store, ana)[0]
    assert {row[3] for row in judge.disagreement_rows(ws, store, ana)} == {"ann: 2, bo: 0"}
    assert "1 judge so far" in judge.agreement_note(ws, store, bo)[0] and judge.disagreement_rows(ws, store, bo) == []
    exported = judge.export_qrels(ws, store, "csv", viewer=bo)
    with open(exported, newline="") as f:
        assert {r["judge"] for r in csv.DictReader(f)} == {"bo"}
    assert seen.judged_query_ids(store, ws.dataset, bo) == sorted({q for q, _, _ in pairs[:3]})
    assert seen.judged_query_ids(store, ws.dataset, ana) == sorted({q for q, _, _ in pairs})
    settled_b = judge.settled_note(ws, store, 10, "all", viewer=bo)
    settled_a = judge.settled_note(ws, store, 10, "all", viewer=ana)
    assert settled_a != settled_b
    assert "ann" not in judge.agreement_note(ws, store, bo)[1]["choices"].__repr__()  # the merge rules offered


def test_bs_labels_on_open_and_applied_come_only_from_published_judges(app):
    registry, ka, kb = app()
    ws = registry.get(kb)
    pairs = [(q, d, 2) for q, d, _ in labelled_pairs(ws)[:1]]
    q = pairs[0][0]
    unlabelled = next(d for d in ws.dataset.docs if d not in ws.dataset.qrels["test"][q])
    grade_all(registry, ka, A, "ann", [(q, unlabelled, 2)])  # a relevant document the data did not label
    assert unlabelled not in registry.labelled(kb, B).dataset.qrels["test"][q]  # bo's views: nothing of ann's
    assert "0 judgments" in data.apply_judgments(registry, kb, session=B).status
    assert registry.labelled(ka, A).dataset.qrels["test"][q][unlabelled] == 2  # ana's: her labels at once
    assert unlabelled not in registry.get(kb).dataset.qrels["test"][q]  # the shared workspace is left as it was
    judge.publish_judge(registry.store, ws, "ann", registry.viewer(A))
    assert registry.labelled(kb, B).dataset.qrels["test"][q][unlabelled] == 2  # published: bo's views count it
    assert registry.labelled(kb, B).dataset.content_hash == registry.labelled(ka, A).dataset.content_hash


@pytest.mark.slow
def test_failures_runs_and_the_snapshot_check_count_only_the_judges_a_session_sees(app):
    registry, ka, kb = app()
    ws = registry.get(kb)
    grade_all(registry, ka, A, "ann", labelled_pairs(ws))
    ana, bo = registry.viewer(A), registry.viewer(B)
    pooled = {v: failure_gallery(ws, "test", viewer=v, sparse=False).pooled for v in (ana, bo)}
    assert pooled[bo] == [] and len(pooled[ana]) == len(ws.dataset.qrels["test"])
    table = {v: metrics_table(ws, "test", ("bm25", "dense"), viewer=v) for v in (ana, bo)}
    assert table[bo][0]["pool_depth"] is None and table[ana][0]["pool_depth"] is not None
    snap = snapshots.take(ws, "test", ["bm25"], "v1")
    assert not snapshots.check(ws, snap, ["bm25"], viewer=bo).gated
    assert snapshots.check(ws, snap, ["bm25"], viewer=ana).gated
    assert snapshots.check(ws, snap, ["bm25"]).gated  # the command line: every judge's
    run = ws.run("bm25", "test")
    cmp = snapshots.diff(snap, snap, "bm25", ws.dataset.qrels["test"])[0]
    said = {v: shown(runs.gated_conclusion(registry.store, ws, "test", ("a", "b"), (run, run), cmp, v))
            for v in (ana, bo)}
    assert "judged@10" not in said[bo] and "no verdict, not enough of a's results judged" in said[ana]


def test_a_grade_belongs_to_the_query_it_was_given_for_never_to_another_sessions_query_of_that_id(app, tmp_path):
    """bo adds a private query 'extra-1' ("bo's private question") and grades it under a judge he
    publishes; ana's 'extra-1' is another query (another text): bo's grade is never a label of hers,
    and neither her views nor her export of judgments carry bo's query text."""
    registry, ka, kb = app()
    files = {}
    for who_, text in ((A, "ana asks about her own topic"), (B, "bo's private question")):
        files[who_] = tmp_path / f"{who_}.jsonl"
        files[who_].write_text(json.dumps({"_id": "extra-1", "text": text}) + "\n")
    ka = data.add_queries(registry, ka, [str(files[A])], session=A).key
    kb = data.add_queries(registry, kb, [str(files[B])], session=B).key
    ws_a, ws_b = registry.get(ka), registry.get(kb)
    assert ws_a.dataset.queries["extra-1"] != ws_b.dataset.queries["extra-1"]
    store, ana, bo = registry.store, registry.viewer(A), registry.viewer(B)
    doc = next(iter(ws_b.dataset.docs))
    judge.grade_pair(ws_b, store, "bo", "extra-1", doc, 2, k=10, viewer=bo)
    judge.publish_judge(store, ws_b, "bo", bo)
    grade_all(registry, ka, A, "ann", labelled_pairs(ws_a)[:1])
    assert [r["query_id"] for r in seen.judgments(store, ws_b.dataset, bo)] == ["extra-1"]  # his, on his query
    assert "extra-1" not in {r["query_id"] for r in seen.judgments(store, ws_a.dataset, ana)}
    assert "extra-1" not in registry.labelled(ka, A).dataset.qrels.get("judged", {})
    for fmt in ("csv", "trec"):
        exported = Path(judge.export_qrels(ws_a, store, fmt, viewer=ana)).read_text()
        assert "bo's private question" not in exported and "extra-1" not in exported


def test_a_published_judge_is_still_only_its_makers_to_grade(app):
    registry, ka, kb = app()
    ws = registry.get(kb)
    grade_all(registry, ka, A, "ann", labelled_pairs(ws)[:1])
    judge.publish_judge(registry.store, ws, "ann", registry.viewer(A))
    q, d, _ = labelled_pairs(ws)[1]
    assert "published by another session" in refusal(lambda: judge.grade_pair(ws, registry.store, "ann", q, d, 1,
                                                                               k=10, viewer=registry.viewer(B)))
    grade_all(registry, ka, A, "ann", [(q, d, 1)])  # its maker goes on: counted at once for everyone
    assert len(seen.judgments(registry.store, ws.dataset, registry.viewer(B))) == 2


def test_publishing_a_judge_is_refused_in_one_line_changing_nothing(app):
    registry, ka, kb = app()
    ws = registry.get(kb)
    store, ana, bo = registry.store, registry.viewer(A), registry.viewer(B)
    grade_all(registry, ka, A, "ann", labelled_pairs(ws)[:1])
    assert "no judge 'ann' of this session" in refusal(lambda: judge.publish_judge(store, ws, "ann", bo))
    assert "no judge 'zed'" in refusal(lambda: judge.publish_judge(store, ws, "zed", ana))
    assert "type the judge's name" in refusal(lambda: judge.publish_judge(store, ws, " ", ana))
    assert [m["published"] for m in store.judge_makers(ws.dataset.corpus_hash).values()] == [False]
    grade_all(registry, kb, B, "ann", labelled_pairs(ws)[:1])  # bo's own ann, beside hers
    judge.publish_judge(store, ws, "ann", ana)
    assert "published already" in refusal(lambda: judge.publish_judge(store, ws, "ann", ana))
    said = refusal(lambda: judge.publish_judge(store, ws, "ann", bo))  # a published one of that name is there
    assert "a published judge 'ann' is there already" in said
    assert [m["published"] for m in store.judge_makers(ws.dataset.corpus_hash).values() if m["owner"] == bo.owner] == \
        [False]


# ---- off a shared deployment, and the command line: as before ------------------------------------
@pytest.mark.slow
def test_off_a_shared_deployment_every_session_grades_under_any_name_and_sees_every_grade(app, tmp_path):
    registry, ka, kb = app(shared=False)
    ws = registry.get(kb)
    before = evaluate.evaluate(ws, "test", [], registry.viewer(B))
    grade_all(registry, ka, A, "ann", labelled_pairs(ws))
    grade_all(registry, kb, B, "ann", labelled_pairs(ws)[:1])  # bo grades as ann too: allowed, as before
    q, d, _ = labelled_pairs(ws)[1]
    assert "changed a grade" in judge.import_judgments(ws, registry.store, upload(tmp_path, [[q, d, 0, "ann"]]), "",
                                                       registry.viewer(B))
    theirs = evaluate.evaluate(ws, "test", [], registry.viewer(B))
    assert theirs != before and theirs == evaluate.evaluate(ws, "test", [], registry.viewer(A))
    maker = registry.store.judge_makers(ws.dataset.corpus_hash)["ann"]  # kept under its name: published as made
    assert maker == {**maker, "owner": app_owner(A), "published": True, "space": ""}
    assert "nothing to publish" in refusal(lambda: judge.publish_judge(registry.store, ws, "ann", registry.viewer(A)))


def test_the_command_line_reads_every_judge_and_its_judges_are_no_sessions(tmp_path):
    store = Store(tmp_path / "cli.sqlite3")
    ana, bo = Viewer(app_owner(A), True), Viewer(app_owner(B), True)
    store.put_judgments("c", [("q1", "t", "d1", 2, "ann")], claim=judge_owners.claim(ana, ["ann"]))
    store.put_judgments("c", [("q1", "t", "d1", 0, "ann")], claim=judge_owners.claim(bo, ["ann"]))
    store.put_judgments("c", [("q1", "t", "d2", 1, "cli-judge")])  # as `judges --import` writes: no maker
    assert len(store.judgments("c")) == 3  # no viewer: every judge
    assert {r["judge"] for r in store.judgments("c", viewer=bo) if "\x1f" not in r["judge"]} == {"cli-judge"}
    with pytest.raises(judge_owners.JudgeTaken, match="'cli-judge' is published by no one known"):
        store.put_judgments("c", [("q1", "t", "d3", 1, "cli-judge")], claim=judge_owners.claim(bo, ["cli-judge"]))
    with pytest.raises(judge_owners.JudgeTaken, match="'cli-judge'"):
        store_judge(store, "c", "cli-judge", bo)  # starting to judge under it, too
    ds = SimpleNamespace(corpus_hash="c", queries={"q1": "t"})  # what a reader of judgments asks of a data set
    names = sorted(r["judge"] for r in seen.judgments(store, ds))  # two makers' private anns, told apart
    assert names == sorted([f"ann ({app_owner(A)})", f"ann ({app_owner(B)})", "cli-judge"])
    store.close()


def test_refusals_never_show_a_makers_id():
    for owner in (app_owner(A), "app", "cli:alice", "cli", ""):
        assert "alice" not in judge_owners.whose(owner) and A not in judge_owners.whose(owner)
        assert app_owner(A) not in judge_owners.whose(owner)


# ---- an existing store ------------------------------------------------------------------------
def test_a_store_kept_before_judges_had_makers_opens_with_every_judge_published(tmp_path):
    path = tmp_path / "old.sqlite3"
    con = sqlite3.connect(path)
    con.execute("create table judgments (corpus text, query_id text, doc_id text, judge text, grade integer, "
                "query_text text, time float, primary key (corpus, query_id, doc_id, judge))")
    con.executemany("insert into judgments values (?, ?, ?, ?, ?, 't', ?)",
                    [("c", "q1", "d1", "ann", 2, 5.0), ("c", "q1", "d2", "ann", 0, 3.0),
                     ("c", "q1", "d1", "bo", 1, 4.0), ("other", "q1", "d1", "ann", 1, 1.0)])
    con.commit()
    con.close()
    store = Store(path)
    makers = store.judge_makers("c")
    assert makers == {"ann": {"name": "ann", "owner": "", "published": True, "space": "", "created": 3.0},
                      "bo": {"name": "bo", "owner": "", "published": True, "space": "", "created": 4.0}}
    assert list(store.judge_makers("other")) == ["ann"]
    stranger = Viewer(app_owner(B), True)
    assert len(store.judgments("c", viewer=stranger)) == 3  # everyone's, as they were
    with pytest.raises(judge_owners.JudgeTaken, match="'ann' is published by no one known"):
        store.resolve_judges("c", judge_owners.claim(stranger, ["ann"]))
    assert store.resolve_judges("c", judge_owners.claim(Viewer(app_owner(B), False), ["ann"])) == {"ann": "ann"}
    store.close()
    Store(path).close()  # opened again: nothing added twice


# ---- a property: whatever two sessions do -----------------------------------------------------
NAMES = ["ann", "Ann", "аnn", "bo", "b0", "cy"]
ACTIONS = st.lists(st.tuples(st.sampled_from(["grade", "import", "publish"]), st.integers(0, 1),
                             st.lists(st.sampled_from(NAMES), min_size=1, max_size=2)), max_size=20)


class JudgesModel:
    """What the store should hold: judges by (space: '' published or the maker's owner id, name) -> maker,
    and the queries graded under each."""

    def __init__(self, shared: bool):
        self.shared = shared
        self.judges: dict[tuple[str, str], str] = {}
        self.grades: dict[tuple[str, str], set[str]] = {}

    @staticmethod
    def sees(v: Viewer, judge_id: tuple[str, str]) -> bool:
        return judge_id[0] in ("", v.owner)

    def hidden_from(self, v: Viewer) -> set[str]:
        return {n for j in self.judges if not self.sees(v, j) for n in [j[1]]} - \
            {j[1] for j in self.judges if self.sees(v, j)}

    def write(self, v: Viewer, names) -> list[tuple[str, str]] | None:
        """The judges a write of grades under ``names`` by ``v`` goes to; None: refused."""
        out = []
        for n in names:
            if (v.owner, n) in self.judges and self.shared:
                out.append((v.owner, n))
            elif ("", n) in self.judges:
                if self.shared and self.judges["", n] != v.owner:
                    return None
                out.append(("", n))
            elif any(self.sees(v, j) and j[1] != n and name_key(j[1]) == name_key(n) for j in self.judges):
                return None
            else:
                out.append((v.owner if self.shared else "", n))
        return out

    def may_publish(self, v: Viewer, n: str) -> bool:
        return self.shared and (v.owner, n) in self.judges and \
            not any(sp == "" and name_key(m) == name_key(n) for sp, m in self.judges)

    def check_spaces(self) -> None:
        """No two judges of one space look alike."""
        for space in {sp for sp, _ in self.judges}:
            keys = [name_key(n) for sp, n in self.judges if sp == space]
            assert len(keys) == len(set(keys))

    def read(self, v: Viewer) -> set[tuple[str, str]]:
        """(query, judge's name as read) of every grade ``v`` sees."""
        mine = {n for sp, n in self.judges if sp == v.owner and self.shared}
        return {(q, f"{n} (published)" if sp == "" and n in mine else n)
                for (sp, n), qs in self.grades.items() if self.sees(v, (sp, n)) for q in qs}


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=ACTIONS, shared=st.booleans())
def test_whatever_two_sessions_do_no_grade_lands_under_anothers_judge_and_each_sees_its_own(tmp_path_factory,
                                                                                            actions, shared):
    """Grading (``store_judge``, then the write that claims the name), importing (one write for the
    file's judges) and publishing, in any order, under names that look alike, against a model of judges
    by space (a private judge is its maker's, a published one everyone's): each session reads exactly
    the grades of the judges it sees, under their names; no two judges of one space look alike; and no
    refusal names a judge the asker does not see."""
    store = Store(tmp_path_factory.mktemp("judges") / "s.sqlite3")
    who = (Viewer(app_owner(A), shared), Viewer(app_owner(B), shared))
    ds = SimpleNamespace(corpus_hash="c", queries={f"q{i}": "t" for i in range(len(actions) + 1)})
    model = JudgesModel(shared)
    judges, grades = model.judges, model.grades
    try:
        for step, (act, i, names) in enumerate(actions):
            me = who[i]
            others_private = model.hidden_from(me)
            said = ""
            if act == "publish":
                n = names[0]
                ok = model.may_publish(me, n)
                try:
                    judge_owners.publish(store, "c", n, me)
                    assert ok
                    judges["", n] = judges.pop((me.owner, n))
                    grades["", n] = grades.pop((me.owner, n), set())
                except (ValueError, KeyError) as err:
                    assert not ok
                    said = str(err)
            else:
                try:
                    checked: list[str] = []  # a file's judges are held against each other, as its reader does
                    for n in names:
                        checked.append(check_judge(store_judge(store, "c", n, me), checked))
                except ValueError as err:
                    said = str(err)
                    assert model.write(me, names) is None or len(set(map(name_key, names))) < len(set(names))
                else:
                    target = model.write(me, checked)
                    try:
                        store.put_judgments("c", [(f"q{step}", "t", "d", 1, n) for n in checked],
                                            claim=judge_owners.claim(me, checked))
                        assert target is not None
                        for j in target:
                            judges.setdefault(j, me.owner)
                            grades.setdefault(j, set()).add(f"q{step}")
                    except ValueError as err:
                        assert target is None
                        said = str(err)
            assert not any(f"'{n}'" in said for n in others_private - set(names))  # nothing of another's private
            model.check_spaces()
            for v in who:
                assert {(r["query_id"], r["judge"]) for r in seen.judgments(store, ds, v)} == model.read(v)
    finally:
        store.close()


# ---- a real app, two clients ------------------------------------------------------------------
def error_of(act) -> str:
    """The message a client's call is refused with, as the page shows it."""
    with pytest.raises(Exception) as err:
        act()
    return shown(str(err.value))


@pytest.mark.slow
@pytest.mark.server
def test_two_clients_of_a_shared_app(tiny_model_dir, tmp_path, demo_sparse_store):
    """ana grades under 'ann' through /judge: bo's /evaluate stays as it was until ana calls
    /publish_judge; then it changes to hers, and bo can neither grade nor import under the published name."""
    from gradio_client import handle_file

    import app as rankscope_app

    # the demo's SPLADE vectors stored already: no learned sparse build joins /evaluate's systems mid-test
    store = store_copy(demo_sparse_store, tmp_path / "s.sqlite3")
    demo_app, registry = rankscope_app.create(DEMO, model=str(tiny_model_dir), store_path=str(store),
                                              shared=True)
    demo_app.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=None, quiet=True,
                            **rankscope_app.launch_kwargs(registry.store))
    try:
        ana, bo = (app_client(demo_app.local_url) for _ in range(2))
        assert "/publish_judge" in ana.view_api(print_info=False, return_format="dict")["named_endpoints"]
        before = bo.predict("test", [], api_name="/evaluate")[1]
        pairs = labelled_pairs(load_dataset(DEMO))
        for q, d, g in pairs:
            ana.predict("ann", q, d, str(g), 10, False, api_name="/judge")
        q, d, _ = pairs[0]
        assert bo.predict("test", [], api_name="/evaluate")[1] == before  # ana's grades are hers alone
        hers = ana.predict("test", [], api_name="/evaluate")[1]
        assert hers != before
        assert "no judge 'ann' of this session" in error_of(lambda: bo.predict("ann", api_name="/publish_judge"))
        assert "Published the judge" in shown(ana.predict("ann", api_name="/publish_judge"))
        assert bo.predict("test", [], api_name="/evaluate")[1] == hers
        assert error_of(lambda: bo.predict("ann", q, d, "0", 10, False, api_name="/judge")) == \
            "the judge 'ann' is published by another session: only its maker grades under it; choose another name"
        grades = upload(tmp_path, [[q, d, 0, "ann"]])
        assert "published by another session" in error_of(lambda: bo.predict(handle_file(grades), "",
                                                                              api_name="/import_judgments"))
        corpus = load_dataset(DEMO).corpus_hash
        assert {j: len(registry.store.judgments(corpus, j)) for j in registry.store.judges(corpus)} == \
            {"ann": len(pairs)}
    finally:
        demo_app.close()


def test_a_second_judges_queue_counts_as_covered_only_the_grades_its_session_sees(app):
    """ann (session A, unpublished) grades some pooled pairs; bo's queue in session B treats none of
    them as covered or to re-grade for agreement ("adds agreement" would name pairs B may not see);
    once ann is published, they are covered for bo and served only for agreement."""
    registry, ka, kb = app()
    ws = registry.get(kb)
    store, ana, bo = registry.store, registry.viewer(A), registry.viewer(B)
    q = judge.judging_queue(ws, store, "ann", 10, "all", viewer=ana)
    hers = [q.pairs[q.next_unjudged()]]
    for _ in range(9):
        q, at = judge.grade_pair(ws, store, "ann", *hers[-1], 1, 10, "all", viewer=ana)
        hers.append(q.pairs[at])
    hers = hers[:9]
    theirs = judge.judging_queue(ws, store, "bo", 10, "all", fresh=True, viewer=bo)
    assert all(theirs.adds(pair) == "coverage" for pair in hers) and theirs.uncovered == theirs.pooled_count
    judge.publish_judge(store, ws, "ann", ana)
    theirs = judge.judging_queue(ws, store, "bo", 10, "all", fresh=True, viewer=bo)
    assert all(theirs.adds(pair) == "agreement" for pair in hers)
    assert theirs.uncovered == theirs.pooled_count - len(hers)
    served = [theirs.pairs[theirs.next_unjudged()]]
    assert served[0] not in hers  # coverage first: one in ten for agreement
    again = judge.judging_queue(ws, store, "bo", 10, "all", fresh=True, viewer=bo, regrade=True)
    assert again.pairs[again.next_unjudged()] in hers  # asked to re-grade: another judge's pairs first
