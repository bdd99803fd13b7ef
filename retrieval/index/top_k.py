"""The top ``k`` of a score vector, best first, ties broken by document order: the one ranking step
every index that scores the whole corpus at once shares (BM25, learned sparse, query likelihood)."""
from __future__ import annotations

import numpy as np


def top_k(scores: np.ndarray, k: int, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(rows, scores) of the ``k`` best documents of ``scores`` (one score a document), best first,
    ties by row. ``rows``: the candidates (default: the documents whose score is positive, the
    others left out, as a lexical score of 0 means no query term matched).

    Only the candidates are partitioned (numpy's argpartition is slow on a mostly-zero score
    vector), then the ``k`` kept are sorted; where documents tie with the ``k``-th score beyond the
    ``k``, the first of them by row are kept (a partition keeps an arbitrary few)."""
    rows = np.flatnonzero(scores > 0) if rows is None else np.asarray(rows, dtype=np.int64)
    k = max(0, min(k, len(rows)))
    if len(rows) > k:
        if not k:
            rows = rows[:0]
        else:
            candidates = scores[rows]
            kept = np.argpartition(-candidates, k - 1)[:k]
            cut = candidates[kept].min()
            if np.count_nonzero(candidates >= cut) > k:  # ties at the cut: the first rows among them
                rows = np.sort(rows)
                candidates = scores[rows]
                above = np.flatnonzero(candidates > cut)
                kept = np.concatenate([above, np.flatnonzero(candidates == cut)[:k - len(above)]])
            rows = rows[kept]
    top = scores[rows]
    order = np.lexsort((rows, -top))  # score descending, then document order
    return rows[order], top[order]


def top_k_each(scores: np.ndarray, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``top_k(row, k)`` for every row of a (queries × documents) score matrix, the same rows and
    scores, in a few calls for the whole matrix: one partition and one sort of all rows at once.
    A row is ranked alone (``top_k``) only where the matrix-wide step cannot decide it exactly:
    fewer than ``k`` positive scores, or documents tied with its ``k``-th score beyond the ``k``
    (which of them are kept goes by document order)."""
    n_rows, n_docs = scores.shape
    k = max(0, min(k, n_docs))
    if k == 0 or n_rows == 0:
        return [top_k(row, k) for row in scores]
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    vals = np.take_along_axis(scores, part, axis=1)
    cut = vals.min(axis=1)
    # exact where the k partitioned are all positive and are every document scoring at least the k-th
    exact = (cut > 0) & ((scores >= cut[:, None]).sum(axis=1) == k)
    order = np.lexsort((part, -vals), axis=-1)  # score descending, then document order
    rows = np.take_along_axis(part, order, axis=1)
    vals = np.take_along_axis(vals, order, axis=1)
    return [(rows[i], vals[i]) if exact[i] else top_k(scores[i], k) for i in range(n_rows)]
