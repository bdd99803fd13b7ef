"""The top ``k`` of a score vector, best first, ties broken by document order: the one ranking step
every index that scores the whole corpus at once shares (BM25, learned sparse, query likelihood)."""
from __future__ import annotations

import numpy as np


def top_k(scores: np.ndarray, k: int, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(rows, scores) of the ``k`` best documents of ``scores`` (one score a document), best first,
    ties by row. ``rows``: the candidates (default: the documents whose score is positive, the
    others left out, as a lexical score of 0 means no query term matched).

    Only the candidates are partitioned (numpy's argpartition is slow on a mostly-zero score
    vector), then the ``k`` kept are sorted."""
    rows = np.flatnonzero(scores > 0) if rows is None else np.asarray(rows, dtype=np.int64)
    k = max(0, min(k, len(rows)))
    if len(rows) > k:
        rows = rows[np.argpartition(-scores[rows], k - 1)[:k]] if k else rows[:0]
    top = scores[rows]
    order = np.lexsort((rows, -top))  # score descending, then document order
    return rows[order], top[order]
