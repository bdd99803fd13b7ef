"""Metrics (through ranx), PNR and paired significance tests against values worked out by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest

from retrieval.evaluation.measures import Evaluation, compare, evaluate_run, is_incomplete_metric, pnr, scores_from_run

L2 = math.log2

# q1: three relevant documents (a: 2, b: 1, d: 1), c judged non-relevant; d is never retrieved.
# q2: one relevant document, retrieved first.
# q3: only 0-labels -> not evaluated at all.
# q4: two relevant documents, the run has nothing for it -> scores 0 everywhere.
QRELS = {"q1": {"a": 2, "b": 1, "c": 0, "d": 1}, "q2": {"e": 1}, "q3": {"g": 0, "h": 0},
         "q4": {"i": 1, "j": 1}}
RUN = {"q1": [("c", 0.9), ("a", 0.8), ("x", 0.7), ("b", 0.6), ("y", 0.5)],
       "q2": [("e", 1.0), ("f", 0.5)],
       "q3": [("g", 1.0)]}

# q1 ranks: c(0) a(2) x(-) b(1) y(-)
Q1_DCG = 2 / L2(3) + 1 / L2(5)  # linear gain, log2(rank + 1) discount
Q1_IDCG = 2 / L2(2) + 1 / L2(3) + 1 / L2(4)  # ideal order 2, 1, 1
EXPECTED = {
    "ndcg@10": {"q1": Q1_DCG / Q1_IDCG, "q2": 1.0, "q4": 0.0},
    "mrr@10": {"q1": 1 / 2, "q2": 1.0, "q4": 0.0},  # first relevant at rank 2 (c is label 0)
    "recall@3": {"q1": 1 / 3, "q2": 1.0, "q4": 0.0},  # only a in the top 3
    "recall@10": {"q1": 2 / 3, "q2": 1.0, "q4": 0.0},  # a and b, not d
    "map": {"q1": (1 / 2 + 2 / 4) / 3, "q2": 1.0, "q4": 0.0},  # precision at ranks 2 and 4, over |R| = 3
    "p@10": {"q1": 2 / 10, "q2": 1 / 10, "q4": 0.0},
}


def test_metrics_match_hand_computation():
    ev = evaluate_run(RUN, QRELS, metrics=tuple(EXPECTED))
    assert Q1_DCG / Q1_IDCG == pytest.approx(0.540586, abs=1e-6)  # the hand value, for the reader
    for metric, per_query in EXPECTED.items():
        assert ev.per_query[metric] == pytest.approx(per_query), metric
        assert ev.mean[metric] == pytest.approx(np.mean(list(per_query.values()))), metric


def test_zero_label_only_query_is_excluded_and_missing_query_scores_zero():
    ev = evaluate_run(RUN, QRELS)
    for metric in ("ndcg@10", "mrr@10", "recall@10", "recall@100", "recall@1000", "map", "p@10"):
        assert set(ev.per_query[metric]) == {"q1", "q2", "q4"}, metric
        assert ev.per_query[metric]["q4"] == 0.0
    # the same run with q3's perfect answer removed scores the same: q3 never counted
    without_q3 = evaluate_run({q: h for q, h in RUN.items() if q != "q3"}, QRELS)
    assert without_q3.mean["ndcg@10"] == pytest.approx(ev.mean["ndcg@10"])
    # and the run retrieving one label-0 document first is not rewarded for it
    assert ev.per_query["mrr@10"]["q1"] == pytest.approx(0.5)


def test_no_relevant_label_at_all_gives_nan_means():
    ev = evaluate_run({"q": [("a", 1.0)]}, {"q": {"a": 0, "b": 0}})
    assert all(math.isnan(v) for v in ev.mean.values())
    assert "pnr" not in ev.mean  # one label value only: no pairs


def test_evaluation_json_round_trip():
    ev = evaluate_run(RUN, QRELS)
    back = Evaluation.from_json(ev.to_json())
    assert back.mean == ev.mean and back.per_query == ev.per_query


# ---- metrics for incomplete labels: bpref and judged@k ----------------------------------------------
# bpref as trec_eval computes it: (1/R) Σ_{relevant r retrieved} (1 − min(n_r, R) / min(R, N)), n_r the
# judged non-relevant documents above r, unjudged ones skipped.
# q1: R = 3 (a, b, d), N = 1 (c); judged order c a b -> a and b each have 1 non-relevant above:
#     1 − 1/1 = 0 each; d is not retrieved -> 0.
# q2: R = 1, N = 0: e is retrieved with no non-relevant above -> 1 (trec_eval's rule; ranx gives NaN).
# q4: nothing retrieved -> 0. q3 has no relevant label: not evaluated (like the ranx metrics).
BPREF_EXPECTED = {"q1": 0.0, "q2": 1.0, "q4": 0.0}
# judged@k: the share of the top k that has a label of any grade (0 included); a list shorter than k
# is divided by its length (ir-measures). Every labelled query counts, q3 (grade 0 only) included.
# q1: c a x b y -> c, a, b judged: 3/5 at k = 10, 2/2 at k = 2. q2: e f -> 1/2. q3: g -> 1/1. q4: 0.
JUDGED_EXPECTED = {"judged@10": {"q1": 3 / 5, "q2": 1 / 2, "q3": 1.0, "q4": 0.0},
                   "judged@2": {"q1": 1.0, "q2": 1 / 2, "q3": 1.0, "q4": 0.0}}


def test_bpref_and_judged_at_k_hand_computed():
    ev = evaluate_run(RUN, QRELS, metrics=("ndcg@10", "bpref", "judged@10", "judged@2"))
    assert ev.per_query["bpref"] == pytest.approx(BPREF_EXPECTED)
    assert ev.mean["bpref"] == pytest.approx(1 / 3)
    for metric, per_query in JUDGED_EXPECTED.items():
        assert ev.per_query[metric] == pytest.approx(per_query), metric
        assert ev.mean[metric] == pytest.approx(np.mean(list(per_query.values()))), metric
    assert list(ev.mean)[:4] == ["ndcg@10", "bpref", "judged@10", "judged@2"]  # in the order asked
    assert ev.per_query["ndcg@10"] == pytest.approx(EXPECTED["ndcg@10"])  # the ranx metrics unchanged


@pytest.mark.slow  # calls ranx itself: its numba kernels compile on a fresh install
def test_bpref_defined_where_ranx_gives_nan():
    from ranx import Qrels as RQrels
    from ranx import Run as RRun
    from ranx import evaluate

    qrels = {"q": {"a": 1, "c": 1}}  # relevant labels only, as BEIR qrels often are
    run = {"q": [("b", 0.9), ("a", 0.8), ("c", 0.5)]}
    rr = RRun({"q": dict(run["q"])})
    with np.errstate(all="ignore"):
        evaluate(RQrels(qrels), rr, ["bpref"], save_results_in_run=True)
    assert math.isnan(rr.scores["bpref"]["q"])
    assert evaluate_run(run, qrels, metrics=("bpref",)).per_query["bpref"] == {"q": 1.0}  # b is unjudged


def test_incomplete_metrics_without_labels_and_names():
    ev = evaluate_run({"q": [("a", 1.0)]}, {"q": {"a": 0, "b": 0}}, metrics=("bpref", "judged@10"))
    assert math.isnan(ev.mean["bpref"]) and "bpref" not in ev.per_query  # no relevant label
    assert ev.per_query["judged@10"] == {"q": 1.0}  # grade-0 labels are judgments too
    ev = evaluate_run({"q": [("a", 1.0)]}, {}, metrics=("bpref", "judged@10"))
    assert math.isnan(ev.mean["bpref"]) and math.isnan(ev.mean["judged@10"]) and ev.per_query == {}
    assert is_incomplete_metric("bpref") and is_incomplete_metric("judged@10")
    assert not is_incomplete_metric("ndcg@10") and not is_incomplete_metric("judged@x")
    assert not is_incomplete_metric("judged@0")


# ---- PNR -----------------------------------------------------------------------------------
PNR_QRELS = {
    # pairs (y_i > y_j): a>b c, a>c c, a>d c, b>c d, d>c d (b, d share a label: no pair) -> 3 / 2
    "mixed": {"a": 2, "b": 1, "c": 0, "d": 1},
    # e>f tie (neither), e>g discordant, e>h concordant -> 1 / 1 (ties as concordant: 2, as discordant: 0.5)
    "tie": {"e": 1, "f": 0, "g": 0, "h": 0},
    # all three pairs concordant, none discordant -> 3 / max(1, 0) = 3
    "perfect": {"a": 2, "b": 1, "c": 0},
    # one label value: no pairs, skipped
    "single": {"x": 1, "y": 1},
    # a unscored (-inf): a>b discordant (-inf < 0.3), a>c tie (-inf vs -inf) -> 0 / 1
    "unretrieved": {"a": 1, "b": 0, "c": 0},
}
PNR_SCORES = {
    "mixed": {"a": 0.9, "b": 0.5, "c": 0.7, "d": 0.5},
    "tie": {"e": 0.5, "f": 0.5, "g": 0.9, "h": 0.1},
    "perfect": {"a": 0.9, "b": 0.5, "c": 0.1},
    "single": {"x": 0.1, "y": 0.9},
    "unretrieved": {"b": 0.3},
}
PNR_EXPECTED = {"mixed": 1.5, "tie": 1.0, "perfect": 3.0, "unretrieved": 0.0}


def test_pnr_hand_computed():
    mean, per_query = pnr(PNR_QRELS, PNR_SCORES)
    assert per_query == pytest.approx(PNR_EXPECTED)
    assert set(per_query) == set(PNR_EXPECTED)  # "single" skipped
    assert mean == pytest.approx((1.5 + 1.0 + 3.0 + 0.0) / 4)


def test_pnr_of_a_run_treats_unretrieved_judged_docs_as_lowest():
    run = {"q": [("b", 0.4), ("zz", 0.3)]}  # judged a (label 2) and c (label 0) are missing
    qrels = {"q": {"a": 2, "b": 1, "c": 0}}
    assert scores_from_run(run, qrels) == {"q": {"a": -math.inf, "b": 0.4, "c": -math.inf}}
    # a>b discordant, a>c tie (-inf, -inf), b>c concordant -> 1 / 1
    ev = evaluate_run(run, qrels)
    assert ev.mean["pnr"] == pytest.approx(1.0)
    assert ev.per_query["pnr"] == pytest.approx({"q": 1.0})
    # exact scores, when given, replace the run's: a now ranks first -> 3 / max(1, 0)
    ev = evaluate_run(run, qrels, pnr_scores={"q": {"a": 0.9, "b": 0.4, "c": 0.1}})
    assert ev.mean["pnr"] == pytest.approx(3.0)


def test_pnr_absent_for_binary_single_valued_labels():
    ev = evaluate_run({"q": [("a", 1.0)]}, {"q": {"a": 1, "b": 1}})
    assert "pnr" not in ev.mean and "pnr" not in ev.per_query
    assert pnr({"q": {"a": 1}}, {})[1] == {}
    assert math.isnan(pnr({"q": {"a": 1}}, {})[0])


# ---- paired comparisons ------------------------------------------------------------------------
def _ev(values: dict[str, float], metric: str = "ndcg@10") -> Evaluation:
    return Evaluation({metric: float(np.mean(list(values.values())))}, {metric: dict(values)})


def test_compare_counts_wins_losses_ties():
    a = _ev({"q1": 0.2, "q2": 0.5, "q3": 0.9, "q4": 0.4, "q5": 0.0, "only_a": 1.0})
    b = _ev({"q1": 0.6, "q2": 0.7, "q3": 0.3, "q4": 0.4, "q5": 0.0, "only_b": 0.0})
    for test in ("permutation", "ttest"):
        c = compare(a, b, "ndcg@10", test=test)
        assert c.wins == ["q1", "q2"] and c.losses == ["q3"] and c.ties == 2
        # over the five shared queries: diffs +0.4, +0.2, -0.6, 0, 0
        assert c.delta == pytest.approx(0.0)
        assert c.mean_a == pytest.approx((0.2 + 0.5 + 0.9 + 0.4) / 5)
        assert c.mean_b == pytest.approx((0.6 + 0.7 + 0.3 + 0.4) / 5)
        assert 0.5 < c.p_value <= 1.0 and not c.significant
        assert c.test == test


def test_consistent_large_improvement_is_significant():
    rng = np.random.default_rng(0)
    base = rng.uniform(0.1, 0.5, size=30)
    gain = rng.uniform(0.2, 0.4, size=30)
    a = _ev({f"q{i}": float(v) for i, v in enumerate(base)})
    b = _ev({f"q{i}": float(v + g) for i, (v, g) in enumerate(zip(base, gain))})
    perm = compare(a, b, test="permutation")
    # every one of 30 paired differences is positive: no sign flip reaches the observed mean, so
    # the Monte-Carlo p is about 2 / (10000 + 1)
    assert perm.p_value < 1e-3 and perm.significant
    assert len(perm.wins) == 30 and perm.losses == [] and perm.ties == 0
    assert perm.delta == pytest.approx(float(gain.mean()))
    tt = compare(a, b, test="ttest")
    assert tt.p_value < 1e-10 and tt.significant
    # and the other way round it is a significant loss
    back = compare(b, a, test="ttest")
    assert back.delta == pytest.approx(-float(gain.mean())) and len(back.losses) == 30


def test_exact_permutation_p_value_for_three_queries():
    # 3 positive, distinct differences: of the 2^3 sign patterns only all-plus reaches the observed
    # mean and only all-minus its negative -> two-sided p = 2/8, however large the gain
    a = _ev({"q1": 0.1, "q2": 0.2, "q3": 0.3})
    b = _ev({"q1": 0.6, "q2": 0.9, "q3": 1.0})
    c = compare(a, b, test="permutation")
    assert c.p_value == pytest.approx(0.25)
    assert not c.significant


@pytest.mark.parametrize("test", ["permutation", "ttest"])
def test_identical_systems_have_p_one(test):
    rng = np.random.default_rng(1)
    vals = {f"q{i}": float(v) for i, v in enumerate(rng.uniform(size=30))}
    c = compare(_ev(vals), _ev(dict(vals)), test=test)
    assert c.p_value == 1.0 and c.delta == 0.0 and c.ties == 30 and c.wins == [] == c.losses


def test_unknown_test_raises():
    with pytest.raises(ValueError, match="unknown test"):
        compare(_ev({"q1": 0.1, "q2": 0.2}), _ev({"q1": 0.5, "q2": 0.3}), test="wilcoxon")


# ---- the paired permutation test, written out -------------------------------------------------
@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_the_permutation_test_agrees_with_scipy():
    from scipy import stats

    from retrieval.evaluation.measures import paired_permutation_p

    def scipy_p(x, y):
        return stats.permutation_test((y, x), lambda a, b, axis: np.mean(a - b, axis=axis), permutation_type="samples",
                                      n_resamples=10_000, alternative="two-sided", random_state=0,
                                      vectorized=True).pvalue

    for n in (3, 8, 13):  # at most 10,000 sign patterns: both enumerate them all, the same p exactly
        rng = np.random.default_rng(n)
        x, y = rng.random(n), rng.random(n) + 0.2
        assert paired_permutation_p(y - x) == pytest.approx(scipy_p(x, y), abs=1e-12)
    for n, shift in ((40, 0.05), (300, 0.0), (300, 0.05)):  # random patterns: within Monte Carlo error
        rng = np.random.default_rng(n)
        x, y = rng.random(n), np.clip(rng.random(n) + shift, 0, 1)
        p, ref = paired_permutation_p(y - x), scipy_p(x, y)
        assert abs(p - ref) < 4 * 2 * np.sqrt(max(ref, 0.01) * (1 - ref) / 10_000) + 1e-4, (n, p, ref)
    assert paired_permutation_p(np.full(50, 0.1)) == pytest.approx(2 / 10_001)  # nothing as far as all +0.1


def test_a_flipped_comparison_is_the_same_test_the_other_way():
    rng = np.random.default_rng(1)
    a = Evaluation({}, {"ndcg@10": {str(i): float(v) for i, v in enumerate(rng.random(30))}})
    b = Evaluation({}, {"ndcg@10": {str(i): float(v) for i, v in enumerate(rng.random(30))}})
    ab, ba = compare(a, b), compare(b, a)
    flipped = ab.flipped()
    assert (flipped.wins, flipped.losses, flipped.p_value) == (ba.wins, ba.losses, ab.p_value)
    assert (flipped.delta, flipped.interval.low, flipped.interval.high) == \
        pytest.approx((ba.delta, ba.interval.low, ba.interval.high), abs=1e-12)
