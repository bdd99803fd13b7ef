"""Queries added to a corpus as named sets, owned by their maker and published or not (``owned``).
"""
from __future__ import annotations

import sqlite3
import time
from typing import Any

from retrieval import stored_rows
from retrieval.sharing.owners import OPERATOR, Viewer
from retrieval.store import owned
from retrieval.store.connection import Connected
from retrieval.store.errors import NameTaken, TooMany
from retrieval.store.keys import pack


class QuerySets(Connected):
    """The store's query sets (``Store``'s section of them)."""

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
        key, packed = owned.name_key(name), pack(queries)
        with self._immediate() as conn:
            was = conn.execute("select owner, published from query_sets where corpus = ? and id = ?",
                               [corpus, set_id]).fetchone()
            owner, shared = (str(was[0] or ""), int(bool(was[1]))) if was else (owner, int(bool(published)))
            if not shared:
                owned.no_published(conn, "query_sets", "query set", corpus, name, key, "id != ?", [set_id])
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

    def query_sets(self, corpus: str, viewer: Viewer = OPERATOR) -> list[dict[str, Any]]:
        """The corpus's query sets ``viewer`` sees (``owners.Viewer``: on a shared deployment its own and
        the published ones; else every set): ``id, name, n, created, owner, published, queries``,
        oldest first. The one accessor of stored query sets: every reader goes through it.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            viewer: Who reads (``OPERATOR``: every set).

        Returns:
            One dict per set.
        """
        where, args = owned.seen(viewer.filter, "corpus = ?", [corpus])
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
            count: int = self.db.execute(f"select count(*) from query_sets where {where}", args).fetchone()[0]
            return count

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
        with self._immediate() as conn:
            return owned.publish(conn, "query_sets", "query set", "id", corpus, set_id, owner)
