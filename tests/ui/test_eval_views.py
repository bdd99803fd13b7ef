"""Evaluation views and runs history on the demo corpus: metrics table with significance, per-query
scatter, Recall@k curves, λ sweep, stored runs listed and compared (real BM25, tiny BERT, FAISS,
ranx, SQLite)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from ranx import Qrels as RQrels
from ranx import Run as RRun
from ranx import evaluate as ranx_evaluate

from retrieval.data.readers import load_dataset
from retrieval.evaluation.measures import compare, evaluate_run, positive_qrels
from retrieval.evaluation.metric_tables import RECALL_KS, metrics_table, recall_at_ks, versus
from retrieval.store import Store
from retrieval.systems.clear_lambda import shown
from retrieval.systems.hybrid import CLEAR
from retrieval.tracking.history import compare_runs, list_runs, params_summary
from retrieval.workspace import Workspace
from tests.conftest import DEMO
from ui.present.figures import lambda_sweep, per_query_scatter, recall_curves
from ui.present.tables import table_cells

SYSTEMS = ("bm25", "dense", "hybrid")


@pytest.fixture(scope="module")
def demo(tmp_path_factory, tiny_encoder):
    store = Store(tmp_path_factory.mktemp("views") / "store.sqlite3")
    ws = Workspace(load_dataset(DEMO), store, model=tiny_encoder)
    yield SimpleNamespace(store=store, ws=ws, ds=ws.dataset, qrels=ws.dataset.qrels["test"])
    store.close()


# ---- metrics table --------------------------------------------------------------------------
def test_metrics_table_lists_every_workspace_with_marks_against_bm25(demo):
    ws = demo.ws
    int8 = ws.with_index("sq8")
    metrics = ("ndcg@10", "recall@100")
    rows = metrics_table({"base": ws, "int8": int8}, "test", SYSTEMS, metrics)
    # BM25 is shared by both workspaces: listed once, first
    assert [r["label"] for r in rows] == ["BM25", "Dense · base", "Hybrid (CLEAR λ) · base",
                                          "Dense · int8", "Hybrid (CLEAR λ) · int8"]
    bm25 = ws.evaluate("bm25", "test")
    for row, (w, s) in zip(rows, [(ws, "bm25"), (ws, "dense"), (ws, "hybrid"), (int8, "dense"), (int8, "hybrid")]):
        ev = w.evaluate(s, "test")
        assert row["system"] == s and row["metrics"] == {m: ev.mean[m] for m in metrics}
        assert row["marks"] == {m: "†" for m in metrics if compare(bm25, ev, m).significant}
    assert any(r["marks"] for r in rows)  # the random tiny encoder is far from BM25
    cells = table_cells(rows, metrics)
    marked = next(r for r in rows if r["marks"])
    m = next(iter(marked["marks"]))
    iv = marked["intervals"][m]  # each mean with its 95% interval, then the mark
    assert iv.low <= marked["metrics"][m] <= iv.high
    assert cells[rows.index(marked)][1 + metrics.index(m)] == \
        f"{marked['metrics'][m]:.4f} [{iv.low:.3f}, {iv.high:.3f}]†"
    assert rows[0]["intervals"] == {m: bm25.interval(m) for m in metrics}
    # one workspace: plain labels, BM25 first even when not asked for
    assert [r["label"] for r in metrics_table(ws, "test", ("dense",), metrics)] == ["BM25", "Dense"]


# ---- per-query scatter ----------------------------------------------------------------------
def test_scatter_has_one_point_per_query_and_counts_outcomes(demo):
    ws, ds = demo.ws, demo.ds
    a, b, cmp = versus(ws, "test")
    assert (a.mean, b.mean) == (ws.evaluate("bm25", "test").mean, ws.evaluate("dense", "test").mean)
    fig = per_query_scatter(a, b, cmp, "BM25", "Dense", query_text=ds.queries)
    points = fig.data[0]
    qids = list(a.per_query["ndcg@10"])
    assert len(points.x) == len(qids) == 32
    assert [c[0] for c in points.customdata] == qids
    assert [c[1] for c in points.customdata] == [ds.queries[q] for q in qids]
    assert list(points.x) == [a.per_query["ndcg@10"][q] for q in qids]
    assert list(points.y) == [b.per_query["ndcg@10"][q] for q in qids]
    d = np.array(points.y) - np.array(points.x)
    wins, ties, losses = int((d > 0).sum()), int((d == 0).sum()), int((d < 0).sum())
    assert f"{wins} wins, {ties} ties, {losses} losses" in fig.layout.title.text
    assert f"Δ {cmp.delta:+.3f} [{cmp.interval.low:.3f}, {cmp.interval.high:.3f}]" in fig.layout.title.text
    assert list(fig.data[1].x) == [0, 1] == list(fig.data[1].y)  # the diagonal


# ---- Recall@k -------------------------------------------------------------------------------
@pytest.mark.slow  # calls ranx itself: its numba kernels compile on a fresh install
def test_recall_curves_are_monotone_and_equal_ranx(demo):
    ws = demo.ws
    curves = recall_at_ks(ws, "test", SYSTEMS)
    assert list(curves) == ["BM25", "Dense", "Hybrid (CLEAR λ)"]
    judged = positive_qrels(demo.qrels)
    for (label, curve), s in zip(curves.items(), SYSTEMS):
        values = curve["mean"]
        assert len(values) == len(RECALL_KS)
        assert all(lo <= v <= hi for lo, v, hi in zip(curve["low"], values, curve["high"])), label
        assert all(x <= y + 1e-12 for x, y in zip(values, values[1:])), label
        run = ws.run(s, "test")
        expected = ranx_evaluate(RQrels(judged), RRun({q: dict(run[q]) for q in judged}),
                                 ["recall@1", "recall@10", "recall@100"], make_comparable=True)
        got = dict(zip(RECALL_KS, values))
        assert [got[1], got[10], got[100]] == pytest.approx(
            [expected[m] for m in ("recall@1", "recall@10", "recall@100")])
    assert curves["Dense"]["mean"][-1] == 1.0  # the dense index returns all 384 documents at k = 1000
    assert curves["Dense"]["low"][-1] == curves["Dense"]["high"][-1] == 1.0  # every query: no spread
    assert curves["BM25"]["high"][1] - curves["BM25"]["low"][1] > 0.05  # Recall@2 on 32 queries: wide
    fig = recall_curves(curves, "test")  # per system a band (its interval), then its line
    assert [t.name for t in fig.data][1::2] == list(curves)
    assert [t.name for t in fig.data][0::2] == [f"{c} 95% interval" for c in curves]
    line, band = fig.data[3], fig.data[2]
    assert list(line.y) == curves["Dense"]["mean"] and list(line.x) == list(RECALL_KS)
    assert list(band.y) == curves["Dense"]["high"] + curves["Dense"]["low"][::-1]


# ---- λ sweep --------------------------------------------------------------------------------
def test_lambda_sweep_shows_the_tuned_grid_and_the_test_split_apart(demo):
    ws = demo.ws
    choice = CLEAR.lambda_for(ws, "test")
    fig = lambda_sweep(choice, "test", CLEAR.lambda_fit(ws, "test").grid)
    tuned, chosen, insight = fig.data
    assert list(tuned.x) == [shown(lam) for lam, _ in choice.grid] and list(tuned.y) == [v for _, v in choice.grid]
    assert list(chosen.x) == [shown(choice.value)] and chosen.y[0] == dict(choice.grid)[choice.value]
    assert "tuned on train" in tuned.name
    test_grid = CLEAR.lambda_fit(ws, "test").grid
    assert list(insight.x) == [shown(lam) for lam, _ in test_grid] and list(insight.y) == [v for _, v in test_grid]
    assert "not used to choose λ" in insight.name
    assert test_grid != choice.grid  # a different split: different values
    assert len(lambda_sweep(choice, "test").data) == 2


# ---- runs history ---------------------------------------------------------------------------
def test_list_runs_shows_the_runs_a_workspace_made(store, tiny_encoder):
    ws = Workspace(load_dataset(DEMO), store, model=tiny_encoder)
    bm25_run = ws.run("bm25", "test")
    ws.run("dense", "test")
    rows = list_runs(store, ws.dataset.queries_hash)
    assert [r["system"] for r in rows] == ["dense", "bm25"]  # newest first
    assert all(r["split"] == "test" and r["k"] == 1000 and r["dataset"] == "demo" for r in rows)
    assert store.get_run(rows[1]["key"]) == bm25_run
    assert rows[0]["summary"] == f"dense · {tiny_encoder.name} · flat"
    assert rows[1]["summary"] == "bm25 · k1 0.9, b 0.4"
    assert rows[0]["params"] == ws.system_params("dense", "test")
    assert list_runs(store, "no-such-hash") == []
    assert params_summary("hybrid", {"model": "ab" * 32, "index": "sq8", "dims": 128, "lambda": 0.04}) \
        == f"hybrid · model {'ab' * 6} · sq8 · 128 dims · λ 0.04"
    assert params_summary("prod", {"imported": "prod", "hash": "cd" * 32}) == f"prod · imported run {'cd' * 6}"


def test_compare_runs_query_by_query(demo):
    ws, store, qrels = demo.ws, demo.store, demo.qrels
    ws.run("bm25", "test"), ws.run("hybrid", "test")
    keys = {r["system"]: r["key"] for r in list_runs(store, ws.dataset.queries_hash) if r["split"] == "test"}
    res = compare_runs(store, keys["bm25"], keys["hybrid"], qrels)
    a = evaluate_run(ws.run("bm25", "test"), qrels).per_query["ndcg@10"]
    b = evaluate_run(ws.run("hybrid", "test"), qrels).per_query["ndcg@10"]
    assert {r["query"]: r["delta"] for r in res.per_query} == pytest.approx({q: b[q] - a[q] for q in a})
    assert {r["query"]: (r["a"], r["b"]) for r in res.per_query} == {q: (a[q], b[q]) for q in a}
    deltas = [abs(r["delta"]) for r in res.per_query]
    assert deltas == sorted(deltas, reverse=True) and deltas[0] > 0
    expected = compare(evaluate_run(ws.run("bm25", "test"), qrels), evaluate_run(ws.run("hybrid", "test"), qrels))
    assert res.comparison.p_value == expected.p_value and res.metric == "ndcg@10"
    same = compare_runs(store, keys["hybrid"], keys["hybrid"], qrels, metric="recall@100")
    assert all(r["delta"] == 0 for r in same.per_query) and same.comparison.p_value == 1.0
    with pytest.raises(KeyError, match="no run with key 'nope'"):
        compare_runs(store, "nope", keys["bm25"], qrels)
    with pytest.raises(ValueError, match="no query in common"):
        compare_runs(store, keys["bm25"], keys["hybrid"], ws.dataset.qrels["train"])
