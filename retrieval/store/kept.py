"""The records of uploaded data sets kept beside the store (``retrieval.data.kept``: the files in
``kept/``), one per maker, published or not (``owned.seen``).
"""
from __future__ import annotations

import time
from typing import Any

from retrieval import stored_rows
from retrieval.store import owned
from retrieval.store.connection import Connected


class Kept(Connected):
    """The store's kept data sets (``Store``'s section of them)."""

    def put_kept(self, row: dict[str, Any]) -> None:
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

    def kept(self, owner: str | None = None) -> list[dict[str, Any]]:
        """The kept data sets (``put_kept``'s rows, ``files`` a list), the most recently opened first;
        with ``owner``, only its own and the published ones (``owners.Viewer.filter``); a row not of the
        shape ``put_kept`` writes is left out, with a warning.

        Args:
            owner: The session's owner (``retrieval.sharing.owners``). None: every maker's.

        Returns:
            One dict per kept data set and maker.
        """
        where, args = owned.seen(owner, "1", [])
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
