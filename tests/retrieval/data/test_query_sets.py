"""Queries added to a corpus are kept with it: a restart (a new store object on the same file), a
reload (a new session) or a second browser gets them back, with the judgments made on them."""
from __future__ import annotations

import pytest

from retrieval import Store, load_dataset
from retrieval.data import query_sets
from retrieval.judging.labels import JUDGED
from tests.conftest import DEMO, store_copy
from ui import data
from ui.registry import Registry

NEW = {"q-new-1": "how do I descale a coffee machine", "q-new-2": "winter tyres pressure"}


def test_a_kept_set_comes_back_after_a_restart(tmp_path):
    path = tmp_path / "s.sqlite3"
    ds = load_dataset(DEMO)
    store = Store(path)
    sid = query_sets.keep(store, ds, ds.with_queries(NEW), "log.txt")
    assert query_sets.keep(store, ds, ds, "nothing") is None  # nothing added, nothing kept
    store.close()

    again = Store(path)  # a restart
    sets = query_sets.listed(again, ds.corpus_hash)
    assert [(s["id"], s["name"], s["n"], s["queries"]) for s in sets] == [(sid, "log.txt", 2, NEW)]
    restored = query_sets.restore(again, load_dataset(DEMO))
    assert {q: restored.queries[q] for q in NEW} == NEW
    assert len(restored.queries) == len(ds.queries) + 2 and restored.qrels == ds.qrels
    assert restored.corpus_hash == ds.corpus_hash  # the same corpus: its indexes are reused
    # another corpus does not get them
    other = load_dataset(DEMO).without_queries([])
    assert query_sets.listed(again, "another-corpus") == [] and other.queries == ds.queries


def test_a_clashing_id_is_left_out_with_a_warning_and_nothing_is_overwritten(tmp_path):
    ds = load_dataset(DEMO)
    store = Store(tmp_path / "s.sqlite3")
    qid, text = next(iter(ds.queries.items()))
    store.put_query_set(ds.corpus_hash, "x", "odd", {qid: "another text", "q-ok": "fine"})
    restored = query_sets.restore(store, ds)
    assert restored.queries[qid] == text and restored.queries["q-ok"] == "fine"
    assert any("1 stored query left out" in w and repr(qid) in w for w in restored.report.warnings)


def test_dropping_a_set_takes_out_only_its_own_unlabelled_queries(tmp_path):
    ds = load_dataset(DEMO)
    store = Store(tmp_path / "s.sqlite3")
    labelled = next(iter(ds.qrels["test"]))
    a = query_sets.keep(store, ds, ds.with_queries({"q-a": "alpha", "q-both": "shared"}), "a")
    query_sets.keep(store, ds, ds.with_queries({"q-b": "beta", "q-both": "shared"}), "b")
    store.put_query_set(ds.corpus_hash, "c", "c", {labelled: ds.queries[labelled]})
    full = query_sets.restore(store, ds)
    after = query_sets.drop(store, full, a)
    assert "q-a" not in after.queries and {"q-both", "q-b", labelled} <= set(after.queries)
    assert [s["name"] for s in query_sets.listed(store, ds.corpus_hash)] == ["b", "c"]
    assert query_sets.drop(store, after, "c").queries[labelled] == ds.queries[labelled]  # labelled: stays
    with pytest.raises(KeyError, match="no query set"):
        query_sets.drop(store, after, a)


def test_the_reported_scenario_queries_and_grades_survive_a_reload(tmp_path, tiny_model_dir, demo_sparse_store):
    """20 queries added from a .txt, 16 grades, then a new page: the queries are back, the grades
    apply to them, and evaluation has labels."""
    store = Store(store_copy(demo_sparse_store, tmp_path / "s.sqlite3"))  # the demo's SPLADE vectors stored
    registry = Registry(store, model=str(tiny_model_dir), foreground_s=120)
    start = registry.open(load_dataset(DEMO), budgeted=False)
    registry.pin(start)
    for build in registry.get(start).builds.values():  # the views' systems settle before the test reads them
        build.follow(None, None, 0.05)
    log = tmp_path / "log.txt"
    lines = [f"{w} cleaning tips number {i}" for i, w in enumerate(["kettle", "oven", "sofa", "rug"] * 5)]
    log.write_text("\n".join(lines) + "\n")
    added = data.add_queries(registry, start, [str(log)], session="ana")
    assert added.ok and "Added 20 queries" in added.status and "Kept with the corpus" in added.status
    ws = registry.get(added.key)
    new = [q for q in ws.dataset.queries if q not in registry.get(start).dataset.queries]
    assert len(new) == 20
    docs = ws.dataset.doc_ids
    for i, qid in enumerate(new[:16]):
        store.put_judgment(ws.dataset.corpus_hash, qid, ws.dataset.queries[qid], docs[i], 2 if i % 2 else 0, "ana")

    page = data.restored_start(registry, start, session="ana-reloaded")  # the reload: a new page on the start key
    assert page is not None and page.ok and "20 queries added to this corpus before came back" in page.status
    back = registry.get(page.key)
    assert set(new) <= set(back.dataset.queries)
    rows, _ = data.query_set_rows(registry, back)
    assert [r[:2] for r in rows] == [["log.txt", 20]]
    judged = registry.labelled(page.key, session="ana-reloaded")  # the grades are labels: no click
    labels = {q for split in judged.dataset.qrels.values() for q in split}
    assert len([q for q in new if q in labels]) == 16
    relevant = judged.evaluate("bm25", JUDGED).per_query["ndcg@10"]  # the 8 queries graded 2 somewhere
    assert set(relevant) == {q for i, q in enumerate(new[:16]) if i % 2}

    gone = data.remove_query_set(registry, page.key, rows[0][3], session="ana-reloaded")
    assert gone.ok and "20 queries fewer" in gone.status
    assert not set(new) & set(registry.get(gone.key).dataset.queries)
    assert data.restored_start(registry, start, session="bo") is None  # nothing kept any more


def test_a_load_made_while_the_page_restores_its_start_stands(tmp_path, tiny_model_dir, demo_sparse_store):
    """A new page restores the queries kept with its start data set; if the page loads another data
    set meanwhile, the restore ends without putting the start back over that load."""
    from types import SimpleNamespace

    import gradio as gr

    import app as rankscope_app

    store = store_copy(demo_sparse_store, tmp_path / "s.sqlite3")
    demo, registry = rankscope_app.create(DEMO, model=str(tiny_model_dir), store_path=str(store))
    start = registry.open(load_dataset(DEMO), budgeted=False)  # the page's start workspace (shared by content)
    log = tmp_path / "log.txt"
    log.write_text("kettle cleaning tips\noven cleaning tips\n")
    added = data.add_queries(registry, start, [str(log)], session="ana")  # kept with the corpus
    assert added.ok, added.status
    on_page = next(f.fn for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "on_page")

    fresh = on_page(start, "", SimpleNamespace(session_hash="cy"))  # nothing else loaded: the restore shows
    assert fresh[0] != start and "came back" in fresh[1]

    registry.hold("bo", added.key)  # bo's page loaded a data set while its start was being restored
    late = on_page(start, "", SimpleNamespace(session_hash="bo"))
    assert all(out == gr.skip() for out in late)
    assert registry.holding("bo") == added.key

    # the banner's look and the views computed again after a build, started with the start's key and
    # ended after that load, change nothing either: no old summary or stopped timer over the new one
    from ui import shell
    from ui.registry import Context

    ctx = Context(registry, None, None, registry.get(start))
    assert all(out == gr.skip() for out in shell.follow(ctx, start, "", 0, "", "bo"))
    assert all(out == gr.skip() for out in shell.arrival(ctx, start, None, "bo"))
    summary = shell.arrival(ctx, added.key, None, "bo")[0]  # the data set on show: computed
    assert summary == data.dataset_summary(registry.get(added.key))
    assert shell.follow(ctx, added.key, "", 0, "", "bo")[3] == 1  # out of date: computed again
