"""The one writer of the CSV and TSV files RankScope makes, and the reader that undoes it: lossless,
and safe to open in a spreadsheet.

A cell a stranger wrote (a query's text, a document id, a judge's name) must neither end its row
early nor run as a formula when the file is opened in Excel, LibreOffice or Google Sheets (CSV
injection: OWASP, "CSV Injection", https://owasp.org/www-community/attacks/CSV_Injection — cells
that begin with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return are evaluated; the advice is
to quote every cell and prefix such a cell with a single quote, and to mind that a spreadsheet may
split a cell on another separator, such as ``;``). So ``write``:

* writes a plain number (a Python ``int`` or ``float``: grades, ranks, scores, ``-1.5`` among them)
  as it is, unquoted and unguarded; every other cell is text and is quoted (``"``), so a comma, a
  tab, a CR or an LF inside it stays inside it and never ends the row (RFC 4180, section 2);
* guards text with ``'`` (``guard``): the cell is cut into *segments* at ``,``, ``;``, tab, CR and
  LF (the places a spreadsheet or a naive reader may start a new cell), and a ``'`` is put at the
  start of every segment whose first character after leading blanks (whitespace, controls,
  invisible characters) is a formula trigger — ``=``, ``+``, ``-``, ``@``, their full-width forms —
  or is itself ``'``; a cell that starts with a tab, a CR or an LF gets one too. So ``=1+2`` is
  written ``'=1+2``, ``a;=cmd`` ``a;'=cmd``, ``-5`` (a document id, which is text) ``'-5``, and
  ``'-5`` ``''-5``.

The escape is lossless: a segment of a written cell starts with ``'`` exactly where ``guard`` put
one (a segment that began with ``'`` always gets one more), so ``unguard`` drops the first ``'`` of
every segment and gives back the cell as it was — ``-5`` and ``'-5``, ``=x`` and ``'=x`` stay two.
``unguard`` is for files RankScope wrote (a reader knows them by their header); another tool's file
is read as that tool wrote it.
"""
from __future__ import annotations

import csv
import io
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path

FORMATS = ("csv", "tsv")
DELIMITERS = {"csv": ",", "tsv": "\t"}
SPLITS = frozenset(",;\t\r\n")  # where a spreadsheet or a naive reader may start a new cell
TRIGGERS = frozenset("=+-@\uff1d\uff0b\uff0d\uff20'")  # formula starts (ASCII, full width) and the escape itself
STARTS = frozenset("\t\r\n")  # a cell may not start with these unguarded (OWASP)
MARK = "'"


def _blank(c: str) -> bool:
    return c.isspace() or unicodedata.category(c)[0] in "CZ"


def guard(cell: str) -> str:
    """``cell`` with ``'`` put at each segment start a spreadsheet could run (module docstring)."""
    if not cell:
        return cell
    n = len(cell)
    first = [n] * (n + 1)  # first[i]: the index of the first non-blank character at or after i
    for i in range(n - 1, -1, -1):
        first[i] = first[i + 1] if _blank(cell[i]) else i
    out: list[str] = []
    boundary = True
    for i, c in enumerate(cell):
        if boundary and ((first[i] < n and cell[first[i]] in TRIGGERS) or (i == 0 and c in STARTS)):
            out.append(MARK)
        out.append(c)
        boundary = c in SPLITS
    return "".join(out)


def unguard(cell: str) -> str:
    """The cell ``guard`` was given: the ``'`` at the start of each segment dropped."""
    if MARK not in cell:
        return cell
    out: list[str] = []
    boundary = True
    for c in cell:
        if boundary and c == MARK:
            boundary = False
            continue
        out.append(c)
        boundary = c in SPLITS
    return "".join(out)


def is_number(value: object) -> bool:
    """A plain number (``int`` or ``float``, not ``bool``): written as it is."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _cell(value: object) -> object:
    if is_number(value):
        return value
    return guard("" if value is None else str(value))


def _delimiter(fmt: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"unknown table format {fmt!r}; choose from {', '.join(FORMATS)}")
    return DELIMITERS[fmt]


def dumps(header: Sequence[str], rows: Iterable[Sequence[object]], fmt: str = "csv") -> str:
    """The header and rows as CSV (``fmt="csv"``) or TSV text, cells as the module docstring says."""
    buf = io.StringIO()
    out = csv.writer(buf, delimiter=_delimiter(fmt), quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
    out.writerow([_cell(c) for c in header])
    for row in rows:
        out.writerow([_cell(c) for c in row])
    return buf.getvalue()


def write(path: str | Path, header: Sequence[str], rows: Iterable[Sequence[object]], fmt: str = "csv") -> Path:
    """``dumps`` written to ``path`` (UTF-8; its folder made); returns the path."""
    text = dumps(header, rows, fmt)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="")
    return path


def loads(text: str, fmt: str = "csv") -> list[list[str]]:
    """Every row of text ``dumps`` wrote, each cell as the string it was written from (a number as
    its text): the quoting read and ``unguard`` applied."""
    if csv.field_size_limit() < 1 << 30:
        csv.field_size_limit(1 << 30)
    return [[unguard(c) for c in row] for row in csv.reader(io.StringIO(text, newline=""), delimiter=_delimiter(fmt))]


def read(path: str | Path, fmt: str = "csv") -> list[list[str]]:
    """``loads`` of a file ``write`` wrote (read with its CRs kept: a CR in a cell is part of it)."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        return loads(f.read(), fmt)
