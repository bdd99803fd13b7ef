"""What one judgment is made of, before any pool, queue or store: a grade (``GRADES``: 0 not
relevant, 1 relevant, 2 highly relevant; ``parse_grade`` reads one as typed) of a (query id,
document id) ``Pair`` by a judge whose name ``check_judge`` accepts.

A leaf: the store checks the judgments it reads and writes with it (``retrieval.stored_rows``,
``retrieval.judging.staged_writes``) without importing the judging workflow (``judgments``).
"""
from __future__ import annotations

from collections.abc import Iterable

from retrieval import numbers
from retrieval.safe_names import NameIndex, check_name, check_new_name

GRADES = (0, 1, 2)  # not relevant, relevant, highly relevant
Pair = tuple[str, str]  # (query id, document id)


def parse_grade(value: object) -> int:
    """A grade as given by a person or a script: 0, 1 or 2 as an integer, an integral float (2.0)
    or their text ("2", "2.0": the one number grammar's whole numbers, ``retrieval.numbers.whole``);
    a ValueError in one line for anything else (1.5, 3, -1, "two", True, "+2", "٢", "２")."""
    try:
        number: int | None = numbers.whole(value, "a grade")
    except ValueError:
        number = None
    if number not in GRADES:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "…"
        raise ValueError(f"a grade is 0, 1 or 2 (not relevant, relevant, highly relevant), not {shown}")
    return int(number)


def check_judge(name: object, existing: Iterable[str] | NameIndex = ()) -> str:
    """A judge's name, NFC and stripped: not empty, at most ``safe_names.NAME_LIMIT`` characters, no
    control or invisible character, noncharacter or lone surrogate; with ``existing`` (the judges
    the corpus has, or a ``safe_names.NameIndex`` of them), not one that looks like one of them
    without being it (``safe_names.check_new_name``: ``аlice`` in Cyrillic, ``ａlice`` or ``Alice``
    beside ``alice``). A ValueError in one line otherwise."""
    return check_new_name(name, "judge's name", existing) if existing else check_name(name, "judge's name")


# ---- a judge's key: what its grades are kept under -------------------------------------------
# A published judge's grades (and every judge's off a shared deployment, and the command line's) are
# kept under its name; a private judge's under its name, this separator and its maker's owner id
# (``retrieval.sharing.owners``), so two sessions' private judges of one name never share a grade.
# The separator is a control character, which no name may hold (``check_judge``): no name typed or
# read from a file is ever another's private key.
KEY_SEPARATOR = "\x1f"


def private_key(name: str, owner: str) -> str:
    """The key the grades of ``owner``'s private judge ``name`` are kept under."""
    return f"{name}{KEY_SEPARATOR}{owner}"


def judge_name(key: str) -> str:
    """The name of the judge whose grades are kept under ``key`` (a private key's name part)."""
    return key.split(KEY_SEPARATOR, 1)[0]


def check_judge_key(key: object) -> str:
    """``key`` when it is a key grades may be kept under (``check_judge``'s name, or a private key:
    that name, ``KEY_SEPARATOR`` and an owner id of visible characters), else a ValueError in one line."""
    if not isinstance(key, str):
        raise ValueError(f"a judge's key must be text, not {type(key).__name__}")
    name, sep, owner = key.partition(KEY_SEPARATOR)
    checked = check_judge(name)
    if checked != name:
        raise ValueError(f"a judge's key holds a name not as it is kept: {name!r:.60}")
    if sep and (not owner or any(not c.isprintable() or c.isspace() for c in owner) or len(owner) > 200):
        raise ValueError("a judge's private key names no maker")
    return key
