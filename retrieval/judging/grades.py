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
