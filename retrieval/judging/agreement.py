"""How far judges agree: per pair of judges Cohen's weighted κ with its 95% interval and their
confusion matrix, over all judges Krippendorff's α (ordinal) with its interval, the pairs to
adjudicate (judges gave them different grades, the widest spread first). The rules that merge
several judges' grades into qrels are ``judgments.MERGE_RULES``.

* Weighted κ (Cohen, "Weighted kappa", Psychological Bulletin 70(4), 1968) with quadratic weights
  — grades 0 < 1 < 2 are ordered, and a 0 against a 2 is a worse disagreement than a 1 against a 2
  — over the pairs both judges graded, as ``sklearn.metrics.cohen_kappa_score(weights="quadratic")``
  computes it; its interval is the percentile bootstrap over those pairs (``INTERVAL_RESAMPLES``
  resamples, seeded), each resample's κ from its confusion counts.
* Krippendorff's α, ordinal (Krippendorff, "Content Analysis", 4th ed., Sage 2018, ch. 12; as the
  ``krippendorff`` package computes it), over every pair any two judges graded (pairs one judge
  graded carry no information on agreement and are left out); interval: percentile bootstrap over
  those pairs (``ALPHA_RESAMPLES``).

Both bootstraps cost the same for 60 pairs as for 600,000 (resampling the pairs themselves grew with
them; ``bench/judging_views.py`` times ``/agreement`` after a large import): κ reads a pair only
through its cell of the confusion matrix, so a resample of n pairs drawn with replacement is a
multinomial draw of n over the cells, in the shared pairs' proportions; α reads a pair only through
how many judges gave it each grade (its *pattern*; a few dozen occur), so a resample is a
multinomial draw over the patterns, and its α comes from the coincidence matrix those counts
weight. Each is the same distribution as resampling the pairs themselves (Efron and
Tibshirani, "An Introduction to the Bootstrap", Chapman & Hall 1993, ch. 6: the nonparametric
bootstrap draws from the empirical distribution, here one on finitely many cells or patterns).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retrieval.evaluation.intervals import Interval, percentile_interval
from retrieval.judging.judgments import GRADES, Pair, disagreements, grades_by_pair

INTERVAL_RESAMPLES = 2_000
ALPHA_RESAMPLES = 2_000
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
    k = len(GRADES)
    confusion = np.zeros((k, k), dtype=np.int64)
    for g in grades.values():
        if a in g and b in g:
            confusion[g[a], g[b]] += 1
    shared = int(confusion.sum())
    kappa = float(kappa_from_counts(confusion)) if shared >= 2 else float("nan")
    interval = Interval.undefined()
    if shared >= 2 and not np.isnan(kappa):
        rng = np.random.default_rng(seed)
        boot = rng.multinomial(shared, confusion.ravel() / shared, size=INTERVAL_RESAMPLES).reshape(-1, k, k)
        interval = percentile_interval(kappa_from_counts(boot))
    exact = float(np.trace(confusion) / shared) if shared else float("nan")
    return PairAgreement(a, b, shared, kappa, interval, exact, confusion.astype(int).tolist())


def _ordinal_distances(n_v: np.ndarray) -> np.ndarray:
    """Krippendorff's ordinal δ² between grades (..., k, k), from the pairable values of each grade
    ``n_v`` (..., k): (the values from grade c to grade k − (n_c + n_k) / 2)²."""
    k = n_v.shape[-1]
    cum = np.concatenate([np.zeros(n_v.shape[:-1] + (1,)), np.cumsum(n_v, axis=-1)], axis=-1)
    lo, hi = np.minimum.outer(np.arange(k), np.arange(k)), np.maximum.outer(np.arange(k), np.arange(k))
    between = cum[..., hi + 1] - cum[..., lo]
    squared: np.ndarray = (between - (n_v[..., :, None] + n_v[..., None, :]) / 2) ** 2  # numpy's fancy index: Any
    return squared


def alpha_from_patterns(patterns: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Krippendorff's α (ordinal) of items given by their ``patterns`` (P, k: how many judges gave
    each grade, two or more in all) taken ``weights`` times each (P,, or R, P for R data sets at once):
    1 − (n − 1)·Σ o·δ² / Σ (n_c·n_k − [c = k]·n_c)·δ², o the coincidence matrix; NaN where fewer than
    two grades occur."""
    patterns = np.asarray(patterns, dtype=np.float64)
    k = patterns.shape[1]
    m = patterns.sum(axis=1)
    per = (patterns[:, :, None] * patterns[:, None, :] - patterns[:, :, None] * np.eye(k)) / (m - 1)[:, None, None]
    o = np.tensordot(np.asarray(weights, dtype=np.float64), per, axes=([-1], [0]))  # (..., k, k)
    n_v = o.sum(axis=-1)
    n = n_v.sum(axis=-1)
    d = _ordinal_distances(n_v)
    expected = (n_v[..., :, None] * n_v[..., None, :] - n_v[..., :, None] * np.eye(k)) / (n - 1)[..., None, None]
    observed, chance = (o * d).sum(axis=(-2, -1)), (expected * d).sum(axis=(-2, -1))
    spread = (n_v > 0).sum(axis=-1) >= 2
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(spread & (chance > 0), 1 - observed / np.where(chance > 0, chance, 1), np.nan)


def agreement(rows: list[dict[str, Any]], seed: int = SEED) -> Agreement:
    """Every judge pair's κ, α over all judges, and the pairs to adjudicate, from stored judgments."""
    grades = grades_by_pair(rows)
    judges = sorted({j for g in grades.values() for j in g})
    pairs = [pair_agreement(a, b, grades, seed) for i, a in enumerate(judges) for b in judges[i + 1:]]
    pairs = [p for p in pairs if p.shared]
    counts: Counter[tuple[int, ...]] = Counter()
    for g in grades.values():
        if len(g) >= 2:
            counts[tuple(np.bincount(list(g.values()), minlength=len(GRADES)).tolist())] += 1
    items = sum(counts.values())
    alpha, interval = float("nan"), Interval.undefined()
    if len(judges) >= 2 and items:
        patterns, weights = np.array(list(counts)), np.array(list(counts.values()))
        alpha = float(alpha_from_patterns(patterns, weights))
        if not np.isnan(alpha):
            rng = np.random.default_rng(seed)
            boot = rng.multinomial(items, weights / items, size=ALPHA_RESAMPLES)
            interval = percentile_interval(alpha_from_patterns(patterns, boot))
    return Agreement(judges, pairs, alpha, interval, items, disagreements(rows))
