"""Query performance predictors: pure functions on numbers and arrays (numpy only, no workspace), each
with its formula and the paper it follows, and their declaration (``PREDICTORS``).

Pre-retrieval predictors read the query's analyzed terms (the workspace tokenizer's, the terms BM25
indexes) and the corpus's statistics: ``N`` documents, ``df_t`` the documents holding term ``t``,
``cf_t`` its count in the whole corpus. A query term the corpus never holds has no IDF (``df_t = 0``)
and is left out; a query none of whose terms the corpus holds gets 0, the lowest value each
pre-retrieval predictor takes (``ln(N/df) ≥ 0`` and ``(1 + ln cf)·ln(1 + N/df) > 0`` for every
held term). Each distinct term counts once.

Post-retrieval predictors read one system's ranked list of the query: its scores, best first, and
``s(D)``, the score the system would give the whole corpus taken as one document (``corpus_score``
and ``retrieval.qpp.corpus_scores``). A list with no document leaves every post-retrieval predictor
out (None), as does a corpus score of 0 NQC, whose denominator it is; the combination
(``retrieval.qpp.combine``) skips a predictor a query lacks.

``higher_means`` orients each predictor: "easier" where a higher value predicts a better ranking
(every predictor here but the systems' disagreement), "harder" where it predicts a worse one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from retrieval.systems.declared import Citation

NQC_K = 100  # the depth NQC reads (Shtok et al. tune k per collection; 100 is their most common choice)
WIG_K = 5  # Zhou & Croft's depth for WIG (SIGIR 2007, §3: k = 5 on the TREC GOV2 and WT10g runs)
CLARITY_K = 50  # the documents the query model is estimated from (module docstring of ``clarity``)
CLARITY_LAMBDA = 0.6  # Cronen-Townsend et al.'s smoothing weight of a document's own model (SIGIR 2002, §2)
COHERENCE_K = 10  # the top documents whose embeddings' mean pairwise cosine is the list's coherence
DISAGREEMENT_K = 10  # the depth the systems' lists are compared at (``judgments.disagreement``'s)

CRONEN_TOWNSEND = Citation("Steve Cronen-Townsend, Yun Zhou, W. Bruce Croft", "Predicting Query Performance",
                           "SIGIR 2002", 2002, "§2, the clarity score; §4, IDF-based predictors")
HE_OUNIS = Citation("Ben He, Iadh Ounis", "Inferring Query Performance Using Pre-retrieval Predictors",
                    "SPIRE 2004", 2004, "§3, the average and maximum IDF")
ZHAO = Citation("Ying Zhao, Falk Scholer, Yohannes Tsegay", "Effective Pre-retrieval Query Performance Prediction "
                "Using Similarity and Variability Evidence", "ECIR 2008", 2008,
                "§3, the collection query similarity SCQ")
SHTOK = Citation("Anna Shtok, Oren Kurland, David Carmel, Fiana Raiber, Gad Markovits", "Predicting Query "
                 "Performance by Query-Drift Estimation", "ACM TOIS 30(2), 2012", 2012,
                 "§3, normalized query commitment NQC")
ZHOU_CROFT = Citation("Yun Zhou, W. Bruce Croft", "Query Performance Prediction in Web Search Environments",
                      "SIGIR 2007", 2007, "§3, weighted information gain WIG")
HE_LARSON = Citation("Jiyin He, Martha Larson, Maarten de Rijke", "Using Coherence-based Measures to Predict Query "
                     "Difficulty", "ECIR 2008", 2008, "§3, the coherence of the top documents; for dense lists "
                     "Faggioli et al., \"Query Performance Prediction for Neural IR: Are We There Yet?\", ECIR 2023")
WEBBER = Citation("William Webber, Alistair Moffat, Justin Zobel", "A Similarity Measure for Indefinite Rankings",
                  "ACM TOIS 28(4), 2010", 2010, "§4, rank-biased overlap RBO, extrapolated")


@dataclass(frozen=True)
class Predictor:
    """One query performance predictor, declared.

    Attributes:
        key: Its name in tables, caches and the command line's TSV ("nqc").
        label: Its name for people ("NQC").
        kind: "pre" (the query and the corpus alone), "post" (one system's ranked list) or
            "agreement" (the systems' lists together).
        higher_means: Whether a higher value predicts an easier query ("easier") or a harder one.
        citation: The paper it follows.
        doc: Its formula, in one line.
    """

    key: str
    label: str
    kind: Literal["pre", "post", "agreement"]
    higher_means: Literal["easier", "harder"]
    citation: Citation
    doc: str


PREDICTORS: tuple[Predictor, ...] = (
    Predictor("avg_idf", "avg IDF", "pre", "easier", HE_OUNIS, "mean over the query's terms of ln(N / df_t)"),
    Predictor("max_idf", "max IDF", "pre", "easier", HE_OUNIS, "largest over the query's terms of ln(N / df_t)"),
    Predictor("avg_scq", "avg SCQ", "pre", "easier", ZHAO,
              "mean over the query's terms of (1 + ln cf_t) · ln(1 + N / df_t)"),
    Predictor("max_scq", "max SCQ", "pre", "easier", ZHAO,
              "largest over the query's terms of (1 + ln cf_t) · ln(1 + N / df_t)"),
    Predictor("nqc", "NQC", "post", "easier", SHTOK,
              "standard deviation of the top 100 scores over |s(D)|, the corpus's score"),
    Predictor("wig", "WIG", "post", "easier", ZHOU_CROFT,
              "mean over the top 5 of (s(d) − s(D)), over √(query terms)"),
    Predictor("clarity", "clarity", "post", "easier", CRONEN_TOWNSEND,
              "KL divergence (bits) of the top 50 documents' query model from the collection's"),
    Predictor("coherence", "coherence", "post", "easier", HE_LARSON,
              "mean pairwise cosine of the top 10 documents' embeddings"),
    Predictor("disagreement", "disagreement", "agreement", "harder", WEBBER,
              "1 − mean pairwise RBO (p = 0.9) of the systems' top 10"),
)
BY_KEY = {p.key: p for p in PREDICTORS}
PRE = tuple(p.key for p in PREDICTORS if p.kind == "pre")
POST = tuple(p.key for p in PREDICTORS if p.kind == "post")


def idf(n: int, df: np.ndarray) -> np.ndarray:
    """ln(N / df_t) of each term (Cronen-Townsend et al., SIGIR 2002, §4; He & Ounis, SPIRE 2004, §3).

    Args:
        n: The corpus's documents, N.
        df: Each term's document frequency (each at least 1).

    Returns:
        The terms' IDFs.
    """
    return np.log(n / np.asarray(df, dtype=np.float64))


def scq(n: int, df: np.ndarray, cf: np.ndarray) -> np.ndarray:
    """SCQ(t) = (1 + ln cf_t) · ln(1 + N / df_t) of each term (Zhao, Scholer & Tsegay, ECIR 2008, §3:
    the similarity of the term to the collection, its collection frequency damped by a log, times an
    IDF).

    Args:
        n: The corpus's documents, N.
        df: Each term's document frequency (each at least 1).
        cf: Each term's count in the corpus (each at least 1).

    Returns:
        The terms' SCQ.
    """
    return (1 + np.log(np.asarray(cf, dtype=np.float64))) * np.log(1 + n / np.asarray(df, dtype=np.float64))


def pre_retrieval(n: int, df: np.ndarray, cf: np.ndarray) -> dict[str, float]:
    """The four pre-retrieval predictors of one query from its distinct terms' statistics: the mean
    and the largest IDF, the mean and the largest SCQ. Terms the corpus lacks (``df_t = 0``) are left
    out; with none left every predictor is 0 (module docstring).

    Args:
        n: The corpus's documents, N.
        df: Each distinct query term's document frequency.
        cf: Each distinct query term's collection frequency.

    Returns:
        ``{"avg_idf", "max_idf", "avg_scq", "max_scq"}`` -> value.
    """
    df, cf = np.asarray(df, dtype=np.float64), np.asarray(cf, dtype=np.float64)
    held = df > 0
    if not held.any():
        return {key: 0.0 for key in PRE}
    i, s = idf(n, df[held]), scq(n, df[held], cf[held])
    return {"avg_idf": float(i.mean()), "max_idf": float(i.max()), "avg_scq": float(s.mean()),
            "max_scq": float(s.max())}


def nqc(scores: np.ndarray, corpus_score: float, k: int = NQC_K) -> float | None:
    """Normalized query commitment (Shtok, Kurland, Carmel, Raiber & Markovits, ACM TOIS 30(2), 2012,
    §3)::

        NQC = sqrt((1/k) Σ_{d ∈ top k} (s(d) − μ)²) / |s(D)|,   μ = (1/k) Σ_{d ∈ top k} s(d)

    the population standard deviation of the top ``k`` scores over the corpus's score: a list whose
    top scores stand far apart from each other, relative to what the whole corpus scores, is less
    likely to have drifted from the query. A list shorter than ``k`` uses all it has.

    Args:
        scores: The list's scores, best first.
        corpus_score: s(D), the score of the corpus taken as one document.
        k: How many of the top scores are read.

    Returns:
        NQC, or None for an empty list or a corpus score of 0.
    """
    top = np.asarray(scores, dtype=np.float64)[:k]
    if not len(top) or corpus_score == 0 or not math.isfinite(corpus_score):
        return None
    return float(np.sqrt(np.mean((top - top.mean()) ** 2)) / abs(corpus_score))


def wig(scores: np.ndarray, corpus_score: float, query_terms: int, k: int = WIG_K) -> float | None:
    """Weighted information gain (Zhou & Croft, SIGIR 2007, §3)::

        WIG = (1/k) Σ_{d ∈ top k} (s(d) − s(D)) / sqrt(|q|)

    how far the top ``k`` documents score above the corpus taken as one document, per query term
    (``|q|``: the query's terms, at least 1 here so an analyzed-away query still has a value). A list
    shorter than ``k`` averages what it has.

    Args:
        scores: The list's scores, best first.
        corpus_score: s(D).
        query_terms: |q|, the query's terms.
        k: How many of the top scores are read.

    Returns:
        WIG, or None for an empty list.
    """
    top = np.asarray(scores, dtype=np.float64)[:k]
    if not len(top) or not math.isfinite(corpus_score):
        return None
    return float(np.mean(top - corpus_score) / math.sqrt(max(1, query_terms)))


def clarity(tf: np.ndarray, p_coll: np.ndarray, query: np.ndarray, lam: float = CLARITY_LAMBDA) -> float | None:
    """The clarity score (Cronen-Townsend, Zhou & Croft, SIGIR 2002, §2): the Kullback-Leibler
    divergence, in bits, of the query's language model from the collection's::

        clarity = Σ_w P(w|Q) · log2(P(w|Q) / P_coll(w))
        P(w|Q) = Σ_{D ∈ R} P(w|D) · P(D|Q)
        P(w|D) = λ · P_ml(w|D) + (1 − λ) · P_coll(w)
        P(D|Q) = Π_{q ∈ Q} P(q|D) / Σ_{D' ∈ R} Π_{q ∈ Q} P(q|D')

    ``R``: the top documents of the list (``CLARITY_K`` = 50 by default: the paper ranks R by query
    likelihood and takes the top 500 or the whole collection; RankScope takes each system's own top 50, so
    clarity measures that system's list, and the sum stays cheap), with a uniform prior over them;
    λ = 0.6 as in the paper. P(D|Q) is computed in log space (a softmax of Σ_q log P(q|D)), so long
    queries do not underflow. The sum runs over the whole vocabulary: a word held by no document of
    R has P(w|Q) = (1 − λ)·P_coll(w) and adds (1 − λ)·log2(1 − λ)·P_coll(w), so all of them together add
    (1 − λ)·log2(1 − λ)·(1 − Σ_{w ∈ columns} P_coll(w)) in closed form, never a loop over the vocabulary.

    Args:
        tf: The R documents' term counts, one row a document, one column a term: every term any of
            them holds (other columns may be added, 0 or not), so a row sums to the document's length.
        p_coll: P_coll(w) of each column's term (its count in the corpus over the corpus's length).
        query: The query's terms as column indices, one entry per occurrence. A term no column holds
            may be left out: its P(q|D) = (1 − λ)·P_coll(q) is the same for every D and cancels in
            P(D|Q) (with none left, P(D|Q) is uniform over R); a term the corpus lacks must be (its
            P_coll = 0 would make every P(q|D) 0 alike).
        lam: λ, the weight of a document's own model.

    Returns:
        Clarity in bits, or None for an empty R.
    """
    tf = np.asarray(tf, dtype=np.float64)
    p_coll = np.asarray(p_coll, dtype=np.float64)
    query = np.asarray(query, dtype=np.int64)
    if not tf.shape[0]:
        return None
    lengths = tf.sum(axis=1, keepdims=True)
    p_ml = np.divide(tf, lengths, out=np.zeros_like(tf), where=lengths > 0)
    p_wd = lam * p_ml + (1 - lam) * p_coll  # P(w|D), every column
    log_q = np.log(p_wd[:, query]).sum(axis=1)  # log Π_q P(q|D)
    p_dq = np.exp(log_q - log_q.max())
    p_dq /= p_dq.sum()
    p_wq = p_dq @ p_wd  # P(w|Q) of the columns
    held = p_wq > 0
    inside = float(np.sum(p_wq[held] * np.log2(p_wq[held] / p_coll[held])))
    outside = (1 - lam) * math.log2(1 - lam) * max(0.0, 1.0 - float(p_coll.sum())) if lam < 1 else 0.0
    return inside + outside


def coherence(vectors: np.ndarray) -> float | None:
    """The list's coherence: the mean cosine over every pair of the top documents' embeddings (He,
    Larson & de Rijke, ECIR 2008, §3, who measure how alike a list's top documents are; as a
    predictor for dense retrievers, Faggioli et al., "Query Performance Prediction for Neural IR: Are
    We There Yet?", ECIR 2023). Zero vectors count as cosine 0 with everything.

    Args:
        vectors: The top documents' embeddings, one row each (``COHERENCE_K`` of them by default).

    Returns:
        The mean pairwise cosine, or None with fewer than two documents.
    """
    v = np.asarray(vectors, dtype=np.float64)
    m = len(v)
    if m < 2:
        return None
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    unit = np.divide(v, norms, out=np.zeros_like(v), where=norms > 0)
    gram = unit @ unit.T
    return float((gram.sum() - np.trace(gram)) / (m * (m - 1)))


def bm25_corpus_score(idf_t: np.ndarray, counts: np.ndarray, cf: np.ndarray, total: float, avgdl: float,
                      k1: float, b: float, method: str) -> float:
    """BM25's score of the corpus taken as one document, s(D) for NQC and WIG on a BM25 list: the
    query's terms scored with ``tf = cf_t`` and ``|d| =`` the corpus's length in terms, under the
    index's own idf, k1, b and average length (``retrieval.index.bm25_index``'s formulas)::

        s(D) = Σ_t c(t, q) · idf(t) · cf_t / (cf_t + k1·(1 − b + b·|C|/avgdl))    (lucene, robertson)
        s(D) = Σ_t c(t, q) · idf(t) · cf_t·(k1 + 1) / (cf_t + k1·(1 − b + b·|C|/avgdl))   (atire)

    Args:
        idf_t: Each query term's idf under the index's method.
        counts: Each term's count in the query.
        cf: Each term's collection frequency.
        total: |C|, the corpus's length in terms.
        avgdl: The index's average document length.
        k1: BM25's k1.
        b: BM25's b.
        method: The index's BM25 variant.

    Returns:
        s(D).
    """
    cf = np.asarray(cf, dtype=np.float64)
    norm = k1 * (1 - b + b * total / avgdl)
    part = np.divide(cf, cf + norm, out=np.zeros_like(cf), where=(cf + norm) > 0)
    if method == "atire":
        part = part * (k1 + 1)
    return float(np.sum(np.asarray(counts, dtype=np.float64) * np.asarray(idf_t, dtype=np.float64) * part))


def bm25_idf(method: str, df: np.ndarray, n: int) -> np.ndarray:
    """BM25's idf of each term under ``method`` (``retrieval.index.bm25_index``): lucene
    ``ln(1 + (N − df + 0.5)/(df + 0.5))``, robertson ``ln((N − df + 0.5)/(df + 0.5))`` floored at 0,
    atire ``ln(N/df)``."""
    df = np.asarray(df, dtype=np.float64)
    if method == "lucene":
        out: np.ndarray = np.log(1 + (n - df + 0.5) / (df + 0.5))
    elif method == "robertson":
        out = np.log(np.maximum(1.0, (n - df + 0.5) / (df + 0.5)))
    elif method == "atire":
        out = np.log(n / df)
    else:
        raise ValueError(f"unknown BM25 method {method!r}")
    return out


def ql_corpus_score(counts: np.ndarray, cf: np.ndarray, total: float, mu: float) -> float:
    """Query likelihood's score of the corpus taken as one document, s(D) on a query-likelihood list:
    its own Dirichlet-smoothed log-likelihood (``retrieval.systems.ql``) with ``c(w, D) = cf_w`` and
    ``|D| = |C|``::

        s(D) = Σ_{w ∈ q} c(w, q) · log((cf_w + μ · cf_w/|C|) / (|C| + μ))  =  Σ_w c(w, q) · log(cf_w / |C|)

    the query's log-likelihood under the collection model (terms the corpus lacks left out, as the
    system leaves them out).

    Args:
        counts: Each query term's count in the query.
        cf: Each term's collection frequency.
        total: |C|, the corpus's length in terms.
        mu: The Dirichlet prior μ.

    Returns:
        s(D) (0 for a query with no term the corpus holds).
    """
    cf = np.asarray(cf, dtype=np.float64)
    held = cf > 0
    if not held.any():
        return 0.0
    c = cf[held]
    return float(np.sum(np.asarray(counts, dtype=np.float64)[held] * np.log((c + mu * c / total) / (total + mu))))
