"""Negative mining. A known positive of the query (label > 0 in any split) is never a negative.

* ``random`` — uniform over the corpus: the "simple" negative n of Peiyang Liu, Sen Wang, Xi Wang,
  Wei Ye, Shikun Zhang, "QuadrupletBERT: An Efficient Model For Embedding-Based Large-Scale
  Retrieval", NAACL-HLT 2021, §4.1.
* ``bm25`` — uniform over the non-relevant documents in BM25's top N: the error-based negatives of
  CLEAR (Luyu Gao, Zhuyun Dai, Tongfei Chen, Zhen Fan, Benjamin Van Durme, Jamie Callan,
  "Complement Lexical Retrieval Model with Semantic Residual Embeddings", ECIR 2021,
  arXiv:2004.13969): §3.3 samples "uniformly ... from the top N documents returned by lexical
  retrieval", §4 uses N = 1,000.
* ``model`` — uniform over the non-relevant documents in the current encoder's top k: the hard
  negatives of QuadrupletBERT's second stage (§4.1: "retrieve a candidate set C_i" with the
  stage-one model and "randomly select a sentence in C_i as hn_i").
In-batch negatives need no mining (the loss uses the batch).
"""
from __future__ import annotations

import random
from collections.abc import Set as AbstractSet

import numpy as np

from retrieval.data.dataset import Dataset
from retrieval.index.bm25_index import BM25Index

SOURCES = ("random", "bm25", "model")


class CandidatePool:
    """Per query, the candidate negatives (corpus rows) of one source, minus known positives."""

    def __init__(self, doc_ids: list[str], candidates: dict[str, list[int]], source: str):
        self.doc_ids, self.candidates, self.source = doc_ids, candidates, source

    def sample(self, query: str, rng: random.Random, exclude_rows: AbstractSet[int] = frozenset()) -> int | None:
        rows = self.candidates.get(query)
        if not rows:
            return None
        for _ in range(8):
            r = rows[rng.randrange(len(rows))]
            if r not in exclude_rows:
                return r
        free = [r for r in rows if r not in exclude_rows]
        return rng.choice(free) if free else None


def _positive_rows(query_ids: dict[str, str | None], positives: dict[str, set[str]],
                   row_of: dict[str, int]) -> dict[str, set[int]]:
    return {q: {row_of[d] for d in positives.get(qid, ()) if d in row_of} if qid else set()
            for q, qid in query_ids.items()}


def bm25_pool(bm25: BM25Index, query_ids: dict[str, str | None], positives: dict[str, set[str]],
              depth: int = 100) -> CandidatePool:
    """Non-relevant documents of BM25's top ``depth`` for each query text (keys of ``query_ids``)."""
    row_of = {d: i for i, d in enumerate(bm25.doc_ids)}
    pos_rows = _positive_rows(query_ids, positives, row_of)
    run = bm25.search({q: q for q in query_ids}, k=depth)
    cands = {q: [row_of[d] for d, _ in hits if row_of[d] not in pos_rows[q]] for q, hits in run.items()}
    return CandidatePool(bm25.doc_ids, cands, "bm25")


def model_pool(doc_ids: list[str], doc_embeddings: np.ndarray, query_embeddings: np.ndarray,
               query_ids: dict[str, str | None], positives: dict[str, set[str]], depth: int = 50) -> CandidatePool:
    """Non-relevant documents of the encoder's top ``depth`` (inner product) for each query."""
    row_of = {d: i for i, d in enumerate(doc_ids)}
    pos_rows = _positive_rows(query_ids, positives, row_of)
    scores = query_embeddings @ doc_embeddings.T
    depth = min(depth, len(doc_ids))
    top = np.argsort(-scores, axis=1)[:, :depth]
    cands = {q: [int(r) for r in top[i] if int(r) not in pos_rows[q]] for i, q in enumerate(query_ids)}
    return CandidatePool(doc_ids, cands, "model")


def random_pool(dataset: Dataset, query_ids: dict[str, str | None], positives: dict[str, set[str]]) -> CandidatePool:
    """Every document but the query's known positives (sampled lazily, not materialized)."""
    return _RandomPool(dataset.doc_ids, query_ids, positives)


class _RandomPool(CandidatePool):
    def __init__(self, doc_ids, query_ids, positives):
        row_of = {d: i for i, d in enumerate(doc_ids)}
        super().__init__(doc_ids, {}, "random")
        self._pos = _positive_rows(query_ids, positives, row_of)

    def sample(self, query: str, rng: random.Random, exclude_rows: AbstractSet[int] = frozenset()) -> int | None:
        banned = self._pos.get(query, set()) | set(exclude_rows)
        if len(banned) >= len(self.doc_ids):
            return None
        while True:
            r = rng.randrange(len(self.doc_ids))
            if r not in banned:
                return r
