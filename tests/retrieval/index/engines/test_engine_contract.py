"""The contracts of the two seams, held against every implementation: each engine (in-process,
and Milvus Lite where it is installed) meets ``engines.base``'s and ``searchable``'s protocols (BM25, vectors,
learned sparse vectors) and answers consistently through them; each system (every built-in, an imported
run) meets ``systems.base.System`` over each engine — its parameters a stable cache key, its search
ranked and cut to k, its one-query path the same as its search, its exact scores the scores it
ranked with."""
from __future__ import annotations

import json

import numpy as np
import pytest

from retrieval import Workspace
from retrieval.data.readers.runs import ImportedRun, run_hash
from retrieval.index.engines import Capabilities, Engine, LexicalIndex, SparseVectorIndex, VectorIndex, open_engine
from retrieval.store import Store
from retrieval.systems import SYSTEMS, Probe, System
from tests.conftest import store_copy

ENGINES = ["in-process", pytest.param("milvus-lite", marks=pytest.mark.milvus)]


@pytest.fixture(scope="module")
def store_file(tmp_path_factory, demo_sparse_store):
    """The store file both engines' workspaces open, one after the other: it holds the corpus's learned
    sparse vectors already (``demo_sparse_store``), and the tiny encoder's vectors once the first engine
    has encoded them, so no engine encodes what another has (each engine still loads them itself)."""
    return store_copy(demo_sparse_store, tmp_path_factory.mktemp("contract-store") / "store.sqlite3")


@pytest.fixture(scope="module", params=ENGINES)
def ws(request, demo, tiny_encoder, tmp_path_factory, store_file):
    """The demo over one engine, with an imported run beside the built-in systems, over ``store_file``."""
    if request.param == "milvus-lite":
        pytest.importorskip("pymilvus")
        pytest.importorskip("milvus_lite")
        engine = open_engine(f"milvus:{tmp_path_factory.mktemp('contract') / 'engine.db'}")
    else:
        engine = open_engine(None)
    store = Store(store_file)
    workspace = Workspace(demo, store, model=tiny_encoder, engine=engine)
    test = demo.split_queries("test")
    lists = workspace.search("bm25", test, 20)
    run = {q: [(d, float(len(hits) - i)) for i, (d, _) in enumerate(hits)] for q, hits in lists.items()}
    workspace.add_run(ImportedRun("vendor", run, "vendor.trec", run_hash(run), dataset=demo.content_hash))
    yield workspace
    store.close()


@pytest.mark.slow
def test_the_engine_meets_its_protocol(ws):
    engine = ws.engine
    assert isinstance(engine, Engine) and isinstance(engine.capabilities, Capabilities)
    assert isinstance(engine.key, dict) and (engine.where is None) == engine.capabilities.index_variants
    assert "lucene" in engine.capabilities.bm25_methods
    assert isinstance(ws.lexical, LexicalIndex) and isinstance(ws.dense.index, VectorIndex)
    assert ws.lexical.doc_ids == ws.dataset.doc_ids == ws.dense.index.doc_ids
    assert isinstance(ws.sparse.index, SparseVectorIndex) and ws.sparse.index.doc_ids == ws.dataset.doc_ids
    assert (ws.sparse.index.nbytes > 0) == (ws.engine.where is None)  # another engine keeps the vectors itself


def test_the_lexical_index_answers_alike_through_each_call(ws):
    for text in list(ws.dataset.queries.values())[:8]:
        rows, scores = ws.lexical.top(text, 30)
        assert len(rows) == len(scores) <= 30 and np.all(np.diff(scores) <= 1e-9) and np.all(scores > 0)
        np.testing.assert_allclose(ws.lexical.scores_at(text, rows), scores, rtol=1e-5)
        hits = ws.lexical.search({"q": text}, 30)["q"]
        assert [d for d, _ in hits] == [ws.dataset.doc_ids[r] for r in rows.tolist()]


def test_the_vector_index_answers_alike_through_each_call(ws):
    queries = dict(list(ws.dataset.queries.items())[:6])
    qvecs = ws.dense.encode_queries(queries)
    scores, rows = ws.dense.index.search_vectors(qvecs, 25)
    assert scores.shape == rows.shape == (len(queries), 25)
    for i in range(len(queries)):
        assert np.all(np.diff(scores[i]) <= 1e-6)
        np.testing.assert_allclose(ws.dense.index.scores(qvecs[i], rows[i]), scores[i], atol=1e-5)


def test_the_sparse_index_answers_alike_through_each_call(ws):
    index = ws.sparse.index
    texts = list(ws.dataset.queries.values())[:6]
    for vec in ws.sparse.model.encode(texts, query=True):
        rows, scores = index.top(vec, 30)
        assert len(rows) == len(scores) == 30 and np.all(np.diff(scores) <= 0) and np.all(scores > 0)
        np.testing.assert_allclose(index.scores(vec, rows), scores, rtol=1e-5)
        everyone = index.scores(vec)
        assert everyone.shape == (len(ws.dataset.doc_ids),) and everyone.max() == pytest.approx(scores[0], rel=1e-5)
        parts = index.contributions(vec, int(rows[0]))
        assert [c for *_, c in parts] == sorted((c for *_, c in parts), reverse=True)
        assert sum(c for *_, c in parts) == pytest.approx(float(scores[0]), rel=1e-4)
    empty = (np.zeros(0, np.int32), np.zeros(0, np.float32))  # a query with no term finds nothing
    assert index.top(empty, 10)[0].size == 0 and index.contributions(empty, 0) == []
    assert not index.scores(empty).any() and index.scores(empty, np.arange(5)).tolist() == [0.0] * 5


def systems_of(ws) -> list[System]:
    return [ws.system(name) for name in ws.system_names]


def test_every_system_meets_the_protocol(ws):
    names = ws.system_names
    assert names[:len(SYSTEMS)] == SYSTEMS and names[-1] == "vendor"
    for system in systems_of(ws):
        assert isinstance(system, System) and system.key and system.label and system.short
        first, again = system.params(ws, "test"), system.params(ws, "test")
        # a stable cache key: equal twice, and nothing in it written as an object's address
        assert first == again and " at 0x" not in json.dumps(first, sort_keys=True, default=str)
        assert system.needs.run == (system.key == "vendor")


@pytest.mark.parametrize("name", [*SYSTEMS, "vendor"])
def test_each_systems_search_is_ranked_cut_and_matches_its_one_query_path(ws, name):
    system = ws.system(name)
    queries = dict(list(ws.dataset.split_queries("test").items())[:5])
    run = system.search(ws, queries, 10, "test")
    assert set(run) == set(queries)
    for qid, text in queries.items():
        hits = run[qid]
        assert len(hits) <= 10 and all(isinstance(d, str) and isinstance(s, float) for d, s in hits)
        assert all(a[1] >= b[1] - 1e-6 for a, b in zip(hits, hits[1:]))
        one = system.one(ws, Probe(ws, text, max(10, ws.depth), qid), 10, "test")
        assert [d for d, _ in one][:3] == [d for d, _ in hits][:3], name  # near-ties aside, the same list
        np.testing.assert_allclose([s for _, s in one], [s for _, s in hits], atol=1e-4)


@pytest.mark.parametrize("name", [*SYSTEMS, "vendor"])
def test_exact_scores_are_the_scores_a_system_ranks_with(ws, name):
    system = ws.system(name)
    queries = dict(list(ws.dataset.split_queries("test").items())[:4])
    run = system.search(ws, queries, 5, "test")
    rows = {q: [ws.doc_row[d] for d, _ in hits] for q, hits in run.items()}
    exact = system.exact_scores(ws, "test", rows, queries)
    assert (exact is not None) == system.capabilities.exact_scores, name  # as it declares (``declared.Capabilities``)
    if exact is None:  # fused ranks, a normalized sum, a run file: no score of a document alone
        return
    for q, hits in run.items():
        for d, s in hits:
            assert exact[q][d] == pytest.approx(s, abs=1e-4), (name, q, d)
