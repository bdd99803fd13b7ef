"""One query, every system side by side: what the Search view and the ``search`` API show.

For each system: its top-k documents with score, graded label (when the query is labelled), the
document's rank in every other system's list (searched to ``depth``), which query terms it matches
exactly (after tokenization) and each matched term's BM25 contribution — the raw material for "why
did this rank here".

One pass (``Workspace.search_one``): the query is tokenized, BM25-scored, encoded and searched in
FAISS once, each distinct document on show is explained once, and nothing is written to the store.
A labelled query is given by id; free text that equals a labelled query's text is looked up in a
dictionary (``Dataset.find_query``), so it gets its labels too.

It reads a workspace, so it sits beside the workspace, above the systems it lines up (``.importlinter``'s
layers): a system imports no view of itself.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from retrieval.data.run import ranks
from retrieval.evaluation.measures import evaluate_run
from retrieval.evaluation.metrics import SUMMARY_METRICS
from retrieval.index.terms import TermScore
from retrieval.judging.judgments import disagreement
from retrieval.systems import BASE_SYSTEMS, Probe
from retrieval.systems.dense_why import DenseWhy
from retrieval.systems.hybrid_why import HybridWhy
from retrieval.workspace import Workspace


@dataclass
class Hit:
    rank: int
    doc_id: str
    title: str
    text: str
    score: float
    label: int | None  # graded relevance label; None when unjudged
    ranks: dict[str, int | None]  # system -> rank within depth (None: not retrieved)
    matched_terms: list[str]  # query terms (stems) the document contains
    missing_terms: list[str]  # query terms it lacks
    bm25_terms: list[tuple[str, float]]  # per-term BM25 contributions (sum = its BM25 score)
    system_terms: list[TermScore] = field(default_factory=list)  # the ranking system's own terms, each of its kind
    score_why: DenseWhy | HybridWhy | None = None  # what carries a dense or fused score (``System.explain_score``)


@dataclass
class SideBySide:
    query: str
    query_id: str | None
    split: str | None
    terms: list[str]  # the query's stemmed terms
    systems: dict[str, list[Hit]] = field(default_factory=dict)
    relevant: list[dict[str, Any]] = field(default_factory=list)  # every labelled doc with its rank per system
    per_query_metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    disagreement: float = 0.0  # 1 − mean pairwise rank-biased overlap of the systems' top k (judgments)
    waiting: list[str] = field(default_factory=list)  # systems asked for whose index is still being built
    encoding: dict[str, Any] | None = None  # then: where that build stands (``EncodingStatus.to_json``)
    term_words: dict[str, str] = field(default_factory=dict)  # term (stem) -> the query word(s) it came from, as typed

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def side_by_side(ws: Workspace, text: str = "", k: int = 10, depth: int = 1000, systems: Sequence[str] = BASE_SYSTEMS,
                 query_id: str | None = None) -> SideBySide:
    """Every system's top ``k`` for ``text``, or for the data set's query ``query_id``. Systems whose
    index is still being built in the background are listed in ``waiting``, not searched. Every hit
    carries BM25's per-term contributions and, where its system has its own (SPLADE's expansion
    terms), those too; a dense or CLEAR hit, what carries its score (``System.explain_score``: the query
    words and passages, the λ split), computed for the top ``k`` in one batch per system."""
    qid: str | None
    if query_id is not None:
        if query_id not in ws.dataset.queries:
            raise KeyError(f"no query {query_id!r} in data set {ws.dataset.name!r}")
        text, qid, split = ws.dataset.queries[query_id], query_id, ws.dataset.query_split(query_id)
    else:
        qid, split = ws.dataset.find_query(text)
    text = text.strip()
    if not text:
        raise ValueError("type a query first")
    waiting = ws.pending(systems)
    systems = [s for s in systems if s not in waiting]
    lam_split = split if split and split != "train" else ws.dataset.default_split()
    probe = Probe(ws, text, max(depth, ws.depth), qid)
    full = ws.search_one(text, systems=systems, k=depth, eval_split=lam_split, query_id=qid, probe=probe)
    rank_maps = {s: ranks(hits) for s, hits in full.items()}
    labels = ws.dataset.qrels.get(split, {}).get(qid, {}) if qid and split else {}
    query_terms = ws.bm25.query_terms(text)
    terms = query_terms.names
    result = SideBySide(text, qid, split, terms, term_words=query_terms.term_words,
                        disagreement=disagreement({s: {"q": hits[:k]} for s, hits in full.items()}, "q", k),
                        waiting=waiting,
                        encoding=ws.encoding.to_json() if ws.encoding is not None
                        and any(ws.system(s).needs.vectors for s in waiting) else None)
    evidence: dict[str, tuple[list[str], list[str], list[tuple[str, float]]]] = {}
    for s, hits in full.items():
        rows, system = [], ws.system(s)
        whys = system.explain_score(ws, probe, [ws.doc_row[d] for d, _ in hits[:k]], lam_split) or {}
        for rank, (doc_id, score) in enumerate(hits[:k], 1):
            if doc_id not in evidence:  # each distinct document explained once
                contributions = ws.bm25.explain(query_terms, ws.doc_row[doc_id])
                matched = {c.term for c in contributions if c.tf > 0}
                evidence[doc_id] = ([t for t in terms if t in matched], [t for t in terms if t not in matched],
                                    [(c.term, round(c.score, 4)) for c in contributions if c.score > 0])
            doc = ws.dataset.docs[doc_id]
            own = system.explain(ws, probe, ws.doc_row[doc_id]) or []  # e.g. SPLADE's term contributions
            rows.append(Hit(rank, doc_id, doc.title, doc.text, score, labels.get(doc_id),
                            {o: rank_maps[o].get(doc_id) for o in systems}, *evidence[doc_id], own,
                            whys.get(ws.doc_row[doc_id])))
        result.systems[s] = rows
    for doc_id, label in sorted(labels.items(), key=lambda kv: -kv[1]):
        if doc_id in ws.dataset.docs:
            result.relevant.append({"doc_id": doc_id, "title": ws.dataset.docs[doc_id].title, "label": label,
                                    "ranks": {s: rank_maps[s].get(doc_id) for s in systems}})
    if qid and split:
        for s in systems:
            result.per_query_metrics[s] = evaluate_run({qid: full[s]}, {qid: labels}, metrics=SUMMARY_METRICS).mean
    return result
