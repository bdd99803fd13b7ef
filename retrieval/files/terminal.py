"""Text for a terminal: what the command lines print, with every control character made visible.

A run's TREC tag, a document id, a file name or an error message quoting them can hold terminal
escape sequences (ESC, or the C1 control CSI), which a terminal would obey — recolour, move the
cursor, rewrite the title, hide what follows — or characters that reorder or hide the text around
them (bidi overrides, zero-width spaces); a lone surrogate (a file name's bytes that are not
UTF-8, JSON's ``"\\ud800"``) cannot be printed to a UTF-8 terminal at all, and a noncharacter
(U+FFFE) is no text. ``terminal_safe`` writes each such character as its Python escape
(``\\x1b``, ``\\u202e``, ``\\ud800``), keeping newlines and tabs; ``SafeStream`` does it to
everything written through it, keeping the carriage returns of progress lines too. The command
lines (``python -m retrieval``, ``python -m training``) print through it (``safe_output``).
"""
from __future__ import annotations

import contextlib
import sys
import unicodedata
from collections.abc import Iterator
from typing import Any, TextIO

from retrieval.safe_names import is_noncharacter

_HIDDEN = {"Cc", "Cf", "Zl", "Zp", "Cs"}  # controls, format, line/paragraph separators, lone surrogates


def _escape_table(keep: str) -> dict[int, str]:
    table = {}
    for code in list(range(0x00, 0xA0)) + [0x61C, 0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x2028, 0x2029,
                                           *range(0x202A, 0x202F), *range(0x2060, 0x2070), 0xFEFF]:
        c = chr(code)
        if c not in keep and unicodedata.category(c) in _HIDDEN:
            table[code] = c.encode("unicode_escape").decode("ascii")
    return table


_TEXT = _escape_table("\n\t")
_STREAM = _escape_table("\n\t\r")


def _shown_as_escape(c: str) -> bool:
    return ord(c) > 0x7F and (unicodedata.category(c) in _HIDDEN or is_noncharacter(c))


def _rare(text: str, table: dict[int, str]) -> str:
    """``text`` through ``table``, then any other format character (a rare one), lone surrogate or
    noncharacter escaped too."""
    out = text.translate(table)
    if not out.isascii() and any(_shown_as_escape(c) for c in out):
        out = "".join(c.encode("unicode_escape").decode("ascii") if _shown_as_escape(c) else c for c in out)
    return out


def terminal_safe(text: str) -> str:
    """``text`` with its control and invisible characters written as escapes (newline, tab kept)."""
    return _rare(text, _TEXT)


class SafeStream:
    """A text stream that writes through to ``stream`` with ``terminal_safe``'s escapes (carriage
    returns kept: they redraw progress lines)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(_rare(text, _STREAM))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def safe_output() -> Iterator[None]:
    """Within it, ``sys.stdout`` and ``sys.stderr`` escape control and invisible characters."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeStream(out), SafeStream(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
