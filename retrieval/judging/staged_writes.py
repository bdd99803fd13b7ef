"""Judgment writes that are atomic and never hold the store's lock.

``Store`` serializes its one shared SQLite connection with a Python lock, and every session's
reads (cached runs, metrics, judgments) go through it. A write that took that lock for the length
of an import stalled them all (``bench/import_contention.py`` measures it). Judgments are written here instead, each
write through a connection of its own to the same file: in WAL mode the shared connection goes on
reading the last committed state while this one writes, and sees the new one once it commits.

* A few grades (up to ``DIRECT_UP_TO``: a grade from the Judge tab, a small file) are written in one
  ``BEGIN IMMEDIATE`` transaction, each pair's grade before looked up by its key.
* An import is **staged**: its rows, checked one by one as they come (nothing is read ahead into
  another copy), are written in chunks of ``CHUNK`` into a table of their own,
  ``staging_judgments_<pid>_<random>``, each chunk its own short transaction. A pair given twice
  keeps its last grade (the staging table's key). Then one transaction counts, in SQL, the pairs
  the store did not hold (new), held with another grade (changed) or with the same (unchanged),
  and copies the new and changed ones in (``INSERT OR REPLACE … SELECT``); an unchanged grade is
  left as it was, its time too. The staging table is dropped after.

Either way a reader sees all of an import or none of it: its rows reach the judgments table in one
commit. A process killed at any moment leaves no judgment of a half-done import: a kill during
staging leaves only the staging table, which the next ``Store`` to open the file drops
(``drop_stale``: its process, named by the pid in its name, is gone), and a kill during the copy
leaves an uncommitted transaction, which SQLite rolls back.

An import holds at most ``MAX_IMPORT_ROWS`` rows (``TooManyRows``, one line naming the file and the
limit): a bound on what one upload can make the store hold and the swap copy at once.
"""
from __future__ import annotations

import contextlib
import gc
import os
import re
import sqlite3
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sized
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from retrieval.judging import judge_claims
from retrieval.judging.grades import GRADES, check_judge
from retrieval.judging.judge_claims import Claim

MAX_IMPORT_ROWS = 2_000_000  # judgments one import may hold
DIRECT_UP_TO = 1_000  # more rows than this are staged
CHUNK = 20_000  # rows per staging transaction
BUSY_S = 120.0  # how long a write waits for another writer (an import's copy) before it fails
STAGING_PREFIX = "staging_judgments_"
_STAGING = re.compile(rf"{STAGING_PREFIX}(\d+)_[0-9a-f]+")
SQLITE_BUSY = 5  # SQLite's result code (sqlite3.SQLITE_BUSY from Python 3.11)
Row = tuple[str, str, str, int, str]  # a checked judgment as written: query id, doc id, judge, grade, query text
Given = tuple[object, object, object, object, object]  # a judgment as given: query id, query text, doc id, grade, judge
T = TypeVar("T")


@dataclass(frozen=True)
class JudgmentsStored:
    """What ``Store.put_judgments`` did: grades of pairs the judge had not graded (``new``), grades
    that replaced another (``changed``), grades the store held already (``unchanged``)."""

    new: int
    changed: int
    unchanged: int


class TooManyRows(ValueError):
    """An import of more rows than ``MAX_IMPORT_ROWS``."""


SWITCH_S = 0.0005  # the interpreter's switch interval while an import runs (Python's default: 0.005)
_RUNNING = 0
_SAVED = (0.005, True)  # the switch interval and whether the collector ran, before the first import
_RUNNING_LOCK = threading.Lock()


@contextlib.contextmanager
def yielding() -> Iterator[None]:
    """While an import reads and stages its rows in a thread of a process that serves other sessions
    (the app), it gives way to them: Python's cyclic garbage collector is off, and the interpreter
    switches threads every ``SWITCH_S`` instead of every 5 ms; both as they were once the last
    import running ends. Reading a million rows makes a million objects, and each full collection
    walks them all holding the interpreter (no other session's search running meanwhile);
    reference counting still frees everything without a cycle. And a search
    waits for the interpreter each time it comes back from SQLite or numpy: up to a switch interval
    each time while the import's thread holds it."""
    global _RUNNING, _SAVED
    with _RUNNING_LOCK:
        if _RUNNING == 0:
            _SAVED = (sys.getswitchinterval(), gc.isenabled())
            sys.setswitchinterval(min(SWITCH_S, _SAVED[0]))
            gc.disable()
        _RUNNING += 1
    try:
        yield
    finally:
        with _RUNNING_LOCK:
            _RUNNING -= 1
            if _RUNNING == 0:
                sys.setswitchinterval(_SAVED[0])
                if _SAVED[1]:
                    gc.enable()


BACKGROUND_NICE = 19  # the OS priority of an import's own thread: the lowest (Linux; elsewhere as it was)


def in_background(work: Callable[[], T]) -> T:
    """``work()``'s value (or its exception), computed in a thread of its own at the lowest OS
    priority (``BACKGROUND_NICE``: Linux gives each thread its own) while ``yielding``: when the
    machine's cores are busy, other sessions' searches run first and the import waits, instead of
    both slowing down alike (``bench/import_contention.py`` measures a labelled search's latency
    during a large import). The calling thread only waits. A thread of its own, not
    the caller's: an unprivileged process cannot raise a thread's priority back once lowered, and
    the caller's thread serves other requests after."""
    done: dict[str, Any] = {}

    def run() -> None:
        if sys.platform.startswith("linux"):  # a thread id is a process id only there (elsewhere it could name one)
            try:
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)
            except OSError:  # not allowed: at the priority it has
                pass
        try:
            done["value"] = work()
        except BaseException as err:
            done["error"] = err

    with yielding():
        thread = threading.Thread(target=run, name="rankscope-import", daemon=True)
        thread.start()
        thread.join()
    if "error" in done:
        raise done["error"]
    value: T = done["value"]
    return value


def release(rows: list[T], step: int = 10_000) -> None:
    """Empty ``rows`` a slice at a time: freeing a million objects at once holds the interpreter for
    a few hundred milliseconds, in slices other threads run between."""
    while rows:
        del rows[-step:]
        time.sleep(0)


def connect(path: str | Path) -> sqlite3.Connection:
    """A connection of its own to the store file, for one write: autocommit (transactions begun
    explicitly), waiting up to ``BUSY_S`` for another writer."""
    conn = sqlite3.connect(path, timeout=BUSY_S, isolation_level=None, check_same_thread=False)
    conn.execute(f"pragma busy_timeout = {int(BUSY_S * 1000)}")
    return conn


def _too_many(source: str | None) -> str:
    return (f"{source or 'the import'}: more than {MAX_IMPORT_ROWS:,} judgments, the most one import may hold; "
            "split the file")


def check_count(rows: int, source: str | None = None) -> int:
    """``rows`` when one import may hold that many judgments, else ``TooManyRows`` naming ``source``."""
    if rows > MAX_IMPORT_ROWS:
        raise TooManyRows(_too_many(source))
    return rows


def checked(corpus: str, judgments: Iterable[Given], source: str | None = None,
            keys: dict[str, str] | None = None) -> Iterator[Row]:
    """Each ``(query id, query text, doc id, grade, judge)`` as the row written (``corpus`` first),
    checked as it comes: a grade in ``GRADES``, a judge's name (``judgments.check_judge``, each
    name once; with ``keys``, one of its names, written as its key), ids that are text; more than
    ``MAX_IMPORT_ROWS`` rows is ``TooManyRows``."""
    judges: dict[str, str] = {}
    for n, (query_id, query_text, doc_id, grade, judge) in enumerate(judgments, 1):
        if n > MAX_IMPORT_ROWS:
            raise TooManyRows(_too_many(source))
        if isinstance(grade, bool) or not isinstance(grade, int) or grade not in GRADES:
            raise ValueError(f"a grade is one of {', '.join(map(str, GRADES))}, not {grade!r}")
        if not isinstance(query_id, str) or not query_id or not isinstance(doc_id, str) or not doc_id:
            raise ValueError(f"a judgment needs a query id and a document id as text, not {query_id!r:.60} and "
                             f"{doc_id!r:.60}")
        if not isinstance(judge, str) or not judge:
            raise ValueError("a judgment needs the judge's name")
        name = judges.get(judge)
        if name is None:
            name = check_judge(judge)
            if keys is not None:
                if name not in keys:
                    raise ValueError(f"the judge {name!r:.60} was not among the names claimed for these grades")
                name = keys[name]
            judges[judge] = name
        yield query_id, doc_id, name, int(grade), query_text if isinstance(query_text, str) else ""


def put(path: str | Path, corpus: str, judgments: Iterable[Given], source: str | None = None,
        claim: Claim | None = None) -> JudgmentsStored:
    """Store the grades (``Store.put_judgments``) through a connection of this call's own: a few in
    one transaction, more staged (module docstring). Nothing is stored when any is refused. With
    ``claim``, each judge's name is kept under its key for the claim's maker (``judge_claims.resolve``,
    read before a row is staged: a refusal costs nothing) and the names new to it are recorded in the
    transaction that copies the grades in (``judge_claims.claim_in``): with them, or not at all."""
    if isinstance(judgments, Sized):  # refused before a row is written
        check_count(len(judgments), source)
    conn = connect(path)
    try:
        keys = None
        if claim is not None:
            keys = judge_claims.resolve(conn, corpus, claim)[0]
        rows = checked(corpus, judgments, source, keys)
        first = []
        for row in rows:
            first.append(row)
            if len(first) > DIRECT_UP_TO:
                break
        if len(first) <= DIRECT_UP_TO:
            return _direct(conn, corpus, first, claim, keys)
        return _staged(conn, corpus, first, rows, claim, keys)
    finally:
        conn.close()


def _claimed(conn: sqlite3.Connection, corpus: str, claim: Claim | None, keys: dict[str, str] | None) -> None:
    """Inside the write's transaction: ``claim``'s names recorded, and their keys still those the rows
    were written with (else another write changed the judges meanwhile: refused, nothing stored)."""
    if claim is None:
        return
    if judge_claims.claim_in(conn, corpus, claim) != keys:
        raise ValueError("the judges changed while the grades were read (one was published or taken): store them again")


def _direct(conn: sqlite3.Connection, corpus: str, rows: list[Row], claim: Claim | None = None,
            keys: dict[str, str] | None = None) -> JudgmentsStored:
    last = {(q, d, j): (g, text) for q, d, j, g, text in rows}  # a pair given twice: its last grade
    now = time.time()
    conn.execute("begin immediate")
    try:
        _claimed(conn, corpus, claim, keys)
        new = changed = 0
        write = []
        for (q, d, j), (g, text) in last.items():
            was = conn.execute("select grade from judgments where corpus = ? and query_id = ? and doc_id = ? "
                               "and judge = ?", [corpus, q, d, j]).fetchone()
            if was is None or was[0] != g:
                new, changed = new + (was is None), changed + (was is not None)
                write.append((corpus, q, d, j, g, text, now))
        conn.executemany("insert or replace into judgments (corpus, query_id, doc_id, judge, grade, query_text, time) "
                         "values (?, ?, ?, ?, ?, ?, ?)", write)
        conn.execute("commit")
    except BaseException:
        conn.execute("rollback")
        raise
    return JudgmentsStored(new, changed, len(last) - new - changed)


def staging_name() -> str:
    """A staging table's name: its process's id (so ``drop_stale`` can tell a dead one's) and a random part."""
    return f"{STAGING_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:16]}"


_MATCH = ("s left join judgments j on j.corpus = ? and j.query_id = s.query_id and j.doc_id = s.doc_id "
          "and j.judge = s.judge")


def _staged(conn: sqlite3.Connection, corpus: str, first: list[Row], rest: Iterator[Row], claim: Claim | None = None,
            keys: dict[str, str] | None = None) -> JudgmentsStored:
    table = staging_name()
    conn.execute("pragma synchronous = normal")  # the staging table need not survive a power cut
    conn.execute(f"create table {table} (query_id text not null, doc_id text not null, judge text not null, "
                 "grade integer not null, query_text text, primary key (query_id, doc_id, judge)) without rowid")
    try:
        insert = f"insert or replace into {table} (query_id, doc_id, judge, grade, query_text) values (?, ?, ?, ?, ?)"
        chunk = first
        for row in rest:
            chunk.append(row)
            if len(chunk) >= CHUNK:
                _write_chunk(conn, insert, chunk)
                chunk = []
        _write_chunk(conn, insert, chunk)
        conn.execute("pragma synchronous = full")  # the copy in is durable once committed
        try:  # counted on a read snapshot, so other writers wait only for the copy
            total, new, unchanged = _swap(conn, table, corpus, "begin deferred", claim, keys)
        except sqlite3.OperationalError as err:
            if not _busy(err):
                raise
            # another writer committed between the count and the copy: again, holding the write lock throughout
            total, new, unchanged = _swap(conn, table, corpus, "begin immediate", claim, keys)
    finally:
        conn.execute(f"drop table if exists {table}")
    return JudgmentsStored(new, total - new - unchanged, unchanged)


def _busy(err: sqlite3.OperationalError) -> bool:
    return getattr(err, "sqlite_errorcode", 0) & 0xFF == SQLITE_BUSY or "locked" in str(err)


def _swap(conn: sqlite3.Connection, table: str, corpus: str, begin: str, claim: Claim | None = None,
          keys: dict[str, str] | None = None) -> tuple[int, int, int]:
    """In one transaction: ``claim``'s new names recorded (``_claimed``), the staged rows counted
    against the store's (all, new, unchanged), and the new and changed ones copied in."""
    conn.execute(begin)
    try:
        _claimed(conn, corpus, claim, keys)
        total, new, unchanged = conn.execute(
            f"select count(*), coalesce(sum(j.grade is null), 0), coalesce(sum(j.grade = s.grade), 0) "
            f"from {table} {_MATCH}", [corpus]).fetchone()
        conn.execute(f"insert or replace into judgments (corpus, query_id, doc_id, judge, grade, query_text, time) "
                     f"select ?, s.query_id, s.doc_id, s.judge, s.grade, s.query_text, ? from {table} {_MATCH} "
                     f"where j.grade is null or j.grade != s.grade", [corpus, time.time(), corpus])
        conn.execute("commit")
    except BaseException:
        conn.execute("rollback")
        raise
    return total, new, unchanged


def _write_chunk(conn: sqlite3.Connection, insert: str, chunk: list[Row]) -> None:
    if chunk:
        conn.execute("begin")
        try:
            conn.executemany(insert, chunk)
            conn.execute("commit")
        except BaseException:
            conn.execute("rollback")
            raise


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def drop_stale(conn: sqlite3.Connection) -> list[str]:
    """Drop the staging tables whose process is gone (killed mid-import); the names dropped. A live
    process's (an import running in another process now) is left alone."""
    names = [r[0] for r in conn.execute("select name from sqlite_master where type = 'table' and name like ?",
                                        [STAGING_PREFIX + "%"])]
    stale = [n for n in names if (m := _STAGING.fullmatch(n)) and not _alive(int(m[1]))]
    for name in stale:
        with conn:
            conn.execute(f"drop table if exists {name}")
    return stale
