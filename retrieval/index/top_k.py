"""The top ``k`` of a score vector, best first, ties in trec_eval's order: the one ranking step every
index that scores the whole corpus at once shares (BM25, learned sparse, query likelihood).

Among equal scores a document ranks before another when trec_eval would rank it first: its id is
the greater (``retrieval.data.ranking``). The step works on rows, so it takes the corpus's
``tie_rank`` (``ranking.tie_rank(doc_ids)``: each row's place in that order), which an index
computes once and keeps; the ids are never compared on the hot path."""
from __future__ import annotations

import numpy as np


def top_k(scores: np.ndarray, k: int, rows: np.ndarray | None = None,
          tie_rank: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(rows, scores) of the ``k`` best documents of ``scores`` (one score a document), best first,
    equal scores by ``tie_rank`` (smaller first; None: by row). ``rows``: the candidates (default:
    the documents whose score is positive, the others left out, as a lexical score of 0 means no
    query term matched).

    Only the candidates are partitioned (numpy's argpartition is slow on a mostly-zero score
    vector), then the ``k`` kept are sorted; where documents tie with the ``k``-th score beyond the
    ``k``, those first by ``tie_rank`` are kept (a partition keeps an arbitrary few): the ones
    trec_eval would rank first."""
    rows = np.flatnonzero(scores > 0) if rows is None else np.asarray(rows, dtype=np.int64)
    k = max(0, min(k, len(rows)))
    if len(rows) > k:
        if not k:
            rows = rows[:0]
        else:
            candidates = scores[rows]
            kept = np.argpartition(-candidates, k - 1)[:k]
            cut = candidates[kept].min()
            if np.count_nonzero(candidates >= cut) > k:  # ties at the cut: those first in the tie order
                above = np.flatnonzero(candidates > cut)
                at = np.flatnonzero(candidates == cut)
                at = at[np.argsort(_place(rows[at], tie_rank), kind="stable")[:k - len(above)]]
                kept = np.concatenate([above, at])
            rows = rows[kept]
    top = scores[rows]
    order = np.lexsort((_place(rows, tie_rank), -top))  # score descending, then the tie order
    return rows[order], top[order]


def _place(rows: np.ndarray, tie_rank: np.ndarray | None) -> np.ndarray:
    """Each of ``rows``' place in the tie order: its ``tie_rank``, or the row itself without one."""
    return rows if tie_rank is None else tie_rank[rows]


def top_k_each(scores: np.ndarray, k: int, tie_rank: np.ndarray | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """``top_k(row, k, tie_rank=tie_rank)`` for every row of a (queries × documents) score matrix, the
    same rows and scores, in a few calls for the whole matrix: one partition and one sort of all rows
    at once. A row is ranked alone (``top_k``) only where the matrix-wide step cannot decide it
    exactly: fewer than ``k`` positive scores, or documents tied with its ``k``-th score beyond the
    ``k`` (which of them are kept goes by the tie order)."""
    n_rows, n_docs = scores.shape
    k = max(0, min(k, n_docs))
    if k == 0 or n_rows == 0:
        return [top_k(row, k, tie_rank=tie_rank) for row in scores]
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    vals = np.take_along_axis(scores, part, axis=1)
    cut = vals.min(axis=1)
    # exact where the k partitioned are all positive and are every document scoring at least the k-th
    exact = (cut > 0) & ((scores >= cut[:, None]).sum(axis=1) == k)
    order = np.lexsort((_place(part, tie_rank), -vals), axis=-1)  # score, then tie order
    rows = np.take_along_axis(part, order, axis=1)
    vals = np.take_along_axis(vals, order, axis=1)
    return [(rows[i], vals[i]) if exact[i] else top_k(scores[i], k, tie_rank=tie_rank) for i in range(n_rows)]
