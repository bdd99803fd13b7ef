"""Bytes to text: read a file, decode it as strict UTF-8, number its lines.

Everything after this step works on the decoded text and its ``(line number, line)`` pairs,
so that every error can name ``file:line``. The two helpers that word counts in messages
("1 label points", "3 labels point") live here too, beside the other shared basics.
"""
from __future__ import annotations

import codecs
import os
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from ..errors import DataError

PathLike = str | os.PathLike


def decode(data: bytes, display: str) -> str:
    """Strict UTF-8 (a BOM is dropped); an empty or blank file is an error."""
    start = 3 if data.startswith(codecs.BOM_UTF8) else 0
    try:
        text = data[start:].decode("utf-8") if start else data.decode("utf-8")
    except UnicodeDecodeError as e:
        offset = e.start + start
        line = data.count(b"\n", 0, offset) + 1
        raise DataError(f"not valid UTF-8: byte 0x{data[offset]:02x} at byte offset {offset}; "
                        f"save the file as UTF-8", display, line) from None
    if not text.strip():
        raise DataError("file is empty", display)
    return text


def lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) pairs, splitting on LF only and dropping a CR before it."""
    for lineno, line in enumerate(text.split("\n"), 1):
        if line.endswith("\r"):
            line = line[:-1]
        yield lineno, line


def read_file(path: Path, display: str) -> bytes:
    """The file's bytes; a missing or unreadable file, or a folder, is a DataError."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise DataError("no such file", display) from None
    except IsADirectoryError:
        raise DataError("is a folder, not a file", display) from None
    except OSError as e:
        raise DataError(f"cannot read the file ({e.strerror or e})", display) from None


def suffix(name: str) -> str:
    """The lower-case extension of a file name or member path (either slash), or ''."""
    return PurePosixPath(name.replace("\\", "/")).suffix.lower()


def count(n: int, noun: str, plural: str | None = None) -> str:
    """"1 label", "2 labels", "1,234 queries"."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def verb_for(n: int, verb: str = "point") -> str:
    """The verb agreeing with ``n``: "points" / "point", "is" / "are"."""
    if verb == "is":
        return "is" if n == 1 else "are"
    return f"{verb}s" if n == 1 else verb

