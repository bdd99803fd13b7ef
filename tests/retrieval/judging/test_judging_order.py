"""The judging orders (``retrieval.judging.order``): each hands out every pooled pair once and never
one graded before; MTC's weights, the rates ``mtc-p`` learns and ``mtc-ndcg``'s weights, worked by
hand; move-to-front and the bandit as their papers describe them; and ``bench/judging_effort.py``
on the demo's real runs with a tiny encoder (the default order needs fewer judgments than depth
pooling there)."""
from __future__ import annotations

import math

import pytest

from retrieval.judging import order as jo
from retrieval.judging.judgments import pool
from tests.conftest import DEMO, bench_module


def _run(**lists: str) -> dict:
    return {q: [(d, float(len(docs) - i)) for i, d in enumerate(docs)] for q, docs in lists.items()}


RUNS = {"bm25": _run(q1="abc", q2="abc"), "dense": _run(q1="abc", q2="cxa"), "splade": _run(q1="xyz", q2="abc")}
QIDS = ["q1", "q2"]


def _drain(order, grade=lambda pair: 0) -> list:
    out = []
    while (pair := order.next()) is not None:
        out.append(pair)
        order.record(pair, grade(pair))
    return out


@pytest.mark.parametrize("strategy", jo.STRATEGIES)
def test_every_order_hands_out_each_pooled_pair_once_and_never_a_graded_one(strategy):
    pooled = {(q, d) for q, docs in pool(RUNS, QIDS, 3).items() for d in docs}
    graded = {("q2", "c"): 1, ("q1", "y"): 0}
    order = jo.make(strategy, RUNS, QIDS, 3, judged=graded)
    got = _drain(order, grade=lambda pair: 1 if pair[1] == "a" else 0)
    assert len(got) == len(set(got)) and set(got) == pooled - set(graded)
    skipping = jo.make(strategy, RUNS, QIDS, 3)
    first = skipping.next()
    skipping.hand_out(first)  # handed to a judge who skipped it: never offered again
    assert first not in _drain(skipping)


def test_unknown_order_is_refused():
    with pytest.raises(ValueError, match="unknown judging order 'best'; choose from depth, mtf"):
        jo.make("best", RUNS, QIDS)


def test_mtc_weights_by_hand():
    w = jo.weights({"bm25": RUNS["bm25"], "dense": RUNS["dense"]}, ["q2"], k=3)
    # q2: bm25 a b c, dense c x a; a weight is |1/log2(1 + rank in one) - 1/log2(1 + rank in the other)|
    half, two = 0.5, 1 / math.log2(3)
    assert w == pytest.approx({("q2", "a"): 1 - half, ("q2", "c"): 1 - half, ("q2", "b"): two, ("q2", "x"): two})
    assert jo.weights(RUNS, ["q1"], 3, interest=[("bm25", "dense")]) == {("q1", d): 0 for d in "abcxyz"}
    # depth pooling: the queries in the order given, each one's pool in pool order
    assert _drain(jo.make("depth", RUNS, ["q2", "q1"], 3))[:4] == [("q2", "a"), ("q2", "c"), ("q2", "b"), ("q2", "x")]
    assert _drain(jo.make("mtc", {"bm25": RUNS["bm25"], "dense": RUNS["dense"]}, ["q1", "q2"], 3))[:2] == \
        [("q2", "b"), ("q2", "x")]  # the largest weights first, q1 (both alike) last


def test_mtc_p_learns_which_documents_are_worth_judging():
    runs = {"bm25": RUNS["bm25"], "dense": RUNS["dense"]}
    order = jo.make("mtc-p", runs, ["q2"], 3)
    # a and c are ranked by both (prior rate 2/2 = 1, weight 0.5); b and x by one (rate 1/2, weight 0.63)
    assert order.rate() == pytest.approx([1.0, 1.0, 0.5, 0.5])
    assert order.next() == ("q2", "a")
    order.record(("q2", "a"), 0)  # not relevant: the class "both rank it, best at 1" drops to 2/3
    assert order.rate()[1] == pytest.approx(2 / 3) and order.next() == ("q2", "c")
    order.record(("q2", "c"), 0)  # 2/4 · 0.5 < 1/2 · 0.63: the single-system documents now
    assert order.next() == ("q2", "b")
    order.record(("q2", "b"), 2)
    assert order.rate()[3] == pytest.approx(2 / 3) and order.next() == ("q2", "x")


def test_mtc_ndcg_weighs_by_the_move_in_each_ndcg_difference():
    runs = {"bm25": RUNS["bm25"], "dense": RUNS["dense"]}
    order = jo.make("mtc-ndcg", runs, ["q2"], 3)
    two = 1 / math.log2(3)
    # nothing judged: a relevant document would make the query's ideal DCG 1, so the weights are MTC's
    assert order.weight == pytest.approx([0.5, 0.5, two, two])  # a, c, b, x
    order.record(("q2", "b"), 1)  # bm25's #2 is relevant: bm25 leads dense by its discount, the ideal DCG 1
    ideal = 1 + two  # if another document is relevant too
    lead = two  # bm25's DCG lead now, over an ideal DCG of 1
    # x (dense's #2) would even the score: its weight is the whole lead; a, both rank it high, barely moves it
    assert order.weight[3] == pytest.approx(abs((two - two) / ideal - lead))
    assert order.weight[0] == pytest.approx(abs((1 + two - 0.5) / ideal - lead))
    assert order.weight[1] == pytest.approx(abs((two + 0.5 - 1) / ideal - lead))  # c, dense's #1
    # c moves it nearly as far as x, and documents both systems rank have been relevant more often
    assert order.rate()[1] > order.rate()[3] and order.next() == ("q2", "c")


def test_move_to_front_and_the_bandit_follow_relevant_documents():
    runs = {"a": _run(q="1234"), "b": _run(q="5678")}
    relevant = {"5", "6", "7"}
    mtf = _drain(jo.make("mtf", runs, ["q"], 4), grade=lambda pair: int(pair[1] in relevant))
    # a's first is not relevant: b goes to the front and stays while it gives relevant ones
    assert [d for _, d in mtf] == ["1", "5", "6", "7", "8", "2", "3", "4"]
    bandit = _drain(jo.make("bandit", runs, ["q"], 4), grade=lambda pair: int(pair[1] in relevant))
    # after a's miss (mean 1/3) b's hits (3/4, 4/5, ...) keep it pulled until its miss
    assert [d for _, d in bandit][:5] == ["1", "5", "6", "7", "8"]
    two = _drain(jo.make("mtf", {"a": _run(q1="12", q2="34")}, ["q1", "q2"], 2))
    assert [q for q, _ in two] == ["q1", "q2", "q1", "q2"]  # the queries take turns


@pytest.mark.slow
def test_the_benchmark_on_the_demo(tiny_encoder, store):
    bench = bench_module("judging_effort")
    data = bench.inputs(DEMO, store, model=tiny_encoder)
    assert len(data["runs"]) == 9 and set(data["lam_runs"]) == set(bench.QUERY_MAX_GRID)
    res = bench.measure("demo", data, ["depth", jo.DEFAULT], 10, shuffles=3)  # asserts nDCG = ranx's
    depth, default = res["strategies"]["depth"], res["strategies"][jo.DEFAULT]
    assert depth["pooled"] == default["pooled"] == sum(len(p) for p in pool(data["runs"], data["query_ids"]).values())
    assert len(depth["each"]) == 3 and all(e["final_tau"] == pytest.approx(1.0) for e in depth["each"])
    assert default["to_tau_separable"] < depth["to_tau_separable"]
    worst = bench.show({"demo": res}, ["depth", jo.DEFAULT])
    assert worst["to_tau_separable"] == pytest.approx(default["to_tau_separable"] / depth["to_tau_separable"])
