"""s(D), the score a system would give the whole corpus taken as one document: the reference NQC divides
by and WIG subtracts (Shtok et al., ACM TOIS 30(2), 2012, §3; Zhou & Croft, SIGIR 2007, §3), by the
family of scores a system's list holds. One mapping, ``HOW``, from the system's key:

* ``bm25`` — BM25's score of the corpus as one document: ``tf = cf_t``, length ``|C|``, the index's own
  k1, b, idf and average length (``predictors.bm25_corpus_score``);
* ``ql`` — query likelihood's own log-likelihood of the query under the corpus as one document
  (``predictors.ql_corpus_score``: the collection model's);
* ``dense`` — the cosine of the query's embedding with the corpus's centroid (the mean of the vectors
  the index holds, computed once per call), in the space the index scores in (after PCA where ``dims``
  is set); where the dense index holds no vectors in this process (another engine's), the list's mean;
* every other list (``LIST_MEAN``: the fusions, the CLEAR hybrid, SPLADE, RM3's expanded-query BM25,
  imported runs, which carry their files' scores): the mean of the list's own top ``k`` scores. NQC is
  then the list's coefficient of variation, and WIG the gap between its top 5 and its top ``k``.
  This is RankScope's adaptation for scores without a corpus model, not the papers'.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from retrieval.qpp import predictors
from retrieval.systems import BM25, DENSE, ql

if TYPE_CHECKING:
    from retrieval.qpp.statistics import CorpusStatistics, QueryTerms
    from retrieval.workspace import Workspace

BM25_SCORE, QL_SCORE, CENTROID, LIST_MEAN = "bm25 of the corpus", "likelihood of the corpus", "centroid cosine", \
    "list mean"
HOW = {BM25: BM25_SCORE, ql.QueryLikelihood.key: QL_SCORE, DENSE: CENTROID}  # any other system: LIST_MEAN


def how(ws: Workspace, system: str) -> str:
    """How ``system``'s s(D) is computed (module docstring): ``HOW``'s entry, ``LIST_MEAN`` for any
    other, and for dense where the index holds no vectors here."""
    found = HOW.get(system, LIST_MEAN)
    if found == CENTROID and _held(ws) is None:
        return LIST_MEAN
    return found


def _held(ws: Workspace) -> np.ndarray | None:
    """The vectors the dense index holds in this process (float), or None (another engine's index)."""
    stored = getattr(ws.dense.index, "stored", None)
    return stored if isinstance(stored, np.ndarray) else None


def vectors(ws: Workspace) -> np.ndarray | None:
    """The dense index's vectors in this process (coherence reads its top documents'), or None."""
    return _held(ws)


def corpus_scores(ws: Workspace, system: str, stats: CorpusStatistics, queries: Mapping[str, str],
                  terms: Mapping[str, QueryTerms], lists: Mapping[str, np.ndarray], k: int) -> dict[str, float]:
    """s(D) of each query for ``system`` (module docstring).

    Args:
        ws: The workspace.
        system: The system whose lists these are.
        stats: The corpus's statistics.
        queries: Query id -> text.
        terms: Query id -> its analyzed terms.
        lists: Query id -> the list's scores, best first.
        k: The depth NQC reads (the list mean's depth).

    Returns:
        Query id -> s(D) (NaN for an empty list scored by its mean).
    """
    way = how(ws, system)
    if way == BM25_SCORE:
        s = ws.bm25_settings
        return {q: predictors.bm25_corpus_score(predictors.bm25_idf(s.method, t.df, stats.n), t.counts, t.cf,
                                                stats.total, stats.avgdl, s.k1, s.b, s.method)
                for q, t in terms.items()}
    if way == QL_SCORE:
        mu = ql.mu_of(ws)
        return {q: predictors.ql_corpus_score(t.counts, t.cf, stats.total, mu) for q, t in terms.items()}
    if way == CENTROID:
        return _centroid_cosines(ws, queries)
    return {q: float(np.mean(scores[:k])) if len(scores) else float("nan") for q, scores in lists.items()}


def _centroid_cosines(ws: Workspace, queries: Mapping[str, str]) -> dict[str, float]:
    """cos(E(q), c) of each query, ``c`` the mean of the index's vectors: the queries encoded as the dense
    system encodes them (``DenseRetriever.encode_queries``: from the store where they were encoded before)."""
    held = _held(ws)
    assert held is not None  # how() said CENTROID
    centroid = held.mean(axis=0, dtype=np.float64)
    q = np.asarray(ws.dense.encode_queries(dict(queries)), dtype=np.float32)
    projection = getattr(ws.dense.index, "projection", None)
    if projection is not None:
        q = projection.apply(np.ascontiguousarray(q))
    q64 = q.astype(np.float64)
    norms = np.linalg.norm(q64, axis=1) * float(np.linalg.norm(centroid))
    cos = np.divide(q64 @ centroid, norms, out=np.zeros(len(q64)), where=norms > 0)
    return dict(zip(queries, cos.tolist()))
