"""Rows with a maker: who sees them, names unique per namespace, publishing. The one helper of every
owned table of the store (snapshots, query sets, stored runs, judging samples, kept data sets), so a
rule about makers is written once and read the same by each.

A row has a maker (``owner``: ``retrieval.sharing.owners``; ``""``: everyone's) and, where it can be
shared, whether it is ``published``. On a shared deployment a viewer sees its own rows and the
published ones (``seen``), or, for rows that are everyone's or one maker's and never published
(a stored run, a judging sample), everyone's and its own (``everyones_or_own``). Snapshot and query-set
names are unique by their look-alike key (``safe_names.name_key``) in their namespace (the published
one, or the maker's own: ``owners.space``), by a unique index the write itself meets
(``unique_names``, made at open), and a private name may not look like a published one
(``no_published``); ``publish`` moves a row to the published namespace under both rules. Each writes
inside the caller's ``BEGIN IMMEDIATE`` transaction (``Connected._immediate``), so two writers of one
moment cannot both pass.

Judges are owned too, in their own shape (a private judge's grades move to the published name:
``retrieval.judging.judge_claims``, ``Store.publish_judge``).
"""
from __future__ import annotations

import sqlite3
import unicodedata
from collections.abc import Iterable

from retrieval.safe_names import name_key as look_alike_key
from retrieval.store.errors import NameTaken


def name_key(name: str) -> str:
    """A name's look-alike key as kept beside it: ``safe_names.name_key`` of its NFC form, stripped.

    Args:
        name: The name.

    Returns:
        Its key.
    """
    return look_alike_key(unicodedata.normalize("NFC", name).strip())


def seen(viewer_filter: str | None, where: str, args: list[str]) -> tuple[str, list[str]]:
    """``where`` and ``args`` of a read of an owned table (its ``owner`` and ``published`` columns)
    narrowed to the rows a viewer sees (``Viewer.sees``): on a shared deployment its own and the
    published ones; else every row.

    Args:
        viewer_filter: The viewer's maker (``owners.Viewer.filter``); None: it sees every row.
        where: The read's condition.
        args: Its parameters.

    Returns:
        The narrowed condition and its parameters.
    """
    return _own_or(viewer_filter, where, args, "published = 1")


def everyones_or_own(viewer_filter: str | None, where: str, args: list[str]) -> tuple[str, list[str]]:
    """``where`` and ``args`` of a read of a table whose rows are everyone's (``owner = ''``) or one
    maker's alone, never published (stored runs, judging samples), narrowed to the rows a viewer sees:
    on a shared deployment everyone's and its own; else every row.

    Args:
        viewer_filter: The viewer's maker (``owners.Viewer.filter``); None: it sees every row.
        where: The read's condition.
        args: Its parameters.

    Returns:
        The narrowed condition and its parameters.
    """
    return _own_or(viewer_filter, where, args, "owner = ''")


def _own_or(viewer_filter: str | None, where: str, args: list[str], shared: str) -> tuple[str, list[str]]:
    """``where`` narrowed to the rows ``shared`` holds for and the viewer's own; unchanged for None."""
    if viewer_filter is None:
        return where, args
    return f"{where} and ({shared} or owner = ?)", [*args, viewer_filter]


def no_published(conn: sqlite3.Connection, table: str, what: str, corpus: str, name: str, key: str,
                 extra: str = "", args: Iterable[object] = ()) -> None:
    """``NameTaken`` when a published row of ``table`` in ``corpus`` has the look-alike key ``key``: a
    private name may not look like a published one. The published name is everyone's to see, so it
    is named.

    Args:
        conn: The connection, inside the write's ``BEGIN IMMEDIATE`` transaction.
        table: The owned table (``snapshots``, ``query_sets``).
        what: What its rows are called in the error.
        corpus: The corpus (``Dataset.corpus_hash``).
        name: The name written.
        key: Its look-alike key (``name_key``).
        extra: A further condition on the published row (the row written itself left out, say).
        args: Its parameters.

    Raises:
        NameTaken: A published row has the key.
    """
    where = "corpus = ? and name_key = ? and published = 1" + (f" and {extra}" if extra else "")
    found = conn.execute(f"select name from {table} where {where} limit 1", [corpus, key, *args]).fetchone()
    if found is not None:
        raise NameTaken(f"a published {what} is named {found[0]!r}" if found[0] == name else
                        f"the {what} name {name!r} looks like the published {found[0]!r}")


def publish(conn: sqlite3.Connection, table: str, what: str, id_column: str, corpus: str, row_id: object,
            owner: str) -> bool:
    """Move ``owner``'s unpublished row ``row_id`` of ``table`` to the published namespace, inside the
    caller's ``BEGIN IMMEDIATE`` transaction: refused (``NameTaken``) for a name the published namespace
    has, or one like it, by ``no_published`` and then by the unique index of names.

    Args:
        conn: The connection, inside the write's ``BEGIN IMMEDIATE`` transaction.
        table: The owned table (``snapshots``, ``query_sets``).
        what: What its rows are called in the error.
        id_column: The column ``row_id`` is in.
        corpus: The corpus (``Dataset.corpus_hash``).
        row_id: The row.
        owner: The session's owner (``retrieval.sharing.owners``).

    Returns:
        Whether it was published now (False: ``owner`` has no unpublished row of that id).

    Raises:
        NameTaken: A published row has its name, or one like it (named: it is everyone's to see).
    """
    found = conn.execute(f"select name, name_key from {table} where corpus = ? and {id_column} = ? and "
                         f"owner = ? and published = 0", [corpus, row_id, owner]).fetchone()
    if found is None:
        return False
    key = name_key(found[0]) if isinstance(found[0], str) else found[1]
    no_published(conn, table, what, corpus, found[0], key)
    try:
        conn.execute(f"update {table} set published = 1 where corpus = ? and {id_column} = ?", [corpus, row_id])
    except sqlite3.IntegrityError:  # a key the check above did not see (a row damaged by hand)
        raise NameTaken(f"a published {what} has the name {found[0]!r} or one like it") from None
    return True


# the snapshots table: a row id of its own, names unique per namespace by ``_NAME_INDEXES``
SNAPSHOTS_TABLE = ("create table {name} (id integer primary key, corpus text, name text, name_key text, meta text, "
                   "runs blob, baseline integer, created float, owner text not null default '', "
                   "published integer not null default 1, baseline_by text not null default '', "
                   "baseline_at float not null default 0)")


def unique_names(conn: sqlite3.Connection) -> None:
    """Names unique where the write is, made so at open inside the caller's ``BEGIN IMMEDIATE``
    transaction:

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

    Args:
        conn: The store's connection, inside a ``BEGIN IMMEDIATE`` transaction.
    """
    tables = {r[0] for r in conn.execute("select name from sqlite_master where type = 'table'")}
    if "snapshots" not in tables:
        conn.execute(SNAPSHOTS_TABLE.format(name="snapshots"))
    elif "name_key" not in {r[1] for r in conn.execute("pragma table_info(snapshots)")}:
        _rebuild_snapshots(conn)
    for table in ("snapshots", "query_sets"):
        _name_keys(conn, table)


def _rebuild_snapshots(conn: sqlite3.Connection) -> None:
    """An earlier store's snapshots table, keyed by (corpus, name), made again in the current shape
    (inside ``unique_names``' transaction): a new table, every row copied, oldest first, the old
    one dropped and the new one renamed."""
    have = {r[1] for r in conn.execute("pragma table_info(snapshots)")}
    columns = ["corpus", "name", "meta", "runs", "baseline", "created", "owner", "published", "baseline_by",
               "baseline_at"]
    defaults = {"owner": "''", "published": "1", "baseline_by": "''", "baseline_at": "0", "baseline": "0"}
    values = ", ".join(c if c in have else defaults.get(c, "null") for c in columns)
    conn.execute("drop table if exists snapshots_owned")
    conn.execute(SNAPSHOTS_TABLE.format(name="snapshots_owned"))
    conn.execute(f"insert into snapshots_owned ({', '.join(columns)}) select {values} from snapshots "
                 f"order by created, rowid")
    conn.execute("drop table snapshots")
    conn.execute("alter table snapshots_owned rename to snapshots")


_NAME_INDEXES = {"snapshots": "snapshots_unique_names", "query_sets": "query_sets_unique_names"}


def _name_keys(conn: sqlite3.Connection, table: str) -> None:
    """Every row of ``table`` with the look-alike key its name has now, and the unique index of
    names per namespace (``unique_names``)."""
    index = _NAME_INDEXES[table]
    rows = conn.execute(f"select rowid, corpus, name, name_key, case when published then '' else owner end "
                        f"from {table} order by created, rowid").fetchall()
    taken: set[tuple[str, str, str]] = set()
    changed = []
    for rowid, corpus, name, stored, space in rows:
        key = name_key(name) if isinstance(name, str) else None  # a damaged name: no key (lists leave it out)
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
