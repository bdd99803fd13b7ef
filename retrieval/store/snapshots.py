"""Snapshots of runs (``retrieval.tracking.snapshots``), owned by their maker and published or not
(``owned``), and the corpus's one baseline with the log of its moves.
"""
from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from retrieval import stored_rows
from retrieval.sharing.owners import OPERATOR, Viewer
from retrieval.store import owned
from retrieval.store.connection import Connected
from retrieval.store.errors import NameTaken, TooMany
from retrieval.store.keys import pack


class Snapshots(Connected):
    """The store's snapshots and baseline (``Store``'s section of them)."""

    def put_snapshot(self, corpus: str, name: str, meta: dict[str, Any], runs: dict[str, Any], owner: str = "",
                     published: bool = True,
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
        key, text, packed, created = owned.name_key(name), json.dumps(meta), pack(runs), float(meta["created"])
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
                owned.no_published(conn, "snapshots", "snapshot", corpus, name, key)
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
                  baseline: bool = False) -> list[dict[str, Any]]:
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
        where, args = owned.seen(viewer.filter, where, args)
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

    def snapshot_index(self, corpus: str, viewer: Viewer = OPERATOR) -> list[dict[str, Any]]:
        """The corpus's snapshots ``viewer`` sees, without their runs or meta (``id, name, created,
        baseline, owner, published, baseline_by, baseline_at``), oldest first.

        Args:
            corpus: The corpus (``Dataset.corpus_hash``).
            viewer: Who reads (``OPERATOR``: every snapshot).

        Returns:
            One dict per snapshot.
        """
        where, args = owned.seen(viewer.filter, "corpus = ?", [corpus])
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
            count: int = self.db.execute(f"select count(*) from snapshots where {where}", args).fetchone()[0]
            return count

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

    def baseline_log(self, corpus: str) -> list[dict[str, Any]]:
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
        with self._immediate() as conn:
            return owned.publish(conn, "snapshots", "snapshot", "id", corpus, snapshot_id, owner)
