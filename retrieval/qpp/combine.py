"""One prediction per query and system from several predictors: label-free by default, fitted to
nDCG@10 where judged queries exist. Pure: arrays in, arrays out.

**Label-free** (the default): each predictor becomes its mid-rank percentile within the query set,
``(#{values below} + ½·#{values equal}) / n`` over the ``n`` queries that have it, in [0, 1], oriented so
that 1 is predicted easiest (a predictor whose ``higher_means`` is "harder" is turned round: ``1 − p``).
The predictors are grouped by the evidence they read (``families``: the corpus's term statistics, the
list's score distribution, its language model, its embeddings, the systems' agreement); a query's
prediction is the mean over the families of each family's mean oriented percentile, with equal weights, over
the predictors it has (a predictor a query lacks, None or NaN, is skipped; a query with none gets ½). Four
predictors computed from the same document frequencies (average and largest IDF and SCQ) are one piece of
evidence, so they weigh as one, as much as the score distribution's NQC and WIG together, clarity or the
systems' disagreement. Without ``families`` each predictor is a family of its own. Percentiles depend only
on the order of the values, so the combination is the same under any strictly increasing transform of a
predictor, and predictors on different scales (IDF in nats, NQC a ratio, clarity in bits) weigh alike. No
label is read: it is what a query set without labels can have.

**Fitted**: a linear model from the same oriented percentiles (a missing one as ½) to each judged query's
nDCG@10, only from ``MIN_FIT`` judged queries on, that departs from the label-free combination only as far
as the labels show it should: ``y ≈ b + γ·z + X·v``, ``z`` the label-free combination, ``b`` and ``γ``
fitted freely, the departure ``v`` from its weights penalized by ``α·‖v‖²`` (ridge regression whose prior
mean is the label-free weighting rather than zero). ``α`` is chosen among ``ALPHAS`` (∞: no departure, an
increasing line of ``z`` when γ > 0, so the same order of the queries) by the mean squared error of
inner cross-validation over the queries the model is fitted on, a tie going to the larger ``α``. Cross-fitted,
so no query is predicted by a model that saw its label (nor by an ``α`` chosen with it): the judged queries,
sorted by id, are shuffled with a seeded generator (``FOLDS_SEED``) and dealt into ``FOLDS`` folds (fewer
when there are fewer queries); each judged query is predicted by the model fitted (and its ``α`` chosen) on
the other folds, and each unjudged query by the model fitted on every judged one. The folds depend on which
queries are judged, never on their labels. Predictions are clipped to [0, 1], nDCG@10's range.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

MIN_FIT = 10  # judged queries from which a fitted combination is made
FOLDS = 5  # cross-fitting folds (at most one per judged query)
FOLDS_SEED = 0  # the seed the judged queries are shuffled with before they are dealt into folds
ALPHAS = (0.1, 1.0, 10.0, 100.0, float("inf"))  # the penalties on a departure from the label-free weights
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


def label_free(features: Features, orientation: Mapping[str, str],
               families: Mapping[str, str] | None = None) -> np.ndarray:
    """The label-free combination (module docstring): each query's mean over the families of its mean
    oriented percentile within each.

    Args:
        features: Predictor key -> one value per query (None or NaN where the query lacks it), every
            sequence as long as the query set.
        orientation: Predictor key -> "easier" or "harder" (``Predictor.higher_means``).
        families: Predictor key -> the evidence it reads (``Predictor.family``); None: each predictor its own.

    Returns:
        One value per query in [0, 1], 1 predicted easiest (½ for a query with no predictor).
    """
    m = _matrix(features, orientation)
    if not m.size:
        n = len(next(iter(features.values()))) if features else 0
        return np.full(n, MISSING)
    keys = list(features)
    family_of = [families.get(k, k) if families is not None else k for k in keys]
    means = []
    for family in dict.fromkeys(family_of):
        block = m[:, [i for i, f in enumerate(family_of) if f == family]]
        held = ~np.isnan(block)
        counts = held.sum(axis=1)
        means.append(np.where(counts > 0, np.where(held, block, 0.0).sum(axis=1) / np.maximum(counts, 1), np.nan))
    by_family = np.column_stack(means)
    held = ~np.isnan(by_family)
    counts = held.sum(axis=1)
    sums = np.where(held, by_family, 0.0).sum(axis=1)
    return np.where(counts > 0, sums / np.maximum(counts, 1), MISSING)


def shrunk(x: np.ndarray, z: np.ndarray, y: np.ndarray, alpha: float) -> tuple[np.ndarray, float, float]:
    """The model ``y ≈ b + γ·z + X·v`` minimizing ``‖y − b − γ·z − X·v‖² + α·‖v‖²``: ``b`` and ``γ``
    unpenalized, ``v`` (the departure from the label-free weights) penalized; ``α = ∞`` gives ``v = 0``,
    least squares of ``y`` on ``z``.

    Args:
        x: (samples × features).
        z: The label-free combination of each sample.
        y: One target per sample.
        alpha: The penalty α (``float("inf")``: no departure).

    Returns:
        (v, γ, b).
    """
    xc, zc, yc = x - x.mean(axis=0), z - z.mean(), y - y.mean()
    p = x.shape[1]
    if not np.isfinite(alpha) or p == 0:
        denominator = float(zc @ zc)
        gamma = float(zc @ yc) / denominator if denominator > 0 else 0.0
        v = np.zeros(p)
    else:
        a = np.empty((p + 1, p + 1))
        a[0, 0], a[0, 1:], a[1:, 0] = zc @ zc, zc @ xc, xc.T @ zc
        a[1:, 1:] = xc.T @ xc + alpha * np.eye(p)
        rhs = np.concatenate([[zc @ yc], xc.T @ yc])
        solution = np.linalg.lstsq(a, rhs, rcond=None)[0]  # z constant across the samples: γ's row is zero
        gamma, v = float(solution[0]), solution[1:]
    return v, gamma, float(y.mean() - z.mean() * gamma - x.mean(axis=0) @ v)


def chosen_alpha(x: np.ndarray, z: np.ndarray, y: np.ndarray, ids: Sequence[str], folds: int = FOLDS,
                 seed: int = FOLDS_SEED) -> float:
    """The ``α`` of ``ALPHAS`` whose model, fitted on the other inner folds of these samples, predicts each
    inner fold with the least mean squared error; a tie goes to the larger ``α`` (the label-free weights).

    Args:
        x: (samples × features) of the queries the model is fitted on.
        z: Their label-free combination.
        y: Their targets.
        ids: Their query ids (the inner folds are dealt from them, as ``folds_of`` deals).
        folds: Inner folds.
        seed: Their seed.

    Returns:
        The α.
    """
    if len(y) < 4:  # too few to hold any out
        return ALPHAS[-1]
    fold = folds_of(ids, folds, seed)
    best, best_error = ALPHAS[-1], float("inf")
    for alpha in sorted(ALPHAS, reverse=True):
        error = 0.0
        for f in range(int(fold.max()) + 1):
            out = fold == f
            v, gamma, b = shrunk(x[~out], z[~out], y[~out], alpha)
            error += float(((x[out] @ v + gamma * z[out] + b - y[out]) ** 2).sum())
        if error < best_error - 1e-12:
            best, best_error = alpha, error
    return best


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
           families: Mapping[str, str] | None = None) -> Fitted | None:
    """The fitted combination (module docstring), or None with fewer than ``MIN_FIT`` judged queries.

    Args:
        features: Predictor key -> one value per query, in ``query_ids``' order.
        orientation: Predictor key -> "easier" or "harder".
        query_ids: The queries, in the features' order.
        labels: Judged query id -> its nDCG@10 (queries not in ``query_ids`` are ignored).
        folds: Cross-fitting folds.
        seed: The folds' seed.
        families: Predictor key -> the evidence it reads, as ``label_free`` takes it.

    Returns:
        The predictions (``Fitted``), or None.
    """
    judged = [i for i, q in enumerate(query_ids) if q in labels]
    if len(judged) < MIN_FIT or not features:
        return None
    z = label_free(features, orientation, families)
    x = _matrix(features, orientation)
    x = np.where(np.isnan(x), MISSING, x)
    y = np.array([float(labels[query_ids[i]]) for i in judged])
    xj, zj, ids = x[judged], z[judged], [query_ids[i] for i in judged]
    fold = folds_of(ids, folds, seed)

    def model(rows: np.ndarray) -> tuple[np.ndarray, float, float]:
        alpha = chosen_alpha(xj[rows], zj[rows], y[rows], [ids[i] for i in np.flatnonzero(rows)], folds, seed)
        return shrunk(xj[rows], zj[rows], y[rows], alpha)

    v, gamma, b = model(np.ones(len(judged), dtype=bool))
    out = x @ v + gamma * z + b  # the unjudged queries: the model fitted on every judged one
    judged_rows = np.array(judged, dtype=np.int64)
    n_folds = int(fold.max()) + 1
    for f in range(n_folds):
        held_out = fold == f
        vf, gf, bf = model(~held_out)
        out[judged_rows[held_out]] = xj[held_out] @ vf + gf * zj[held_out] + bf
    return Fitted(np.clip(out, 0.0, 1.0), len(judged), n_folds)
