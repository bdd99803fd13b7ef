"""What a retrieval system is: the ``System`` protocol every built-in and imported system meets,
and the ``Probe`` a typed query is searched through, once, for every system on show.

A system is an object with a key (what runs and metrics are cached under, what the API and the
CLI name), a long and a short label, what it needs (``Needs``: BM25, the dense index, its own
sparse vectors, or nothing but its run file), and four behaviours, each given the ``Workspace``
whose data and indexes it ranks:

* ``params(ws, split)`` — everything its results depend on, the cache key beside the data set,
  split and depth (an encoder's fingerprint, λ and how it was chosen, BM25's settings, an engine);
* ``search(ws, queries, k, split)`` — a ``Run`` for a query set (``split``: the split evaluated,
  which a hybrid's λ is chosen for);
* ``exact_scores(ws, split, rows, queries)`` — the system's score of chosen documents, retrieved
  or not (the judged ones, for PNR), or None where it has none;
* ``one(ws, probe, k, split)`` — one typed query's ranked list from what the probe already
  computed (the Search view searches each index once for all its columns);

and ``explain(ws, probe, row)``, what made it rank a document (its terms and their weights), or
None where BM25's per-term explanation, which every hit carries, is all there is.

What it keeps per corpus (an index) or per workspace (the CLEAR hybrid's λ) it keeps in a slot of
the workspace (``Workspace.system_state``, ``retrieval.systems.state``), which the memory budget
counts; an index built in the background it asks for with ``Workspace.background_build`` and names
in ``waits_for(ws)``, so that the views leave the system out until it is built. ``shown_by_default``:
whether the views and the CLI list it unless asked otherwise. ``SystemBase`` gives the defaults
(shown, nothing to wait for, no exact scores, no explanation).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from retrieval.data.run import Run

if TYPE_CHECKING:
    from retrieval.index.builds import IndexBuild
    from retrieval.index.splade import TermScore
    from retrieval.workspace import Workspace

Hits = list[tuple[str, float]]


@dataclass(frozen=True)
class Needs:
    """What a system reads to answer: the engine's BM25, the dense index (and its encoder), its
    own sparse index, an imported run's lists."""

    lexical: bool = False
    vectors: bool = False
    sparse: bool = False
    run: bool = False


@runtime_checkable
class System(Protocol):
    key: str
    label: str  # "Hybrid (CLEAR λ)"
    short: str  # "hybrid", in rank lines such as "BM25 — → dense 3"
    needs: Needs
    shown_by_default: bool  # listed by every view and the CLI unless the analyst picks otherwise

    def params(self, ws: Workspace, split: str | None) -> dict: ...  # noqa: E704

    def search(self, ws: Workspace, queries: dict[str, str], k: int, split: str | None) -> Run: ...  # noqa: E704

    def exact_scores(self, ws: Workspace, split: str, rows: dict[str, list[int]],  # noqa: E704
                     queries: dict[str, str]) -> dict[str, dict[str, float]] | None: ...

    def one(self, ws: Workspace, probe: Probe, k: int, split: str | None) -> Hits: ...  # noqa: E704

    def explain(self, ws: Workspace, probe: Probe, row: int) -> list[TermScore] | None: ...  # noqa: E704

    def waits_for(self, ws: Workspace) -> tuple[IndexBuild, ...]: ...  # noqa: E704


class SystemBase:
    """The defaults of a ``System``: shown by default, no background build to wait for, no exact
    scores of its own, no explanation beyond BM25's."""

    shown_by_default = True

    def exact_scores(self, ws: Workspace, split: str, rows: dict[str, list[int]],
                     queries: dict[str, str]) -> dict[str, dict[str, float]] | None:
        return None

    def explain(self, ws: Workspace, probe: Probe, row: int) -> list[TermScore] | None:
        return None

    def waits_for(self, ws: Workspace) -> tuple[IndexBuild, ...]:
        """The background builds it needs (``Workspace.background_build``; the dense index's, the
        learned sparse one's): while one runs, the system cannot answer (``Workspace.pending``)."""
        return ()


class Probe:
    """One typed query, searched once: BM25's list, the query's vector and the dense index's rows
    to ``depth``, each computed the first time a system asks and shared by the rest (not cached in
    the store: a typed query is seldom typed again)."""

    def __init__(self, ws: Workspace, text: str, depth: int, query_id: str | None = None):
        self.ws, self.text, self.depth, self.query_id = ws, text, depth, query_id

    @cached_property
    def lexical(self) -> Hits:
        return self.ws.lexical.search({"q": self.text}, self.depth)["q"]

    @cached_property
    def vector(self) -> np.ndarray:
        return self.ws.dense.encode_query(self.text)

    @cached_property
    def dense_rows(self) -> np.ndarray:
        """The dense index's top ``depth`` rows (``-1``: no hit), with their scores (``dense_scores``)."""
        scores, rows = self.ws.dense.index.search_vectors(self.vector[None], self.depth)
        self.dense_scores = scores[0]
        return rows[0]

    @cached_property
    def sparse(self):
        """The query's learned sparse vector (``retrieval.index.splade``: term ids and weights)."""
        return self.ws.sparse.encode_query(self.text)

    @cached_property
    def dense(self) -> Hits:
        rows, ids = self.dense_rows, self.ws.dense.index.doc_ids
        return [(ids[j], float(v)) for j, v in zip(rows, self.dense_scores) if j >= 0]
