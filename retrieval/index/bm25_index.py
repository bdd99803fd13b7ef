"""BM25 over a tokenized corpus, with per-term explanations.

The engine is bm25s (sparse precomputed term scores; far faster than rank-bm25, which the
tests use as the reference implementation). Scoring, with ``N`` documents, ``df(t)`` the number
of documents holding term ``t``, ``tf`` its count in document ``d``, ``|d|`` the document length
and ``avgdl`` the mean length (Kamphuis et al., ECIR 2020, "Which BM25 do you mean?"):

* ``method="lucene"`` (default, Lucene ≥ 8 / Anserini):
  ``score(q, d) = Σ_{t∈q} log(1 + (N − df + 0.5)/(df + 0.5)) · tf / (tf + k1·(1 − b + b·|d|/avgdl))``
* ``method="robertson"``: idf ``log((N − df + 0.5)/(df + 0.5))`` (floored at 0) and the same
  saturation; ``method="atire"``: idf ``log(N/df)`` and ``tf·(k1+1)/(tf + k1·(…))``.

Query terms repeated in the query count once per occurrence (as in rank-bm25 and bm25s). A weighted
query (``retrieval.index.terms.WeightedQuery``: analyzed terms with weights, RM3's expanded query) scores
``Σ_t w_t · bm25(t, d)``, each term's count replaced by its weight: how Anserini/Lucene score a
``BooleanQuery`` of ``BoostQuery``-weighted term clauses.
Defaults ``k1 = 0.9, b = 0.4`` are Anserini's BEIR settings.
"""
from __future__ import annotations

import io
import math
import tempfile
import zipfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.data import ranking
from retrieval.data.run import Run
from retrieval.index.terms import WeightedQuery
from retrieval.index.tokenize import Tokenizer
from retrieval.index.top_k import top_k, top_k_each

Query = str | WeightedQuery  # a text (tokenized here) or analyzed terms with weights


@dataclass(frozen=True)
class TermContribution:
    """One query term's share of a document's BM25 score."""

    term: str  # the stemmed token
    query_words: tuple[str, ...]  # the query's words, as typed, that produced it (``Tokenizer.typed_words``)
    tf: int
    df: int
    idf: float
    score: float


def _idf(method: str, df: int, n: int) -> float:
    if method == "lucene":
        return math.log(1 + (n - df + 0.5) / (df + 0.5))
    if method == "robertson":
        return math.log(max(1.0, (n - df + 0.5) / (df + 0.5)))
    if method == "atire":
        return math.log(n / df)
    raise ValueError(f"unknown BM25 method {method!r}")


def _tfc(method: str, tf: float, dl: float, avgdl: float, k1: float, b: float) -> float:
    norm = k1 * (1 - b + b * dl / avgdl)
    if method == "atire":
        return tf * (k1 + 1) / (tf + norm)
    return tf / (tf + norm)


class BM25Index:
    """A BM25 index over ``texts`` (aligned with ``doc_ids``)."""

    METHODS = ("lucene", "robertson", "atire")

    def __init__(self, doc_ids: list[str], texts: list[str], k1: float = 0.9, b: float = 0.4,
                 method: str = "lucene", tokenizer: Tokenizer | None = None):
        self._settings(doc_ids, texts, k1, b, method, tokenizer)
        corpus_tokens = self.tokenizer.tokenize_many(texts)
        self.doc_len = np.array([len(t) for t in corpus_tokens], dtype=np.float64)
        self.avgdl = float(self.doc_len.mean()) or 1.0
        self.df: Counter[str] = Counter()
        for toks in corpus_tokens:
            self.df.update(set(toks))
        import bm25s  # numba and scipy come with it: imported where an index is built

        self._engine = bm25s.BM25(k1=self.k1, b=self.b, method=method)
        self._engine.index(corpus_tokens, show_progress=False)

    def _settings(self, doc_ids: list[str], texts: list[str], k1: float, b: float, method: str,
                  tokenizer: Tokenizer | None) -> None:
        """What a built and a loaded index both hold before their statistics: checked ids, texts,
        parameters and tokenizer."""
        if method not in self.METHODS:
            raise ValueError(f"unknown BM25 method {method!r}; choose from {self.METHODS}")
        if len(doc_ids) != len(texts):
            raise ValueError("doc_ids and texts differ in length")
        if not doc_ids:
            raise ValueError("cannot index an empty corpus")
        self.doc_ids, self._texts = list(doc_ids), texts
        self.k1, self.b, self.method = float(k1), float(b), method
        self.tokenizer = tokenizer or Tokenizer()
        self._last: tuple[Query, np.ndarray] | None = None  # the last query's scores (top, then scores_at)
        self._ids = np.array(self.doc_ids, dtype=object)  # a ranking's ids taken from it in one call

    # ---- saving and loading ------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The index as one uncompressed zip: bm25s's own saved files (``BM25.save``) plus the
        document lengths and document frequencies the explanations use."""
        buf = io.BytesIO()
        with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
            self._engine.save(tmp, show_progress=False)
            for f in sorted(Path(tmp).iterdir()):
                z.write(f, f.name)
            terms = list(self.df)
            extra = io.BytesIO()
            np.savez(extra, doc_len=self.doc_len, df_terms=np.array(terms, dtype=object).astype(str),
                     df_counts=np.array([self.df[t] for t in terms], dtype=np.int64))
            z.writestr("rankscope.npz", extra.getvalue())
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, blob: bytes, doc_ids: list[str], texts: list[str], k1: float = 0.9, b: float = 0.4,
                   method: str = "lucene", tokenizer: Tokenizer | None = None) -> BM25Index:
        """The index ``to_bytes`` saved, over the same ``doc_ids`` and ``texts`` (not re-tokenized).

        Nothing in the blob is trusted (``bm25_blob``): its members are read in memory, never
        extracted or unpickled, and must be what RankScope writes for a corpus of this size with
        these settings. A blob that is not, or that any reader fails on, is ``bm25_blob.DamagedIndex``
        (a ``ValueError``) naming the problem."""
        from retrieval.index.bm25_blob import DamagedIndex, read

        index = cls.__new__(cls)
        index._settings(doc_ids, texts, k1, b, method, tokenizer)
        try:
            index._engine, index.doc_len, df = read(blob, texts, index.tokenizer, index.k1, index.b, method)
        except DamagedIndex:
            raise
        except Exception as err:  # whatever else a damaged blob makes a reader raise
            raise DamagedIndex(f"it does not read ({type(err).__name__}: {str(err)[:200]})") from err
        index.df = Counter(df)
        index.avgdl = float(index.doc_len.mean()) or 1.0
        return index

    @property
    def params(self) -> dict[str, Any]:
        return {"k1": self.k1, "b": self.b, "method": self.method, "tokenizer": self.tokenizer.config}

    def __len__(self) -> int:
        return len(self.doc_ids)

    # ---- scoring -------------------------------------------------------------------------
    def scores(self, query: Query) -> np.ndarray:
        """Exact BM25 score of ``query`` (a text, or a ``WeightedQuery``) against every document
        (float32, aligned with doc_ids)."""
        ids, weights = self._term_ids(query)
        row: np.ndarray = self._score_block([ids], [weights])[0]
        return row

    def _term_ids(self, query: Query) -> tuple[list[int], list[float] | None]:
        """The query's terms as the engine's term ids, in the query's order, and their weights (None
        for a text: each occurrence counts once); terms the corpus lacks left out
        (``bm25s.BM25.get_tokens_ids``). A weighted query's terms are looked up as they are."""
        vocab = self._engine.vocab_dict
        if isinstance(query, WeightedQuery):
            kept = [(vocab[t], w) for t, w in query.terms if t in vocab]
            return [i for i, _ in kept], [w for _, w in kept]
        return [vocab[t] for t in self.tokenizer(query) if t in vocab], None

    def _score_block(self, term_ids: list[list[int]], weights: list[list[float] | None] | None = None) -> np.ndarray:
        """(queries × documents) float32 BM25 scores of queries given as term ids (and, for weighted
        queries, their terms' weights: None for a text query).

        The precomputed term scores of bm25s (one sparse column a term) gathered for every term of
        every query at once and added in one ``np.add.at``, which adds in order: each document's
        score is summed term by term in the query's order, the floats ``bm25s.BM25.get_scores_from_ids``
        gives (none of ``METHODS`` adds a score for absent terms). A weighted query's term scores are
        first multiplied by their weights as float32 (a text query's are not touched), so its score is
        ``Σ_t float32(w_t) · bm25(t, d)`` in float32, term by term in its order. Past
        ``POSTINGS_PER_BLOCK`` postings (the gather copies them) the terms are added one by one
        instead, in the same order (the same floats)."""
        postings = self._engine.scores
        data, indices, indptr = postings["data"], postings["indices"], postings["indptr"]
        n = len(self.doc_ids)
        out = np.zeros((len(term_ids), n), dtype=np.float32)
        ids = np.fromiter((t for q in term_ids for t in q), dtype=np.int64)
        if not len(ids):
            return out
        weighted = weights is not None and any(w is not None for w in weights)
        factor = np.fromiter((w for q, ws in zip(term_ids, weights or [None] * len(term_ids))
                              for w in (ws if ws is not None else [1.0] * len(q))), dtype=np.float32,
                             count=len(ids)) if weighted else None
        starts = indptr[ids]
        lengths = indptr[ids + 1] - starts
        total = int(lengths.sum())
        if total > self.POSTINGS_PER_BLOCK:  # past the budget (one query of many common terms): no gathered copy,
            rows = [r for r, q in enumerate(term_ids) for _ in q]  # term by term, in the same order (the same floats)
            for j, (row, start, end) in enumerate(zip(rows, starts.tolist(), (starts + lengths).tolist())):
                part = data[start:end] if factor is None else data[start:end] * factor[j]
                np.add.at(out[row], indices[start:end], part)
            return out
        # position of every gathered posting in the engine's arrays: each term's run of postings
        where = np.arange(total, dtype=np.int64) + np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        row_of = np.repeat(np.arange(len(term_ids), dtype=np.int64), [len(q) for q in term_ids])
        cell = np.repeat(row_of * n, lengths) + indices[where]
        values = data[where] if factor is None else data[where] * np.repeat(factor, lengths)
        np.add.at(out.reshape(-1), cell, values)
        return out

    POSTINGS_PER_BLOCK = 1 << 22  # postings gathered at once by ``search`` (each costs 20 bytes there)
    # (queries × documents) scores held at once by ``search``: 1 MiB, within a core's L2 cache (SciFact and
    # NFCorpus on a 2-core AVX2 EPYC: 1 << 16 … 1 << 20 alike, 1 << 22 a tenth to a quarter slower)
    CELLS_PER_BLOCK = 1 << 18

    def _blocks(self, texts: list[Query]) -> list[tuple[int, int, list[list[int]], list[list[float] | None]]]:
        """(start, end, term ids, weights) of consecutive query blocks within both budgets; a query
        past the postings budget on its own is a block of its own."""
        parsed = [self._term_ids(t) for t in texts]
        term_ids, weights = [ids for ids, _ in parsed], [w for _, w in parsed]
        indptr = self._engine.scores["indptr"]
        flat = np.fromiter((t for q in term_ids for t in q), dtype=np.int64)
        costs = np.zeros(len(texts), dtype=np.int64)  # postings each query gathers
        np.add.at(costs, np.repeat(np.arange(len(texts)), [len(q) for q in term_ids]), indptr[flat + 1] - indptr[flat])
        most = max(1, self.CELLS_PER_BLOCK // max(1, len(self.doc_ids)))
        blocks: list[tuple[int, int, list[list[int]], list[list[float] | None]]] = []
        start, weight = 0, 0
        for i, cost in enumerate(costs.tolist()):
            if i > start and (i - start >= most or weight + cost > self.POSTINGS_PER_BLOCK):
                blocks.append((start, i, term_ids[start:i], weights[start:i]))
                start, weight = i, 0
            weight += cost
        if len(texts) > start:
            blocks.append((start, len(texts), term_ids[start:], weights[start:]))
        return blocks

    def _scores_of(self, query: Query) -> np.ndarray:
        """``scores(query)``, kept for the next call with the same query (a hybrid asks for the
        top and then for the scores of the candidates)."""
        last = self._last
        if last is not None and last[0] == query:
            return last[1]
        scores = self.scores(query)
        self._last = (query, scores)
        return scores

    def top(self, query: Query, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores) of the ``k`` best documents for ``query`` (a text or a ``WeightedQuery``),
        best first; zero scores left out."""
        return self.top_rows(self._scores_of(query), k)

    def scores_at(self, query: Query, rows: np.ndarray) -> np.ndarray:
        """The exact BM25 scores of ``query`` for the documents at ``rows`` (0: no term matches)."""
        return self._scores_of(query)[np.asarray(rows, dtype=np.int64)]

    def search(self, queries: Mapping[str, Query], k: int = 100) -> Run:
        """Top-``k`` documents per query (texts or ``WeightedQuery``s); documents matching no query term
        are left out."""
        qids, texts = list(queries), list(queries.values())
        run: Run = {}
        ids = self._ids
        for start, end, term_ids, weights in self._blocks(texts):
            for qid, (rows, top) in zip(qids[start:end], top_k_each(self._score_block(term_ids, weights), k,
                                                                    self.tie_rank)):
                run[qid] = list(zip(ids[rows].tolist(), top.tolist()))
        return run

    def rank(self, scores: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The top ``k`` of a query's score vector (``scores``) as (doc id, score), best first."""
        rows, top = self.top_rows(scores, k)
        return list(zip(self._ids[rows].tolist(), top.tolist()))

    def top_rows(self, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores) of the top ``k`` of a score vector, best first; zero scores left out.

        Ranked by ``top_k`` rather than by ``bm25s.retrieve``: only the documents with a positive
        score are partitioned, ties go by trec_eval's order (``retrieval.data.ranking``).
        """
        return top_k(scores, k, tie_rank=self.tie_rank)

    @cached_property
    def tie_rank(self) -> np.ndarray:
        """Each row's place in trec_eval's order of equal scores (``ranking.tie_rank``), computed once."""
        return ranking.tie_rank(self.doc_ids)

    def max_score(self, query: Query | QueryTerms) -> float:
        """The largest BM25 score any document could get for ``query``: Σ over its terms of
        count · idf · the tf part's limit (1 for ``lucene`` and ``robertson``, k1 + 1 for ``atire``),
        reached by a document holding every term, often; 0 when no query term is in the corpus."""
        terms = query if isinstance(query, QueryTerms) else self.query_terms(query)
        limit = self.k1 + 1 if self.method == "atire" else 1.0
        return float(sum(count * idf for _, count, _, _, idf in terms.terms) * limit)

    # ---- explanation ---------------------------------------------------------------------
    def query_terms(self, query: Query) -> QueryTerms:
        """The query's terms with their counts, surface words and idf: what every explanation of
        this query needs, tokenized once. A ``WeightedQuery``'s terms come with their weights as
        counts, and no words (it was never typed)."""
        n = len(self.doc_ids)
        if isinstance(query, WeightedQuery):
            return QueryTerms([(term, weight, (), self.df.get(term, 0),
                                _idf(self.method, self.df[term], n) if self.df.get(term, 0) else 0.0)
                               for term, weight in query.terms])
        words_by_term: dict[str, list[str]] = {}  # each term's words as typed ("t" -> "can't")
        for word, tokens in self.tokenizer.typed_words(query):
            for term in tokens:
                words_by_term.setdefault(term, []).append(word)
        terms: list[tuple[str, float, tuple[str, ...], int, float]] = []
        for term, count in Counter(self.tokenizer(query)).items():
            df = self.df.get(term, 0)
            terms.append((term, count, tuple(dict.fromkeys(words_by_term.get(term, []))), df,
                          _idf(self.method, df, n) if df else 0.0))
        return QueryTerms(terms)

    def explain(self, query: Query | QueryTerms, doc_index: int) -> list[TermContribution]:
        """Per-term contributions of ``query`` to document ``doc_index``; they sum to its score.

        Recomputed from the document's own tokens with the formula in the module docstring, so
        a term the document lacks shows tf = 0 and contributes 0. ``query`` may be the text or
        its ``query_terms`` (to explain many documents for one query without re-tokenizing it).
        """
        return self.explain_text(query, self._texts[doc_index], self.doc_len[doc_index])

    def explain_text(self, query: Query | QueryTerms, text: str, dl: float | None = None) -> list[TermContribution]:
        """Contributions of ``query`` to any ``text`` under this index's statistics (N, df, avgdl).

        For a text outside the corpus (a pseudo document) this is the score it would get if added
        without changing the statistics.
        """
        terms = query if isinstance(query, QueryTerms) else self.query_terms(query)
        tf = Counter(self.tokenizer(text))
        dl = sum(tf.values()) if dl is None else dl
        return [TermContribution(term, words, tf[term], df, float(idf),
                                 float(count * idf * _tfc(self.method, tf[term], dl, self.avgdl, self.k1, self.b)))
                for term, count, words, df, idf in terms.terms]


@dataclass(frozen=True)
class QueryTerms:
    """A query's distinct terms: (term, count in the query — a weighted query's weight —, surface words,
    df, idf), in query order."""

    terms: list[tuple[str, float, tuple[str, ...], int, float]]

    @property
    def names(self) -> list[str]:
        return [t[0] for t in self.terms]

    @property
    def term_words(self) -> dict[str, str]:
        """Each term as the query's words it came from, as typed (``Tokenizer.typed_words``; several
        joined by "/"): "leaki" -> "leaky", and "can" and "t" -> "can't"; what a list of terms shows."""
        return {term: "/".join(words) or term for term, _, words, _, _ in self.terms}
