"""Relevance judgments, which are not a cache (nothing can recompute them), keyed by the corpus alone
(``Dataset.corpus_hash``) so adding queries or labels to a corpus keeps them; and the judges' makers
(``retrieval.judging.judge_claims``): whose grades a viewer sees, and publishing a private judge.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from retrieval import stored_rows
from retrieval.judging import judge_claims
from retrieval.judging import staged_writes as staging
from retrieval.judging.grades import judge_name
from retrieval.judging.judge_claims import Claim
from retrieval.judging.staged_writes import Given, JudgmentsStored
from retrieval.safe_names import name_key
from retrieval.sharing.owners import Viewer
from retrieval.store.connection import Connected
from retrieval.store.protocol import JudgmentsVersion


class Judgments(Connected):
    """The store's judgments and judges (``Store``'s section of them)."""

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

    def put_judgments(self, corpus: str, judgments: Iterable[Given], source: str | None = None,
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
                  viewer: Viewer | None = None) -> list[dict[str, Any]]:
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

    def judgments_version(self, corpus: str, viewer: Viewer | None = None) -> JudgmentsVersion:
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
    def _unseen_judges(self, corpus: str, viewer: Viewer | None, where: str, args: list[str]) -> tuple[str, list[str]]:
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

    def judge_makers(self, corpus: str) -> dict[str, dict[str, Any]]:
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
