"""Ranked result lists ("runs"); ``trec.write_trec`` writes one as a TREC file.

A ``Run`` maps each query id to its ranked ``[(doc_id, score), ...]``, best first: the one
shape every retriever's ``search(queries, k)`` returns.
"""
from __future__ import annotations

Run = dict[str, list[tuple[str, float]]]


def ranks(hits: list[tuple[str, float]]) -> dict[str, int]:
    """doc id → 1-based rank in a ranked list."""
    return {d: i for i, (d, _) in enumerate(hits, 1)}


def rank_maps(runs: dict[str, Run], query_ids: list[str] | None = None) -> dict[str, dict[str, dict[str, int]]]:
    """system → query id → doc id → 1-based rank, for ``query_ids`` (default: every query of each run)."""
    return {s: {q: ranks(run.get(q, [])) for q in (run if query_ids is None else query_ids)}
            for s, run in runs.items()}
