"""Dense retrieval: cached document embeddings and a FAISS index over them.

Score: ``s_emb(q, d) = ⟨E(q), E(d)⟩`` (inner product; with normalized embeddings this is the
cosine). Index kinds:

* ``flat`` — exact inner product (``IndexFlatIP``), the default.
* ``hnsw`` — graph search (``IndexHNSWFlat``, inner product), approximate, for large corpora.
* ``sq8``  — 8-bit scalar quantization (``IndexScalarQuantizer(QT_8bit)``): per dimension, the
  trained min/max range is split into 255 levels — the int8 compression of the Baidu paper
  (papers/baidu-ernie-web-retrieval.md §5.1, appendix 9.2); 4× smaller than float32.

Whatever the index, ``scores()`` gives exact float32 inner products for chosen documents, which is
what hybrid re-scoring needs.
"""
from __future__ import annotations

import faiss
import numpy as np

from .encoder import Encoder, Progress
from .run import Run
from .store import Store, text_hash

INDEX_KINDS = ("flat", "hnsw", "sq8")


def embed_texts(encoder: Encoder, texts: list[str], store: Store | None = None,
                progress: Progress | None = None) -> np.ndarray:
    """Embeddings of ``texts``, read from the store where cached, encoded (and stored) otherwise.

    Keyed by (encoder fingerprint, sha256 of the text), so reopening a corpus never re-encodes it.
    """
    if store is None:
        return encoder.encode(texts, progress=progress)
    hashes = [text_hash(t) for t in texts]
    cached = store.get_embeddings(encoder.fingerprint, list(dict.fromkeys(hashes)))
    missing = list(dict.fromkeys(h for h in hashes if h not in cached))
    if missing:
        first = {h: i for i, h in reversed(list(enumerate(hashes)))}
        todo = [texts[first[h]] for h in missing]
        done_before = len(texts) - len(todo)

        def report(done: int, total: int) -> None:
            if progress:
                progress(done_before + done, len(texts))

        vecs = encoder.encode(todo, progress=report)
        fresh = dict(zip(missing, vecs))
        store.put_embeddings(encoder.fingerprint, fresh)
        cached.update(fresh)
    elif progress:
        progress(len(texts), len(texts))
    if not texts:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    return np.stack([cached[h] for h in hashes]).astype(np.float32, copy=False)


class DenseIndex:
    """FAISS index over document embeddings (rows aligned with ``doc_ids``)."""

    def __init__(self, doc_ids: list[str], embeddings: np.ndarray, kind: str = "flat",
                 hnsw_m: int = 32, ef_search: int = 128):
        if kind not in INDEX_KINDS:
            raise ValueError(f"unknown index kind {kind!r}; choose from {INDEX_KINDS}")
        if len(doc_ids) != len(embeddings):
            raise ValueError("doc_ids and embeddings differ in length")
        self.doc_ids = list(doc_ids)
        self.embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        self.kind = kind
        d = self.embeddings.shape[1]
        if kind == "flat":
            index = faiss.IndexFlatIP(d)
        elif kind == "hnsw":
            index = faiss.IndexHNSWFlat(d, hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efSearch = ef_search
        else:
            index = faiss.IndexScalarQuantizer(d, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
            index.train(self.embeddings)
        index.add(self.embeddings)
        self.index = index

    @property
    def bytes_per_doc(self) -> int:
        d = self.embeddings.shape[1]
        return d if self.kind == "sq8" else 4 * d

    def search_vectors(self, qvecs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(k, len(self.doc_ids))
        return self.index.search(np.ascontiguousarray(qvecs, dtype=np.float32), k)

    def scores(self, qvec: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Exact inner products of one query vector with the documents at ``rows`` (all if None)."""
        mat = self.embeddings if rows is None else self.embeddings[rows]
        return mat @ qvec.astype(np.float32)


class DenseRetriever:
    """Encode queries, search the index: the ``search(queries, k) -> Run`` shape."""

    def __init__(self, encoder: Encoder, index: DenseIndex, store: Store | None = None):
        self.encoder, self.index, self.store = encoder, index, store

    def encode_queries(self, queries: dict[str, str]) -> np.ndarray:
        return embed_texts(self.encoder, list(queries.values()), self.store)

    def search(self, queries: dict[str, str], k: int = 100) -> Run:
        if not queries:
            return {}
        qvecs = self.encode_queries(queries)
        scores, idx = self.index.search_vectors(qvecs, k)
        ids = self.index.doc_ids
        return {qid: [(ids[j], float(s)) for j, s in zip(idx[i], scores[i]) if j >= 0]
                for i, qid in enumerate(queries)}
