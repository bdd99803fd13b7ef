"""Ranked result lists ("runs") and their TREC file format.

A ``Run`` maps each query id to its ranked ``[(doc_id, score), ...]``, best first: the one
shape every retriever's ``search(queries, k)`` returns.
"""
from __future__ import annotations

from pathlib import Path

Run = dict[str, list[tuple[str, float]]]


def ranks(hits: list[tuple[str, float]]) -> dict[str, int]:
    """doc id → 1-based rank in a ranked list."""
    return {d: i for i, (d, _) in enumerate(hits, 1)}


def rank_maps(runs: dict[str, Run], query_ids: list[str] | None = None) -> dict[str, dict[str, dict[str, int]]]:
    """system → query id → doc id → 1-based rank, for ``query_ids`` (default: every query of each run)."""
    return {s: {q: ranks(run.get(q, [])) for q in (run if query_ids is None else query_ids)}
            for s, run in runs.items()}


def write_trec(run: Run, path: str | Path, tag: str) -> Path:
    """Write ``qid Q0 docid rank score tag`` lines (trec_eval's run format)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for qid, hits in run.items():
            for rank, (doc, score) in enumerate(hits, 1):
                f.write(f"{qid} Q0 {doc} {rank} {score:.6f} {tag}\n")
    return path


def read_trec(path: str | Path) -> Run:
    run: Run = {}
    with Path(path).open(encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) < 6:
                continue
            run.setdefault(parts[0], []).append((parts[2], float(parts[4])))
    for hits in run.values():
        hits.sort(key=lambda h: -h[1])
    return run
