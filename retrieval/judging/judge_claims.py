"""A judge's name taken inside the write that stores its grades: which key a name's grades go under,
checked and recorded in the transaction that copies them in.

Each judge of a corpus is a row of the ``judges`` table: its key (``judge``: what its grades are
kept under, ``grades.private_key``), its ``name``, the name's look-alike key (``name_key``:
``safe_names.name_key``), its maker (``owner``), whether it is ``published``, and its ``space``: ``''``
for a published judge, its maker's owner id for a private one. Names meet only within a space: two
sessions of a shared deployment may each keep a private judge ``ann`` (two keys, two sets of grades);
a published name is unique among the published, and a private name among its maker's own and the
published ones it sees. So nothing a session is told about a name depends on another's private
judges: a refusal names only a judge the asker sees.

``claim_in`` runs inside the write transaction (``BEGIN IMMEDIATE``, or a deferred one that takes the
write lock before it commits) of ``staged_writes``, so two writers cannot both take one name or two
look-alike ones: the second sees the first's row. A kill at any moment leaves the names claimed with
their grades or not at all (issue: an import killed mid-way once left its names claimed for good).
"""
from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass

from retrieval.judging.grades import judge_name, private_key
from retrieval.safe_names import check_new_name, name_key
from retrieval.sharing.owners import APP, CLI

MAX_JUDGES_PER_MAKER = 20  # judges one maker (a browser session) may keep per corpus on a shared deployment


class JudgeTaken(ValueError):
    """A judge's name a session may not grade under (on a shared deployment: another's published judge,
    or one past its maker's limit): nothing was stored."""


@dataclass(frozen=True)
class Claim:
    """Who takes judges' names for the grades of one write: the maker's owner id
    (``retrieval.sharing.owners``), whether the deployment is shared (then new judges are the maker's
    private ones until published, and another's published judge is refused), and the names."""

    owner: str
    shared: bool
    names: tuple[str, ...]


def whose(owner: str) -> str:
    """Who made a published judge, as a refusal says it to another session: never the maker's id."""
    if owner == APP or owner.startswith(f"{APP}:"):
        return "another session"
    if owner == CLI or owner.startswith(f"{CLI}:"):
        return "the command line"
    return "no one known (it was kept before judges had makers)"


def _visible(conn: sqlite3.Connection, corpus: str, keys: list[str], owner: str
             ) -> list[tuple[str, str, str, str | None, int, str]]:
    """The judges of the corpus whose look-alike key is one of ``keys`` that ``owner`` sees: the
    published ones and its own (``judge, name, name_key, owner, published, space``)."""
    return conn.execute("select judge, name, name_key, owner, published, space from judges where corpus = ? and "
                        "name_key in (select value from json_each(?)) and (space = '' or space = ?)",
                        [corpus, json.dumps(keys), owner]).fetchall()


def unrecorded(conn: sqlite3.Connection, corpus: str, keys: list[str] | None = None) -> list[str]:
    """The keys (of ``keys``, when given) under which the corpus keeps grades with no judge row (the
    command line's, an older store's): published judges with no maker known."""
    among = " and j.judge in (select value from json_each(?))" if keys is not None else ""
    return [r[0] for r in conn.execute(
        f"select distinct j.judge from judgments j where j.corpus = ?{among} and not exists (select 1 from judges k "
        "where k.corpus = j.corpus and k.judge = j.judge)", [corpus, *([json.dumps(keys)] if keys is not None else [])]
    ).fetchall()]


def resolve(conn: sqlite3.Connection, corpus: str, claim: Claim) -> tuple[dict[str, str], list[str]]:
    """Each name's key for ``claim``'s maker, and the names that are new (no judge of that name the
    maker sees yet); a ``JudgeTaken`` or ``ValueError`` (a look-alike of a judge the maker sees, in
    one line) when any name may not be used. Reads only."""
    names = sorted(set(claim.names))
    keys = {n: name_key(n) for n in names}
    rows = _visible(conn, corpus, sorted(set(keys.values())), claim.owner)
    rows += [(n, n, name_key(n), "", 1, "") for n in unrecorded(conn, corpus, names)]
    own = {r[1]: r[0] for r in rows if r[5] == claim.owner}
    published = {r[1]: r for r in rows if r[5] == ""}
    by_key: dict[str, list[str]] = {}
    for r in rows:
        by_key.setdefault(r[2], []).append(r[1])
    found, new = {}, []
    for n in names:
        if n in own:  # the maker's own private judge wins over a published one of that name
            found[n] = own[n]
        elif n in published:
            key, _, _, maker, _, _ = published[n]
            if claim.shared and (maker or "") != claim.owner:
                raise JudgeTaken(f"the judge {n!r} is published by {whose(maker or '')}: only its maker grades "
                                 "under it; choose another name")
            found[n] = key
        else:
            check_new_name(n, "judge's name", by_key.get(keys[n], ()))  # a look-alike of one the maker sees
            found[n] = private_key(n, claim.owner) if claim.shared else n
            new.append(n)
    return found, new


def claim_in(conn: sqlite3.Connection, corpus: str, claim: Claim) -> dict[str, str]:
    """``resolve``, then the new names recorded as ``claim``'s maker's (private on a shared deployment,
    else published), inside the caller's write transaction; ``JudgeTaken`` past
    ``MAX_JUDGES_PER_MAKER`` judges of the maker on a shared deployment. Each name's key."""
    found, new = resolve(conn, corpus, claim)
    if not new:
        return found
    if claim.shared:
        held = conn.execute("select count(*) from judges where corpus = ? and owner = ?",
                            [corpus, claim.owner]).fetchone()[0]
        if held + len(new) > MAX_JUDGES_PER_MAKER:
            raise JudgeTaken(f"a session keeps at most {MAX_JUDGES_PER_MAKER} judges of a data set; it has {held}: "
                             "grade under one of them")
    now = time.time()
    space = claim.owner if claim.shared else ""
    conn.executemany("insert into judges (corpus, judge, name, name_key, owner, published, space, created) "
                     "values (?, ?, ?, ?, ?, ?, ?, ?)",
                     [(corpus, found[n], n, name_key(n), claim.owner, int(not claim.shared), space, now) for n in new])
    return found


def record_unrecorded(conn: sqlite3.Connection, corpus: str, keys: list[str]) -> None:
    """Judge rows for grades kept under ``keys`` with none (published, no maker known), in the caller's
    transaction: what a publish of one of those names is then checked against."""
    now = time.time()
    conn.executemany("insert or ignore into judges (corpus, judge, name, name_key, owner, published, space, created) "
                     "values (?, ?, ?, ?, '', 1, '', ?)",
                     [(corpus, k, judge_name(k), name_key(judge_name(k)), now) for k in keys])
