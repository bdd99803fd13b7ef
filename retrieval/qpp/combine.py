"""One prediction per query and system from several predictors: label-free by default, fitted to
nDCG@10 where judged queries exist. Pure: arrays in, arrays out.

**Label-free** (the default): each predictor becomes its mid-rank percentile within the query set,
``(#{values below} + ½·#{values equal}) / n`` over the ``n`` queries that have it, in [0, 1], oriented so
that 1 is predicted easiest (a predictor whose ``higher_means`` is "harder" is turned round: ``1 − p``);
a query's prediction is the mean of its oriented percentiles with equal weights, over the predictors it
has (a predictor a query lacks, None or NaN, is skipped; a query with none gets ½). Percentiles depend
only on the order of the values, so the combination is the same under any strictly increasing
transform of a predictor, and predictors on different scales (IDF in nats, NQC a ratio, clarity in bits)
weigh alike. No label is read: it is what a query set without labels can have.

**Fitted**: ridge regression (an intercept, penalty ``ALPHA`` on the weights) from the same oriented
percentiles (a missing one as ½) to each judged query's nDCG@10, only from ``MIN_FIT`` judged queries on.
Cross-fitted, so no query is predicted by a model that saw its label: the judged queries, sorted by id,
are shuffled with a seeded generator (``FOLDS_SEED``) and dealt into ``FOLDS`` folds (fewer when there are
fewer queries); each judged query is predicted by the model fitted on the other folds, and each unjudged
query by the model fitted on every judged one. The folds depend on which queries are judged, never on
their labels. Predictions are clipped to [0, 1], nDCG@10's range.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

MIN_FIT = 10  # judged queries from which a fitted combination is made
FOLDS = 5  # cross-fitting folds (at most one per judged query)
FOLDS_SEED = 0  # the seed the judged queries are shuffled with before they are dealt into folds
ALPHA = 1.0  # ridge's penalty on the weights (not on the intercept)
MISSING = 0.5  # the oriented percentile a query lacking a predictor stands at in the fitted model


@dataclass(frozen=True)
class Fitted:
    """A fitted combination's predictions and how it was fitted."""

    predicted: np.ndarray  # one value per query, in the order given
    judged: int  # judged queries it was fitted on
    folds: int  # cross-fitting folds


def percentiles(values: Sequence[float | None] | np.ndarray) -> np.ndarray:
    """Each value's mid-rank percentile among the values given: ``(#below + ½·#equal) / n`` over the
    ``n`` values that are numbers; NaN where a value is None or NaN.

    Args:
        values: One value per query (None or NaN: the query lacks it).

    Returns:
        The percentiles in [0, 1] (NaN where missing).
    """
    x = np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    out = np.full(len(x), np.nan)
    held = ~np.isnan(x)
    v = x[held]
    if not len(v):
        return out
    s = np.sort(v)
    below = np.searchsorted(s, v, side="left")
    upto = np.searchsorted(s, v, side="right")
    out[held] = (below + 0.5 * (upto - below)) / len(v)
    return out


def oriented(values: Sequence[float | None] | np.ndarray, higher_means: str) -> np.ndarray:
    """``percentiles(values)`` turned so that 1 is predicted easiest: as they are where a higher value
    means easier, ``1 − p`` where it means harder."""
    p = percentiles(values)
    if higher_means == "harder":
        return 1 - p
    if higher_means != "easier":
        raise ValueError(f"higher_means is 'easier' or 'harder', not {higher_means!r}")
    return p


def _matrix(features: Mapping[str, Sequence[float | None] | np.ndarray], orientation: Mapping[str, str]) -> np.ndarray:
    """(queries × predictors) oriented percentiles, NaN where a query lacks one."""
    if not features:
        return np.zeros((0, 0))
    columns = [oriented(values, orientation[key]) for key, values in features.items()]
    return np.column_stack(columns)


Features = Mapping[str, Sequence[float | None] | np.ndarray]  # predictor key -> one value per query


def label_free(features: Features, orientation: Mapping[str, str]) -> np.ndarray:
    """The label-free combination (module docstring): each query's mean oriented percentile.

    Args:
        features: Predictor key -> one value per query (None or NaN where the query lacks it), every
            sequence as long as the query set.
        orientation: Predictor key -> "easier" or "harder" (``Predictor.higher_means``).

    Returns:
        One value per query in [0, 1], 1 predicted easiest (½ for a query with no predictor).
    """
    m = _matrix(features, orientation)
    if not m.size:
        n = len(next(iter(features.values()))) if features else 0
        return np.full(n, MISSING)
    held = ~np.isnan(m)
    counts = held.sum(axis=1)
    sums = np.where(held, m, 0.0).sum(axis=1)
    return np.where(counts > 0, sums / np.maximum(counts, 1), MISSING)


def ridge(x: np.ndarray, y: np.ndarray, alpha: float = ALPHA) -> tuple[np.ndarray, float]:
    """Ridge regression with an unpenalized intercept: the weights minimizing
    ``‖y − ȳ − (X − X̄)·w‖² + α‖w‖²`` and the intercept ``ȳ − X̄·w``.

    Args:
        x: (samples × features).
        y: One target per sample.
        alpha: The penalty α.

    Returns:
        (weights, intercept).
    """
    xm, ym = x.mean(axis=0), float(y.mean())
    xc = x - xm
    w = np.linalg.solve(xc.T @ xc + alpha * np.eye(x.shape[1]), xc.T @ (y - ym))
    return w, ym - float(xm @ w)


def folds_of(judged_ids: Sequence[str], folds: int = FOLDS, seed: int = FOLDS_SEED) -> np.ndarray:
    """Each judged query's fold (in the order given): the ids sorted, shuffled with ``seed``, and dealt
    round-robin into ``min(folds, n)`` folds, at least 2 (so every query has other folds to be predicted
    from); a query's fold depends on the set of ids alone."""
    order = sorted(judged_ids)
    perm = np.random.default_rng(seed).permutation(len(order))
    count = max(2, min(folds, len(order)))
    fold_of = {order[j]: i % count for i, j in enumerate(perm.tolist())}
    return np.array([fold_of[q] for q in judged_ids], dtype=np.int64)


def fitted(features: Mapping[str, Sequence[float | None] | np.ndarray], orientation: Mapping[str, str],
           query_ids: Sequence[str], labels: Mapping[str, float], folds: int = FOLDS, seed: int = FOLDS_SEED,
           alpha: float = ALPHA) -> Fitted | None:
    """The fitted combination (module docstring), or None with fewer than ``MIN_FIT`` judged queries.

    Args:
        features: Predictor key -> one value per query, in ``query_ids``' order.
        orientation: Predictor key -> "easier" or "harder".
        query_ids: The queries, in the features' order.
        labels: Judged query id -> its nDCG@10 (queries not in ``query_ids`` are ignored).
        folds: Cross-fitting folds.
        seed: The folds' seed.
        alpha: Ridge's penalty.

    Returns:
        The predictions (``Fitted``), or None.
    """
    judged = [i for i, q in enumerate(query_ids) if q in labels]
    if len(judged) < MIN_FIT or not features:
        return None
    x = _matrix(features, orientation)
    x = np.where(np.isnan(x), MISSING, x)
    y = np.array([float(labels[query_ids[i]]) for i in judged])
    xj = x[judged]
    fold = folds_of([query_ids[i] for i in judged], folds, seed)
    out = np.empty(len(query_ids))
    w, b = ridge(xj, y, alpha)
    out[:] = x @ w + b  # the unjudged queries: the model fitted on every judged one
    judged_rows = np.array(judged, dtype=np.int64)
    n_folds = int(fold.max()) + 1
    for f in range(n_folds):
        held_out = fold == f
        wf, bf = ridge(xj[~held_out], y[~held_out], alpha)
        out[judged_rows[held_out]] = xj[held_out] @ wf + bf
    return Fitted(np.clip(out, 0.0, 1.0), len(judged), n_folds)
