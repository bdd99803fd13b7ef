"""95% intervals: the bootstrap over queries covers what it should, is seeded, and the words a
comparison is written in follow from its interval and p-value."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.evaluation.intervals import (
    BUDGET,
    MIN_RESAMPLES,
    RESAMPLES,
    Interval,
    mean_interval,
    proportion_interval,
    resamples_for,
    sign_flip_test,
)
from retrieval.evaluation.measures import Evaluation, compare
from retrieval.evaluation.metrics import cell, conclusion, interval_text


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_the_interval_covers_the_true_mean_about_95_times_in_100():
    rng = np.random.default_rng(7)
    trials, covered = 300, 0
    for _ in range(trials):
        sample = rng.beta(2, 5, size=60)  # skewed, bounded like a metric; true mean 2/7
        iv = mean_interval(sample)
        covered += iv.low <= 2 / 7 <= iv.high
    assert 0.90 <= covered / trials <= 0.99


def test_the_interval_is_seeded_and_narrows_with_more_queries():
    rng = np.random.default_rng(0)
    small, large = rng.random(30), rng.random(3000)
    assert mean_interval(small) == mean_interval(list(small))  # the same values, the same interval
    assert mean_interval(small).low <= small.mean() <= mean_interval(small).high
    assert mean_interval(large).width < mean_interval(small).width / 5


def test_too_few_queries_have_no_interval_and_constant_values_a_point():
    assert not mean_interval([]).defined and not mean_interval([0.5]).defined
    assert mean_interval([1.0, 1.0, 1.0]) == Interval(1.0, 1.0)
    assert mean_interval([0.2, float("nan"), 0.4]).defined  # NaN values are left out
    assert Interval.undefined().to_json() == [None, None]
    assert cell(0.5, "", Interval.undefined()) == "0.5000" and interval_text(None) == ""


def test_resamples_shrink_with_many_queries_within_the_budget():
    assert resamples_for(100) == RESAMPLES
    assert resamples_for(5_000) == BUDGET // 5_000
    assert resamples_for(10_000_000) == MIN_RESAMPLES


def test_paired_interval_sees_a_small_consistent_gain_that_unpaired_ones_miss():
    rng = np.random.default_rng(3)
    a = rng.random(80)  # queries vary a lot; B is A plus a small gain on every query
    b = np.clip(a + 0.03 + rng.normal(0, 0.01, 80), 0, 1)
    qa, qb = dict(enumerate(a)), dict(enumerate(b))
    diff = sign_flip_test(b - a).interval  # the paired interval: of the per-query differences
    assert diff.excludes(0.0) and diff.low > 0
    assert mean_interval(a).high > mean_interval(b).low  # the two means' intervals overlap
    cmp = compare(Evaluation({}, {"ndcg@10": qa}), Evaluation({}, {"ndcg@10": qb}))
    assert cmp.interval == diff and cmp.outcome == "b" and cmp.queries == 80
    assert conclusion("BM25", "Hybrid", cmp) == (
        f"Hybrid beats BM25 by {cmp.delta:.3f} [{diff.low:.3f}, {diff.high:.3f}] nDCG@10 (p < 0.001, 80 queries)")
    flipped = compare(Evaluation({}, {"ndcg@10": qb}), Evaluation({}, {"ndcg@10": qa}))
    assert flipped.outcome == "a"
    assert conclusion("Hybrid", "BM25", flipped).startswith(f"Hybrid beats BM25 by {cmp.delta:.3f} [{diff.low:.3f}, ")


def test_noise_is_not_separable_and_says_so():
    rng = np.random.default_rng(5)
    qa, qb = dict(enumerate(rng.random(40))), dict(enumerate(rng.random(40)))
    cmp = compare(Evaluation({}, {"ndcg@10": qa}), Evaluation({}, {"ndcg@10": qb}))
    assert cmp.outcome == "open" and cmp.interval.low < 0 < cmp.interval.high
    line = conclusion("prod", "Hybrid", cmp)
    assert line.startswith("Hybrid and prod: not separable yet (Δ ") and "40 queries)" in line
    one = compare(Evaluation({}, {"ndcg@10": {"q": 0.2}}), Evaluation({}, {"ndcg@10": {"q": 0.9}}))
    assert conclusion("A", "B", one) == "B and A: too few queries to compare (1 with labels)"


def test_wilson_interval_of_a_share():
    none = proportion_interval(0, 10)  # no failure seen in 10 queries: up to 28% is still possible
    assert none.low == 0.0 and none.high == pytest.approx(0.2775, abs=1e-4)
    half = proportion_interval(50, 100)
    assert half.low == pytest.approx(0.4038, abs=1e-4) and half.high == pytest.approx(0.5962, abs=1e-4)
    assert math.isnan(proportion_interval(0, 0).low)


# ---- one rule for a difference: the sign-flip test and its inversion ---------------------------
def test_the_user_case_an_interval_above_0_beside_not_separable_cannot_happen():
    # per-query differences where the percentile bootstrap's interval lies above 0 while the
    # permutation test says p > 0.05 (what the bootstrap interval used to show beside "not separable")
    rng = np.random.default_rng(11)
    for _ in range(2_000):
        d = np.round(rng.choice([-1, 0, 0, 0, 1], size=14) * rng.random(14), 2)
        if mean_interval(d).low > 0 and not sign_flip_test(d).p_value < 0.05:
            break
    else:
        pytest.fail("no such case found")
    cmp = compare(Evaluation({}, {"ndcg@10": dict(enumerate(np.zeros(14)))}),
                  Evaluation({}, {"ndcg@10": dict(enumerate(d))}))
    assert cmp.outcome == "open" and cmp.interval.low <= 0 <= cmp.interval.high
    assert "not separable yet" in conclusion("A", "B", cmp)


_diffs = st.lists(st.integers(-100, 100).map(lambda v: v / 100), min_size=2, max_size=30)


@settings(max_examples=80, deadline=None)
@given(_diffs)
def test_interval_excludes_0_iff_p_below_005_iff_a_verdict(values):
    d = np.array(values)
    flip = sign_flip_test(d)
    cmp = compare(Evaluation({}, {"m": dict(enumerate(np.zeros(len(d))))}), Evaluation({}, {"m": dict(enumerate(d))}),
                  "m")
    if np.allclose(d, 0):
        assert cmp.interval == Interval(0.0, 0.0) and cmp.p_value == 1.0 and cmp.same
    else:
        assert (cmp.p_value, cmp.interval) == (flip.p_value, flip.interval) and not cmp.same
    assert cmp.interval.excludes(0.0) == (cmp.p_value < 0.05) == (cmp.outcome != "open")
    said = conclusion("A", "B", cmp)
    if cmp.outcome != "open":
        assert (cmp.outcome == "b") == (cmp.delta > 0)
        assert "beats" in said and "not separable" not in said
    elif cmp.same:
        assert said == f"B and A: the same on all {len(d)} queries (Δ 0 m)"
    else:
        assert "not separable" in said and "beats" not in said and "the same" not in said


def test_two_systems_equal_on_every_query_are_said_to_be_the_same_not_unseparated_yet():
    # what the three-way fusion at μ 0 is beside the hybrid it reduces to: equal query by query,
    # to rounding — "not separable yet" would promise more queries might tell them apart
    rng = np.random.default_rng(3)
    a = rng.random(40)
    cmp = compare(Evaluation({}, {"ndcg@10": dict(enumerate(a))}),
                  Evaluation({}, {"ndcg@10": dict(enumerate(a + 1e-12))}))
    assert cmp.same and cmp.outcome == "open"
    assert conclusion("Hybrid", "Hybrid (3)", cmp) == "Hybrid (3) and Hybrid: the same on all 40 queries (Δ 0 nDCG@10)"
    one_apart = dict(enumerate(a))
    one_apart[0] = a[0] + 0.01
    near = compare(Evaluation({}, {"ndcg@10": dict(enumerate(a))}), Evaluation({}, {"ndcg@10": one_apart}))
    assert not near.same and "not separable yet" in conclusion("A", "B", near)


@settings(max_examples=40, deadline=None)
@given(_diffs, st.floats(-1.5, 1.5))
def test_the_interval_is_the_set_of_shifts_the_test_does_not_reject(values, shift):
    d = np.array(values)
    iv = sign_flip_test(d).interval
    assert iv.low <= d.mean() <= iv.high
    if min(abs(shift - iv.low), abs(shift - iv.high)) > 1e-9:  # off the ends' rounding
        assert (sign_flip_test(d - shift).p_value >= 0.05) == (iv.low <= shift <= iv.high)


def test_few_queries_never_reach_005_and_have_an_unbounded_interval():
    for n in (2, 5):
        flip = sign_flip_test(np.full(n, 0.3))
        assert flip.exact and flip.p_value == pytest.approx(2 / 2 ** n)
        assert flip.interval.low == -math.inf and flip.interval.high == math.inf and not flip.interval.excludes(0)
    six = sign_flip_test(np.full(6, 0.3))  # 2 / 64 < 0.05: bounded, above 0
    assert six.p_value < 0.05 and 0 < six.interval.low <= 0.3 <= six.interval.high < math.inf
    assert not sign_flip_test([0.4]).interval.defined
    few = compare(Evaluation({}, {"m": {1: 0.1, 2: 0.2, 3: 0.3}}), Evaluation({}, {"m": {1: 0.5, 2: 0.6, 3: 0.9}}), "m")
    assert few.interval.to_json() == [None, None] and "inf" not in conclusion("A", "B", few)
    assert conclusion("A", "B", few) == ("B and A: not separable on 3 queries (Δ +0.467 m, p = 0.250; a difference "
                                         "needs at least 6 queries to reach p < 0.05)")
