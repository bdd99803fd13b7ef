"""The Workspace: every system evaluated end to end, λ selection, and the store-backed cache.

Real BM25, the real tiny transformer, real FAISS and a real SQLite file; the demo corpus (384
passages, train/test labels) for the cache and λ checks, the toy data set for the rest.
"""
from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from retrieval.data.dataset import Dataset, Document
from retrieval.data.readers import load_dataset
from retrieval.evaluation.metrics import METRICS
from retrieval.index.encoder import Encoder, load_encoder
from retrieval.store import Store
from retrieval.systems import SYSTEMS
from retrieval.systems.clear_lambda import LAMBDA_GRID, NO_LABELS, QUERY_MAX_GRID
from retrieval.systems.fusion import Hybrid, default_lambda, tune_lambda
from retrieval.systems.hybrid import CLEAR
from retrieval.workspace import Workspace
from tests.conftest import DEMO, build_tiny_encoder, store_copy
from tests.retrieval.index.test_dense import CountingEncoder


def check_metrics(mean: dict) -> None:
    for m in METRICS:
        assert m in mean, m
        assert 0.0 <= mean[m] <= 1.0, (m, mean[m])
    assert "pnr" in mean and mean["pnr"] >= 0.0  # graded labels: PNR is defined


@pytest.fixture(scope="module")
def demo_cache(tmp_path_factory, tiny_encoder, demo_sparse_store):
    """The demo data set evaluated once with every system, cached in a store file (that starts
    with the learned sparse vectors of the corpus alone: every other system's work is done here)."""
    path = store_copy(demo_sparse_store, tmp_path_factory.mktemp("workspace") / "store.sqlite3")
    store = Store(path)
    enc = CountingEncoder(tiny_encoder)
    ds = load_dataset(DEMO)
    ws = Workspace(ds, store, model=enc)
    evals = {s: ws.evaluate(s, "test") for s in SYSTEMS}
    yield SimpleNamespace(path=path, store=store, enc=enc, ds=ds, ws=ws, evals=evals)
    store.close()


@pytest.mark.slow
def test_every_system_is_evaluated_on_the_test_split(demo_cache):
    ds, evals = demo_cache.ds, demo_cache.evals
    test_qids = set(ds.split_queries("test"))
    assert len(test_qids) == 32
    for system, ev in evals.items():
        check_metrics(ev.mean)
        assert set(ev.per_query["ndcg@10"]) == test_qids, system
    # the dense index returns all 384 documents at depth 1000, so every relevant one is found;
    # BM25 only returns documents sharing a term with the query
    assert evals["dense"].mean["recall@1000"] == 1.0
    assert evals["bm25"].mean["recall@1000"] < 1.0
    assert demo_cache.enc.encoded >= len(ds.docs)  # the corpus really was encoded once


def test_test_split_lambda_is_tuned_on_train(demo_cache):
    ws, ds = demo_cache.ws, demo_cache.ds
    choice = CLEAR.lambda_for(ws, "test")
    assert choice.how.startswith("tuned on train (nDCG@10, 39 queries)") and choice.per_query_max
    # tuned over BM25 ÷ the query's largest possible score, the label-free λ = 1 as the prior
    fit = tune_lambda(Hybrid(ws.bm25, ws.dense, depth=ws.depth, lex_norm=ws.bm25.max_score, lookups=True),
                      ds.split_queries("train"), ds.qrels["train"], grid=QUERY_MAX_GRID, prior=1.0)
    assert choice.value == fit.chosen
    assert choice.grid == pytest.approx(fit.grid)
    assert ("beats the label-free" in choice.how) == (fit.chosen != 1.0)
    # the hybrid run of the test split was made with that λ, and its parameters record it
    hybrid_rows = [r for r in demo_cache.store.runs(ds.queries_hash) if r["system"] == "hybrid"]
    assert [json.loads(r["params"])["lambda"] for r in hybrid_rows] == [fit.chosen]
    expected = Hybrid(ws.bm25, ws.dense, lam=fit.chosen, depth=ws.depth,
                      lex_norm=ws.bm25.max_score, lookups=True).search(ds.split_queries("test"), 10)
    got = ws.run("hybrid", "test")
    for q, hits in expected.items():
        assert [d for d, _ in got[q][:10]] == [d for d, _ in hits]
    # λ is never tuned on the split being evaluated: train falls back to the label-free default
    on_train = CLEAR.lambda_for(ws, "train")
    assert on_train.how == NO_LABELS and on_train.per_query_max and on_train.value == 1.0


def test_a_fixed_lambda_is_used_and_keys_its_own_cache_entries(demo_cache):
    ws = demo_cache.ws.with_model(demo_cache.ws.encoder)
    tuned = CLEAR.lambda_for(demo_cache.ws, "test").value
    assert tuned != 0.5
    CLEAR.fix_lambda(ws, 0.5, "chosen on a held-out split", "test")
    fixed = CLEAR.lambda_for(ws, "test")
    assert fixed.value == 0.5 and fixed.how == "chosen on a held-out split"
    assert ws.system_params("hybrid", "test")["lambda"] == 0.5
    expected = Hybrid(ws.bm25, ws.dense, lam=0.5, depth=ws.depth,  # in the space λ is tuned in
                      lex_norm=ws.bm25.max_score, lookups=True).search(demo_cache.ds.split_queries("test"), 10)
    got = ws.run("hybrid", "test")
    assert {q: [d for d, _ in got[q][:10]] for q in expected} == {q: [d for d, _ in h] for q, h in expected.items()}
    # the workspace it came from keeps its own tuned λ and its cached run
    assert CLEAR.lambda_for(demo_cache.ws, "test").value == tuned
    assert demo_cache.ws.system_params("hybrid", "test")["lambda"] == tuned


def test_a_fresh_workspace_reads_everything_from_the_store(demo_cache, tiny_encoder):
    store = Store(demo_cache.path)  # a new process would open the file like this
    runs_before = {r["key"]: r["created"] for r in store.runs()}
    metrics_before = store.db["metrics"].count
    assert {r["system"] for r in store.runs()} >= set(SYSTEMS)
    enc = CountingEncoder(tiny_encoder)
    ws = Workspace(load_dataset(DEMO), store, model=enc)
    for system in SYSTEMS:
        ev = ws.evaluate(system, "test")
        assert ev.mean == demo_cache.evals[system].mean
        assert ev.per_query == demo_cache.evals[system].per_query
        assert ws.run(system, "test") == demo_cache.ws.run(system, "test")
    assert CLEAR.lambda_for(ws, "test").value == CLEAR.lambda_for(demo_cache.ws, "test").value
    assert enc.encoded == 0  # not one document or query re-encoded
    # no run was recomputed: same rows, none rewritten (an upsert would refresh "created")
    assert {r["key"]: r["created"] for r in store.runs()} == runs_before
    assert store.db["metrics"].count == metrics_before
    store.close()


def test_a_changed_document_gets_a_new_hash_and_fresh_runs(demo_cache, tiny_encoder):
    ds = demo_cache.ds
    first = ds.doc_ids[0]
    docs = dict(ds.docs)
    docs[first] = Document(first, docs[first].title, docs[first].text + " Edited with new words.")
    changed = Dataset(ds.name, docs, ds.queries, ds.qrels)
    assert changed.content_hash != ds.content_hash
    store = Store(demo_cache.path)
    n_runs = store.db["runs"].count
    enc = CountingEncoder(tiny_encoder)
    ws = Workspace(changed, store, model=enc)
    for system in ("bm25", "dense"):
        check_metrics(ws.evaluate(system, "test").mean)
    assert enc.encoded == 1  # only the edited document: every other text is cached by its hash
    assert store.db["runs"].count == n_runs + 2
    assert sorted(r["system"] for r in store.runs(changed.queries_hash)) == ["bm25", "dense"]
    store.close()


def test_lambda_cache_is_per_model(demo_cache, tmp_path):
    """A λ tuned for one encoder must not be reused for another over the same store."""
    other = load_encoder(str(build_tiny_encoder(tmp_path, seed=1)), device="cpu")
    store = Store(demo_cache.path)
    ds = demo_cache.ds
    ws = Workspace(load_dataset(DEMO), store, model=other)
    choice = CLEAR.lambda_for(ws, "test")
    fit = tune_lambda(Hybrid(ws.bm25, ws.dense, depth=ws.depth, lex_norm=ws.bm25.max_score, lookups=True),
                      ds.split_queries("train"), ds.qrels["train"], grid=QUERY_MAX_GRID, prior=1.0)
    assert choice.grid == pytest.approx(fit.grid)
    assert choice.grid != pytest.approx(CLEAR.lambda_for(demo_cache.ws, "test").grid)
    assert choice.value == fit.chosen
    store.close()


def test_raw_scores_tune_lambda_on_the_raw_grid_without_a_prior(demo_cache, tiny_encoder):
    """An encoder whose scores are not cosines: λ on raw BM25 scores, the grid's best taken (CLEAR)."""
    ds = demo_cache.ds
    raw = Workspace(ds, None, model=Encoder(tiny_encoder.model, name="tiny-raw", normalize=False))
    assert not CLEAR.query_max_space(raw)
    choice = CLEAR.lambda_for(raw, "test")
    fit = tune_lambda(Hybrid(raw.bm25, raw.dense, depth=raw.depth, lookups=True), ds.split_queries("train"),
                      ds.qrels["train"])
    assert [lam for lam, _ in choice.grid] == list(LAMBDA_GRID) and choice.grid == pytest.approx(fit.grid)
    assert choice.value == fit.best and choice.how == "tuned on train (nDCG@10, 39 queries)"
    assert not choice.per_query_max and "bm25_scale" not in raw.system_params("hybrid", "test")


# ---- toy data set ----------------------------------------------------------------------------
def test_toy_dataset_all_systems(toy_dataset, store, tiny_encoder):
    ws = Workspace(toy_dataset, store, model=tiny_encoder)
    for system in SYSTEMS:
        ev = ws.evaluate(system, "test")
        check_metrics(ev.mean)
        assert set(ev.per_query["ndcg@10"]) == {"q3", "q4"}
    # no store: same numbers, nothing cached
    bare = Workspace(toy_dataset, None, model=tiny_encoder)
    assert bare.evaluate("bm25", "test").mean == pytest.approx(ws.evaluate("bm25", "test").mean)


def test_without_training_labels_lambda_is_the_default(toy_dataset, store, tiny_encoder):
    only_test = Dataset("toy-test", toy_dataset.docs, toy_dataset.queries,
                        {"test": toy_dataset.qrels["test"]})
    ws = Workspace(only_test, store, model=tiny_encoder)
    choice = CLEAR.lambda_for(ws, "test")
    assert choice.how == NO_LABELS and choice.grid == [] and choice.value == 1.0 and choice.per_query_max
    assert ws.system_params("hybrid", "test")["bm25_scale"] == "query max"
    # the run is BM25 ÷ the query's largest possible BM25 score, plus cosine
    queries = only_test.split_queries("test")
    expected = Hybrid(ws.bm25, ws.dense, lam=1.0, depth=ws.depth, lex_norm=ws.bm25.max_score).search(queries, 10)
    by_hand = Hybrid(ws.bm25, ws.dense, lam=1.0, depth=ws.depth).candidates(queries)
    got = ws.run("hybrid", "test")
    for q, c in by_hand.items():
        s = c.s_lex / ws.bm25.max_score(queries[q]) + c.s_emb
        top = [only_test.doc_ids[c.rows[j]] for j in np.argsort(-s, kind="stable")[:5]]
        assert [d for d, _ in got[q][:5]] == [d for d, _ in expected[q][:5]] == top
    check_metrics(ws.evaluate("hybrid", "test").mean)
    # an encoder whose scores are not cosines keeps the scale-matched default
    raw = Workspace(only_test, None, model=tiny_encoder)
    raw.encoder.normalize = False
    try:
        fallback = CLEAR.lambda_for(raw, "test")
        expected_lam = default_lambda(Hybrid(raw.bm25, raw.dense, depth=raw.depth).candidates(queries))
    finally:
        raw.encoder.normalize = True
    assert fallback.how == "scale-matched default (no training labels)" and not fallback.per_query_max
    assert fallback.value == pytest.approx(expected_lam)


def test_unknown_system_and_split_raise(toy_dataset, store, tiny_encoder):
    ws = Workspace(toy_dataset, store, model=tiny_encoder)
    with pytest.raises(ValueError, match=r"unknown system 'bm42'; choose from bm25, dense"):
        ws.evaluate("bm42", "test")
    with pytest.raises(ValueError, match=r"no labels for split 'nope' \(it has: train, test\)"):
        ws.evaluate("bm25", "nope")
    with pytest.raises(ValueError, match="unknown system"):
        ws.system("bm42")


def test_search_one_gives_each_systems_top_k(toy_dataset, store, tiny_encoder):
    ws = Workspace(toy_dataset, store, model=tiny_encoder)
    text = "cat food prices"
    got = ws.search_one(text, k=3)
    assert set(got) == {"bm25", "dense", "hybrid"}
    # only d4 (cat, food, prices) and d1 (title "Cats") share a term with the query
    assert [d for d, _ in got["bm25"]] == ["d4", "d1"]
    assert len(got["dense"]) == len(got["hybrid"]) == 3
    assert got["bm25"] == ws.bm25.search({"x": text}, 3)["x"]
    assert [d for d, _ in got["dense"]] == [d for d, _ in ws.dense.search({"x": text}, 3)["x"]]
    lam = CLEAR.lambda_for(ws, None).value
    hybrid = Hybrid(ws.bm25, ws.dense, lam=lam, depth=ws.depth).search({"x": text}, 3)["x"]
    assert [d for d, _ in got["hybrid"]] == [d for d, _ in hybrid]
    assert all(not math.isnan(s) for hits in got.values() for _, s in hits)
    fused = ws.search_one(text, systems=("rrf", "wsum"), k=2)
    assert set(fused) == {"rrf", "wsum"} and all(len(h) == 2 for h in fused.values())


def test_with_model_shares_the_bm25_index_and_swaps_the_encoder(toy_dataset, store, tiny_encoder, tmp_path):
    from retrieval.index.encoder import load_encoder
    from retrieval.workspace import Workspace
    from tests.conftest import build_tiny_encoder

    ws = Workspace(toy_dataset, store, model=tiny_encoder, k1=1.2, b=0.7)
    other_encoder = load_encoder(str(build_tiny_encoder(tmp_path, seed=7)), device="cpu")
    other = ws.with_model(other_encoder)
    assert other.bm25 is ws.bm25 and other.bm25_settings == ws.bm25_settings
    assert other.encoder is other_encoder and other.encoder.fingerprint != ws.encoder.fingerprint
    assert other.system_params("dense")["model"] != ws.system_params("dense")["model"]
