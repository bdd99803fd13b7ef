"""The index-engine seam with a real Milvus Lite (embedded, in a temporary .db file): the Milvus
engine answers what the in-process engine answers (BM25 top-k and candidate scores, dense top-k,
the CLEAR hybrid, metrics, learned sparse top-k, scores and explanations with the real SPLADE-tiny),
resumes an interrupted load, reuses a complete one, refuses a collection holding another corpus,
and says so when a server cannot be reached. Skipped where Milvus Lite is not installed."""
from __future__ import annotations

import html

import numpy as np
import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from retrieval import Workspace
from retrieval.index.engines import Corpus, InProcess, open_engine
from retrieval.index.engines import milvus as milvus_engine
from retrieval.index.engines.milvus import EngineError, MilvusSparse
from retrieval.index.splade import SparseIndex, load_sparse_model
from retrieval.store import Store
from retrieval.systems.hybrid import CLEAR
from tests.conftest import DEMO, store_copy
from tests.retrieval.test_cli import run_cli

pytestmark = pytest.mark.milvus


@pytest.fixture(scope="module")
def lite(tmp_path_factory):
    return open_engine(f"milvus:{tmp_path_factory.mktemp('milvus') / 'engine.db'}")


@pytest.fixture(scope="module")
def pair(demo, tiny_encoder, lite):
    """The demo corpus in both engines: (in-process workspace, Milvus workspace)."""
    local = Workspace(demo, None, model=tiny_encoder)
    remote = Workspace(demo, None, model=tiny_encoder, engine=lite)
    return local, remote


def test_bm25_through_milvus_matches_the_in_process_engine(pair, demo):
    local, remote = pair
    for text in list(demo.queries.values())[:15]:
        rows_l, scores_l = local.lexical.top(text, 50)
        rows_m, scores_m = remote.lexical.top(text, 50)
        np.testing.assert_allclose(scores_m, scores_l, rtol=1e-5)
        above = scores_l > scores_l[-1] + 1e-4  # at the cut, documents tied with the 50th may swap
        assert rows_m[above].tolist() == rows_l[above].tolist(), text
        some = np.arange(0, len(demo.doc_ids), 7)  # mostly documents outside the top 50
        np.testing.assert_allclose(remote.lexical.scores_at(text, some), local.lexical.scores_at(text, some),
                                   rtol=1e-5, atol=1e-6)
    assert remote.lexical.top("the of and", 10)[0].size == 0  # stopwords only: no term to search


def test_a_weighted_query_through_milvus_matches_the_in_process_engine(pair, demo, monkeypatch):
    """Σ_t w_t · bm25(t, d) through Milvus (each term its own search, the weighted sum made exactly with
    the threshold bound) is the in-process engine's: top k, deep lists, and scores at any rows; a list
    that must be deepened (monkeypatched: the first searches ask for 3 documents) gives the same."""
    from retrieval.index.terms import WeightedQuery

    local, remote = pair
    tok, rng = local.tokenizer, np.random.default_rng(7)
    queries = {}
    for i, text in enumerate(list(demo.queries.values())[:8]):
        doc = demo.docs[demo.doc_ids[int(rng.integers(len(demo.doc_ids)))]].full_text
        terms = dict.fromkeys([*tok(text), *tok(doc)[:12], "zzzunheard"])
        queries[f"q{i}"] = WeightedQuery.of((t, float(rng.choice([0.0, 0.05, 0.5, 1.0, 2.5]))) for t in terms)
    for k in (10, 200):
        run_l, run_m = local.lexical.search(queries, k), remote.lexical.search(queries, k)
        for q in queries:
            same_up_to_near_ties(run_m[q], run_l[q])
    some = np.arange(0, len(demo.doc_ids), 5)
    for query in queries.values():
        np.testing.assert_allclose(remote.lexical.scores_at(query, some), local.lexical.scores_at(query, some),
                                   rtol=1e-5, atol=1e-6)
    searched = remote.lexical.__class__._search
    depths: list[int] = []

    def spy(self, texts, k, where=""):
        depths.extend([k] * (not where))
        return searched(self, texts, k, where)

    monkeypatch.setattr(remote.lexical.__class__, "_search", spy)
    for query in queries.values():  # a top 2 seldom beats the bound at depth 2: the lists are deepened
        query = WeightedQuery.of([(t, w + 0.5) for t, w in query.terms])
        rows_m, scores_m = remote.lexical.top(query, 2)
        rows_l, scores_l = local.lexical.top(query, 2)
        same_up_to_near_ties(list(zip(rows_m.tolist(), scores_m.tolist())),
                             list(zip(rows_l.tolist(), scores_l.tolist())))
    assert max(depths) > 2


@pytest.mark.slow
def test_dense_and_hybrid_through_milvus_match(pair):
    local, remote = pair
    split = "test"
    for system in ("dense", "hybrid"):
        run_l, run_m = local.run(system, split, 100), remote.run(system, split, 100)
        assert run_m.keys() == run_l.keys()
        for q in run_l:
            same_up_to_near_ties(run_m[q][:10], run_l[q][:10])
    assert CLEAR.lambda_for(remote, split).value == CLEAR.lambda_for(local, split).value
    assert remote.evaluate("hybrid", split).mean["ndcg@10"] == pytest.approx(
        local.evaluate("hybrid", split).mean["ndcg@10"], abs=1e-6)
    # one query, all systems in one pass (the Search view's call) agrees too
    text = local.dataset.queries[next(iter(local.dataset.qrels[split]))]
    one_l, one_m = local.search_one(text, k=10, eval_split=split), remote.search_one(text, k=10, eval_split=split)
    for system in one_l:
        same_up_to_near_ties(one_m[system], one_l[system])


def same_up_to_near_ties(got, expected, tol=1e-5):
    """The same ranked list, except that documents whose scores differ by float noise (two engines
    sum a dot product in different orders) may swap."""
    np.testing.assert_allclose([s for _, s in got], [s for _, s in expected], atol=tol)
    cut = expected[-1][1] + tol
    assert {d for d, s in got if s > cut} == {d for d, s in expected if s > cut}
    for (d, s), (e, t) in zip(got, expected):
        assert d == e or abs(s - t) < tol, (got, expected)  # a swap only between near-equal scores


@pytest.fixture(scope="module")
def sparse_store(tmp_path_factory, demo_sparse_store):
    """A store the SPLADE tests share, holding the demo's sparse vectors (encoded once a run:
    ``demo_sparse_store``)."""
    store = Store(store_copy(demo_sparse_store, tmp_path_factory.mktemp("sparse") / "store.sqlite3"))
    yield store
    store.close()


@pytest.mark.slow
def test_splade_through_milvus_matches_the_in_process_engine(demo, lite, sparse_store):
    local = Workspace(demo, sparse_store)
    remote = Workspace(demo, sparse_store, engine=lite)
    assert isinstance(remote.sparse.index, MilvusSparse) and isinstance(local.sparse.index, SparseIndex)
    assert remote.sparse.index.nbytes == 0  # the vectors live in Milvus
    kept = [c for c in lite.collections(demo.corpus_hash) if c["kind"] == "sparse"]
    assert len(kept) == 1 and kept[0]["complete"] and kept[0]["docs"] == len(demo.doc_ids)
    texts = list(demo.queries.values())[:8]
    for text, vec in zip(texts, local.sparse.model.encode(texts, query=True)):
        rows_l, scores_l = local.sparse.index.top(vec, 50)
        rows_m, scores_m = remote.sparse.index.top(vec, 50)
        ids = demo.doc_ids
        same_up_to_near_ties([(ids[r], s) for r, s in zip(rows_m.tolist(), scores_m.tolist())],
                             [(ids[r], s) for r, s in zip(rows_l.tolist(), scores_l.tolist())], tol=1e-4)
        some = np.arange(0, len(ids), 5)  # mostly documents outside the top 50, some sharing no term
        np.testing.assert_allclose(remote.sparse.index.scores(vec, some), local.sparse.index.scores(vec, some),
                                   atol=1e-4)
        for row in rows_l[:5].tolist():  # the same terms explain each score
            doc = local.corpus.texts[row]
            assert remote.sparse.explain(vec, row, doc) == local.sparse.explain(vec, row, doc), (text, row)
    split = "test"  # the system's run and metrics through each engine
    run_l, run_m = local.run("splade", split, 100), remote.run("splade", split, 100)
    assert run_m.keys() == run_l.keys()
    for q in run_l:
        same_up_to_near_ties(run_m[q][:10], run_l[q][:10], tol=1e-4)
    assert remote.evaluate("splade", split).mean["ndcg@10"] == pytest.approx(
        local.evaluate("splade", split).mean["ndcg@10"], abs=1e-6)


def test_a_reopened_sparse_collection_is_reused(demo, sparse_store, tmp_path):
    path = tmp_path / "sparse.db"
    first = open_engine(f"milvus:{path}")
    inserted = []
    insert = first.client.insert

    def counting(name, rows, *args, **kwargs):
        inserted.extend(rows)
        return insert(name, rows, *args, **kwargs)

    first.client.insert = counting
    built = Workspace(demo, sparse_store, engine=first).sparse
    assert len(inserted) == len(demo.doc_ids)  # every demo passage has a term: none left out
    again = open_engine(f"milvus:{path}")  # the same file, opened anew
    again.client.insert = counting
    before = len(inserted)
    reopened = Workspace(demo, sparse_store, engine=again).sparse
    assert len(inserted) == before  # the complete collection is searched as it is: nothing re-inserted
    vec = reopened.encode_query("how do I stop my nose running in winter")
    rows, scores = reopened.index.top(vec, 10)
    assert rows.tolist() == built.index.top(vec, 10)[0].tolist() and scores.size == 10


def test_empty_sparse_vectors_are_left_out_and_score_zero(tmp_path):
    model = load_sparse_model()
    texts = ["The cat sat on the warm mat.", "Stock markets fell after the rate decision.", "",
             "A puppy should be trained with patience."]
    vecs = model.encode(texts)
    vecs[2] = (np.zeros(0, np.int32), np.zeros(0, np.float32))  # a document with no term at all
    ids = ["a", "b", "empty", "c"]
    engine = open_engine(f"milvus:{tmp_path / 'empty.db'}")
    corpus = Corpus("e" * 64, ids, texts)
    remote = engine.sparse(corpus, model.fingerprint, vecs, model.vocab_size)
    local = SparseIndex(ids, vecs, model.vocab_size)
    assert engine.sparse(corpus, model.fingerprint, vecs, model.vocab_size).doc_ids == ids  # reopened as it is
    empty = (np.zeros(0, np.int32), np.zeros(0, np.float32))
    for query in ("cat on a mat", "why did stocks fall", "training a young dog"):
        q = model.encode([query], query=True)[0]
        rows, scores = remote.top(q, 4)
        assert 2 not in rows.tolist() and rows.tolist() == local.top(q, 4)[0].tolist()
        np.testing.assert_allclose(scores, local.top(q, 4)[1], rtol=1e-5)
        np.testing.assert_allclose(remote.scores(q), local.scores(q), rtol=1e-5)
        assert remote.scores(q, np.array([2]))[0] == 0 and remote.contributions(q, 2) == []
        assert remote.contributions(q, int(rows[0])) == local.contributions(q, int(rows[0]))
    assert remote.top(empty, 4)[0].size == 0 and not remote.scores(empty).any()  # an empty query
    assert remote.contributions(empty, 0) == [] and remote.scores(empty, np.arange(4)).tolist() == [0.0] * 4


def test_runs_of_each_engine_are_cached_apart(pair):
    local, remote = pair
    assert remote.system_params("bm25")["engine"] == "milvus"
    assert "engine" not in local.system_params("bm25")  # the in-process keys of every existing cache


@pytest.mark.slow
def test_an_interrupted_vector_load_resumes(demo, tiny_encoder, tmp_path, monkeypatch):
    engine = open_engine(f"milvus:{tmp_path / 'resume.db'}")
    monkeypatch.setattr(milvus_engine, "COMMIT_EVERY", 100)
    calls = {"n": 0}
    original = tiny_encoder.encode

    def crashing(texts, progress=None):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("killed")
        return original(texts, progress=progress)

    monkeypatch.setattr(tiny_encoder, "encode", crashing)
    first = Workspace(demo, None, model=tiny_encoder, engine=engine)
    with pytest.raises(RuntimeError, match="killed"):
        first.build_dense()
    half = [c for c in engine.collections(demo.corpus_hash) if c["kind"] == "dense"]
    assert half and not half[0]["complete"]  # marked incomplete: never searched as it is
    monkeypatch.setattr(tiny_encoder, "encode", original)
    again = Workspace(demo, None, model=tiny_encoder, engine=engine).build_dense()
    distinct = len({d.full_text for d in demo.docs.values()})
    assert again.from_store == 200 and again.encoded == distinct - 200  # two parts kept, the rest encoded
    done = [c for c in engine.collections(demo.corpus_hash) if c["kind"] == "dense"][0]
    assert done["complete"] and done["docs"] == len(demo.doc_ids)
    reference = Workspace(demo, None, model=tiny_encoder).dense
    q = tiny_encoder.encode(["cat food prices"])
    assert again.index.search_vectors(q, 10)[1].tolist() == reference.index.search_vectors(q, 10)[1].tolist()


def test_an_interrupted_bm25_load_resumes(demo, tmp_path, monkeypatch):
    engine = open_engine(f"milvus:{tmp_path / 'bm25.db'}")
    monkeypatch.setattr(milvus_engine, "INSERT_BATCH", 50)
    insert, calls = engine.client.insert, {"n": 0}

    def crashing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:
            raise ConnectionError("server went away")
        return insert(*args, **kwargs)

    monkeypatch.setattr(engine.client, "insert", crashing)
    with pytest.raises(ConnectionError):
        Workspace(demo, None, engine=engine).build_lexical()
    monkeypatch.setattr(engine.client, "insert", insert)
    seen = []
    lexical = Workspace(demo, None, engine=engine).build_lexical(lambda f, what: seen.append(what))
    assert seen[0].startswith("indexing 200/")  # three batches were kept
    rows, _ = lexical.top("cat food", 5)
    assert rows.tolist() == Workspace(demo, None).lexical.top("cat food", 5)[0].tolist()


def test_a_collection_of_another_corpus_is_refused(demo, tmp_path):
    engine = open_engine(f"milvus:{tmp_path / 'foreign.db'}")
    Workspace(demo, None, engine=engine).build_lexical()
    name = engine.collections(demo.corpus_hash)[0]["name"]
    engine.client.alter_collection_properties(name, properties={"rankscope.corpus": "another"})
    with pytest.raises(EngineError, match=f"collection {name} .* holds something else"):
        Workspace(demo, None, engine=engine).build_lexical()


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_drop_removes_the_corpus_collections(demo, tmp_path, tiny_encoder):
    path = tmp_path / "drop.db"
    engine = open_engine(f"milvus:{path}")
    ws = Workspace(demo, None, model=tiny_encoder, engine=engine)
    ws.build_dense()
    ws.lexical  # noqa: B018
    assert {c["kind"] for c in engine.collections(demo.corpus_hash)} == {"bm25", "dense"}
    assert engine.drop(demo.corpus_hash) == 2
    assert engine.collections(demo.corpus_hash) == []


def test_bad_engine_specs_say_what_is_wrong(tmp_path):
    with pytest.raises(EngineError, match="cannot reach Milvus at milvus://127.0.0.1:9"):
        open_engine("milvus://127.0.0.1:9")
    with pytest.raises(EngineError, match="ending in .db"):
        open_engine(f"milvus:{tmp_path / 'x.txt'}")
    with pytest.raises(EngineError, match="does not exist"):
        open_engine(f"milvus:{tmp_path / 'no' / 'x.db'}")
    with pytest.raises(ValueError, match="unknown engine"):
        open_engine("elastic://x")
    assert isinstance(open_engine(None), InProcess)


def test_index_variants_need_the_in_process_engine(pair):
    with pytest.raises(ValueError, match="in-process"):
        pair[1].with_index("sq8")


@pytest.mark.slow
def test_cli_evaluates_through_milvus_lite(tmp_path, tiny_model_dir):
    """``--engine milvus:PATH.db`` on the command line: the table the in-process engine gives, ``drop``
    removes both collections, an unreachable server is one error line and exit status 2 (each command
    through ``main`` in this process: what it prints, not its process, is tested here)."""
    db = tmp_path / "cli.db"
    three = ("--systems", "bm25,dense,hybrid")  # BM25 and the vectors: the two collections dropped below
    done = run_cli("evaluate", DEMO, "--model", tiny_model_dir, "--engine", f"milvus:{db}", *three,
                   tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"engine: milvus at {db}" in done.stderr
    assert "Hybrid (CLEAR λ)" in done.stdout
    local = run_cli("evaluate", DEMO, "--model", tiny_model_dir, "--no-store", *three, tmp_path=tmp_path)
    assert local.stdout.splitlines()[:5] == done.stdout.splitlines()[:5]  # the same table
    dropped = run_cli("drop", DEMO, "--engine", f"milvus:{db}", tmp_path=tmp_path)
    assert dropped.returncode == 0 and "2 collection(s) dropped" in dropped.stderr
    unreachable = run_cli("evaluate", DEMO, "--engine", "milvus://127.0.0.1:9", tmp_path=tmp_path)
    assert unreachable.returncode == 2 and "error: cannot reach Milvus at milvus://127.0.0.1:9" in unreachable.stderr


@pytest.mark.slow
@pytest.mark.server
def test_the_app_serves_searches_from_milvus(tiny_model_dir, tmp_path, demo):
    """``python app.py --engine milvus:PATH.db`` as a user reaches it: launched, searched through
    gradio_client; the lists are the in-process engine's."""
    import app as rankscope_app
    from tests.helpers import app_client

    db = tmp_path / "app.db"
    app, registry = rankscope_app.create(DEMO, model=str(tiny_model_dir), store_path=str(tmp_path / "s.sqlite3"),
                                         engine=f"milvus:{db}")
    app.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=None, quiet=True,
                       **rankscope_app.launch_kwargs(registry.store))
    try:
        client = app_client(app.local_url)
        _, result = client.predict("how do I stop my nose running in winter", api_name="/search")
        local = Workspace(demo, None, model=str(tiny_model_dir))
        expected = local.search_one("how do I stop my nose running in winter", k=10, eval_split="test")
        for system in ("bm25", "dense", "hybrid"):
            assert [h["doc_id"] for h in result["systems"][system]] == [d for d, _ in expected[system]], system
        assert registry.engine.where == str(db)
        kinds = {c["kind"] for c in registry.engine.collections()}
        assert {"bm25", "dense"} <= kinds <= {"bm25", "dense", "sparse"}  # SPLADE's once its background build ends
    finally:
        app.close()


def test_the_data_summary_names_the_engine(pair, lite):
    from ui.data import dataset_summary

    assert f"BM25 and vectors served by milvus at <code>{lite.where}</code>" in html.unescape(dataset_summary(pair[1]))
    assert "served by" not in dataset_summary(pair[0])


def test_one_search_asks_milvus_for_the_bm25_list_once(pair, monkeypatch):
    """The Search view's pass (BM25 and the hybrid together): the hybrid's BM25 candidates are the
    list BM25 already fetched, not a second search of the engine."""
    _, remote = pair
    client = remote.lexical.client
    search, unfiltered = client.search, []

    def counting(name, **kwargs):
        if kwargs.get("anns_field") == "sparse" and not kwargs.get("filter"):
            unfiltered.append(kwargs["data"])
        return search(name, **kwargs)

    monkeypatch.setattr(client, "search", counting)
    remote.search_one("why does bread go stale so fast", systems=("bm25", "hybrid"), k=10, eval_split="test")
    assert len(unfiltered) == 1


def test_a_hybrid_query_asks_milvus_at_most_twice(pair, monkeypatch):
    """CLEAR on Milvus: the dense list is one search, the vectors of the BM25 candidates it lacks one
    lookup (BM25 scored by RankScope's own index in this process); one query or many, typed or
    evaluated, and the ranking is still the in-process engine's."""
    local, remote = pair
    queries = dict(list(remote.dataset.split_queries("test").items())[:5])
    CLEAR.lambda_for(remote, "test"), remote.bm25  # λ chosen and BM25 read before counting
    client, calls = remote.dense.index.client, []
    for method in ("search", "get", "query", "hybrid_search"):
        real = getattr(client, method)

        def counted(*args, _real=real, _method=method, **kwargs):
            calls.append(_method)
            return _real(*args, **kwargs)

        monkeypatch.setattr(client, method, counted)
    for text in list(queries.values())[:3]:
        calls.clear()
        hits = remote.search_one(text, systems=("hybrid",), k=10, eval_split="test")["hybrid"]
        assert 1 <= len(calls) <= 2, calls
        same_up_to_near_ties(hits, local.search_one(text, systems=("hybrid",), k=10, eval_split="test")["hybrid"])
    calls.clear()
    run = remote.system("hybrid").search(remote, queries, 10, "test")
    assert len(calls) <= 1 + len(queries), calls  # one batched dense search, one lookup a query
    for q, hits in run.items():
        same_up_to_near_ties(hits, local.system("hybrid").search(local, queries, 10, "test")[q])
