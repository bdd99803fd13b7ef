"""Embedding compression: the int8 scalar quantizer against the Baidu paper's formula, PCA-reduced
indexes, and compressed indexes as cached Workspace systems (real FAISS, tiny BERT, SQLite)."""
from __future__ import annotations

from types import SimpleNamespace

import faiss
import numpy as np
import pytest

from retrieval.data.readers import load_dataset
from retrieval.evaluation.compression import compression_table
from retrieval.index.dense_index import DenseIndex
from retrieval.store import Store
from retrieval.systems.hybrid import CLEAR
from retrieval.workspace import Workspace
from tests.conftest import DEMO
from tests.retrieval.index.test_dense import CountingEncoder

N, D = 2000, 32


@pytest.fixture(scope="module")
def emb():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(N, D)).astype(np.float32) * rng.uniform(0.2, 2.0, size=D).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def ids():
    return [f"d{i}" for i in range(N)]


def sq8_ranges(index: DenseIndex) -> tuple[np.ndarray, np.ndarray]:
    """(per-dimension min, interval length Q) that FAISS trained."""
    trained = faiss.vector_to_array(index.index.sq.trained)
    vmin, vdiff = trained[:D], trained[D:]
    return vmin, vdiff / 255


def test_int8_codes_follow_the_baidu_formula(emb, ids):
    index = DenseIndex(ids, emb, kind="sq8")
    vmin, q = sq8_ranges(index)
    # appendix 9.2: the range is each dimension's (min, max), split into L = 255 intervals
    np.testing.assert_allclose(vmin, emb.min(axis=0), rtol=1e-6)
    np.testing.assert_allclose(vmin + 255 * q, emb.max(axis=0), rtol=1e-5)
    codes = index.index.sa_encode(emb)
    assert codes.dtype == np.uint8 and codes.shape == (N, D)
    # QI(r) = ⌊(r − s_min) / Q⌋ (float rounding may move a value sitting on a boundary by one)
    expected = np.clip(np.floor((emb - vmin) / q), 0, 255)
    diff = np.abs(codes.astype(int) - expected)
    assert diff.max() <= 1 and (diff == 0).mean() > 0.999
    # r̃ = QI·Q + Q/2 + s_min is what the index holds and scores with
    np.testing.assert_allclose(index.stored, codes * q + q / 2 + vmin, atol=1e-6)
    assert np.abs(index.stored - emb).max() <= q.max() / 2 + 1e-6


def test_int8_scores_stay_within_the_quantization_bound(emb, ids):
    flat, sq8 = DenseIndex(ids, emb), DenseIndex(ids, emb, kind="sq8")
    _, q_len = sq8_ranges(sq8)
    queries = np.random.default_rng(4).normal(size=(10, D)).astype(np.float32)
    for qv in queries:
        bound = np.sum(np.abs(qv) * q_len / 2)  # Σ_i |q_i|·Q_i/2
        err = np.abs(sq8.scores(qv) - flat.scores(qv))
        assert err.max() <= bound + 1e-5
        assert 0 < err.mean() < bound  # really quantized, and typically well inside the bound
    # FAISS's search scores are the same decoded inner products that scores() re-computes
    got, rows = sq8.search_vectors(queries, 20)
    for i in range(len(queries)):
        np.testing.assert_allclose(got[i], sq8.scores(queries[i], rows[i]), rtol=1e-4, atol=1e-5)


def test_int8_takes_a_quarter_of_the_bytes(emb, ids):
    flat, sq8 = DenseIndex(ids, emb), DenseIndex(ids, emb, kind="sq8")
    assert (flat.bytes_per_doc, sq8.bytes_per_doc) == (4 * D, D)
    per_doc = flat.index_bytes / N, sq8.index_bytes / N
    assert per_doc[1] < per_doc[0]
    assert 3.9 < per_doc[0] / per_doc[1] <= 4.0  # the codes, plus 2·D float ranges and a header


def test_pca_projection_has_the_asked_dimensions_and_keeps_the_ranking_at_full_size(emb, ids):
    reduced = DenseIndex(ids, emb, dims=8)
    assert reduced.stored.shape == (N, 8) and reduced.index.d == D  # queries go in at full size
    assert reduced.bytes_per_doc == 8 * 4
    assert DenseIndex(ids, emb, kind="sq8", dims=8).bytes_per_doc == 8
    # the map is A·x with orthonormal rows (principal axes), no centring
    a = faiss.vector_to_array(reduced.projection.A).reshape(8, D)
    np.testing.assert_allclose(a @ a.T, np.eye(8), atol=1e-5)
    np.testing.assert_allclose(reduced.stored, emb @ a.T, atol=1e-5)
    qv = np.random.default_rng(5).normal(size=(3, D)).astype(np.float32)
    scores, rows = reduced.search_vectors(qv, 10)
    for i in range(3):
        brute = (emb @ a.T) @ (a @ qv[i])
        assert list(rows[i]) == list(np.argsort(-brute)[:10])
        np.testing.assert_allclose(scores[i], reduced.scores(qv[i], rows[i]), rtol=1e-4, atol=1e-5)
    # all D axes form a rotation: inner products, hence the ranking, are those of the flat index
    full = DenseIndex(ids, emb, dims=D)
    np.testing.assert_allclose(full.scores(qv[0]), DenseIndex(ids, emb).scores(qv[0]), atol=1e-4)
    with pytest.raises(ValueError, match="dims must be between 1 and the embedding size 32"):
        DenseIndex(ids, emb, dims=D + 1)


# ---- compressed indexes as workspace systems --------------------------------------------------
@pytest.fixture(scope="module")
def demo(tmp_path_factory, tiny_encoder):
    store = Store(tmp_path_factory.mktemp("compression") / "store.sqlite3")
    enc = CountingEncoder(tiny_encoder)
    ws = Workspace(load_dataset(DEMO), store, model=enc)
    ws.build_dense()
    yield SimpleNamespace(store=store, enc=enc, ws=ws)
    store.close()


def test_with_index_shares_bm25_encoder_and_embeddings(demo):
    ws = demo.ws
    encoded = demo.enc.encoded
    int8 = ws.with_index("sq8", 16)
    assert int8.bm25 is ws.bm25 and int8.encoder is ws.encoder
    assert (int8.dense.index.kind, int8.dense.index.stored.shape[1]) == ("sq8", 16)
    assert int8.dense.index.embeddings is ws.dense.index.embeddings
    assert demo.enc.encoded == encoded  # the corpus was not encoded again
    params = int8.system_params("dense")
    assert (params["index"], params["dims"], params["scores"]) == ("sq8", 16, "decoded")
    assert "dims" not in ws.system_params("dense") and "scores" not in ws.system_params("dense")


def test_compression_table_rows_are_cached_under_their_own_keys(demo):
    ws, store = demo.ws, demo.store
    variants = (("flat", None), ("sq8", None), ("flat", 16), ("sq8", 16), ("flat", 32))
    rows = compression_table(ws, "test", variants=variants)
    # 32 dims is the encoder's own size: no reduction, left out
    assert [(r.kind, r.dims, r.code_bytes) for r in rows] == [("flat", 32, 128), ("sq8", 32, 32),
                                                               ("flat", 16, 64), ("sq8", 16, 16)]
    assert [r.bytes_ratio for r in rows] == [1.0, 0.25, 0.5, 0.125]
    assert rows[0].label == "float32 (flat)" and rows[3].label == "int8 (sq8) · 16 dims"
    assert all(v == 0 for system in rows[0].delta.values() for v in system.values())
    assert rows[0].marks == {"dense": {}, "hybrid": {}}
    for r in rows:
        assert r.index_bytes_per_doc >= r.code_bytes
        variant = ws.with_index(r.kind, None if r.dims == 32 else r.dims)
        evals = {s: variant.evaluate(s, "test") for s in r.metrics}
        assert r.hybrid_lambda == CLEAR.lambda_for(variant, "test").value
        for s, values in r.metrics.items():
            assert values == {m: evals[s].mean[m] for m in values}
            assert r.delta[s]["ndcg@10"] == pytest.approx(values["ndcg@10"] - rows[0].metrics[s]["ndcg@10"])
        row = r.to_dict()
        assert row["dense ndcg@10"] == r.metrics["dense"]["ndcg@10"]
        assert row["hybrid recall@100 Δ"] == r.delta["hybrid"]["recall@100"]
        iv = evals["dense"].interval("ndcg@10")  # each mean with its interval, each Δ with its paired one
        assert row["dense ndcg@10 95%"] == f"[{iv.low:.3f}, {iv.high:.3f}]"
        d = r.delta_intervals["hybrid"]["ndcg@10"]
        assert d.low <= r.delta["hybrid"]["ndcg@10"] <= d.high
        assert row["hybrid ndcg@10 Δ 95%"] == f"[{d.low:.3f}, {d.high:.3f}]"
    # each variant's runs, metrics and λ sit under their own keys ...
    dense_params = [r for r in store.runs(ws.dataset.queries_hash) if r["system"] == "dense"]
    assert len(dense_params) == 4 and len({r["params"] for r in dense_params}) == 4
    assert len({r.metrics["dense"]["ndcg@10"] for r in rows}) > 1  # compression changed something
    # ... so a second table reads everything back
    n_runs, n_metrics = store.db["runs"].count, store.db["metrics"].count
    again = compression_table(ws, "test", variants=variants)
    assert [r.metrics for r in again] == [r.metrics for r in rows]
    assert (store.db["runs"].count, store.db["metrics"].count) == (n_runs, n_metrics)
