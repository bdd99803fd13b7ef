"""The system vocabulary: every retrieval system's key, its long label (tables, column heads) and its
short label (rank lines such as "BM25 — → dense 3").

``SYSTEMS`` are the keys a ``Workspace`` can run; ``BASE_SYSTEMS`` the three every view puts side
by side; ``ENCODER_SYSTEMS`` those an encoder changes; ``TUNED_SYSTEMS`` a fine-tuned encoder's
dense and hybrid, as the failure gallery names them beside the base ones.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SystemName:
    key: str
    label: str  # "Hybrid (CLEAR λ)"
    short: str  # "hybrid"


_NAMES = (
    SystemName("bm25", "BM25", "BM25"),
    SystemName("dense", "Dense", "dense"),
    SystemName("hybrid", "Hybrid (CLEAR λ)", "hybrid"),
    SystemName("rrf", "Hybrid (RRF)", "RRF"),
    SystemName("wsum", "Hybrid (weighted sum)", "weighted sum"),
    SystemName("tuned_dense", "Fine-tuned dense", "fine-tuned dense"),
    SystemName("tuned_hybrid", "Fine-tuned hybrid", "fine-tuned hybrid"),
)
NAMES: dict[str, SystemName] = {n.key: n for n in _NAMES}

SYSTEMS = ("bm25", "dense", "hybrid", "rrf", "wsum")
BASE_SYSTEMS = ("bm25", "dense", "hybrid")
ENCODER_SYSTEMS = ("dense", "hybrid")  # the systems an encoder changes (a fine-tuned one gives new ones)
TUNED_SYSTEMS = ("tuned_dense", "tuned_hybrid")


def label(key: str) -> str:
    """The long label of a system key (the key itself when unknown, e.g. an imported run's name)."""
    return NAMES[key].label if key in NAMES else key


def short(key: str) -> str:
    """The short label of a system key (the key itself when unknown)."""
    return NAMES[key].short if key in NAMES else key
