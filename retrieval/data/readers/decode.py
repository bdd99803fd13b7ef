"""Bytes to text: a file read as a stream of strict UTF-8 lines, each with its number.

Everything after this step works on a ``Text``'s ``(line number, line)`` pairs (or its raw lines,
for CSV), so that every error can name ``file:line``. A ``Text`` never holds the whole file: it is
decoded as it is read, a buffer at a time, and reports how far it got by bytes. The two helpers
that word counts in messages ("1 label points", "3 labels point") live here too, beside the other
shared basics.
"""
from __future__ import annotations

import codecs
import io
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from retrieval.errors import DataError
from retrieval.progress import Progress

PathLike = str | os.PathLike[str]
REPORT_EVERY = 1 << 22  # bytes read between two progress reports (4 MiB)


class Text:
    """A file's text, read as a stream: strict UTF-8 (a BOM dropped), line by line.

    ``lines()`` gives ``(line number, line)`` split on LF only (a CR before it dropped); ``rows()``
    gives the lines with their endings, split the way ``csv`` wants (``newline=""``). Either
    raises ``DataError`` naming the line and byte offset of invalid UTF-8, and "file is empty"
    for a file without a non-blank line. ``progress(fraction of bytes read, "reading <file>")``
    is called every ``REPORT_EVERY`` bytes and at the end.
    """

    def __init__(self, display: str, opener: Callable[[], BinaryIO], size: int,
                 progress: Progress | None = None):
        self.display, self._open, self.size, self.progress = display, opener, size, progress

    @classmethod
    def of_file(cls, path: Path, display: str, progress: Progress | None = None) -> Text:
        """A file on disk; a missing or unreadable file, a folder, a FIFO or a device is a DataError."""
        with file_errors(display):
            if path.is_dir():
                raise IsADirectoryError
            size = regular_file(path, display).st_size
            open(path, "rb").close()
        return cls(display, lambda: open(path, "rb"), size, progress)

    @classmethod
    def of_bytes(cls, data: bytes, display: str) -> Text:
        """Bytes already in memory (a zip member, read under the archive's limits)."""
        return cls(display, lambda: io.BytesIO(data), len(data))

    def lines(self) -> Iterator[tuple[int, str]]:
        for lineno, line in enumerate(self._decoded("\n"), 1):
            yield lineno, line.rstrip("\n").removesuffix("\r")

    def rows(self) -> Iterator[str]:
        return self._decoded("")

    def read(self) -> str:
        """The whole text at once (for formats that cannot be streamed, such as one JSON object)."""
        return "".join(self._decoded(""))

    def head(self) -> str:
        """The first non-blank character ("" for a blank start): what an unknown format is told by."""
        with self._open() as raw:
            start = raw.read(65536).removeprefix(codecs.BOM_UTF8)
        return start.decode("utf-8", errors="replace").lstrip()[:1]

    def _decoded(self, newline: str) -> Iterator[str]:
        raw = self._open()
        try:
            text = io.TextIOWrapper(raw, encoding="utf-8-sig", errors="strict", newline=newline)
            blank, reported = True, 0
            try:
                for line in text:
                    if blank and line.strip():
                        blank = False
                    yield line
                    if self.progress and raw.tell() - reported >= REPORT_EVERY:
                        reported = raw.tell()
                        self.progress(reported / max(self.size, 1), f"reading {self.display}")
            except UnicodeDecodeError:
                raise self._bad_byte() from None
            if blank:
                raise DataError("file is empty", self.display)
            if self.progress:
                self.progress(1.0, f"reading {self.display}")
        finally:
            raw.close()

    def _bad_byte(self) -> DataError:
        """Where the first invalid UTF-8 byte is, read again line by line (only on that error)."""
        offset = 0
        with self._open() as raw:
            for lineno, line in enumerate(raw, 1):
                body = line[3:] if lineno == 1 and line.startswith(codecs.BOM_UTF8) else line
                try:
                    body.decode("utf-8")
                except UnicodeDecodeError as e:
                    at = offset + (len(line) - len(body)) + e.start
                    return DataError(f"not valid UTF-8: byte 0x{line[at - offset]:02x} at byte offset {at}; "
                                     f"save the file as UTF-8", self.display, lineno)
                offset += len(line)
        return DataError("not valid UTF-8; save the file as UTF-8", self.display)


def decode(data: bytes, display: str) -> str:
    """A small file's bytes as strict UTF-8 (a BOM is dropped; a blank file is an error), for a
    folder or zip of .txt files, one document each."""
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


def read_file(path: Path, display: str) -> bytes:
    """The file's bytes; a missing or unreadable file, a folder, a FIFO or a device is a DataError."""
    with file_errors(display):
        regular_file(path, display)
        return path.read_bytes()


def regular_file(path: Path, display: str) -> os.stat_result:
    """``path``'s status (a link followed: a file named as input may be one) when it is a regular
    file; a folder raises ``IsADirectoryError``; a FIFO, a socket or a device is a DataError, so that
    no reader opens one (a FIFO blocks an open until something writes to it, a device never ends)."""
    st = path.stat()
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError
    if not stat.S_ISREG(st.st_mode):
        raise DataError("is not a regular file (a FIFO, a socket or a device): give a file or a folder", display)
    return st


@contextmanager
def file_errors(display: str) -> Iterator[None]:
    """An OSError opening or reading a file, as the DataError a user can act on."""
    try:
        yield
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

