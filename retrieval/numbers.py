"""The one grammar for numbers written as text: in every file RankScope reads (qrels, runs, judgments,
a queries file's counts), every value an API client or a form sends, and every number on a command line.

Python's own ``int`` and ``float`` read more than other tools do: ``1_000``, ``+1``, Arabic-Indic
``١`` or fullwidth ``１`` digits, ``nan``, ``infinity`` and, for ``int``, white space of any script
around the digits. trec_eval (C's ``atol`` and ``strtod``) and spreadsheets read ``1_000`` or
``١`` otherwise or not at all, so a file meant the same for both would mean something else here.
This grammar is the part every reader agrees on:

* an **integer** is ``-?[0-9]+``: ASCII digits only, an optional leading ``-`` (no ``+``, no
  ``_``, no other script's digits), at most ``INT_DIGITS`` digits and within a signed 64-bit
  integer (``INT_MIN`` … ``INT_MAX``: what SQLite keeps and C's ``long long`` reads), so a
  5,000-digit integer is a clean refusal, not Python's own message;
* a **number** is ``-?(D+(.D*)?|.D+)([eE][-+]?D+)?`` with D the ASCII digits 0–9 (``1``, ``-2.5``,
  ``.5``, ``1.``, ``1e-05``, ``2.5E+3``: what C's ``strtod`` reads of a decimal, and what Python's
  ``repr`` of a float writes), at most ``NUMBER_CHARS`` characters, and finite: ``nan``, ``inf``,
  ``infinity`` and a value past a double's range (``1e999``) are refused, as are hexadecimal floats;
* a **whole** number is an integer, or a number whose value is one (``2.0``, ``1e2``): grades,
  depths and seeds as a spreadsheet may write them.

White space around the text (ASCII only: space, tab, CR, LF, VT, FF, as ``strtod`` skips) is
ignored; anything else is a ValueError in one line that quotes at most ``SHOWN_CHARS`` characters
of the value and says why where it can (which character is another script's digit, a ``_``, a
leading ``+``, too many digits). Readers add the file and line, as for every other problem.

An API value that is already a number (an ``int``, or a ``float`` where a number is asked) is held
to the same bounds; a ``bool`` is not a number. ``flag`` turns a reader into an ``argparse`` type,
so that a command line refuses a bad number with one ``error:`` line and exit status 2.
"""
from __future__ import annotations

import argparse
import math
import re
import unicodedata
from collections.abc import Callable
from typing import TypeVar

INT_DIGITS = 19  # enough for any signed 64-bit integer
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
NUMBER_CHARS = 100  # a number written with more characters is refused before it is read
SHOWN_CHARS = 40  # characters of a refused value quoted in the message
_SPACE = " \t\r\n\x0b\x0c"
INTEGER = re.compile(r"-?[0-9]+")
NUMBER = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")

T = TypeVar("T")


def shown(value: object) -> str:
    """``value`` quoted for a one-line message: its ``repr``, cut at ``SHOWN_CHARS`` characters."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + f"… ({len(str(value)):,} characters)"


def reason(text: str) -> str:
    """Why ``text`` (stripped) is outside the grammar, in a few words in parentheses after a space,
    or "" when there is nothing more to say than that it is not a number."""
    if len(text) > NUMBER_CHARS:
        return f" (a number has at most {NUMBER_CHARS} characters)"
    other = next((c for c in text if not c.isascii() and unicodedata.digit(c, None) is not None), None)
    if other is not None:
        return f" (U+{ord(other):04X} {unicodedata.name(other, '')} is not read as a digit: write the digits 0-9)"
    if "_" in text:
        return " (write the digits without '_')"
    if text.startswith("+"):
        return " (write it without the leading '+')"
    odd = next((c for c in text if not c.isascii()), None)
    if odd is not None:
        return f" (U+{ord(odd):04X} {unicodedata.name(odd, '')} is not part of a number)"
    return ""


def _text(value: object) -> str | None:
    return value.strip(_SPACE) if isinstance(value, str) else None


def _refused(value: object, what: str, kind: str) -> ValueError:
    """The one-line refusal of ``value`` as ``kind`` ("an integer", "a number", "a whole number")."""
    text = _text(value)
    if text is None:
        return ValueError(f"{what} is {type(value).__name__}, not {kind}")
    if text.lower().lstrip("+-") in ("nan", "inf", "infinity"):
        return ValueError(f"{what} {shown(value)} is not a finite number")
    return ValueError(f"{what} {shown(value)} is not {kind}{reason(text)}")


def integer(value: object, what: str = "the value") -> int:
    """``value`` as an integer: text by the integer grammar (module docstring), or an ``int``
    within ``INT_MIN`` … ``INT_MAX``; a ValueError in one line naming ``what`` otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        return _in_range(value, value, what)
    text = _text(value)
    if text is None or not INTEGER.fullmatch(text):
        raise _refused(value, what, "an integer")
    if len(text.lstrip("-")) > INT_DIGITS:
        raise ValueError(f"{what} {shown(value)} is not an integer of at most {INT_DIGITS} digits")
    return _in_range(int(text), value, what)


def _in_range(number: int, value: object, what: str) -> int:
    if not INT_MIN <= number <= INT_MAX:
        raise ValueError(f"{what} {shown(value)} is beyond the integers kept ({INT_MIN:,} to {INT_MAX:,})")
    return number


def number(value: object, what: str = "the value") -> float:
    """``value`` as a finite float: text by the number grammar (module docstring), an ``int`` or a
    finite ``float``; a ValueError in one line naming ``what`` otherwise."""
    return _number(value, what, "a number")


def _number(value: object, what: str, kind: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            x = float(value)
        except OverflowError:
            raise ValueError(f"{what} {shown(value)} is not a finite number (past a double's range, about "
                             "±1.8e308)") from None
        if not math.isfinite(x):
            raise ValueError(f"{what} {shown(value)} is not a finite number")
        return x
    text = _text(value)
    if text is None or len(text) > NUMBER_CHARS or not NUMBER.fullmatch(text):
        raise _refused(value, what, kind)
    x = float(text)
    if not math.isfinite(x):
        raise ValueError(f"{what} {shown(value)} is not a finite number (past a double's range, about ±1.8e308)")
    return x


def whole(value: object, what: str = "the value") -> int:
    """``value`` as an integer: an integer by the grammar, or a number (text or float) whose value
    is a whole number within ``INT_MIN`` … ``INT_MAX`` (``2.0``, ``1e2``); a ValueError in one line
    naming ``what`` otherwise."""
    text = _text(value)
    if (text is not None and INTEGER.fullmatch(text)) or (isinstance(value, int) and not isinstance(value, bool)):
        return integer(value, what)
    x = _number(value, what, "a whole number")
    if not x.is_integer():
        raise ValueError(f"{what} {shown(value)} is not a whole number")
    return _in_range(int(x), value, what)


def is_integer(text: str) -> bool:
    """Whether ``text`` is an integer by the grammar (white space around it aside)."""
    stripped = text.strip(_SPACE)
    return len(stripped) <= INT_DIGITS + 1 and INTEGER.fullmatch(stripped) is not None


def is_count(text: str) -> bool:
    """Whether ``text`` is a count as a name writes one (``ndcg@10``'s ``10``): ASCII digits only, at
    most ``INT_DIGITS`` of them (not ``١٠``, ``²`` or ``+10``, which ``str.isdigit`` takes)."""
    return 0 < len(text) <= INT_DIGITS and text.isascii() and text.isdigit()


def is_number(text: str) -> bool:
    """Whether ``text`` reads as a number by the grammar (``number`` would return one)."""
    try:
        number(text)
    except ValueError:
        return False
    return True


def flag(read: Callable[[str], T]) -> Callable[[str], T]:
    """An ``argparse`` type for ``read`` (a function of the text that returns the value or raises
    ValueError in one line): argparse then prints ``error: argument --x: <the line>`` and exits 2."""

    def parse(text: str) -> T:
        try:
            return read(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    parse.__name__ = getattr(read, "__name__", "number")
    return parse
