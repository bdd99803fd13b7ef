"""In what order to judge: strategies that pick the next (query, document) pair to grade from the
systems' depth-k pools, and the weights that aim them at the comparisons of the systems on show.

A strategy is built over the systems' runs, the queries to judge (in the order given: a file's, or
a sample's) and the pool depth k; ``next()`` is the pair to grade next (None when every pooled pair
is graded) and ``record(pair, grade)`` tells it the grade. The grades made before are passed in
and never asked again. ``bench/judging_effort.py`` measures them all with a simulated judge; the
app's judging queue uses ``DEFAULT``.

* ``depth`` — depth-k pooling as tools do it: queries in order, each query's whole pool (best rank
  over the systems first) before the next query. The baseline.
* ``mtf`` — move-to-front pooling (Cormack, Palmer and Clarke, "Efficient Construction of Large
  Test Collections", SIGIR 1998): per query, the systems in a queue; the system at the front gives
  its next unjudged document; a relevant one keeps it at the front, a non-relevant one sends it to
  the back. The queries take turns, one judgment each per round (an equal budget per query, as the
  paper gives each topic).
* ``bandit`` — multi-armed-bandit adjudication (Losada, Parapar and Barreiro, "Multi-armed bandits
  for adjudicating documents in pooling-based evaluation of information retrieval systems",
  Information Processing & Management 53(5), 2017): per query the systems are arms, pulling one
  judges its next unjudged document, the reward is its relevance; the arm pulled is the one with
  the largest posterior mean relevance, Beta(1 + relevant, 1 + non-relevant) (their MaxMean rule,
  without the non-stationary discount of MM-NS). The queries take turns as with ``mtf``.
* ``mtc`` — Minimal Test Collections (Carterette, Allan and Sitaraman, "Minimal Test Collections
  for Retrieval Evaluation", SIGIR 2006): a document's judgment changes the difference in
  DCG@k of systems a and b by its gain times ``w_a(d) − w_b(d)``, ``w_s(d) = 1/log₂(1 + rank of d
  in s)`` within the top k, else 0; a document both rank alike tells them nothing. The pair to judge
  next is the one with the largest Σ over the pairs of interest of |w_a(d) − w_b(d)|, over every
  query at once, so judgments go where the systems' lists differ most, spread over the queries.
* ``mtc-p`` — MTC's weight times the document's estimated probability of relevance (MTC as run over
  a thousand queries estimates such probabilities for unjudged documents: Carterette, Pavlu,
  Kanoulas, Aslam and Allan, "Evaluation over Thousands of Queries", SIGIR 2008; here they weigh
  the choice of the next pair): a document only changes a difference if it is relevant, so a document one
  system alone ranks first and the judges keep calling non-relevant stops drawing judgments. The
  probability is learned while judging: documents fall in classes by how many systems rank them in
  their top k and their best rank there; each class's relevance rate is a Beta posterior whose prior
  mean is the share of the systems that rank the document (strength 2: two grades outweigh it).
  Adaptive: every grade updates its class's rate, and the next pair is the largest weight × rate.
* ``mtc-ndcg`` — ``mtc-p`` with MTC's weight taken for the metric compared, nDCG@k, rather than DCG:
  a document's weight is Σ over the pairs of interest of how far the pair's nDCG@k difference on
  its query would move if the document were relevant, given the grades so far (its DCGs change by
  ``w_a(d)``, ``w_b(d)``, and the query's ideal DCG grows, shrinking every difference on it; a
  query with no relevant grade yet enters the mean with it). Judging a relevant document refreshes
  the weights of its query's pairs. The default.

``weights`` gives the MTC weights; ``interest`` lets the analyst aim at the pairs they pick (all
pairs of the systems on show by default). ``Focus`` keeps a strategy to some pairs and ``Chain`` runs
strategies one after another: a system that joins the judging queue late has its unjudged top k
judged first, aimed at the comparisons it is in (``judgments.Queue.add_runs``).
"""
from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Iterable

import numpy as np

from retrieval.data.run import Run
from retrieval.judging.grades import Pair
from retrieval.judging.pools import DEPTH, pool, top_ids

STRATEGIES = ("depth", "mtf", "bandit", "mtc", "mtc-p", "mtc-ndcg")
DEFAULT = "mtc-ndcg"  # chosen by bench/judging_effort.py (bench/README.md has the table)
PRIOR_STRENGTH = 2.0  # mtc-p: the Beta prior of a class of documents counts as two grades


def discounts(run: Run, query_id: str, k: int = DEPTH) -> dict[str, float]:
    """``{document: 1/log₂(1 + rank)}`` over the run's top ``k`` for the query (DCG's discount)."""
    return {doc: 1.0 / math.log2(rank + 1) for rank, doc in enumerate(top_ids(run, query_id, k), 1)}


def all_pairs(systems: Iterable[str]) -> list[tuple[str, str]]:
    """Every pair of the systems, each once."""
    return list(itertools.combinations(sorted(systems), 2))


def weights(runs: dict[str, Run], query_ids: Iterable[str], k: int = DEPTH,
            interest: list[tuple[str, str]] | None = None,
            pools: dict[str, list[str]] | None = None) -> dict[Pair, float]:
    """MTC's weight of every pooled pair: Σ over the ``interest`` pairs of systems (default: all)
    of |w_a(d) − w_b(d)| (module docstring); ``pools``: the queries' pools when already made."""
    interest = all_pairs(runs) if interest is None else interest
    out: dict[Pair, float] = {}
    pools = pool(runs, query_ids, k) if pools is None else pools
    for qid in query_ids:
        w = {name: discounts(run, qid, k) for name, run in runs.items()}
        for doc in pools[qid]:
            out[(qid, doc)] = sum(abs(w[a].get(doc, 0.0) - w[b].get(doc, 0.0)) for a, b in interest)
    return out


class _Order:
    """What every strategy shares: the pools, the grades made so far, the pairs still to grade."""

    def __init__(self, runs: dict[str, Run], query_ids: Iterable[str], k: int = DEPTH,
                 judged: dict[Pair, int] | None = None):
        self.runs, self.k = runs, k
        self.query_ids = list(dict.fromkeys(query_ids))
        self.pools = pool(runs, self.query_ids, k)
        self.grades: dict[Pair, int] = dict(judged or {})
        self.taken: set[Pair] = set()  # handed out (``hand_out``), graded or not: never offered again

    @property
    def pooled(self) -> int:
        return sum(len(p) for p in self.pools.values())

    def record(self, pair: Pair, grade: int) -> None:
        self.grades[pair] = grade

    def hand_out(self, pair: Pair) -> None:
        """The pair went to a judge (who may skip it): ``next`` never offers it again."""
        self.taken.add(pair)

    def done(self, pair: Pair) -> bool:
        return pair in self.grades or pair in self.taken

    def next(self) -> Pair | None:  # pragma: no cover - every strategy overrides it
        raise NotImplementedError


class Static(_Order):
    """A fixed order of the pooled pairs (``depth``, ``mtc``): the first not yet graded."""

    def __init__(self, runs: dict[str, Run], query_ids: Iterable[str], k: int = DEPTH,
                 judged: dict[Pair, int] | None = None,
                 order: list[Pair] | None = None):
        super().__init__(runs, query_ids, k, judged)
        self.order = order if order is not None else [(q, d) for q in self.query_ids for d in self.pools[q]]
        self._at = 0

    def next(self) -> Pair | None:
        while self._at < len(self.order) and self.done(self.order[self._at]):
            self._at += 1
        return self.order[self._at] if self._at < len(self.order) else None


def depth_order(runs: dict[str, Run], query_ids: Iterable[str], k: int = DEPTH,
                judged: dict[Pair, int] | None = None) -> Static:
    return Static(runs, query_ids, k, judged)


def mtc_order(runs: dict[str, Run], query_ids: Iterable[str], k: int = DEPTH, judged: dict[Pair, int] | None = None,
              interest: list[tuple[str, str]] | None = None) -> Static:
    """The pooled pairs by MTC weight, the largest first; ties in the queries' order, then pool order."""
    base = Static(runs, query_ids, k, judged)
    w = weights(runs, base.query_ids, k, interest, base.pools)
    place = {pair: i for i, pair in enumerate(base.order)}
    base.order = sorted(base.order, key=lambda pair: (-round(w[pair], 12), place[pair]))
    return base


class _PerQuery(_Order):
    """The queries take turns, one judgment each per round; within a query the systems are picked
    by ``_pick`` and give their next unjudged document of the pool."""

    def __init__(self, runs: dict[str, Run], query_ids: Iterable[str], k: int = DEPTH,
                 judged: dict[Pair, int] | None = None):
        super().__init__(runs, query_ids, k, judged)
        self.lists = {q: {name: top_ids(run, q, k) for name, run in sorted(runs.items())} for q in self.query_ids}
        self._turn = deque(q for q in self.query_ids if self.pools[q])
        self._last: dict[Pair, list[str]] = {}  # a pair handed out -> the systems it came from

    def _candidates(self, qid: str) -> dict[str, str]:
        """Each system's next unjudged document for the query (systems with none left omitted)."""
        out = {}
        for name, docs in self.lists[qid].items():
            doc = next((d for d in docs if not self.done((qid, d))), None)
            if doc is not None:
                out[name] = doc
        return out

    def next(self) -> Pair | None:
        while self._turn:
            qid = self._turn[0]
            cands = self._candidates(qid)
            if not cands:
                self._turn.popleft()
                continue
            self._turn.rotate(-1)
            name = self._pick(qid, cands)
            pair = (qid, cands[name])
            self._last[pair] = [n for n, d in cands.items() if d == cands[name]]
            return pair
        return None

    def record(self, pair: Pair, grade: int) -> None:
        super().record(pair, grade)
        for name in self._last.pop(pair, []):
            self._reward(pair[0], name, grade > 0)

    def _pick(self, qid: str, cands: dict[str, str]) -> str:  # pragma: no cover
        raise NotImplementedError

    def _reward(self, qid: str, name: str, relevant: bool) -> None:  # pragma: no cover
        raise NotImplementedError


class MoveToFront(_PerQuery):
    def __init__(self, runs: dict[str, Run], query_ids: Iterable[str], k: int = DEPTH,
                 judged: dict[Pair, int] | None = None):
        super().__init__(runs, query_ids, k, judged)
        self.front = {q: list(self.lists[q]) for q in self.query_ids}

    def _pick(self, qid: str, cands: dict[str, str]) -> str:
        return next(name for name in self.front[qid] if name in cands)

    def _reward(self, qid: str, name: str, relevant: bool) -> None:
        if not relevant:  # a non-relevant document sends its system to the back
            self.front[qid].remove(name)
            self.front[qid].append(name)


class Bandit(_PerQuery):
    def __init__(self, runs: dict[str, Run], query_ids: Iterable[str], k: int = DEPTH,
                 judged: dict[Pair, int] | None = None):
        super().__init__(runs, query_ids, k, judged)
        self.hits = {q: {name: [0, 0] for name in self.lists[q]} for q in self.query_ids}

    def _pick(self, qid: str, cands: dict[str, str]) -> str:
        def mean(name: str) -> float:
            rel, non = self.hits[qid][name]
            return (1 + rel) / (2 + rel + non)
        return max(cands, key=lambda name: (mean(name), -list(self.lists[qid]).index(name)))

    def _reward(self, qid: str, name: str, relevant: bool) -> None:
        self.hits[qid][name][0 if relevant else 1] += 1


class ExpectedMTC(_Order):
    """``mtc-p`` (module docstring): MTC's weight of each pooled pair times its class's estimated
    relevance rate, the rates updated grade by grade."""

    def __init__(self, runs: dict[str, Run], query_ids: Iterable[str], k: int = DEPTH,
                 judged: dict[Pair, int] | None = None,
                 interest: Iterable[tuple[str, str]] | None = None, strength: float = PRIOR_STRENGTH):
        super().__init__(runs, query_ids, k, judged)
        self.pairs = [(q, d) for q in self.query_ids for d in self.pools[q]]
        self._index = {pair: i for i, pair in enumerate(self.pairs)}
        self.interest = all_pairs(runs) if interest is None else list(interest)
        classes: dict[tuple[int, int], int] = {}
        prior: list[float] = []
        self._class = np.zeros(len(self.pairs), dtype=int)
        ranked = {q: [top_ids(run, q, k) for run in runs.values()] for q in self.query_ids}
        for i, (q, doc) in enumerate(self.pairs):
            ranks = [lst.index(doc) + 1 for lst in ranked[q] if doc in lst]
            key = (len(ranks), min(ranks))
            if key not in classes:
                classes[key] = len(classes)
                prior.append(len(ranks) / max(1, len(runs)))
            self._class[i] = classes[key]
        mean = np.array(prior)
        self._rel, self._non = mean * strength, (1 - mean) * strength
        self._open = np.ones(len(self.pairs), dtype=bool)
        self.weight = self._weights()
        for pair, grade in self.grades.items():
            self._learn(pair, grade)

    def _weights(self) -> np.ndarray:
        w = weights(self.runs, self.query_ids, self.k, self.interest, self.pools)
        return np.array([w[pair] for pair in self.pairs])

    def rate(self) -> np.ndarray:
        """Each pooled pair's estimated probability of relevance (its class's posterior mean)."""
        return (self._rel / (self._rel + self._non))[self._class]

    def next(self) -> Pair | None:
        if not self._open.any():
            return None
        priority = np.where(self._open, self.rate() * self.weight, -1.0)
        return self.pairs[int(np.argmax(priority))]  # the first of equals: queries' order, then pool order

    def hand_out(self, pair: Pair) -> None:
        super().hand_out(pair)
        if pair in self._index:
            self._open[self._index[pair]] = False

    def record(self, pair: Pair, grade: int) -> None:
        first = pair not in self.grades
        super().record(pair, grade)
        if first:
            self._learn(pair, grade)

    def _learn(self, pair: Pair, grade: int) -> None:
        """A pair's first grade: its class's rate learns from it (a pooled pair's)."""
        if pair not in self._index:
            return
        i = self._index[pair]
        self._open[i] = False
        if grade > 0:
            self._rel[self._class[i]] += 1
        else:
            self._non[self._class[i]] += 1


class NdcgMTC(ExpectedMTC):
    """``mtc-ndcg`` (module docstring): the weight of a pair is how much each comparison's nDCG@k
    difference on its query would move if the document were relevant (gain 1, the lowest relevant
    grade), given the grades so far — recomputed for a query's pairs whenever it gets a relevant
    grade — times its class's estimated relevance rate."""

    GAIN = 1.0

    def _weights(self) -> np.ndarray:
        names = sorted(self.runs)
        at = {name: i for i, name in enumerate(names)}
        self._a = np.array([at[a] for a, _ in self.interest], dtype=int)
        self._b = np.array([at[b] for _, b in self.interest], dtype=int)
        self._ideal = 1.0 / np.log2(np.arange(2, self.k + 2))
        disc = {q: [discounts(self.runs[name], q, self.k) for name in names] for q in self.query_ids}
        self._disc = disc
        self._vectors = np.array([[d.get(doc, 0.0) for d in disc[q]] for q, doc in self.pairs]).reshape(
            len(self.pairs), len(names))
        of_query: dict[str, list[int]] = {}
        for i, (q, _) in enumerate(self.pairs):
            of_query.setdefault(q, []).append(i)
        self._of_query = {q: np.array(rows, dtype=int) for q, rows in of_query.items()}
        self._dcg = {q: np.zeros(len(names)) for q in self.query_ids}
        self._relevant: dict[str, list[float]] = {q: [] for q in self.query_ids}
        self.weight = np.zeros(len(self.pairs))
        for q in self._of_query:
            self._refresh(q)
        return self.weight

    def _idcg(self, grades: list[float]) -> float:
        top = sorted(grades, reverse=True)[:self.k]
        return float(np.dot(top, self._ideal[:len(top)]))

    def _refresh(self, q: str) -> None:
        """The weights of the query's pairs from its DCGs and relevant grades so far."""
        rows = self._of_query[q]
        before = self._idcg(self._relevant[q])
        after = self._idcg(self._relevant[q] + [self.GAIN])
        moved = (self._dcg[q] + self.GAIN * self._vectors[rows]) / after
        diff = moved[:, self._a] - moved[:, self._b]
        if before > 0:
            now = self._dcg[q] / before
            diff = diff - (now[self._a] - now[self._b])
        self.weight[rows] = np.abs(diff).sum(axis=1)

    def _learn(self, pair: Pair, grade: int) -> None:
        super()._learn(pair, grade)
        q, doc = pair
        if grade <= 0 or q not in self._dcg:
            return
        self._dcg[q] += grade * np.array([d.get(doc, 0.0) for d in self._disc[q]])
        self._relevant[q].append(float(grade))
        if q in self._of_query:
            self._refresh(q)


class Focus:
    """A strategy kept to some of the pooled pairs (``pairs``, e.g. a system's that just joined the
    pool): ``inner`` orders them as it orders all, the others are never offered. The judging queue
    puts one before the strategy over every pair (``Chain``) when a system joins it."""

    def __init__(self, inner: _Order, pairs: Iterable[Pair]):
        self.inner, self.pairs = inner, set(pairs)
        for qid in inner.query_ids:
            for doc in inner.pools[qid]:
                if (qid, doc) not in self.pairs:
                    inner.hand_out((qid, doc))

    @property
    def pools(self) -> dict[str, list[str]]:
        return self.inner.pools

    def next(self) -> Pair | None:
        return self.inner.next()

    def hand_out(self, pair: Pair) -> None:
        self.inner.hand_out(pair)

    def record(self, pair: Pair, grade: int) -> None:
        self.inner.record(pair, grade)


class Chain:
    """Strategies one after another: the first's pairs while it has any, then the next's; every
    hand-out and grade is told to each, so none offers a pair again."""

    def __init__(self, *orders: _Order | Focus):
        self.orders = orders

    @property
    def pools(self) -> dict[str, list[str]]:
        return self.orders[-1].pools

    def next(self) -> Pair | None:
        for order in self.orders:
            pair = order.next()
            if pair is not None:
                return pair
        return None

    def hand_out(self, pair: Pair) -> None:
        for order in self.orders:
            order.hand_out(pair)

    def record(self, pair: Pair, grade: int) -> None:
        for order in self.orders:
            order.record(pair, grade)


def make(strategy: str, runs: dict[str, Run], query_ids: Iterable[str], k: int = DEPTH,
         judged: dict[Pair, int] | None = None,
         interest: list[tuple[str, str]] | None = None) -> _Order:
    """The ``strategy`` (one of ``STRATEGIES``) over these runs and queries."""
    if strategy == "depth":
        return depth_order(runs, query_ids, k, judged)
    if strategy == "mtf":
        return MoveToFront(runs, query_ids, k, judged)
    if strategy == "bandit":
        return Bandit(runs, query_ids, k, judged)
    if strategy == "mtc":
        return mtc_order(runs, query_ids, k, judged, interest)
    if strategy == "mtc-p":
        return ExpectedMTC(runs, query_ids, k, judged, interest)
    if strategy == "mtc-ndcg":
        return NdcgMTC(runs, query_ids, k, judged, interest)
    raise ValueError(f"unknown judging order {strategy!r}; choose from {', '.join(STRATEGIES)}")
