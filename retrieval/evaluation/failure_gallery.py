"""The failure gallery: the failure rules (``retrieval.evaluation.failure_rules``, where every category is
defined) applied to a workspace's cached depth-1000 runs of BM25, dense, the CLEAR hybrid and
learned sparse (``Workspace.run``), and one card per (category, query) with the evidence why: the
document's rank under each system, the query terms it lacks, each matched term's BM25 contribution,
the dense similarity, which query words and which passage carry the dense score and how the CLEAR
hybrid's score splits into its parts (``retrieval.systems.dense_why``, ``hybrid_why``), and the learned
sparse terms (expansions marked) that scored it. Relevant
means a graded label > 0; unjudged documents count as not relevant (the TREC
convention; each card says which), except on the queries whose labels came from judging in the app
(``coverage.from_judging`` on the store's judgments of the corpus): there an unlabelled document is
unjudged and counted apart (``failure_rules``' *unjudged at the top*), never shown as the failure.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

import numpy as np

from retrieval.data.run import rank_maps
from retrieval.evaluation.failure_rules import Thresholds, classify, headline_systems, rank_text
from retrieval.index.terms import TermScore
from retrieval.judging import seen
from retrieval.judging.coverage import from_judging
from retrieval.sharing.owners import Viewer
from retrieval.systems import BASE_SYSTEMS, DENSE, ENCODER_SYSTEMS, SPLADE, TUNED_OF, TUNED_SYSTEMS, short, shown
from retrieval.systems.dense_why import DenseWhy, explain_dense
from retrieval.systems.hybrid import make
from retrieval.systems.hybrid_why import HybridWhy, explain_split
from retrieval.workspace import EVAL_DEPTH, Workspace


@dataclass
class FailureCard:
    """One (category, query): the document that shows it, its ranks and the evidence why."""

    category: str
    query_id: str
    query: str
    doc_id: str
    title: str
    text: str
    label: int | None  # graded label; None when unjudged
    ranks: dict[str, int | None]  # system -> rank within the depth (None: not retrieved)
    headline: str  # "BM25 — → dense 3"
    gap: int  # how dramatic (``failure_rules``); cards are ordered by it
    matched_terms: list[str]  # query terms (stems) the document contains
    missing_terms: list[str]  # query terms it lacks
    bm25_terms: list[tuple[str, float]]  # per matched term, its BM25 contribution (sum = BM25 score)
    term_words: dict[str, str]  # query term (stem) -> the query word(s) it came from, for display
    dense_similarity: float  # s_emb(q, d) under the workspace's encoder (cosine when normalized)
    tuned_similarity: float | None = None  # the same under the fine-tuned encoder, when given
    sparse_terms: list[TermScore] = field(default_factory=list)  # learned sparse: the terms that scored it
    dense_why: DenseWhy | None = None  # what carries the dense score: the query words, the best passage
    hybrid_why: HybridWhy | None = None  # the CLEAR hybrid's score of it, split into its lexical and dense parts

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Gallery:
    dataset: str
    split: str
    systems: list[str]  # the systems every card gives a rank for
    thresholds: dict[str, Any]
    counts: dict[str, int]  # category -> number of queries in it (every evaluated category)
    cards: dict[str, list[FailureCard]]  # category -> cards, most dramatic first (capped)
    query_categories: dict[str, list[str]]  # query id -> its categories (analysed queries only)
    skipped: list[str] = field(default_factory=list)  # queries with no relevant label
    pair: tuple[str, str] | None = None  # (A, B) of the pair categories, when compared
    pooled: list[str] = field(default_factory=list)  # analysed queries whose labels came from judging in the app

    @property
    def categories(self) -> list[str]:
        return list(self.counts)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ---- evidence ------------------------------------------------------------------------------
class TermEvidence(NamedTuple):
    matched: list[str]  # query terms (stems) the document contains, in query order
    missing: list[str]  # query terms it lacks
    contributions: list[tuple[str, float]]  # (matched term, its BM25 contribution)
    words: dict[str, str]  # term -> the query word(s) it came from, as typed ("fridg" -> "fridge", "t" -> "can't")


def term_evidence(ws: Workspace, query: str, doc_id: str) -> TermEvidence:
    """Which query terms a document matches and lacks, and each matched term's BM25 contribution.

    Terms are the query's distinct tokens (stems) in query order; the contributions come from
    ``BM25Index.explain`` (lexical.py's formula) and sum to the document's BM25 score.
    """
    query_terms = ws.bm25.query_terms(query)
    contributions = ws.bm25.explain(query_terms, ws.doc_row[doc_id])
    matched = {c.term for c in contributions if c.tf > 0}
    terms = query_terms.names
    return TermEvidence([t for t in terms if t in matched], [t for t in terms if t not in matched],
                        [(c.term, c.score) for c in contributions if c.tf > 0],
                        query_terms.term_words)


def dense_similarities(ws: Workspace, pairs: list[tuple[str, str, str]]) -> list[float]:
    """s_emb(q, d) = ⟨E(q), E(d)⟩ for (query id, query text, doc id) pairs, as the dense index scores
    it (the cosine for a normalizing encoder); query embeddings come from the store when cached."""
    if not pairs:
        return []
    queries = {qid: text for qid, text, _ in pairs}
    position = {qid: i for i, qid in enumerate(queries)}
    qvecs = ws.dense.encode_queries(queries)
    return [float(ws.dense.index.scores(qvecs[position[qid]], np.asarray([ws.doc_row[doc]]))[0])
            for qid, _, doc in pairs]


# ---- the gallery ---------------------------------------------------------------------------
def failure_gallery(ws: Workspace, split: str, tuned_ws: Workspace | None = None, top: int = 10,
                    low: int = 100, max_cards_per_category: int = 12, fp_top: int = 3,
                    tuned_system: str = DENSE, pair: tuple[str, str] | None = None,
                    sparse: bool = True, viewer: Viewer | None = None, why: bool = True) -> Gallery:
    """Classify every labelled query of ``split`` (``failure_rules.classify``) and build the cards.

    ``tuned_ws``: the same data set with a fine-tuned encoder (``ws.with_model(encoder)``); adds
    the fine-tuning categories and the fine-tuned dense and hybrid ranks. ``tuned_system``:
    "dense" or "hybrid", what those categories compare. ``pair``: two systems of ``ws`` (A, B; e.g.
    BM25 and an imported run) for the categories "B finds, A misses" and the reverse. ``sparse``:
    learned sparse's ranks and terms too, and its category, unless its index is still being built.
    The systems are those shown by default (``retrieval.systems.shown``); BM25, dense and the CLEAR
    hybrid always, any other once its index is built.
    ``viewer``: whose judgments tell which labels were judged in the app (``Store.judgments``; None,
    every judge's). ``why``: each card's dense explanation and CLEAR split too (``_fill_whys``; cached).
    """
    ws.require_split(split)
    if tuned_ws is not None and tuned_ws.dataset.content_hash != ws.dataset.content_hash:
        raise ValueError("the fine-tuned workspace must hold the same data set")
    t = Thresholds(top, low, fp_top, EVAL_DEPTH, tuned_system)
    base = [s for s in shown() if (sparse or s != SPLADE) and (s in BASE_SYSTEMS or not ws.pending([s]))]
    runs = {s: ws.run(s, split) for s in base}
    if tuned_ws is not None:
        runs.update({TUNED_OF[s]: tuned_ws.run(s, split) for s in ENCODER_SYSTEMS})
    runs.update({s: ws.run(s, split) for s in pair or () if s not in runs})
    qrels = ws.dataset.qrels[split]
    labels = {qid: qrels.get(qid, {}) for qid in ws.dataset.split_queries(split)}
    maps = rank_maps(runs)
    judgments = seen.judgments(ws.store, ws.dataset, viewer)
    pooled = from_judging(labels, judgments)
    found = classify(labels, maps, t, finetuning=tuned_ws is not None, pair=pair, pooled=pooled)
    systems = list(dict.fromkeys([*base, *(TUNED_SYSTEMS if tuned_ws is not None else ()), *(pair or ())]))
    cards = {c: [_card(ws, qid, c, doc, gap, labels[qid], maps, t, systems, found.pair)
                 for qid, doc, gap in found.found[c][:max_cards_per_category]] for c in found.categories}
    _fill_similarities(ws, tuned_ws, [card for cs in cards.values() for card in cs])
    if why:
        _fill_whys(ws, split, [card for cs in cards.values() for card in cs])
    if SPLADE in base:
        _fill_sparse_terms(ws, [card for cs in cards.values() for card in cs])
    return Gallery(ws.dataset.name, split, systems, asdict(t), found.counts, cards, found.query_categories,
                   found.skipped, found.pair, found.pooled)


def headline(category: str, card_ranks: dict[str, int | None], tuned_system: str = DENSE,
             pair: tuple[str, str] | None = None) -> str:
    """"BM25 989 → dense 3", "BM25 — · dense 52 → hybrid 4", "BM25 37 · dense 52" (both fail): the
    systems ``failure_rules.headline_systems`` names, by their short labels (``retrieval.systems.short``)."""
    sources, target = headline_systems(category, tuned_system, pair)
    text = " · ".join(f"{short(s)} {rank_text(card_ranks[s])}" for s in sources)
    return text if target is None else f"{text} → {short(target)} {rank_text(card_ranks[target])}"


def _card(ws: Workspace, qid: str, category: str, doc_id: str, gap: int, labels: dict[str, int],
          maps: dict[str, dict[str, dict[str, int]]], t: Thresholds, systems: Sequence[str], pair: tuple[str,
                     str] | None) -> FailureCard:
    doc = ws.dataset.docs[doc_id]
    text = ws.dataset.queries[qid]
    card_ranks = {s: maps[s][qid].get(doc_id) for s in systems}
    ev = term_evidence(ws, text, doc_id)
    return FailureCard(category, qid, text, doc_id, doc.title, doc.text, labels.get(doc_id), card_ranks,
                       headline(category, card_ranks, t.tuned_system, pair), gap,
                       ev.matched, ev.missing, ev.contributions, ev.words, dense_similarity=float("nan"))


def _fill_similarities(ws: Workspace, tuned_ws: Workspace | None, cards: list[FailureCard]) -> None:
    pairs = [(c.query_id, c.query, c.doc_id) for c in cards]
    for c, s in zip(cards, dense_similarities(ws, pairs)):
        c.dense_similarity = s
    if tuned_ws is not None:
        for c, s in zip(cards, dense_similarities(tuned_ws, pairs)):
            c.tuned_similarity = s


def _fill_whys(ws: Workspace, split: str, cards: list[FailureCard]) -> None:
    """Each card's dense explanation and CLEAR split, one batch per query: the query's vector as its
    evaluation encoded it, the λ its evaluation ranked it with (``hybrid.make``, cross-fitted: its half's)."""
    by_query: dict[tuple[str, str], list[FailureCard]] = {}
    for c in cards:
        by_query.setdefault((c.query_id, c.query), []).append(c)
    if not by_query:
        return
    h = make(ws, "clear", split)
    for (qid, text), group in by_query.items():
        rows = [ws.doc_row[c.doc_id] for c in group]
        qvec = ws.dense.encode_queries({qid: text})[0]
        dense = explain_dense(ws, text, rows, qvec)
        lam = h.lam_by_query.get(qid, h.lam)
        hybrid = explain_split(ws, h, lam, text, rows, qvec) if lam is not None else {}
        for c, r in zip(group, rows):
            c.dense_why, c.hybrid_why = dense[r], hybrid.get(r)


def _fill_sparse_terms(ws: Workspace, cards: list[FailureCard]) -> None:
    """Each card's learned sparse terms: what of the query's vector the document's vector shares."""
    queries = list(dict.fromkeys(c.query for c in cards))
    vectors = dict(zip(queries, ws.sparse.model.encode(queries, query=True)))
    for c in cards:
        row = ws.doc_row[c.doc_id]
        c.sparse_terms = ws.sparse.explain(vectors[c.query], row, ws.corpus.texts[row])
