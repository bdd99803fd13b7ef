"""Dense retrieval: cached document embeddings and a FAISS index over them.

Score: ``s_emb(q, d) = ⟨E(q), E(d)⟩`` (inner product; with normalized embeddings this is the
cosine). Index kinds:

* ``flat`` — exact inner product (``IndexFlatIP``), the default.
* ``hnsw`` — graph search (``IndexHNSWFlat``, inner product), approximate, for large corpora.
* ``sq8``  — 8-bit scalar quantization (``IndexScalarQuantizer(QT_8bit)``): per dimension, the
  trained min/max range is split into 255 levels — the int8 compression of the Baidu paper
  (Liu et al., "Pre-trained Language Model for Web-scale Retrieval in Baidu Search", KDD 2021,
  arXiv:2106.03373, §5.1, appendix 9.2); 4× smaller than float32.

``dims`` (optional, any kind) first maps every vector to fewer dimensions with a linear map onto
the corpus's top principal axes (``pca_projection``; its quality is measured by ``retrieval.evaluation.compression``).

``scores()`` gives inner products with the vectors the index holds: the float32 embeddings for
``flat`` and ``hnsw`` (exact), the decoded 8-bit codes for ``sq8`` and the projected vectors when
``dims`` is set — what a deployment that keeps only the compressed vectors can compute, and what
hybrid re-scoring then uses.
"""
from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from retrieval.data import ranking
from retrieval.data.run import Run
from retrieval.files.part_files import partial, remove_orphans
from retrieval.index.kept_index import KEPT_FILES, Stamp, stamp_path, write_stamp
from retrieval.index.recent import Recent
from retrieval.index.vectors_via_store import COMMIT_EVERY, encode_through_store
from retrieval.store import Store, text_hash

if TYPE_CHECKING:  # FAISS is imported where an index is made, read or written
    import faiss

    from retrieval.index.encoder import Encoder
    from retrieval.index.searchable import VectorIndex

INDEX_KINDS = ("flat", "hnsw", "sq8")
KEPT_KINDS = ("flat", "hnsw")  # kept in a file beside the store once built (their vectors are the embeddings)
HNSW_M, EF_SEARCH = 32, 512  # HNSW's links per node; its search breadth (set when searched, not built in)
HNSW_FROM = 500_000  # "auto" picks HNSW from this many documents on (bench/scale.py: see index_kind_for)


def index_kind_for(n_docs: int, kind: str = "auto") -> str:
    """The index kind "auto" stands for: exact ``flat`` below ``HNSW_FROM`` documents, ``hnsw``
    from there on; any other kind is returned as it is.

    Why 500,000: a flat search scans every vector, so its time grows with the corpus, and around
    500,000 documents the scan alone takes a large share of the 100 ms an interactive search should
    take end to end; HNSW (M 32, efSearch 512) answers far faster and grows slowly, but costs a build,
    256 more bytes per document and some recall. Below that size exactness is
    affordable, above it speed is worth the loss (the figures: ``bench/README.md``, ``scale.py``).
    """
    if kind != "auto":
        if kind not in INDEX_KINDS:
            raise ValueError(f"unknown index kind {kind!r}; choose from auto, {', '.join(INDEX_KINDS)}")
        return kind
    return "hnsw" if n_docs >= HNSW_FROM else "flat"




class Embedded(NamedTuple):
    vectors: np.ndarray  # float32 (len(texts), dim), rows in the order of the texts
    from_store: int  # distinct texts whose vectors were read from the store
    encoded: int  # texts encoded now: each distinct one once, committed to the store (every one without a store)


def embed_corpus(encoder: Encoder, texts: list[str], store: Store | None = None,
                 progress: Callable[[int, int], None] | None = None,
                 commit_every: int | None = None) -> Embedded:
    """Embeddings of ``texts``: read from the store where cached, encoded otherwise.

    Keyed by (encoder fingerprint, sha256 of the text), so reopening a corpus never re-encodes it.
    The texts still to encode go longest first, ``commit_every`` at a time, and each part is
    committed to the store before the next starts: a process killed half way resumes where it
    stopped, redoing at most one part (``commit_every`` defaults to ``COMMIT_EVERY``).
    ``progress(texts done, texts total)`` counts stored ones as done.
    """
    if store is None:
        return Embedded(encoder.encode(texts, progress=progress), 0, len(texts))
    out = np.zeros((len(texts), encoder.dim), dtype=np.float32)

    def sink(rows: list[int], vec: np.ndarray) -> None:
        out[rows] = vec

    from_store, encoded = encode_through_store(
        texts, lambda hashes: store.get_embeddings(encoder.fingerprint, hashes, dim=encoder.dim),
        lambda vecs: store.put_embeddings(encoder.fingerprint, vecs), encoder.encode, sink, progress,
        commit_every or COMMIT_EVERY)
    return Embedded(out, from_store, encoded)


def embed_texts(encoder: Encoder, texts: list[str], store: Store | None = None,
                progress: Callable[[int, int], None] | None = None) -> np.ndarray:
    """The vectors of ``embed_corpus``."""
    return embed_corpus(encoder, texts, store, progress).vectors


def held_vectors(index: faiss.Index) -> np.ndarray:
    """The float32 vectors a flat or HNSW (flat storage) index holds, as a read-only array over
    FAISS's own memory: no copy (1.5 GB less, and seconds, at a million 384-dimensional vectors). The
    array keeps the index alive; nothing adds to a built index, which would move its memory. Any
    other index: its vectors decoded into a copy."""
    import faiss

    try:
        flat = index if isinstance(index, faiss.IndexFlat) else \
            faiss.downcast_index(index.storage) if isinstance(index, faiss.IndexHNSW) else None
        if not isinstance(flat, faiss.IndexFlat) or index.ntotal == 0:
            raise TypeError("not flat storage")
        n, d = index.ntotal, index.d
        memory = (ctypes.c_float * (n * d)).from_address(int(flat.get_xb()))
        # the buffer, and so every array over it, holds the index (typeshed's ctypes arrays declare no attributes)
        memory.owner = index  # type: ignore[attr-defined]
        out = np.frombuffer(memoryview(memory), dtype=np.float32).reshape(n, d)
        out.flags.writeable = False
        return out
    except (AttributeError, TypeError):
        vectors: np.ndarray = index.reconstruct_n(0, index.ntotal)
        return vectors


class DenseIndex:
    """FAISS index over document embeddings (rows aligned with ``doc_ids``)."""

    def __init__(self, doc_ids: list[str], embeddings: np.ndarray, kind: str = "flat",
                 hnsw_m: int = HNSW_M, ef_search: int = EF_SEARCH, dims: int | None = None):
        if kind not in INDEX_KINDS:
            raise ValueError(f"unknown index kind {kind!r}; choose from {INDEX_KINDS}")
        if len(doc_ids) != len(embeddings):
            raise ValueError("doc_ids and embeddings differ in length")
        self.doc_ids = list(doc_ids)
        self.embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        self.kind, self.dims = kind, dims
        d = self.embeddings.shape[1]
        if dims is not None and not 0 < dims <= d:
            raise ValueError(f"dims must be between 1 and the embedding size {d}, not {dims}")
        self.projection = pca_projection(self.embeddings, dims) if dims is not None else None
        vecs = self.embeddings if self.projection is None else self.projection.apply(self.embeddings)
        import faiss

        index = _faiss_index(kind, vecs.shape[1], hnsw_m, ef_search)
        if not index.is_trained:
            index.train(vecs)
        index.add(vecs)
        # the vectors the index holds, as floats (decoded where it keeps codes): what scores() uses
        self.stored = vecs if kind != "sq8" else index.reconstruct_n(0, len(vecs))
        self.index = index if self.projection is None else faiss.IndexPreTransform(self.projection, index)

    @classmethod
    def from_faiss(cls, doc_ids: list[str], index: faiss.Index, kind: str,
                   ef_search: int = EF_SEARCH, dim: int | None = None) -> DenseIndex:
        """A ``flat`` or ``hnsw`` index read back (``retrieval.index.kept_index.read``): its float32 vectors
        are the embeddings, so nothing is re-encoded, read from the store or rebuilt. It must hold one
        vector per document, of ``dim`` floats where given (the encoder's)."""
        if kind not in KEPT_KINDS:
            raise ValueError(f"only {', '.join(KEPT_KINDS)} indexes are read back whole, not {kind!r}")
        if index.ntotal != len(doc_ids):
            raise ValueError(f"the index holds {index.ntotal:,} vectors, the corpus {len(doc_ids):,} documents")
        if dim is not None and index.d != dim:
            raise ValueError(f"the index holds vectors of {index.d:,} floats, the encoder makes {dim:,}")
        self = cls.__new__(cls)
        if kind == "hnsw":
            import faiss

            if not isinstance(index, faiss.IndexHNSW):
                raise ValueError(f"an index of kind hnsw must be an HNSW index, not {type(index).__name__}")
            index.hnsw.efSearch = ef_search
        self.doc_ids, self.kind, self.dims, self.projection, self.index = list(doc_ids), kind, None, None, index
        self.embeddings = held_vectors(index)
        self.stored = self.embeddings
        return self

    def write(self, path: str | Path, stamp: Stamp | None = None) -> None:
        """Keep the built index in ``path`` (written aside, then moved into place: a crash never
        leaves half a file under the name), with ``stamp`` beside it (``kept_index.write_stamp``:
        what it holds, its size and checksum; without one it is never read back as kept).
        ``.part`` files a killed writer left in the folder go first (``part_files``)."""
        if self.kind not in KEPT_KINDS or self.dims is not None:
            raise ValueError(f"only {', '.join(KEPT_KINDS)} indexes without dims are kept")
        if stamp is not None and (stamp.kind, stamp.dim, stamp.count) != (self.kind, self.index.d, self.index.ntotal):
            raise ValueError(f"the stamp says {stamp.count:,} {stamp.kind} vectors of {stamp.dim:,} floats, the index "
                             f"holds {self.index.ntotal:,} {self.kind} of {self.index.d:,}")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_orphans(path.parent, KEPT_FILES)
        aside = partial(path)
        import faiss

        try:
            faiss.write_index(self.index, str(aside))
            if stamp is not None:  # the stamp first: a crash between the two leaves a stamp the old file fails
                write_stamp(path, aside, stamp)
            else:
                stamp_path(path).unlink(missing_ok=True)
            os.replace(aside, path)
        finally:
            aside.unlink(missing_ok=True)

    @property
    def bytes_per_doc(self) -> int:
        """Bytes of one document's vector code: 1 per dimension for ``sq8``, 4 (float32) otherwise."""
        dim: int = self.stored.shape[1]
        return dim * (1 if self.kind == "sq8" else 4)

    @property
    def index_bytes(self) -> int:
        """Size of the whole serialized FAISS index (codes, quantizer ranges, projection, graph)."""
        import faiss

        return int(faiss.serialize_index(self.index).size)

    def search_vectors(self, qvecs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, rows), each (queries, k), best first; documents with equal scores (the same
        vector: repeated texts) in trec_eval's order (``retrieval.data.ranking``), whichever order
        FAISS's heap left them in. FAISS keeps an arbitrary few of the documents that tie at the
        ``k``-th score, so one more is asked for: where it ties too, the search goes deeper until the
        tie ends, and those trec_eval ranks first are kept."""
        k = min(k, len(self.doc_ids))
        deep = min(k + 1, len(self.doc_ids)) if k else 0
        q = np.ascontiguousarray(qvecs, dtype=np.float32)
        scores, rows = self.index.search(q, deep)
        while k < deep < len(self.doc_ids) and bool(np.any((rows[:, -1] >= 0) & (scores[:, -1] == scores[:, k - 1]))):
            deep = min(2 * deep, len(self.doc_ids))  # a tie reaches past the cut: look further (rare)
            scores, rows = self.index.search(q, deep)
        for i in range(len(rows)):
            if len(np.unique(scores[i])) < deep:  # a tie somewhere (rare): put it in trec_eval's order
                valid = rows[i] >= 0
                place = np.where(valid, self.tie_rank[np.where(valid, rows[i], 0)], np.iinfo(np.int64).max)
                order = np.lexsort((place, -scores[i]))
                scores[i], rows[i] = scores[i][order], rows[i][order]
        return np.ascontiguousarray(scores[:, :k]), np.ascontiguousarray(rows[:, :k])

    @cached_property
    def tie_rank(self) -> np.ndarray:
        """Each row's place in trec_eval's order of equal scores (``ranking.tie_rank``), computed once."""
        return ranking.tie_rank(self.doc_ids)

    def scores(self, qvec: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Inner products of one query vector with the stored documents at ``rows`` (all if None)."""
        q = np.asarray(qvec, dtype=np.float32)
        if self.projection is not None:
            q = self.projection.apply(q[None])[0]
        mat = self.stored if rows is None else self.stored[rows]
        return mat @ q


def _faiss_index(kind: str, d: int, hnsw_m: int, ef_search: int) -> faiss.Index:
    import faiss

    if kind == "flat":
        return faiss.IndexFlatIP(d)
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(d, hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efSearch = ef_search
        return index
    return faiss.IndexScalarQuantizer(d, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)


def pca_projection(embeddings: np.ndarray, dims: int) -> faiss.LinearTransform:
    """The linear map x ↦ A·x onto the top ``dims`` principal axes of ``embeddings``.

    A (dims × d) holds the leading eigenvectors of the embeddings' covariance, from
    ``faiss.PCAMatrix``. The mean is *not* subtracted (no bias): ⟨q, d⟩ = ⟨q, μ⟩ + ⟨q, d − μ⟩ and
    ⟨q, μ⟩ is the same for every document, so ⟨A·q, A·d⟩ ranks like ⟨q, d⟩ up to the residual
    qᵀ(I − AᵀA)(d − μ), which PCA minimises; centring both sides (``PCAMatrix.apply``) adds the
    document-dependent term −⟨A·μ, A·(d − μ)⟩ instead, which costs quality (``bench/README.md``,
    ``index_compression.py``).
    """
    import faiss

    d = embeddings.shape[1]
    pca = faiss.PCAMatrix(d, dims)
    pca.train(np.ascontiguousarray(embeddings, dtype=np.float32))
    linear = faiss.LinearTransform(d, dims, False)
    faiss.copy_array_to_vector(faiss.vector_to_array(pca.A)[:dims * d].copy(), linear.A)
    linear.is_trained = True
    return linear


QUERY_SETS = 4  # query sets a store-less retriever keeps encoded (a data set's splits, a few at most)


class DenseRetriever:
    """Encode queries, search the index: the ``search(queries, k) -> Run`` shape."""

    def __init__(self, encoder: Encoder, index: VectorIndex, store: Store | None = None,
                 from_store: int = 0, encoded: int = 0):
        self.encoder, self.index, self.store = encoder, index, store
        self.from_store, self.encoded = from_store, encoded  # how the corpus's vectors were obtained
        self.built_at = time.monotonic()
        self._query_sets: Recent[tuple[str, ...], np.ndarray] = Recent(QUERY_SETS)  # without a store: kept here
        self._query_lock = threading.Lock()  # the map's; an encoding runs outside it

    @property
    def repeats(self) -> int:
        """Documents whose text another document has too: stored once, they share its vector."""
        return len(self.index.doc_ids) - self.from_store - self.encoded

    def encode_queries(self, queries: dict[str, str]) -> np.ndarray:
        """Embeddings of a query set (a split's queries), cached in the store like documents. Without a
        store (``evaluate --no-store``, a bench), the last ``QUERY_SETS`` sets are kept by this retriever
        instead: an evaluation asks for a split's queries once per system that reads them (dense, the
        hybrid's candidates and exact scores), and they are encoded once."""
        texts = list(queries.values())
        if self.store is not None:
            return embed_texts(self.encoder.for_queries(), texts, self.store)
        key = tuple(texts)
        with self._query_lock:
            kept = self._query_sets.get(key)
        if kept is not None:
            return kept
        vectors = embed_texts(self.encoder.for_queries(), texts)
        vectors.flags.writeable = False  # shared by every caller: none may change another's
        with self._query_lock:
            self._query_sets.put(key, vectors)  # the least recently used set goes past the bound
        return vectors

    def held_vectors(self, doc_ids: list[str], rows: list[int] | np.ndarray) -> np.ndarray | None:
        """The encoder's float32 vectors of ``rows`` of a corpus listed as ``doc_ids``, read from the index
        where it holds them in that order (a local flat, HNSW or sq8 build keeps the encoder's own vectors;
        one read back, its flat storage): nothing encoded. None where it does not (another engine's index,
        or one over other documents): the caller reads the store or encodes."""
        held = getattr(self.index, "embeddings", None)
        if not isinstance(held, np.ndarray) or len(held) != len(doc_ids) or list(self.index.doc_ids) != list(doc_ids):
            return None
        return np.asarray(held[rows], dtype=np.float32)

    def encode_query(self, text: str) -> np.ndarray:
        """One query's embedding: read from the store when an evaluation already cached it (a
        labelled query), else encoded now and not written (a typed query is seldom typed again,
        and the store would grow with every search)."""
        encoder = self.encoder.for_queries()
        if self.store is not None:
            cached = self.store.get_embeddings(encoder.fingerprint, [text_hash(text)], dim=encoder.dim)
            if cached:
                return next(iter(cached.values()))
        vector: np.ndarray = encoder.encode([text])[0]
        return vector

    def search(self, queries: dict[str, str], k: int = 100) -> Run:
        if not queries:
            return {}
        qvecs = self.encode_queries(queries)
        scores, idx = self.index.search_vectors(qvecs, k)
        ids = self.index.doc_ids
        return {qid: [(ids[j], float(s)) for j, s in zip(idx[i], scores[i]) if j >= 0]
                for i, qid in enumerate(queries)}
