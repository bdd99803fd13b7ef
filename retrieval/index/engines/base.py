"""The engine seam, typed: what a lexical index, a vector index, a learned sparse index and an
engine must offer, and what each engine supports beyond that (``Capabilities``), so that callers
ask an engine what it can do instead of testing which class it is.
``tests/retrieval/index/engines/test_engine_contract.py`` holds every engine to it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from retrieval.data.run import Run
from retrieval.index.terms import WeightedQuery

if TYPE_CHECKING:
    from retrieval.index.bm25_settings import BM25Settings
    from retrieval.index.encoder import Encoder
    from retrieval.index.splade import SparseVector
    from retrieval.index.tokenize import Tokenizer
    from retrieval.progress import Counter
    from retrieval.store import Store


class Corpus(NamedTuple):
    """What an engine indexes: the documents' ids and texts (title and body), and the corpus hash
    (``Dataset.corpus_hash``) that keys what it stores."""

    hash: str
    doc_ids: list[str]
    texts: list[str]


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


@dataclass(frozen=True)
class Indexed:
    """An engine's vector index and how the corpus's vectors were obtained."""

    index: VectorIndex
    from_store: int
    encoded: int


@dataclass(frozen=True)
class Capabilities:
    """What an engine does beyond the protocol."""

    index_variants: bool  # int8 and PCA-reduced indexes (``Workspace.with_index``) can be built over it
    explains: bool  # its lexical index is RankScope's own ``BM25Index`` (explanations, lengths, training)
    bm25_methods: tuple[str, ...]  # the BM25 variants it scores (``lexical.BM25Index.METHODS``)


@runtime_checkable
class Engine(Protocol):
    name: str  # "in-process", "milvus"
    key: dict[str, Any]  # added to every cached run's parameters: one engine's runs are never served as another's
    capabilities: Capabilities

    @property
    def where(self) -> str | None: ...  # noqa: E704 - where it keeps the indexes, for messages (None: in this process)

    def lexical(self, corpus: Corpus, tokenizer: Tokenizer, bm25: BM25Settings, store: Store | None,  # noqa: E704
                progress: Counter | None = None) -> LexicalIndex: ...

    def vectors(self, corpus: Corpus, encoder: Encoder, store: Store | None, kind: str,  # noqa: E704
                dims: int | None, progress=None, indexing=None, embeddings=None) -> Indexed: ...

    def sparse(self, corpus: Corpus, fingerprint: str, vectors: list[SparseVector],  # noqa: E704
               vocab_size: int) -> SparseVectorIndex: ...

    def drop(self, corpus_hash: str) -> int: ...  # noqa: E704 - what it held for a corpus, removed; how many
