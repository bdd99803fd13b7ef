"""What an index offers whoever searches it, typed: a lexical (BM25) index, a vector index and a learned
sparse index as ``typing.Protocol``s, and the learned sparse vector they are queried with. The engines
(``retrieval.index.engines``) return them and the retrievers (``dense_index.DenseRetriever``,
``splade.SparseRetriever``) search them; both import them from here, so neither imports the other. A
leaf of the index package: it imports runs and weighted queries, nothing that indexes.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from retrieval.data.run import Run
from retrieval.index.terms import WeightedQuery

SparseVector = tuple[np.ndarray, np.ndarray]  # (term ids, int32; weights, float32), ids ascending


@runtime_checkable
class LexicalIndex(Protocol):
    """BM25 over a corpus, its rows aligned with ``doc_ids``. A query is a text (analyzed by the
    index's tokenizer) or a ``WeightedQuery`` (analyzed terms with weights, scored Σ_t w_t · bm25(t, d),
    as Lucene scores a boosted ``BooleanQuery``: ``retrieval.index.terms``)."""

    doc_ids: list[str]

    def top(self, query: str | WeightedQuery, k: int) -> tuple[np.ndarray, np.ndarray]:  # noqa: E704
        ...  # (rows, scores), best first, zero scores left out

    def scores_at(self, query: str | WeightedQuery, rows: np.ndarray) -> np.ndarray:  # noqa: E704
        ...  # exact, 0 where no term matches

    def search(self, queries: Mapping[str, str | WeightedQuery], k: int) -> Run:  # noqa: E704
        ...


@runtime_checkable
class VectorIndex(Protocol):
    """Document vectors, searchable by inner product, rows aligned with ``doc_ids``."""

    doc_ids: list[str]

    def search_vectors(self, qvecs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:  # noqa: E704 - (scores, rows)
        ...

    def scores(self, qvec: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:  # noqa: E704 - exact
        ...


@runtime_checkable
class SparseVectorIndex(Protocol):
    """Learned sparse document vectors (SPLADE, ``retrieval.index.splade``), searchable by inner product,
    rows aligned with ``doc_ids``; a query is a ``SparseVector`` (term ids, weights), and one with no
    terms scores 0 everywhere and finds nothing."""

    doc_ids: list[str]

    @property
    def nbytes(self) -> int: ...  # noqa: E704 - what it holds in this process (0: the engine keeps it)

    def scores(self, query: SparseVector, rows: Sequence[int] | np.ndarray | None = None) -> np.ndarray:  # noqa: E704
        ...  # exact

    def top(self, query: SparseVector, k: int) -> tuple[np.ndarray, np.ndarray]:  # noqa: E704 - (rows, scores)
        ...  # best first, zero scores left out, ties by row

    def contributions(self, query: SparseVector, row: int) -> list[tuple[int, float, float, float]]:  # noqa: E704
        ...  # (term id, query weight, document weight, product) of the shared terms, largest product first
