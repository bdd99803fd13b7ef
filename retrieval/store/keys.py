"""The store's keys and packing: a text's hash, a computation's cache key and the compressed JSON that
runs, per-query values, query sets and samples are kept as."""
from __future__ import annotations

import hashlib
import json
import zlib


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(**parts: object) -> str:
    """A stable key for a computation from its inputs (any JSON-serializable values)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def pack(obj: object) -> bytes:
    """``obj`` as compact JSON, zlib-compressed (level 6): how runs, per-query values, query sets and samples are
    kept (``stored_rows.unpacked`` reads them back, bounded)."""
    return zlib.compress(json.dumps(obj, separators=(",", ":")).encode(), 6)
