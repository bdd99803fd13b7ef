"""Relevance judging: which (query, document) pairs to judge, in what order, and the judges' grades
as relevance labels to evaluate with or to export.

Plain functions over runs and labels; the store keeps the grades themselves (``Store.put_judgment``,
keyed by ``Dataset.corpus_hash``, so judgments outlive added queries).

* ``pool`` — the judging pool of a query: the union of every system's top k (TREC's depth-k
  pooling), ordered by best rank across systems, then document id.
* ``rbo``, ``disagreement``, ``order_queries`` — how much the systems' top-k lists differ on a
  query, by rank-biased overlap (Webber, Moffat and Zobel, "A Similarity Measure for Indefinite
  Rankings", ACM Transactions on Information Systems 28(4), article 20, 2010), so the queries the
  systems disagree on most are judged first: those are the ones whose labels tell the systems
  apart, as DiffIR ranks contrasting queries by how differently two runs rank them (Jose, Nguyen,
  MacAvaney, Dalton and Yates, "DiffIR: Exploring Differences in Ranking Models' Behavior",
  SIGIR 2021, demonstration papers, pp. 2595-2599; it uses rank correlations, we use RBO).
* ``queue`` / ``Queue`` — the pairs in judging order, which are judged, the next to judge, progress.
* ``judgments_to_qrels``, ``disagreements``, ``merge_labels`` — the judgments as
  qrels (one rule for several judges), where judges differ, with imported labels (``trec.write_qrels``
  writes them as a file).
"""
from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import median_low
from typing import TYPE_CHECKING, Any

from retrieval import numbers
from retrieval.data.dataset import Qrels
from retrieval.data.run import Run, ranks
from retrieval.judging import order as judging_order
from retrieval.judging.grades import GRADES as GRADES  # the grades and pools, re-exported where they were
from retrieval.judging.grades import Pair as Pair
from retrieval.judging.grades import check_judge as check_judge
from retrieval.judging.grades import parse_grade as parse_grade
from retrieval.judging.pools import DEPTH as DEPTH
from retrieval.judging.pools import pool, top_ids

if TYPE_CHECKING:
    from retrieval.judging.sampling import Sample
    from retrieval.sharing.owners import Viewer
    from retrieval.store import StoreProtocol

MERGE_RULES = ("median", "majority", "min", "max")  # merged_grade
MAX_DEPTH = 100  # the deepest pool a judge may ask for
PERSISTENCE = 0.9  # RBO's p: the top 10 ranks carry 86% of the weight (the paper's eq. 21)
PREFER = ("imported", "judgments")  # merge_labels: which side wins a pair both label
AGREEMENT_EVERY = 10  # a judge re-grades one pair in ten that another judge graded (``Queue``): agreement's share


def store_judge(store: StoreProtocol, corpus: str, name: object, viewer: Viewer | None = None) -> str:
    """``check_judge``, then what storing a grade under the name would refuse, claiming nothing
    (``judge_key``, its name)."""
    return judge_key(store, corpus, name, viewer)[0]


def judge_key(store: StoreProtocol, corpus: str, name: object, viewer: Viewer | None = None) -> tuple[str, str]:
    """The judge's name (``check_judge``) and the key its grades would be kept under, claiming nothing,
    or what storing a grade under it would refuse: with ``viewer`` (a session of the app,
    ``owners.Viewer``), a look-alike of a judge it sees, and on a shared deployment another's published
    judge (``judge_owners.check``; the name becomes the session's with its first grade, in that grade's
    write: ``judge_claims``); without, a look-alike of any judge of the corpus (``Store.judges``), the
    key being the name. Read each time: one indexed look-up."""
    name = check_judge(name)
    if viewer is None:
        return check_judge(name, store.judges(corpus)), name
    from retrieval.judging import judge_owners

    return name, judge_owners.check(store, corpus, name, viewer)


def check_depth(value: Any) -> int:
    """A pool depth: a whole number (``retrieval.numbers.whole``) from 1 to ``MAX_DEPTH`` (a
    ValueError in one line otherwise)."""
    try:
        number: int | None = numbers.whole(value, "the pool depth")
    except ValueError:
        number = None
    if number is None or not 1 <= number <= MAX_DEPTH:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "…"
        raise ValueError(f"the pool depth is a whole number from 1 to {MAX_DEPTH}, not {shown}")
    return number


def rbo(left: list[str], right: list[str], p: float = PERSISTENCE) -> float:
    """Extrapolated rank-biased overlap RBO_EXT of two ranked lists (Webber, Moffat and Zobel,
    TOIS 2010, eq. 32, which covers lists of uneven length), in [0, 1]: 1 for identical lists,
    0 for disjoint ones.

    With S the shorter list (length s), L the longer (length l) and X_d the overlap
    |S[:d] ∩ L[:d]| (for d > s, |S ∩ L[:d]|)::

        RBO_EXT = (1−p)/p · ( Σ_{d=1..l} X_d/d · p^d + Σ_{d=s+1..l} X_s·(d−s)/(s·d) · p^d )
                  + ( (X_l − X_s)/l + X_s/s ) · p^l

    For lists of equal length k it is (1−p)/p · Σ_{d=1..k} X_d/d · p^d + X_k/k · p^k: the
    agreement seen down to k, assumed to go on below it. Two empty lists score 1, one empty list 0.
    A repeated id counts once, at its first rank.

    Why not the PyPI package ``rbo`` (0.1.3, January 2023, which implements eq. 32 too and agrees
    with this function to 1e-15 on 3,000 random pairs of lists, checked when this was written): it
    requires ``numpy<2.0``, so pip cannot install it beside our numpy 2 pin, and it prints to
    stdout when it clamps a value.
    """
    if not 0 < p < 1:
        raise ValueError(f"RBO's persistence p must be between 0 and 1 (exclusive), not {p}")
    short, long_ = list(dict.fromkeys(left)), list(dict.fromkeys(right))
    if len(short) > len(long_):
        short, long_ = long_, short
    s, l = len(short), len(long_)  # noqa: E741 (the paper's names)
    if l == 0:
        return 1.0
    if s == 0:
        return 0.0
    seen_short: set[str] = set()
    seen_long: set[str] = set()
    overlap = overlap_at_s = 0  # X_d, X_s
    total = 0.0
    for d in range(1, l + 1):
        b = long_[d - 1]
        if d <= s:
            a = short[d - 1]
            overlap += 1 if a == b else int(a in seen_long) + int(b in seen_short)
            seen_short.add(a)
        else:
            overlap += int(b in seen_short)
        seen_long.add(b)
        if d == s:
            overlap_at_s = overlap
        total += overlap / d * p ** d
        if d > s:
            total += overlap_at_s * (d - s) / (s * d) * p ** d
    return (1 - p) / p * total + ((overlap - overlap_at_s) / l + overlap_at_s / s) * p ** l


def disagreement(runs: dict[str, Run], query_id: str, k: int = DEPTH, p: float = PERSISTENCE) -> float:
    """1 − the mean RBO_EXT (``rbo``) over every pair of systems' top-``k`` lists for ``query_id``:
    0 when all systems return the same ranking, 1 when no two share a document. A system with no
    list for the query counts as an empty list; fewer than two systems disagree on nothing (0)."""
    lists = [top_ids(runs[name], query_id, k) for name in sorted(runs)]
    pairs = list(itertools.combinations(lists, 2))
    if not pairs:
        return 0.0
    return 1.0 - sum(rbo(a, b, p) for a, b in pairs) / len(pairs)


def order_queries(runs: dict[str, Run], query_ids: Iterable[str], k: int = DEPTH,
                  p: float = PERSISTENCE) -> list[tuple[str, float]]:
    """``[(query id, disagreement)]``, most disagreement first; ties (to 12 decimals, so float
    noise does not order them) by query id."""
    scored = [(qid, disagreement(runs, qid, k, p)) for qid in query_ids]
    return sorted(scored, key=lambda item: (-round(item[1], 12), item[0]))


class Queue:
    """The pooled pairs of the sampled queries in judging order. A position is an index into
    ``pairs``: positions below ``handed`` hold the pairs in the order the judge got them (the grades
    made before first, so ← goes back through them); ``next_unjudged`` past them serves first the
    pooled pairs of the queries already graded (the pairs the coverage gate counts: every system's
    top k on every judged query, ``coverage.MIN_JUDGED_AT_10``), then asks the judging order
    (``order``: by default the pair expected to move the comparisons of the systems on show most)
    to open the next query, and puts its pair at the next position. The rest wait in pool order
    (queries the systems disagree on most first).

    A pair is ``(query id, document id)`` only: which systems retrieved it, and where, is left out
    so the judge is not swayed by it, and given only when asked (``retrieved_by``). Several sessions
    of one judge may share a queue: its methods hold a lock.

    ``others``: the pairs other judges graded. They cover the pool already: the gate counts them as
    judged, the judging order is not offered them, and a judge re-grades them only for agreement —
    one pair in ``AGREEMENT_EVERY`` (``adds`` says which a pair is for) — unless ``regrade`` asks
    for all of them (a second opinion on every pair).
    """

    def __init__(self, runs: dict[str, Run], order: list[tuple[str, float]],
                 pools: dict[str, list[str]], judged: dict[Pair, int], sample: Sample | None = None,
                 strategy: judging_order._Order | judging_order.Chain | None = None,
                 others: dict[Pair, int] | None = None, regrade: bool = False):
        self.sample = sample  # the ``sampling.Sample`` of queries the pool was drawn from, if any
        pooled = [(qid, doc) for qid, _ in order for doc in pools[qid]]
        self._grades: dict[Pair, int] = dict(judged)
        self._others: dict[Pair, int] = dict(others or {})  # other judges' grades (``others``)
        self.regrade = regrade
        done = [pair for pair in pooled if pair in self._grades]
        self.pairs: list[Pair] = done + [pair for pair in pooled if pair not in self._grades]
        self.handed = len(done)
        self.disagreement: dict[str, float] = dict(order)  # query id -> disagreement
        self.strategy = strategy  # a ``order`` strategy; None: pool order
        self._runs = runs
        self._position = {pair: i for i, pair in enumerate(self.pairs)}
        self._lock = threading.RLock()
        # how it was made (``queue`` sets them), for ``add_runs``: depth, RBO's p, order, pairs of interest
        self.k, self.p, self.order = DEPTH, PERSISTENCE, None if strategy else "pool"
        self.interest: list[tuple[str, str]] | None = None
        self.joined: Joined | None = None  # the systems that joined last (``add_runs``)
        self._focus: judging_order.Focus | None = None  # their pairs' strategy, while they go first
        self._theirs: set[Pair] = set()  # their unjudged pairs, when they go first
        self._pool_of: dict[str, list[str]] = {}  # query id -> its pooled documents, in pool order
        for qid, doc in pooled:
            self._pool_of.setdefault(qid, []).append(doc)

    @property
    def systems(self) -> tuple[str, ...]:
        """The systems whose top k is pooled, in name order."""
        return tuple(sorted(self._runs))

    def add_runs(self, runs: dict[str, Run]) -> Joined | None:
        """Systems that joined the ones on show (an index built, a run imported): their top ``k`` of
        the queue's queries joins the pool without a rebuild. The grades and the positions handed
        out stay as they are; the new systems' unjudged top-``k`` pairs come next, in the judging
        order aimed at the comparisons they are in (``order.Focus``, then the order over
        every pair, ``Chain``), unless the queue is aimed at one pair of systems, whose aim stays.
        What joined (``Joined``), or None when every system was pooled already."""
        with self._lock:
            fresh = {name: run for name, run in runs.items() if name not in self._runs}
            if not fresh:
                return None
            self._runs = {**self._runs, **fresh}
            ordered = order_queries(self._runs, list(self.disagreement), self.k, self.p)
            self.disagreement = dict(ordered)
            query_ids = [q for q, _ in ordered]
            pools = pool(self._runs, query_ids, self.k)
            for qid in query_ids:  # the new pairs wait after the others, in pool order
                self._pool_of[qid] = list(pools[qid])
                for doc in pools[qid]:
                    if (qid, doc) not in self._position:
                        self._position[(qid, doc)] = len(self.pairs)
                        self.pairs.append((qid, doc))
            handed = set(self.pairs[:self.handed])
            theirs = list(dict.fromkeys((qid, doc) for qid in query_ids for run in fresh.values()
                                        for doc in top_ids(run, qid, self.k)
                                        if (qid, doc) not in self._grades and (qid, doc) not in handed))
            first = self.interest is None
            self._theirs = set(theirs) if first else set()
            if self.order == "pool":
                mine = self._theirs
                waiting = self.pairs[self.handed:]
                self.pairs[self.handed:] = [p for p in waiting if p in mine] + [p for p in waiting if p not in mine]
                self._position = {pair: i for i, pair in enumerate(self.pairs)}
                self._focus = None
            else:
                def made(interest: list[tuple[str, str]] | None) -> judging_order._Order:
                    known = dict(self._grades) if self.regrade else {**self._others, **self._grades}
                    order = judging_order.make(self.order or judging_order.DEFAULT, self._runs, query_ids, self.k,
                                               known, interest)
                    for pair in handed:
                        order.hand_out(pair)
                    return order

                general = made(self.interest)
                self._focus = None
                if first and theirs:
                    near = [(a, b) for a, b in judging_order.all_pairs(self._runs) if a in fresh or b in fresh]
                    self._focus = judging_order.Focus(made(near), theirs)
                self.strategy = judging_order.Chain(self._focus, general) if self._focus else general
            self.joined = Joined(tuple(sorted(fresh)), len(theirs), first, self.k)
            return self.joined

    def joined_left(self) -> int:
        """How many of the last joined systems' pairs are still to come before the others."""
        with self._lock:
            return sum(1 for pair in self._theirs if pair not in self._grades and self._position[pair] >= self.handed)

    def __len__(self) -> int:
        return len(self.pairs)

    @property
    def pooled_count(self) -> int:
        """How many pairs are pooled (the "of N" in "judged n of N")."""
        return len(self.pairs)

    @property
    def judged_count(self) -> int:
        """How many pooled pairs have a grade (grades of pairs outside the pool do not count)."""
        return sum(pair in self._grades for pair in self.pairs)

    def position(self, query_id: str, doc_id: str) -> int:
        """The position of a pooled pair; a KeyError naming it when it is not pooled."""
        pair = (query_id, doc_id)
        if pair not in self._position:
            raise KeyError(f"({query_id!r}, {doc_id!r}) is not in the judging pool")
        return self._position[pair]

    def grade(self, position: int) -> int | None:
        """The pair's grade, None while it is unjudged."""
        return self._grades.get(self.pairs[position])

    def next_unjudged(self, after: int = -1, wrap: bool = True) -> int | None:
        """The first unjudged position after ``after`` (-1: from the start) among the pairs handed
        out, else the judging order's next pair; with ``wrap``, when none is left, the first
        unjudged one from the start (pairs skipped earlier). None when every pooled pair is judged."""
        with self._lock:
            for i in range(after + 1, self.handed):
                if self.pairs[i] not in self._grades:
                    return i
            found = self._hand_out()
            if found is not None:
                return found
            if wrap:
                for i in range(0, min(after + 1, len(self.pairs))):
                    if self.pairs[i] not in self._grades:
                        return i
            return None

    def step(self, position: int, forward: bool) -> int:
        """The position after (``forward``) or before ``position``: → past the pairs handed out
        asks the judging order, as ``next_unjudged`` does; it stays put at either end."""
        with self._lock:
            if not forward:
                return max(position - 1, 0)
            if position + 1 < self.handed:
                return position + 1
            found = self._hand_out()
            return position if found is None else found

    def _covered(self, pair: Pair) -> bool:
        """Some judge graded the pair: this one, or another (``others``)."""
        return pair in self._grades or pair in self._others

    def opened(self) -> list[str]:
        """The queries with a grade by any judge, in the queue's order: the ones a verdict rests on."""
        graded = {q for q, _ in self._grades} | {q for q, _ in self._others}
        return [q for q in self._pool_of if q in graded]

    def to_complete(self) -> int:
        """The pooled pairs of the graded queries (``opened``) no judge has graded: what stands
        between the judged queries and exact P@k and success@k for every pooled system
        (``pool_verdict.unjudged_pairs``), the pairs the queue serves first."""
        with self._lock:
            return sum(not self._covered((q, d)) for q in self.opened() for d in self._pool_of[q])

    @property
    def uncovered(self) -> int:
        """Pooled pairs no judge has graded yet (what more judging can still add to the labels)."""
        with self._lock:
            return sum(not self._covered(pair) for pair in self.pairs)

    def adds(self, pair: Pair) -> str:
        """What a grade of the pair adds: "agreement" where another judge graded it (a second grade
        measures how far judges agree, ``agreement``), else "coverage" (a label nobody has made)."""
        return "agreement" if pair in self._others else "coverage"

    def sync_others(self, others: dict[Pair, int]) -> None:
        """Take the other judges' grades as stored now: pairs they graded since are covered."""
        with self._lock:
            self._others = dict(others)
            if self.strategy is not None and not self.regrade:
                for pair, grade in others.items():
                    if pair not in self._grades and pair in self._position and self._position[pair] >= self.handed:
                        self.strategy.record(pair, grade)
                        self.strategy.hand_out(pair)

    def _gate_pair(self) -> Pair | None:
        """The first pair the coverage gate counts (``coverage.MIN_JUDGED_AT_10``): a pooled document
        no judge has graded, not handed out yet, of a query that already has a grade — so the queries
        judged are made whole before another is opened, and each grade taken in this order brings the
        gate's count down by exactly one."""
        for q in self.opened():
            for doc in self._pool_of[q]:
                if not self._covered((q, doc)) and self._position[(q, doc)] >= self.handed:
                    return q, doc
        return None

    def _agreement_pair(self) -> Pair | None:
        """A pair another judge graded, for this one to re-grade, when it is agreement's turn: every
        ``AGREEMENT_EVERY``-th pair of this judge's (every one with ``regrade``), in pool order;
        None when none is left or it is coverage's turn."""
        if not self._others:
            return None
        mine = sum(pair in self._grades for pair in self.pairs)
        again = sum(pair in self._grades for pair in self._others)
        if not self.regrade and (again + 1) * AGREEMENT_EVERY > mine + 1:
            return None
        return next((p for p in self.pairs[self.handed:] if p in self._others and p not in self._grades), None)

    def _ordered_pair(self) -> Pair | None:
        """The judging order's next pair not handed out or graded yet (pool order without one)."""
        if self.strategy is None:
            return next((p for p in self.pairs[self.handed:] if not self._covered(p)), None)
        pair = self.strategy.next()
        while pair is not None and (pair not in self._position or self._position[pair] < self.handed
                                    or pair in self._grades):
            self.strategy.hand_out(pair)  # a pair already handed or graded elsewhere: never again
            pair = self.strategy.next()
        return pair

    def _hand_out(self) -> int | None:
        """The pair the coverage gate counts first (``_gate_pair``), a pair to re-grade when it is
        agreement's turn (``_agreement_pair``; first of all with ``regrade``), else the judging
        order's next pair (pool order without one), moved to position ``handed``."""
        pair = self._agreement_pair() if self.regrade else None
        pair = pair or self._gate_pair() or self._agreement_pair() or self._ordered_pair()
        if pair is None:
            return None
        if self.strategy is not None:
            self.strategy.hand_out(pair)
        at, to = self._position[pair], self.handed
        self.pairs[at], self.pairs[to] = self.pairs[to], self.pairs[at]
        self._position[self.pairs[at]], self._position[pair] = at, to
        self.handed += 1
        return to

    def record(self, query_id: str, doc_id: str, grade: int) -> None:
        """Note a grade just stored (``Store.put_judgment``), so the queue need not be rebuilt."""
        with self._lock:
            self._grades[(query_id, doc_id)] = grade
            if self.strategy is not None:
                self.strategy.record((query_id, doc_id), grade)

    def forget(self, query_id: str, doc_id: str) -> None:
        """Note a grade deleted from the store (``sync``: by another session): the pair is unjudged again."""
        with self._lock:
            self._grades.pop((query_id, doc_id), None)

    def sync(self, judged: dict[Pair, int]) -> None:
        """Take the judge's grades as stored now (``judged_pairs``): those made or deleted elsewhere
        (another session's queue) are noted as ``record`` and ``forget`` do."""
        with self._lock:
            for pair, grade in judged.items():
                if self._grades.get(pair) != grade:
                    self.record(*pair, grade)
            for pair in [p for p in self._grades if p not in judged]:
                self.forget(*pair)

    def retrieved_by(self, position: int) -> dict[str, int]:
        """``{system: 1-based rank}`` of the systems whose whole list for the query holds the pair's
        document, in system-name order (the ones that pooled it rank it within the pool depth)."""
        qid, doc = self.pairs[position]
        found = {name: ranks(self._runs[name].get(qid, [])).get(doc) for name in sorted(self._runs)}
        return {name: rank for name, rank in found.items() if rank is not None}


@dataclass(frozen=True)
class Joined:
    """Systems that joined a judging queue (``Queue.add_runs``): their names, how many of their
    top-``k`` pairs were unjudged and not yet handed out, and whether those go ``first`` (not when
    the queue is aimed at one pair of other systems)."""

    systems: tuple[str, ...]
    pairs: int
    first: bool
    k: int


def queue(runs: dict[str, Run], query_ids: Iterable[str], judged: dict[Pair, int], k: int = DEPTH,
          p: float = PERSISTENCE, sample: Sample | None = None, order: str | None = None,
          interest: list[tuple[str, str]] | None = None, others: dict[Pair, int] | None = None,
          regrade: bool = False) -> Queue:
    """The judging queue over ``query_ids``: ``pool`` at depth ``k``, queries in ``order_queries``
    order; ``judged`` holds the grades made so far (``judged_pairs`` of the judgments' qrels);
    ``sample``: the ``sampling.Sample`` the query ids are, when they are one (one whose order is the
    judging order, ``Sample.in_order``, keeps its queries in that order, judged query by query:
    "depth" unless ``order`` says otherwise); ``order``: the
    ``order`` strategy that picks the next pair (default ``order.DEFAULT``; "pool"
    for pool order), aimed at the ``interest`` pairs of systems (default: every pair); ``others``:
    the pairs other judges graded, re-graded only for agreement unless ``regrade`` (``Queue``)."""
    query_ids = list(query_ids)
    ordered = order_queries(runs, query_ids, k, p)
    if sample is not None and sample.in_order:  # the sample's order is the judging order (hardest first)
        place = {q: i for i, q in enumerate(query_ids)}
        ordered, order = sorted(ordered, key=lambda item: place[item[0]]), order or "depth"
    strategy = None
    known = judged if regrade else {**(others or {}), **judged}  # the order learns from every judge's grades
    if order != "pool":
        strategy = judging_order.make(order or judging_order.DEFAULT, runs, [q for q, _ in ordered], k, known,
                                      interest)
    pools = strategy.pools if strategy is not None else pool(runs, query_ids, k)  # made once
    made = Queue(runs, ordered, pools, judged, sample, strategy, others, regrade)
    made.k, made.p, made.order, made.interest = k, p, order, interest
    return made


# ---- judgments as relevance labels -------------------------------------------------------------
def grades_by_pair(rows: list[dict[str, Any]], judge: str | None = None) -> dict[Pair, dict[str, int]]:
    """(query id, doc id) -> {judge: grade} from store rows (``Store.judgments``), in row order, so
    a later row of the same judge and pair replaces an earlier one."""
    grades: dict[Pair, dict[str, int]] = {}
    for row in rows:
        if judge is None or row["judge"] == judge:
            grades.setdefault((row["query_id"], row["doc_id"]), {})[row["judge"]] = int(row["grade"])
    return grades


def judgments_to_qrels(rows: list[dict[str, Any]], judge: str | None = None, rule: str = "median") -> Qrels:
    """Relevance labels (query id -> doc id -> grade) from judgment rows (``Store.judgments``).

    With ``judge``, that judge's grades. Without, a pair judged by several judges gets one grade by
    ``rule`` (``merged_grade``); the default, the lower median (``statistics.median_low``), is the
    highest grade that more than half of them give at least, so a pair counts as relevant only when
    a majority says so, whatever the order the grades were made in.
    """
    qrels: Qrels = {}
    for (qid, doc), by_judge in grades_by_pair(rows, judge).items():
        qrels.setdefault(qid, {})[doc] = merged_grade(list(by_judge.values()), rule)
    return qrels


def merged_grade(grades: list[int], rule: str = "median") -> int:
    """One grade from several judges' grades of a pair, by ``rule`` (``MERGE_RULES``): ``median``
    (the lower median), ``majority`` (the most frequent grade, the lower on a tie), ``min`` (strict:
    any judge's "not relevant" wins), ``max`` (lenient)."""
    ordered = sorted(grades)
    if rule == "median":
        return median_low(ordered)
    if rule == "majority":
        counts = Counter(ordered)
        top = max(counts.values())
        return min(g for g, c in counts.items() if c == top)
    if rule == "min":
        return ordered[0]
    if rule == "max":
        return ordered[-1]
    raise ValueError(f"unknown merge rule {rule!r}; choose from {', '.join(MERGE_RULES)} or a judge's name")


def merged_qrels(rows: list[dict[str, Any]], rule: str = "median") -> Qrels:
    """Stored judgments as qrels: every judge's grades merged by ``rule`` (``MERGE_RULES``), or,
    when ``rule`` names a judge, that judge's grades alone (``judgments_to_qrels``)."""
    if rule in MERGE_RULES:
        return judgments_to_qrels(rows, rule=rule)
    judges = sorted({r["judge"] for r in rows})
    if rule not in judges:
        raise ValueError(f"unknown merge rule {rule!r}; choose from {', '.join(MERGE_RULES)} or a judge's name "
                         f"({', '.join(judges) or 'none yet'})")
    return judgments_to_qrels(rows, judge=rule)


def disagreements(rows: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, int]]]:
    """``[(query id, doc id, {judge: grade})]`` for the pairs judges graded differently: the ones to
    adjudicate, the widest spread of grades first (a 0 against a 2 before a 1 against a 2), then by
    query id and document id."""
    return sorted(((qid, doc, by_judge) for (qid, doc), by_judge in grades_by_pair(rows).items()
                   if len(set(by_judge.values())) > 1),
                  key=lambda t: (min(t[2].values()) - max(t[2].values()), t[0], t[1]))


def judged_pairs(qrels: Qrels) -> dict[Pair, int]:
    """Labels as ``{(query id, doc id): grade}``, the shape ``queue`` takes."""
    return {(qid, doc): grade for qid, docs in qrels.items() for doc, grade in docs.items()}


def merge_labels(imported: Qrels, judged: Qrels, prefer: str = "imported") -> Qrels:
    """Imported labels and judgments together: a pair only one side labels keeps that label; a pair
    both label takes the imported grade unless ``prefer="judgments"``. The inputs are not changed."""
    if prefer not in PREFER:
        raise ValueError(f"prefer must be one of {', '.join(PREFER)}, not {prefer!r}")
    base, winner = (judged, imported) if prefer == "imported" else (imported, judged)
    merged: Qrels = {qid: dict(docs) for qid, docs in base.items()}
    for qid, docs in winner.items():
        merged.setdefault(qid, {}).update(docs)
    return merged
