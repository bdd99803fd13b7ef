"""What a system reads from the workspace it ranks over, as a ``typing.Protocol``: the data set, the
store, the engine and the indexes it built, the tokenizer and encoder, the values of the systems' declared
parameters, and the slots a system keeps its own state in (``retrieval.systems.state``).

Every system's behaviours take a ``SystemWorkspace`` (``retrieval.systems.base``), never the
``Workspace`` itself: the workspace imports the systems (its registry), so a system that named the
``Workspace`` class, even only in an annotation, would close a circle of imports through every system
module. ``retrieval.workspace.Workspace`` meets this protocol (mypy checks it wherever the workspace hands
itself to a system: ``Workspace.system_params``, ``Workspace.pending``, ``Workspace.search``); a system that
needs more of the workspace adds a member here, which the workspace must then offer.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from retrieval.data.dataset import Dataset
    from retrieval.index.bm25_index import BM25Index
    from retrieval.index.bm25_settings import BM25Settings
    from retrieval.index.builds import IndexBuild
    from retrieval.index.dense_index import DenseRetriever
    from retrieval.index.encoder import Encoder
    from retrieval.index.engines import Corpus, Engine
    from retrieval.index.searchable import LexicalIndex
    from retrieval.index.splade import SparseRetriever
    from retrieval.index.tokenize import Tokenizer
    from retrieval.progress import Counter
    from retrieval.store import Store
    from retrieval.systems.declared import Settings


S = TypeVar("S")  # a system's state (``system_state``)

class SystemWorkspace(Protocol):
    """A workspace as a system sees it (module docstring): read-only properties and the few methods
    the systems call, each as ``retrieval.workspace.Workspace`` has it."""

    @property
    def dataset(self) -> Dataset: ...  # noqa: E704 - the documents, queries, splits and labels

    @property
    def store(self) -> Store | None: ...  # noqa: E704 - the cache (None: nothing kept beyond this process)

    @property
    def engine(self) -> Engine: ...  # noqa: E704 - where BM25 and the vectors live

    @property
    def tokenizer(self) -> Tokenizer: ...  # noqa: E704 - how BM25 analyzes text

    @property
    def depth(self) -> int: ...  # noqa: E704 - how deep candidate lists go for fusion and probes

    @property
    def index_kind(self) -> str: ...  # noqa: E704 - the dense index: "flat", "hnsw" or "sq8"

    @property
    def index_dims(self) -> int | None: ...  # noqa: E704 - PCA's dimensions (None: the encoder's)

    @property
    def corpus(self) -> Corpus: ...  # noqa: E704 - what the engine indexes

    @property
    def lexical(self) -> LexicalIndex: ...  # noqa: E704 - the engine's BM25, built on first use

    @property
    def bm25(self) -> BM25Index: ...  # noqa: E704 - BM25 in this process (explanations, lengths)

    @property
    def encoder(self) -> Encoder: ...  # noqa: E704 - the dense encoder, loaded on first use

    @property
    def dense(self) -> DenseRetriever: ...  # noqa: E704 - the dense retriever, built on first use

    @property
    def sparse(self) -> SparseRetriever: ...  # noqa: E704 - the learned sparse retriever, as ``dense``

    @property
    def builds(self) -> dict[str, IndexBuild[Any, Any]]: ...  # noqa: E704 - the background builds, by kind ("dense", …)

    @property
    def bm25_settings(self) -> BM25Settings: ...  # noqa: E704 - BM25's declared parameters' values

    def settings_of(self, key: str) -> Settings: ...  # noqa: E704 - system ``key``'s parameters' values

    def data_key(self, split: str | None, labels: bool = False) -> dict[str, str]: ...  # noqa: E704

    def system_state(self, key: str, make: Callable[[], S], scope: str = ...) -> S: ...  # noqa: E704

    def background_build(self, key: str,  # noqa: E704
                         make: Callable[[Counter | None, Callable[[], None] | None], Any], total: int,
                         expected_bytes: int = 0, scope: str = ...) -> IndexBuild[Any, Any]: ...
