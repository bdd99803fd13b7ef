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

import hashlib
import json
import os
import secrets
import sqlite3
import sys
import threading
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import platformdirs

from retrieval import row_bounds, stored_rows
from retrieval.data.run import Run
from retrieval.judging import staged_writes as staging
from retrieval.judging.staged_writes import JudgmentsStored
from retrieval.sharing.owners import Viewer

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


@dataclass(frozen=True)
class JudgesClaimed:
    """What ``Store.claim_judges`` did: the judges' names it made the claimant's (``new``), and those
    another maker holds (``taken``: name -> maker, ``""`` for one kept before makers were recorded)."""

    new: tuple[str, ...]
    taken: dict[str, str]


class _Refused(Exception):
    def __init__(self, taken: dict[str, str]):
        super().__init__("taken")
        self.taken = taken


class NameTaken(ValueError):
    """A snapshot's name the corpus has already (``Store.put_snapshot``), or none of the writer's to replace."""


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
            db.table("snapshots").create({"corpus": str, "name": str, "meta": str, "runs": bytes, "baseline": int,
                                         "created": float}, pk=("corpus", "name"), if_not_exists=True)
            db.table("kept_datasets").create({"owner": str, "id": str, "corpus": str, "name": str, "files": str,
                                             "documents": int, "queries": int, "bytes": int, "published": int,
                                             "created": float, "opened": float}, pk=("owner", "id"),
                                            if_not_exists=True)
            self._owner_columns()
            self._judge_owners()

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
                k: int, run: Run) -> None:
        """Keep a run under ``key``, replacing any.

        Args:
            key: The run's cache key (``cache_key``).
            dataset: The data set's content hash.
            system: The system.
            params: The system's parameters.
            split: The split searched (None: no split).
            k: The lists' depth.
            run: ``{query id: [(document id, score), …]}``.
        """
        with self._lock, self.db.conn:
            self.db.table("runs").upsert({"key": key, "dataset": dataset, "system": system,
                                         "params": json.dumps(params, sort_keys=True, default=str),
                                         "split": split or "", "k": k, "hits": _pack(run),
                                         "created": time.time()}, pk="key")

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

    def runs(self, dataset: str | None = None) -> list[dict]:
        """Run history (without the hits), newest first.

        Args:
            dataset: Only this data set's (its content hash); None: all.

        Returns:
            One dict per run: ``key, dataset, system, params, split, k, created``.
        """
        where, args = ("dataset = ?", [dataset]) if dataset else (None, None)
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

    def put_judgments(self, corpus: str, judgments: Iterable, source: str | None = None) -> JudgmentsStored:
        """Store several ``(query id, query text, doc id, grade, judge)`` grades of the corpus as one
        write (an import), through a connection of its own and never under the store's lock, so other
        sessions' reads go on meanwhile (``retrieval.judging.staged_writes``: a large import is staged, then copied
        in by one short transaction). All or nothing: a bad row (``ValueError``) or more than
        ``staged_writes.MAX_IMPORT_ROWS`` rows (``staged_writes.TooManyRows``, naming ``source``, the file) stores
        none, and readers never see part of it. Counted against what the store held for the corpus
        and judge (``JudgmentsStored``: new, changed, unchanged; a pair given twice counts once, its
        last grade); an unchanged grade is left as it was (its time too).

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            judgments: ``(query id, query text, doc id, grade, judge)`` tuples.
            source: The file they came from, named in errors.

        Returns:
            How many grades were new, changed and unchanged.
        """
        return staging.put(self.path, corpus, judgments, source)

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

    def judges(self, corpus: str) -> list[str]:
        """The names of the corpus's judges, each once, sorted (a new judge's name is held against them:
        ``safe_names.check_new_name``): every session's, those with a maker and no grade yet among them; a
        name ``check_judge`` refuses is left out, with a warning.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).

        Returns:
            The judges' names.
        """
        with self._lock:
            names = [r[0] for r in self.db.execute("select judge from judgments where corpus = ? union "
                                                   "select judge from judges where corpus = ? order by judge",
                                                   [corpus, corpus]).fetchall()]
        checked: dict[str, str | None] = {}  # a name the judgments' readers leave out is left out here too
        problems = [(n, stored_rows.judge_problem(n, checked)) for n in names]
        stored_rows.left_out("judges", [f"judge {n!r:.60}: {p}" for n, p in problems if p is not None])
        return [n for n, p in problems if p is None]

    def judged_query_ids(self, corpus: str, viewer: Viewer | None = None) -> list[str]:
        """The ids of the corpus's queries that have a judgment (with ``viewer``: by one of the judges
        whose grades it sees, as ``judgments``), each once (read from the key's index, not the rows).

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            viewer: Only by the judges whose grades this viewer sees.

        Returns:
            The query ids.
        """
        with self._lock:
            where, args = self._unseen_judges(corpus, viewer, "corpus = ?", [corpus])
            return [r[0] for r in self.db.execute(f"select distinct query_id from judgments where {where} "
                                                  "order by query_id", args).fetchall()]

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

    def claim_judges(self, corpus: str, names: Iterable[str], owner: str, published: bool,
                     refuse: bool = True) -> JudgesClaimed:
        """Make ``owner`` the maker of each judge of ``names`` the corpus has no maker for, ``published``
        or not, in one transaction (a judge with grades but no maker recorded, kept before makers were,
        becomes published with no maker: ``""``). ``JudgesClaimed``: the names now ``owner``'s that were
        no one's (``new``), and those another maker holds (``taken``: name -> maker); with ``refuse``,
        when any is taken none is claimed. Two sessions claiming one name: the first write wins.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            names: The judges' names.
            owner: The session's owner (``retrieval.sharing.owners``).
            published: Whether the new judges count for every session.
            refuse: Refuse (``NameTaken``) a name another owner made, claiming none.

        Returns:
            The names claimed now, and those that were ``owner``'s already.
        """
        names = sorted({str(n) for n in names})
        if not names:
            return JudgesClaimed((), {})
        listed, now = json.dumps(names), time.time()
        with self._lock:
            held = dict(self.db.execute("select judge, owner from judges where corpus = ? and judge in "
                                        "(select value from json_each(?))", [corpus, listed]).fetchall())
            if len(held) == len(names):  # every one has a maker already: nothing to write (a judge's every grade)
                return JudgesClaimed((), {n: str(o or "") for n, o in held.items() if o != owner})
            try:
                with self.db.conn:
                    before = {r[0] for r in self.db.execute(
                        "select judge from judges where corpus = ? and judge in (select value from json_each(?))",
                        [corpus, listed]).fetchall()}
                    if len(before) < len(names):  # grades kept without a maker (the command line's, an old store's)
                        self.db.execute("insert or ignore into judges (corpus, judge, owner, published, created) "
                                        "select corpus, judge, '', 1, min(time) from judgments where corpus = ? and "
                                        "judge in (select value from json_each(?)) group by judge",
                                        [corpus, json.dumps([n for n in names if n not in before])])
                    self.db.conn.executemany("insert or ignore into judges (corpus, judge, owner, published, created) "
                                             "values (?, ?, ?, ?, ?)",
                                             [(corpus, n, owner, int(bool(published)), now) for n in names])
                    held = dict(self.db.execute("select judge, owner from judges where corpus = ? and judge in "
                                                "(select value from json_each(?))", [corpus, listed]).fetchall())
                    taken = {n: str(o or "") for n, o in held.items() if o != owner}
                    if taken and refuse:
                        raise _Refused(taken)
            except _Refused as refused:
                return JudgesClaimed((), refused.taken)
        return JudgesClaimed(tuple(n for n in names if n not in before and held.get(n) == owner), taken)

    def release_judges(self, corpus: str, names: Iterable[str], owner: str) -> None:
        """Forget ``owner``'s claim on each of ``names`` that holds no grade (an import that stored
        nothing after claiming them).

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            names: The judges' names.
            owner: The session's owner (``retrieval.sharing.owners``).
        """
        with self._lock, self.db.conn:
            self.db.execute("delete from judges where corpus = ? and owner = ? and judge in (select value from "
                            "json_each(?)) and not exists (select 1 from judgments j where j.corpus = judges.corpus "
                            "and j.judge = judges.judge)", [corpus, owner, json.dumps(sorted(set(names)))])

    def judge_makers(self, corpus: str) -> dict[str, dict]:
        """Each judge of the corpus with a maker recorded: name -> ``owner, published, created``.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).

        Returns:
            ``{judge: {owner, published, created}}``.
        """
        with self._lock:
            rows = self.db.execute("select judge, owner, published, created from judges where corpus = ? order by "
                                   "judge", [corpus]).fetchall()
        return {j: {"owner": str(o or ""), "published": bool(p), "created": c} for j, o, p, c in rows
                if isinstance(j, str)}

    def publish_judge(self, corpus: str, judge: str, owner: str) -> bool:
        """Make ``owner``'s judge ``judge`` count for everyone; False when it has no such unpublished judge.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            judge: The judge's name.
            owner: The session's owner (``retrieval.sharing.owners``).

        Returns:
            Whether it was published now.
        """
        with self._lock, self.db.conn:
            return self.db.execute("update judges set published = 1 where corpus = ? and judge = ? and owner = ? "
                                   "and published = 0", [corpus, judge, owner]).rowcount > 0

    def _judge_owners(self) -> None:
        """The ``judges`` table (a judge's maker, and whether its grades count for everyone); an
        existing store's judges become published, with no maker known, as they were everyone's."""
        if "judges" in self.db.table_names():
            return
        self.db.table("judges").create({"corpus": str, "judge": str, "owner": str, "published": int, "created": float},
                                      pk=("corpus", "judge"))
        self.db.execute("insert or ignore into judges (corpus, judge, owner, published, created) "
                        "select corpus, judge, '', 1, min(time) from judgments group by corpus, judge")

    # ---- query sets added to a corpus ---------------------------------------------------------
    def put_query_set(self, corpus: str, set_id: str, name: str, queries: dict[str, str], owner: str = "",
                      published: bool = True) -> None:
        """Keep queries added to the corpus ``corpus`` (a ``Dataset.corpus_hash``) as one named set
        made by ``owner`` (``retrieval.sharing.owners``), ``published`` or not; the same ``set_id`` again
        replaces its name and queries, keeping its maker and whether it is published.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            set_id: The set's id.
            name: Its name.
            queries: ``{query id: text}``.
            owner: The session's owner (``retrieval.sharing.owners``).
            published: Whether every session sees it.
        """
        with self._lock, self.db.conn:
            was = self.db.execute("select owner, published from query_sets where corpus = ? and id = ?",
                                  [corpus, set_id]).fetchone()
            owner, shared = (was[0] or "", was[1]) if was else (owner, int(bool(published)))
            self.db.table("query_sets").upsert({"corpus": corpus, "id": set_id, "name": name, "queries": _pack(queries),
                                               "n": len(queries), "created": time.time(), "owner": owner,
                                               "published": shared}, pk=("corpus", "id"))

    def query_sets(self, corpus: str, owner: str | None = None) -> list[dict]:
        """The corpus's query sets (``id, name, n, created, owner, published, queries``), oldest
        first; with ``owner``, only its own and the published ones (``owners.Viewer.filter``).

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            owner: The session's owner (``retrieval.sharing.owners``). None: every set.

        Returns:
            One dict per set.
        """
        where, args = "corpus = ?", [corpus]
        if owner is not None:
            where, args = where + " and (published = 1 or owner = ?)", args + [owner]
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
        """Make ``owner``'s query set ``set_id`` visible to everyone; False when it has none of that id.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            set_id: The set's id.
            owner: The session's owner (``retrieval.sharing.owners``).

        Returns:
            Whether it was published now.
        """
        with self._lock, self.db.conn:
            return self.db.execute("update query_sets set published = 1 where corpus = ? and id = ? and owner = ?",
                                   [corpus, set_id, owner]).rowcount > 0

    # ---- samples of queries to judge ---------------------------------------------------------
    def put_sample(self, corpus: str, sample_id: str, method: str, seed: int, query_ids: list[str]) -> None:
        """Keep a sample of a corpus's queries drawn for judging (``retrieval.judging.sampling``).

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            sample_id: The sample's id.
            method: How it was drawn.
            seed: The seed it was drawn with.
            query_ids: The queries drawn.
        """
        with self._lock, self.db.conn:
            self.db.table("judging_samples").upsert({"corpus": corpus, "id": sample_id, "method": method,
                                                     "seed": int(seed), "query_ids": _pack(list(query_ids)),
                                                     "created": time.time()}, pk=("corpus", "id"))

    def samples(self, corpus: str) -> list[dict]:
        """The corpus's stored samples (``id, method, seed, query_ids, created``), newest first.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).

        Returns:
            One dict per sample; a damaged one left out, with a warning.
        """
        with self._lock:
            rows = list(self.db.table("judging_samples").rows_where("corpus = ?", [corpus],
                                                                    order_by="created desc, id"))
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
                     replace: bool = False) -> None:
        """Keep a snapshot of the corpus made by ``owner``: ``meta`` (JSON) and its runs. A name the
        corpus has already is ``NameTaken`` unless ``replace`` and the snapshot is ``owner``'s and
        not the baseline (then its runs, meta and time are replaced; it stays published if it was).
        Checked in the write's transaction, so two writers of one name cannot both succeed.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            name: The snapshot's name.
            meta: What it records besides the runs (JSON-able).
            runs: ``{system: run}``.
            owner: The session's owner (``retrieval.sharing.owners``).
            published: Whether every session sees it.
            replace: Replace ``owner``'s own snapshot of that name.

        Raises:
            NameTaken: The name is taken and may not be replaced.
        """
        row = {"corpus": corpus, "name": name, "meta": json.dumps(meta), "runs": _pack(runs),
               "created": float(meta["created"])}
        with self._lock, self.db.conn:
            if replace:
                cur = self.db.execute("update snapshots set meta = ?, runs = ?, created = ? where corpus = ? and "
                                      "name = ? and owner = ? and baseline = 0",
                                      [row["meta"], row["runs"], row["created"], corpus, name, owner])
                if cur.rowcount != 1:
                    raise NameTaken(f"no snapshot {name!r} of {owner!r} that is not the baseline to replace")
                return
            try:
                self.db.execute("insert into snapshots (corpus, name, meta, runs, baseline, created, owner, published) "
                                "values (?, ?, ?, ?, 0, ?, ?, ?)", [corpus, name, row["meta"], row["runs"],
                                                                    row["created"], owner, int(bool(published))])
            except sqlite3.IntegrityError:
                raise NameTaken(f"a snapshot {name!r} of this corpus exists already") from None

    def snapshots(self, corpus: str, name: str | None = None, baseline: bool = False,
                  owner: str | None = None) -> list[dict]:
        """The corpus's snapshots (``name, meta, runs, baseline, owner, published, baseline_by,
        baseline_at``), oldest first: all, the one called ``name``, or the baseline (only those rows'
        runs are read and unpacked); with ``owner``, only its own and the published ones.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            name: Only the snapshot of this name.
            baseline: Only the baseline.
            owner: The session's owner (``retrieval.sharing.owners``). None: every snapshot.

        Returns:
            One dict per snapshot.
        """
        where, args = "corpus = ?", [corpus]
        if name is not None:
            where, args = where + " and name = ?", args + [name]
        if baseline:
            where += " and baseline = 1"
        if owner is not None:
            where, args = where + " and (published = 1 or owner = ?)", args + [owner]
        with self._lock:
            rows = list(self.db.table("snapshots").rows_where(where, args, order_by="created, name"))
        out = []
        for r in rows:  # runs that do not unpack: the row is kept, marked, for ``snapshots`` to say so
            runs, problem = stored_rows.unpacked(r["runs"], "runs", self.sizes.shape)
            problem = problem or stored_rows.text_problem(r["meta"], "metadata")  # measured before it is parsed
            out.append({**r, "runs": runs, **({"damaged": problem} if problem else {})})
        return out

    def snapshot_names(self, corpus: str, owner: str | None = None) -> list[str]:
        """The names of the corpus's snapshots, oldest first (no runs read); with ``owner``, only
        its own and the published ones.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            owner: The session's owner (``retrieval.sharing.owners``). None: every snapshot.

        Returns:
            The names.
        """
        return [r["name"] for r in self.snapshot_index(corpus, owner)]

    def snapshot_index(self, corpus: str, owner: str | None = None) -> list[dict]:
        """The corpus's snapshots without their runs or meta (``name, created, baseline, owner,
        published, baseline_by, baseline_at``), oldest first; with ``owner``, its own and the published.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            owner: The session's owner (``retrieval.sharing.owners``). None: every snapshot.

        Returns:
            One dict per snapshot.
        """
        where, args = "corpus = ?", [corpus]
        if owner is not None:
            where, args = where + " and (published = 1 or owner = ?)", args + [owner]
        with self._lock:
            rows = list(self.db.table("snapshots").rows_where(
                where, args, select="name, created, baseline, owner, published, baseline_by, baseline_at",
                order_by="created, name"))
        stored_rows.left_out("snapshots", [f"a name {r['name']!r:.60} that is not text" for r in rows
                                           if not isinstance(r["name"], str)])
        return [r for r in rows if isinstance(r["name"], str)]

    def mark_baseline(self, corpus: str, name: str, who: str = "") -> str | None:
        """Make the snapshot ``name`` the corpus's only baseline, set by ``who`` now, and log the move
        (``baseline_log``) in the same transaction; the name of the baseline before (None: none).
        ``KeyError`` when the corpus has no snapshot ``name`` (nothing changes).

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            name: The snapshot.
            who: Who moved the mark, for the log.

        Returns:
            The baseline's name before, or None.

        Raises:
            KeyError: The corpus has no snapshot ``name``.
        """
        now = time.time()
        with self._lock, self.db.conn:
            if not self.db.execute("select 1 from snapshots where corpus = ? and name = ?", [corpus, name]).fetchone():
                raise KeyError(f"no snapshot {name!r} of this corpus")
            was = self.db.execute("select name from snapshots where corpus = ? and baseline = 1 order by name",
                                  [corpus]).fetchone()
            self.db.execute("update snapshots set baseline = 0, baseline_by = '', baseline_at = 0 "
                            "where corpus = ? and name != ?", [corpus, name])
            self.db.execute("update snapshots set baseline = 1, baseline_by = ?, baseline_at = ? "
                            "where corpus = ? and name = ?", [who, now, corpus, name])
            self.db.execute("insert into baseline_log (corpus, moved_from, moved_to, who, at) values (?, ?, ?, ?, ?)",
                            [corpus, was[0] if was else None, name, who, now])
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

    def publish_snapshot(self, corpus: str, name: str, owner: str) -> bool:
        """Make ``owner``'s snapshot ``name`` visible to everyone; False when it has none of that name.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            name: The snapshot.
            owner: The session's owner (``retrieval.sharing.owners``).

        Returns:
            Whether it was published now.
        """
        with self._lock, self.db.conn:
            return self.db.execute("update snapshots set published = 1 where corpus = ? and name = ? and owner = ?",
                                   [corpus, name, owner]).rowcount > 0

    # columns added to tables of earlier stores (``_owner_columns``): rows kept before them were
    # everyone's, so they are published, with no maker known
    OWNER_COLUMNS = {"snapshots": {"owner": "text not null default ''", "published": "integer not null default 1",
                                   "baseline_by": "text not null default ''",
                                   "baseline_at": "float not null default 0"},
                     "query_sets": {"owner": "text not null default ''", "published": "integer not null default 1"}}

    def _owner_columns(self) -> None:
        """Add the maker and publication columns (``OWNER_COLUMNS``) to tables that lack them, and the
        baseline's log: an existing store opens as it was, its rows published."""
        for table, columns in self.OWNER_COLUMNS.items():
            have = {c.name for c in self.db[table].columns}
            for column, declared in columns.items():
                if column not in have:
                    self.db.execute(f"alter table {table} add column {column} {declared}")
        self.db.table("baseline_log").create({"corpus": str, "moved_from": str, "moved_to": str, "who": str,
                                              "at": float}, if_not_exists=True)
        self.db.table("baseline_log").create_index(["corpus"], if_not_exists=True)

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
