"""What indexes are built from and kept as: BM25 indexes' bytes, dense and learned sparse vectors by
model and text, and the encoders and data sets opened with the store (keyed by content hashes, so a
changed corpus or model never reads a stale row).
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from retrieval import stored_rows
from retrieval.store.connection import _CHUNK, Connected, _max_value_length


class Indexes(Connected):
    """The store's BM25 indexes, vectors, encoders and data sets (``Store``'s section of them)."""

    def get_bm25(self, key: str) -> bytes | None:
        """A BM25 index saved by ``put_bm25`` (``BM25Index.to_bytes``), or None; a value that is not
        bytes is a miss (with a warning). The bytes themselves are checked as they are read
        (``BM25Index.from_bytes``: ``bm25_blob``).

        Args:
            key: The index's cache key.

        Returns:
            The index's bytes, or None.
        """
        with self._lock:
            row = self.db.execute("select [index] from bm25_indexes where key = ?", [key]).fetchone()
        if row is not None and not isinstance(row[0], bytes):
            stored_rows.left_out("bm25 indexes", [f"index {key[:12]}: it is {type(row[0]).__name__}, not bytes"])
            return None
        return row[0] if row else None

    def put_bm25(self, key: str, corpus: str, index: bytes) -> bool:
        """Keep a BM25 index; False (nothing written) when it is larger than SQLite's largest
        value (1 GB by default: a corpus of well over a million passages), which is then rebuilt
        on every open instead.

        Args:
            key: The index's cache key.
            corpus: The corpus hash the index is of.
            index: The index's bytes.

        Returns:
            Whether it was written.
        """
        if len(index) > _max_value_length(self.db.conn):
            return False
        with self._lock, self.db.conn:
            self.db.conn.execute("insert or replace into bm25_indexes (key, corpus, [index], created) "
                                 "values (?, ?, ?, ?)", [key, corpus, index, time.time()])
        return True

    # ---- embeddings ----------------------------------------------------------------------
    def get_embeddings(self, model: str, hashes: list[str], dim: int | None = None) -> dict[str, np.ndarray]:
        """The stored vectors of ``model`` for the texts ``hashes`` (text hash -> float32 vector).
        A vector whose bytes are not its row's ``dim`` × 4, whose dimension is not ``dim`` (given,
        else the model's in the models table) or that holds NaN or ±inf is left out, a miss to encode
        again and write over, with one warning (``stored_rows.vectors``).

        Args:
            model: The encoder's fingerprint.
            hashes: The texts' hashes (``text_hash``).
            dim: The vectors' dimension; None: the registered model's.

        Returns:
            ``{text hash: vector}`` of those stored and sound.
        """
        out: dict[str, np.ndarray] = {}
        problems: list[str] = []
        with self._lock:
            if dim is None:
                known = self.db.execute("select dim from models where fingerprint = ?", [model]).fetchone()
                dim = known[0] if known and type(known[0]) is int and known[0] > 0 else None
            for i in range(0, len(hashes), _CHUNK):
                chunk = hashes[i:i + _CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = self.db.execute(
                    f"select text_hash, dim, vector from embeddings where model = ? and text_hash in ({marks})",
                    [model, *chunk]).fetchall()
                found, damaged = stored_rows.vectors(rows, dim)
                out.update(found)
                problems += damaged
        stored_rows.left_out("embeddings", problems)
        return out

    def put_embeddings(self, model: str, vectors: dict[str, np.ndarray]) -> None:
        """Keep vectors of ``model`` by text hash (float32 bytes), replacing any stored.

        Args:
            model: The encoder's fingerprint.
            vectors: ``{text hash: vector}``.
        """
        rows = [(model, h, int(v.shape[0]), np.ascontiguousarray(v, dtype=np.float32).tobytes())
                for h, v in vectors.items()]
        with self._lock, self.db.conn:
            self.db.conn.executemany(
                "insert or replace into embeddings (model, text_hash, dim, vector) values (?, ?, ?, ?)", rows)

    def get_sparse(self, model: str, hashes: list[str],
                   vocab_size: int | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Learned sparse vectors stored by ``put_sparse``: text hash -> (term ids, weights). One whose
        terms and weights differ in number, with a term id outside 0..``vocab_size``-1 (when given) or
        a weight that is not finite is left out, a miss to encode again and write over, with one
        warning (``stored_rows.sparse_vectors``).

        Args:
            model: The sparse model's fingerprint.
            hashes: The texts' hashes (``text_hash``).
            vocab_size: The model's vocabulary size, to check term ids against; None: unchecked.

        Returns:
            ``{text hash: (term ids, weights)}`` of those stored and sound.
        """
        out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        problems: list[str] = []
        with self._lock:
            for i in range(0, len(hashes), _CHUNK):
                chunk = hashes[i:i + _CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = self.db.execute(f"select text_hash, terms, weights from sparse_vectors where model = ? and "
                                       f"text_hash in ({marks})", [model, *chunk]).fetchall()
                found, damaged = stored_rows.sparse_vectors(rows, vocab_size)
                out.update(found)
                problems += damaged
        stored_rows.left_out("sparse vectors", problems)
        return out

    def put_sparse(self, model: str, vectors: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        """Keep learned sparse vectors (term ids and their weights) by model fingerprint and text hash.

        Args:
            model: The sparse model's fingerprint.
            vectors: ``{text hash: (term ids, weights)}``.
        """
        rows = [(model, h, np.ascontiguousarray(t, dtype=np.int32).tobytes(),
                 np.ascontiguousarray(w, dtype=np.float32).tobytes()) for h, (t, w) in vectors.items()]
        with self._lock, self.db.conn:
            self.db.conn.executemany("insert or replace into sparse_vectors (model, text_hash, terms, weights) "
                                     "values (?, ?, ?, ?)", rows)

    # ---- models and data sets ------------------------------------------------------------
    def register_model(self, fingerprint: str, name: str, dim: int, info: dict[str, Any] | None = None) -> None:
        """Record an encoder (replacing a record of the same fingerprint).

        Args:
            fingerprint: The encoder's fingerprint.
            name: Its name or folder.
            dim: Its embedding size.
            info: What else to keep about it (JSON-able).
        """
        with self._lock, self.db.conn:
            self.db.table("models").upsert({"fingerprint": fingerprint, "name": name, "dim": dim,
                                           "info": json.dumps(info or {}), "created": time.time()},
                                          pk="fingerprint")

    def models(self) -> list[dict[str, Any]]:
        """The registered encoders (``fingerprint, name, dim, info`` (JSON text), ``created``), newest
        first; a row not of the shape ``register_model`` writes is left out, with a warning.

        Returns:
            One dict per encoder.
        """
        with self._lock:
            rows = list(self.db.table("models").rows_where(order_by="created desc"))
        return _checked("models", rows, stored_rows.model_problem, "fingerprint")

    def register_dataset(self, content_hash: str, name: str, summary: dict[str, Any]) -> None:
        """Record a data set opened with this store (replacing a record of the same hash): the name its
        runs are listed under.

        Args:
            content_hash: The data set's documents and queries (``Dataset.queries_hash``: its runs' hash).
            name: Its name.
            summary: Its counts (``Dataset.summary``).
        """
        with self._lock, self.db.conn:
            self.db.table("datasets").upsert({"hash": content_hash, "name": name,
                                             "summary": json.dumps(summary), "created": time.time()}, pk="hash")

    def datasets(self) -> list[dict[str, Any]]:
        """The data sets opened with this store (``hash, name, summary`` (JSON text), ``created``),
        newest first; a row not of the shape ``register_dataset`` writes is left out, with a warning.

        Returns:
            One dict per data set.
        """
        with self._lock:
            rows = list(self.db.table("datasets").rows_where(order_by="created desc"))
        return _checked("datasets", rows, stored_rows.dataset_problem, "hash")


def _checked(table: str, rows: list[dict[str, Any]], problem_of: Callable[[dict[str, Any]], str | None],
             key: str) -> list[dict[str, Any]]:
    """``rows`` without those ``problem_of`` finds a problem in, said in one warning naming ``table``."""
    out, problems = [], []
    for r in rows:
        problem = problem_of(r)
        if problem is None:
            out.append(r)
        else:
            problems.append(f"{key} {str(r.get(key))[:16]!r}: {problem}")
    stored_rows.left_out(table, problems)
    return out
