"""How sure a figure is: 95% confidence intervals over queries for a mean metric, for the paired
difference of two systems, and for a share of queries (``proportion_interval``, Wilson).

Method: the percentile bootstrap over queries (Efron and Tibshirani, "An Introduction to the
Bootstrap", Chapman & Hall 1993, ch. 13; in IR evaluation Sakai, "Evaluating Evaluation Metrics
based on the Bootstrap", SIGIR 2006): the queries are the sample, a resample draws as many queries
with replacement, and the interval is the 2.5th and 97.5th percentiles of the resampled means. For
two systems the resampling is paired (the same queries for both), so the interval is that of the
mean per-query difference B − A; its p-value is the paired permutation test's
(``evaluate.compare``). The bootstrap makes no normality assumption, which matters for metrics that
pile up at 0 and 1 (nDCG@10 on a few dozen judged queries), and it is seeded: the same per-query
values always give the same interval.

Resamples: ``RESAMPLES`` (10,000) for up to ``FULL_UP_TO`` queries, fewer for more queries so that a
table of many cells stays fast (resamples × queries ≤ ``BUDGET``), never fewer than
``MIN_RESAMPLES`` (2,000): with thousands of queries the interval is narrow and its end points
move by far less than the 4 decimals shown. With fewer than 2 queries there is no interval
(``Interval.undefined``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

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
    def undefined(cls) -> "Interval":
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
        return [None if math.isnan(self.low) else self.low, None if math.isnan(self.high) else self.high]


def resamples_for(n: int) -> int:
    """How many bootstrap resamples an interval over ``n`` queries draws (see the module docstring)."""
    return RESAMPLES if n <= FULL_UP_TO else max(MIN_RESAMPLES, BUDGET // max(n, 1))


def bootstrap_means(values, seed: int = SEED, resamples: int | None = None) -> np.ndarray:
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


def mean_interval(values, level: float = LEVEL, seed: int = SEED) -> Interval:
    """The percentile-bootstrap ``level`` interval of the mean of ``values`` (one per query)."""
    x = np.asarray(list(values), dtype=np.float64)
    x = x[~np.isnan(x)]
    if len(x) < 2:
        return Interval.undefined()
    if np.all(x == x[0]):
        return Interval(float(x[0]), float(x[0]), level)
    return percentile_interval(bootstrap_means(x, seed), level)


def percentile_interval(estimates, level: float = LEVEL) -> Interval:
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
