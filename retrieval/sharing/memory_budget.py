"""How much memory an open workspace holds, part by part, so that a shared app can keep a budget.

A workspace's memory is mostly parts it shares with others: the documents (every workspace of a
corpus), the BM25 index and the dense index (siblings made by ``with_run``, ``with_dataset`` and
``with_model`` share them), the queries and labels, the imported runs. ``parts`` names each part by
what it is (the same object gives the same key) and estimates its bytes, so the registry sums each
part once over everything it holds.

The estimates count what dominates: the texts as Python holds them (``sys.getsizeof``, so 1, 2 or 4
bytes a character as CPython stores them), a fixed cost per document, query, label, vocabulary term
and run row for the objects around them (``PER_DOC`` …, measured with ``bench/session_memory.py``,
which compares the estimate with the process's resident memory as workspaces open), and the numpy
arrays and FAISS codes of the indexes by their sizes. A dense index still being encoded counts as
the size it will have. What the systems keep in the workspace's slots (``Workspace.system_states``:
an index a system built, the CLEAR hybrid's λ) each says itself, through its ``nbytes()``.

Everything is read through the workspace's public accessors (``built_lexical``, ``builds``,
``loaded_encoder``, ``system_states``, ``imported``), so a new system's index is counted with no
change here.
"""
from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from retrieval.data.dataset import Dataset
    from retrieval.data.run import Run


class Held(Protocol):
    """What the budget reads of a workspace (``retrieval.workspace.Workspace`` is one): the parts it
    holds. A Protocol, so that the budget, below the workspace, never imports it; the indexes, builds,
    encoder and systems' states are read by their sizes alone (``lexical_bytes``, ``dense_bytes``,
    ``nbytes``), so they are typed as what they are to the budget: anything."""

    @property
    def dataset(self) -> Dataset: ...  # noqa: E704

    @property
    def engine(self) -> Any: ...  # noqa: E704

    @property
    def built_lexical(self) -> tuple[Any, ...]: ...  # noqa: E704

    @property
    def builds(self) -> Mapping[str, Any]: ...  # noqa: E704

    @property
    def loaded_encoder(self) -> Any: ...  # noqa: E704

    @property
    def imported(self) -> Mapping[str, _Imported]: ...  # noqa: E704

    def system_states(self) -> Mapping[tuple[int, str], Any]: ...  # noqa: E704


class _Imported(Protocol):
    """An imported run as the budget counts it: its lists."""

    @property
    def run(self) -> Run: ...  # noqa: E704

PER_DOC = 600  # Document object, its id, dict and list slots, row map entry, BM25 length (bench/session_memory.py)
TEXT_FACTOR = 1.5  # the texts, plus what tokenizing them leaves in the allocator (long texts: SciFact's, measured)
PER_QUERY = 250
PER_LABEL = 120
PER_TERM = 200  # a BM25 vocabulary entry and its document frequency
PER_RUN_ROW = 120  # an imported run's (doc id, score) tuple in its list
PER_BM25_DOC = 300  # BM25's share of vocabulary and lengths a document, before it is built
SPARSE_DOC = 1_600  # a learned sparse vector in the index (about 150 terms × 8 bytes, and slack), before it is built
DENSE_COPIES = 2  # a flat index: the float32 matrix RankScope keeps, and FAISS's own copy

_text_bytes: dict[str, int] = {}  # corpus hash -> bytes of its texts (computed once per corpus)
_lock = threading.Lock()

Parts = dict[tuple[object, ...], int]  # (what, which) -> bytes


def _texts_size(dataset: Dataset) -> int:
    """Bytes of the documents' titles and texts and of the joined texts BM25 keeps (once a corpus)."""
    key = dataset.corpus_hash
    with _lock:
        known = _text_bytes.get(key)
    if known is None:
        size = sys.getsizeof
        known = sum(size(d.title) + 2 * size(d.text) for d in dataset.docs.values())  # text twice: full_text
        with _lock:
            _text_bytes[key] = known
    return known


def dataset_parts(dataset: Dataset) -> Parts:
    """The documents (keyed by corpus), and the queries and labels (keyed by the objects)."""
    labels = sum(len(docs) for split in dataset.qrels.values() for docs in split.values())
    return {("docs", dataset.corpus_hash): int(TEXT_FACTOR * _texts_size(dataset)) + PER_DOC * len(dataset.docs),
            ("queries", id(dataset.queries)): sum(sys.getsizeof(t) for t in dataset.queries.values())
            + PER_QUERY * len(dataset.queries),
            ("qrels", id(dataset.qrels)): PER_LABEL * labels}


def lexical_bytes(index: object) -> int:
    """A BM25 index held in this process (``lexical.BM25Index``): bm25s's sparse score matrix, its
    vocabulary and RankScope's document frequencies and lengths; 0 for an engine's remote one."""
    engine = getattr(index, "_engine", None)
    if engine is None:
        return 0
    arrays = sum(getattr(v, "nbytes", 0) for v in (getattr(engine, "scores", None) or {}).values())
    terms = len(getattr(engine, "vocab_dict", {}) or {}) + len(getattr(index, "df", {}) or {})
    return arrays + PER_TERM * terms + getattr(getattr(index, "doc_len", None), "nbytes", 0)


def dense_bytes(dense: object) -> int:
    """A built dense index (``dense_index.DenseRetriever``): the vectors RankScope keeps and FAISS's codes."""
    index = getattr(dense, "index", None)
    if index is None:  # another engine's: vectors live there
        return 0
    kept = getattr(getattr(index, "embeddings", None), "nbytes", 0)
    stored = getattr(index, "stored", None)
    if stored is not None and stored is not getattr(index, "embeddings", None):
        kept += stored.nbytes
    faiss_index = getattr(index, "index", None)
    codes = int(getattr(faiss_index, "ntotal", 0)) * int(getattr(faiss_index, "code_size", 0) or 0)
    return kept + codes


def parts(ws: Held) -> Parts:
    """Every part ``ws`` holds, by a key two workspaces sharing the part share, with its bytes."""
    out = dataset_parts(ws.dataset)
    for index in ws.built_lexical:
        out[("bm25", id(index))] = lexical_bytes(index)
    builds = ws.builds
    build = builds["dense"]
    if build.built is not None or build.status is not None:  # keyed by the shared build
        if build.built is not None:  # another engine keeps the vectors itself
            out[("dense", build.identity)] = dense_bytes(build.built) if ws.engine.where is None else 0
        else:  # being encoded: counted at the size it will have
            encoder = ws.loaded_encoder
            out[("dense", build.identity)] = DENSE_COPIES * 4 * (encoder.dim if encoder is not None else 384) \
                * len(ws.dataset.docs)
    sparse = builds["sparse"]
    if sparse.built is not None or sparse.status is not None:
        held = sparse.built.index if sparse.built is not None else None
        out[("sparse", sparse.identity)] = held.nbytes if held is not None else SPARSE_DOC * len(ws.dataset.docs)
    for key, state in ws.system_states().items():  # each system's own (an index it built, λ), shared once
        part = ("state", *key)  # named first: mypy reads out[("state", *key)] as 3.11's out["state", *key]
        out[part] = int(state.nbytes())
    for imported in ws.imported.values():
        out[("run", id(imported.run))] = PER_RUN_ROW * sum(len(h) for h in imported.run.values())
    return out


def total(parts_by_holder: Mapping[object, Parts]) -> int:
    """Bytes of the union of several holders' parts, each shared part counted once."""
    seen: Parts = {}
    for held in parts_by_holder.values():
        seen.update(held)
    return sum(seen.values())


def estimate_new(dataset: Dataset, dim: int = 384) -> int:
    """What opening a workspace on ``dataset`` would add if nothing were shared: documents, BM25
    (its score matrix and vocabulary: about the texts' size, plus ``PER_BM25_DOC`` a document), a
    flat dense index of ``dim`` dimensions and the learned sparse index."""
    docs = sum(dataset_parts(dataset).values())
    n = len(dataset.docs)
    return docs + _texts_size(dataset) + PER_BM25_DOC * n + DENSE_COPIES * 4 * dim * n + SPARSE_DOC * n
