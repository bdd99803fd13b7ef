"""The SQLite cache: embeddings, data sets, models, runs, metrics and 2-D projections, keyed by
content hashes; and the relevance judgments analysts make, which are not a cache (nothing can
recompute them).

One file (``$RANKSCOPE_STORE``, else ``$RANKSCOPE_HOME/rankscope.sqlite3``, else the user's
cache directory), WAL mode, every write in a transaction. Because rows are keyed by hashes of
their inputs (model fingerprint × text hash, data set hash × system × parameters), a changed
corpus or model never reads stale rows and nothing is computed twice. Judgments are keyed by the
corpus alone (``Dataset.corpus_hash``), so adding queries or labels to a corpus keeps them.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import sqlite3
import sys
import threading
import time
import unicodedata
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import cast

import numpy as np
import platformdirs

from retrieval import row_bounds, stored_rows
from retrieval.data.run import Run
from retrieval.judging import judge_claims
from retrieval.judging import staged_writes as staging
from retrieval.judging.grades import judge_name
from retrieval.judging.judge_claims import Claim
from retrieval.judging.staged_writes import JudgmentsStored
from retrieval.safe_names import name_key
from retrieval.sharing.owners import OPERATOR, Viewer

SCHEMA_VERSION = 1
_CHUNK = 500  # ids per "IN (...)" query, under SQLite's variable limit


def default_store_path() -> Path:
    if os.environ.get("RANKSCOPE_STORE"):
        return Path(os.environ["RANKSCOPE_STORE"]).expanduser()
    home = os.environ.get("RANKSCOPE_HOME") or platformdirs.user_cache_dir("rankscope")
    return Path(home).expanduser() / "rankscope.sqlite3"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(**parts) -> str:
    """A stable key for a computation from its inputs (any JSON-serializable values)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _pack(obj) -> bytes:
    return zlib.compress(json.dumps(obj, separators=(",", ":")).encode(), 6)


class StoreError(ValueError):
    """A store path that cannot be used (a folder, a file that is not a store, no write access)."""


class NameTaken(ValueError):
    """A name its namespace has already, or one like it (``Store.put_snapshot``, ``Store.put_query_set``,
    publishing either), or no snapshot of the writer's to replace."""


class TooMany(ValueError):
    """A maker (``mine``) or a whole corpus keeps as many rows of a kind as it may: ``count`` of ``most``
    (counted inside the write's transaction: ``Store.put_snapshot``, ``Store.put_query_set``)."""

    def __init__(self, count: int, most: int, mine: bool):
        super().__init__(f"{count} kept, the most {'one maker' if mine else 'the corpus'} may keep ({most})")
        self.count, self.most, self.mine = count, most, mine


def _name_key(name: str) -> str:
    """A name's look-alike key as kept beside it: ``safe_names.name_key`` of its NFC form, stripped."""
    return name_key(unicodedata.normalize("NFC", name).strip())


def _seen(viewer: Viewer, where: str, args: list) -> tuple[str, list]:
    """``where`` and ``args`` of a read of an owned table (its ``owner`` and ``published`` columns)
    narrowed to the rows ``viewer`` sees (``Viewer.sees``): on a shared deployment its own and the
    published ones; else every row."""
    if viewer.filter is None:
        return where, args
    return f"{where} and (published = 1 or owner = ?)", [*args, viewer.filter]


def _no_published(conn: sqlite3.Connection, table: str, what: str, corpus: str, name: str, key: str,
                  extra: str = "", args: Iterable = ()) -> None:
    """``NameTaken`` when a published row of ``table`` in ``corpus`` has the look-alike key ``key``: a
    private name may not look like a published one. The published name is everyone's to see, so it
    is named."""
    where = "corpus = ? and name_key = ? and published = 1" + (f" and {extra}" if extra else "")
    found = conn.execute(f"select name from {table} where {where} limit 1", [corpus, key, *args]).fetchone()
    if found is not None:
        raise NameTaken(f"a published {what} is named {found[0]!r}" if found[0] == name else
                        f"the {what} name {name!r} looks like the published {found[0]!r}")


def _max_value_length(conn: sqlite3.Connection) -> int:
    """SQLite's largest value in bytes (``SQLITE_LIMIT_LENGTH``): asked of the connection where Python can
    (3.11 and later), else SQLite's compiled-in default."""
    if sys.version_info >= (3, 11):
        return conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
    return 1_000_000_000


class Store:
    """Thread-safe access to the cache file (one connection, serialized by a lock).

    Args:
        path: The SQLite file, created with its folder where absent; None: ``default_store_path()``
            (``$RANKSCOPE_STORE``, else ``rankscope.sqlite3`` in ``$RANKSCOPE_HOME`` or the user cache folder).

    Raises:
        StoreError: The path is a folder, or cannot be opened and written.
    """

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path).expanduser() if path else default_store_path()
        self._lock = threading.RLock()
        self.sizes = row_bounds.Sizes()  # the largest data set opened on it: what rows of data sets are sized by
        if self.path.is_dir():
            raise StoreError(f"the store {self.path} is a folder: name the cache file itself "
                             f"(e.g. {self.path / 'rankscope.sqlite3'}) with --store or $RANKSCOPE_STORE")
        parent = self.path.parent
        if parent.exists() and not parent.is_dir():
            raise StoreError(f"cannot use {self.path} as the store: {parent} is a file, not a folder")
        conn = None
        try:
            parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            import sqlite_utils  # it brings pandas where installed: imported when a store is opened

            self.db = sqlite_utils.Database(conn)
            self.db.enable_wal()
            self._create()
            self._owned_names()  # snapshot and query-set names unique where the write is
            staging.drop_stale(conn)  # a judgments import killed half way left its staging table
            with conn:  # a write now, so a read-only file or disk is said at once, not at the first result
                conn.execute("insert or replace into meta (key, value) values ('opened', ?)", [str(time.time())])
        except (OSError, sqlite3.Error) as err:
            if conn is not None:
                conn.close()
            reason = getattr(err, "strerror", None) or str(err)
            if "readonly" in reason or not os.access(parent, os.W_OK) or \
                    (self.path.exists() and not os.access(self.path, os.W_OK)):
                reason = f"it is read-only ({reason})"
            raise StoreError(f"cannot use {self.path} as the store: {reason} (choose a writable SQLite file with "
                             f"--store or $RANKSCOPE_STORE)") from None

    def _create(self) -> None:
        with self._lock, self.db.conn:
            db = self.db
            if "meta" not in db.table_names():
                db.table("meta").insert({"key": "schema_version", "value": str(SCHEMA_VERSION)}, pk="key")
            db.table("embeddings").create({"model": str, "text_hash": str, "dim": int, "vector": bytes},
                                         pk=("model", "text_hash"), if_not_exists=True)
            db.table("sparse_vectors").create({"model": str, "text_hash": str, "terms": bytes, "weights": bytes},
                                             pk=("model", "text_hash"), if_not_exists=True)
            db.table("models").create({"fingerprint": str, "name": str, "dim": int, "info": str,
                                      "created": float}, pk="fingerprint", if_not_exists=True)
            db.table("datasets").create({"hash": str, "name": str, "summary": str, "created": float},
                                       pk="hash", if_not_exists=True)
            db.table("runs").create({"key": str, "dataset": str, "system": str, "params": str,
                                    "split": str, "k": int, "hits": bytes, "created": float},
                                   pk="key", if_not_exists=True)
            db.table("jobs").create({"id": str, "status": str, "kind": str, "dataset": str, "dataset_name": str,
                                    "config": str, "progress": str, "losses": str, "device": str, "error": str,
                                    "model_path": str, "result": str, "created": float, "updated": float},
                                   pk="id", if_not_exists=True)
            db.table("metrics").create({"key": str, "dataset": str, "system": str, "params": str,
                                       "split": str, "metrics": str, "per_query": bytes,
                                       "created": float}, pk="key", if_not_exists=True)
            db.table("projections").create({"key": str, "sample": str, "model": str, "params": str,
                                           "points": int, "xy": bytes, "seconds": float, "created": float},
                                          pk="key", if_not_exists=True)
            db.table("bm25_indexes").create({"key": str, "corpus": str, "index": bytes, "created": float},
                                           pk="key", if_not_exists=True)
            db.table("judgments").create({"corpus": str, "query_id": str, "doc_id": str, "judge": str,
                                         "grade": int, "query_text": str, "time": float},
                                        pk=("corpus", "query_id", "doc_id", "judge"), if_not_exists=True)
            db.table("query_sets").create({"corpus": str, "id": str, "name": str, "queries": bytes, "n": int,
                                          "created": float}, pk=("corpus", "id"), if_not_exists=True)
            db.table("judging_samples").create({"corpus": str, "id": str, "method": str, "seed": int,
                                               "query_ids": bytes, "created": float}, pk=("corpus", "id"),
                                              if_not_exists=True)
            db.table("kept_datasets").create({"owner": str, "id": str, "corpus": str, "name": str, "files": str,
                                             "documents": int, "queries": int, "bytes": int, "published": int,
                                             "created": float, "opened": float}, pk=("owner", "id"),
                                            if_not_exists=True)
            self._owner_columns()
            self._judge_owners()
            self._sample_owners()

    @property
    def models_dir(self) -> Path:
        """Where fine-tuned encoders trained with this store are saved: ``models/`` beside the file."""
        return self.path.parent / "models"

    @property
    def kept_dir(self) -> Path:
        """Where the files of uploaded data sets are kept (``retrieval.data.kept``): ``kept/`` beside the file."""
        return self.path.parent / "kept"

    def secret(self, name: str) -> bytes:
        """A random 32-byte key kept in the store under ``name``, made the first time it is asked for
        (the app's key for the browser tokens it hands out: ``retrieval.sharing.browser_tokens``);
        whoever can read the store can read it, as they can every row.

        Args:
            name: What the key is for.

        Returns:
            The key.
        """
        key = f"secret:{name}"
        with self._lock, self.db.conn:
            self.db.execute("insert or ignore into meta (key, value) values (?, ?)", [key, secrets.token_hex(32)])
            value = self.db.execute("select value from meta where key = ?", [key]).fetchone()[0]
        try:
            found = bytes.fromhex(value) if isinstance(value, str) else b""
        except ValueError:
            found = b""
        if len(found) != 32:  # not what was written: a new key (the tokens handed out before are refused)
            with self._lock, self.db.conn:
                self.db.execute("update meta set value = ? where key = ?", [secrets.token_hex(32), key])
            return self.secret(name)
        return found

    def close(self) -> None:
        """Close the store's connection."""
        with self._lock:
            self.db.conn.close()

    # ---- BM25 indexes ----------------------------------------------------------------------
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
    def register_model(self, fingerprint: str, name: str, dim: int, info: dict | None = None) -> None:
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

    def models(self) -> list[dict]:
        """The registered encoders (``fingerprint, name, dim, info`` (JSON text), ``created``), newest
        first; a row not of the shape ``register_model`` writes is left out, with a warning.

        Returns:
            One dict per encoder.
        """
        with self._lock:
            rows = list(self.db.table("models").rows_where(order_by="created desc"))
        return self._checked("models", rows, stored_rows.model_problem, "fingerprint")

    def register_dataset(self, content_hash: str, name: str, summary: dict) -> None:
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

    def datasets(self) -> list[dict]:
        """The data sets opened with this store (``hash, name, summary`` (JSON text), ``created``),
        newest first; a row not of the shape ``register_dataset`` writes is left out, with a warning.

        Returns:
            One dict per data set.
        """
        with self._lock:
            rows = list(self.db.table("datasets").rows_where(order_by="created desc"))
        return self._checked("datasets", rows, stored_rows.dataset_problem, "hash")

    @staticmethod
    def _checked(table: str, rows: list[dict], problem_of, key: str) -> list[dict]:
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

    # ---- runs and metrics ----------------------------------------------------------------
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
        return {q: [(d, s) for d, s in hits] for q, hits in cast(dict, hits).items()}  # hits_problem: a dict

    def put_run(self, key: str, *, dataset: str, system: str, params: dict, split: str | None,
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
                                         "split": split or "", "k": k, "hits": _pack(run),
                                         "created": time.time(), "owner": owner}, pk="key")

    def get_metrics(self, key: str) -> tuple[dict, dict] | None:
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
        return cast(dict, metrics), cast(dict, per_query)  # metrics_problem: both dicts

    def put_metrics(self, key: str, *, dataset: str, system: str, params: dict, split: str | None,
                    metrics: dict, per_query: dict) -> None:
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
                                            "per_query": _pack(per_query), "created": time.time()}, pk="key")

    def runs(self, dataset: str | None = None, viewer: Viewer = OPERATOR) -> list[dict]:
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
        if viewer.filter is not None:
            where, args = f"{where} and (owner = '' or owner = ?)", [*args, viewer.filter]
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

    def put_projection(self, key: str, *, sample: str, model: str, params: dict, xy: np.ndarray,
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

    # ---- relevance judgments ----------------------------------------------------------------
    def put_judgment(self, corpus: str, query_id: str, query_text: str, doc_id: str, grade: int,
                     judge: str) -> None:
        """Store one judge's grade of a (query, document) pair of the corpus ``corpus`` (a
        ``Dataset.corpus_hash``), in its own transaction; judging the pair again replaces the grade.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            query_id: The query.
            query_text: Its text, kept beside the grade.
            doc_id: The document.
            grade: 0, 1 or 2.
            judge: The judge's name.
        """
        self.put_judgments(corpus, [(query_id, query_text, doc_id, grade, judge)])

    def put_judgments(self, corpus: str, judgments: Iterable, source: str | None = None,
                      claim: Claim | None = None) -> JudgmentsStored:
        """Store several ``(query id, query text, doc id, grade, judge)`` grades of the corpus as one
        write (an import), through a connection of its own and never under the store's lock, so other
        sessions' reads go on meanwhile (``retrieval.judging.staged_writes``: a large import is staged, then copied
        in by one short transaction). All or nothing: a bad row (``ValueError``) or more than
        ``staged_writes.MAX_IMPORT_ROWS`` rows (``staged_writes.TooManyRows``, naming ``source``, the file) stores
        none, and readers never see part of it. Counted against what the store held for the corpus
        and judge (``JudgmentsStored``: new, changed, unchanged; a pair given twice counts once, its
        last grade); an unchanged grade is left as it was (its time too).

        With ``claim`` (``judge_claims.Claim``: a session of the app), each judge's name is that maker's
        key (``judge_claims.resolve``: its private judge on a shared deployment), and the names new to
        it are recorded as its judges in the transaction that copies the grades in: claimed with the
        grades or not at all. Without, grades are kept under the names as given (the command line).

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            judgments: ``(query id, query text, doc id, grade, judge)`` tuples.
            source: The file they came from, named in errors.
            claim: Who takes the judges' names.

        Returns:
            How many grades were new, changed and unchanged.

        Raises:
            judge_claims.JudgeTaken: A name ``claim``'s maker may not grade under; nothing stored.
        """
        return staging.put(self.path, corpus, judgments, source, claim)

    def judgments(self, corpus: str, judge: str | None = None, query_ids: Iterable[str] | None = None,
                  viewer: Viewer | None = None) -> list[dict]:
        """The corpus's judgments (``corpus, query_id, doc_id, judge, grade, query_text, time``),
        oldest first; only ``judge``'s when given, only those of the queries ``query_ids`` when given;
        with ``viewer`` (``owners.Viewer``: a session of a shared deployment), only the grades of its
        own judges and the published ones (``judges``' makers); None: every judge's (the command line,
        a deployment that is not shared). A row ``put_judgments`` could not have written (a
        grade outside ``GRADES``, an id or judge's name refused on input) is left out, with a warning.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            judge: Only this judge's.
            query_ids: Only these queries'.
            viewer: Only the judges whose grades this viewer sees.

        Returns:
            One dict per judgment.
        """
        where, args = "corpus = ?", [corpus]
        if judge is not None:
            where, args = where + " and judge = ?", [corpus, judge]
        if query_ids is not None:  # one parameter, however many ids
            where, args = where + " and query_id in (select value from json_each(?))", args + [json.dumps(
                sorted(set(query_ids)))]
        with self._lock:
            where, args = self._unseen_judges(corpus, viewer, where, args)
            rows = list(self.db.table("judgments").rows_where(where, args, order_by="time, query_id, doc_id, judge"))
        check, kept, problems = stored_rows.JudgmentCheck(), [], []
        for r in rows:  # rows not of the shape put_judgments writes are left out (``stored_rows``)
            problem = check.problem(r)
            if problem is None:
                kept.append(r)
            else:
                problems.append(f"{problem} (query {r.get('query_id')!r:.60}, document {r.get('doc_id')!r:.60}, "
                                f"judge {r.get('judge')!r:.60})")
        stored_rows.left_out("judgments", problems)
        return kept

    def judges(self, corpus: str, viewer: Viewer | None = None) -> list[str]:
        """The names of the corpus's judges ``viewer`` sees, each once, sorted (a new judge's name is held
        against them: ``safe_names.check_new_name``): with ``viewer`` on a shared deployment, the published
        ones and its own (another session's private judges are in its own space: ``judge_claims``); else
        every one, those with a maker and no grade yet among them. A name ``check_judge`` refuses is
        left out, with a warning.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            viewer: Whose (``owners.Viewer``); None: every judge.

        Returns:
            The judges' names.
        """
        with self._lock:
            if viewer is None or viewer.filter is None:
                keys = [r[0] for r in self.db.execute("select judge from judgments where corpus = ? union "
                                                      "select judge from judges where corpus = ?",
                                                      [corpus, corpus]).fetchall()]
            else:
                keys = [r[0] for r in self.db.execute(
                    "select judge from judgments where corpus = ? and judge not in (select judge from judges where "
                    "corpus = ?) union select judge from judges where corpus = ? and (space = '' or space = ?)",
                    [corpus, corpus, corpus, viewer.filter]).fetchall()]
        checked: dict[str, str | None] = {}  # a name the judgments' readers leave out is left out here too
        problems = [(k, stored_rows.judge_problem(k, checked)) for k in keys]
        stored_rows.left_out("judges", [f"judge {k!r:.60}: {p}" for k, p in problems if p is not None])
        return sorted({judge_name(k) for k, p in problems if p is None})

    def judged_queries(self, corpus: str, viewer: Viewer | None = None) -> list[tuple[str, str]]:
        """The corpus's queries that have a judgment (with ``viewer``: by one of the judges whose grades
        it sees, as ``judgments``), each ``(query id, query text)`` once (``seen.judged_query_ids`` keeps
        a data set's own).

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            viewer: Only by the judges whose grades this viewer sees.

        Returns:
            ``(query id, query text)`` pairs.
        """
        with self._lock:
            where, args = self._unseen_judges(corpus, viewer, "corpus = ?", [corpus])
            return [(r[0], r[1] if isinstance(r[1], str) else "") for r in self.db.execute(
                f"select distinct query_id, query_text from judgments where {where} order by query_id", args).fetchall()
                    if isinstance(r[0], str)]

    def judgments_version(self, corpus: str, viewer: Viewer | None = None) -> tuple:
        """Where the judgments stand, as a value any grade stored or changed since (here or by another
        process: a grade is only ever added or replaced, and a replaced row is a new row), or a judge of
        the corpus made or published, changes: what a view's labels are kept up to date by. Read from
        the table's last row and the corpus's few judges, never its grades, so it costs the same after
        a million; a grade of another corpus changes it too (the labels are merged again, the same).

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            viewer: Whose view (its judges are among the corpus's).

        Returns:
            A value to compare with an earlier one.
        """
        with self._lock:
            row = self.db.execute("select (select max(rowid) from judgments), (select count(*) from judges where "
                                  "corpus = ?), (select total(published) from judges where corpus = ?)",
                                  [corpus, corpus]).fetchone()
        return (*row, viewer.filter if viewer is not None else None)

    # ---- judges' makers (``retrieval.judging.judge_owners``) -----------------------------------------
    def _unseen_judges(self, corpus: str, viewer: Viewer | None, where: str, args: list) -> tuple[str, list]:
        """``where`` and ``args`` of a judgments read leaving out the judges ``viewer`` does not see:
        on a shared deployment, another maker's judges that are not published (under the lock)."""
        if viewer is None or viewer.filter is None:
            return where, args
        hidden = [r[0] for r in self.db.execute("select judge from judges where corpus = ? and published = 0 and "
                                                "owner != ?", [corpus, viewer.filter]).fetchall()]
        if not hidden:
            return where, args
        return where + " and judge not in (select value from json_each(?))", args + [json.dumps(hidden)]

    def resolve_judges(self, corpus: str, claim: Claim) -> dict[str, str]:
        """Each of ``claim``'s names' key (``judge_claims.resolve``), claiming nothing: what a write of
        their grades would use, or the refusal it would give (``judge_claims.JudgeTaken``, ``ValueError``).

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            claim: Who would take which names.

        Returns:
            ``{name: key}``.
        """
        with self._lock:
            return judge_claims.resolve(self.db.conn, corpus, claim)[0]

    def judge_makers(self, corpus: str) -> dict[str, dict]:
        """Each judge of the corpus with a maker recorded, by its key (``grades.private_key``): ``name, owner,
        published, space, created``. Every session's: for a viewer's own, ``judge_owners.own``.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).

        Returns:
            ``{key: {name, owner, published, space, created}}``.
        """
        with self._lock:
            rows = self.db.execute("select judge, name, owner, published, space, created from judges where corpus = ? "
                                   "order by judge", [corpus]).fetchall()
        return {j: {"name": n if isinstance(n, str) else judge_name(j), "owner": str(o or ""), "published": bool(p),
                    "space": str(sp or ""), "created": c} for j, n, o, p, sp, c in rows if isinstance(j, str)}

    def publish_judge(self, corpus: str, name: str, owner: str) -> bool:
        """Make ``owner``'s private judge ``name`` count for everyone: its grades move to the published
        key (the name), in one transaction that first checks no published judge looks like it (a
        ``ValueError`` naming that one, which everyone sees); False when it has no such private judge.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            name: The judge's name.
            owner: The session's owner (``retrieval.sharing.owners``).

        Returns:
            Whether it was published now.

        Raises:
            ValueError: A published judge of that name, or one that looks like it.
        """
        with self._immediate() as conn:
            row = conn.execute("select judge from judges where corpus = ? and space = ? and name = ? and "
                               "published = 0", [corpus, owner, name]).fetchone()
            if row is None:
                return False
            judge_claims.record_unrecorded(conn, corpus, judge_claims.unrecorded(conn, corpus))
            clash = conn.execute("select name from judges where corpus = ? and space = '' and name_key = ?",
                                 [corpus, name_key(name)]).fetchone()
            if clash is not None:
                raise ValueError(f"a published judge {clash[0]!r} is there already: a judge of that name, or one "
                                 "that looks like it, cannot be published; its grades stay this session's")
            conn.execute("update judgments set judge = ? where corpus = ? and judge = ?", [name, corpus, row[0]])
            conn.execute("update judges set judge = ?, published = 1, space = '' where corpus = ? and judge = ?",
                         [name, corpus, row[0]])
            return True

    def _judge_owners(self) -> None:
        """The ``judges`` table (each judge's key, name, look-alike key, maker, space and whether its
        grades count for everyone: ``retrieval.judging.judge_claims``); an existing store's judges become
        published, with no maker known, as they were everyone's; a store whose judges had makers but no
        spaces gets them (a private judge's space is its maker's)."""
        if "judges" not in self.db.table_names():
            self.db.table("judges").create({"corpus": str, "judge": str, "owner": str, "published": int,
                                            "created": float}, pk=("corpus", "judge"))
            self.db.execute("insert or ignore into judges (corpus, judge, owner, published, created) "
                            "select corpus, judge, '', 1, min(time) from judgments group by corpus, judge")
        have = {c.name for c in self.db["judges"].columns}
        for column in ("name", "name_key", "space"):
            if column not in have:
                self.db.execute(f"alter table judges add column {column} text")
        rows = self.db.execute("select corpus, judge, owner, published, name_key from judges").fetchall()
        self.db.conn.executemany(  # new rows; and keys made by an earlier look-alike rule, made again by today's
            "update judges set name = ?, name_key = ?, space = coalesce(space, ?) where corpus = ? and judge = ?",
            [(judge_name(j), name_key(judge_name(j)), "" if p else str(o or ""), c, j) for c, j, o, p, k in rows
             if isinstance(j, str) and k != name_key(judge_name(j))])
        self.db.execute("create index if not exists judges_name_key on judges (corpus, name_key)")

    def _sample_owners(self) -> None:
        """The drawer of each judging sample (``put_sample``); an existing store's samples are everyone's."""
        if "owner" not in {c.name for c in self.db["judging_samples"].columns}:
            self.db.execute("alter table judging_samples add column owner text not null default ''")

    # ---- query sets added to a corpus ---------------------------------------------------------
    def put_query_set(self, corpus: str, set_id: str, name: str, queries: dict[str, str], owner: str = "",
                      published: bool = True, most: int | None = None) -> None:
        """Keep queries added to the corpus ``corpus`` (a ``Dataset.corpus_hash``) as one named set
        made by ``owner`` (``retrieval.sharing.owners``), ``published`` or not; the same ``set_id`` again
        replaces its name and queries, keeping its maker and whether it is published. Every rule is
        kept inside the write's own ``BEGIN IMMEDIATE`` transaction, so two writers cannot both pass:
        the name is unique, by its look-alike key (``safe_names.name_key``), in its namespace (the
        published one, or its maker's own: ``owners.space``), and a private name does not look like
        a published one; a new set past ``most`` of its maker's is refused.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            set_id: The set's id.
            name: Its name.
            queries: ``{query id: text}``.
            owner: The session's owner (``retrieval.sharing.owners``).
            published: Whether every session sees it.
            most: The most sets one maker keeps of the corpus (None: no bound).

        Raises:
            NameTaken: The name, or one like it, is taken in its namespace, or (private) published.
            TooMany: The maker keeps ``most`` sets of the corpus already.
        """
        key, packed = _name_key(name), _pack(queries)
        with self._immediate() as conn:
            was = conn.execute("select owner, published from query_sets where corpus = ? and id = ?",
                               [corpus, set_id]).fetchone()
            owner, shared = (str(was[0] or ""), int(bool(was[1]))) if was else (owner, int(bool(published)))
            if not shared:
                _no_published(conn, "query_sets", "query set", corpus, name, key, "id != ?", [set_id])
            if was is None and most is not None:
                own = conn.execute("select count(*) from query_sets where corpus = ? and owner = ?",
                                   [corpus, owner]).fetchone()[0]
                if own >= most:
                    raise TooMany(own, most, mine=True)
            try:
                conn.execute("insert into query_sets (corpus, id, name, name_key, queries, n, created, owner, "
                             "published) values (?, ?, ?, ?, ?, ?, ?, ?, ?) on conflict (corpus, id) do update set "
                             "name = excluded.name, name_key = excluded.name_key, queries = excluded.queries, "
                             "n = excluded.n, created = excluded.created",
                             [corpus, set_id, name, key, packed, len(queries), time.time(), owner, shared])
            except sqlite3.IntegrityError:
                raise NameTaken(f"a query set named {name!r}, or like it, is kept already") from None

    def query_sets(self, corpus: str, viewer: Viewer = OPERATOR) -> list[dict]:
        """The corpus's query sets ``viewer`` sees (``owners.Viewer``: on a shared deployment its own and
        the published ones; else every set): ``id, name, n, created, owner, published, queries``,
        oldest first. The one accessor of stored query sets: every reader goes through it.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            viewer: Who reads (``OPERATOR``: every set).

        Returns:
            One dict per set.
        """
        where, args = _seen(viewer, "corpus = ?", [corpus])
        with self._lock:
            rows = list(self.db.table("query_sets").rows_where(where, args, order_by="created, id"))
        out, problems = [], []
        for r in rows:  # a set not of the shape put_query_set writes is left out, with a warning
            queries, problem = stored_rows.unpacked(r["queries"], "queries")  # bounded as the writer bounds a set
            problem = problem or stored_rows.query_set_problem(r, queries)
            if problem is not None:
                problems.append(f"query set {r.get('id')!r:.60}: {problem}")
                continue
            out.append({**{k: r[k] for k in ("id", "name", "n", "created")}, "owner": str(r["owner"] or ""),
                        "published": bool(r["published"]), "queries": queries})
        stored_rows.left_out("query sets", problems)
        return out

    def query_set_count(self, corpus: str, owner: str | None = None, but: str | None = None) -> int:
        """How many query sets the corpus keeps (``owner``'s only, when given), leaving out ``but``.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            owner: The session's owner (``retrieval.sharing.owners``). None: every set.
            but: A set id not counted.

        Returns:
            The count.
        """
        where, args = "corpus = ? and id != ?", [corpus, but or ""]
        if owner is not None:
            where, args = where + " and owner = ?", args + [owner]
        with self._lock:
            return self.db.execute(f"select count(*) from query_sets where {where}", args).fetchone()[0]

    def delete_query_set(self, corpus: str, set_id: str, owner: str | None = None) -> bool:
        """Forget one query set of the corpus (with ``owner``: only if it made it); True when one went.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            set_id: The set's id.
            owner: The session's owner (``retrieval.sharing.owners``). None: any maker's.

        Returns:
            Whether a set was removed.
        """
        where, args = "corpus = ? and id = ?", [corpus, set_id]
        if owner is not None:
            where, args = where + " and owner = ?", args + [owner]
        with self._lock, self.db.conn:
            return self.db.execute(f"delete from query_sets where {where}", args).rowcount > 0

    def publish_query_set(self, corpus: str, set_id: str, owner: str) -> bool:
        """Make ``owner``'s query set ``set_id`` visible to everyone; False when it has no unpublished
        set of that id. Its name moves to the published namespace in the same transaction: one
        published already (or one like it) refuses it.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            set_id: The set's id.
            owner: The session's owner (``retrieval.sharing.owners``).

        Returns:
            Whether it was published now.

        Raises:
            NameTaken: A published set has its name, or one like it (named: it is everyone's to see).
        """
        return self._publish("query_sets", "query set", "id", corpus, set_id, owner)

    # ---- samples of queries to judge ---------------------------------------------------------
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
                                                     "seed": int(seed), "query_ids": _pack(list(query_ids)),
                                                     "owner": owner, "created": time.time()}, pk=("corpus", "id"))

    def samples(self, corpus: str, viewer: Viewer | None = None) -> list[dict]:
        """The corpus's stored samples (``id, method, seed, query_ids, created``), newest first; with
        ``viewer`` on a shared deployment, only those it drew and everyone's.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            viewer: Whose (``owners.Viewer``); None: every sample.

        Returns:
            One dict per sample; a damaged one left out, with a warning.
        """
        where, args = "corpus = ?", [corpus]
        if viewer is not None and viewer.filter is not None:
            where, args = where + " and (owner = '' or owner = ?)", args + [viewer.filter]
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

    # ---- snapshots of runs (retrieval.tracking.snapshots) ---------------------------------------------
    def put_snapshot(self, corpus: str, name: str, meta: dict, runs: dict, owner: str = "", published: bool = True,
                     replace: bool = False, most: int | None = None, most_in_corpus: int | None = None) -> int:
        """Keep a snapshot of the corpus made by ``owner``: ``meta`` (JSON) and its runs; its id. Every
        rule is kept inside the write's own ``BEGIN IMMEDIATE`` transaction, so two writers cannot both
        pass: the name is unique, by its look-alike key (``safe_names.name_key``: exact, case and
        confusable variants alike), in its namespace (the published one, or its maker's own:
        ``owners.space``), and a private name does not look like a published one; a new snapshot past
        ``most`` of its maker's or ``most_in_corpus`` in all is refused. With ``replace``, ``owner``'s
        own snapshot of that name (its private one first) is replaced — its runs, meta and time —
        unless it is the baseline; it stays published if it was.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            name: The snapshot's name.
            meta: What it records besides the runs (JSON-able).
            runs: ``{system: run}``.
            owner: The session's owner (``retrieval.sharing.owners``).
            published: Whether every session sees it.
            replace: Replace ``owner``'s own snapshot of that name.
            most: The most snapshots one maker keeps of the corpus (None: no bound).
            most_in_corpus: The most snapshots the corpus keeps, every maker's (None: no bound).

        Returns:
            The snapshot's id (``snapshots``' ``id``).

        Raises:
            NameTaken: The name is taken and may not be replaced.
            TooMany: The maker or the corpus keeps as many snapshots as it may.
        """
        key, text, packed, created = _name_key(name), json.dumps(meta), _pack(runs), float(meta["created"])
        with self._immediate() as conn:
            if replace:
                row = conn.execute("select id from snapshots where corpus = ? and name = ? and owner = ? and "
                                   "baseline = 0 order by published limit 1", [corpus, name, owner]).fetchone()
                if row is None:
                    raise NameTaken(f"no snapshot {name!r} of yours that is not the baseline to replace")
                conn.execute("update snapshots set meta = ?, runs = ?, created = ? where id = ?",
                             [text, packed, created, row[0]])
                return int(row[0])
            if not published:
                _no_published(conn, "snapshots", "snapshot", corpus, name, key)
            counted = conn.execute("select count(*), total(owner = ?) from snapshots where corpus = ?",
                                   [owner, corpus]).fetchone()
            if most is not None and counted[1] >= most:
                raise TooMany(int(counted[1]), most, mine=True)
            if most_in_corpus is not None and counted[0] >= most_in_corpus:
                raise TooMany(int(counted[0]), most_in_corpus, mine=False)
            try:
                cur = conn.execute("insert into snapshots (corpus, name, name_key, meta, runs, baseline, created, "
                                   "owner, published) values (?, ?, ?, ?, ?, 0, ?, ?, ?)",
                                   [corpus, name, key, text, packed, created, owner, int(bool(published))])
            except sqlite3.IntegrityError:
                raise NameTaken(f"a snapshot {name!r}, or one like it, exists already") from None
            return int(cur.lastrowid or 0)

    def snapshots(self, corpus: str, viewer: Viewer = OPERATOR, name: str | None = None,
                  baseline: bool = False) -> list[dict]:
        """The corpus's snapshots ``viewer`` sees (``owners.Viewer``: on a shared deployment its own and
        the published ones; else every one): ``id, name, meta, runs, baseline, owner, published,
        baseline_by, baseline_at``, oldest first — all, those called ``name`` (the one ``viewer``
        means first: its own private one, then the published, ``Viewer.rank``), or the baseline (only
        those rows' runs are read and unpacked). The one accessor of stored snapshots, with
        ``snapshot_index``: every reader goes through them.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            viewer: Who reads (``OPERATOR``: every snapshot).
            name: Only the snapshots of this name.
            baseline: Only the baseline.

        Returns:
            One dict per snapshot.
        """
        where, args = "corpus = ?", [corpus]
        if name is not None:
            where, args = where + " and name = ?", args + [name]
        if baseline:
            where += " and baseline = 1"
        where, args = _seen(viewer, where, args)
        with self._lock:
            rows = list(self.db.table("snapshots").rows_where(where, args, order_by="created, id"))
        if name is not None:
            rows.sort(key=lambda r: viewer.rank(r["owner"], r["published"]))
        out = []
        for r in rows:  # runs that do not unpack: the row is kept, marked, for ``snapshots`` to say so
            runs, problem = stored_rows.unpacked(r["runs"], "runs", self.sizes.shape)
            problem = problem or stored_rows.text_problem(r["meta"], "metadata")  # measured before it is parsed
            out.append({**r, "runs": runs, **({"damaged": problem} if problem else {})})
        return out

    def snapshot_names(self, corpus: str, viewer: Viewer = OPERATOR) -> list[str]:
        """The names of the corpus's snapshots ``viewer`` sees, oldest first (no runs read).

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            viewer: Who reads (``OPERATOR``: every snapshot).

        Returns:
            The names.
        """
        return [r["name"] for r in self.snapshot_index(corpus, viewer)]

    def snapshot_index(self, corpus: str, viewer: Viewer = OPERATOR) -> list[dict]:
        """The corpus's snapshots ``viewer`` sees, without their runs or meta (``id, name, created,
        baseline, owner, published, baseline_by, baseline_at``), oldest first.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            viewer: Who reads (``OPERATOR``: every snapshot).

        Returns:
            One dict per snapshot.
        """
        where, args = _seen(viewer, "corpus = ?", [corpus])
        with self._lock:
            rows = list(self.db.table("snapshots").rows_where(
                where, args, select="id, name, created, baseline, owner, published, baseline_by, baseline_at",
                order_by="created, id"))
        stored_rows.left_out("snapshots", [f"a name {r['name']!r:.60} that is not text" for r in rows
                                           if not isinstance(r["name"], str)])
        return [r for r in rows if isinstance(r["name"], str)]

    def snapshot_count(self, corpus: str, owner: str | None = None) -> int:
        """How many snapshots the corpus keeps (``owner``'s only, when given): a count, no row read.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            owner: The maker (``retrieval.sharing.owners``). None: every maker's.

        Returns:
            The count.
        """
        where, args = ("corpus = ? and owner = ?", [corpus, owner]) if owner is not None else ("corpus = ?", [corpus])
        with self._lock:
            return self.db.execute(f"select count(*) from snapshots where {where}", args).fetchone()[0]

    def mark_baseline(self, corpus: str, snapshot_id: int, who: str = "") -> str | None:
        """Make the published snapshot ``snapshot_id`` the corpus's only baseline (the baseline is
        everyone's), set by ``who`` now, and log the move (``baseline_log``) in the same transaction;
        the name of the baseline before (None: none). ``KeyError`` when the corpus has no published
        snapshot of that id (nothing changes).

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            snapshot_id: The snapshot (``snapshots``' ``id``).
            who: Who moved the mark, for the log.

        Returns:
            The baseline's name before, or None.

        Raises:
            KeyError: The corpus has no published snapshot ``snapshot_id``.
        """
        now = time.time()
        with self._immediate() as conn:
            found = conn.execute("select name from snapshots where corpus = ? and id = ? and published = 1",
                                 [corpus, snapshot_id]).fetchone()
            if not found:
                raise KeyError(f"no published snapshot {snapshot_id!r} of this corpus")
            was = conn.execute("select name from snapshots where corpus = ? and baseline = 1 order by id",
                               [corpus]).fetchone()
            conn.execute("update snapshots set baseline = 0, baseline_by = '', baseline_at = 0 "
                         "where corpus = ? and id != ?", [corpus, snapshot_id])
            conn.execute("update snapshots set baseline = 1, baseline_by = ?, baseline_at = ? where id = ?",
                         [who, now, snapshot_id])
            conn.execute("insert into baseline_log (corpus, moved_from, moved_to, who, at) values (?, ?, ?, ?, ?)",
                         [corpus, was[0] if was else None, found[0], who, now])
        return was[0] if was else None

    def baseline_log(self, corpus: str) -> list[dict]:
        """Every move of the corpus's baseline mark (``moved_from`` (None: none before), ``moved_to``,
        ``who``, ``at``), oldest first.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).

        Returns:
            One dict per move.
        """
        with self._lock:
            return list(self.db.table("baseline_log").rows_where("corpus = ?", [corpus], order_by="at, rowid",
                                                                select="moved_from, moved_to, who, at"))

    def publish_snapshot(self, corpus: str, snapshot_id: int, owner: str) -> bool:
        """Make ``owner``'s snapshot ``snapshot_id`` visible to everyone; False when it has no unpublished
        snapshot of that id. Its name moves to the published namespace in the same transaction: one
        published already (or one like it) refuses it.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            snapshot_id: The snapshot (``snapshots``' ``id``).
            owner: The session's owner (``retrieval.sharing.owners``).

        Returns:
            Whether it was published now.

        Raises:
            NameTaken: A published snapshot has its name, or one like it (named: it is everyone's to see).
        """
        return self._publish("snapshots", "snapshot", "id", corpus, snapshot_id, owner)

    def _publish(self, table: str, what: str, id_column: str, corpus: str, row_id: object, owner: str) -> bool:
        """``publish_snapshot`` and ``publish_query_set``: the row moves to the published namespace in
        one ``BEGIN IMMEDIATE`` transaction, which the unique index of names refuses for a name the
        published namespace has (or one like it)."""
        with self._immediate() as conn:
            found = conn.execute(f"select name, name_key from {table} where corpus = ? and {id_column} = ? and "
                                 f"owner = ? and published = 0", [corpus, row_id, owner]).fetchone()
            if found is None:
                return False
            key = _name_key(found[0]) if isinstance(found[0], str) else found[1]
            _no_published(conn, table, what, corpus, found[0], key)
            try:
                conn.execute(f"update {table} set published = 1 where corpus = ? and {id_column} = ?", [corpus, row_id])
            except sqlite3.IntegrityError:  # a key the check above did not see (a row damaged by hand)
                raise NameTaken(f"a published {what} has the name {found[0]!r} or one like it") from None
            return True

    @contextlib.contextmanager
    def _immediate(self):
        """The store's lock and one ``BEGIN IMMEDIATE`` transaction on its connection, committed on
        leaving and rolled back on an error: no other writer (another process either) writes between
        the reads and the write inside it, so a rule checked there holds when the write lands."""
        with self._lock:
            conn = self.db.conn
            if conn.in_transaction:  # one the caller left open (none of the store's own methods does)
                conn.commit()
            conn.execute("begin immediate")
            try:
                yield conn
            except BaseException:
                conn.rollback()
                raise
            conn.commit()

    # columns added to tables of earlier stores (``_owner_columns``): rows kept before them were
    # everyone's, so they are published, with no maker known
    OWNER_COLUMNS = {"snapshots": {"owner": "text not null default ''", "published": "integer not null default 1",
                                   "baseline_by": "text not null default ''",
                                   "baseline_at": "float not null default 0"},
                     "query_sets": {"owner": "text not null default ''", "published": "integer not null default 1",
                                    "name_key": "text"},
                     "runs": {"owner": "text not null default ''"}}

    def _owner_columns(self) -> None:
        """Add the maker and publication columns (``OWNER_COLUMNS``) to tables that lack them, and the
        baseline's log: an existing store opens as it was, its rows published."""
        for table, columns in self.OWNER_COLUMNS.items():
            if table not in self.db.table_names():  # made by ``_owned_names`` in its own shape
                continue
            have = {c.name for c in self.db[table].columns}
            for column, declared in columns.items():
                if column not in have:
                    self.db.execute(f"alter table {table} add column {column} {declared}")
        self.db.table("baseline_log").create({"corpus": str, "moved_from": str, "moved_to": str, "who": str,
                                              "at": float}, if_not_exists=True)
        self.db.table("baseline_log").create_index(["corpus"], if_not_exists=True)

    # the snapshots table: a row id of its own, names unique per namespace by ``_NAME_INDEXES``
    SNAPSHOTS_TABLE = ("create table {name} (id integer primary key, corpus text, name text, name_key text, meta text, "
                       "runs blob, baseline integer, created float, owner text not null default '', "
                       "published integer not null default 1, baseline_by text not null default '', "
                       "baseline_at float not null default 0)")

    def _owned_names(self) -> None:
        """Names unique where the write is, made so in one ``BEGIN IMMEDIATE`` transaction at open:

        * a store kept before namespaces has a snapshots table keyed by (corpus, name): it is made
          again with a row id of its own (a new table, every row copied, the old one dropped and the
          new one renamed), its rows as they were (published, with no maker known, where kept so);
        * every snapshot and query set has its name's look-alike key (``safe_names.name_key``) kept
          beside it, made again wherever the key the code gives now differs from the stored one (a
          row kept before, or under an earlier rule); two rows of one namespace whose names look
          alike — kept before names were unique by their key — both stay, the later under a key no
          name can have (its own, a NUL and its row id), so every new name is still held against it;
        * a unique index per table on (corpus, key, namespace: ``""`` for a published row, else its
          maker's id), so exact, case and look-alike duplicates are all refused by the write itself.
        """
        with self._immediate() as conn:
            tables = {r[0] for r in conn.execute("select name from sqlite_master where type = 'table'")}
            if "snapshots" not in tables:
                conn.execute(self.SNAPSHOTS_TABLE.format(name="snapshots"))
            elif "name_key" not in {r[1] for r in conn.execute("pragma table_info(snapshots)")}:
                self._rebuild_snapshots(conn)
            for table in ("snapshots", "query_sets"):
                self._name_keys(conn, table)

    def _rebuild_snapshots(self, conn: sqlite3.Connection) -> None:
        """An earlier store's snapshots table, keyed by (corpus, name), made again in the current shape
        (inside ``_owned_names``' transaction): a new table, every row copied, oldest first, the old
        one dropped and the new one renamed."""
        have = {r[1] for r in conn.execute("pragma table_info(snapshots)")}
        columns = ["corpus", "name", "meta", "runs", "baseline", "created", "owner", "published", "baseline_by",
                   "baseline_at"]
        defaults = {"owner": "''", "published": "1", "baseline_by": "''", "baseline_at": "0", "baseline": "0"}
        values = ", ".join(c if c in have else defaults.get(c, "null") for c in columns)
        conn.execute("drop table if exists snapshots_owned")
        conn.execute(self.SNAPSHOTS_TABLE.format(name="snapshots_owned"))
        conn.execute(f"insert into snapshots_owned ({', '.join(columns)}) select {values} from snapshots "
                     f"order by created, rowid")
        conn.execute("drop table snapshots")
        conn.execute("alter table snapshots_owned rename to snapshots")

    _NAME_INDEXES = {"snapshots": "snapshots_unique_names", "query_sets": "query_sets_unique_names"}

    def _name_keys(self, conn: sqlite3.Connection, table: str) -> None:
        """Every row of ``table`` with the look-alike key its name has now, and the unique index of
        names per namespace (``_owned_names``)."""
        index = self._NAME_INDEXES[table]
        rows = conn.execute(f"select rowid, corpus, name, name_key, case when published then '' else owner end "
                            f"from {table} order by created, rowid").fetchall()
        taken: set[tuple] = set()
        changed = []
        for rowid, corpus, name, stored, space in rows:
            key = _name_key(name) if isinstance(name, str) else None  # a damaged name: no key (lists leave it out)
            if key is not None:
                if (corpus, space, key) in taken:  # kept before names were unique by their key
                    key = f"{key}\x00{rowid}"
                taken.add((corpus, space, key))
            if key != stored:
                changed.append((key, rowid))
        if changed:
            conn.execute(f"drop index if exists {index}")
            conn.executemany(f"update {table} set name_key = ? where rowid = ?", changed)
        conn.execute(f"create unique index if not exists {index} on {table} "
                     f"(corpus, name_key, (case when published then '' else owner end))")

    # ---- uploaded data sets kept (``retrieval.data.kept``) ------------------------------------------
    def put_kept(self, row: dict) -> None:
        """Keep the record of an uploaded data set kept beside the store (a row of ``kept_datasets``:
        ``owner, id, corpus, name, files`` (a JSON list of file names), ``documents, queries, bytes,
        published, created, opened``), replacing the maker's record of the same data set; every
        maker's record of it names the files given (one folder holds them: ``retrieval.data.kept``).

        Args:
            row: The record.
        """
        with self._lock, self.db.conn:
            self.db.table("kept_datasets").upsert(row, pk=("owner", "id"))
            self.db.execute("update kept_datasets set files = ?, bytes = ? where id = ?",
                            [row["files"], row["bytes"], row["id"]])

    def kept(self, owner: str | None = None) -> list[dict]:
        """The kept data sets (``put_kept``'s rows, ``files`` a list), the most recently opened first;
        with ``owner``, only its own and the published ones (``owners.Viewer.filter``); a row not of the
        shape ``put_kept`` writes is left out, with a warning.

        Args:
            owner: The session's owner (``retrieval.sharing.owners``). None: every maker's.

        Returns:
            One dict per kept data set and maker.
        """
        where, args = ("published = 1 or owner = ?", [owner]) if owner is not None else (None, None)
        with self._lock:
            rows = list(self.db.table("kept_datasets").rows_where(where, args, order_by="opened desc, id"))
        out, problems = [], []
        for r in rows:
            files, problem = stored_rows.kept_files(r.get("files"))
            problem = problem or stored_rows.kept_problem(r)
            if problem is not None:
                problems.append(f"kept data set {str(r.get('id'))[:16]!r}: {problem}")
                continue
            out.append({**r, "owner": str(r["owner"] or ""), "published": bool(r["published"]), "files": files})
        stored_rows.left_out("kept_datasets", problems)
        return out

    def open_kept(self, owner: str, kept_id: str) -> None:
        """Note that ``owner`` opened its kept data set ``kept_id`` now (the most recently opened are
        kept longest).

        Args:
            owner: The maker (``retrieval.sharing.owners``).
            kept_id: The data set's id.
        """
        with self._lock, self.db.conn:
            self.db.execute("update kept_datasets set opened = ? where owner = ? and id = ?",
                            [time.time(), owner, kept_id])

    def forget_kept(self, kept_id: str, owner: str | None = None) -> int:
        """Forget the kept data set ``kept_id`` (with ``owner``: only that maker's record); how many
        records went, and whether any other still names the data set's files is ``kept_names``'.

        Args:
            kept_id: The data set's id.
            owner: The maker whose record goes (``retrieval.sharing.owners``). None: every maker's.

        Returns:
            How many records were removed.
        """
        where, args = "id = ?", [kept_id]
        if owner is not None:
            where, args = where + " and owner = ?", args + [owner]
        with self._lock, self.db.conn:
            return self.db.execute(f"delete from kept_datasets where {where}", args).rowcount

    def kept_names(self) -> dict[str, int]:
        """Every kept data set's id with the bytes of its files (each id once, however many makers keep it)."""
        with self._lock:
            return {r[0]: int(r[1] or 0) for r in self.db.execute(
                "select id, max(bytes) from kept_datasets group by id").fetchall() if isinstance(r[0], str)}

    # ---- training jobs ----------------------------------------------------------------------
    JOB_JSON = ("config", "progress", "losses", "result")

    def put_job(self, job: dict) -> None:
        """Write a training job: a new row, or the fields given over the row of its ``id``.

        Args:
            job: The job; its ``JOB_JSON`` fields are written as JSON.
        """
        row = {k: (json.dumps(v, default=str) if k in self.JOB_JSON and not isinstance(v, str) else v)
               for k, v in job.items()}
        row["updated"] = time.time()
        with self._lock, self.db.conn:
            # set on the first write only: an update must not move the job in the newest-first list
            if "created" not in row and not self.db.execute("select 1 from jobs where id = ?", [row["id"]]).fetchone():
                row["created"] = row["updated"]
            self.db.table("jobs").upsert(row, pk="id", alter=True)

    def get_job(self, job_id: str) -> dict | None:
        """The training job ``job_id``; None when there is none, or its row is damaged (with a warning).

        Args:
            job_id: The job's id.

        Returns:
            The job, its JSON fields decoded, or None.
        """
        with self._lock:
            rows = list(self.db.table("jobs").rows_where("id = ?", [job_id]))
        found = self._checked_jobs(rows)
        return found[0] if found else None

    def jobs(self, limit: int = 50) -> list[dict]:
        """The newest ``limit`` training jobs, newest first; a damaged row is left out, with a warning.

        Args:
            limit: The most jobs returned.

        Returns:
            One dict per job.
        """
        with self._lock:
            rows = list(self.db.table("jobs").rows_where(order_by="created desc", limit=limit))
        return self._checked_jobs(rows)

    def _checked_jobs(self, rows: list[dict]) -> list[dict]:
        out, problems = [], []
        for row in rows:
            try:
                job = self._job_row(row)
            except (TypeError, ValueError, RecursionError) as err:
                problems.append(f"job {row.get('id')!r:.60}: a JSON field does not decode ({err})")
                continue
            problem = stored_rows.job_problem(job)
            if problem is None:
                out.append(job)
            else:
                problems.append(f"job {row.get('id')!r:.60}: {problem}")
        stored_rows.left_out("training jobs", problems)
        return out

    def _job_row(self, row: dict) -> dict:
        """The job's row with its ``JOB_JSON`` fields decoded, each measured first; a ValueError
        naming the first that is past its size or not JSON."""
        job = {}
        for k, v in row.items():
            if k in self.JOB_JSON and isinstance(v, str) and v:
                v, problem = stored_rows.loaded(v, k, self.sizes.shape)
                if problem is not None:
                    raise ValueError(problem)
            job[k] = v
        return job

    def mark_interrupted(self) -> int:
        """Jobs left queued or running by a process that died are marked ``interrupted``.

        Returns:
            How many jobs were marked.
        """
        with self._lock, self.db.conn:
            cur = self.db.execute("update jobs set status = 'interrupted', updated = ? "
                                  "where status in ('queued', 'running')", [time.time()])
            return cur.rowcount
