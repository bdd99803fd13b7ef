"""The combinations: mid-rank percentiles by hand, the label-free one unchanged by any strictly increasing
transform of a predictor and weighing each family of evidence once, the fitted one ridge regression toward
the label-free weights (against augmented least squares and scikit-learn's line) and never shown the label
of the query it predicts."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.qpp import combine

ORIENT = {"a": "easier", "b": "harder", "c": "easier"}


def test_mid_rank_percentiles_by_hand():
    got = combine.percentiles([3.0, 1.0, 2.0, 2.0, None, float("nan")])
    # of the four numbers: 3 has 3 below (3.5/4), 1 none (0.5/4), each 2 one below and two equal (2/4)
    assert got[:4].tolist() == [3.5 / 4, 0.5 / 4, 2 / 4, 2 / 4]
    assert np.isnan(got[4]) and np.isnan(got[5])
    assert combine.oriented([3.0, 1.0], "harder").tolist() == [0.25, 0.75]


def test_the_label_free_combination_averages_what_each_query_has():
    got = combine.label_free({"a": [1.0, 2.0, None], "b": [5.0, 1.0, 3.0]}, ORIENT)
    # a: 1/4, 3/4 of its two; b (harder) turned: 5 -> 1 - 5/6, 1 -> 1 - 1/6, 3 -> 1 - 3/6
    assert got.tolist() == pytest.approx([(0.25 + 1 / 6) / 2, (0.75 + 5 / 6) / 2, 0.5])
    assert combine.label_free({"a": [None, None]}, ORIENT).tolist() == [0.5, 0.5]


values = st.lists(st.one_of(st.none(), st.integers(-50, 50).map(float)), min_size=1, max_size=30)


def increasing(xs: list[float | None], steps: list[float], base: float) -> list[float | None]:
    """``xs`` mapped through a strictly increasing function: distinct values, in order, to ``base`` plus
    the running sum of positive steps (any such function, restricted to the values there are)."""
    distinct = sorted({x for x in xs if x is not None})
    image = dict(zip(distinct, base + np.cumsum([steps[i % len(steps)] for i in range(len(distinct))])))
    return [None if x is None else float(image[x]) for x in xs]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_the_label_free_combination_is_the_same_under_any_increasing_transform(data):
    n = data.draw(st.integers(1, 25))
    column = st.lists(st.one_of(st.none(), st.integers(-20, 20).map(float)), min_size=n, max_size=n)
    features = {key: data.draw(column) for key in ORIENT}
    steps = data.draw(st.lists(st.floats(0.001, 1e6), min_size=1, max_size=10))
    base = data.draw(st.floats(-1e6, 1e6))
    which = data.draw(st.sampled_from(sorted(ORIENT)))
    moved = {**features, which: increasing(features[which], steps, base)}
    assert combine.label_free(moved, ORIENT).tolist() == combine.label_free(features, ORIENT).tolist()
    # and a harder-means predictor turned round is the easier-means one of the negated values
    negated = {**features, "b": [None if v is None else -v for v in features["b"]]}
    assert combine.label_free(negated, {**ORIENT, "b": "easier"}).tolist() == pytest.approx(
        combine.label_free(features, ORIENT).tolist())


def _features(n: int, seed: int) -> tuple[dict[str, list[float | None]], list[str]]:
    rng = np.random.default_rng(seed)
    feats: dict[str, list[float | None]] = {k: rng.normal(size=n).tolist() for k in ORIENT}
    feats["c"][0] = None  # one query lacks a predictor
    return feats, [f"q{i:03d}" for i in range(n)]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(combine.MIN_FIT, 40), seed=st.integers(0, 10_000), which=st.integers(0, 39),
       label=st.floats(0, 1), judged_share=st.floats(0.5, 1.0))
def test_a_fitted_prediction_never_reads_the_label_of_its_own_query(n, seed, which, label, judged_share):
    feats, ids = _features(n, seed)
    rng = np.random.default_rng(seed + 1)
    judged = ids[:max(combine.MIN_FIT, int(n * judged_share))]
    labels = {q: float(rng.uniform()) for q in judged}
    target = judged[which % len(judged)]
    before = combine.fitted(feats, ORIENT, ids, labels)
    after = combine.fitted(feats, ORIENT, ids, {**labels, target: label})
    assert before is not None and after is not None
    i = ids.index(target)
    assert after.predicted[i] == before.predicted[i]
    assert (before.judged, before.folds) == (len(judged), min(combine.FOLDS, len(judged)))


def test_fewer_judged_queries_than_min_fit_fit_nothing():
    feats, ids = _features(20, 0)
    assert combine.fitted(feats, ORIENT, ids, {q: 0.5 for q in ids[:combine.MIN_FIT - 1]}) is None
    assert combine.fitted(feats, ORIENT, ids, {q: 0.5 for q in ids[:combine.MIN_FIT]}) is not None


def test_the_label_free_combination_weighs_each_family_of_evidence_once():
    feats = {"a": [1.0, 2.0], "c": [1.0, 2.0], "b": [1.0, 2.0]}
    # a and c one family (each 1/4, 3/4), b its own, turned (harder: 3/4, 1/4): the families' means averaged
    got = combine.label_free(feats, ORIENT, {"a": "x", "c": "x", "b": "y"})
    assert got.tolist() == pytest.approx([(0.25 + 0.75) / 2, (0.75 + 0.25) / 2])
    # without families the two of x would outweigh b: (1/4 + 1/4 + 3/4) / 3
    assert combine.label_free(feats, ORIENT).tolist() == pytest.approx([1.25 / 3, 1.75 / 3])
    # a family a query lacks entirely is left out of its mean
    got = combine.label_free({"a": [None, 2.0], "c": [None, 1.0], "b": [1.0, 2.0]}, ORIENT, {"a": "x", "c": "x"})
    assert got[0] == pytest.approx(0.75)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), alpha=st.sampled_from([0.1, 1.0, 10.0, 100.0]))
def test_the_departure_from_the_label_free_weights_is_ridge_regression_as_augmented_least_squares(seed, alpha):
    rng = np.random.default_rng(seed)
    x, y = rng.uniform(size=(25, 4)), rng.uniform(size=25)
    z = x.mean(axis=1) + rng.normal(scale=0.05, size=25)
    v, gamma, b = combine.shrunk(x, z, y, alpha)
    # the same objective written as one least-squares problem: data rows, then √α·I rows on v alone
    design = np.vstack([np.column_stack([x, z, np.ones(25)]), np.column_stack([np.sqrt(alpha) * np.eye(4),
                                                                                 np.zeros((4, 2))])])
    solution = np.linalg.lstsq(design, np.concatenate([y, np.zeros(4)]), rcond=None)[0]
    assert v.tolist() == pytest.approx(solution[:4].tolist(), abs=1e-8)
    assert (gamma, b) == pytest.approx((solution[4], solution[5]), abs=1e-8)


def test_an_infinite_penalty_is_least_squares_on_the_label_free_combination():
    from sklearn.linear_model import LinearRegression

    rng = np.random.default_rng(7)
    x, y = rng.uniform(size=(30, 3)), rng.uniform(size=30)
    z = x.mean(axis=1)
    v, gamma, b = combine.shrunk(x, z, y, float("inf"))
    line = LinearRegression().fit(z[:, None], y)
    assert v.tolist() == [0.0, 0.0, 0.0]
    assert (gamma, b) == pytest.approx((line.coef_[0], line.intercept_))


def test_labels_that_follow_the_label_free_combination_keep_its_weights():
    feats, ids = _features(40, 5)
    z = combine.label_free(feats, ORIENT)
    x = np.where(np.isnan(m := np.column_stack([combine.oriented(feats[k], ORIENT[k]) for k in ORIENT])), 0.5, m)
    assert combine.chosen_alpha(x, z, 0.1 + 0.8 * z, ids) == float("inf")
    got = combine.fitted(feats, ORIENT, ids, {q: 0.1 + 0.8 * float(v) for q, v in zip(ids, z)})
    assert got is not None and got.predicted.tolist() == pytest.approx((0.1 + 0.8 * z).tolist())
    # labels that follow one predictor alone draw the weights away from equal ones: a finite α
    assert combine.chosen_alpha(x, z, x[:, 0], ids) < float("inf")


def test_an_unjudged_query_is_predicted_by_the_model_fitted_on_every_judged_one():
    feats, ids = _features(30, 3)
    rng = np.random.default_rng(4)
    labels = {q: float(rng.uniform(0.2, 0.8)) for q in ids[:20]}
    got = combine.fitted(feats, ORIENT, ids, labels)
    assert got is not None
    z = combine.label_free(feats, ORIENT)
    x = np.column_stack([combine.oriented(feats[k], ORIENT[k]) for k in ORIENT])
    x = np.where(np.isnan(x), combine.MISSING, x)
    y = np.array([labels[q] for q in ids[:20]])
    alpha = combine.chosen_alpha(x[:20], z[:20], y, ids[:20])
    v, gamma, b = combine.shrunk(x[:20], z[:20], y, alpha)
    assert got.predicted[20:].tolist() == pytest.approx(np.clip(x[20:] @ v + gamma * z[20:] + b, 0, 1).tolist())
    # a judged query: the model of the other folds, its α chosen on them
    fold = combine.folds_of(ids[:20])
    others = fold != fold[0]
    kept = [q for q, o in zip(ids[:20], others) if o]
    alpha = combine.chosen_alpha(x[:20][others], z[:20][others], y[others], kept)
    v, gamma, b = combine.shrunk(x[:20][others], z[:20][others], y[others], alpha)
    assert got.predicted[0] == pytest.approx(float(np.clip(x[0] @ v + gamma * z[0] + b, 0, 1)))


def test_the_folds_depend_on_the_judged_ids_alone():
    ids = [f"q{i}" for i in range(12)]
    assert combine.folds_of(ids).tolist() == combine.folds_of(list(reversed(ids)))[::-1].tolist()
    assert sorted(np.bincount(combine.folds_of(ids)).tolist()) == [2, 2, 2, 3, 3]
