"""How far judges agree: per pair of judges Cohen's weighted κ with its 95% interval and their
confusion matrix, over all judges Krippendorff's α (ordinal) with its interval, the pairs to
adjudicate (judges gave them different grades, the widest spread first). The rules that merge
several judges' grades into qrels are ``judgments.MERGE_RULES``.

* Weighted κ (Cohen, "Weighted kappa", Psychological Bulletin 70(4), 1968) with quadratic weights
  — grades 0 < 1 < 2 are ordered, and a 0 against a 2 is a worse disagreement than a 1 against a 2
  — over the pairs both judges graded, as ``sklearn.metrics.cohen_kappa_score(weights="quadratic")``
  computes it; its interval is the percentile bootstrap over those pairs (``INTERVAL_RESAMPLES``
  resamples, seeded), each resample's κ from its confusion counts.
* Krippendorff's α, ordinal (Krippendorff, "Content Analysis", 4th ed., Sage 2018, ch. 12; the
  ``krippendorff`` package), over every pair any two judges graded (pairs one judge graded carry
  no information on agreement and are left out); interval: percentile bootstrap over those pairs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .intervals import Interval, percentile_interval
from .judgments import GRADES, Pair, disagreements, grades_by_pair

INTERVAL_RESAMPLES = 2_000
ALPHA_RESAMPLES = 1_000  # each resample runs the krippendorff package once
SEED = 0


@dataclass
class PairAgreement:
    """Two judges over the pairs both graded."""

    judge_a: str
    judge_b: str
    shared: int  # pairs both graded
    kappa: float  # quadratic-weighted Cohen's κ (NaN when undefined: fewer than 2 pairs, or no spread)
    interval: Interval
    exact: float  # share of the shared pairs given the same grade
    confusion: list[list[int]] = field(default_factory=list)  # [a's grade][b's grade] counts, grades 0, 1, 2


@dataclass
class Agreement:
    judges: list[str]
    pairs: list[PairAgreement]  # every pair of judges with at least one shared pair
    alpha: float  # Krippendorff's α (ordinal) over the pairs two or more judges graded; NaN when undefined
    alpha_interval: Interval
    items: int  # (query, document) pairs two or more judges graded
    adjudicate: list[tuple[str, str, dict[str, int]]]  # (query, document, {judge: grade}): disagreements, widest first


def _weights(k: int) -> np.ndarray:
    i = np.arange(k)
    return (i[:, None] - i[None, :]) ** 2.0


def kappa_from_counts(counts: np.ndarray) -> np.ndarray:
    """Quadratic-weighted κ of confusion matrices ``counts`` (..., k, k): 1 − Σ w·O / Σ w·E."""
    counts = np.asarray(counts, dtype=np.float64)
    k = counts.shape[-1]
    w = _weights(k)
    n = counts.sum(axis=(-2, -1), keepdims=True)
    expected = counts.sum(axis=-1, keepdims=True) * counts.sum(axis=-2, keepdims=True) / np.where(n > 0, n, 1)
    num, den = (w * counts).sum(axis=(-2, -1)), (w * expected).sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, 1 - num / np.where(den > 0, den, 1), np.nan)


def pair_agreement(a: str, b: str, grades: dict[Pair, dict[str, int]], seed: int = SEED) -> PairAgreement:
    """``a`` and ``b`` over the pairs both graded (module docstring)."""
    shared = [(g[a], g[b]) for g in grades.values() if a in g and b in g]
    k = len(GRADES)
    x = np.array([s[0] for s in shared], dtype=np.int64)
    y = np.array([s[1] for s in shared], dtype=np.int64)
    cells = x * k + y
    confusion = np.bincount(cells, minlength=k * k).reshape(k, k) if len(shared) else np.zeros((k, k), dtype=int)
    kappa = float(kappa_from_counts(confusion)) if len(shared) >= 2 else float("nan")
    interval = Interval.undefined()
    if len(shared) >= 2 and not np.isnan(kappa):
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, len(shared), size=(INTERVAL_RESAMPLES, len(shared)))
        boot = np.apply_along_axis(np.bincount, 1, cells[idx], minlength=k * k).reshape(-1, k, k)
        interval = percentile_interval(kappa_from_counts(boot))
    exact = float(np.mean(x == y)) if len(shared) else float("nan")
    return PairAgreement(a, b, len(shared), kappa, interval, exact, confusion.astype(int).tolist())


def alpha_of(matrix: np.ndarray) -> float:
    """Krippendorff's α (ordinal) of a judges × items matrix of grades (NaN: not graded)."""
    import krippendorff

    if matrix.shape[1] < 2 or len(np.unique(matrix[~np.isnan(matrix)])) < 2:
        return float("nan")
    return float(krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal",
                                    value_domain=list(GRADES)))


def agreement(rows: list[dict], seed: int = SEED) -> Agreement:
    """Every judge pair's κ, α over all judges, and the pairs to adjudicate, from stored judgments."""
    grades = grades_by_pair(rows)
    judges = sorted({j for g in grades.values() for j in g})
    pairs = [pair_agreement(a, b, grades, seed) for i, a in enumerate(judges) for b in judges[i + 1:]]
    pairs = [p for p in pairs if p.shared]
    multi = [g for g in grades.values() if len(g) >= 2]
    matrix = np.array([[g.get(j, np.nan) for g in multi] for j in judges], dtype=np.float64).reshape(len(judges),
                                                                                                     len(multi))
    alpha, interval = float("nan"), Interval.undefined()
    if len(judges) >= 2 and multi:
        alpha = alpha_of(matrix)
        if not np.isnan(alpha):
            rng = np.random.default_rng(seed)
            interval = percentile_interval([alpha_of(matrix[:, rng.integers(0, len(multi), len(multi))])
                                            for _ in range(ALPHA_RESAMPLES)])
    return Agreement(judges, pairs, alpha, interval, len(multi), disagreements(rows))
