"""The in-process engine: bm25s for BM25, FAISS for the vectors and a compressed-sparse-column
matrix for the learned sparse (SPLADE) vectors (``retrieval.sparse.SparseIndex``), the BM25 index
and both kinds of vectors cached in the SQLite store (the BM25 index by corpus and settings, the
vectors by model fingerprint and text hash), so reopening a corpus neither re-tokenizes nor
re-encodes it."""
from __future__ import annotations

import numpy as np

from ..dense import DenseIndex, embed_corpus
from ..encoder import Encoder
from ..lexical import BM25Index
from ..sparse import SparseIndex, SparseVector
from ..store import Store, cache_key
from ..tokenize import Tokenizer
from .base import Capabilities, Indexed


class InProcess:
    """bm25s + FAISS + a sparse inverted index in this process (the default engine)."""

    name = "in-process"
    key: dict = {}  # nothing added to cached runs' parameters: the engine they always had
    where = None  # in this process
    capabilities = Capabilities(index_variants=True, explains=True, bm25_methods=BM25Index.METHODS)

    def lexical(self, corpus, tokenizer: Tokenizer, bm25_args: dict, store: Store | None,
                progress=None) -> BM25Index:
        """The BM25 index from the store when this corpus was indexed with these settings before,
        else built (and saved there)."""
        key = cache_key(dataset=corpus.hash, system="bm25-index", params={**bm25_args, "tokenizer": tokenizer.config},
                        split=None, k=0)  # the corpus, not the data set: new queries keep the index
        saved = store.get_bm25(key) if store is not None else None
        if saved is not None:
            return BM25Index.from_bytes(saved, corpus.doc_ids, corpus.texts, tokenizer=tokenizer, **bm25_args)
        index = BM25Index(corpus.doc_ids, corpus.texts, tokenizer=tokenizer, **bm25_args)
        if store is not None:
            store.put_bm25(key, corpus.hash, index.to_bytes())
        return index

    def vectors(self, corpus, encoder: Encoder, store: Store | None, kind: str, dims: int | None,
                progress=None, indexing=None, embeddings: np.ndarray | None = None) -> Indexed:
        """Embed the corpus (from the store where cached; ``embeddings`` when given, e.g. another
        index's over the same corpus) and build a FAISS index of ``kind``."""
        if embeddings is None:
            emb = embed_corpus(encoder, corpus.texts, store, progress=progress)
            embeddings, from_store, encoded = emb
        else:
            from_store = encoded = 0
        if indexing:
            indexing()
        return Indexed(DenseIndex(corpus.doc_ids, embeddings, kind=kind, dims=dims), from_store, encoded)

    def sparse(self, corpus, fingerprint: str, vectors: list[SparseVector], vocab_size: int) -> SparseIndex:
        """The learned sparse vectors as an inverted index in memory (built from ``vectors``, which
        the store caches: nothing else is kept)."""
        return SparseIndex(corpus.doc_ids, vectors, vocab_size)

    def drop(self, corpus_hash: str) -> int:
        """Nothing to drop: the store's rows are keyed by content and cost nothing when unused."""
        return 0
