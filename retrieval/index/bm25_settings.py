"""BM25's settings as one frozen value: what the BM25 index is built with and what its scores, its
stored blob and every cached run that reads BM25 are keyed under.

The values come from the BM25 system's declared parameters (``retrieval.systems.bm25``: k1, b and the
variant, each read and held to its range by ``retrieval.systems.declared.parse``), which a workspace
holds per system; this module is below the systems so that the engines, which build the index, take
the settings as a typed value rather than a dictionary no type check follows.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BM25Settings:
    """k1 (term-frequency saturation), b (length normalization) and the variant as bm25s names it
    (``BM25Index.METHODS``: "lucene", Lucene ≥ 8 and Anserini's, by default)."""

    k1: float = 0.9
    b: float = 0.4
    method: str = "lucene"

    def as_key(self) -> dict[str, float | str]:
        """The settings as a cache key's part: ``{"k1": …, "b": …, "method": …}``."""
        return {"k1": self.k1, "b": self.b, "method": self.method}
