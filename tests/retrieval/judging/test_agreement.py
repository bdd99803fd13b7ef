"""Several judges: weighted κ per pair of judges (equal to scikit-learn's), Krippendorff's α over
all of them (the krippendorff package), intervals, confusion matrices, the pairs to adjudicate
first, and qrels merged by a chosen rule."""
from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from retrieval import Store
from retrieval.judging.agreement import agreement, kappa_from_counts, pair_agreement
from retrieval.judging.judgments import grades_by_pair, merged_grade, merged_qrels


def rows_of(grades: dict[str, list[int]], offset: int = 0) -> list[dict]:
    """Judgment rows: judge -> grades of pairs q<i>/d<i> (None: not graded)."""
    return [{"query_id": f"q{i // 3}", "doc_id": f"d{i}", "judge": judge, "grade": g, "query_text": "", "time": 0.0}
            for judge, gs in grades.items() for i, g in enumerate(gs, offset) if g is not None]


def test_kappa_equals_scikit_learns_and_the_confusion_matrix_counts_the_pairs():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 3, 60)
    b = np.where(rng.random(60) < 0.7, a, rng.integers(0, 3, 60))  # agrees on most pairs
    got = pair_agreement("ann", "bob", grades_by_pair(rows_of({"ann": list(a), "bob": list(b)})))
    assert got.shared == 60
    assert got.kappa == pytest.approx(cohen_kappa_score(a, b, weights="quadratic", labels=[0, 1, 2]), abs=1e-12)
    assert got.interval.low < got.kappa < got.interval.high and 0 < got.interval.low
    assert np.array(got.confusion).sum() == 60 and np.trace(got.confusion) == int((a == b).sum())
    assert got.exact == pytest.approx((a == b).mean())
    assert math.isnan(kappa_from_counts(np.array([[5, 0, 0], [0, 0, 0], [0, 0, 0]])))  # no spread: undefined


def test_alpha_over_three_judges_with_gaps_and_its_interval():
    import krippendorff

    ann = [2, 1, 0, 0, 2, 1, 1, 0, 2, 2, 0, 1]
    bob = [2, 1, 0, 1, 2, 1, None, 0, 2, 1, 0, 1]
    cy = [None, 1, 0, 0, 2, 2, 1, 0, None, 2, 0, 0]
    solo = rows_of({"dee": [2, 2]}, offset=100)  # pairs only one judge graded: no information on agreement
    result = agreement(rows_of({"ann": ann, "bob": bob, "cy": cy}) + solo)
    matrix = np.array([[np.nan if g is None else g for g in x] for x in (ann, bob, cy)], dtype=float)
    assert result.alpha == pytest.approx(krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal",
                                                            value_domain=[0, 1, 2]), abs=1e-9)
    assert result.items == 12 and result.judges == ["ann", "bob", "cy", "dee"]
    assert result.alpha_interval.low < result.alpha < result.alpha_interval.high
    assert [(p.judge_a, p.judge_b) for p in result.pairs] == [("ann", "bob"), ("ann", "cy"), ("bob", "cy")]
    assert result.pairs[0].shared == 11
    spread = [max(g.values()) - min(g.values()) for _, _, g in result.adjudicate]
    assert spread == sorted(spread, reverse=True) and spread and min(spread) > 0  # the widest disagreement first


def test_judges_who_agree_have_kappa_one_and_strangers_none():
    same = agreement(rows_of({"ann": [0, 1, 2, 2, 1], "bob": [0, 1, 2, 2, 1]}))
    assert same.pairs[0].kappa == pytest.approx(1.0) and same.alpha == pytest.approx(1.0) and not same.adjudicate
    apart = agreement(rows_of({"ann": [0, 1, None], "bob": [None, None, 2]}))
    assert apart.pairs == [] and math.isnan(apart.alpha) and not apart.alpha_interval.defined


def test_merge_rules(tmp_path):
    assert [merged_grade([0, 2], r) for r in ("median", "majority", "min", "max")] == [0, 0, 0, 2]
    assert [merged_grade([2, 2, 0], r) for r in ("median", "majority", "min", "max")] == [2, 2, 0, 2]
    assert merged_grade([0, 1, 2], "majority") == 0  # a three-way tie: the lower
    store = Store(tmp_path / "s.sqlite3")
    for judge, grade in (("ann", 2), ("bob", 0), ("cy", 2)):
        store.put_judgment("c", "q1", "text", "d1", grade, judge)
    store.put_judgment("c", "q1", "text", "d2", 1, "bob")
    rows = store.judgments("c")
    assert merged_qrels(rows, "median") == {"q1": {"d1": 2, "d2": 1}}
    assert merged_qrels(rows, "min") == {"q1": {"d1": 0, "d2": 1}}
    assert merged_qrels(rows, "ann") == {"q1": {"d1": 2}}  # one judge's own grades
    with pytest.raises(ValueError, match="unknown merge rule 'zed'.*ann, bob, cy"):
        merged_qrels(rows, "zed")
