"""Hybrid lexical + dense retrieval.

``clear`` (Gao, Dai, Chen, Fan, Van Durme and Callan, "Complement Lexical Retrieval Model with
Semantic Residual Embeddings", ECIR 2021, arXiv:2004.13969, §3.4, eq. 8): retrieve the top ``depth`` of BM25
and of the dense index, take the union of both candidate lists, score every candidate exactly
by both models, and rank by

    s_clear(q, d) = λ_test · s_lex(q, d) + s_emb(q, d)

For an encoder whose scores are cosines, s_lex is BM25 divided by the largest score the query
could reach (``lex_norm``, ``BM25Index.max_score``: Σ idf of its terms), so it is the share of the
query's idf mass a document matches, in [0, 1] like the cosine s_emb, and λ = 1 weighs the two
equally: a convex combination of scores normalized by a theoretical bound, after Bruch, Gai and
Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS 42(1), 2023,
arXiv:2210.11934, §4–5 (their TMM normalization bounds by the theoretical minimum and the list's
maximum; here both bounds are theoretical, so a query whose terms barely match gets little BM25
weight). Without labels λ = 1 (``clear_lambda.LABEL_FREE_LAMBDA``); ``bench/fusion_nolabels.py`` compares it with
the other label-free fusions.

With labelled (training) queries λ_test is tuned on a grid, as the paper tuned it on 500 training
queries (``clear_lambda.QUERY_MAX_GRID`` in this normalized space; ``LAMBDA_GRID`` for raw BM25 scores), and
``fit_lambda`` keeps the label-free λ = 1 unless the grid's best beats it on those queries by a
paired permutation test at the 0.05 level: tuned on a few judged queries the grid's best is noise
(on 5–20 SciFact or NFCorpus train queries it falls below λ = 1 on test, ``bench/lambda_labels.py``).
The paper's 0.5 assumes MS MARCO BM25 scores and unnormalized BERT dot products;
``default_lambda`` (``median_q std(s_emb) / std(s_lex)``, scale matching) is the label-free fallback
for an encoder whose scores are not cosines, where λ is tuned on raw BM25 scores without a prior.

``rrf`` (reciprocal-rank fusion, Cormack et al. 2009: Σ 1/(k + rank)) and ``wsum`` (min-max
normalized weighted sum) fuse the two runs through ranx.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from retrieval.data import ranking
from retrieval.data.dataset import Qrels
from retrieval.data.run import Run
from retrieval.evaluation.measures import compare, evaluate_run
from retrieval.systems.clear_lambda import LAMBDA_GRID, LEX_ONLY
from retrieval.systems.identifier_queries import RULE as LOOKUP_RULE
from retrieval.systems.identifier_queries import is_identifier_lookup
from retrieval.training_record import LambdaFit


class _Rows(Protocol):
    rows: np.ndarray  # the corpus rows of a query's candidates


C = TypeVar("C", bound=_Rows)  # a query's candidates, of whatever fusion
Scores = TypeVar("Scores", float, np.ndarray)  # one document's scores, or a candidate union's

if TYPE_CHECKING:  # the indexes are given, never built here
    from retrieval.index.dense_index import DenseRetriever
    from retrieval.index.searchable import LexicalIndex

FUSIONS = ("clear", "rrf", "wsum")
TIE_BREAK = 1e-6  # λ = ∞: the cosine's weight, below any gap between two BM25 shares that matters


@dataclass
class Candidates:
    """One query's union of candidates, with both exact scores (rows index the corpus)."""

    rows: np.ndarray
    s_lex: np.ndarray
    s_emb: np.ndarray
    lex_only: bool = False  # an identifier lookup (``retrieval.systems.identifier_queries``): ranked by BM25 alone


class Hybrid:
    """The ``search(queries, k) -> Run`` shape over a BM25 index and a dense retriever (of any
    engine: ``bm25`` needs ``top`` and ``scores_at``, see ``retrieval.index.engines``)."""

    def __init__(self, bm25: LexicalIndex, dense: DenseRetriever, lam: float | None = None,
                 depth: int = 1000, fusion: str = "clear", rrf_k: int = 60,
                 weights: tuple[float, float] = (0.5, 0.5), lex_norm: Callable[[str], float] | None = None,
                 lookups: bool = False):
        if bm25.doc_ids != dense.index.doc_ids:
            raise ValueError("BM25 and dense indexes must cover the same documents in the same order")
        if fusion not in FUSIONS:
            raise ValueError(f"unknown fusion {fusion!r}; choose from {FUSIONS}")
        self.bm25, self.dense = bm25, dense
        self.lam, self.depth, self.fusion = lam, depth, fusion
        self.rrf_k, self.weights = rrf_k, weights
        self.lex_norm = lex_norm  # query text -> what its BM25 scores are divided by (None: raw scores)
        self.lookups = lookups  # CLEAR: identifier lookups ranked by BM25 alone (``identifier_queries``)
        self.lam_by_query: dict[str, float] = {}  # cross-fitted λ (``CrossFold``): a query's own, over ``lam``

    @property
    def doc_ids(self) -> list[str]:
        return self.bm25.doc_ids

    @property
    def params(self) -> dict[str, Any]:
        p = {"fusion": self.fusion, "depth": self.depth}
        if self.fusion == "clear":
            p["lambda"] = self.lam
            if self.lex_norm is not None:
                p["bm25_scale"] = "query max"
            if self.lookups:
                p["identifier_lookups"] = LOOKUP_RULE
        elif self.fusion == "rrf":
            p["rrf_k"] = self.rrf_k
        else:
            p["weights"] = list(self.weights)
        return p

    # ---- CLEAR ---------------------------------------------------------------------------
    def candidates(self, queries: dict[str, str]) -> dict[str, Candidates]:
        """Union of both top-``depth`` lists per query, each candidate scored by both models."""
        if not queries:
            return {}
        qvecs = self.dense.encode_queries(queries)
        _, dense_rows = self.dense.index.search_vectors(qvecs, self.depth)
        return {qid: self.union(text, qvecs[i], dense_rows[i]) for i, (qid, text) in enumerate(queries.items())}

    def union(self, text: str, qvec: np.ndarray, dense_rows: np.ndarray) -> Candidates:
        """One query's candidates from its text, its embedding and the dense index's top rows
        (``-1`` = no hit): the union of BM25's top ``depth`` with a positive score and the dense
        top ``depth``, each scored exactly by both models (the engines' ``scores_at`` and
        ``scores``: a document one list lacks is scored, not given a floor)."""
        lex_top, _ = self.bm25.top(text, self.depth)
        dense_rows = dense_rows[:self.depth]
        rows = np.union1d(lex_top, dense_rows[dense_rows >= 0]).astype(np.int64)
        return Candidates(rows, self.lexical_scores(text, rows),
                          np.asarray(self.dense.index.scores(qvec, rows), dtype=np.float64), self.lex_only(text))

    def lex_only(self, text: str) -> bool:
        """Whether CLEAR ranks the query ``text`` by BM25 alone (an identifier lookup, when ``lookups``)."""
        return self.lookups and is_identifier_lookup(text)

    def lexical_scores(self, text: str, rows: np.ndarray) -> np.ndarray:
        """s_lex of the documents at ``rows``: BM25, divided by ``lex_norm(text)`` when set."""
        lex = np.asarray(self.bm25.scores_at(text, rows), dtype=np.float64)
        if self.lex_norm is not None:
            lex = lex / max(self.lex_norm(text), 1e-9)
        return lex

    def rank(self, cands: dict[str, Candidates], lam: float, k: int) -> Run:
        """Rank the candidates by λ·s_lex + s_emb (CLEAR eq. 8), a query in ``lam_by_query`` at its own λ."""
        return rank_candidates(cands, lam, self.doc_ids, k, self.lam_by_query)

    def exact_scores(self, lam: float, doc_rows: dict[str, list[int]],
                     queries: dict[str, str]) -> dict[str, dict[str, float]]:
        """λ·s_lex + s_emb for chosen documents (judged ones, for PNR), retrieved or not; a query in
        ``lam_by_query`` at its own λ."""
        qvecs = self.dense.encode_queries({q: queries[q] for q in doc_rows})
        out = {}
        for i, (qid, rows) in enumerate(doc_rows.items()):
            rows_a = np.asarray(rows, dtype=np.int64)
            lex = self.lexical_scores(queries[qid], rows_a)
            emb = self.dense.index.scores(qvecs[i], rows_a)
            at = LEX_ONLY if self.lex_only(queries[qid]) else self.lam_by_query.get(qid, lam)
            out[qid] = {self.doc_ids[r]: float(fused(at, lx, e)) for r, lx, e in zip(rows_a, lex, emb)}
        return out

    def search(self, queries: dict[str, str], k: int = 100) -> Run:
        if self.fusion == "clear":
            cands = self.candidates(queries)
            lam = self.lam if self.lam is not None else default_lambda(cands)
            return self.rank(cands, lam, k)
        return self.fuse(self.bm25.search(queries, self.depth), self.dense.search(queries, self.depth), k)

    def fuse(self, lex: Run, emb: Run, k: int = 100) -> Run:
        """RRF or weighted-sum fusion (``fusion``) of a BM25 run and a dense run of the same queries."""
        return fuse_runs([lex, emb], self.fusion, k=k, rrf_k=self.rrf_k, weights=self.weights)


def rank_candidates(cands: dict[str, Candidates], lam: float, doc_ids: list[str], k: int,
                    by_query: Mapping[str, float] | None = None) -> Run:
    """Each query's candidates ranked by λ·s_lex + s_emb (CLEAR eq. 8) — at its own λ where
    ``by_query`` has one (cross-fitted λ), else at ``lam`` —, an identifier lookup's by BM25 alone
    (``Candidates.lex_only``); ``doc_ids`` names the rows."""
    by_query = by_query or {}
    return ranked(cands, lambda qid, c: fused(LEX_ONLY if c.lex_only else by_query.get(qid, lam), c.s_lex, c.s_emb),
                  doc_ids, k)


def ranked(cands: Mapping[str, C], score: Callable[[str, C], np.ndarray], doc_ids: list[str], k: int) -> Run:
    """Each query's candidates (anything with the corpus ``rows`` it scores) ranked by ``score(query
    id, candidates)``, best first, equal scores in trec_eval's order (``retrieval.data.ranking``), the
    top ``k``; ``doc_ids`` names the rows."""
    run: Run = {}
    for qid, c in cands.items():
        s = np.asarray(score(qid, c), dtype=np.float64)
        order = ranking.order(np.zeros(len(s), dtype=np.int64), s, [doc_ids[r] for r in c.rows.tolist()])[:k]
        run[qid] = [(doc_ids[c.rows[j]], float(s[j])) for j in order]
    return run


def fused(lam: float, s_lex: Scores, s_emb: Scores) -> Scores:
    """λ·s_lex + s_emb; for λ = ∞ (``clear_lambda.LEX_ONLY``: the encoder left out, or an identifier
    lookup) s_lex plus the cosine scaled by ``TIE_BREAK``, so that the cosine only breaks BM25's
    ties — in the score itself: an evaluator orders a run by its scores, and the documents BM25 does
    not match would otherwise all score 0 and come in an order of the evaluator's own."""
    return s_lex + TIE_BREAK * s_emb if math.isinf(lam) else lam * s_lex + s_emb


def default_lambda(cands: dict[str, Candidates]) -> float:
    """median over queries of std(s_emb)/std(s_lex) on the candidate union (scale matching)."""
    ratios = [c.s_emb.std() / c.s_lex.std() for c in cands.values()
              if len(c.rows) > 1 and c.s_lex.std() > 0]
    return float(np.median(ratios)) if ratios else 0.0


def tune_lambda(hybrid: Hybrid, queries: dict[str, str], qrels: Qrels, metric: str = "ndcg@10",
                grid: Sequence[float] = LAMBDA_GRID, prior: float | None = None) -> LambdaFit:
    """λ_test tuned on labelled (training) queries over ``grid`` (``fit_lambda``)."""
    judged = {q: t for q, t in queries.items() if q in qrels}
    if not judged:
        raise ValueError("no labelled queries to tune λ on")
    return fit_lambda(hybrid.candidates(judged), qrels, hybrid.doc_ids, metric, grid, prior)


def fit_lambda(cands: dict[str, Candidates], qrels: Qrels, doc_ids: list[str], metric: str = "ndcg@10",
               grid: Sequence[float] = LAMBDA_GRID, prior: float | None = None) -> LambdaFit:
    """The grid's best λ on these candidates and, with a ``prior`` λ, the p-value of its per-query
    ``metric`` against the prior's (``measures.compare``, paired permutation test)."""
    best, table = lambda_table(cands, qrels, doc_ids, metric, grid)
    p = None
    if prior is not None:
        p = 1.0
        if best != prior:
            at = {lam: evaluate_run(rank_candidates(cands, lam, doc_ids, 100), qrels, metrics=(metric,))
                  for lam in (prior, best)}
            p = compare(at[prior], at[best], metric).p_value
    return LambdaFit(best, table, len(cands), prior, p)


def lambda_table(cands: dict[str, Candidates], qrels: Qrels, doc_ids: list[str], metric: str = "ndcg@10",
                 grid: Sequence[float] = LAMBDA_GRID) -> tuple[float, list[tuple[float, float]]]:
    """(best λ, [(λ, ``metric``)] over ``grid``) of these candidates ranked by λ·s_lex + s_emb; the
    smaller λ on a tie."""
    table = [(float(lam), evaluate_run(rank_candidates(cands, lam, doc_ids, 100), qrels,
                                       metrics=(metric,)).mean[metric]) for lam in grid]
    return max(table, key=lambda row: (row[1], -row[0]))[0], table


def fuse_runs(runs: list[Run], method: str, k: int = 100, rrf_k: int = 60,
              weights: tuple[float, ...] = (0.5, 0.5)) -> Run:
    """Reciprocal-rank fusion or min-max normalized weighted sum of runs, as ranx's ``fuse``
    computes them (``tests/retrieval/systems/test_hybrid.py`` checks the two agree), written out in Python: ranx
    compiles its numba kernels on first use in every process, before a first fused list
    (``bench/cold_start.py`` times a fresh process's first fused list).

    ``rrf`` (Cormack, Clarke and Büttcher, "Reciprocal Rank Fusion outperforms Condorcet and
    individual Rank Learning Methods", SIGIR 2009): Σ_runs 1 / (``rrf_k`` + rank), a document a run
    lacks adding nothing. ``wsum``: Σ_runs w_i · (s − min) / max(max − min, 1e-9) over each run's
    list for the query (ranx's min-max norm), a document a run lacks counting 0. The fused list is
    sorted by score, equal scores in trec_eval's order (``retrieval.data.ranking``: document id
    descending), cut at ``k``.
    """
    if method not in ("rrf", "wsum"):
        raise ValueError(f"unknown fusion {method!r}; choose 'rrf' or 'wsum'")
    out: Run = {}
    for q in dict.fromkeys(q for r in runs for q in r):
        fused: dict[str, float] = {}
        for i, run in enumerate(runs):
            hits = run.get(q, [])
            contributions: dict[str, float]
            if method == "rrf":
                contributions = {}
                for rank, (d, _) in enumerate(hits, 1):
                    contributions.setdefault(d, 1.0 / (rrf_k + rank))  # a repeated document: its first rank
            else:
                scores = dict(hits)  # a repeated document: its last score, as ranx's dict keeps it
                if not scores:
                    continue
                low, high = min(scores.values()), max(scores.values())
                contributions = {d: weights[i] * (s - low) / max(high - low, 1e-9) for d, s in scores.items()}
            for d, v in contributions.items():
                fused[d] = fused.get(d, 0.0) + v
        out[q] = ranking.sorted_hits(fused.items())[:k]
    return out
