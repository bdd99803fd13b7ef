"""The engine seam, typed: what an engine must offer (the indexes it returns are typed in
``retrieval.index.searchable``), and what each engine supports beyond that (``Capabilities``), so that callers
ask an engine what it can do instead of testing which class it is.
``tests/retrieval/index/engines/test_engine_contract.py`` holds every engine to it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

from retrieval.index.searchable import LexicalIndex, SparseVector, SparseVectorIndex, VectorIndex

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np

    from retrieval.index.bm25_settings import BM25Settings
    from retrieval.index.encoder import Encoder
    from retrieval.index.tokenize import Tokenizer
    from retrieval.progress import Counter
    from retrieval.store import Store


class Corpus(NamedTuple):
    """What an engine indexes: the documents' ids and texts (title and body), and the corpus hash
    (``Dataset.corpus_hash``) that keys what it stores."""

    hash: str
    doc_ids: list[str]
    texts: list[str]


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
                dims: int | None, progress: Counter | None = None, indexing: Callable[[], None] | None = None,
                embeddings: np.ndarray | None = None) -> Indexed: ...

    def sparse(self, corpus: Corpus, fingerprint: str, vectors: list[SparseVector],  # noqa: E704
               vocab_size: int) -> SparseVectorIndex: ...

    def drop(self, corpus_hash: str) -> int: ...  # noqa: E704 - what it held for a corpus, removed; how many


class MilvusSpec(NamedTuple):
    """Where a Milvus engine is: ``uri`` for ``MilvusClient``, ``where`` to name it in messages,
    whether it is Milvus Lite (a file), and the token to send."""

    uri: str
    where: str
    lite: bool
    token: str = ""
