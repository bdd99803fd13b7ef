"""The failure gallery: which labelled queries fail, under which system, and why (no Gradio here).

Implements DESIGN.md, "Failure analysis". For each query of a split with at least one relevant
label (queries without one are skipped), from the workspace's cached depth-1000 runs of BM25,
dense and the CLEAR hybrid (``Workspace.run``). Notation: R_s(d) is the 1-based rank of document
d in system s's list, ∞ when s did not retrieve d within the depth (shown as "—"); *relevant*
means a graded label > 0 (the evaluation's convention), *non-relevant* a label ≤ 0 or no label
(the TREC convention: unjudged counts as not relevant; the card says which). Thresholds:
``top`` (default 10), ``low`` (100), ``fp_top`` (3).

* **vocabulary mismatch** — a relevant d with R_dense(d) ≤ top and R_bm25(d) > low: exact
  matching misses a document the semantic model finds; its card lists the query terms with no
  exact match in it (papers/clear-residual-embeddings.md §5.3, Table 3: "weather" vs "sunny,
  rain, wind", BM25 989 → 10).
* **semantic false positive** — a non-relevant d with R_dense(d) ≤ fp_top and R_bm25(d) > low:
  topically related, wrong, and only the dense model brings it in (CLEAR §5.3, Table 4).
* **lexical trap** — BM25's first document is non-relevant and R_dense(d) > top: it shares the
  query's words, not its meaning (CLEAR §5.3: BM25's false positives "share surface text
  similarity with the query").
* **both fail** — neither BM25's nor dense's top ``top`` holds a relevant document.
* **fixed by hybrid** — both fail, and the hybrid's top ``top`` holds a relevant document
  (a subset of *both fail*: the interpolation λ·s_lex + s_emb, CLEAR §3.4 eq. 8, rescues it).
* **fixed by fine-tuning** / **broken by fine-tuning** (only with a fine-tuned workspace over the
  same data): the base encoder's ``tuned_system`` ("dense" or "hybrid") top ``top`` holds no
  relevant document and the fine-tuned one's does / the other way round.

A query may fall in several categories; ``counts`` counts queries per category. Each (category,
query) gets one card, for one document:

* vocabulary mismatch, semantic false positive: the qualifying document with the largest gap
  R_bm25(d) − R_dense(d);
* lexical trap: BM25's first document; gap R_dense(d) − 1;
* both fail: the relevant document with the best min(R_bm25(d), R_dense(d)) (the nearest miss);
  gap that minimum;
* fixed by hybrid: the relevant document the hybrid ranks best; gap min(R_bm25, R_dense) − R_hybrid;
* fixed by fine-tuning: the relevant document the fine-tuned system ranks best; gap
  R_base(d) − R_tuned(d); broken by fine-tuning: the one the base system ranks best; gap
  R_tuned(d) − R_base(d);

with ∞ counted as depth + 1. Cards are ordered by gap, largest first, then by query id and
document id (ties between documents of one query: higher label first, then document id).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import NamedTuple

import numpy as np

from .run import rank_maps
from .workspace import EVAL_DEPTH, Workspace

BASE_SYSTEMS = ("bm25", "dense", "hybrid")
TUNED_SYSTEMS = ("tuned_dense", "tuned_hybrid")  # the fine-tuned workspace's dense and hybrid
SYSTEM_NAMES = {"bm25": "BM25", "dense": "dense", "hybrid": "hybrid",
                "tuned_dense": "fine-tuned dense", "tuned_hybrid": "fine-tuned hybrid"}
NOT_RETRIEVED = "—"

CATEGORIES = ("vocabulary_mismatch", "semantic_false_positive", "lexical_trap", "both_fail",
              "fixed_by_hybrid", "fixed_by_finetuning", "broken_by_finetuning")
FINETUNING_CATEGORIES = ("fixed_by_finetuning", "broken_by_finetuning")
CATEGORY_LABELS = {
    "vocabulary_mismatch": "Vocabulary mismatch",
    "semantic_false_positive": "Semantic false positive",
    "lexical_trap": "Lexical trap",
    "both_fail": "Both fail",
    "fixed_by_hybrid": "Fixed by hybrid",
    "fixed_by_finetuning": "Fixed by fine-tuning",
    "broken_by_finetuning": "Broken by fine-tuning",
}
# filled with Thresholds' fields by ``describe``
CATEGORY_DEFINITIONS = {
    "vocabulary_mismatch": "a relevant document dense ranks in its top {top} that BM25 ranks below "
                           "{low} or does not retrieve (CLEAR Table 3)",
    "semantic_false_positive": "a non-relevant or unjudged document dense ranks in its top {fp_top} that "
                               "BM25 ranks below {low} or does not retrieve (CLEAR Table 4)",
    "lexical_trap": "BM25's first document is not relevant and dense ranks it below {top}: shared words, "
                    "wrong meaning",
    "both_fail": "neither BM25's nor dense's top {top} holds a relevant document",
    "fixed_by_hybrid": "both fail, but the hybrid's top {top} holds a relevant document",
    "fixed_by_finetuning": "the base {tuned_system}'s top {top} holds no relevant document, the "
                           "fine-tuned one's does",
    "broken_by_finetuning": "the base {tuned_system}'s top {top} holds a relevant document, the "
                            "fine-tuned one's does not",
}


@dataclass(frozen=True)
class Thresholds:
    top: int = 10
    low: int = 100
    fp_top: int = 3
    depth: int = EVAL_DEPTH  # the runs' depth: a document beyond it counts as rank depth + 1
    tuned_system: str = "dense"  # what the fine-tuning categories compare: "dense" or "hybrid"


def describe(category: str, thresholds: Thresholds) -> str:
    """The category's definition with the thresholds filled in."""
    return CATEGORY_DEFINITIONS[category].format(**asdict(thresholds))


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
    gap: int  # how dramatic (module docstring); cards are ordered by it
    matched_terms: list[str]  # query terms (stems) the document contains
    missing_terms: list[str]  # query terms it lacks
    bm25_terms: list[tuple[str, float]]  # per matched term, its BM25 contribution (sum = BM25 score)
    term_words: dict[str, str]  # query term (stem) -> the query word(s) it came from, for display
    dense_similarity: float  # s_emb(q, d) under the workspace's encoder (cosine when normalized)
    tuned_similarity: float | None = None  # the same under the fine-tuned encoder, when given

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Gallery:
    dataset: str
    split: str
    systems: list[str]  # the systems every card gives a rank for
    thresholds: dict
    counts: dict[str, int]  # category -> number of queries in it (every evaluated category)
    cards: dict[str, list[FailureCard]]  # category -> cards, most dramatic first (capped)
    query_categories: dict[str, list[str]]  # query id -> its categories (analysed queries only)
    skipped: list[str] = field(default_factory=list)  # queries with no relevant label

    @property
    def categories(self) -> list[str]:
        return list(self.counts)

    def to_json(self) -> dict:
        return asdict(self)


# ---- per-query view of the runs ------------------------------------------------------------
@dataclass
class _Query:
    qid: str
    labels: dict[str, int]
    ranks: dict[str, dict[str, int]]  # system -> doc id -> rank
    first: dict[str, str | None]  # system -> its first document
    depth: int

    def rank(self, system: str, doc: str) -> int:
        """R_s(d), depth + 1 when not retrieved."""
        return self.ranks[system].get(doc, self.depth + 1)

    def is_relevant(self, doc: str) -> bool:
        return self.labels.get(doc, 0) > 0

    @property
    def relevant(self) -> list[str]:
        return sorted(d for d, v in self.labels.items() if v > 0)

    def finds(self, system: str, k: int) -> bool:
        """Whether the system's top ``k`` holds a relevant document."""
        return any(self.rank(system, d) <= k for d in self.relevant)

    def gap(self, category: str, doc: str, tuned_system: str) -> int:
        r = lambda s: self.rank(s, doc)  # noqa: E731
        if category in ("vocabulary_mismatch", "semantic_false_positive"):
            return r("bm25") - r("dense")
        if category == "lexical_trap":
            return r("dense") - r("bm25")
        if category == "both_fail":
            return min(r("bm25"), r("dense"))
        if category == "fixed_by_hybrid":
            return min(r("bm25"), r("dense")) - r("hybrid")
        base, tuned = tuned_system, f"tuned_{tuned_system}"
        return r(base) - r(tuned) if category == "fixed_by_finetuning" else r(tuned) - r(base)

    def _order(self, doc: str) -> tuple:
        label = self.labels.get(doc)
        return (-(label if label is not None else -1), doc)

    def most_dramatic(self, docs, category: str, tuned_system: str) -> str | None:
        return min(docs, key=lambda d: (-self.gap(category, d, tuned_system), *self._order(d)), default=None)

    def best_ranked(self, docs, key: Callable[[str], int]) -> str | None:
        return min(docs, key=lambda d: (key(d), *self._order(d)), default=None)


# ---- the categories: each returns the card's document, or None -----------------------------
def _vocabulary_mismatch(q: _Query, t: Thresholds) -> str | None:
    docs = [d for d in q.relevant if q.rank("dense", d) <= t.top and q.rank("bm25", d) > t.low]
    return q.most_dramatic(docs, "vocabulary_mismatch", t.tuned_system)


def _semantic_false_positive(q: _Query, t: Thresholds) -> str | None:
    docs = [d for d, r in q.ranks["dense"].items()
            if r <= t.fp_top and not q.is_relevant(d) and q.rank("bm25", d) > t.low]
    return q.most_dramatic(docs, "semantic_false_positive", t.tuned_system)


def _lexical_trap(q: _Query, t: Thresholds) -> str | None:
    first = q.first["bm25"]
    return first if first is not None and not q.is_relevant(first) and q.rank("dense", first) > t.top else None


def _both_fail(q: _Query, t: Thresholds) -> str | None:
    if q.finds("bm25", t.top) or q.finds("dense", t.top):
        return None
    return q.best_ranked(q.relevant, lambda d: min(q.rank("bm25", d), q.rank("dense", d)))


def _fixed_by_hybrid(q: _Query, t: Thresholds) -> str | None:
    if _both_fail(q, t) is None or not q.finds("hybrid", t.top):
        return None
    return q.best_ranked(q.relevant, lambda d: q.rank("hybrid", d))


def _fixed_by_finetuning(q: _Query, t: Thresholds) -> str | None:
    base, tuned = t.tuned_system, f"tuned_{t.tuned_system}"
    if q.finds(base, t.top) or not q.finds(tuned, t.top):
        return None
    return q.best_ranked(q.relevant, lambda d: q.rank(tuned, d))


def _broken_by_finetuning(q: _Query, t: Thresholds) -> str | None:
    base, tuned = t.tuned_system, f"tuned_{t.tuned_system}"
    if not q.finds(base, t.top) or q.finds(tuned, t.top):
        return None
    return q.best_ranked(q.relevant, lambda d: q.rank(base, d))


_CLASSIFIERS = {
    "vocabulary_mismatch": _vocabulary_mismatch,
    "semantic_false_positive": _semantic_false_positive,
    "lexical_trap": _lexical_trap,
    "both_fail": _both_fail,
    "fixed_by_hybrid": _fixed_by_hybrid,
    "fixed_by_finetuning": _fixed_by_finetuning,
    "broken_by_finetuning": _broken_by_finetuning,
}


def _headline_systems(category: str, tuned_system: str) -> tuple[tuple[str, ...], str | None]:
    """(the systems the headline starts from, the one it moves to)."""
    if category in ("vocabulary_mismatch", "semantic_false_positive", "lexical_trap"):
        return ("bm25",), "dense"
    if category == "both_fail":
        return ("bm25", "dense"), None
    if category == "fixed_by_hybrid":
        return ("bm25", "dense"), "hybrid"
    return (tuned_system,), f"tuned_{tuned_system}"


def rank_text(rank: int | None) -> str:
    return NOT_RETRIEVED if rank is None else str(rank)


def headline(category: str, card_ranks: dict[str, int | None], tuned_system: str = "dense") -> str:
    """"BM25 989 → dense 3", "BM25 — · dense 52 → hybrid 4", "BM25 37 · dense 52" (both fail)."""
    sources, target = _headline_systems(category, tuned_system)
    text = " · ".join(f"{SYSTEM_NAMES[s]} {rank_text(card_ranks[s])}" for s in sources)
    return text if target is None else f"{text} → {SYSTEM_NAMES[target]} {rank_text(card_ranks[target])}"


# ---- evidence ------------------------------------------------------------------------------
class TermEvidence(NamedTuple):
    matched: list[str]  # query terms (stems) the document contains, in query order
    missing: list[str]  # query terms it lacks
    contributions: list[tuple[str, float]]  # (matched term, its BM25 contribution)
    words: dict[str, str]  # term -> the query word(s) it came from ("fridg" -> "fridge")


def term_evidence(ws: Workspace, query: str, doc_id: str) -> TermEvidence:
    """Which query terms a document matches and lacks, and each matched term's BM25 contribution.

    Terms are the query's distinct tokens (stems) in query order; the contributions come from
    ``BM25Index.explain`` (lexical.py's formula) and sum to the document's BM25 score.
    """
    contributions = ws.bm25.explain(query, ws.doc_row[doc_id])
    matched = {c.term for c in contributions if c.tf > 0}
    terms = list(dict.fromkeys(ws.tokenizer(query)))
    return TermEvidence([t for t in terms if t in matched], [t for t in terms if t not in matched],
                        [(c.term, c.score) for c in contributions if c.tf > 0],
                        {c.term: "/".join(c.query_words) or c.term for c in contributions})


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
def _rank_maps(ws: Workspace, tuned_ws: Workspace | None, split: str) -> dict[str, dict[str, dict[str, int]]]:
    """system -> query id -> doc id -> rank, from the cached runs."""
    runs = {s: ws.run(s, split) for s in BASE_SYSTEMS}
    if tuned_ws is not None:
        runs.update({f"tuned_{s}": tuned_ws.run(s, split) for s in ("dense", "hybrid")})
    return rank_maps(runs)


def _queries(ws: Workspace, split: str, maps, depth: int) -> tuple[list[_Query], list[str]]:
    qrels = ws.dataset.qrels[split]
    analysed, skipped = [], []
    for qid in ws.dataset.split_queries(split):
        labels = qrels.get(qid, {})
        if not any(v > 0 for v in labels.values()):
            skipped.append(qid)
            continue
        per_system = {s: m.get(qid, {}) for s, m in maps.items()}
        first = {s: next(iter(r), None) for s, r in per_system.items()}  # ranks() keeps list order
        analysed.append(_Query(qid, labels, per_system, first, depth))
    return analysed, skipped


def _card(ws: Workspace, q: _Query, category: str, doc_id: str, t: Thresholds, systems) -> FailureCard:
    doc = ws.dataset.docs[doc_id]
    text = ws.dataset.queries[q.qid]
    card_ranks = {s: q.ranks[s].get(doc_id) for s in systems}
    ev = term_evidence(ws, text, doc_id)
    return FailureCard(category, q.qid, text, doc_id, doc.title, doc.text, q.labels.get(doc_id), card_ranks,
                       headline(category, card_ranks, t.tuned_system), q.gap(category, doc_id, t.tuned_system),
                       ev.matched, ev.missing, ev.contributions, ev.words, dense_similarity=float("nan"))


def _fill_similarities(ws: Workspace, tuned_ws: Workspace | None, cards: list[FailureCard]) -> None:
    pairs = [(c.query_id, c.query, c.doc_id) for c in cards]
    for c, s in zip(cards, dense_similarities(ws, pairs)):
        c.dense_similarity = s
    if tuned_ws is not None:
        for c, s in zip(cards, dense_similarities(tuned_ws, pairs)):
            c.tuned_similarity = s


def failure_gallery(ws: Workspace, split: str, tuned_ws: Workspace | None = None, top: int = 10,
                    low: int = 100, max_cards_per_category: int = 12, fp_top: int = 3,
                    tuned_system: str = "dense") -> Gallery:
    """Classify every labelled query of ``split`` (module docstring) and build the cards.

    ``tuned_ws``: the same data set with a fine-tuned encoder (``ws.with_model(encoder)``); adds
    the fine-tuning categories and the fine-tuned dense and hybrid ranks. ``tuned_system``:
    "dense" or "hybrid", what those categories compare.
    """
    if split not in ws.dataset.qrels:
        raise ValueError(f"data set {ws.dataset.name!r} has no labels for split {split!r} "
                         f"(it has: {', '.join(ws.dataset.splits) or 'none'})")
    if tuned_ws is not None and tuned_ws.dataset.content_hash != ws.dataset.content_hash:
        raise ValueError("the fine-tuned workspace must hold the same data set")
    if tuned_system not in ("dense", "hybrid"):
        raise ValueError(f"tuned_system must be 'dense' or 'hybrid', not {tuned_system!r}")
    t = Thresholds(top, low, fp_top, EVAL_DEPTH, tuned_system)
    systems = list(BASE_SYSTEMS) + (list(TUNED_SYSTEMS) if tuned_ws is not None else [])
    categories = [c for c in CATEGORIES if tuned_ws is not None or c not in FINETUNING_CATEGORIES]
    queries, skipped = _queries(ws, split, _rank_maps(ws, tuned_ws, split), t.depth)
    picked: dict[str, list[tuple[_Query, str]]] = {c: [] for c in categories}
    query_categories: dict[str, list[str]] = {}
    for q in queries:
        query_categories[q.qid] = []
        for c in categories:
            doc = _CLASSIFIERS[c](q, t)
            if doc is not None:
                picked[c].append((q, doc))
                query_categories[q.qid].append(c)
    cards: dict[str, list[FailureCard]] = {}
    for c, found in picked.items():
        found.sort(key=lambda qd: (-qd[0].gap(c, qd[1], tuned_system), qd[0].qid, qd[1]))
        cards[c] = [_card(ws, q, c, doc, t, systems) for q, doc in found[:max_cards_per_category]]
    _fill_similarities(ws, tuned_ws, [card for cs in cards.values() for card in cs])
    return Gallery(ws.dataset.name, split, systems, asdict(t), {c: len(picked[c]) for c in categories},
                   cards, query_categories, skipped)
