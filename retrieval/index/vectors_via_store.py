"""Vectors of texts through the store, one loop for dense embeddings and learned sparse vectors:
read where cached (keyed by the model's fingerprint and the text's hash), encoded otherwise — each
distinct text once, longest first, ``commit_every`` at a time, each part committed before the next
is encoded, so a run killed half way resumes where it stopped, redoing at most one part."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from retrieval.store import text_hash

if TYPE_CHECKING:
    import numpy as np

COMMIT_EVERY = 1024  # texts encoded between two commits to the store: a crash loses at most these


def encode_through_store(texts: Sequence[str], get: Callable[[list[str]], dict[str, Any]],
                         put: Callable[[dict[str, Any]], None], encode: Callable[..., Sequence[Any] | np.ndarray],
                         sink: Callable[[list[int], Any], None],
                         progress: Callable[[int, int], None] | None = None,
                         commit_every: int = COMMIT_EVERY) -> tuple[int, int]:
    """Hand every text's vector to ``sink(rows, vector)`` (the rows of ``texts`` holding that text):
    ``get(hashes)`` the stored ones, ``encode(texts, progress=...)`` the rest, ``put({hash: vector})``
    each encoded part. ``progress(texts done, texts total)`` counts stored ones as done, before
    encoding starts (a rate is measured from there). Returns (distinct texts read from the store,
    distinct texts encoded now)."""
    rows: dict[str, list[int]] = {}
    for i, t in enumerate(texts):
        rows.setdefault(text_hash(t), []).append(i)
    cached = get(list(rows))
    for h, vec in cached.items():
        sink(rows[h], vec)
    missing = sorted((h for h in rows if h not in cached), key=lambda h: -len(texts[rows[h][0]]))
    done = len(texts) - sum(len(rows[h]) for h in missing)
    if progress:
        progress(done, len(texts))
    for start in range(0, len(missing), commit_every):
        part = missing[start:start + commit_every]
        before = done

        def report(n: int, _total: int, before: int = before, part: list[str] = part) -> None:
            if progress:
                progress(before + sum(len(rows[h]) for h in part[:n]), len(texts))

        vecs = encode([texts[rows[h][0]] for h in part], progress=report)
        put(dict(zip(part, vecs)))
        for h, vec in zip(part, vecs):
            sink(rows[h], vec)
        done = before + sum(len(rows[h]) for h in part)
    return len(cached), len(missing)
