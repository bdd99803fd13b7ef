"""Query likelihood with Dirichlet smoothing as a system: each document a unigram language model,
smoothed towards the collection's, ranked by the likelihood it gives the query.

ChengXiang Zhai, John Lafferty, "A Study of Smoothing Methods for Language Models Applied to Ad Hoc
Information Retrieval", SIGIR 2001 (§2, the query likelihood; §3, Dirichlet prior smoothing), with
their recommended prior μ = 1000 (§5) by default (a declared parameter, ``mu``: a workspace holds
its value, ``--param ql.mu=…`` on the command line)::

    score(q, d) = log p(q | d) = Σ_{w ∈ q} c(w, q) · log((c(w, d) + μ · p(w | C)) / (|d| + μ))

``c(w, q)``, ``c(w, d)``: the term's count in the query and the document; ``|d|``: the document's
length in terms; ``p(w | C)``: the term's count in the corpus over the corpus's length. This is the
log-likelihood itself, not a rank-equivalent form, so a hit's per-term contributions (``explain``)
add up to its score. The terms are the workspace tokenizer's (the ones BM25 indexes: stemmed,
stopwords out); a query term the corpus never holds has p(w | C) = 0 and is left out of the sum, as
it would rank every document alike.

Only the documents holding at least one query term are ranked (candidates from the terms' posting
lists), each scored exactly. A document with no query term is not ranked at all, as BM25 leaves it
out: its likelihood is μ·p(w | C)/(|d| + μ) for every term, which favours short documents whatever
they say, and can exceed a long document's that holds a query term. For PNR its score is −∞ (below
every ranked document, tied with the others that match nothing).

The index (term counts per document as a sparse matrix whose columns are the posting lists, the
document lengths and the collection model) is built once per corpus and tokenizer, in the
workspace's per-corpus slot (``Workspace.system_state``), shared by every workspace of that corpus
and counted by the memory budget through ``QLIndex.nbytes``.
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.data import ranking
from retrieval.data.run import Run
from retrieval.index.terms import QUERY_TERM, TermScore
from retrieval.index.top_k import top_k
from retrieval.systems.base import Hits, Needs, Probe, SystemBase
from retrieval.systems.declared import FLOAT, Capabilities, Citation, Parameter

if TYPE_CHECKING:
    from retrieval.index.tokenize import Tokenizer
    from retrieval.systems.reads import SystemWorkspace

MU = 1000.0  # Zhai & Lafferty's recommended Dirichlet prior (SIGIR 2001, §5)
PER_TERM = 200  # bytes of a vocabulary entry (the term, its id, the dict slot): as the memory budget counts BM25's


class QueryTerms:
    """A query's terms the corpus holds: their vocabulary ids, counts in the query, and the query
    word each was first written as (shown in explanations), in query order."""

    def __init__(self, index: QLIndex, text: str):
        tokenizer = index.tokenizer
        word_of: dict[str, str] = {}
        for word, tokens in tokenizer.typed_words(text):  # as typed: "can't", whose tokens are "can" and "t"
            for term in tokens:
                word_of.setdefault(term, word)
        kept = [(t, c) for t, c in Counter(tokenizer(text)).items() if t in index.vocab]
        self.terms = [t for t, _ in kept]
        self.words = [word_of.get(t, t) for t in self.terms]
        self.ids = np.array([index.vocab[t] for t in self.terms], dtype=np.int64)
        self.counts = np.array([c for _, c in kept], dtype=np.float64)


class QLIndex:
    """Term counts of every document (documents × vocabulary, compressed by column: each term's
    posting list), document lengths and the collection language model p(w | C); with the documents'
    ids, their places in trec_eval's order of equal scores (``ranking.tie_rank``), which ``top`` ranks
    ties by (by row without them)."""

    def __init__(self, texts: list[str], tokenizer: Tokenizer, doc_ids: list[str] | None = None):
        import scipy.sparse as sp

        self.tokenizer = tokenizer
        self.tie_rank = ranking.tie_rank(doc_ids) if doc_ids is not None else None
        self.vocab: dict[str, int] = {}
        indptr, indices, data = [0], [], []
        for tokens in tokenizer.tokenize_many(texts):
            for term, count in Counter(tokens).items():
                indices.append(self.vocab.setdefault(term, len(self.vocab)))
                data.append(count)
            indptr.append(len(indices))
        rows = sp.csr_matrix((np.asarray(data, dtype=np.float64), np.asarray(indices, dtype=np.int64),
                              np.asarray(indptr, dtype=np.int64)), shape=(len(texts), len(self.vocab)))
        self.counts = rows.tocsc()
        self.doc_len = np.asarray(rows.sum(axis=1), dtype=np.float64).ravel()
        collection = np.asarray(rows.sum(axis=0), dtype=np.float64).ravel()
        self.p_collection = collection / max(float(collection.sum()), 1.0)

    def __len__(self) -> int:
        return len(self.doc_len)

    def nbytes(self) -> int:
        m = self.counts
        arrays = m.data.nbytes + m.indices.nbytes + m.indptr.nbytes + self.doc_len.nbytes + self.p_collection.nbytes
        arrays += self.tie_rank.nbytes if self.tie_rank is not None else 0
        return int(arrays + PER_TERM * len(self.vocab))

    def query(self, text: str) -> QueryTerms:
        return QueryTerms(self, text)

    def candidates(self, q: QueryTerms) -> np.ndarray:
        """The rows of the documents holding at least one of the query's terms, in row order."""
        return np.unique(self.counts[:, q.ids].indices) if len(q.ids) else np.zeros(0, dtype=np.int64)

    def contributions(self, q: QueryTerms, rows: np.ndarray, mu: float = MU) -> np.ndarray:
        """c(w, q) · log((c(w, d) + μ p(w | C)) / (|d| + μ)) for each document at ``rows`` (one row
        each) and each query term (one column each)."""
        rows = np.asarray(rows, dtype=np.int64)
        tf = self.counts[:, q.ids].tocsr()[rows].toarray()
        scores: np.ndarray = q.counts * (np.log(tf + mu * self.p_collection[q.ids])
                                         - np.log(self.doc_len[rows] + mu)[:, None])
        return scores

    def scores(self, q: QueryTerms, rows: np.ndarray, mu: float = MU) -> np.ndarray:
        """log p(q | d) of the documents at ``rows``; −∞ for one holding no query term (never ranked)."""
        rows = np.asarray(rows, dtype=np.int64)
        if not len(q.ids):
            return np.full(len(rows), -np.inf)
        held = np.asarray((self.counts[:, q.ids].tocsr()[rows] > 0).sum(axis=1)).ravel() > 0
        return np.where(held, self.contributions(q, rows, mu).sum(axis=1), -np.inf)

    def top(self, text: str, k: int, mu: float = MU) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores) of the ``k`` most likely documents among the candidates, best first, equal
        scores in trec_eval's order (``retrieval.data.ranking``) where the index has the ids."""
        q = self.query(text)
        rows = self.candidates(q)
        scores = np.full(len(self), -np.inf)
        if len(rows):
            scores[rows] = self.contributions(q, rows, mu).sum(axis=1)
        return top_k(scores, k, rows, self.tie_rank)


def index_of(ws: SystemWorkspace) -> QLIndex:
    """The workspace's query-likelihood index, built the first time (per corpus, shared)."""
    return ws.system_state(QueryLikelihood.key, lambda: QLIndex(ws.corpus.texts, ws.tokenizer, ws.dataset.doc_ids))


def mu_of(ws: SystemWorkspace) -> float:
    """μ, the Dirichlet prior, as ``ws`` holds it (``Workspace.settings_of``; ``MU`` by default)."""
    return float(ws.settings_of(QueryLikelihood.key)["mu"])


class QueryLikelihood(SystemBase):
    key, label, short = "ql", "Query likelihood (Dirichlet)", "QL"
    needs = Needs()
    parameters = (Parameter("mu", FLOAT, MU, "the Dirichlet prior: how far a document's model is smoothed towards "
                            "the collection's", low=0, low_open=True),)
    citation = Citation("ChengXiang Zhai, John Lafferty", "A Study of Smoothing Methods for Language Models Applied "
                        "to Ad Hoc Information Retrieval", "SIGIR 2001", 2001, "§3, Dirichlet prior smoothing")
    capabilities = Capabilities(exact_scores=True, explanation=frozenset({QUERY_TERM}))

    def cache_params(self, ws: SystemWorkspace, split: str | None) -> dict[str, Any]:
        return {"ql": {"smoothing": "dirichlet", "tokenizer": ws.tokenizer.config}}  # and μ (``params``)

    def search(self, ws: SystemWorkspace, queries: dict[str, str], k: int, split: str | None) -> Run:
        index, ids, mu = index_of(ws), ws.dataset.doc_ids, mu_of(ws)
        out: Run = {}
        for qid, text in queries.items():
            rows, scores = index.top(text, k, mu)
            out[qid] = [(ids[r], float(s)) for r, s in zip(rows.tolist(), scores.tolist())]
        return out

    def exact_scores(self, ws: SystemWorkspace, split: str, rows: dict[str, list[int]],
                     queries: dict[str, str]) -> dict[str, dict[str, float]]:
        index, ids = index_of(ws), ws.dataset.doc_ids
        out = {}
        for q, rs in rows.items():
            scores = index.scores(index.query(queries[q]), np.asarray(rs, dtype=np.int64), mu_of(ws))
            out[q] = {ids[r]: float(s) for r, s in zip(rs, scores.tolist())}
        return out

    def one(self, ws: SystemWorkspace, probe: Probe, k: int, split: str | None) -> Hits:
        return self.search(ws, {"q": probe.text}, k, split)["q"]

    def explain(self, ws: SystemWorkspace, probe: Probe, row: int) -> list[TermScore]:
        """Each query term's c(w, q) · log((c(w, d) + μ p(w | C)) / (|d| + μ)), by the word it was typed
        as (the terms of one word summed), the largest (the least negative: a term the document holds
        often) first; they add up to the hit's score."""
        index = index_of(ws)
        q = index.query(probe.text)
        if not len(q.ids):
            return []
        parts = index.contributions(q, np.array([row]), mu_of(ws))[0]
        by_word: dict[str, float] = {}  # a word typed whole that gives several terms ("can't"): their sum
        for word, part in zip(q.words, parts.tolist()):
            by_word[word] = by_word.get(word, 0.0) + part
        ranked = sorted(by_word.items(), key=lambda wc: -wc[1])
        return [TermScore(word, round(score, 4), QUERY_TERM) for word, score in ranked]
