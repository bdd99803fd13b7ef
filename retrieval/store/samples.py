"""Samples of a corpus's queries drawn for judging (``retrieval.judging.sampling``), each its drawer's or
everyone's (``owned.everyones_or_own``).
"""
from __future__ import annotations

import time
from typing import Any

from retrieval import stored_rows
from retrieval.sharing.owners import Viewer
from retrieval.store import owned
from retrieval.store.connection import Connected
from retrieval.store.keys import pack


class Samples(Connected):
    """The store's judging samples (``Store``'s section of them)."""

    def put_sample(self, corpus: str, sample_id: str, method: str, seed: int, query_ids: list[str],
                   owner: str = "") -> None:
        """Keep a sample of a corpus's queries drawn for judging (``retrieval.judging.sampling``).

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            sample_id: The sample's id.
            method: How it was drawn.
            seed: The seed it was drawn with.
            query_ids: The queries drawn.
            owner: Whose it is on a shared deployment (``retrieval.sharing.owners``); "" everyone's.
        """
        with self._lock, self.db.conn:
            self.db.table("judging_samples").upsert({"corpus": corpus, "id": sample_id, "method": method,
                                                     "seed": int(seed), "query_ids": pack(list(query_ids)),
                                                     "owner": owner, "created": time.time()}, pk=("corpus", "id"))

    def samples(self, corpus: str, viewer: Viewer | None = None) -> list[dict[str, Any]]:
        """The corpus's stored samples (``id, method, seed, query_ids, created``), newest first; with
        ``viewer`` on a shared deployment, only those it drew and everyone's.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            viewer: Whose (``owners.Viewer``); None: every sample.

        Returns:
            One dict per sample; a damaged one left out, with a warning.
        """
        where, args = "corpus = ?", [corpus]
        where, args = owned.everyones_or_own(viewer.filter if viewer is not None else None, where, args)
        with self._lock:
            rows = list(self.db.table("judging_samples").rows_where(where, args, order_by="created desc, id"))
        out, problems = [], []
        for r in rows:  # a sample not of the shape put_sample writes is left out, with a warning
            query_ids, problem = stored_rows.unpacked(r["query_ids"], "query ids", self.sizes.shape)
            problem = problem or stored_rows.sample_problem(r, query_ids)
            if problem is not None:
                problems.append(f"sample {r.get('id')!r:.60}: {problem}")
                continue
            out.append({**{k: r[k] for k in ("id", "method", "seed", "created")}, "query_ids": query_ids})
        stored_rows.left_out("judging samples", problems)
        return out
