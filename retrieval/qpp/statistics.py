"""What the predictors read of a corpus, computed once per corpus and kept: each document's term counts,
each term's document and collection frequency, the corpus's length; and a query's analyzed terms.

The terms are the workspace tokenizer's (``Workspace.tokenizer``: the ones BM25 indexes, stemmed, stopwords
out). The counts are query likelihood's index (``retrieval.systems.ql.QLIndex``: documents × vocabulary,
built once per corpus in the workspace's per-corpus slot and shared with that system), from which this
keeps a copy by rows (one document's terms together, what clarity reads of its top documents) and the
frequencies, in its own per-corpus slot (``KEY``), counted by the memory budget through ``nbytes``.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from retrieval.systems import ql

if TYPE_CHECKING:
    import scipy.sparse as sp

    from retrieval.workspace import Workspace

KEY = "qpp"  # the per-corpus slot (``Workspace.system_state``)


@dataclass(frozen=True)
class QueryTerms:
    """A query's distinct analyzed terms the corpus holds (vocabulary ids, counts in the query, their
    df and cf), and how many analyzed terms it has in all (held or not)."""

    ids: np.ndarray
    counts: np.ndarray
    df: np.ndarray
    cf: np.ndarray
    length: int


class CorpusStatistics:
    """A corpus's statistics for the predictors (module docstring).

    Attributes:
        rows: Term counts, documents × vocabulary, compressed by row.
        vocab: Term -> column.
        n: The corpus's documents, N.
        df: Each term's document frequency.
        cf: Each term's collection frequency.
        total: The corpus's length in terms, |C|.
        avgdl: The mean document length.
        p_coll: P_coll(w) = cf_w / |C|.
    """

    def __init__(self, index: ql.QLIndex):
        csc = index.counts
        self.rows: sp.csr_matrix = csc.tocsr()
        self.vocab = index.vocab
        self.tokenizer = index.tokenizer
        self.n = int(csc.shape[0])
        self.df = np.diff(csc.indptr).astype(np.float64)
        self.cf = np.asarray(csc.sum(axis=0), dtype=np.float64).ravel()
        self.total = float(self.cf.sum())
        self.avgdl = self.total / max(1, self.n) or 1.0
        self.p_coll = self.cf / max(self.total, 1.0)

    def nbytes(self) -> int:
        m = self.rows
        return int(m.data.nbytes + m.indices.nbytes + m.indptr.nbytes + self.df.nbytes + self.cf.nbytes
                   + self.p_coll.nbytes)

    def query(self, text: str) -> QueryTerms:
        """``text``'s analyzed terms (``QueryTerms``)."""
        tokens = self.tokenizer(text)
        kept = [(self.vocab[t], c) for t, c in Counter(tokens).items() if t in self.vocab]
        ids = np.array([i for i, _ in kept], dtype=np.int64)
        return QueryTerms(ids, np.array([c for _, c in kept], dtype=np.float64), self.df[ids], self.cf[ids],
                          len(tokens))

    def top_counts(self, rows: np.ndarray, query: QueryTerms) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What ``predictors.clarity`` reads of the documents at ``rows``: their term counts (dense, one
        column per term any of them holds, so a row sums to the document's length), each column's P_coll,
        and the query's terms among those columns, one entry per occurrence. A query term none of them
        holds is left out: its P(q|D) = (1 − λ)·P_coll(q) is the same for every document and cancels in
        P(D|Q), and its share of the sum is in clarity's closed form for the words outside the columns."""
        sub = self.rows[np.asarray(rows, dtype=np.int64)]
        columns, where = np.unique(sub.indices, return_inverse=True)
        tf = np.zeros((sub.shape[0], len(columns)))
        tf[np.repeat(np.arange(sub.shape[0]), np.diff(sub.indptr)), where] = sub.data
        pos = np.minimum(np.searchsorted(columns, query.ids), max(0, len(columns) - 1))
        held = (columns[pos] == query.ids) if len(columns) else np.zeros(len(query.ids), dtype=bool)
        query_columns = np.repeat(pos[held], query.counts[held].astype(np.int64))
        return tf, self.p_coll[columns], query_columns

def statistics(ws: Workspace) -> CorpusStatistics:
    """The workspace's corpus statistics, computed the first time (per corpus, shared)."""
    return ws.system_state(KEY, lambda: CorpusStatistics(ql.index_of(ws)))
