"""What a retrieval system is: the ``System`` protocol every built-in and imported system meets,
and the ``Probe`` a typed query is searched through, once, for every system on show.

A system is an object with a key (what runs and metrics are cached under, what the API and the
CLI name), a long and a short label, what it needs (``Needs``: BM25, the dense index, its own
sparse vectors, or nothing but its run file), and four behaviours, each given the workspace
whose data and indexes it ranks (as a ``reads.SystemWorkspace``: what a system reads of a ``Workspace``, so that
no system imports the workspace, which imports them):

* ``params(ws, split)`` — everything its results depend on, the cache key beside the data set,
  split and depth (an encoder's fingerprint, λ and how it was chosen, BM25's settings, an engine);
* ``search(ws, queries, k, split)`` — a ``Run`` for a query set (``split``: the split evaluated,
  which a hybrid's λ is chosen for);
* ``exact_scores(ws, split, rows, queries)`` — the system's score of chosen documents, retrieved
  or not (the judged ones, for PNR), or None where it has none;
* ``one(ws, probe, k, split)`` — one typed query's ranked list from what the probe already
  computed (the Search view searches each index once for all its columns);

and ``explain(ws, probe, row)``, what made it rank a document (its terms and their weights), or
None where BM25's per-term explanation, which every hit carries, is all there is; and
``explain_score(ws, probe, rows, split)``, for a system whose score is not a sum of terms, what carries
it: the dense encoder's query words and passages (``dense_why``), the CLEAR hybrid's λ split
(``hybrid_why``), or None.

What it keeps per corpus (an index) or per workspace (the CLEAR hybrid's λ) it keeps in a slot of
the workspace (``Workspace.system_state``, ``retrieval.systems.state``), which the memory budget
counts; an index built in the background it asks for with ``Workspace.background_build`` and names
in ``waits_for(ws)``, so that the views leave the system out until it is built. ``shown_by_default``:
whether the views and the CLI list it unless asked otherwise. ``SystemBase`` gives the defaults
(shown, nothing to wait for, no exact scores, no explanation).

Each system declares itself (``retrieval.systems.declared``): its typed ``parameters`` (name, kind,
default, range, doc), the ``citation`` of the paper it follows, its ``relations`` to the systems it
is built on, and its ``capabilities`` (exact scores, the kinds of terms it explains). The values of
its parameters live on the workspace (``Workspace.settings_of``), and ``SystemBase.params`` puts every
one of them into the cache key (``declared.keyed``) beside what ``cache_params`` names, so a new
parameter cannot be left out of it; the command line's ``--param``, the docs' systems table and the
contract tests read the declarations.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from retrieval.data.run import Run
from retrieval.systems.declared import Capabilities, Citation, Parameter, Relations, keyed

if TYPE_CHECKING:
    from typing import TypeAlias

    from retrieval.index.builds import IndexBuild
    from retrieval.index.searchable import SparseVector
    from retrieval.index.terms import TermScore
    from retrieval.systems.dense_why import DenseWhy
    from retrieval.systems.hybrid_why import HybridWhy
    from retrieval.systems.reads import SystemWorkspace

    ScoreWhy: TypeAlias = DenseWhy | HybridWhy  # what ``explain_score`` gives of one document

Hits = list[tuple[str, float]]


@dataclass(frozen=True)
class Weight:
    """A weight a system chose for a split (μ, say), and how it was chosen, in the words the
    library uses for λ (``clear_lambda``)."""

    name: str
    value: float
    how: str


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
    """A retrieval system (module docstring): what every built-in and imported system provides.

    Attributes:
        key: What its runs and metrics are cached under, and what the API and the CLI call it.
        label: Its long name, "Hybrid (CLEAR λ)".
        short: Its short name, in rank lines such as "BM25 — → dense 3".
        needs: What it reads to answer.
        shown_by_default: Whether every view and the CLI list it unless the analyst picks otherwise.
        parameters: Its typed parameters (``declared.Parameter``), whose values the workspace holds.
        citation: The paper it follows (None: none, an imported run).
        relations: The systems it is built on, and how.
        capabilities: What it gives beyond a ranked list (exact scores, the terms it explains).
    """

    key: str
    label: str  # "Hybrid (CLEAR λ)"
    short: str  # "hybrid", in rank lines such as "BM25 — → dense 3"
    needs: Needs
    shown_by_default: bool  # listed by every view and the CLI unless the analyst picks otherwise

    @property
    def parameters(self) -> tuple[Parameter, ...]: ...  # noqa: E704 - its typed parameters (``declared``)

    @property
    def citation(self) -> Citation | None: ...  # noqa: E704 - the paper it follows

    @property
    def relations(self) -> Relations: ...  # noqa: E704 - the systems it is built on

    @property
    def capabilities(self) -> Capabilities: ...  # noqa: E704 - exact scores, the terms it explains

    def params(self, ws: SystemWorkspace, split: str | None) -> dict[str, Any]:
        """Everything its results depend on: the cache key beside the data set, split and depth.

        Args:
            ws: The workspace it ranks over.
            split: The split evaluated; None for queries of no split.

        Returns:
            JSON-able parameters (an encoder's fingerprint, λ and how it was chosen, BM25's settings).
        """
        ...

    def search(self, ws: SystemWorkspace, queries: dict[str, str], k: int, split: str | None) -> Run:
        """Rank the corpus for a set of queries.

        Args:
            ws: The workspace it ranks over.
            queries: ``{query id: text}``.
            k: How many documents each list keeps.
            split: The split evaluated (a hybrid's λ is chosen for it); None for queries of no split.

        Returns:
            ``{query id: [(document id, score), …]}``, best first.
        """
        ...

    def exact_scores(self, ws: SystemWorkspace, split: str, rows: dict[str, list[int]],
                     queries: dict[str, str]) -> dict[str, dict[str, float]] | None:
        """Its score of chosen documents, retrieved or not (the judged ones, for PNR).

        Args:
            ws: The workspace it ranks over.
            split: The split evaluated.
            rows: ``{query id: [document row, …]}``, rows of ``ws.dataset.doc_ids``.
            queries: ``{query id: text}``.

        Returns:
            ``{query id: {document id: score}}``, or None where it has no score of its own.
        """
        ...

    def one(self, ws: SystemWorkspace, probe: Probe, k: int, split: str | None) -> Hits:
        """One typed query's ranked list, from what the probe has computed already.

        Args:
            ws: The workspace it ranks over.
            probe: The query, searched once for every system.
            k: How many documents the list keeps.
            split: The split whose λ a hybrid uses; None: the default.

        Returns:
            ``[(document id, score), …]``, best first.
        """
        ...

    def explain(self, ws: SystemWorkspace, probe: Probe, row: int) -> list[TermScore] | None:
        """What made it rank a document: its terms and their weights.

        Args:
            ws: The workspace it ranks over.
            probe: The query.
            row: The document's row in ``ws.dataset.doc_ids``.

        Returns:
            The terms' scores, or None where BM25's per-term explanation, which every hit carries, is all.
        """
        ...

    def explain_score(self, ws: SystemWorkspace, probe: Probe, rows: Sequence[int],
                      split: str | None) -> Mapping[int, ScoreWhy] | None:
        """What carries its score of each of several documents, in one batch (a dense score: the query
        words and passages; a fused one: its parts), as ``capabilities.explains_score`` declares.

        Args:
            ws: The workspace it ranks over.
            probe: The query.
            rows: The documents' rows in ``ws.dataset.doc_ids``.
            split: The split whose λ a hybrid uses; None: the default (as ``one``).

        Returns:
            ``{row: explanation}``, or None where it gives none.
        """
        ...

    def weights(self, ws: SystemWorkspace, split: str | None) -> list[Weight]:
        """The weights it chose for ``split`` and how, for the views to show beside its figures.

        Args:
            ws: The workspace it ranks over.
            split: The split evaluated.

        Returns:
            Its weights, none for a system without a weight of its own to choose.
        """
        ...

    def waits_for(self, ws: SystemWorkspace) -> tuple[IndexBuild[Any, Any], ...]:
        """The background builds it needs (``Workspace.background_build``); while one runs, it cannot answer.

        Args:
            ws: The workspace it ranks over.

        Returns:
            The builds; empty when it waits for none.
        """
        ...


class SystemBase:
    """The defaults of a ``System``: shown by default, no parameters, no background build to wait for,
    no exact scores of its own, no explanation beyond BM25's; ``params`` is ``cache_params`` with every
    declared parameter's value in it, under the system's key."""

    key: str
    shown_by_default = True
    parameters: tuple[Parameter, ...] = ()
    citation: Citation | None = None
    relations = Relations()
    capabilities = Capabilities(exact_scores=False)

    def params(self, ws: SystemWorkspace, split: str | None) -> dict[str, Any]:
        return keyed(self.key, self.cache_params(ws, split), ws.settings_of(self.key))

    def cache_params(self, ws: SystemWorkspace, split: str | None) -> dict[str, Any]:
        """What its results depend on beyond its declared parameters (``params`` adds those): an
        encoder's fingerprint, λ and how it was chosen, BM25's settings for a system built on BM25."""
        return {}

    def exact_scores(self, ws: SystemWorkspace, split: str, rows: dict[str, list[int]],
                     queries: dict[str, str]) -> dict[str, dict[str, float]] | None:
        return None

    def explain(self, ws: SystemWorkspace, probe: Probe, row: int) -> list[TermScore] | None:
        return None

    def explain_score(self, ws: SystemWorkspace, probe: Probe, rows: Sequence[int],
                      split: str | None) -> Mapping[int, ScoreWhy] | None:
        return None

    def weights(self, ws: SystemWorkspace, split: str | None) -> list[Weight]:
        return []

    def waits_for(self, ws: SystemWorkspace) -> tuple[IndexBuild[Any, Any], ...]:
        """The background builds it needs (``Workspace.background_build``; the dense index's, the
        learned sparse one's): while one runs, the system cannot answer (``Workspace.pending``)."""
        return ()


class Probe:
    """One typed query, searched once: BM25's list, the query's vector and the dense index's rows
    to ``depth``, each computed the first time a system asks and shared by the rest (not cached in
    the store: a typed query is seldom typed again).

    Args:
        ws: The workspace whose indexes are searched.
        text: The query's text.
        depth: How deep each list goes.
        query_id: The data set's query this text is, where it is one (imported runs list it).
    """

    def __init__(self, ws: SystemWorkspace, text: str, depth: int, query_id: str | None = None):
        self.ws, self.text, self.depth, self.query_id = ws, text, depth, query_id

    @cached_property
    def lexical(self) -> Hits:
        """BM25's list (the engine's) to ``depth``."""
        return self.ws.lexical.search({"q": self.text}, self.depth)["q"]

    @cached_property
    def vector(self) -> np.ndarray:
        """The query's embedding by the workspace's encoder."""
        return self.ws.dense.encode_query(self.text)

    @cached_property
    def dense_rows(self) -> np.ndarray:
        """The dense index's top ``depth`` rows (``-1``: no hit), with their scores (``dense_scores``)."""
        scores, rows = self.ws.dense.index.search_vectors(self.vector[None], self.depth)
        self.dense_scores = scores[0]
        top: np.ndarray = rows[0]
        return top

    @cached_property
    def sparse(self) -> SparseVector:
        """The query's learned sparse vector (``retrieval.index.splade``: term ids and weights)."""
        return self.ws.sparse.encode_query(self.text)

    @cached_property
    def dense(self) -> Hits:
        """The dense index's list to ``depth``: ``[(document id, score), …]``, best first."""
        rows, ids = self.dense_rows, self.ws.dense.index.doc_ids
        return [(ids[j], float(v)) for j, v in zip(rows, self.dense_scores) if j >= 0]
