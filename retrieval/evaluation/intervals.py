"""How sure a figure is: 95% confidence intervals over queries for a mean metric, for the paired
difference of two systems (``sign_flip_test``), and for a share of queries (``proportion_interval``,
Wilson).

A mean: the percentile bootstrap over queries (Efron and Tibshirani, "An Introduction to the
Bootstrap", Chapman & Hall 1993, ch. 13; in IR evaluation Sakai, "Evaluating Evaluation Metrics
based on the Bootstrap", SIGIR 2006): the queries are the sample, a resample draws as many queries
with replacement, and the interval is the 2.5th and 97.5th percentiles of the resampled means. The
bootstrap makes no normality assumption, which matters for metrics that pile up at 0 and 1 (nDCG@10
on a few dozen judged queries), and it is seeded: the same per-query values always give the same
interval.

A difference of two systems on the same queries: one rule gives both its p-value and its interval,
the paired randomization (sign-flip) test (``sign_flip_test``), so that "its interval excludes 0",
"p < 0.05" and "one system is the better" always say the same thing.

Resamples: ``RESAMPLES`` (10,000) for up to ``FULL_UP_TO`` queries, fewer for more queries so that a
table of many cells stays fast (resamples × queries ≤ ``BUDGET``), never fewer than
``MIN_RESAMPLES`` (2,000): with thousands of queries the interval is narrow and its end points
move by far less than the 4 decimals shown. With fewer than 2 queries there is no interval
(``Interval.undefined``).
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

LEVEL = 0.95
RESAMPLES = 10_000
MIN_RESAMPLES = 2_000
BUDGET = 20_000_000  # resamples × queries drawn per interval
FULL_UP_TO = BUDGET // RESAMPLES
SEED = 0
_BLOCK = 2_000_000  # values drawn per block (memory: 8 bytes each)


@dataclass(frozen=True)
class Interval:
    """A two-sided ``level`` confidence interval; NaN ends when it is undefined."""

    low: float
    high: float
    level: float = LEVEL

    @classmethod
    def undefined(cls) -> Interval:
        return cls(float("nan"), float("nan"))

    @property
    def defined(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))

    def excludes(self, value: float = 0.0) -> bool:
        """Whether ``value`` lies outside the interval (for a difference: the two are separable)."""
        return self.defined and (value < self.low or value > self.high)

    @property
    def width(self) -> float:
        return self.high - self.low

    def to_json(self) -> list[float | None]:
        """[low, high]; None for an end that is undefined or unbounded."""
        return [self.low if math.isfinite(self.low) else None, self.high if math.isfinite(self.high) else None]


def resamples_for(n: int) -> int:
    """How many bootstrap resamples an interval over ``n`` queries draws (see the module docstring)."""
    return RESAMPLES if n <= FULL_UP_TO else max(MIN_RESAMPLES, BUDGET // max(n, 1))


def bootstrap_means(values: ArrayLike, seed: int = SEED, resamples: int | None = None) -> np.ndarray:
    """The means of ``resamples`` resamples of ``values`` (drawn with replacement, seeded)."""
    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    b = resamples or resamples_for(n)
    rng = np.random.default_rng(seed)
    out = np.empty(b)
    rows = max(1, _BLOCK // max(n, 1))
    for start in range(0, b, rows):
        stop = min(b, start + rows)
        out[start:stop] = x[rng.integers(0, n, size=(stop - start, n))].mean(axis=1)
    return out


def mean_interval(values: Iterable[float], level: float = LEVEL, seed: int = SEED) -> Interval:
    """The percentile-bootstrap ``level`` interval of the mean of ``values`` (one per query)."""
    x = np.asarray(list(values), dtype=np.float64)
    x = x[~np.isnan(x)]
    if len(x) < 2:
        return Interval.undefined()
    if np.all(x == x[0]):
        return Interval(float(x[0]), float(x[0]), level)
    return percentile_interval(bootstrap_means(x, seed), level)


def percentile_interval(estimates: ArrayLike, level: float = LEVEL) -> Interval:
    """The percentile interval of bootstrap ``estimates`` (NaN ones left out): their (1 − level)/2
    and (1 + level)/2 quantiles; undefined when none is left."""
    x = np.asarray(estimates, dtype=np.float64)
    x = x[~np.isnan(x)]
    if not len(x):
        return Interval.undefined()
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(x, [tail, 100 - tail])
    return Interval(float(low), float(high), level)


def proportion_interval(k: int, n: int, level: float = LEVEL) -> Interval:
    """The Wilson score interval (Wilson, "Probable Inference, the Law of Succession, and
    Statistical Inference", JASA 22(158), 1927) of a share of ``k`` in ``n`` queries, via
    ``scipy.stats.binomtest``: good at shares near 0 and 1, where the normal approximation is not."""
    if n <= 0:
        return Interval.undefined()
    from scipy.stats import binomtest

    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=level, method="wilson")
    return Interval(float(ci.low), float(ci.high), level)


@dataclass(frozen=True)
class SignFlip:
    """The paired randomization test of a mean difference and the interval its inversion gives."""

    p_value: float  # two-sided, of "the mean difference is 0"
    interval: Interval  # every shift Δ0 the same test does not reject at 1 − level
    exact: bool  # every sign pattern enumerated (else ``n_resamples`` random ones)


def _sign_patterns(d: np.ndarray, n_resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray, int, int]:
    """(S_d, S_1, adjustment, total): for each sign pattern s the mean of s·d and of s, every
    pattern when there are at most ``n_resamples`` (no adjustment), else ``n_resamples`` random
    ones (the +1 adjustment) — the patterns ``scipy.stats.permutation_test(...,
    permutation_type="samples")`` uses."""
    n = len(d)
    if 2 ** n <= n_resamples:  # exact: all 2^n sign patterns
        signs = 1 - 2 * ((np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1)
        return (signs * d).mean(axis=1), signs.mean(axis=1), 0, 2 ** n
    rng = np.random.default_rng(seed)
    s_d, s_1 = np.empty(n_resamples), np.empty(n_resamples)
    step = max(1, 4_000_000 // n)
    for start in range(0, n_resamples, step):
        stop = min(n_resamples, start + step)
        signs = 1 - 2 * rng.integers(0, 2, size=(stop - start, n), dtype=np.int8)
        s_d[start:stop] = signs @ d / n
        s_1[start:stop] = signs.sum(axis=1, dtype=np.int64) / n
    return s_d, s_1, 1, n_resamples


def sign_flip_test(diff: ArrayLike, level: float = LEVEL, n_resamples: int = RESAMPLES, seed: int = SEED) -> SignFlip:
    """The paired randomization (sign-flip) test of the mean of ``diff`` (one per query, B − A), and
    as its ``level`` interval the set of shifts Δ0 that the same test, applied to diff − Δ0, does not
    reject at α = 1 − ``level``: a confidence set by inverting a family of tests (Lehmann and Romano,
    "Testing Statistical Hypotheses", 3rd ed., Springer 2005, §3.5). The randomization test is the
    one Smucker, Allan and Carterette recommend for IR ("A comparison of statistical significance
    tests for information retrieval evaluation", CIKM 2007).

    Each query's difference keeps or flips its sign (swapping its two systems); p is twice the
    smaller share of sign patterns whose mean is at least as far out as the observed one, on one
    side (``scipy.stats.permutation_test``'s two-sided p, with its +1 adjustment when the patterns
    are drawn at random). Every shift uses the SAME patterns: for pattern s the null mean of
    diff − Δ0 is S_d − Δ0·S_1 (S_d = mean(s·d), S_1 = mean(s) ≤ 1) against the observed
    mean(d) − Δ0, so pattern s is in the lower tail while Δ0 ≤ b_s = (γ − a_s)/(1 − S_1) and in the
    upper one while Δ0 ≥ e_s = (−γ − a_s)/(1 − S_1), a_s = S_d − mean(d), γ the floating-point
    tolerance scipy uses. The lower tail shrinks and the upper one grows as Δ0 rises, so the
    accepted shifts are an interval [L, H]: H is the k-th largest b_s and L the k-th smallest e_s,
    k the fewest patterns a tail needs for p ≥ α. Δ0 = 0 is accepted exactly when b_s ≥ 0 for k
    patterns and e_s ≤ 0 for k, which is the test of the difference itself: the interval excludes
    0 if and only if p < α, by construction. With 5 queries or fewer (at most 32 patterns) no p
    falls below 0.05 and the interval is unbounded; with fewer than 2 there is none.
    """
    d = np.asarray(diff, dtype=np.float64)
    n = len(d)
    if n == 0:
        return SignFlip(1.0, Interval.undefined(), True)
    alpha = round(1 - level, 12)
    s_d, s_1, adjustment, total = _sign_patterns(d, n_resamples, seed)
    observed = d.mean()
    gamma = abs(observed) * np.finfo(np.float64).eps * 100
    a = s_d - observed
    less = ((a <= gamma).sum() + adjustment) / (total + adjustment)
    greater = ((a >= -gamma).sum() + adjustment) / (total + adjustment)
    p = float(min(1.0, 2 * min(less, greater)))
    if n < 2:
        return SignFlip(p, Interval.undefined(), adjustment == 0)
    # k: the fewest patterns in a tail for that tail's p to reach α (the same arithmetic as p's)
    k = next(c for c in range(total + 1) if min(1.0, 2 * ((c + adjustment) / (total + adjustment))) >= alpha)
    c = 1 - s_1
    with np.errstate(divide="ignore", invalid="ignore"):
        b = np.where(c > 0, (gamma - a) / c, np.where(a <= gamma, np.inf, -np.inf))
        e = np.where(c > 0, (-gamma - a) / c, np.where(a >= -gamma, -np.inf, np.inf))
    if k == 0:
        return SignFlip(p, Interval(-math.inf, math.inf, level), adjustment == 0)
    high = float(-np.partition(-b, k - 1)[k - 1])  # the k-th largest b
    low = float(np.partition(e, k - 1)[k - 1])  # the k-th smallest e
    return SignFlip(p, Interval(low, high, level), adjustment == 0)
