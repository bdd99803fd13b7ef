"""Side-by-side comparison of systems for one query: what the Search view and the ``search`` API show.

For each system: its top-k documents with score, graded label (when the query is labelled), the
document's rank in every other system's list (searched to ``depth``), and which query terms it
matches exactly (after tokenization) — the raw material for "why did this rank here".
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .run import ranks
from .workspace import Workspace

DEFAULT_SYSTEMS = ("bm25", "dense", "hybrid")


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


@dataclass
class SideBySide:
    query: str
    query_id: str | None
    split: str | None
    terms: list[str]  # the query's stemmed terms
    systems: dict[str, list[Hit]] = field(default_factory=dict)
    relevant: list[dict] = field(default_factory=list)  # every labelled doc with its rank per system
    per_query_metrics: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


def find_query(ws: Workspace, text: str) -> tuple[str | None, str | None]:
    """(query id, split) of a labelled query with exactly this text, else (None, None)."""
    wanted = text.strip()
    for qid, qtext in ws.dataset.queries.items():
        if qtext.strip() == wanted:
            for split, qrels in ws.dataset.qrels.items():
                if qid in qrels:
                    return qid, split
            return qid, None
    return None, None


def side_by_side(ws: Workspace, text: str, k: int = 10, depth: int = 1000,
                 systems=DEFAULT_SYSTEMS) -> SideBySide:
    text = text.strip()
    if not text:
        raise ValueError("type a query first")
    qid, split = find_query(ws, text)
    lam_split = split if split and split != "train" else ws.dataset.default_split()
    full = ws.search_one(text, systems=systems, k=depth, eval_split=lam_split)
    rank_maps = {s: ranks(hits) for s, hits in full.items()}
    labels = ws.dataset.qrels.get(split, {}).get(qid, {}) if qid else {}
    terms = list(dict.fromkeys(ws.tokenizer(text)))
    result = SideBySide(text, qid, split, terms)
    for s, hits in full.items():
        rows = []
        for rank, (doc_id, score) in enumerate(hits[:k], 1):
            doc = ws.dataset.docs[doc_id]
            contributions = ws.bm25.explain(text, ws.doc_row[doc_id])
            matched = {c.term for c in contributions if c.tf > 0}
            rows.append(Hit(rank, doc_id, doc.title, doc.text, score, labels.get(doc_id),
                            {o: rank_maps[o].get(doc_id) for o in systems},
                            [t for t in terms if t in matched], [t for t in terms if t not in matched],
                            [(c.term, round(c.score, 4)) for c in contributions if c.score > 0]))
        result.systems[s] = rows
    for doc_id, label in sorted(labels.items(), key=lambda kv: -kv[1]):
        if doc_id in ws.dataset.docs:
            result.relevant.append({"doc_id": doc_id, "title": ws.dataset.docs[doc_id].title, "label": label,
                                    "ranks": {s: rank_maps[s].get(doc_id) for s in systems}})
    if qid and split:
        from .evaluate import evaluate_run

        for s in systems:
            ev = evaluate_run({qid: full[s]}, {qid: labels}, metrics=("ndcg@10", "recall@100", "mrr@10"))
            result.per_query_metrics[s] = ev.mean
    return result
