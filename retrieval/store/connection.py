"""The store's one connection: where the file is, opening it (its tables made or brought up to date:
``schema``; names unique where the write is: ``owned``), the lock every read and write holds, the
``BEGIN IMMEDIATE`` transaction a rule checked before a write is kept in, and SQLite's limits.

``Connected`` is the base of every repository of the package (``indexes``, ``runs``, ``judgments``, …):
each is a class of methods over ``self.db`` and ``self._lock`` and nothing else of its own, and
``retrieval.store.Store`` is all of them over this one connection.
"""
from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs

from retrieval import row_bounds
from retrieval.judging import staged_writes as staging
from retrieval.store import owned, schema
from retrieval.store.errors import StoreError

if TYPE_CHECKING:
    import sqlite_utils

SCHEMA_VERSION = 1
_CHUNK = 500  # ids per "IN (...)" query, under SQLite's variable limit


def default_store_path() -> Path:
    if os.environ.get("RANKSCOPE_STORE"):
        return Path(os.environ["RANKSCOPE_STORE"]).expanduser()
    home = os.environ.get("RANKSCOPE_HOME") or platformdirs.user_cache_dir("rankscope")
    return Path(home).expanduser() / "rankscope.sqlite3"


def _max_value_length(conn: sqlite3.Connection) -> int:
    """SQLite's largest value in bytes (``SQLITE_LIMIT_LENGTH``): asked of the connection where Python can
    (3.11 and later), else SQLite's compiled-in default."""
    if sys.version_info >= (3, 11):
        return conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
    return 1_000_000_000


class Connected:
    """Thread-safe access to the cache file (one connection, serialized by a lock).

    Args:
        path: The SQLite file, created with its folder where absent; None: ``default_store_path()``
            (``$RANKSCOPE_STORE``, else ``rankscope.sqlite3`` in ``$RANKSCOPE_HOME`` or the user cache folder).

    Raises:
        StoreError: The path is a folder, or cannot be opened and written.
    """

    db: sqlite_utils.Database

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
            with self._lock, self.db.conn:
                schema.create(self.db, SCHEMA_VERSION)
            with self._immediate() as immediate:  # snapshot and query-set names unique where the write is
                owned.unique_names(immediate)
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

    @contextlib.contextmanager
    def _immediate(self) -> Iterator[sqlite3.Connection]:
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
