"""A run of the analyst's own system, read from a file (``readers.runs.ImportedRun``), as a system:
it has no retriever, only the lists it holds, so a query it never ran gets an empty list; its
cache key is its name and the hash of its lists."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retrieval.data.readers.runs import ImportedRun
from retrieval.data.run import Run
from retrieval.systems.base import Hits, Needs, Probe, SystemBase

if TYPE_CHECKING:
    from retrieval.systems.reads import SystemWorkspace


class Imported(SystemBase):
    needs = Needs(run=True)

    def __init__(self, imported: ImportedRun):
        self.imported = imported
        self.key = self.label = self.short = imported.name

    def cache_params(self, ws: SystemWorkspace, split: str | None) -> dict[str, Any]:
        return {"imported": self.key, "hash": self.imported.content_hash}

    def search(self, ws: SystemWorkspace, queries: dict[str, str], k: int, split: str | None) -> Run:
        lists = self.imported.run
        return {q: lists.get(q, [])[:k] for q in queries}

    def exact_scores(self, ws: SystemWorkspace, split: str, rows: dict[str, list[int]],
                     queries: dict[str, str]) -> None:
        return None  # only the scores of what it ranked: PNR reads those from the run

    def one(self, ws: SystemWorkspace, probe: Probe, k: int, split: str | None) -> Hits:
        """Its list of the data set's query ``probe.query_id`` (a typed text matching one), else []."""
        return self.imported.run.get(probe.query_id, [])[:k] if probe.query_id is not None else []

    def explain(self, ws: SystemWorkspace, probe: Probe, row: int) -> None:
        return None
