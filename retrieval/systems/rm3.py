"""RM3 as a system: pseudo-relevance feedback over BM25, the query expanded with the terms of its best
BM25 documents and searched again through the engine's lexical seam (so it runs on every engine).

The relevance model (RM1): Victor Lavrenko, W. Bruce Croft, "Relevance-Based Language Models", SIGIR
2001 (§3.1–3.2: P(w | R) estimated from the top documents, each document's language model weighted by
the query's likelihood under it). RM3, the relevance model interpolated with the original query: Nasreen
Abdul-Jaleel, James Allan, W. Bruce Croft, Fernando Diaz, Leah Larkey, Xiaoyan Li, Mark D. Smucker,
Courtney Wade, "UMass at TREC 2004: Novelty and HARD", TREC 2004 (§3.1, the query model; the
interpolation with the original query's maximum-likelihood model). Implemented as Anserini's
``Rm3Reranker`` computes it (Pyserini's ``LuceneSearcher.set_rm3``), with Pyserini's defaults
``fb_docs = 10``, ``fb_terms = 10``, ``original_query_weight = 0.5``:

1. The query's BM25 top ``fb_docs`` documents are the feedback documents, each with its BM25 score.
2. Each document's term vector: a term's count in the document, for terms of 2 to 20 characters made of
   ``[a-z0-9]`` only (Anserini's ``filterTerms``, on in Pyserini) held by at most 10% of the corpus's
   documents (df/N ≤ 0.1: Anserini's stand-in for a stopword list); pruned to its ``fb_terms`` most
   frequent terms (ties by term), then L1-normalised over what is left.
3. The relevance model: P(t | R) ∝ Σ_d (normalised count of t in d) · score(d) over the feedback
   documents (the BM25 score standing in for the query likelihood), pruned to its ``fb_terms`` heaviest
   terms (ties by term) and L1-normalised.
4. The query model: each query term's count over the query's length (L1-normalised); the expanded
   query ``w · query model + (1 − w) · relevance model``, ``w = original_query_weight``, over the union
   of both terms.
5. The expanded query is searched as a weighted query (``retrieval.index.terms.WeightedQuery``): BM25
   of each term times its weight, summed, as Lucene scores Anserini's boosted ``BooleanQuery``.

Where this differs from Anserini: the terms are RankScope's tokenizer's (``retrieval.index.tokenize``:
Snowball's English stemmer and Lucene's 33 stopwords) rather than Lucene's analyzer (Porter's stemmer);
the character test applies to these terms, and their length is counted in code points (Java counts
UTF-16 units: the same for ``[a-z0-9]``); the weights are computed in float64 (Anserini's in float32);
the expanded query's terms are ordered by weight, then term (Anserini's by a hash map), which orders
only the float sum. The document term vectors are the tokenizer's output for the indexed text, and the
document frequencies the in-process BM25 index's (``Workspace.bm25``: beside Milvus, the same analyzed
terms, built on first use as explanations need it). A query none of whose terms the corpus holds has
no feedback: its expanded query is the query model alone, which finds nothing, as BM25 does.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.data.run import Run
from retrieval.index.terms import QUERY_EXPANSION, QUERY_TERM, TermKind, TermScore, WeightedQuery
from retrieval.systems.base import Hits, Needs, Probe, SystemBase
from retrieval.systems.bm25 import lexical_params
from retrieval.systems.declared import FLOAT, INT, Capabilities, Citation, Parameter, Relations

if TYPE_CHECKING:
    from retrieval.systems.reads import SystemWorkspace

FB_DOCS = 10  # Pyserini's LuceneSearcher.set_rm3 defaults (Anserini's -rm3.fbDocs, -rm3.fbTerms, …)
FB_TERMS = 10
ORIGINAL_QUERY_WEIGHT = 0.5
SHORTEST, LONGEST = 2, 20  # a feedback term's characters (Anserini's createdFeatureVector)
MOST_DF = 0.1  # a feedback term is held by at most this share of the corpus's documents
FEEDBACK_TERM = re.compile(r"[a-z0-9]+")  # Anserini's filterTerms (Pyserini's filter_terms=True)


def _pruned(weights: Mapping[str, float], size: int) -> dict[str, float]:
    """The ``size`` heaviest entries, ties by term (Anserini's ``FeatureVector.pruneToSize``)."""
    return dict(sorted(weights.items(), key=lambda tw: (-tw[1], tw[0]))[:size])


def _l1(weights: Mapping[str, float]) -> dict[str, float]:
    """``weights`` over their sum (``FeatureVector.scaleToUnitL1Norm``); empty stays empty."""
    total = sum(abs(w) for w in weights.values())
    return {t: w / total for t, w in weights.items()} if total > 0 else dict(weights)


def document_vector(tokens: Sequence[str], df: Mapping[str, int], n: int, fb_terms: int = FB_TERMS) -> dict[str, float]:
    """A feedback document's term vector (step 2 of the module docstring): each kept term's count, the
    ``fb_terms`` most frequent kept.

    Args:
        tokens: The document's terms, as the index's tokenizer gives them.
        df: Each term's document frequency in the corpus.
        n: The corpus's size.
        fb_terms: How many terms a document keeps.

    Returns:
        ``{term: count}``, not yet normalised.
    """
    kept = {t: float(c) for t, c in Counter(tokens).items()
            if SHORTEST <= len(t) <= LONGEST and FEEDBACK_TERM.fullmatch(t) and df.get(t, 0) / n <= MOST_DF}
    return _pruned(kept, fb_terms)


def relevance_model(feedback: Sequence[tuple[Sequence[str], float]], df: Mapping[str, int], n: int,
                    fb_terms: int = FB_TERMS) -> dict[str, float]:
    """P(t | R) from the feedback documents (step 3): Σ_d (count of t in d / d's kept length) · score(d),
    the ``fb_terms`` heaviest, L1-normalised.

    Args:
        feedback: ``[(document's terms, its BM25 score), …]``, best first.
        df: Each term's document frequency in the corpus.
        n: The corpus's size.
        fb_terms: How many terms each document and the model keep.

    Returns:
        ``{term: weight}``, weights summing to 1 (empty without feedback terms).
    """
    vectors = [(document_vector(tokens, df, n, fb_terms), score) for tokens, score in feedback]
    model: dict[str, float] = {}
    for vector, score in vectors:
        norm = sum(vector.values())
        if norm > 0.001:  # Anserini's guard against a document with no feedback term
            for term, count in vector.items():
                model[term] = model.get(term, 0.0) + count / norm * score
    return _l1(_pruned(model, fb_terms))


def expand(query_tokens: Sequence[str], feedback: Sequence[tuple[Sequence[str], float]], df: Mapping[str, int],
           n: int, fb_terms: int = FB_TERMS, original_query_weight: float = ORIGINAL_QUERY_WEIGHT) -> WeightedQuery:
    """The expanded query (steps 3–4): ``w · query model + (1 − w) · relevance model``.

    Args:
        query_tokens: The query's terms, as the index's tokenizer gives them.
        feedback: ``[(document's terms, its BM25 score), …]``, the top ``fb_docs`` of BM25, best first.
        df: Each term's document frequency in the corpus.
        n: The corpus's size.
        fb_terms: How many terms each document and the relevance model keep.
        original_query_weight: ``w``.

    Returns:
        The weighted query, heaviest term first (ties by term).
    """
    query = _l1({t: float(c) for t, c in Counter(query_tokens).items()})
    model = relevance_model(feedback, df, n, fb_terms)
    w = original_query_weight
    mixed = {t: w * query.get(t, 0.0) + (1.0 - w) * model.get(t, 0.0) for t in {*query, *model}}
    return WeightedQuery.of(sorted(mixed.items(), key=lambda tw: (-tw[1], tw[0])))


class RM3(SystemBase):
    """BM25 with RM3 query expansion (module docstring)."""

    key, label, short = "rm3", "BM25 + RM3 (query expansion)", "RM3"
    needs = Needs(lexical=True)
    shown_by_default = False  # on request: a BM25 variant, twice its searches
    parameters = (
        Parameter("fb_docs", INT, FB_DOCS, "feedback documents: the query's BM25 top documents the relevance "
                  "model is estimated from", low=1, high=1000),
        Parameter("fb_terms", INT, FB_TERMS, "feedback terms: the relevance model's (and each feedback "
                  "document's) heaviest terms kept", low=1, high=1000),
        Parameter("original_query_weight", FLOAT, ORIGINAL_QUERY_WEIGHT, "the original query's share of the "
                  "expanded query (1: no expansion)", low=0, high=1),
    )
    citation = Citation("Nasreen Abdul-Jaleel, James Allan, W. Bruce Croft, Fernando Diaz, Leah Larkey, Xiaoyan "
                        "Li, Mark D. Smucker, Courtney Wade", "UMass at TREC 2004: Novelty and HARD", "TREC 2004",
                        2004, "§3.1, the query model (RM3)")
    relations = Relations(("bm25",), "BM25 with query expansion: its top documents' terms added to the query")
    capabilities = Capabilities(exact_scores=True, explanation=frozenset({QUERY_TERM, QUERY_EXPANSION}))

    def cache_params(self, ws: SystemWorkspace, split: str | None) -> dict[str, Any]:
        return {**ws.engine.key, **lexical_params(ws), "rm3": {"filter_terms": True}}  # and the settings (``params``)

    def settings(self, ws: SystemWorkspace) -> tuple[int, int, float]:
        """(fb_docs, fb_terms, original_query_weight) as ``ws`` holds them (``Workspace.settings_of``)."""
        values = ws.settings_of(self.key)
        return int(values["fb_docs"]), int(values["fb_terms"]), float(values["original_query_weight"])

    def expanded(self, ws: SystemWorkspace, text: str, feedback: Hits) -> WeightedQuery:
        """The expanded query of ``text`` given its BM25 list (its first ``fb_docs`` the feedback)."""
        docs, bm25 = ws.dataset.docs, ws.bm25
        fb_docs, fb_terms, original_query_weight = self.settings(ws)
        used = [(ws.tokenizer(docs[d].full_text), s) for d, s in feedback[:fb_docs]]
        return expand(ws.tokenizer(text), used, bm25.df, len(bm25), fb_terms, original_query_weight)

    def expand_all(self, ws: SystemWorkspace, queries: dict[str, str]) -> dict[str, WeightedQuery]:
        """Every query's expanded query, their feedback searched in one batch."""
        feedback = ws.lexical.search(queries, self.settings(ws)[0])
        return {q: self.expanded(ws, text, feedback.get(q, [])) for q, text in queries.items()}

    def search(self, ws: SystemWorkspace, queries: dict[str, str], k: int, split: str | None) -> Run:
        return ws.lexical.search(self.expand_all(ws, queries), k)

    def exact_scores(self, ws: SystemWorkspace, split: str, rows: dict[str, list[int]],
                     queries: dict[str, str]) -> dict[str, dict[str, float]]:
        """The expanded query's BM25 at the rows (0 where none of its terms is in the document)."""
        ids = ws.dataset.doc_ids
        expanded = self.expand_all(ws, {q: queries[q] for q in rows})
        scores = {q: ws.lexical.scores_at(expanded[q], np.asarray(rs, dtype=np.int64)) for q, rs in rows.items()}
        return {q: {ids[r]: float(s) for r, s in zip(rs, scores[q])} for q, rs in rows.items()}

    def _probe_query(self, ws: SystemWorkspace, probe: Probe) -> WeightedQuery:
        """The probe's expanded query: its BM25 list is the feedback where it goes ``fb_docs`` deep (or
        holds every match), else the feedback is searched."""
        hits, fb_docs = probe.lexical, self.settings(ws)[0]
        if probe.depth < fb_docs and len(hits) >= probe.depth:
            hits = ws.lexical.search({"q": probe.text}, fb_docs)["q"]
        return self.expanded(ws, probe.text, hits)

    def one(self, ws: SystemWorkspace, probe: Probe, k: int, split: str | None) -> Hits:
        return ws.lexical.search({"q": self._probe_query(ws, probe)}, k)["q"]

    def explain(self, ws: SystemWorkspace, probe: Probe, row: int) -> list[TermScore]:
        """Each term of the expanded query the document holds, with its weight times its BM25 score
        there, largest first (they add up to the hit's score), and its kind: a query term (shown as the
        word typed) or a query expansion (shown as the index's term, a stem)."""
        query = self._probe_query(ws, probe)
        typed = ws.bm25.query_terms(probe.text).term_words
        shown: dict[tuple[str, TermKind], float] = {}  # the terms of one word typed ("can't": "can", "t") summed
        for c in ws.bm25.explain(query, row):
            if c.score > 0:
                key = (typed[c.term], QUERY_TERM) if c.term in typed else (c.term, QUERY_EXPANSION)
                shown[key] = shown.get(key, 0.0) + c.score
        return [TermScore(term, round(score, 4), kind)
                for (term, kind), score in sorted(shown.items(), key=lambda kv: -kv[1])]
