"""What a judged pool determines exactly, and the verdict it carries: P@k and success@k over every
judged query, and how many queries every system fails on.

Labels made by judging a pool (each system's top k, ``retrieval.judging.judgments``) cover a
system's top k and nothing below it. Two measures read no deeper than that and need no relevant
document beyond the pool: precision at k (P@k, the share of the top k that is relevant) and
success at k (whether the top k holds a relevant document at all: trec_eval's ``success.k``). Where
a system's top k is fully judged on a query, both are *exact* there, whatever the unjudged rest of
the corpus holds; and they are defined on every judged query, those on which no relevant document
was found included — which is where the failures are. Measures normalised by the relevant
documents (nDCG, recall, MAP, bpref) are not: on pooled labels they are relative to the relevant
documents found so far, and a query with none found drops out of them altogether (5 of 11 found
queries can make every system look five times better than it is). Buckley and Voorhees ("Retrieval
Evaluation with Incomplete Information", SIGIR 2004, §2) give the same reason for preferring
measures a pool fully determines while judgments are incomplete; the depth-k pool of TREC makes
P@k exact for every system that contributed to it (Voorhees and Harman, "TREC: Experiment and
Evaluation in Information Retrieval", MIT Press 2005, ch. 3).

* ``pool_scores`` — each system's ``PoolScore`` on the judged queries: P@k and success@k with their
  95% intervals, exact where its top k is judged; while it is not, the bounds the unjudged
  documents leave (counted not relevant, then relevant), so no figure claims more than the pool
  holds.
* ``pool_verdict`` — every system's scores, the queries every system fails on (its top k fully
  judged, nothing relevant in it, for every system), the unjudged pairs that stand between the pool
  and exact figures (``PoolVerdict.unjudged``: the pairs the judging queue serves first, so each
  grade taken in its order brings the count down by one), and every pair of systems compared on
  success@k (paired permutation test, ``measures.compare``) once the figures are exact.
* ``beyond_pool`` — when the pool is judged and a comparison still spans 0, what would settle it:
  more queries (the paired sample size for the difference seen, as ``settled_comparisons``
  projects it) — a deeper pool changes neither figure, which read the top k alone.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retrieval.data.dataset import Qrels
from retrieval.data.run import Run
from retrieval.evaluation.intervals import Interval, mean_interval, proportion_interval
from retrieval.evaluation.measures import Comparison, Evaluation, compare
from retrieval.judging.grades import Pair
from retrieval.judging.pools import DEPTH, pool, top_ids

Z = 1.959963984540054 + 0.8416212335729143  # a paired test at 0.05 with 80% power (``settled_comparisons``)


def precision_name(k: int) -> str:
    """The key of P@k (ranx's and ``metrics``'): "p@10"."""
    return f"p@{k}"


def success_name(k: int) -> str:
    """The key of success@k (trec_eval's ``success.k``): "success@10"."""
    return f"success@{k}"


@dataclass(frozen=True)
class PoolScore:
    """One system's P@k and success@k on the judged queries (module docstring). ``successes`` are
    queries whose top k holds a document judged relevant; ``failures`` those whose top k is fully
    judged with nothing relevant; ``undecided`` the rest (nothing relevant judged, some of the top k
    unjudged). P@k counts ``k`` in its denominator, as trec_eval does, whatever a list's length."""

    system: str
    k: int
    queries: int
    complete: int  # queries whose top k is fully judged
    successes: int
    failures: int
    undecided: int
    precision: float  # mean P@k with unjudged documents counted not relevant (exact when ``exact``)
    precision_high: float  # … counted relevant: the most the pool still allows
    precision_interval: Interval = field(default_factory=Interval.undefined)
    success_interval: Interval = field(default_factory=Interval.undefined)
    per_query: dict[str, tuple[float, float]] = field(default_factory=dict, repr=False, compare=False)
    # query id -> (P@k, success@k), unjudged as not relevant

    @property
    def exact(self) -> bool:
        """Every judged query's top k is judged: both figures are exact."""
        return self.complete == self.queries

    @property
    def success(self) -> float:
        """The share of judged queries with a relevant document in the top k (the lower bound while
        some are undecided); NaN without queries."""
        return self.successes / self.queries if self.queries else math.nan

    @property
    def success_high(self) -> float:
        """The most it can still be: every undecided query a success."""
        return (self.successes + self.undecided) / self.queries if self.queries else math.nan

    def evaluation(self) -> Evaluation:
        """The per-query figures as an ``Evaluation`` (for ``measures.compare``)."""
        p, s = precision_name(self.k), success_name(self.k)
        return Evaluation({p: self.precision, s: self.success},
                          {p: {q: v[0] for q, v in self.per_query.items()},
                           s: {q: v[1] for q, v in self.per_query.items()}})


def judged_queries(qrels: Qrels, judgments: list[dict[str, Any]]) -> list[str]:
    """The queries of ``qrels`` whose labels all came from judging (``Store.judgments`` rows): with
    a relevant document found or not. A query any label of the data set's own touches is not one."""
    pairs = {(r["query_id"], r["doc_id"]) for r in judgments}
    return sorted(q for q, docs in qrels.items() if docs and all((q, d) in pairs for d in docs))


def pool_score(system: str, run: Run, labels: Qrels, query_ids: Iterable[str], k: int = DEPTH) -> PoolScore:
    """``system``'s ``PoolScore`` over ``query_ids`` (each one counts, labelled or not)."""
    ids = list(dict.fromkeys(query_ids))
    per_query: dict[str, tuple[float, float]] = {}
    high: list[float] = []
    complete = successes = failures = 0
    for q in ids:
        grades = labels.get(q, {})
        top = top_ids(run, q, k)
        relevant = sum(grades.get(d, 0) > 0 for d in top)
        unjudged = sum(d not in grades for d in top)
        per_query[q] = (relevant / k, float(relevant > 0))
        high.append((relevant + unjudged) / k)
        complete += unjudged == 0
        successes += relevant > 0
        failures += relevant == 0 and unjudged == 0
    n = len(ids)
    low = [v[0] for v in per_query.values()]
    return PoolScore(system, k, n, complete, successes, failures, n - successes - failures,
                     float(np.mean(low)) if n else math.nan, float(np.mean(high)) if n else math.nan,
                     mean_interval(low), proportion_interval(successes, n), per_query)


def pool_scores(runs: dict[str, Run], labels: Qrels, query_ids: Iterable[str], k: int = DEPTH) -> dict[str, PoolScore]:
    """Every system's ``PoolScore`` over the same queries."""
    return {name: pool_score(name, run, labels, query_ids, k) for name, run in runs.items()}


def judged_depth(runs: dict[str, Run], labels: Qrels, query_ids: Iterable[str], most: int = DEPTH) -> int:
    """The depth a judged pool was made to, read from the labels (the store does not keep the depth
    the judging used). Per query, the largest k at which the labels are a depth-k pool: the systems
    whose top k is judged whole (the pooled ones) hold, in their top k, every judged document — a
    deeper k passes only where a document below the pool happens to be judged in every pooled
    system's list and covered too; a system that joined later and left its lists unjudged is not
    among them. The lower median over the queries that read as a pool at all (a query judged one
    pair so far may not), between 1 and ``most``; ``most`` where none does (labels judged deeper
    than the lists, or elsewhere)."""
    from statistics import median_low

    def depth_of(q: str) -> int | None:
        judged = set(labels.get(q, {}))
        tops = {name: top_ids(run, q, most) for name, run in runs.items()}
        prefix = {name: (next((i for i, d in enumerate(top) if d not in judged), len(top))) for name, top in
                  tops.items()}
        prefix = {name: most if n == len(tops[name]) else n for name, n in prefix.items()}  # judged to its end
        for k in range(most, 0, -1):
            pooled = [name for name, n in prefix.items() if n >= k]
            if pooled and judged <= {d for name in pooled for d in tops[name][:k]}:
                return k
        return None

    depths = [k for k in map(depth_of, dict.fromkeys(query_ids)) if k is not None]
    return max(1, min(most, median_low(depths))) if depths else most


def unjudged_pairs(runs: dict[str, Run], labels: Qrels, query_ids: Iterable[str], k: int = DEPTH) -> list[Pair]:
    """The distinct (query, document) pairs in some system's top ``k`` on ``query_ids`` that carry no
    label, by query in the order given, then by best rank over the systems, then document id: what
    stands between the pool and exact figures (each one judged removes exactly one)."""
    ids = list(dict.fromkeys(query_ids))
    pools = pool(runs, ids, k)  # each query's pool, by best rank over the systems, then document id
    return [(q, d) for q in ids for d in pools[q] if d not in labels.get(q, {})]


@dataclass(frozen=True)
class PoolVerdict:
    """What the judged pool says of the systems (module docstring)."""

    k: int
    queries: tuple[str, ...]  # the judged queries it rests on
    scores: dict[str, PoolScore]
    all_fail: int  # queries on which every system's top k is judged and holds nothing relevant
    all_fail_undecided: int  # queries no system has a relevant document for yet, some top k unjudged
    all_fail_interval: Interval
    unjudged: tuple[Pair, ...]  # the pairs to judge for exact figures (``unjudged_pairs``)
    comparisons: tuple[tuple[str, str, Comparison], ...] = ()  # (worse, better, better − worse) on success@k

    @property
    def complete(self) -> bool:
        """Every system's top k is judged on every judged query: every figure here is exact."""
        return not self.unjudged

    @property
    def everyone_fails(self) -> bool:
        """Exact, and no system finds a relevant document in its top k on any judged query."""
        return self.complete and bool(self.queries) and self.all_fail == len(self.queries)

    def best(self) -> str | None:
        """The system with the highest success@k, then P@k, that is separable (success@k, p < 0.05)
        from every other; None when none is, or the figures are not exact."""
        if not self.complete or len(self.scores) < 2:
            return None
        ranked = sorted(self.scores.values(), key=lambda s: (-s.success, -s.precision, s.system))
        top = ranked[0].system
        mine = [c for a, b, c in self.comparisons if top in (a, b)]
        return top if mine and all(c.outcome != "open" and b == top for a, b, c in self.comparisons
                                   if top in (a, b)) else None


def pool_verdict(runs: dict[str, Run], labels: Qrels, query_ids: Iterable[str], k: int = DEPTH) -> PoolVerdict:
    """The ``PoolVerdict`` of ``runs`` on the judged ``query_ids`` with their ``labels``."""
    ids = tuple(dict.fromkeys(query_ids))
    scores = pool_scores(runs, labels, ids, k)
    fail = undecided = 0
    for q in ids:
        found = any(s.per_query[q][1] > 0 for s in scores.values())
        judged = all(all(d in labels.get(q, {}) for d in top_ids(run, q, k)) for run in runs.values())
        fail += not found and judged
        undecided += not found and not judged
    gap = unjudged_pairs(runs, labels, ids, k)
    compared: list[tuple[str, str, Comparison]] = []
    if not gap:
        names = list(scores)
        metric = success_name(k)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                cmp = compare(scores[a].evaluation(), scores[b].evaluation(), metric)
                compared.append((a, b, cmp) if cmp.delta >= 0 else (b, a, cmp.flipped()))
    return PoolVerdict(k, ids, scores, fail, undecided, proportion_interval(fail, len(ids)), tuple(gap),
                       tuple(sorted(compared, key=lambda t: (t[2].outcome == "open", -abs(t[2].delta)))))


def beyond_pool(cmp: Comparison) -> int | None:
    """How many more judged queries a paired test at 0.05 would need, with 80% power, to separate a
    difference of success@k as large as ``cmp``'s if its spread holds (the usual paired sample size,
    n* = ((z₀.₉₇₅ + z₀.₈)·s/|Δ|)²), less those it has; None when Δ is 0 (no number of queries would)."""
    n = cmp.queries
    if n < 2 or abs(cmp.delta) < 1e-12:
        return None
    wins, losses = len(cmp.wins), len(cmp.losses)
    d = np.array([1.0] * wins + [-1.0] * losses + [0.0] * cmp.ties)  # success@k differs by one query's 1 or 0
    spread = float(d.std(ddof=1))
    if spread == 0:
        return None
    return max(1, math.ceil((Z * spread / abs(cmp.delta)) ** 2 - n))
