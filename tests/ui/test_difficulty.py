"""The queries predicted to fail in the app: Search's and Judge's query table by predicted difficulty, the
judging sample of the queries predicted to fail first, and the Failures view's section for queries without
labels, called as the app's events call them (the demo, real BM25, a tiny BERT, FAISS, SQLite)."""
from __future__ import annotations

import html
import re
import threading
import time
from pathlib import Path

import pytest

from retrieval.data import query_sets
from retrieval.data.dataset import Dataset
from retrieval.judging import sampling
from retrieval.qpp.predict import Combination, Predictions, QueryPrediction
from retrieval.sharing.owners import Viewer
from retrieval.store import Store
from tests.conftest import demo_app_state
from ui import data, difficulty, failures, judge, search
from ui.present import predicted as present
from ui.registry import Registry

PAYLOADS = ("<script>alert('q')</script> leaky tap", "<img src=x onerror=alert(1)> bread stale")


@pytest.fixture(scope="module")
def app_state(tmp_path_factory, tiny_model_dir, demo_sparse_store):
    yield from demo_app_state(tmp_path_factory, tiny_model_dir, demo_sparse_store, "difficulty")


def settled(registry: Registry, key: str):
    """The workspace ``key``, its background builds over (the systems predicted do not change mid-test)."""
    ws = registry.get(key)
    for build in ws.builds.values():
        build.follow(None, None, 0.05)
    return ws


@pytest.fixture
def ws(app_state):
    return settled(*app_state)


def rows_of(table: str) -> list[tuple[str, float]]:
    """(query id, difficulty) of each row of a query table, in its order."""
    return [(html.unescape(qid), float(d)) for qid, d in
            re.findall(r'<tr data-query-id="([^"]*)"[^>]*><td><code>.*?</code></td><td>.*?</td>'
                       r"<td class=rs-count>([0-9.]+)</td>", table)]


def test_the_query_table_lists_every_query_hardest_first_and_a_row_opens_its_query(app_state, ws):
    registry, _ = app_state
    found = difficulty.predictions(ws, registry.store, None, wait=True)
    assert found is not None and set(found.systems) == set(difficulty.systems_of(ws))
    shown, computing = difficulty.table(ws, registry.store, None, "hardest")
    rows = rows_of(shown)
    assert not computing and len(rows) == len(ws.dataset.queries) == 71 and "all 71 queries" in html.unescape(shown)
    assert [q for q, _ in rows] == [p.query_id for p in found.queries]  # hardest first, as predicted
    assert [d for _, d in rows] == sorted((d for _, d in rows), reverse=True)
    easiest, _ = difficulty.table(ws, registry.store, None, "easiest")
    assert [q for q, _ in rows_of(easiest)] == [q for q, _ in reversed(rows)]
    assert shown.count("<td>yes</td>") == 71  # the demo's queries are labelled: the table says so
    hardest = rows[0][0]
    text, results, _ = search.open_by_id(registry, ws, "", hardest)  # what a click on the row does (the shell)
    assert text == ws.dataset.queries[hardest] and "Labelled documents for" in results
    with pytest.raises(Exception, match="hardest or easiest"):
        difficulty.table(ws, registry.store, None, "sideways")


def test_opening_the_table_never_waits_for_the_predictions(app_state, tmp_path):
    """While the worker thread is busy the table says it is computing and gives no rows, at once."""
    registry, key = app_state
    ws = settled(registry, key).with_settings({"bm25": {"k1": 1.1}})  # another workspace: nothing kept for it
    busy = threading.Event()
    difficulty._POOL.submit(busy.wait, 60)  # the one worker holds another's computation
    try:
        shown, computing = difficulty.table(ws, registry.store, None)
        assert computing and "in the background" in shown and "71 queries" in html.unescape(shown)
        assert rows_of(shown) == []
    finally:
        busy.set()
    found = difficulty.predictions(ws, registry.store, None, wait=True)
    assert found is not None and not difficulty.table(ws, registry.store, None)[1]


def synthetic(n: int, text=lambda i: f"query {i}") -> Predictions:
    """``n`` predictions of two systems, hardest first (the shape ``retrieval.qpp.predict`` gives)."""
    queries = tuple(QueryPrediction(f"q{i:05d}", text(i), {}, {}, 0.1, {"bm25": i / n, "dense": i / n}, 1 - i / n)
                    for i in range(n))
    return Predictions(("bm25", "dense"), {s: Combination(s, "label-free", 0, 0) for s in ("bm25", "dense")},
                       queries)


def test_a_long_query_set_sends_the_hardest_200_rows_and_the_count():
    found = synthetic(10_000)
    shown = present.table_html(found, set(), "hardest", present.SHOWN)
    rows = rows_of(shown)
    assert len(rows) == present.SHOWN == 200 and "the 200 hardest of 10,000 queries" in html.unescape(shown)
    assert [q for q, _ in rows] == [f"q{i:05d}" for i in range(200)]
    easiest = rows_of(present.table_html(found, set(), "easiest"))
    assert [q for q, _ in easiest][:2] == ["q09999", "q09998"] and len(easiest) == 200


def test_the_query_table_and_the_report_show_hostile_query_text_inert():
    found = synthetic(3, lambda i: PAYLOADS[i % 2])
    section = present.PredictedFailures(found, list(found.queries), 3,
                                        {"q00000": {"bm25": [("<b>d1", "<script>alert(3)</script>")]}})
    pages = [present.table_html(found, {"q00000"}),
             present.section_html(section), present.report_html(section, "<i>data</i>", "")]
    for page in pages:
        assert "<script" not in page and "<img" not in page and "<b>" not in page and "<i>" not in page
        assert html.unescape(PAYLOADS[0]) in html.unescape(page)  # shown as its characters


def test_the_hostile_queries_of_a_real_workspace_come_out_inert_in_search_judge_and_failures(app_state):
    registry, key = app_state
    typed = "\n".join(PAYLOADS)
    loaded = data.add_queries(registry, key, None, text=typed)
    ws = settled(registry, loaded.key)
    difficulty.predictions(ws, registry.store, None, wait=True)
    shown, _ = difficulty.table(ws, registry.store, None)
    cards = failures.failures(ws, ws.dataset.default_split(), "", store=registry.store)[1]
    for page in (shown, cards):
        assert "<script" not in page and "<img" not in page
        assert all(payload in html.unescape(page) for payload in PAYLOADS)
    assert "Queries predicted to fail" in cards  # the two unlabelled queries, below the labelled gallery
    assert len(rows_of(shown)) == 73


def test_the_query_table_lists_only_the_queries_the_session_may_see(app_state, tmp_path):
    """ana's private query set is in the workspace handed to bo's view: bo's table neither lists nor
    counts it (nor ranks his queries among hers), and ana's lists it; published, it is bo's too."""
    registry, key = app_state
    base = settled(registry, key)
    store = Store(tmp_path / "shared.sqlite3")
    ana, bo = Viewer("app:ana", shared=True), Viewer("app:bo", shared=True)
    hers = base.dataset.with_queries({"ana-secret-1": "ana's private question about tax", "ana-secret-2": "kettle"})
    set_id = query_sets.keep(store, base.dataset, hers, "ana's log", ana)
    ws = settled(registry, registry.open(hers))
    difficulty.predictions(ws, store, bo, wait=True)
    bos = html.unescape(difficulty.table(ws, store, bo)[0])  # as the browser shows it
    assert "ana-secret" not in bos and "private question" not in bos and "all 71 queries" in bos
    assert {q for q, _ in rows_of(bos)} == set(base.dataset.queries)
    difficulty.predictions(ws, store, ana, wait=True)
    anas = html.unescape(difficulty.table(ws, store, ana)[0])
    assert "ana-secret-1" in anas and "all 73 queries" in anas
    section = html.unescape(failures.failures(ws, "test", "", viewer=bo, store=store)[1])
    assert "ana-secret" not in section and "private question" not in section
    query_sets.publish(store, ws.dataset.corpus_hash, set_id, ana)
    difficulty.predictions(ws, store, bo, wait=True)
    assert "ana-secret-1" in html.unescape(difficulty.table(ws, store, bo)[0])
    store.close()


def test_judging_the_queries_predicted_to_fail_opens_the_hardest_first(app_state, ws):
    registry, _ = app_state
    store = registry.store
    found = difficulty.predictions(ws, store, None, wait=True)
    assert found is not None
    q = judge.judging_queue(ws, store, "ann", 2, "predicted", 5, 0, fresh=True)
    hardest = [p.query_id for p in found.hardest(5)]
    assert q.sample.method == "predicted" and q.sample.query_ids == hardest
    opened, position = [], q.next_unjudged()
    while position is not None:
        qid, doc = q.pairs[position]
        opened.append(qid)
        q.record(qid, doc, 1)
        position = q.next_unjudged(position, wrap=False)
    assert list(dict.fromkeys(opened)) == hardest  # query by query, the hardest first
    again = judge.judging_queue(ws, store, "bea", 2, "predicted", 5, 0, fresh=True)
    assert again.sample.id == q.sample.id  # the same predictions and queries: the stored sample
    assert [s.id for s in sampling.stored(store, ws.dataset) if s.method == "predicted"] == [q.sample.id]
    progress, _, _ = judge.show(ws, again, again.next_unjudged())
    assert "the 5 of the 71 queries predicted to fail first, hardest first" in progress


def test_failures_on_a_data_set_without_labels_show_the_queries_predicted_to_fail(app_state):
    registry, key = app_state
    base = settled(registry, key)
    bare = Dataset("demo-log", base.dataset.docs, dict(base.dataset.queries), {})  # a query log: no labels
    ws = settled(registry, registry.open(bare))
    assert ws.dataset.default_split() is None
    figure, cards, picks, as_json = failures.failures(ws, None, "", store=registry.store)
    cards = html.unescape(cards)
    assert figure is None and "Queries predicted to fail" in cards and "the 20 hardest of 71 queries" in cards
    assert cards.count("rs-predicted-card") == 20 and len(picks["choices"]) == 20
    assert [r["query_id"] for r in as_json["predicted"]] == [c[1] for c in picks["choices"]]
    path = Path(failures.export(ws, None, "", store=registry.store))
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.count("rs-predicted-card") == 20 and "<script" not in page


def test_a_failed_prediction_is_said_in_the_table_and_computed_again_when_asked(tiny_encoder, toy_dataset, tmp_path):
    """The store closed under a workspace: the prediction fails in the worker thread; the table says so
    (no path, the timer stopped) instead of raising at every tick, and the next ask computes again."""
    from retrieval import Workspace

    store = Store(tmp_path / "closed.sqlite3")
    ws = Workspace(toy_dataset, store, model=tiny_encoder)
    store.close()
    shown, computing = difficulty.table(ws, None, None)
    while computing:
        time.sleep(0.05)
        shown, computing = difficulty.table(ws, None, None)
    assert "Could not predict the queries" in html.unescape(shown) and str(tmp_path) not in shown
    assert "ProgrammingError" in shown  # sqlite3's: a closed database
    assert difficulty._KEPT.get(ws, {}) == {}  # forgotten: Show computes again
