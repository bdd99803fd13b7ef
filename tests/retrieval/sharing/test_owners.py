"""Shared objects with makers (``retrieval.sharing.owners``): snapshots are never overwritten by another, the
baseline mark is a deliberate act kept with who set it and when and every move logged, lookalike
names are refused, and on a shared deployment (``--shared`` / ``SPACE_ID``) a session's query sets
and snapshots are its own until published; what one maker stores is bounded. Two sessions are
driven through the views' handlers (real store, BM25, the demo), through the command line, and
once through ``gradio_client`` against a real app started with ``shared=True``."""
from __future__ import annotations

import functools
import html
import json
import re
import shutil
import sqlite3
import time

import gradio as gr
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.data import query_sets
from retrieval.data.readers import load_dataset
from retrieval.sharing.owners import OPERATOR, Viewer, app_owner, cli_owner, describe
from retrieval.store import NameTaken, Store
from retrieval.tracking import snapshots
from retrieval.workspace import Workspace
from tests.conftest import DEMO, store_copy
from tests.helpers import app_client
from tests.retrieval.test_cli import cli
from ui import data, runs
from ui.registry import Registry

A, B = "session-of-ana", "session-of-bo"  # two browser sessions' hashes


def shown(status: str) -> str:
    return html.unescape(status)


def refusal(act) -> str:
    """The one line a view's refusal (``gr.Error``) shows, as the browser shows it."""
    with pytest.raises(gr.Error) as err:
        act()
    said = shown(err.value.message)
    assert "\n" not in said and not re.search(r"app:[0-9a-f]{16}", said)  # one line, never another session's id
    return said


@pytest.fixture(scope="module")
def demo():
    return load_dataset(DEMO)


@pytest.fixture(scope="module")
def warmed(tmp_path_factory, demo, tiny_encoder, demo_sparse_store):
    """A store holding the demo's vectors (the tiny encoder's, SPLADE's) and runs, and no snapshot,
    query set or judgment: each test starts from a copy, so none encodes the corpus again."""
    from ui.common import shown_systems

    path = store_copy(demo_sparse_store, tmp_path_factory.mktemp("owners-warm") / "owners.sqlite3")
    s = Store(path)
    ws = Workspace(demo, s, model=tiny_encoder)
    for system in shown_systems(ws):
        ws.run(system, "test")
    s.close()
    return path


@pytest.fixture
def store(tmp_path, warmed):
    shutil.copyfile(warmed, tmp_path / "owners.sqlite3")
    s = Store(tmp_path / "owners.sqlite3")
    yield s
    s.close()


@pytest.fixture
def ws(store, demo, tiny_encoder):
    return Workspace(demo, store, model=tiny_encoder)  # snapshots of the runs on show: the tiny encoder's dense


def viewers(shared: bool) -> tuple[Viewer, Viewer]:
    return Viewer(app_owner(A), shared), Viewer(app_owner(B), shared)


def take(ws: Workspace, name: str, note: str = "", viewer: Viewer = OPERATOR, replace: bool = False, k1=None):
    """A BM25 snapshot of the demo's test split kept as ``viewer``'s (another BM25 with ``k1``)."""
    source = ws if k1 is None else Workspace(ws.dataset, ws.store, k1=k1)
    return snapshots.save(ws.store, snapshots.take(source, "test", ["bm25"], name, note), viewer, replace)


def lists(store: Store, corpus: str, name: str) -> dict:
    """A stored snapshot's runs, as document lists."""
    snap = snapshots.load(store, corpus, name)
    return {s: {q: [d for d, _ in hits] for q, hits in run.items()} for s, run in snap.runs.items()}


# ---- snapshots are never overwritten ----------------------------------------------------------
@pytest.mark.slow
def test_another_session_cannot_overwrite_a_snapshot_by_reusing_its_name(ws, store):
    """Off a shared deployment every snapshot is published: one namespace, a name in use is refused."""
    ana, bo = viewers(False)
    corpus = ws.dataset.corpus_hash
    take(ws, "release", "ana's", ana)
    before = lists(store, corpus, "release")
    for replace in (False, True):  # a plain save, and one asking to replace: both refused, in one line
        with pytest.raises(ValueError, match=r"'release'.*(new|another) name, e\.g\. 'release-2'") as err:
            take(ws, "release", "bo's", bo, replace, k1=5.0)
        assert "\n" not in str(err.value)
    kept = snapshots.load(store, corpus, "release")
    assert (kept.note, kept.owner, lists(store, corpus, "release")) == ("ana's", ana.owner, before)


@pytest.mark.slow
def test_on_a_shared_deployment_two_sessions_keep_private_snapshots_of_one_name(ws, store):
    """A private snapshot's name lives in its maker's namespace: bo takes 'release' (and a case variant,
    a lookalike) beside ana's private 'release', neither overwrites nor sees the other's, and nothing
    bo is told names or counts ana's."""
    ana, bo = viewers(True)
    corpus = ws.dataset.corpus_hash
    take(ws, "release", "ana's", ana)
    before = lists(store, corpus, "release")
    take(ws, "release", "bo's", bo, k1=5.0)
    with pytest.raises(ValueError, match=r"exists already .*e\.g\. 'release-2', or replace it \(you made it\)"):
        take(ws, "release", "bo's again", bo)  # bo's own namespace: its own 'release' is held against it
    with pytest.raises(ValueError, match="'Release' looks like the existing 'release'"):
        take(ws, "Release", "bo's again", bo)
    take(ws, "release", "bo's, replaced", bo, replace=True, k1=5.0)  # its own, not ana's
    for me, note in ((ana, "ana's"), (bo, "bo's, replaced")):
        (mine,) = snapshots.listed(store, corpus, me)
        assert (mine.name, mine.note, mine.owner) == ("release", note, me.owner)
        assert snapshots.load(store, corpus, "release", me).note == note
    assert lists(store, corpus, "release") == before  # the operator's load: the oldest, ana's, untouched
    assert sorted(s.owner for s in snapshots.listed(store, corpus)) == sorted([ana.owner, bo.owner])


def test_the_maker_replaces_its_own_snapshot_only_when_it_asks(ws, store):
    ana, _ = viewers(False)
    corpus = ws.dataset.corpus_hash
    take(ws, "v1", "first", ana)
    with pytest.raises(ValueError, match="exists already .*or replace it \\(you made it\\)"):
        take(ws, "v1", "again", ana, k1=5.0)
    assert snapshots.load(store, corpus, "v1").note == "first"
    take(ws, "v1", "again", ana, replace=True, k1=5.0)
    again = snapshots.load(store, corpus, "v1")
    assert (again.note, again.owner, again.systems["bm25"]["bm25"]["k1"]) == ("again", ana.owner, 5.0)
    assert store.snapshot_names(corpus) == ["v1"]


def test_the_baseline_is_never_replaced_not_even_by_its_maker(ws, store):
    ana, _ = viewers(False)
    corpus = ws.dataset.corpus_hash
    take(ws, "base", "kept", ana)
    snapshots.mark_baseline(store, corpus, "base", ana)
    with pytest.raises(ValueError, match="'base' is the baseline and is never replaced: take a new one, e.g. 'base-2'"):
        take(ws, "base", "changed", ana, replace=True, k1=5.0)
    assert snapshots.baseline(store, corpus).note == "kept"


def test_two_writers_of_one_name_cannot_both_succeed(store):
    """The store checks the name in the write's own transaction, by its look-alike key in its
    namespace: the second insert is refused, an exact, a case and a confusable variant alike."""
    meta = {"created": time.time()}
    store.put_snapshot("c", "n", meta, {"bm25": {}}, owner="app:1")
    for name in ("n", "N", "ｎ"):
        with pytest.raises(NameTaken):
            store.put_snapshot("c", name, meta, {"bm25": {"q": [["d", 1.0]]}}, owner="app:2")
    with pytest.raises(NameTaken):  # nor replace another's
        store.put_snapshot("c", "n", meta, {}, owner="app:2", replace=True)
    assert store.snapshots("c")[0]["runs"] == {"bm25": {}} and store.snapshots("c")[0]["owner"] == "app:1"
    store.put_snapshot("c", "m", meta, {}, owner="app:1", published=False)
    store.put_snapshot("c", "M", meta, {}, owner="app:2", published=False)  # another maker's namespace
    with pytest.raises(NameTaken, match="'N' looks like the published 'n'"):  # private, like a published name
        store.put_snapshot("c", "N", meta, {}, owner="app:3", published=False)
    key = store.db.execute("select name_key from snapshots where name = 'm'").fetchone()[0]
    with pytest.raises(sqlite3.IntegrityError), store.db.conn:  # the index itself, whatever writes the row
        store.db.execute("insert into snapshots (corpus, name, name_key, owner, published) values "
                         "('c', 'x', ?, 'app:1', 0)", [key])
    assert sorted(store.snapshot_names("c")) == ["M", "m", "n"]


def at_once(*acts) -> list[BaseException | None]:
    """Each of ``acts`` called in a thread of its own, all released at one moment; what each raised
    (None: nothing), so that no thread's error is lost."""
    import threading

    gate = threading.Barrier(len(acts))
    raised: list[BaseException | None] = [None] * len(acts)

    def run(i: int, act) -> None:
        gate.wait()
        try:
            act()
        except BaseException as err:  # returned to the test, which says what it expects
            raised[i] = err

    threads = [threading.Thread(target=run, args=(i, act)) for i, act in enumerate(acts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return raised


def race_stores(tmp_path) -> list[Store]:
    """Two stores, each with a connection of its own (as two processes have), on one file."""
    path = tmp_path / "race.sqlite3"
    Store(path).close()
    return [Store(path), Store(path)]


@pytest.mark.parametrize("published", [True, False], ids=["published", "private"])
def test_two_stores_writing_race1_and_RACE1_at_one_moment_keep_exactly_one(tmp_path, published):
    """Two connections of their own on one file insert ``race1`` and ``RACE1`` at the same moment,
    twenty times: exactly one of each pair is kept, the other refused in one line."""
    stores = race_stores(tmp_path)
    try:
        for n in range(20):
            raised = at_once(*(functools.partial(store.put_snapshot, "c", name, {"created": time.time()}, {},
                                                 owner="app:1", published=published)
                               for store, name in zip(stores, (f"race{n}", f"RACE{n}"))))
            kept = [r["name"] for r in stores[0].snapshot_index("c") if r["name"].lower() == f"race{n}"]
            refused = [err for err in raised if err is not None]
            assert len(kept) == 1 and len(refused) == 1, (kept, raised)
            assert isinstance(refused[0], NameTaken) and "exists already" in str(refused[0])
    finally:
        for s in stores:
            s.close()


def test_a_private_name_taken_while_the_same_name_is_published_is_refused_or_older(tmp_path):
    """A private write and a publication of names alike, at one moment, twenty times: the private one
    is kept only when it was written first (its row older than the published one), never after the
    published name existed — the check runs inside the write's ``BEGIN IMMEDIATE`` transaction."""
    stores = race_stores(tmp_path)
    try:
        for n in range(20):
            name = f"race{n}"
            raised = at_once(functools.partial(stores[0].put_snapshot, "c", name.upper(), {"created": time.time()},
                                               {}, owner="app:1", published=False),
                             functools.partial(stores[1].put_snapshot, "c", name, {"created": time.time()}, {},
                                               owner="app:2"))
            assert raised[1] is None and (raised[0] is None or isinstance(raised[0], NameTaken)), raised
            rows = {r["published"]: r["id"] for r in stores[0].snapshot_index("c") if r["name"].lower() == name}
            assert 1 in rows and (0 not in rows or rows[0] < rows[1]), rows
    finally:
        for s in stores:
            s.close()


def test_the_status_never_says_kept_when_nothing_was(ws, store):
    ana, bo = viewers(False)
    assert "kept" in shown(runs.take_snapshot(store, ws, "v1", "", viewer=ana))
    with pytest.raises(gr.Error) as err:
        runs.take_snapshot(store, ws, "v1", "", viewer=bo)
    assert "kept:" not in str(err.value) and "exists already" in shown(str(err.value))
    assert "replaced" in shown(runs.take_snapshot(store, ws, "v1", "new note", viewer=ana, replace=True))
    assert "kept" in shown(runs.take_snapshot(store, ws, "v2", "", viewer=ana, replace=True))  # nothing to replace


# ---- lookalike names ------------------------------------------------------------------------
LOOKALIKES = {
    "cyrillic a": "bаseline",  # U+0430
    "greek omicron": "bοost",  # U+03BF for "boost"
    "fullwidth": "ｂａｓｅｌｉｎｅ",
    "case": "BASELINE",
    "decomposed accent": "re\u0301sume\u0301",  # NFD of résumé
    "rn for m": "rnodel",
    "trailing space": "baseline ",
}
EXISTING = {"cyrillic a": "baseline", "greek omicron": "boost", "fullwidth": "baseline", "case": "baseline",
            "decomposed accent": "résumé", "rn for m": "model", "trailing space": "baseline"}


@pytest.mark.parametrize("kind", sorted(LOOKALIKES))
def test_a_name_that_looks_like_an_existing_snapshot_is_refused(ws, store, kind):
    ana, bo = viewers(False)
    take(ws, EXISTING[kind], "", ana)
    with pytest.raises(ValueError, match="looks like|exists already") as err:
        take(ws, LOOKALIKES[kind], "", bo)
    assert repr(EXISTING[kind]) in str(err.value) and "\n" not in str(err.value)  # both names shown
    assert store.snapshot_names(ws.dataset.corpus_hash) == [EXISTING[kind]]


def test_a_lookalike_of_another_sessions_private_snapshot_is_never_held_against_a_name(ws, store):
    """Another session's private names neither refuse a name nor shape a suggestion: bo's refusals and
    suggestions are what they would be were ana's private snapshots not there."""
    ana, bo = viewers(True)
    corpus = ws.dataset.corpus_hash
    for name in ("secret-plan", "secret-plan-2", "v1-2"):
        take(ws, name, "", ana)
    take(ws, "ѕecret-plan", "", bo)  # U+0455 CYRILLIC SMALL LETTER DZE: bo's own name
    take(ws, "v1", "", bo)
    with pytest.raises(ValueError) as err:
        take(ws, "v1", "", bo)
    assert "e.g. 'v1-2'" in str(err.value)  # ana's private 'v1-2' is not bo's to avoid
    assert [s.name for s in snapshots.listed(store, corpus, bo)] == ["ѕecret-plan", "v1"]
    assert not any("another session" in str(e) for e in [err.value])


def test_publishing_meets_the_published_namespace_inside_its_transaction(ws, store):
    """ana's private 'v1' and bo's private 'V1' both stand; bo publishes first; ana's publication is
    refused naming only the published 'V1' (everyone sees it), hers stays private and still hers by
    name; a new private name like a published one is refused; the baseline is marked on the published
    one, whichever private one its name also names."""
    ana, bo = viewers(True)
    corpus = ws.dataset.corpus_hash
    take(ws, "v1", "ana's", ana)
    take(ws, "V1", "bo's", bo, k1=5.0)
    snapshots.publish(store, corpus, "V1", bo)
    with pytest.raises(ValueError, match=r"^the snapshot name 'v1' looks like the published 'V1': yours stays private"):
        snapshots.publish(store, corpus, "v1", ana)
    mine = snapshots.load(store, corpus, "v1", ana)
    assert (mine.note, mine.published) == ("ana's", False)
    cy = Viewer(app_owner("session-of-cy"), True)
    with pytest.raises(ValueError, match="'ｖ1' looks like the existing 'V1'"):
        take(ws, "ｖ1", "", cy)  # fullwidth: a new private name like a published one (not like ana's private one)
    assert [(s.name, s.published) for s in snapshots.listed(store, corpus, ana)] == [("v1", False), ("V1", True)]
    assert snapshots.mark_baseline(store, corpus, "V1", ana).moved_to == "V1"
    assert not snapshots.load(store, corpus, "v1", ana).baseline and snapshots.baseline(store, corpus).note == "bo's"


def test_a_name_published_after_mine_leaves_mine_meant_by_it(ws, store):
    """bo publishes 'rc' while ana keeps a private 'rc' (published after hers, so both stand): ana's
    name means her own, and her list tells the two apart; bo's means the published one."""
    ana, bo = viewers(True)
    corpus = ws.dataset.corpus_hash
    take(ws, "rc", "ana's", ana)
    take(ws, "rc", "bo's", bo, k1=5.0)
    snapshots.publish(store, corpus, "rc", bo)
    assert snapshots.load(store, corpus, "rc", ana).note == "ana's"
    assert snapshots.load(store, corpus, "rc", bo).note == "bo's"
    rows, *_ = runs.snapshot_view(store, ws, viewer=ana)
    assert sorted((r[1], r[6], r[7]) for r in rows) == [("rc", "another session of the app", "yes"),
                                                       ("rc", "this session", "no (only this session sees it)")]
    assert "published already" in refusal(lambda: runs.publish_snapshot(store, ws, "rc", bo))


# ---- the baseline mark --------------------------------------------------------------------------
def test_the_baseline_is_kept_with_who_set_it_and_when_and_every_move_is_logged(ws, store):
    ana, bo = viewers(False)
    corpus = ws.dataset.corpus_hash
    take(ws, "v1", "", ana)
    take(ws, "v2", "", bo, k1=5.0)
    assert snapshots.baseline_line(store, corpus, ana) == "no baseline yet"
    first = snapshots.mark_baseline(store, corpus, "v1", ana)
    assert (first.moved_from, first.moved_to, first.who) == (None, "v1", ana.owner)
    assert snapshots.mark_baseline(store, corpus, "v1", bo) is None  # already: nothing moves, nothing logged
    moved = snapshots.mark_baseline(store, corpus, "v2", bo)
    assert (moved.moved_from, moved.moved_to, moved.who) == ("v1", "v2", bo.owner) and moved.at >= first.at
    assert [(m.moved_from, m.moved_to) for m in snapshots.baseline_moves(store, corpus)] == [(None, "v1"), ("v1", "v2")]
    assert snapshots.baseline_line(store, corpus, ana).startswith("baseline: v2, set by another session of the app on ")
    assert snapshots.baseline_line(store, corpus, bo).startswith("baseline: v2, set by this session on ")
    base = snapshots.baseline(store, corpus)
    assert (base.name, base.baseline_by) == ("v2", bo.owner) and base.baseline_at == moved.at
    assert not snapshots.load(store, corpus, "v1").baseline_by  # the mark, and its maker, left v1


def test_moving_the_baseline_to_a_snapshot_that_does_not_exist_is_refused(ws, store):
    ana, bo = viewers(False)
    corpus = ws.dataset.corpus_hash
    take(ws, "baseline", "", ana)
    snapshots.mark_baseline(store, corpus, "baseline", ana)
    for name in ("nope", "bаseline", "baseline "):  # absent, a lookalike, not the exact name
        with pytest.raises(KeyError, match="no snapshot"):
            snapshots.mark_baseline(store, corpus, name, bo)
    with pytest.raises(KeyError):
        store.mark_baseline(corpus, "nope", bo.owner)
    assert snapshots.baseline(store, corpus).name == "baseline" and len(snapshots.baseline_moves(store, corpus)) == 1
    with pytest.raises(gr.Error, match="no snapshot"):
        runs.mark_baseline(store, ws, "nope", bo)


def test_the_runs_view_says_who_set_the_baseline_and_when(ws, store):
    ana, bo = viewers(False)
    runs.take_snapshot(store, ws, "v1", "", baseline=True, viewer=ana)
    runs.take_snapshot(store, ws, "v2", "", viewer=ana)
    status = shown(runs.mark_baseline(store, ws, "v2", bo))
    assert "v2</code> is the baseline, moved from <code>v1</code> (set by this session on " in status
    rows, *_, line = runs.snapshot_view(store, ws, viewer=ana)
    assert shown(line).startswith("baseline: v2, set by another session of the app on ")
    assert [r[1] for r in rows] == ["v1", "v2"] and rows[0][6] == "this session" and rows[1][0] == "★"


# ---- a shared deployment: private until published -----------------------------------------------
def test_on_a_shared_deployment_a_snapshot_is_its_sessions_until_published(ws, store):
    ana, bo = viewers(True)
    corpus = ws.dataset.corpus_hash
    status = shown(runs.take_snapshot(store, ws, "ana-1", "mine", viewer=ana))
    assert "Only this session sees it until you publish it" in status
    assert [s.name for s in snapshots.listed(store, corpus, bo)] == []
    assert snapshots.history(store, ws, "test", viewer=bo) == []
    rows, *_ = runs.snapshot_view(store, ws, viewer=bo)
    assert rows == []
    for act in (lambda: runs.snapshot_diff(store, ws, "ana-1", "ana-1", "bm25", viewer=bo),
                lambda: runs.mark_baseline(store, ws, "ana-1", bo),
                lambda: runs.publish_snapshot(store, ws, "ana-1", bo)):
        assert "no snapshot 'ana-1' of this corpus (there are: none yet)" in refusal(act)
    # not even its maker marks it: the baseline is everyone's
    assert "not published" in refusal(lambda: runs.mark_baseline(store, ws, "ana-1", ana))
    assert "Published" in shown(runs.publish_snapshot(store, ws, "ana-1", ana))
    assert [s.name for s in snapshots.listed(store, corpus, bo)] == ["ana-1"]
    # published: still ana's to replace
    assert "only its maker can replace" in refusal(lambda: runs.take_snapshot(store, ws, "ana-1", "bo's", viewer=bo,
                                                                               replace=True))
    assert "published already" in refusal(lambda: runs.publish_snapshot(store, ws, "ana-1", ana))
    assert "is the baseline" in shown(runs.mark_baseline(store, ws, "ana-1", bo))


def test_on_a_shared_deployment_a_new_snapshot_cannot_be_the_baseline_at_once(ws, store):
    ana, _ = viewers(True)
    with pytest.raises(gr.Error, match="only a published snapshot can be the baseline"):
        runs.take_snapshot(store, ws, "fresh", "", baseline=True, viewer=ana)
    assert store.snapshot_names(ws.dataset.corpus_hash) == []  # refused before anything was kept


def test_publishing_off_a_shared_deployment_is_refused(ws, store):
    ana, _ = viewers(False)
    take(ws, "v1", "", ana)
    assert "everyone's on this deployment already" in refusal(lambda: runs.publish_snapshot(store, ws, "v1", ana))


# ---- bounds ------------------------------------------------------------------------------------
def test_a_note_over_the_limit_is_refused_before_any_run_is_computed(ws, store, monkeypatch):
    ana, _ = viewers(False)
    computed = []
    monkeypatch.setattr(Workspace, "run", lambda self, *a, **k: computed.append(a) or {})
    started = time.monotonic()
    with pytest.raises(gr.Error, match=f"at most {snapshots.NOTE_CHARS:,} characters, not 5,000,000"):
        runs.take_snapshot(store, ws, "big", "x" * 5_000_000, viewer=ana)
    assert time.monotonic() - started < 1 and computed == [] and store.snapshot_names(ws.dataset.corpus_hash) == []


def test_a_note_at_the_limit_is_kept_and_one_over_it_is_not(ws, store):
    take(ws, "at", "x" * snapshots.NOTE_CHARS)
    with pytest.raises(ValueError, match="note has at most 2,000 characters, not 2,001"):
        snapshots.take(ws, "test", ["bm25"], "over", "x" * (snapshots.NOTE_CHARS + 1))
    assert store.snapshot_names(ws.dataset.corpus_hash) == ["at"]


def test_snapshots_per_maker_and_per_corpus_are_bounded(ws, store, monkeypatch):
    ana, bo = viewers(False)
    monkeypatch.setattr(snapshots, "MAX_SNAPSHOTS", 2)
    monkeypatch.setattr(snapshots, "MAX_CORPUS_SNAPSHOTS", 3)
    take(ws, "a1", "", ana)
    take(ws, "a2", "", ana)
    with pytest.raises(ValueError, match="2 snapshots of this corpus are yours, the most one maker may keep"):
        take(ws, "a3", "", ana)
    take(ws, "a1", "", ana, replace=True)  # replacing one of its own is still allowed
    take(ws, "b1", "", bo)
    with pytest.raises(ValueError, match="this corpus keeps 3 snapshots, the most it may"):
        take(ws, "b2", "", bo)
    assert store.snapshot_names(ws.dataset.corpus_hash) == ["a2", "a1", "b1"]


# ---- query sets --------------------------------------------------------------------------------
@pytest.fixture
def app(tmp_path, tiny_model_dir, demo_sparse_store):
    """Two registries over one store (a shared deployment and a local one) on the demo (its SPLADE
    vectors stored already)."""
    store = Store(store_copy(demo_sparse_store, tmp_path / "app.sqlite3"))

    def make(shared: bool) -> tuple[Registry, str]:
        registry = Registry(store, model=str(tiny_model_dir), foreground_s=120, shared=shared)
        start = registry.open(load_dataset(DEMO), budgeted=False)
        registry.pin(start)
        for build in registry.get(start).builds.values():  # the views' systems settle before the test reads them
            build.follow(None, None, 0.05)
        return registry, start

    yield make
    store.close()


def added_ids(registry: Registry, start: str, key: str) -> set[str]:
    return set(registry.get(key).dataset.queries) - set(registry.get(start).dataset.queries)


def test_on_a_shared_deployment_a_query_set_is_invisible_to_others_until_published(app):
    registry, start = app(shared=True)
    added = data.add_queries(registry, start, None, "kettle descaling\noven grease", session=A)
    assert added.ok, added.status
    mine = added_ids(registry, start, added.key)
    assert len(mine) == 2
    assert data.restored_start(registry, start, session=B) is None  # bo's new page: nothing of ana's comes back
    rows, picker = data.query_set_rows(registry, registry.get(start), session=B)
    assert rows == [] and picker["choices"] == []
    (row,), _ = data.query_set_rows(registry, registry.get(added.key), session=A)
    assert row[4:] == ["this session", "no (only this session sees it)"]
    with pytest.raises(gr.Error, match="no query set"):  # bo names ana's set by its id: it does not exist for bo
        data.remove_query_set(registry, start, row[3], session=B)
    with pytest.raises(gr.Error, match="no query set"):
        data.publish_query_set(registry, start, row[3], session=B)
    assert "Published the query set" in shown(data.publish_query_set(registry, added.key, row[3], session=A))
    page = data.restored_start(registry, start, session=B)
    assert page is not None and page.ok and mine <= set(registry.get(page.key).dataset.queries)
    assert "the query set 'typed' was added by another session of the app: only its maker can remove it" in \
        refusal(lambda: data.remove_query_set(registry, page.key, row[3], session=B))
    assert len(query_sets.listed(registry.store, registry.get(start).dataset.corpus_hash)) == 1
    gone = data.remove_query_set(registry, added.key, row[3], session=A)  # its maker can
    assert gone.ok and not query_sets.listed(registry.store, registry.get(start).dataset.corpus_hash)


def mine(folder, depth: int):
    """A TREC run named ``mine`` of every demo query: its first ``depth`` documents (each depth a
    different run under one name)."""
    from retrieval.files.trec import write_trec

    demo = load_dataset(DEMO)
    lists = {q: [(d, 1.0 / (i + 1)) for i, d in enumerate(list(demo.docs)[:depth])] for q in demo.queries}
    return write_trec(lists, folder / f"mine-{depth}.trec", "mine")


def test_two_sessions_import_runs_under_one_name_and_each_lists_only_its_own(app, tmp_path):
    """An imported run's name lives in its maker's workspace, and its lists in the store are its
    maker's: two sessions importing different runs (and then the same run) under one name each keep
    their own, and on a shared deployment the Runs history lists only the built-in systems' runs and
    the session's own imported ones; a run key of another's is refused as unknown."""
    registry, start = app(shared=True)
    keys = {}
    for session, depth in ((A, 1), (B, 2)):
        loaded = data.import_run(registry, start, str(mine(tmp_path, depth)), session=session)
        assert loaded.ok, loaded.status
        keys[session] = loaded.key
        registry.get(loaded.key).run("mine", "test")
    registry.get(start).run("bm25", "test")
    assert keys[A] != keys[B]
    assert registry.get(keys[A]).imported["mine"].content_hash != registry.get(keys[B]).imported["mine"].content_hash
    listed = {}
    for session in (A, B):
        rows, *_ = runs.runs(registry.store, registry.get(keys[session]), registry.viewer(session))
        listed[session] = [r[4] for r in rows if "imported run" in r[1]]
        assert len(listed[session]) == 1 and len(rows) > 1  # the built-in systems' runs are everyone's
    assert listed[A] != listed[B]
    with pytest.raises(gr.Error, match="no run|not stored|unknown"):
        runs.compare(registry.store, registry.get(keys[B]), listed[A][0], listed[B][0], "ndcg@10", registry.viewer(B))
    same = data.import_run(registry, start, str(mine(tmp_path, 1)), session=B)  # ana's very run, bo's own now
    assert same.ok and same.key != keys[A] and registry.get(same.key).run_owner("mine") == app_owner(B)
    everyone = [r for r in runs.runs(registry.store, registry.get(start))[0] if "imported run" in r[1]]
    assert len(everyone) == 2  # the operator (the command line) sees every run
    local, local_start = app(shared=False)
    assert len([r for r in runs.runs(local.store, local.get(local_start), local.viewer(A))[0]
                if "imported run" in r[1]]) == 2  # off a shared deployment every run is everyone's


def test_search_offers_a_private_query_set_to_its_maker_only(app):
    """The Search tab's query-set picker lists, and picking lists the queries of, only the sets the
    session sees: a workspace two sessions share by content never shows one's private set to the other."""
    from ui import search

    registry, start = app(shared=True)
    added = data.add_queries(registry, start, None, "kettle descaling\noven grease", session=A)
    ws = registry.get(added.key)  # the same workspace for whoever opens the same content
    mine = search.query_set_options(registry, ws, registry.viewer(A))
    assert [name for name, _ in mine][1:] == ["typed (2 queries)"]
    assert search.query_set_options(registry, ws, registry.viewer(B)) == [mine[0]]
    with pytest.raises(gr.Error, match="no longer kept"):
        search.set_queries(registry, ws, mine[1][1], registry.viewer(B))
    assert len(search.set_queries(registry, ws, mine[1][1], registry.viewer(A))) == 2


def test_off_a_shared_deployment_query_sets_stay_everyones(app):
    registry, start = app(shared=False)
    added = data.add_queries(registry, start, None, "kettle descaling", session=A)
    page = data.restored_start(registry, start, session=B)
    assert page is not None and added_ids(registry, start, page.key) == added_ids(registry, start, added.key)
    (row,), _ = data.query_set_rows(registry, registry.get(page.key), session=B)
    assert row[4:] == ["another session of the app", "yes"]
    assert "nothing to publish" in refusal(lambda: data.publish_query_set(registry, page.key, row[3], session=A))
    assert data.remove_query_set(registry, page.key, row[3], session=B).ok


def test_the_same_queries_from_two_sessions_are_two_private_sets(app):
    registry, start = app(shared=True)
    for session in (A, B):
        assert data.add_queries(registry, start, None, "kettle descaling", session=session).ok
    corpus = registry.get(start).dataset.corpus_hash
    sets = query_sets.listed(registry.store, corpus)
    assert sorted(s["owner"] for s in sets) == sorted([app_owner(A), app_owner(B)])  # neither took the other's


def test_a_query_set_over_the_limit_is_refused_and_nothing_is_kept(app, tmp_path):
    registry, start = app(shared=True)
    big = tmp_path / "log.txt"
    big.write_text("\n".join(f"how to clean thing number {i}" for i in range(query_sets.MAX_QUERIES + 1)) + "\n")
    before = registry.get(start).dataset.content_hash
    refused = data.add_queries(registry, start, [str(big)], session=A)
    assert not refused.ok and refused.key == start
    assert "a query set keeps at most 10,000 queries, not 10,001" in shown(refused.status)
    assert registry.get(start).dataset.content_hash == before
    assert query_sets.listed(registry.store, registry.get(start).dataset.corpus_hash) == []


def test_query_sets_per_maker_are_bounded(store, demo, monkeypatch):
    monkeypatch.setattr(query_sets, "MAX_SETS", 2)
    ana, bo = viewers(True)
    for i in range(2):
        query_sets.keep(store, demo, demo.with_queries({f"qa{i}": f"text {i}"}), f"a{i}", ana)
    with pytest.raises(ValueError, match="2 query sets of this corpus are yours, the most one maker may keep"):
        query_sets.keep(store, demo, demo.with_queries({"qa9": "text 9"}), "a9", ana)
    assert query_sets.keep(store, demo, demo.with_queries({"qa0": "text 0"}), "again", ana)  # the same set again
    assert query_sets.keep(store, demo, demo.with_queries({"qb": "text"}), "b", bo)  # another maker's share
    assert len(query_sets.listed(store, demo.corpus_hash)) == 3


def test_a_query_set_over_the_characters_limit_is_refused(store, demo, monkeypatch):
    monkeypatch.setattr(query_sets, "MAX_CHARS", 100)
    with pytest.raises(ValueError, match="at most 100 characters of ids and text, not 206"):
        query_sets.keep(store, demo, demo.with_queries({"q-long": "x" * 200}), "long")
    assert query_sets.listed(store, demo.corpus_hash) == []


# ---- an existing store, damaged rows ------------------------------------------------------------
def test_a_store_kept_before_makers_were_recorded_opens_with_its_rows_shared(tmp_path, demo):
    path = tmp_path / "old.sqlite3"
    con = sqlite3.connect(path)
    con.execute("create table snapshots (corpus text, name text, meta text, runs blob, baseline integer, "
                "created float, primary key (corpus, name))")
    con.execute("create table query_sets (corpus text, id text, name text, queries blob, n integer, created float, "
                "primary key (corpus, id))")
    old = Store(tmp_path / "fresh.sqlite3")  # a row as the earlier code wrote it, copied over
    ws = Workspace(demo, old)
    snap = snapshots.take(ws, "test", ["bm25"], "legacy")
    old.close()
    from retrieval.store import _pack

    meta = {k: getattr(snap, k) for k in ("dataset", "dataset_name", "split", "labels", "systems", "note", "created")}
    con.execute("insert into snapshots values (?, ?, ?, ?, 1, ?)",
                [demo.corpus_hash, "legacy", json.dumps(meta), _pack(snap.runs), snap.created])
    con.execute("insert into query_sets values (?, 'x', 'old', ?, 1, 0)", [demo.corpus_hash, _pack({"q-old": "t"})])
    con.commit()
    con.close()
    store = Store(path)
    ana, _ = viewers(True)
    (legacy,) = snapshots.listed(store, demo.corpus_hash, ana)  # published: it was everyone's
    assert legacy.baseline and legacy.owner == "" and describe(legacy.owner, ana).startswith("unknown")
    assert [qs["name"] for qs in query_sets.listed(store, demo.corpus_hash, ana)] == ["old"]
    with pytest.raises(ValueError, match="only its maker can replace"):  # no maker known: nobody replaces it
        take(Workspace(demo, store), "legacy", "", ana, replace=True)
    assert snapshots.baseline_line(store, demo.corpus_hash, ana).startswith("baseline: legacy, set by unknown")
    store.close()
    Store(path).close()  # opened again: the columns are there, nothing added twice


def test_an_earlier_stores_names_alike_all_stay_and_new_ones_are_held_against_them(tmp_path, demo):
    """A store kept before names were unique by their key, with snapshots 'Release' and 'release' and two
    query sets named 'old' (all published): opened, its snapshots table is made again with a row id of
    its own (one transaction), every row stays listed as it was, and each new name like one of them
    is refused by the write itself; opened again after its keys went stale, the same."""
    from retrieval.store import _pack

    path = tmp_path / "old.sqlite3"
    con = sqlite3.connect(path)
    con.execute("create table snapshots (corpus text, name text, meta text, runs blob, baseline integer, "
                "created float, owner text not null default '', published integer not null default 1, "
                "primary key (corpus, name))")
    con.execute("create table query_sets (corpus text, id text, name text, queries blob, n integer, created float, "
                "primary key (corpus, id))")
    for i, name in enumerate(("Release", "release")):
        con.execute("insert into snapshots (corpus, name, meta, runs, baseline, created) "
                    "values ('c', ?, '{}', ?, 0, ?)", [name, _pack({}), float(i)])
    for i in range(2):
        con.execute("insert into query_sets values ('c', ?, 'old', ?, 1, ?)", [f"s{i}", _pack({f"q{i}": "t"}), i])
    con.commit()
    con.close()
    for _ in range(2):
        store = Store(path)
        assert store.snapshot_names("c") == ["Release", "release"]
        assert [qs["name"] for qs in store.query_sets("c")] == ["old", "old"]
        for name in ("RELEASE", "release", "ｒelease"):
            with pytest.raises(NameTaken):
                store.put_snapshot("c", name, {"created": 9.0}, {}, owner="cli:x")
        with pytest.raises(NameTaken):
            store.put_query_set("c", "s9", "OLD", {"q9": "t"}, owner="cli:x")
        assert [r[1] for r in store.db.execute("pragma table_info(snapshots)")][:2] == ["id", "corpus"]
        assert store.db.execute("select count(*) from sqlite_master where name = 'snapshots_owned'").fetchone() == (0,)
        with store.db.conn:  # a key an earlier rule (or a hand) left: made again at the next open
            store.db.execute("update snapshots set name_key = 'stale' || id")
        store.close()


def test_a_tampered_maker_column_is_a_damaged_snapshot(ws, store):
    take(ws, "v1")
    with store.db.conn:
        store.db.execute("update snapshots set baseline_at = 'soon'")
    with pytest.raises(snapshots.DamagedSnapshot, match="'v1' in the store is damaged: its maker"):
        snapshots.load(store, ws.dataset.corpus_hash, "v1")


def test_owner_ids_never_hold_the_session_token():
    assert app_owner(A).startswith("app:") and A not in app_owner(A) and app_owner(A) != app_owner(B)
    assert app_owner("") == "app" and cli_owner().startswith("cli")
    assert describe(app_owner(A), Viewer(app_owner(B))) == "another session of the app"


# ---- the command line ------------------------------------------------------------------------
@pytest.mark.slow
def test_the_command_line_refuses_a_name_in_use_replaces_its_own_and_logs_the_baseline(tmp_path, capsys):
    """``python -m retrieval snapshot`` in-process (``main``'s exit code, stdout and stderr; one real
    process at the end, for the exit code a shell sees)."""
    from types import SimpleNamespace

    from retrieval.cli import main

    folder = tmp_path / "demo"
    shutil.copytree(DEMO, folder)
    store = tmp_path / "cli.sqlite3"
    args = ("--systems", "bm25", "--store", str(store))

    def snapshot(*argv):
        code = main(["snapshot", str(folder), *argv])
        out = capsys.readouterr()
        return SimpleNamespace(returncode=code, stdout=out.out, stderr=out.err)

    first = snapshot("--name", "r1", "--note", "one", "--baseline", *args)
    assert first.returncode == 0, first.stderr
    again = snapshot("--name", "r1", *args)
    assert again.returncode == 2 and "error: a snapshot 'r1' exists already" in again.stderr
    assert "e.g. 'r1-2'" in again.stderr and "Traceback" not in again.stderr
    lookalike = snapshot("--name", "R1", *args)
    assert lookalike.returncode == 2 and "looks like the existing 'r1'" in lookalike.stderr
    base = snapshot("--name", "r1", "--replace", *args)
    assert base.returncode == 2 and "'r1' is the baseline and is never replaced" in base.stderr
    assert snapshot("--name", "r2", *args).returncode == 0
    assert snapshot("--name", "r2", "--replace", "--note", "two", *args).returncode == 0
    nope = snapshot("--mark-baseline", "nope", "--store", str(store))
    assert nope.returncode == 2 and "no snapshot 'nope'" in nope.stderr
    moved = snapshot("--mark-baseline", "r2", "--log", "--store", str(store))
    assert moved.returncode == 0, moved.stderr
    assert "the baseline moved to 'r2' from 'r1'" in moved.stderr
    assert "baseline: r2, set by the command line (" in moved.stdout and "(taken by the command line (" in moved.stdout
    log = [line for line in moved.stdout.splitlines() if " → " in line]
    assert [line.split("  ")[1] for line in log] == ["(none) → r1", "r1 → r2"]
    long = snapshot("--name", "r3", "--note", "x" * 2001, *args)
    assert long.returncode == 2 and "note has at most 2,000 characters" in long.stderr
    real = cli("snapshot", folder, "--name", "r1", *args, tmp_path=tmp_path)  # a shell sees 2, one line, no traceback
    assert real.returncode == 2 and "exists already" in real.stderr and "Traceback" not in real.stderr


# ---- a real app, two clients ------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.server
def test_two_clients_of_a_shared_app(tiny_model_dir, tmp_path, demo_sparse_store):
    """Two gradio_client sessions of an app started with ``shared=True``: bo keeps a private snapshot
    of the same name as ana's private one beside it (neither sees nor overwrites the other's, nothing
    bo is told names ana's), and both import different runs under one name, each listing only its
    own; once ana publishes, bo's own snapshot still has its name, bo's publication is refused naming
    only the published one, and the baseline is marked on the published one."""
    from gradio_client import handle_file
    from gradio_client.exceptions import AppError

    import app as rankscope_app

    assert rankscope_app.is_shared() is False and rankscope_app.is_shared(True)
    # the demo's SPLADE vectors stored already: no learned sparse build runs beside the two clients
    store = store_copy(demo_sparse_store, tmp_path / "s.sqlite3")
    demo_app, registry = rankscope_app.create(DEMO, model=str(tiny_model_dir), store_path=str(store),
                                              shared=True)
    demo_app.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=None, quiet=True,
                            **rankscope_app.launch_kwargs(registry.store))
    try:
        ana, bo = (app_client(demo_app.local_url) for _ in range(2))
        assert "/publish_snapshot" in ana.view_api(print_info=False, return_format="dict")["named_endpoints"]
        assert "Only this session sees it" in shown(ana.predict("v1", "ana's", False, api_name="/take_snapshot"))
        table = bo.predict("ndcg@10", api_name="/snapshots")[0]
        assert not table["data"] or all("v1" not in row for row in table["data"])
        assert "Only this session sees it" in shown(bo.predict("v1", "bo's", False, api_name="/take_snapshot"))
        for client, note in ((ana, "ana's"), (bo, "bo's")):  # each sees its own v1, and only its own
            rows = client.predict("ndcg@10", api_name="/snapshots")[0]["data"]
            assert [(r[1], r[5], r[6]) for r in rows] == [("v1", note, "this session")]
        said = shown(str(pytest.raises(AppError, bo.predict, "v1", "bo's again", False,
                                       api_name="/take_snapshot").value))
        assert "exists already" in said and "you made it" in said and "another session" not in said
        assert "Published" in shown(ana.predict("v1", api_name="/publish_snapshot"))
        rows = bo.predict("ndcg@10", api_name="/snapshots")[0]["data"]
        assert sorted((r[1], r[5], r[7]) for r in rows) == [("v1", "ana's", "yes"),
                                                           ("v1", "bo's", "no (only this session sees it)")]
        refused = pytest.raises(AppError, bo.predict, "v1", api_name="/publish_snapshot").value
        assert shown(str(refused)).startswith("a published snapshot is named 'v1': yours stays private")
        assert "is the baseline" in shown(bo.predict("v1", api_name="/mark_baseline"))  # the published one
        corpus = registry.get(next(iter(registry._pinned))).dataset.corpus_hash
        base = snapshots.baseline(registry.store, corpus)
        assert (base.note, base.published) == ("ana's", True) and base.baseline_by != base.owner
        *_, line = ana.predict("ndcg@10", api_name="/snapshots")
        assert shown(line).startswith("baseline: v1, set by another session of the app on ")

        imported = []
        for client, path in ((ana, mine(tmp_path, 1)), (bo, mine(tmp_path, 2))):  # two different runs, one name
            assert "Imported run mine:" in shown(client.predict(handle_file(str(path)), "", api_name="/import_run")[0])
            client.predict("test", [], api_name="/evaluate")  # its lists computed and kept in the store
            imported.append([r for r in client.predict(api_name="/runs")[0]["data"] if "imported run" in r[1]])
        assert len(imported[0]) == len(imported[1]) == 1
        assert imported[0][0][4] != imported[1][0][4]  # each lists its own run, never the other's
        with pytest.raises(Exception, match="not in the list of choices|no run"):
            bo.predict(imported[0][0][4], imported[1][0][4], "ndcg@10", api_name="/compare_runs")
    finally:
        demo_app.close()


# ---- a property: whatever three sessions do, in any order ---------------------------------------
# names with a case, a fullwidth and a Cyrillic variant, and a "1" that looks like an "l": whatever
# "-2", "-3" a refusal suggests is never one of them, so a suggestion that quotes one would be a leak
NAMES = ["v1", "V1", "ｖ1", "vl", "v2", "release", "rеlease"]
SESSIONS = (A, B, "session-of-cy")


def fabricated(name: str, tag: int) -> snapshots.Snapshot:
    """A snapshot with a run that says which save made it (no system computed: the store's rules only)."""
    return snapshots.Snapshot(name=name, corpus="c", dataset="d", dataset_name="demo", split="test", labels="l",
                              systems={"bm25": {}}, runs={"bm25": {"q": [[f"save-{tag}", 1.0]]}})


def assert_hides(said: str, viewer: Viewer, rows, asked: str) -> None:
    """``said`` (a refusal ``viewer`` got when it asked for ``asked``) names no row it does not see
    (``rows``: dicts with ``name``, ``owner``, ``published``) and no maker's id."""
    seen = {r["name"] for r in rows if viewer.sees(r["owner"], r["published"])} | {asked}
    hidden = {r["name"] for r in rows if not viewer.sees(r["owner"], r["published"])} - seen
    assert not [h for h in hidden if repr(h) in said], (said, hidden)
    assert not re.search(r"app:[0-9a-f]{16}", said) and "another session keeps" not in said


def assert_namespaces(rows, keys_when_made: dict[int, set[str]]) -> None:
    """Published names pairwise unlike; each maker's private names pairwise unlike; no private name
    like a name that was published when it was made."""
    from retrieval.safe_names import name_key

    published = [name_key(r["name"]) for r in rows if r["published"]]
    assert len(set(published)) == len(published), rows
    for owner in {r["owner"] for r in rows}:
        private = [name_key(r["name"]) for r in rows if r["owner"] == owner and not r["published"]]
        assert len(set(private)) == len(private), rows
    for r in rows:
        if r["id"] in keys_when_made:
            assert name_key(r["name"]) not in keys_when_made[r["id"]], (r, keys_when_made[r["id"]])


ACTIONS = st.lists(st.tuples(st.sampled_from(["save", "replace", "mark", "publish"]), st.integers(0, 2),
                             st.sampled_from(NAMES)), max_size=25)


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=ACTIONS, shared=st.booleans())
def test_whatever_three_sessions_do_no_snapshot_leaks_or_changes_hands(tmp_path_factory, actions, shared):
    """Three sessions save, replace, publish and mark snapshots named alike, in any order, on a shared
    deployment or not. A model of the rules says which acts pass (a name meets only the names its
    maker sees in the namespace it writes to: the published ones and its own private ones); after
    every act the store holds exactly the model's rows, each viewer lists exactly its own and the
    published ones, no refusal names a row its asker does not see, published names are pairwise
    unlike, each maker's private names too, and no private name is like a name published when it was
    made; the baseline is one published snapshot, every move logged."""
    from retrieval.safe_names import name_key

    store = Store(tmp_path_factory.mktemp("prop") / "s.sqlite3")
    who = [Viewer(app_owner(s), shared) for s in SESSIONS]
    model: dict[int, dict] = {}  # id -> name, owner, published, the save that made its runs, baseline
    made: dict[int, set[str]] = {}  # a private row's id -> the published names' keys when it was made
    moves = 0
    try:
        for step, (act, i, name) in enumerate(actions):
            me, key = who[i], name_key(name)
            rows = list(model.values())
            rivals = [r for r in rows if r["published"] or (shared and r["owner"] == me.owner)]
            named = sorted((r for r in rivals if r["name"] == name), key=lambda r: me.rank(r["owner"], r["published"]))
            mine = [r for r in rows if me.sees(r["owner"], r["published"]) and r["name"] == name]
            mine.sort(key=lambda r: (not r["published"], me.rank(r["owner"], r["published"])) if act == "mark"
                      else me.rank(r["owner"], r["published"]))
            target = mine[0] if mine else None
            if act in ("save", "replace"):
                same = named[0] if named else None
                if same is not None:
                    ok = act == "replace" and same["owner"] == me.owner and not same["baseline"]
                else:
                    ok = not any(name_key(r["name"]) == key for r in rivals)
            elif act == "publish":
                ok = target is not None and target["owner"] == me.owner and not target["published"] and \
                    not any(r["published"] and name_key(r["name"]) == key for r in rows)
            else:
                ok = target is not None and target["published"]
            published_keys = {name_key(r["name"]) for r in rows if r["published"]}
            try:
                if act in ("save", "replace"):
                    snap = snapshots.save(store, fabricated(name, step), me, replace=act == "replace")
                    if snap.id in model:
                        model[snap.id]["tag"] = step
                    else:
                        model[snap.id] = {"id": snap.id, "name": name, "owner": me.owner, "published": not shared,
                                          "tag": step, "baseline": False}
                        if shared:
                            made[snap.id] = published_keys
                elif act == "publish":
                    model[snapshots.publish(store, "c", name, me).id]["published"] = True
                else:
                    move = snapshots.mark_baseline(store, "c", name, me)
                    if move is not None:
                        for r in model.values():
                            r["baseline"] = r["id"] == target["id"]
                        moves += 1
                assert ok, (act, i, name, "passed, the model refuses it")
            except (ValueError, KeyError) as err:
                said = str(err.args[0]) if isinstance(err, KeyError) else str(err)
                assert not ok, (act, i, name, said)
                assert "\n" not in said
                assert_hides(said, me, rows, name)
            rows = list(model.values())
            stored = {s.id: s for s in snapshots.listed(store, "c")}
            assert {k: (s.name, s.owner, s.runs["bm25"]["q"][0][0], s.published, s.baseline)
                    for k, s in stored.items()} == \
                {k: (r["name"], r["owner"], f"save-{r['tag']}", r["published"], r["baseline"])
                 for k, r in model.items()}
            assert_namespaces(rows, made)
            for v in who:
                assert {s.id for s in snapshots.listed(store, "c", v)} == \
                    {r["id"] for r in rows if v.sees(r["owner"], r["published"])}
            assert all(r["published"] for r in rows if r["baseline"]) and sum(r["baseline"] for r in rows) <= 1
            assert len(snapshots.baseline_moves(store, "c")) == moves
    finally:
        store.close()


SET_ACTIONS = st.lists(st.tuples(st.sampled_from(["keep", "publish", "drop"]), st.integers(0, 2),
                                 st.sampled_from(NAMES), st.integers(0, 7)), max_size=20)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=SET_ACTIONS)
def test_whatever_three_sessions_do_with_query_sets_none_leaks(tmp_path_factory, toy_dataset, actions):
    """Three sessions of a shared deployment keep query sets named alike (a name the maker sees in its
    namespace made free, one like it refused), publish and drop sets — their own, or one picked from
    every set kept, another's unseen among them — in any order: the model says which acts pass; no
    refusal names a set its asker does not see; published names are pairwise unlike, each maker's
    private names too, and no private name is like a name published when it was made."""
    from retrieval.safe_names import name_key
    from retrieval.sharing.owners import free_name

    store = Store(tmp_path_factory.mktemp("sets") / "s.sqlite3")
    who = [Viewer(app_owner(s), True) for s in SESSIONS]
    corpus = toy_dataset.corpus_hash
    model: dict[str, dict] = {}  # id -> name, owner, published
    made: dict[str, set[str]] = {}
    try:
        for step, (act, i, name, pick) in enumerate(actions):
            me = who[i]
            rows = list(model.values())
            every = sorted(model)
            sid = every[pick % len(every)] if every else "none"
            found = model.get(sid) if sid in model and me.sees(model[sid]["owner"], model[sid]["published"]) else None
            expect = None
            if act == "keep":
                rivals = [r["name"] for r in rows if r["published"] or r["owner"] == me.owner]
                expect = free_name(name, rivals) if name in rivals else name
                ok = not any(name_key(r) == name_key(expect) for r in rivals)
            elif act == "publish":
                ok = found is not None and found["owner"] == me.owner and not found["published"] and \
                    not any(r["published"] and name_key(r["name"]) == name_key(found["name"]) for r in rows)
            else:
                ok = found is not None and found["owner"] == me.owner
            published_keys = {name_key(r["name"]) for r in rows if r["published"]}
            try:
                if act == "keep":
                    new = query_sets.keep(store, toy_dataset, toy_dataset.with_queries({f"q-{step}": "a text"}), name,
                                          me)
                    model[new] = {"id": new, "name": expect, "owner": me.owner, "published": False}
                    made[new] = published_keys
                elif act == "publish":
                    query_sets.publish(store, corpus, sid, me)
                    model[sid]["published"] = True
                else:
                    query_sets.drop(store, toy_dataset, sid, me)
                    del model[sid]
                assert ok, (act, i, name, sid, "passed, the model refuses it")
            except (ValueError, KeyError) as err:
                said = str(err.args[0]) if isinstance(err, KeyError) else str(err)
                assert not ok, (act, i, name, sid, said)
                assert "\n" not in said
                assert_hides(said, me, rows, name)
            rows = list(model.values())
            assert {qs["id"]: (qs["name"], qs["owner"], qs["published"]) for qs in query_sets.listed(store, corpus)} \
                == {k: (r["name"], r["owner"], r["published"]) for k, r in model.items()}
            assert_namespaces(rows, made)
            for v in who:
                assert {qs["id"] for qs in query_sets.listed(store, corpus, v)} == \
                    {r["id"] for r in rows if v.sees(r["owner"], r["published"])}
    finally:
        store.close()


def test_every_view_says_who_is_looking():
    """The library's readers of shared objects default to the operator's view (every row), for the
    command line; a view that called one without its session's viewer would show one session's
    private rows to every other. So in ``ui/`` every call of a ``query_sets`` or ``snapshots``
    function that takes a ``viewer`` passes one (read from the source)."""
    import ast
    import inspect

    from retrieval.data import query_sets as qs_module
    from retrieval.tracking import snapshots as snap_module
    from tests.conftest import ROOT

    takes = {}
    for module, alias in ((qs_module, "query_sets"), (snap_module, "snapshots")):
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            params = list(inspect.signature(fn).parameters)
            if "viewer" in params:
                takes[(alias, name)] = params.index("viewer")
    assert ("query_sets", "listed") in takes and ("snapshots", "listed") in takes
    missing = []
    for path in sorted((ROOT / "ui").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and isinstance(node.func.value, ast.Name) and (node.func.value.id, node.func.attr) in takes:
                at = takes[(node.func.value.id, node.func.attr)]
                if len(node.args) <= at and not any(k.arg == "viewer" for k in node.keywords):
                    missing.append(f"{path.name}:{node.lineno} {node.func.value.id}.{node.func.attr}")
    assert not missing, f"calls without the session's viewer: {missing}"


# ---- training jobs -----------------------------------------------------------------------------
def test_on_a_shared_deployment_only_its_maker_resumes_or_cancels_a_training_job(app, tiny_model_dir, tmp_path):
    """A stopped job is resumed only by the session that queued it (to any other it does not exist), a
    session queues nothing more while its own job runs, a queued job is cancelled by its maker only; off a
    shared deployment every job is everyone's, and so is one kept before makers were recorded."""
    from dataclasses import asdict

    from training.job import JobQueue
    from training.trainer import TrainConfig
    from ui import train

    registry, start = app(shared=True)
    ws = registry.get(start)
    jobs = JobQueue(registry.store)
    cfg = TrainConfig(loss="triplet", negatives="random", epochs=1, batch_size=2, max_steps_per_epoch=1,
                      holdout=0.0, device="cpu")

    def stopped(job_id: str, owner: str | None) -> str:
        folder = tmp_path / job_id
        (folder / "checkpoints").mkdir(parents=True)
        registry.store.put_job({"id": job_id, "status": "cancelled", "kind": "train",
                                "dataset": ws.dataset.content_hash, "dataset_name": ws.dataset.name,
                                "model_path": str(folder), "progress": {},
                                "config": {**asdict(cfg), "base_model": str(tiny_model_dir)}, "losses": [],
                                "error": "", "result": {}, **({"owner": owner} if owner is not None else {})})
        return job_id

    anas = stopped("20260101-120000-a1b2c3", app_owner(A))
    assert [j["id"] for j in jobs.resumable(ws.dataset, registry.viewer(A))] == [anas]
    assert jobs.resumable(ws.dataset, registry.viewer(B)) == []
    with pytest.raises(gr.Error, match="no cancelled, failed or interrupted training of yours on this data set"):
        train.resume(registry, jobs, ws, session=B)
    with pytest.raises(ValueError, match="no training job"):  # named by its id: the same as no such job
        jobs.resume(anas, ws.dataset, registry.viewer(B))
    local, _ = app(shared=False)
    assert [j["id"] for j in jobs.resumable(ws.dataset, local.viewer(B))] == [anas]  # a local app: everyone's
    values = {"loss": "triplet", "negatives": "random", "epochs": 3, "batch_size": 2, "device": "cpu",
              "holdout": 0.0}
    assert train.resume(registry, jobs, ws, session=A) == anas
    with pytest.raises(gr.Error, match="of yours is still queued or running"):  # anas, resumed
        train.start(registry, jobs, ws, values, 0.8, session=A)
    assert jobs.wait(anas, timeout=300)["status"] == "done"
    assert registry.store.get_job(anas)["owner"] == app_owner(A)  # resumed, still ana's

    older = stopped("20250101-120000-d4e5f6", None)  # kept before makers were recorded: everyone's
    assert [j["id"] for j in jobs.resumable(ws.dataset, registry.viewer(B))] == [older]

    first = train.start(registry, jobs, ws, values, 0.8, session="cy-session")
    second = train.start(registry, jobs, ws, values, 0.8, session=A)  # queued behind the first
    assert train.cancel(registry, jobs, second, session=B) == "No running job to cancel."
    assert registry.store.get_job(second)["status"] in ("queued", "running")
    assert train.cancel(registry, jobs, second, session=A).startswith("Cancelling")
    assert train.cancel(registry, jobs, first, session="cy-session").startswith("Cancelling")
    assert jobs.wait(second, timeout=300)["status"] == "cancelled"
    jobs.wait(first, timeout=300)
