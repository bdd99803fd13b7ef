"""The SQLite cache: embeddings, data sets, models, runs, metrics and 2-D projections, keyed by
content hashes; and the relevance judgments analysts make, which are not a cache (nothing can
recompute them).

One file (``$RANKSCOPE_STORE``, else ``$RANKSCOPE_HOME/rankscope.sqlite3``, else the user's
cache directory), WAL mode, every write in a transaction. Because rows are keyed by hashes of
their inputs (model fingerprint × text hash, data set hash × system × parameters), a changed
corpus or model never reads stale rows and nothing is computed twice. Judgments are keyed by the
corpus alone (``Dataset.corpus_hash``), so adding queries or labels to a corpus keeps them.

The package is small repositories over one connection:

* ``connection``: opening the file, the lock, ``BEGIN IMMEDIATE`` and SQLite's limits (``Connected``);
* ``schema``: the tables, made or brought up to date at open;
* ``owned``: rows with a maker (who sees them, names unique per namespace, publishing), the one helper
  of snapshots, query sets, runs, samples and kept data sets;
* one module per kind of row: ``indexes`` (BM25 blobs, vectors, encoders, data sets), ``runs`` (runs,
  metrics, projections), ``judgments`` (grades and judges), ``query_sets``, ``samples``, ``snapshots``,
  ``kept`` (uploaded data sets) and ``jobs``;
* ``keys`` and ``errors``: the hashes and packing, and what the store refuses;
* ``protocol``: ``StoreProtocol``, what the workspace, the engines and judging ask of a store.

Each repository is a class of methods over the one connection (``Connected``'s ``db``, ``_lock`` and
``_immediate``), and ``Store`` is all of them: its methods are the repositories' own, inherited, not
written again as delegations, so a method lives in one module and every caller keeps ``store.get_run``,
``store.put_snapshot`` and ``Store(path)`` as they were. Composition (``store.runs.get``) would have
changed every call site and sent each repository the lock and connection besides; mixins over one base
keep each module one kind of row, and the rule that crosses kinds (makers and publishing) in ``owned``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from retrieval.judging.staged_writes import JudgmentsStored
from retrieval.store.connection import SCHEMA_VERSION, Connected, _max_value_length, default_store_path
from retrieval.store.errors import NameTaken, StoreError, TooMany
from retrieval.store.indexes import Indexes
from retrieval.store.jobs import Jobs
from retrieval.store.judgments import Judgments
from retrieval.store.kept import Kept
from retrieval.store.keys import cache_key, text_hash
from retrieval.store.keys import pack as _pack
from retrieval.store.protocol import StoreProtocol
from retrieval.store.query_sets import QuerySets
from retrieval.store.runs import Runs
from retrieval.store.samples import Samples
from retrieval.store.snapshots import Snapshots

__all__ = ["SCHEMA_VERSION", "JudgmentsStored", "NameTaken", "Store", "StoreError", "StoreProtocol", "TooMany",
           "_max_value_length", "_pack", "cache_key", "default_store_path", "text_hash"]


class Store(Indexes, Runs, Judgments, QuerySets, Samples, Snapshots, Kept, Jobs, Connected):
    """Thread-safe access to the cache file (one connection, serialized by a lock): every repository of
    the package over it (``retrieval.store``).

    Args:
        path: The SQLite file, created with its folder where absent; None: ``default_store_path()``
            (``$RANKSCOPE_STORE``, else ``rankscope.sqlite3`` in ``$RANKSCOPE_HOME`` or the user cache folder).

    Raises:
        StoreError: The path is a folder, or cannot be opened and written.
    """


if TYPE_CHECKING:  # the store is what the library asks of one: mypy holds the class to the protocol
    _IS_A_STORE: type[StoreProtocol] = Store
