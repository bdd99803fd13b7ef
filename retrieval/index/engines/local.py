"""The in-process engine: bm25s for BM25, FAISS for the vectors and a compressed-sparse-column
matrix for the learned sparse (SPLADE) vectors (``retrieval.index.splade.SparseIndex``), the BM25 index
and both kinds of vectors cached in the SQLite store (the BM25 index by corpus and settings, the
vectors by model fingerprint and text hash), so reopening a corpus neither re-tokenizes nor
re-encodes it."""
from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.files.part_files import remove_orphans
from retrieval.index import kept_index
from retrieval.index.bm25_index import BM25Index
from retrieval.index.bm25_settings import BM25Settings
from retrieval.index.dense_index import HNSW_M, KEPT_KINDS, DenseIndex, embed_corpus
from retrieval.index.engines.base import Capabilities, Corpus, Indexed
from retrieval.index.kept_index import KEPT_FILES, Stamp, stamp_path
from retrieval.index.searchable import SparseVector
from retrieval.index.splade import SparseIndex
from retrieval.index.tokenize import Tokenizer
from retrieval.progress import Counter
from retrieval.store import Store, cache_key, text_hash

if TYPE_CHECKING:
    from retrieval.index.encoder import Encoder

log = logging.getLogger(__name__)
KEPT_PER_CORPUS = 3  # kept indexes of one corpus (encoders, kinds) beyond which the least recently used goes


def index_file(store: Store | None, corpus: Corpus, encoder: Encoder, kind: str, hnsw_m: int = HNSW_M) -> Path | None:
    """Where a built ``flat`` or ``hnsw`` index of this corpus and encoder is kept: ``indexes/``
    beside the store file, named by a hash of corpus, encoder fingerprint, kind and graph settings
    (a file, not a store row: a million vectors pass SQLite's 1 GB value limit), after the corpus's
    hash so one corpus's files are found by name. None without a store or for a kind that is not kept.
    HNSW's search breadth (efSearch) is not in the name: it is set when the index is read back, the
    graph does not depend on it."""
    if store is None or kind not in KEPT_KINDS:
        return None
    import faiss

    params = {"model": encoder.fingerprint, "kind": kind, "hnsw_m": hnsw_m, "faiss": faiss.__version__}
    key = cache_key(dataset=corpus.hash, system="faiss-index", params=params, split=None, k=0)
    return store.path.parent / "indexes" / f"{corpus.hash[:16]}-{key}.faiss"


def evict(kept: Path, keep: int = KEPT_PER_CORPUS) -> list[Path]:
    """Remove the least recently used kept indexes of ``kept``'s corpus beyond the ``keep`` most
    recent (by modification time, which a read renews), never ``kept`` itself, each with its stamp:
    every fine-tuned encoder or index kind leaves one, and at a million documents each is 1.6 GB.
    Returns those removed."""
    corpus = kept.name.split("-", 1)[0]
    files = sorted((f for f in kept.parent.glob(f"{corpus}-*.faiss") if f != kept),
                   key=lambda f: f.lstat().st_mtime, reverse=True)  # a link's own time: never followed
    gone = files[max(keep - 1, 0):]
    for f in gone:
        f.unlink(missing_ok=True)
        stamp_path(f).unlink(missing_ok=True)
    return gone


def _stored_rows(corpus: Corpus, encoder: Encoder, store: Store | None
                 ) -> Callable[[list[int]], dict[int, np.ndarray]]:
    """``rows -> {row: the store's embedding of that document}`` (those it holds): what a kept
    index's vectors are compared with before it is served (``kept_index.read``)."""
    def stored(rows: list[int]) -> dict[int, np.ndarray]:
        if store is None:
            return {}
        hashes = {row: text_hash(corpus.texts[row]) for row in rows}
        got = store.get_embeddings(encoder.fingerprint, list(set(hashes.values())))
        return {row: got[h] for row, h in hashes.items() if h in got}
    return stored


class InProcess:
    """bm25s + FAISS + a sparse inverted index in this process (the default engine)."""

    name = "in-process"
    key: dict[str, Any] = {}  # nothing added to cached runs' parameters: the engine they always had
    where = None  # in this process
    capabilities = Capabilities(index_variants=True, explains=True, bm25_methods=BM25Index.METHODS)

    def lexical(self, corpus: Corpus, tokenizer: Tokenizer, bm25: BM25Settings, store: Store | None,
                progress: Counter | None = None) -> BM25Index:
        """The BM25 index from the store when this corpus was indexed with these settings before,
        else built (and saved there). A stored index that is not what RankScope wrote for this corpus
        and these settings (``bm25_blob``: foreign, cut, forged, another corpus's) is never served: it
        is logged, naming the problem, built again and written over."""
        # the corpus, not the data set: new queries keep the index
        key = cache_key(dataset=corpus.hash, system="bm25-index",
                        params={**bm25.as_key(), "tokenizer": tokenizer.config}, split=None, k=0)
        saved = store.get_bm25(key) if store is not None else None
        if saved is not None:
            try:
                return BM25Index.from_bytes(saved, corpus.doc_ids, corpus.texts, tokenizer=tokenizer,
                                            k1=bm25.k1, b=bm25.b, method=bm25.method)
            except ValueError as err:  # bm25_blob.DamagedIndex: whatever the blob is, it is not this index
                log.warning("the stored BM25 index %s cannot be used (%s); building it again", key[:12], err)
        index = BM25Index(corpus.doc_ids, corpus.texts, tokenizer=tokenizer, k1=bm25.k1, b=bm25.b, method=bm25.method)
        if store is not None:
            store.put_bm25(key, corpus.hash, index.to_bytes())
        return index

    def vectors(self, corpus: Corpus, encoder: Encoder, store: Store | None, kind: str, dims: int | None,
                progress: Counter | None = None, indexing: Callable[[], None] | None = None,
                embeddings: np.ndarray | None = None) -> Indexed:
        """Embed the corpus (from the store where cached; ``embeddings`` when given, e.g. another
        index's over the same corpus) and build a FAISS index of ``kind``. A ``flat`` or ``hnsw``
        index is kept in a file beside the store once built (``index_file``) and read back on the
        next open instead: its vectors are the embeddings, so a reopen neither reads them from the
        store nor rebuilds the graph. It is served only when it is what this corpus and encoder need
        (``kept_index.read``: its stamp, size, FAISS header, checksum and a spread of its vectors
        against the store's); any mismatch is logged and the index built again and replaced. Past
        ``KEPT_PER_CORPUS`` files for the corpus, the least recently used goes (``evict``); ``.part``
        files a killed writer left in the folder go when it is opened (``part_files``)."""
        kept = index_file(store, corpus, encoder, kind) if dims is None and embeddings is None else None
        stamp = Stamp(kind, encoder.dim, len(corpus.doc_ids), corpus.hash, encoder.fingerprint)
        if kept is not None:
            remove_orphans(kept.parent, KEPT_FILES)
        if kept is not None and kept.exists():
            try:
                read = kept_index.read(kept, stamp, _stored_rows(corpus, encoder, store))
                index = DenseIndex.from_faiss(corpus.doc_ids, read, kind, dim=encoder.dim)
                os.utime(kept)  # used now: the last to be evicted
                if progress:
                    progress(len(corpus.doc_ids), len(corpus.doc_ids))
                return Indexed(index, len(set(corpus.texts)), 0)  # each distinct text's vector, as from the store
            except (OSError, RuntimeError, ValueError) as err:  # damaged, foreign or forged: build and replace it
                log.warning("the kept index %s cannot be used (%s); building it again", kept, err)
        if embeddings is None:
            emb = embed_corpus(encoder, corpus.texts, store, progress=progress)
            embeddings, from_store, encoded = emb
        else:
            from_store = encoded = 0
        if indexing:
            indexing()
        index = DenseIndex(corpus.doc_ids, embeddings, kind=kind, dims=dims)
        if kept is not None:
            try:
                index.write(kept, stamp)
                evict(kept)
            except (OSError, RuntimeError) as err:  # a full or read-only disk: the index still serves
                log.warning("could not keep the index in %s (%s)", kept, err)
        return Indexed(index, from_store, encoded)

    def sparse(self, corpus: Corpus, fingerprint: str, vectors: list[SparseVector], vocab_size: int) -> SparseIndex:
        """The learned sparse vectors as an inverted index in memory (built from ``vectors``, which
        the store caches: nothing else is kept)."""
        return SparseIndex(corpus.doc_ids, vectors, vocab_size)

    def drop(self, corpus_hash: str) -> int:
        """Nothing to drop: the store's rows are keyed by content and cost nothing when unused."""
        return 0
