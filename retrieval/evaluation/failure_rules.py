"""The failure rules: which labelled queries fail, under which system, and why — a pure function of
relevance labels and ranks (``classify``); ``retrieval.evaluation.failure_gallery`` applies it to a workspace's runs
and builds the gallery's cards.

For each query with at least one relevant label (queries without one are skipped), from the ranks
of BM25, dense and the CLEAR hybrid (and, optionally, a fine-tuned encoder's dense and hybrid).
Notation: R_s(d) is the 1-based rank of document d in system s's list, ∞ when s did not retrieve d
within the depth (shown as "—"); *relevant* means a graded label > 0 (the evaluation's convention),
*non-relevant* a label ≤ 0 or no label (the TREC convention: unjudged counts as not relevant; the
card says which) — except on a query whose labels came from judging a pool in the app (``pooled``,
``coverage.from_judging``): there a document with no label is *unjudged*, not non-relevant (nobody
looked at it: a system whose lists were not pooled meets many), and it makes no false positive and
no lexical trap but the category *unjudged at the top*. Thresholds:
``top`` (default 10), ``low`` (100), ``fp_top`` (3).

* **vocabulary mismatch** — a relevant d with R_dense(d) ≤ top and R_bm25(d) > low: exact
  matching misses a document the semantic model finds; its card lists the query terms with no
  exact match in it (Gao et al., "Complement Lexical Retrieval Model with Semantic Residual
  Embeddings", ECIR 2021, arXiv:2004.13969, §5.3, Table 3: "weather" vs "sunny,
  rain, wind", BM25 989 → 10).
* **exact-match miss** — the mirror image: a relevant d with R_bm25(d) ≤ top and R_dense(d) > low.
  An exact token the query and the document share (a product or error code, a rare name, a
  number, an acronym) finds it, while the embedding, which spreads such tokens over word pieces,
  does not (CLEAR §1: lexical retrieval's exact matching is what a dense model lacks).
* **semantic false positive** — a non-relevant d with R_dense(d) ≤ fp_top and R_bm25(d) > low:
  topically related, wrong, and only the dense model brings it in (CLEAR §5.3, Table 4).
* **lexical trap** — BM25's first document is non-relevant and R_dense(d) > top: it shares the
  query's words, not its meaning (CLEAR §5.3: BM25's false positives "share surface text
  similarity with the query").
* **bridged by expansion** (only when the learned sparse system's ranks are given) — a relevant d
  with R_splade(d) ≤ top and R_bm25(d) > low: the vocabulary mismatch exact matching suffers,
  bridged by the terms a learned sparse model adds to the query and the document (Formal,
  Piwowarski, Clinchant, "SPLADE: Sparse Lexical and Expansion Model for First Stage Ranking",
  SIGIR 2021, §3: expansion), without an embedding; its card shows the terms that scored it.
* **unjudged at the top** (only on queries judged in the app, ``pooled``) — a document with no
  label that the semantic-false-positive or the lexical-trap rule would otherwise name (dense's
  top ``fp_top`` and R_bm25(d) > low, or BM25's first and R_dense(d) > top): not a failure until
  someone judges it; its card asks for that, and it is counted apart from the judged non-relevant.
* **both fail** — neither BM25's nor dense's top ``top`` holds a relevant document.
* **fixed by hybrid** — both fail, and the hybrid's top ``top`` holds a relevant document
  (a subset of *both fail*: the interpolation λ·s_lex + s_emb, CLEAR §3.4 eq. 8, rescues it).
* **B finds, A misses** / **A finds, B misses** (only for a chosen pair of systems A, B, e.g. BM25
  and an imported run of the analyst's own system): a relevant d with R_B(d) ≤ top and
  R_A(d) > low, and the reverse — vocabulary mismatch and exact-match miss for any two systems.
* **fixed by fine-tuning** / **broken by fine-tuning** (only with a fine-tuned workspace over the
  same data): the base encoder's ``tuned_system`` ("dense" or "hybrid") top ``top`` holds no
  relevant document and the fine-tuned one's does / the other way round.

A query may fall in several categories; ``counts`` counts queries per category. Each (category,
query) gets one card, for one document:

* vocabulary mismatch, semantic false positive: the qualifying document with the largest gap
  R_bm25(d) − R_dense(d); unjudged at the top: the largest |R_bm25(d) − R_dense(d)|;
  bridged by expansion: the largest R_bm25(d) − R_splade(d);
  exact-match miss: the one with the largest R_dense(d) − R_bm25(d);
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

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

# the runs the rules read, by the keys ``retrieval.systems`` registers them under (named here, so that the
# rules import no system: tests/retrieval/test_layering.py checks the two agree)
BM25, DENSE, HYBRID, SPLADE = "bm25", "dense", "hybrid", "splade"
TUNED_OF = {DENSE: "tuned_dense", HYBRID: "tuned_hybrid"}  # a base system -> the fine-tuned encoder's same one
ENCODER_SYSTEMS = tuple(TUNED_OF)  # the systems an encoder changes

NOT_RETRIEVED = "—"
CATEGORIES = ("vocabulary_mismatch", "exact_match_miss", "semantic_false_positive", "lexical_trap",
              "bridged_by_expansion", "both_fail", "fixed_by_hybrid", "fixed_by_finetuning", "broken_by_finetuning")
UNJUDGED_CATEGORIES = ("unjudged_at_top",)  # after lexical_trap, when some queries' labels came from judging in the app
SPARSE_CATEGORIES = ("bridged_by_expansion",)  # evaluated when the learned sparse system's ranks are given
FINETUNING_CATEGORIES = ("fixed_by_finetuning", "broken_by_finetuning")
PAIR_CATEGORIES = ("pair_b_finds", "pair_a_finds")  # for a chosen pair (A, B): B finds what A misses; the reverse
DEPTH = 1000  # the runs' depth (``Workspace``'s evaluation depth): a document beyond it ranks depth + 1


@dataclass(frozen=True)
class Thresholds:
    top: int = 10
    low: int = 100
    fp_top: int = 3
    depth: int = DEPTH  # the runs' depth: a document beyond it counts as rank depth + 1
    tuned_system: str = DENSE  # what the fine-tuning categories compare: "dense" or "hybrid"

    def __post_init__(self) -> None:
        if self.tuned_system not in ENCODER_SYSTEMS:
            raise ValueError(f"tuned_system must be 'dense' or 'hybrid', not {self.tuned_system!r}")



@dataclass
class QueryRanks:
    qid: str
    labels: dict[str, int]
    ranks: dict[str, dict[str, int]]  # system -> doc id -> rank
    first: dict[str, str | None]  # system -> its first document
    depth: int
    pair: tuple[str, str] | None = None  # (A, B) for the pair categories
    pooled: bool = False  # labels from judging a pool in the app: no label means unjudged, not non-relevant

    def rank(self, system: str, doc: str) -> int:
        """R_s(d), depth + 1 when not retrieved."""
        return self.ranks[system].get(doc, self.depth + 1)

    def is_relevant(self, doc: str) -> bool:
        return self.labels.get(doc, 0) > 0

    def is_unjudged(self, doc: str) -> bool:
        """No label on a query judged in the app: nobody looked at it (module docstring)."""
        return self.pooled and doc not in self.labels

    def is_non_relevant(self, doc: str) -> bool:
        """Judged not relevant; on a query not judged in the app, also any unlabelled document."""
        return not self.is_relevant(doc) and not self.is_unjudged(doc)

    @property
    def relevant(self) -> list[str]:
        return sorted(d for d, v in self.labels.items() if v > 0)

    def finds(self, system: str, k: int) -> bool:
        """Whether the system's top ``k`` holds a relevant document."""
        return any(self.rank(system, d) <= k for d in self.relevant)

    def gap(self, category: str, doc: str, tuned_system: str) -> int:
        def r(system: str) -> int:
            return self.rank(system, doc)

        if category in ("vocabulary_mismatch", "semantic_false_positive"):
            return r(BM25) - r(DENSE)
        if category == "unjudged_at_top":
            return abs(r(BM25) - r(DENSE))
        if category == "bridged_by_expansion":
            return r(BM25) - r(SPLADE)
        if category == "exact_match_miss":
            return r(DENSE) - r(BM25)
        if category in PAIR_CATEGORIES:
            missed_by, found_by = _pair_order(category, self.pair)
            return r(missed_by) - r(found_by)
        if category == "lexical_trap":
            return r(DENSE) - r(BM25)
        if category == "both_fail":
            return min(r(BM25), r(DENSE))
        if category == "fixed_by_hybrid":
            return min(r(BM25), r(DENSE)) - r(HYBRID)
        base, tuned = tuned_system, TUNED_OF[tuned_system]
        return r(base) - r(tuned) if category == "fixed_by_finetuning" else r(tuned) - r(base)

    def _order(self, doc: str) -> tuple[int, str]:
        label = self.labels.get(doc)
        return (-(label if label is not None else -1), doc)

    def most_dramatic(self, docs: Iterable[str], category: str, tuned_system: str) -> str | None:
        return min(docs, key=lambda d: (-self.gap(category, d, tuned_system), *self._order(d)), default=None)

    def best_ranked(self, docs: Iterable[str], key: Callable[[str], int]) -> str | None:
        return min(docs, key=lambda d: (key(d), *self._order(d)), default=None)


# ---- the categories: each returns the card's document, or None -----------------------------
def _vocabulary_mismatch(q: QueryRanks, t: Thresholds) -> str | None:
    docs = [d for d in q.relevant if q.rank(DENSE, d) <= t.top and q.rank(BM25, d) > t.low]
    return q.most_dramatic(docs, "vocabulary_mismatch", t.tuned_system)


def _exact_match_miss(q: QueryRanks, t: Thresholds) -> str | None:
    docs = [d for d in q.relevant if q.rank(BM25, d) <= t.top and q.rank(DENSE, d) > t.low]
    return q.most_dramatic(docs, "exact_match_miss", t.tuned_system)


def _pair_order(category: str, pair: tuple[str, str] | None) -> tuple[str, str]:
    """(the system that misses, the system that finds) of a pair category."""
    if pair is None:
        raise ValueError(f"the category {category} compares a pair of systems, and none was given")
    a, b = pair
    return (a, b) if category == "pair_b_finds" else (b, a)


def _pair_finds(category: str) -> Callable[[QueryRanks, Thresholds], str | None]:
    def rule(q: QueryRanks, t: Thresholds) -> str | None:
        missed_by, found_by = _pair_order(category, q.pair)
        docs = [d for d in q.relevant if q.rank(found_by, d) <= t.top and q.rank(missed_by, d) > t.low]
        return q.most_dramatic(docs, category, t.tuned_system)
    return rule


def _bridged_by_expansion(q: QueryRanks, t: Thresholds) -> str | None:
    docs = [d for d in q.relevant if q.rank(SPLADE, d) <= t.top and q.rank(BM25, d) > t.low]
    return q.most_dramatic(docs, "bridged_by_expansion", t.tuned_system)


def _semantic_false_positive(q: QueryRanks, t: Thresholds) -> str | None:
    docs = [d for d, r in q.ranks[DENSE].items()
            if r <= t.fp_top and q.is_non_relevant(d) and q.rank(BM25, d) > t.low]
    return q.most_dramatic(docs, "semantic_false_positive", t.tuned_system)


def _lexical_trap(q: QueryRanks, t: Thresholds) -> str | None:
    first = q.first[BM25]
    return first if first is not None and q.is_non_relevant(first) and q.rank(DENSE, first) > t.top else None


def _unjudged_at_top(q: QueryRanks, t: Thresholds) -> str | None:
    """What the two rules above would name, were it judged not relevant: an unlabelled document."""
    docs = [d for d, r in q.ranks[DENSE].items() if r <= t.fp_top and q.is_unjudged(d) and q.rank(BM25, d) > t.low]
    first = q.first[BM25]
    if first is not None and q.is_unjudged(first) and q.rank(DENSE, first) > t.top:
        docs.append(first)
    return q.most_dramatic(docs, "unjudged_at_top", t.tuned_system)


def _both_fail(q: QueryRanks, t: Thresholds) -> str | None:
    if q.finds(BM25, t.top) or q.finds(DENSE, t.top):
        return None
    return q.best_ranked(q.relevant, lambda d: min(q.rank(BM25, d), q.rank(DENSE, d)))


def _fixed_by_hybrid(q: QueryRanks, t: Thresholds) -> str | None:
    if _both_fail(q, t) is None or not q.finds(HYBRID, t.top):
        return None
    return q.best_ranked(q.relevant, lambda d: q.rank(HYBRID, d))


def _fixed_by_finetuning(q: QueryRanks, t: Thresholds) -> str | None:
    base, tuned = t.tuned_system, TUNED_OF[t.tuned_system]
    if q.finds(base, t.top) or not q.finds(tuned, t.top):
        return None
    return q.best_ranked(q.relevant, lambda d: q.rank(tuned, d))


def _broken_by_finetuning(q: QueryRanks, t: Thresholds) -> str | None:
    base, tuned = t.tuned_system, TUNED_OF[t.tuned_system]
    if not q.finds(base, t.top) or q.finds(tuned, t.top):
        return None
    return q.best_ranked(q.relevant, lambda d: q.rank(base, d))


_CLASSIFIERS = {
    "vocabulary_mismatch": _vocabulary_mismatch,
    "exact_match_miss": _exact_match_miss,
    "semantic_false_positive": _semantic_false_positive,
    "lexical_trap": _lexical_trap,
    "unjudged_at_top": _unjudged_at_top,
    "bridged_by_expansion": _bridged_by_expansion,
    "both_fail": _both_fail,
    "fixed_by_hybrid": _fixed_by_hybrid,
    "fixed_by_finetuning": _fixed_by_finetuning,
    "broken_by_finetuning": _broken_by_finetuning,
    **{c: _pair_finds(c) for c in PAIR_CATEGORIES},
}


def headline_systems(category: str, tuned_system: str,
                     pair: tuple[str, str] | None = None) -> tuple[tuple[str, ...], str | None]:
    """(the systems a card's headline starts from, the one it moves to): ``failure_gallery.headline``
    writes them with their labels, "BM25 989 → dense 3"."""
    if category in PAIR_CATEGORIES:
        missed_by, found_by = _pair_order(category, pair)
        return (missed_by,), found_by
    if category in ("vocabulary_mismatch", "semantic_false_positive", "lexical_trap", "unjudged_at_top"):
        return (BM25,), DENSE
    if category == "exact_match_miss":
        return (DENSE,), BM25
    if category == "bridged_by_expansion":
        return (BM25,), SPLADE
    if category == "both_fail":
        return (BM25, DENSE), None
    if category == "fixed_by_hybrid":
        return (BM25, DENSE), HYBRID
    return (tuned_system,), TUNED_OF[tuned_system]


def rank_text(rank: int | None) -> str:
    return NOT_RETRIEVED if rank is None else str(rank)


# ---- all queries --------------------------------------------------------------------------------
@dataclass
class Classification:
    """What ``classify`` found: per category, (query, document, gap) most dramatic first."""

    categories: list[str]
    found: dict[str, list[tuple[str, str, int]]]  # category -> (query id, doc id, gap), ordered
    query_categories: dict[str, list[str]]  # query id -> its categories (analysed queries only)
    skipped: list[str] = field(default_factory=list)  # queries with no relevant label
    pair: tuple[str, str] | None = None  # (A, B) of the pair categories
    pooled: list[str] = field(default_factory=list)  # analysed queries whose labels came from judging in the app

    @property
    def counts(self) -> dict[str, int]:
        return {c: len(self.found[c]) for c in self.categories}


def classify(labels: dict[str, dict[str, int]], ranks: dict[str, dict[str, dict[str, int]]],
             thresholds: Thresholds = Thresholds(), finetuning: bool = False,
             pair: tuple[str, str] | None = None, pooled: Iterable[str] = ()) -> Classification:
    """Classify every query of ``labels`` (query id -> doc id -> graded label, in the order given)
    from ``ranks`` (system -> query id -> doc id -> 1-based rank within ``thresholds.depth``; the
    base systems, plus ``tuned_dense`` / ``tuned_hybrid`` when ``finetuning``, plus both systems of
    ``pair`` (A, B) when given, which adds the pair categories; the learned sparse system's ranks,
    when given, add ``SPARSE_CATEGORIES``). ``pooled``: the query ids whose labels came from
    judging in the app (``coverage.from_judging``): an unlabelled document there is unjudged, and
    ``UNJUDGED_CATEGORIES`` are evaluated.

    Each (category, query) names one document, ordered by its gap, largest first, then query id and
    document id (module docstring).
    """
    t = thresholds
    if pair is not None and (len(pair) != 2 or pair[0] == pair[1]):
        raise ValueError(f"a pair is two different systems, not {pair!r}")
    pooled = set(pooled)
    categories = [c for c in CATEGORIES if (finetuning or c not in FINETUNING_CATEGORIES)
                  and (SPLADE in ranks or c not in SPARSE_CATEGORIES)]
    if pooled:
        at = categories.index("lexical_trap") + 1
        categories[at:at] = UNJUDGED_CATEGORIES
    categories += list(PAIR_CATEGORIES) if pair is not None else []
    found: dict[str, list[tuple[str, str, int]]] = {c: [] for c in categories}
    query_categories: dict[str, list[str]] = {}
    skipped = []
    for qid, query_labels in labels.items():
        if not any(v > 0 for v in query_labels.values()):
            skipped.append(qid)
            continue
        per_system = {s: m.get(qid, {}) for s, m in ranks.items()}
        first = {s: next(iter(r), None) for s, r in per_system.items()}  # rank maps keep list order
        q = QueryRanks(qid, query_labels, per_system, first, t.depth, (pair[0], pair[1]) if pair else None,
                       qid in pooled)
        query_categories[qid] = []
        for c in categories:
            doc = _CLASSIFIERS[c](q, t)
            if doc is not None:
                found[c].append((qid, doc, q.gap(c, doc, t.tuned_system)))
                query_categories[qid].append(c)
    for rows in found.values():
        rows.sort(key=lambda row: (-row[2], row[0], row[1]))
    return Classification(categories, found, query_categories, skipped, (pair[0], pair[1]) if pair else None,
                          [q for q in query_categories if q in pooled])
