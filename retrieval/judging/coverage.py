"""How far the judgments cover what a comparison rests on, and whether the comparison may speak a
verdict.

Labels made by judging a pool in the app (``retrieval.judging.judgments``: each system's top k judged) say
nothing about a document no pooled list held. A system whose lists were not pooled (it joined after
judging began, or it was left out) finds unjudged documents in its top 10, which count as not
relevant: its nDCG@10 is understated by exactly the part of its ranking nobody looked at, and a
comparison against it measures the pool, not the systems. This is the pooling bias Zobel measured
for runs that did not contribute to TREC's pools ("How Reliable Are the Results of Large-Scale
Information Retrieval Experiments?", SIGIR 1998, §4), at its most extreme.

* ``Coverage`` — for one system on the queries a comparison rests on (on labels judged in the app,
  every judged query, with a relevant document found or not; on a data set's own labels, those with
  a relevant label): judged@k (the share of its top k that carries a label, ``evaluate``'s ``judged@k``) with its 95%
  interval, the unjudged documents in its top k, the share of those queries whose top k is fully
  judged (whether its lists were in the judged pool), the judgments that would bring judged@k up to
  ``MIN_JUDGED_AT_10``, and the condensed-list nDCG'@10 beside nDCG@10.
* ``from_judging`` — which queries' labels came from judging in the app: the gate applies to them
  only. A data set's own qrels (BEIR's list relevant documents only; an unlisted document is not
  relevant by their convention) have a low judged@10 for every system and are not gated.
* ``verdict`` / ``verdicts`` — whether a comparison of A and B may be given on nDCG@10
  (``VERDICT_METRIC``), else which system lacks coverage and how many judgments it needs
  (``Shortfall.to_threshold``: the fewest of its unjudged top-10 documents whose judging lifts its
  judged@10 to the threshold; ``Shortfall.unjudged`` is all of them).
* ``skew`` — where labels that list non-relevant documents too (a judged pool, not BEIR's
  relevant-only lists) cover one system's top k better than another's beyond noise (judged@k
  compared query by query, paired permutation test), as production qrels made from one system's
  results do: nDCG@10 would favour the better-covered system by the documents nobody judged for the
  other, so the pair's verdict is carried by nDCG'@10, which leaves unjudged documents out
  (Sakai 2007), and says so (``Verdict.favoured``).
* ``pool_depth`` / ``measurable`` — how deep the judged pool goes, and which metrics the judgments
  can measure at all (recall@100 on a top-10 pool cannot be told from 1.0).

The threshold, ``MIN_JUDGED_AT_10 = 1``: every document of a compared system's top 10 judged on
every judged query — the depth-k pool made whole for that system. Then P@10 and success@10 are
exact for it (``pool_verdict``), and the count the gate asks for is the count of those unjudged
documents, the very pairs the judging queue serves first (``judgments.Queue``), so each grade taken
in the queue's order brings it down by exactly one: the gate and the queue are one rule. (An
earlier rule asked for 90% on the queries with a relevant document; as relevant documents turned
up on new queries its count rose and fell while the queue judged elsewhere.) The papers say why a
rule is needed and what it guards against. Buckley and Voorhees ("Retrieval Evaluation with Incomplete
Information", SIGIR 2004, §4-5) show that measures which count unjudged documents as not relevant
(MAP, P@10, and nDCG@10 alike) rank systems less and less faithfully as judgments go missing, while
measures that leave unjudged documents out (bpref) hold up; Sakai ("Alternatives to Bpref", SIGIR
2007, §3-5) shows that any measure computed on the condensed list — the ranking with its unjudged
documents removed, here nDCG'@10 — is as robust as bpref and more discriminative; Yilmaz and Aslam
("Estimating Average Precision with Incomplete and Imperfect Judgments", CIKM 2006, infAP) estimate
a measure from a judged random sample of the pool, which a top-k pool a system never entered is not.
So a verdict on nDCG@10 is given only where each system's top 10 is about as judged as a pooled
system's (a fully pooled system has judged@10 = 1.0 on every fully judged query), and the condensed
nDCG'@10 is reported beside it: it does not count the unjudged documents against a system, but it
cannot say how good the documents nobody judged are either, so it does not lift the gate.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import median_low
from typing import Any

from retrieval import numbers
from retrieval.data.dataset import Qrels
from retrieval.data.run import Run
from retrieval.evaluation.intervals import Interval
from retrieval.evaluation.measures import Comparison, Evaluation, compare, compare_pairs, evaluate_run, positive_qrels
from retrieval.evaluation.metrics import BPREF, NDCG_CONDENSED, PRIMARY

MIN_JUDGED_AT_10 = 1.0  # the module docstring says why
COVERAGE_DEPTH = 10  # judged@10: the depth the verdict's nDCG@10 looks at
VERDICT_METRIC = PRIMARY  # what a verdict is given on: nDCG@10, behind the coverage gate
GATE = f"judged@{COVERAGE_DEPTH} = {MIN_JUDGED_AT_10:g} on the queries judged in the app"
FULL_LIST = math.inf  # the depth of map and bpref: the whole ranked list


@dataclass(frozen=True)
class Coverage:
    """One system's coverage on the queries a comparison rests on (module docstring)."""

    system: str
    queries: int  # the queries it is measured on (every judged one when ``gated``, else those with a relevant label)
    judged: float  # mean judged@k (NaN without queries)
    interval: Interval  # its 95% interval over the queries
    unjudged: int  # unjudged documents in its top k over those queries
    fully_judged: float  # share of those queries whose top k is fully judged: its lists were in the pool
    to_threshold: int  # the fewest of those unjudged documents whose judging lifts judged@k to the threshold
    gated: bool  # the labels came from judging in the app: the gate applies
    condensed: float = float("nan")  # nDCG'@10: nDCG@10 of the list with unjudged documents removed
    condensed_interval: Interval = field(default_factory=Interval.undefined)
    k: int = COVERAGE_DEPTH
    threshold: float = MIN_JUDGED_AT_10
    pooled: bool = False  # the labels list non-relevant documents too: a judged pool (``skew`` applies)
    per_query: dict[str, float] = field(default_factory=dict, repr=False, compare=False)  # judged@k per query
    non_relevant: dict[str, float] = field(default_factory=dict, repr=False, compare=False)  # judged non-relevant@k

    @property
    def sufficient(self) -> bool:
        """Whether its comparisons may speak a verdict: not gated, or judged@k at the threshold."""
        return not self.gated or self.queries == 0 or self.judged >= self.threshold - 1e-12


@dataclass(frozen=True)
class Shortfall:
    """A system that lacks coverage for a verdict, and how much judging it needs."""

    system: str
    judged: float
    interval: Interval
    unjudged: int  # every unjudged document in its top k on the compared queries
    to_threshold: int  # the fewest of them to judge for judged@k to reach the threshold


@dataclass(frozen=True)
class Verdict:
    """Whether a comparison of A and B (``Comparison``: B − A) may be concluded on ``metric``."""

    a: str
    b: str
    comparison: Comparison
    metric: str  # the verdict's measure: ``VERDICT_METRIC``
    gate: str  # the condition it is given under: ``GATE``
    may_conclude: bool
    lacking: tuple[Shortfall, ...] = ()  # the systems that lack coverage, the least covered first
    condensed: Comparison | None = None  # the same pair on nDCG'@10, beside
    coverage: tuple[Coverage | None, Coverage | None] = (None, None)  # (A's, B's)
    favoured: str | None = None  # the system the labels cover better beyond noise (``skew``): the verdict is nDCG'@10's
    skew: Comparison | None = None  # judged@k of the pair, query by query (B − A)


def gated_marks(marks: dict[str, dict[str, str]], covered: dict[str, Coverage], base: str) -> dict[str, dict[str, str]]:
    """Significance marks against ``base`` (``measures.significance_marks``) kept only where both
    systems' coverage is ``sufficient``: "differs from BM25" is a verdict too."""
    if base in covered and not covered[base].sufficient:
        return {}
    return {name: m for name, m in marks.items() if name not in covered or covered[name].sufficient}


def from_judging(qrels: Qrels, judgments: list[dict[str, Any]]) -> set[str]:
    """The queries of ``qrels`` whose labels came from judging in the app: every labelled pair of
    the query is a judgment in the store (``Store.judgments(corpus_hash)`` rows, ``query_id`` and
    ``doc_id``). A query with any label the data set brought (``labels.with_judgments`` merges the
    two) keeps the data's convention, under which an unlisted document is not relevant."""
    pairs = {(r["query_id"], r["doc_id"]) for r in judgments}
    return {q for q, docs in qrels.items() if docs and all((q, d) in pairs for d in docs)}


def judged_prefix(hits: Iterable[tuple[str, float]], labels: dict[str, int]) -> int:
    """How many of a ranked list's first documents are judged before the first unjudged one."""
    n = 0
    for d, _ in hits:
        if d not in labels:
            break
        n += 1
    return n


def pool_depth(runs: dict[str, Run], qrels: Qrels, queries: Iterable[str] | None = None) -> int | None:
    """How deep the judged pool goes: per query, the longest fully judged prefix of any system's
    list (a pooled system's top k is judged to k; the store does not keep the depth judging used),
    and over the queries the lower median, so one query judged deeper does not speak for the rest.
    None without queries."""
    ids = [q for q in (qrels if queries is None else queries) if qrels.get(q)]
    if not ids:
        return None
    return median_low([max((judged_prefix(run.get(q, []), qrels[q]) for run in runs.values()), default=0)
                       for q in ids])


def metric_depth(metric: str) -> float:
    """The ranks a metric reads: k of "…@k", the whole list for map and bpref, none (0) for
    judged@k and pnr, which measure the judgments themselves."""
    if metric.startswith("judged@") or metric == "pnr":
        return 0
    if metric in ("map", BPREF):
        return FULL_LIST
    cutoff = metric.rsplit("@", 1)[-1]
    return int(cutoff) if "@" in metric and numbers.is_count(cutoff) else FULL_LIST


def measurable(metric: str, depth: int | None) -> bool:
    """Whether labels judged in the app to pool ``depth`` can measure ``metric``: not when it reads
    deeper than the pool (recall@100 of a top-10 pool is 1.0 for any system whose relevant documents
    were all pooled, whatever it does below 10). Metrics at the coverage depth (…@10) stay: the
    coverage gate speaks for them. ``depth`` None: not judged in the app, everything measurable."""
    if depth is None:
        return True
    reads = metric_depth(metric)
    return reads <= COVERAGE_DEPTH or reads <= depth


def condensed_ndcg(run: Run, qrels: Qrels) -> Evaluation:
    """nDCG'@10 (``metrics.NDCG_CONDENSED``) of ``run`` on ``qrels``: nDCG@10 of the condensed lists
    (``evaluate_run`` computes it, as for every view's table)."""
    return evaluate_run({q: run.get(q, []) for q in positive_qrels(qrels)}, qrels, metrics=(NDCG_CONDENSED,))


def coverage(system: str, run: Run, qrels: Qrels, gated: bool = True, k: int = COVERAGE_DEPTH,
             threshold: float = MIN_JUDGED_AT_10) -> Coverage:
    """``system``'s coverage on the queries of ``qrels`` a comparison rests on (module docstring):
    when ``gated`` (labels judged in the app), every labelled query, a relevant document found or
    not; else those with a relevant label. nDCG'@10 beside reads the latter alone."""
    labels = {q: docs for q, docs in qrels.items() if docs} if gated else positive_qrels(qrels)
    metric = f"judged@{k}"
    ev = evaluate_run({q: run.get(q, [])[:k] for q in labels}, labels, metrics=(metric,))  # judged@k reads the top k
    shares = ev.per_query.get(metric, {})
    unjudged, full, gains = 0, 0, []
    non_relevant: dict[str, float] = {}
    for q, docs in labels.items():
        top = [d for d, _ in run.get(q, [])[:k]]
        non_relevant[q] = sum(docs.get(d, 1) <= 0 for d in top) / len(top) if top else 0.0
        missing = sum(d not in docs for d in top)
        unjudged += missing
        full += bool(top) and missing == 0
        gains += [1 / len(top)] * missing if missing else []  # judging one lifts judged@k by 1/len (none: no list)
    n = len(labels)
    needed = max(0.0, threshold * n - sum(shares.values()))  # the sum of per-query shares to add
    to_threshold = 0 if threshold < 1 else unjudged  # the whole top k: every unjudged document
    for gain in sorted(gains, reverse=True) if threshold < 1 else ():
        if needed <= 1e-9:
            break
        needed -= gain
        to_threshold += 1
    cond = condensed_ndcg(run, positive_qrels(labels)) if positive_qrels(labels) else None
    pooled = any(g <= 0 for docs in qrels.values() for g in docs.values())
    return Coverage(system, n, ev.mean.get(metric, float("nan")), ev.interval(metric), unjudged,
                    full / n if n else float("nan"), to_threshold, gated,
                    cond.mean[NDCG_CONDENSED] if cond else float("nan"),
                    cond.interval(NDCG_CONDENSED) if cond else Interval.undefined(), k, threshold, pooled,
                    dict(shares), non_relevant)


def coverages(runs: dict[str, Run], qrels: Qrels, judgments: list[dict[str, Any]],
              k: int = COVERAGE_DEPTH) -> dict[str, Coverage]:
    """Every system's ``Coverage``: on the queries whose labels came from judging in the app
    (``from_judging``: every one, a relevant document found or not), gated, where there are any;
    else on every query with a relevant label, reported but not gated."""
    pooled = from_judging({q: docs for q, docs in qrels.items() if docs}, judgments)
    basis = {q: qrels[q] for q in qrels if q in pooled} if pooled else positive_qrels(qrels)
    return {name: coverage(name, run, basis, gated=bool(pooled), k=k) for name, run in runs.items()}


def skew(cov_a: Coverage, cov_b: Coverage) -> Comparison | None:
    """judged@k of B − A query by query (paired permutation test) where the labels are a judged pool
    not gated here (``Coverage.pooled``: they list non-relevant documents; BEIR's relevant-only lists
    are evenly sparse and stay as they are), and it separates the two *and* so does the share of the
    top k judged non-relevant, the same way: the labels cover one system's top k better beyond noise
    because its lists were judged, not because it finds more relevant documents (a better system's
    judged@k is higher on any labels that list relevant documents; a pooled one's non-relevant
    documents are judged too). None otherwise."""
    if cov_a.gated or cov_b.gated or not (cov_a.pooled and cov_b.pooled) or not cov_a.per_query:
        return None
    metric = f"judged@{cov_a.k}"
    found = compare(Evaluation({}, {metric: cov_a.per_query}), Evaluation({}, {metric: cov_b.per_query}), metric)
    if found.outcome == "open":
        return None
    judged_out = compare(Evaluation({}, {"n": cov_a.non_relevant}), Evaluation({}, {"n": cov_b.non_relevant}), "n")
    return found if judged_out.outcome == found.outcome else None


def verdict(a: str, b: str, comparison: Comparison, cov_a: Coverage, cov_b: Coverage,
            condensed_comparison: Comparison | None = None) -> Verdict:
    """Whether the comparison of ``a`` and ``b`` (B − A) may be concluded: only when both systems'
    coverage is ``sufficient``; else the ones that lack it, the least covered first. Where the labels
    cover one of them better beyond noise (``skew``), the verdict is the pair's on nDCG'@10
    (``condensed_comparison``), or none without it, and names the favoured system."""
    lacking = sorted((Shortfall(c.system, c.judged, c.interval, c.unjudged, c.to_threshold)
                      for c in (cov_a, cov_b) if not c.sufficient), key=lambda s: (s.judged, s.system))
    skewed = skew(cov_a, cov_b)
    if skewed is not None:
        favoured = b if skewed.delta > 0 else a
        carried = condensed_comparison is not None and condensed_comparison.queries >= 2
        return Verdict(a, b, comparison, NDCG_CONDENSED if carried else comparison.metric, GATE,
                       carried and not lacking, tuple(lacking), condensed_comparison, (cov_a, cov_b), favoured, skewed)
    return Verdict(a, b, comparison, comparison.metric, GATE, not lacking, tuple(lacking), condensed_comparison,
                   (cov_a, cov_b))


def verdicts(runs: dict[str, Run], qrels: Qrels, judgments: list[dict[str, Any]], metric: str = VERDICT_METRIC,
             pairs: list[tuple[str, str]] | None = None) -> list[Verdict]:
    """Every pair of ``runs`` (or the ``pairs`` of names asked for) compared on ``metric`` over the
    queries of ``qrels`` with a relevant label, each with its ``Verdict`` under the coverage gate:
    one call from runs, labels and the store's judgments of the corpus (``Store.judgments``)."""
    labels = positive_qrels(qrels)
    evals = {name: evaluate_run({q: run.get(q, []) for q in labels}, labels, metrics=(metric,))
             for name, run in runs.items()}
    covered = coverages(runs, qrels, judgments)
    cond = {name: condensed_ndcg(run, labels) for name, run in runs.items()}
    return [judged_verdict(x, y, cmp, covered, runs, labels, cond) for x, y, cmp in compare_pairs(evals, metric, pairs)]


def judged_verdict(a: str, b: str, comparison: Comparison, covered: dict[str, Coverage], runs: dict[str, Run],
                   qrels: Qrels, condensed_evals: dict[str, Evaluation] | None = None) -> Verdict:
    """``verdict`` with the pair's nDCG'@10 comparison beside, over ``qrels``' queries
    (``condensed_evals``: each system's ``condensed_ndcg`` there, computed once for many pairs)."""
    ev = condensed_evals if condensed_evals is not None else {}
    ev_a = ev[a] if a in ev else condensed_ndcg(runs[a], qrels)
    ev_b = ev[b] if b in ev else condensed_ndcg(runs[b], qrels)
    return verdict(a, b, comparison, covered[a], covered[b], compare(ev_a, ev_b, NDCG_CONDENSED))
