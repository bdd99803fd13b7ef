"""The combinations: mid-rank percentiles by hand, the label-free one unchanged by any strictly increasing
transform of a predictor, the fitted one ridge's (against scikit-learn's) and never shown the label of the
query it predicts."""
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


def test_an_unjudged_query_is_predicted_by_the_model_fitted_on_every_judged_one():
    from sklearn.linear_model import Ridge

    feats, ids = _features(30, 3)
    rng = np.random.default_rng(4)
    labels = {q: float(rng.uniform(0.2, 0.8)) for q in ids[:20]}
    got = combine.fitted(feats, ORIENT, ids, labels)
    assert got is not None
    x = np.column_stack([combine.oriented(feats[k], ORIENT[k]) for k in ORIENT])
    x = np.where(np.isnan(x), combine.MISSING, x)
    model = Ridge(alpha=combine.ALPHA).fit(x[:20], [labels[q] for q in ids[:20]])
    assert got.predicted[20:].tolist() == pytest.approx(np.clip(model.predict(x[20:]), 0, 1).tolist())
    # a judged query: the model of the other folds
    fold = combine.folds_of(ids[:20])
    others = fold != fold[0]
    model = Ridge(alpha=combine.ALPHA).fit(x[:20][others], np.array([labels[q] for q in ids[:20]])[others])
    assert got.predicted[0] == pytest.approx(float(np.clip(model.predict(x[:1]), 0, 1)[0]))


def test_the_folds_depend_on_the_judged_ids_alone():
    ids = [f"q{i}" for i in range(12)]
    assert combine.folds_of(ids).tolist() == combine.folds_of(list(reversed(ids)))[::-1].tolist()
    assert sorted(np.bincount(combine.folds_of(ids)).tolist()) == [2, 2, 2, 3, 3]
