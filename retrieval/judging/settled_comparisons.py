"""While judging: which comparisons of the systems on show the judgments made so far settle, and
about how many more judgments the others need.

Each pair of systems is compared on the judged queries (``measures.compare``: the paired
permutation test and the interval of the difference in nDCG@10 that test gives, unjudged documents
counting as not relevant, as everywhere). A comparison is settled when one system is the better at
p < 0.05 with an interval above 0 (``Comparison.outcome``).

For one that is not, the projection: if the mean difference Δ and the spread s of the per-query
differences hold, a paired test at the 0.05 level finds a difference of Δ with 80% power after
about n* = ((z₀.₉₇₅ + z₀.₈)·s / |Δ|)² judged queries (the usual sample size of a paired
comparison; at n* the interval's half-width, 1.96·s/√n*, is well under |Δ|); the missing n* − n
queries times the judgments a query has taken so far is the estimate shown. It is a planning
figure, not a promise: Δ moves as judging goes on, and a Δ near 0 (the systems score alike so far)
puts the comparison out of reach.

The list is read after every grade, so it is computed on at most ``MAX_QUERIES`` judged queries
(``capped``): past that many (a large import, a long judging), on a fixed pseudo-random subset of
that size — the same one grade after grade, a query joining it only in its turn — and the view says
so. A comparison on a random subset is a valid test, with less power than one on every judged query
(Evaluate's); the judged queries left out count toward the projection (``standings``' ``beyond``).

Judging in the app pools the systems' top k, so a system that was not pooled (the learned sparse
index finished after judging began) meets unjudged documents in its top 10, counted as not relevant:
it would lose on judgments it never had. No comparison is settled, or projected, unless both
systems' top 10 is judged on every judged query (``coverage.MIN_JUDGED_AT_10``, ``coverage.verdict``:
the judged queries with nothing relevant found count too); a pair that lacks it names the system
and the judgments it needs instead — the pairs the judging queue serves first.
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from retrieval import numbers
from retrieval.data.dataset import Qrels
from retrieval.data.run import Run
from retrieval.evaluation.measures import Comparison, Evaluation, compare_pairs, evaluate_run
from retrieval.evaluation.metrics import PRIMARY
from retrieval.judging.coverage import COVERAGE_DEPTH, Verdict, condensed_ndcg, coverage, judged_verdict
from retrieval.judging.pool_verdict import pool_score

Z = 1.959963984540054 + 0.8416212335729143  # the 97.5th and the 80th percentiles of the standard normal
OUT_OF_REACH = 100_000  # more judged queries than this: "out of reach"
MAX_QUERIES = 300  # judged queries the list is computed on, at most (``capped``): within 1 s after every grade


def capped(query_ids: Iterable[str], cap: int | None = None) -> list[str]:
    """``query_ids`` when there are at most ``cap`` (default ``MAX_QUERIES``), else the ``cap`` of
    them first in a fixed pseudo-random order (a hash of each id), sorted: the same subset for the
    same ids, and a query judged later joins it only where its hash falls among the first."""
    cap = MAX_QUERIES if cap is None else cap
    ids = sorted(set(query_ids))
    if len(ids) <= cap:
        return ids
    return sorted(sorted(ids, key=lambda q: hashlib.blake2b(q.encode("utf-8", "surrogatepass"),
                                                            digest_size=8).digest())[:cap])


@dataclass
class Standing:
    a: str  # the worse on the mean
    b: str  # the better on the mean
    comparison: Comparison  # b − a
    settled: bool
    more_queries: int | None  # judged queries still needed, about; None: out of reach (Δ near 0)
    more_judgments: int | None
    verdict: Verdict | None = None  # the coverage gate's word on the pair (``coverage.verdict``)

    @property
    def blocked(self) -> bool:
        """Whether a system of the pair lacks the judged@10 a verdict needs (``verdict.lacking``)."""
        return self.verdict is not None and not self.verdict.may_conclude


def standings(runs: dict[str, Run], judged: Qrels, metric: str = PRIMARY,
              coverage_runs: dict[str, Run] | None = None, beyond: int = 0) -> list[Standing]:
    """Every pair of the systems' ``runs`` compared on the ``judged`` queries (those with a
    relevant label), the settled ones first, then the nearest to settling, then those the coverage
    gate holds back (judged@10 from ``coverage_runs``, each system's top 10, default ``runs``).
    ``beyond``: judged queries with a relevant label that ``judged`` leaves out (``capped``); the
    projection counts them as judged already (``more_queries`` 0, not settled: they may be enough)."""
    relevant = {q: docs for q, docs in judged.items() if any(g > 0 for g in docs.values())}
    if not relevant:
        return []
    labelled = {q: docs for q, docs in judged.items() if docs}  # every judged query: the gate's basis
    depth = pool_metric_depth(metric)
    if depth:  # a measure the pool fixes: over every judged query, nothing relevant found included
        evals = {name: pool_score(name, run, labelled, list(labelled), depth).evaluation()
                 for name, run in runs.items()}
    else:
        evals = {name: evaluate_run({q: run.get(q, []) for q in relevant}, relevant, metrics=(metric,))
                 for name, run in runs.items()}
    tens = coverage_runs or runs
    covered = {name: coverage(name, tens.get(name, {}), labelled, gated=True, k=min(depth or COVERAGE_DEPTH,
                                                                                  COVERAGE_DEPTH))
               for name in runs}
    cond = {name: condensed_ndcg(tens.get(name, {}), relevant) for name in runs}
    per_query = sum(len(docs) for docs in judged.values()) / max(1, len(judged))
    out = []
    for a, b, cmp in compare_pairs(evals, metric):
        word = judged_verdict(a, b, cmp, covered, {n: tens.get(n, {}) for n in runs}, relevant, cond)
        if not word.may_conclude:
            out.append(Standing(a, b, cmp, False, None, None, word))
            continue
        settled = cmp.outcome != "open"
        more_q = None if settled else _more_queries(evals[a], evals[b], metric, cmp, beyond)
        more_j = None if more_q is None else math.ceil(more_q * per_query)
        out.append(Standing(a, b, cmp, settled, 0 if settled else more_q, 0 if settled else more_j, word))
    return sorted(out, key=lambda s: (s.blocked, not s.settled,
                                      s.more_queries if s.more_queries is not None else math.inf,
                                      -s.comparison.delta))


def pool_metric_depth(metric: str) -> int:
    """k of a measure the judged pool fixes ("success@k", "p@k"), else 0."""
    name, _, cutoff = metric.partition("@")
    return int(cutoff) if name in ("success", "p") and numbers.is_count(cutoff) else 0


def _more_queries(ev_a: Evaluation, ev_b: Evaluation, metric: str, cmp: Comparison, beyond: int = 0) -> int | None:
    qa, qb = ev_a.per_query.get(metric, {}), ev_b.per_query.get(metric, {})
    diff = np.array([qb[q] - qa[q] for q in qa if q in qb])
    n = len(diff)
    if n < 2 or abs(cmp.delta) < 1e-9 or diff.std(ddof=1) == 0:
        return None
    needed = (Z * diff.std(ddof=1) / abs(cmp.delta)) ** 2
    if beyond and needed <= n + beyond:
        return 0  # the judged queries left out by the cap may be enough
    more = max(1, math.ceil(needed - n - beyond))
    return more if more <= OUT_OF_REACH else None
