"""Runs, their evaluations and 2-D projections, each under the cache key of its inputs (data set hash ×
system × parameters), so nothing is computed twice; a damaged row is a miss, computed again.
"""
from __future__ import annotations

import json
import time
from typing import Any, cast

import numpy as np

from retrieval import stored_rows
from retrieval.data.run import Run
from retrieval.sharing.owners import OPERATOR, Viewer
from retrieval.store import owned
from retrieval.store.connection import Connected
from retrieval.store.keys import pack


class Runs(Connected):
    """The store's runs, metrics and projections (``Store``'s section of them)."""

    def get_run(self, key: str) -> Run | None:
        """A run saved by ``put_run``, or None; a damaged one is a miss (with a warning), computed again.

        Args:
            key: The run's cache key.

        Returns:
            ``{query id: [(document id, score), …]}``, or None.
        """
        with self._lock:
            row = self.db.execute("select hits from runs where key = ?", [key]).fetchone()
        if row is None:
            return None
        hits, problem = stored_rows.unpacked(row[0], "hits", self.sizes.shape)
        problem = problem or stored_rows.hits_problem(hits)
        if problem is not None:  # damaged: a miss, so the run is computed again and written over
            stored_rows.left_out("runs", [f"run {key[:12]}: {problem}"])
            return None
        return {q: [(d, s) for d, s in hits] for q, hits in cast(dict[str, Any], hits).items()}  # hits_problem: a dict

    def put_run(self, key: str, *, dataset: str, system: str, params: dict[str, Any], split: str | None,
                k: int, run: Run, owner: str = "") -> None:
        """Keep a run under ``key``, replacing any.

        Args:
            key: The run's cache key (``cache_key``).
            dataset: The data set's content hash.
            system: The system.
            params: The system's parameters.
            split: The split searched (None: no split).
            k: The lists' depth.
            run: ``{query id: [(document id, score), …]}``.
            owner: The maker of an imported run's lists (``retrieval.sharing.owners``; its key holds it
                too), whose alone it is on a shared deployment; ``""``: everyone's (a built-in system's
                run, which anyone can compute again, or one the command line imported).
        """
        with self._lock, self.db.conn:
            self.db.table("runs").upsert({"key": key, "dataset": dataset, "system": system,
                                         "params": json.dumps(params, sort_keys=True, default=str),
                                         "split": split or "", "k": k, "hits": pack(run),
                                         "created": time.time(), "owner": owner}, pk="key")

    def get_metrics(self, key: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """An evaluation saved by ``put_metrics``, or None; a damaged one is a miss (with a warning).

        Args:
            key: The evaluation's cache key.

        Returns:
            (the metrics' means, their per-query values), or None.
        """
        with self._lock:
            row = self.db.execute("select metrics, per_query from metrics where key = ?", [key]).fetchone()
        if row is None:
            return None
        metrics, problem = stored_rows.loaded(row[0], "metrics")
        per_query, unpacking = stored_rows.unpacked(row[1], "per-query values", self.sizes.shape)
        problem = problem or unpacking or stored_rows.metrics_problem(metrics, per_query)
        if problem is not None:  # damaged: a miss, so the evaluation is computed again and written over
            stored_rows.left_out("metrics", [f"evaluation {key[:12]}: {problem}"])
            return None
        return cast(dict[str, Any], metrics), cast(dict[str, Any], per_query)  # metrics_problem: both dicts

    def put_metrics(self, key: str, *, dataset: str, system: str, params: dict[str, Any], split: str | None,
                    metrics: dict[str, Any], per_query: dict[str, Any]) -> None:
        """Keep an evaluation under ``key``, replacing any.

        Args:
            key: The evaluation's cache key (``cache_key``).
            dataset: The data set's content hash.
            system: The system.
            params: The system's parameters.
            split: The split evaluated.
            metrics: ``{metric: mean}``.
            per_query: ``{metric: {query id: value}}``.
        """
        with self._lock, self.db.conn:
            self.db.table("metrics").upsert({"key": key, "dataset": dataset, "system": system,
                                            "params": json.dumps(params, sort_keys=True, default=str),
                                            "split": split or "", "metrics": json.dumps(metrics),
                                            "per_query": pack(per_query), "created": time.time()}, pk="key")

    def runs(self, dataset: str | None = None, viewer: Viewer = OPERATOR) -> list[dict[str, Any]]:
        """Run history (without the hits) ``viewer`` sees, newest first: on a shared deployment every
        built-in system's run and the imported runs it made (``put_run``'s ``owner``), never another
        session's; else every run. The one accessor of the history: every list of runs reads it.

        Args:
            dataset: Only this data set's (its content hash); None: all.
            viewer: Who reads (``OPERATOR``: every run).

        Returns:
            One dict per run: ``key, dataset, system, params, split, k, created``.
        """
        where, args = ("dataset = ?", [dataset]) if dataset else ("1", [])
        where, args = owned.everyones_or_own(viewer.filter, where, args)
        with self._lock:
            return list(self.db.table("runs").rows_where(where, args, order_by="created desc",
                                                        select="key, dataset, system, params, split, k, created"))

    # ---- 2-D projections (UMAP) ------------------------------------------------------------
    def get_projection(self, key: str) -> tuple[np.ndarray, float] | None:
        """(``(points, 2)`` float32 coordinates, seconds the fit took) or None.

        Args:
            key: The projection's cache key.

        Returns:
            The coordinates and seconds, or None.
        """
        with self._lock:
            row = self.db.execute("select points, xy, seconds from projections where key = ?", [key]).fetchone()
        if row is None:
            return None
        problem = stored_rows.projection_problem(*row)
        if problem is not None:  # damaged: a miss, so the layout is fitted again and written over
            stored_rows.left_out("projections", [f"projection {key[:12]}: {problem}"])
            return None
        return np.frombuffer(row[1], dtype=np.float32).reshape(row[0], 2), row[2]

    def put_projection(self, key: str, *, sample: str, model: str, params: dict[str, Any], xy: np.ndarray,
                       seconds: float) -> None:
        """Keep a projection's 2-D coordinates under ``key``, replacing any.

        Args:
            key: The projection's cache key.
            sample: The sample of documents projected.
            model: The encoder's fingerprint.
            params: The projection's parameters.
            xy: ``(points, 2)`` coordinates.
            seconds: How long the fit took.
        """
        xy = np.ascontiguousarray(xy, dtype=np.float32)
        with self._lock, self.db.conn:
            self.db.table("projections").upsert({"key": key, "sample": sample, "model": model,
                                                "params": json.dumps(params, sort_keys=True, default=str),
                                                "points": int(xy.shape[0]), "xy": xy.tobytes(),
                                                "seconds": float(seconds), "created": time.time()}, pk="key")
