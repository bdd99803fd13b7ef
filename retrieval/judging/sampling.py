"""Which queries to judge when there are too many: a query log of 50,000 lines is sampled before it
is judged, and the sample is stored so the same queries come back (to the same judge on another
day, to a second judge) and the draw can be repeated from its seed.

Methods (``METHODS``):

* ``all`` — every query of the data set (small query sets);
* ``random`` — ``size`` queries drawn uniformly (seeded);
* ``frequency`` — drawn with probability proportional to a count column of the queries file
  (``count``, ``frequency``, ``freq``, ``clicks`` or ``impressions``: ``Dataset.query_fields``),
  without replacement (Efraimidis and Spirakis, "Weighted random sampling with a reservoir",
  Information Processing Letters 97(5), 2006: the ``size`` largest u^(1/w)), so head queries are
  judged first, as search-relevance workbenches sample user-behaviour logs;
* ``stratified`` — by how much the systems disagree: ``OVERSAMPLE`` × ``size`` queries drawn at
  random, their disagreement measured (``disagreement``: 1 − mean RBO of the systems' top lists),
  split into ``STRATA`` equal-count strata, and the same number drawn from each, so queries the
  systems agree on are judged too, not only the contested ones;
* ``predicted`` — the queries predicted to fail first: the ``size`` queries of the highest predicted
  difficulty (query performance prediction, ``retrieval.qpp``: 1 − the systems' mean predicted
  performance), hardest first, ties by query id, kept in that order so the judging queue opens them
  hardest first (``Sample.in_order``). The difficulty comes in as a ``Difficulty``: the predictions'
  key (the systems, the predictors' version, the labels they were fitted on) and a callback from query
  ids to their difficulty, so judging stays below the workspace that computes it.

A sample is keyed by the corpus and its id (a hash of method, size, seed and the query ids it was
drawn from; for ``predicted``, of the predictions' key too, so other systems or another version of
the predictors draw anew); a judge asking for the same method, size and seed gets the stored sample back
(``sample_for``), even after queries were added to the corpus. On a shared deployment a sample is
its drawer's (``viewer``): it holds the ids of the queries its session sees, its own private ones
among them, so no other session reads it back (which of its own queries a sample keeps would tell of
another's).
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from retrieval import numbers
from retrieval.data.dataset import Dataset
from retrieval.store import Store, cache_key

if TYPE_CHECKING:
    from retrieval.sharing.owners import Viewer

METHODS = ("all", "random", "frequency", "stratified", "predicted")
IN_ORDER = ("predicted",)  # samples whose order is the judging order of their queries (hardest first)
COUNT_FIELDS = ("count", "frequency", "freq", "clicks", "impressions")
OVERSAMPLE = 5
STRATA = 4
DEFAULT_SIZE = 200
ALL_UP_TO = 1_000  # the default judges every query up to this many, and samples beyond


@dataclass
class Sample:
    id: str
    method: str
    size: int
    seed: int
    query_ids: list[str]
    drawn: int = 0  # how many queries were drawn (``size`` counts those the data set still has)

    def __post_init__(self) -> None:
        self.drawn = self.drawn or self.size

    @property
    def in_order(self) -> bool:
        """Whether the queue opens the queries in the sample's order (``IN_ORDER``: hardest first)
        rather than by the judging order's choice."""
        return self.method in IN_ORDER


@dataclass(frozen=True)
class Difficulty:
    """What a ``predicted`` sample is drawn by: ``key``, a hash of what the predictions depend on (the
    systems, the predictors' version, the labels a fitted combination used), and ``of``, query ids ->
    {query id: predicted difficulty} (higher: more likely to fail)."""

    key: str
    of: Callable[[list[str]], dict[str, float]]


MAX_SEED = 2**63 - 1  # the store keeps a sample's seed as SQLite's signed 64-bit integer


def check_seed(value: object) -> int:
    """A sample's seed: a whole number from 0 to ``MAX_SEED`` (None or blank: 0), as an integer, an
    integral float or their text; a ValueError in one line naming the range otherwise (a negative,
    fractional, NaN, infinite or larger seed, a boolean)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return 0
    try:
        number: int | None = numbers.whole(value, "a sample's seed")
    except ValueError:
        number = None
    if number is None or not 0 <= number <= MAX_SEED:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "…"
        raise ValueError(f"a sample's seed is a whole number from 0 to {MAX_SEED:,} (2^63 − 1), not {shown}")
    return number


def default_method(dataset: Dataset) -> str:
    """``all`` for up to ``ALL_UP_TO`` queries, else ``random``."""
    return "all" if len(dataset.queries) <= ALL_UP_TO else "random"


def count_field(dataset: Dataset) -> str | None:
    """The queries file's count column (``COUNT_FIELDS``, any case), when it has one."""
    names = {k.lower(): k for fields in dataset.query_fields.values() for k in fields}
    return next((names[c] for c in COUNT_FIELDS if c in names), None)


def counts_of(dataset: Dataset) -> dict[str, float]:
    """Each query's count (``count_field``: a number by the one number grammar, ``retrieval.numbers``,
    its thousands separated by "," or not); a missing, unreadable or non-positive count counts 1."""
    name = count_field(dataset)
    if name is None:
        raise ValueError(f"the queries have no count column ({', '.join(COUNT_FIELDS)}) to weight the sample by")
    out = {}
    for qid in dataset.queries:
        raw = dataset.query_fields.get(qid, {}).get(name, "")
        try:
            value = numbers.number(raw.replace(",", ""))
        except ValueError:
            value = 1.0
        out[qid] = value if value > 0 else 1.0
    return out


def sample_id(method: str, size: int, seed: int, ids: list[str], difficulty: Difficulty | None = None) -> str:
    """A sample's id: a hash of how it was drawn and the (sorted) query ids it was drawn from, and for
    ``predicted`` the predictions' key (``Difficulty.key``)."""
    basis = {"basis": difficulty.key} if method == "predicted" and difficulty is not None else {}
    return cache_key(method=method, size=size, seed=seed, ids=cache_key(ids=ids), **basis)[:16]


def hardest(ids: list[str], size: int, difficulty: Difficulty) -> list[str]:
    """The ``size`` queries of the highest difficulty, hardest first, ties by query id (one without a
    prediction counts as the easiest)."""
    scores = difficulty.of(list(ids))
    return sorted(ids, key=lambda q: (-scores.get(q, float("-inf")), q))[:size]


def draw(dataset: Dataset, method: str, size: int = DEFAULT_SIZE, seed: int = 0,
         disagreement: Callable[[list[str]], dict[str, float]] | None = None,
         difficulty: Difficulty | None = None) -> Sample:
    """The sample (``method``: ``METHODS``) of ``size`` queries of ``dataset``; ``disagreement``
    (query ids -> {query id: disagreement}) is needed for ``stratified`` only, ``difficulty`` for
    ``predicted`` only (which keeps its method, hardest first, even when it takes every query).
    ``ValueError`` for an unknown method, a size under 1, ``frequency`` without a count column, or
    ``predicted`` without a difficulty."""
    if method not in METHODS:
        raise ValueError(f"unknown sampling method {method!r}; choose from {', '.join(METHODS)}")
    ids = sorted(dataset.queries)
    if method == "predicted":
        if size < 1:
            raise ValueError(f"a sample needs at least 1 query, not {size}")
        if difficulty is None:
            raise ValueError("a sample of the queries predicted to fail needs their predicted difficulty")
        picked = hardest(ids, size, difficulty)
    elif method == "all" or size >= len(ids):
        picked, method = ids, ("all" if method == "all" or size >= len(ids) else method)
    elif size < 1:
        raise ValueError(f"a sample needs at least 1 query, not {size}")
    elif method == "random":
        picked = random.Random(seed).sample(ids, size)
    elif method == "frequency":
        counts = counts_of(dataset)
        rng = np.random.default_rng(seed)
        keys = rng.random(len(ids)) ** (1.0 / np.array([counts[q] for q in ids]))
        picked = [ids[i] for i in np.argsort(-keys, kind="stable")[:size]]
    else:  # stratified
        if disagreement is None:
            raise ValueError("a stratified sample needs the systems' disagreement")
        pool = random.Random(seed).sample(ids, min(len(ids), OVERSAMPLE * size))
        scores = disagreement(pool)
        ordered = sorted(pool, key=lambda q: (scores.get(q, 0.0), q))
        strata = [ordered[i * len(ordered) // STRATA:(i + 1) * len(ordered) // STRATA] for i in range(STRATA)]
        strata_rng = random.Random(seed + 1)
        per = [size // STRATA + (1 if i < size % STRATA else 0) for i in range(STRATA)]
        picked = [q for stratum, n in zip(strata, per) for q in strata_rng.sample(stratum, min(n, len(stratum)))]
    return Sample(sample_id(method, len(picked), seed, ids, difficulty), method, len(picked), seed, picked)


def keep(store: Store | None, dataset: Dataset, sample: Sample, viewer: Viewer | None = None) -> None:
    """Store the sample with the corpus (``all`` needs no storing), ``viewer``'s on a shared deployment."""
    if store is not None and sample.method != "all":
        store.put_sample(dataset.corpus_hash, sample.id, sample.method, sample.seed, sample.query_ids,
                         owner=viewer.filter if viewer is not None and viewer.filter is not None else "")


def sample_for(store: Store | None, dataset: Dataset, method: str, size: int = DEFAULT_SIZE, seed: int = 0,
               disagreement: Callable[[list[str]], dict[str, float]] | None = None,
               viewer: Viewer | None = None, difficulty: Difficulty | None = None) -> Sample:
    """The sample a judge gets: the newest one stored for the corpus with this method, seed and
    size (its queries the data set still has), so queries added since do not reshuffle it; else a
    new draw (``draw``), stored (``keep``). A ``predicted`` sample comes back only for the same
    predictions' key and the same query ids (its id: ``sample_id``), its difficulty not computed
    again; other predictions, or queries added since, draw anew."""
    if method == "predicted" and difficulty is not None:
        ids = sorted(dataset.queries)
        wanted = sample_id(method, min(size, len(ids)), seed, ids, difficulty)
        found = next((kept for kept in stored(store, dataset, viewer) if kept.id == wanted), None)
        if found is not None:
            return found
    elif method not in ("all", "predicted"):
        for kept in stored(store, dataset, viewer):
            if (kept.method, kept.seed, kept.drawn) == (method, seed, size):
                return kept
    sample = draw(dataset, method, size, seed, disagreement, difficulty)
    keep(store, dataset, sample, viewer)
    return sample


def stored(store: Store | None, dataset: Dataset, viewer: Viewer | None = None) -> list[Sample]:
    """The corpus's stored samples ``viewer`` drew (on a shared deployment; else every one) whose
    queries the data set still has, newest first."""
    if store is None:
        return []
    out = []
    for row in store.samples(dataset.corpus_hash, viewer):
        qids = [q for q in row["query_ids"] if q in dataset.queries]
        if qids:
            out.append(Sample(row["id"], row["method"], len(qids), row["seed"], qids, len(row["query_ids"])))
    return out
