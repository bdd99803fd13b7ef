"""The store's tables: made where absent when a store is opened, and an earlier store's brought up to
date (the columns added since, its rows as they were). Nothing here reads or writes a row a repository
keeps; the names' unique indexes and the snapshots table's own shape are ``owned``'s.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from retrieval.judging.grades import judge_name
from retrieval.safe_names import name_key

if TYPE_CHECKING:
    import sqlite_utils


def create(db: sqlite_utils.Database, version: int) -> None:
    """Every table the store keeps, made where absent, and the columns later versions added brought to an
    earlier store (its rows as they were: published, with no maker known); inside the caller's lock and
    transaction. The snapshots table and the names' unique indexes are ``owned.unique_names``'.

    Args:
        db: The store's database.
        version: The schema version a new store records.
    """
    if "meta" not in db.table_names():
        db.table("meta").insert({"key": "schema_version", "value": str(version)}, pk="key")
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
    _owner_columns(db)
    _judge_owners(db)
    _sample_owners(db)


# columns added to tables of earlier stores (``_owner_columns``): rows kept before them were
# everyone's, so they are published, with no maker known
OWNER_COLUMNS = {"snapshots": {"owner": "text not null default ''", "published": "integer not null default 1",
                               "baseline_by": "text not null default ''",
                               "baseline_at": "float not null default 0"},
                 "query_sets": {"owner": "text not null default ''", "published": "integer not null default 1",
                                "name_key": "text"},
                 "runs": {"owner": "text not null default ''"}}


def _owner_columns(db: sqlite_utils.Database) -> None:
    """Add the maker and publication columns (``OWNER_COLUMNS``) to tables that lack them, and the
    baseline's log: an existing store opens as it was, its rows published."""
    for table, columns in OWNER_COLUMNS.items():
        if table not in db.table_names():  # made by ``owned.unique_names`` in its own shape
            continue
        have = {c.name for c in db[table].columns}
        for column, declared in columns.items():
            if column not in have:
                db.execute(f"alter table {table} add column {column} {declared}")
    db.table("baseline_log").create({"corpus": str, "moved_from": str, "moved_to": str, "who": str, "at": float},
                                    if_not_exists=True)
    db.table("baseline_log").create_index(["corpus"], if_not_exists=True)


def _judge_owners(db: sqlite_utils.Database) -> None:
    """The ``judges`` table (each judge's key, name, look-alike key, maker, space and whether its
    grades count for everyone: ``retrieval.judging.judge_claims``); an existing store's judges become
    published, with no maker known, as they were everyone's; a store whose judges had makers but no
    spaces gets them (a private judge's space is its maker's)."""
    if "judges" not in db.table_names():
        db.table("judges").create({"corpus": str, "judge": str, "owner": str, "published": int,
                                   "created": float}, pk=("corpus", "judge"))
        db.execute("insert or ignore into judges (corpus, judge, owner, published, created) "
                   "select corpus, judge, '', 1, min(time) from judgments group by corpus, judge")
    have = {c.name for c in db["judges"].columns}
    for column in ("name", "name_key", "space"):
        if column not in have:
            db.execute(f"alter table judges add column {column} text")
    rows = db.execute("select corpus, judge, owner, published, name_key from judges").fetchall()
    db.conn.executemany(  # new rows; and keys made by an earlier look-alike rule, made again by today's
        "update judges set name = ?, name_key = ?, space = coalesce(space, ?) where corpus = ? and judge = ?",
        [(judge_name(j), name_key(judge_name(j)), "" if p else str(o or ""), c, j) for c, j, o, p, k in rows
         if isinstance(j, str) and k != name_key(judge_name(j))])
    db.execute("create index if not exists judges_name_key on judges (corpus, name_key)")


def _sample_owners(db: sqlite_utils.Database) -> None:
    """The drawer of each judging sample (``put_sample``); an existing store's samples are everyone's."""
    if "owner" not in {c.name for c in db["judging_samples"].columns}:
        db.execute("alter table judging_samples add column owner text not null default ''")
