"""Depth-k pools (TREC's pooling): each system's top ``k`` of a query, merged. What the judging
queue (``judgments``) and the judging orders (``order``) are both built on, so neither imports
the other to get it.
"""
from __future__ import annotations

from collections.abc import Iterable

from retrieval.data.run import Run

DEPTH = 10  # pool depth: each system's top k


def top_ids(run: Run, query_id: str, k: int = DEPTH) -> list[str]:
    """The first ``k`` distinct document ids of ``run``'s list for ``query_id`` (``[]`` if none)."""
    return list(dict.fromkeys(d for d, _ in run.get(query_id, [])))[:k]


def pool(runs: dict[str, Run], query_ids: Iterable[str], k: int = DEPTH) -> dict[str, list[str]]:
    """Each query's judging pool: every document some system ranks in its top ``k``, ordered by
    its best (smallest) rank over the systems, then by document id (so the order does not depend
    on the order of ``runs``). A query no system retrieves anything for has an empty pool."""
    pools: dict[str, list[str]] = {}
    for qid in query_ids:
        best: dict[str, int] = {}
        for run in runs.values():
            for rank, doc in enumerate(top_ids(run, qid, k), 1):
                best[doc] = min(rank, best.get(doc, rank))
        pools[qid] = sorted(best, key=lambda d: (best[d], d))
    return pools
