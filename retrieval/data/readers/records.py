"""Records: JSONL objects and CSV/TSV rows, each with the line it starts on, and their fields.

Checks ids and texts: an id holding whitespace, a control or an invisible character, a noncharacter
or a lone surrogate is refused, and one not in NFC normalized (``require_id``, after
``safe_names.id_problem`` and ``safe_names.normal_id``); a text holding a lone surrogate is refused
(``whole_text``). Tells relevance labels given in place of documents or queries apart, and collects
id/text records in a :class:`RecordSink`, which rejects duplicate ids and skips (with a warning)
records whose text is empty.
"""
from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from retrieval import numbers
from retrieval.data.readers.decode import Text
from retrieval.errors import DataError, LoadReport
from retrieval.safe_names import describe_char, id_problem, normal_id, shown

DOC_ID_COLUMNS = ("_id", "id", "doc_id", "docid")
DOC_TEXT_COLUMNS = ("text", "body", "contents")
QUERY_ID_COLUMNS = ("_id", "id", "query_id", "query-id", "qid", "queryid")
QUERY_TEXT_COLUMNS = ("text", "query")
QRELS_QUERY_HEADERS = {"query-id", "query_id", "queryid", "qid", "query", "topic"}
QRELS_SCORE_HEADERS = {"score", "relevance", "rel", "label", "grade", "judgment", "judgement"}
EXAMPLES = 3  # ids quoted in a warning that counts many
INDIVIDUAL = 5  # up to this many skips are warned one by one (with their line)

Skipped = dict[str, int]  # id -> line of a record skipped for empty text


def json_decoder() -> json.JSONDecoder:
    """A JSON decoder whose numbers pass the one number grammar (``retrieval.numbers``): an integer
    of more than 19 digits or past a signed 64-bit integer, or a number past a double's range or of
    more than 100 characters, is a ValueError in one line, never Python's own 4,300-digit message."""
    return json.JSONDecoder(parse_int=lambda s: numbers.integer(s, "a JSON integer"),
                            parse_float=lambda s: numbers.number(s, "a JSON number"))


def _jsonl_records(text: Text) -> Iterator[tuple[int, dict[str, Any]]]:
    loads, display = json_decoder().decode, text.display
    for lineno, line in text.lines():
        if not line or line.isspace():
            continue
        try:
            obj = loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"invalid JSON: {e.msg} (column {e.colno})", display, lineno) from None
        except ValueError as e:  # a number the grammar refuses
            raise DataError(str(e), display, lineno) from None
        except RecursionError:
            raise DataError("invalid JSON: nested too deeply", display, lineno) from None
        if not isinstance(obj, dict):
            kind = "an array" if isinstance(obj, list) else "a string" if isinstance(obj, str) else "a single value"
            raise DataError(f"expected a JSON object per line, found {kind}", display, lineno)
        yield lineno, obj


_FIELD_LIMIT = 1 << 30


def table_rows(text: Text, delimiter: str) -> Iterator[tuple[int, list[str]]]:
    """(line it starts on, cells) for each CSV/TSV row with a value in it."""
    if csv.field_size_limit() < _FIELD_LIMIT:  # long documents exceed csv's default 128 KiB
        csv.field_size_limit(_FIELD_LIMIT)
    display = text.display
    reader = csv.reader(text.rows(), delimiter=delimiter)
    start = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise DataError(f"cannot parse this row ({e})", display, start) from None
        lineno, start = start, reader.line_num + 1
        if not row or all(not c.strip() for c in row):
            continue
        yield lineno, row


def first_row(rows: Iterator[tuple[int, list[str]]], display: str) -> tuple[int, list[str]]:
    first = next(rows, None)
    if first is None:
        raise DataError("file is empty (no row with a value)", display)
    return first


def column(header: list[str], names: tuple[str, ...]) -> int | None:
    cols = [c.strip().lower() for c in header]
    for n in names:
        if n in cols:
            return cols.index(n)
    return None


def looks_like_qrels_header(cells: list[str]) -> bool:
    """Whether a qrels file's first row is its header. A header is told by its grade column, which
    is not a number (``score``, ``relevance``): a row whose last cell is a number is a label whatever
    its ids say (``qid 0 corpus-id 2``: a query named ``qid``, a document named ``corpus-id``). Then
    by its names, so that a first row whose grade is merely bad still gets its error: the query
    column's (``QRELS_QUERY_HEADERS``), and a grade column's (``QRELS_SCORE_HEADERS``) or BEIR's
    ``corpus-id``."""
    cols = [c.strip().lower() for c in cells]
    return (len(cols) in (3, 4) and not number_like(cols[-1]) and cols[0] in QRELS_QUERY_HEADERS
            and (cols[-1] in QRELS_SCORE_HEADERS or "corpus-id" in cols))


def int_like(value: str) -> bool:
    """Whether ``value`` is an integer by the one number grammar (``retrieval.numbers``)."""
    return numbers.is_integer(value)


def number_like(value: str) -> bool:
    """Whether ``value`` reads as a number (an integer or a float's text), as a grade column's cell may."""
    try:
        float(value)
    except ValueError:
        return False
    return True


def not_qrels(cells: list[str], display: str, lineno: int, what: str) -> None:
    """Relevance labels given where documents or queries belong get an error that says so."""
    if looks_like_qrels_header(cells) or (len(cells) in (3, 4) and int_like(cells[-1])):
        raise DataError(f"this looks like relevance labels (qrels), not {what}: its first row "
                        f"is '{', '.join(cells)}'; pass it as qrels", display, lineno)


def id_value(value: object, field: str, display: str, lineno: int, named: str = "", what: str = "id") -> str:
    """An id field as a stripped string: a string or an integer, not empty, without whitespace. Messages
    name it ``named`` (default: ``field '<field>'``), and the id ``what`` (``require_id``)."""
    named = named or f"field '{field}'"
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise DataError(f"{named} must be a string or an integer", display, lineno)
    ident = str(value).strip()
    if not ident:
        raise DataError(f"{named} is empty", display, lineno)
    return require_id(ident, what, display, lineno)


def require_id(ident: str, what: str, display: str | None, lineno: int | None = None) -> str:
    """``ident`` as ids are kept (``safe_names.normal_id``: its NFC form), or a DataError naming the
    file and line when it cannot be an id (``safe_names.id_problem``): whitespace (TREC run and qrels
    files separate their columns by it, so such an id could not be exported or read back), a
    control character or an invisible one, a noncharacter, a lone surrogate."""
    if _PLAIN_ID(ident):
        return ident
    problem = id_problem(ident)
    if problem:
        raise DataError(f"{what} {shown(ident)} {problem}", display, lineno)
    return normal_id(ident)


_PLAIN_ID = re.compile(r"[!-~]+").fullmatch  # visible ASCII: an id as it is, nothing to check


def text_value(value: object, field: str, display: str, lineno: int) -> str:
    """A text field as a string (a missing or null one is empty). A lone surrogate (JSON's
    ``"\\ud800"``: half of a character cut in two) is refused, naming the field, file and line:
    no UTF-8 file, page or terminal can hold it."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DataError(f"field '{field}' must be a string", display, lineno)
    return whole_text(value, f"field {shown(field)}", display, lineno)


def whole_text(value: str, what: str, display: str | None, lineno: int | None = None) -> str:
    """``value`` itself, or a DataError naming ``what``, the file and the line when it holds a lone
    surrogate (``surrogate_problem``)."""
    problem = surrogate_problem(value)
    if problem:
        raise DataError(f"{what} {problem}", display, lineno)
    return value


def surrogate_problem(value: str) -> str | None:
    """Where ``value`` holds a lone surrogate (JSON's ``"\\ud800"``: half of a character cut in
    two, which no UTF-8 file, page or terminal can hold), or None."""
    if value.isascii():
        return None
    bad = _SURROGATE(value)
    if bad is None:
        return None
    return (f"holds {describe_char(bad.group())} at character {bad.start() + 1:,}, half of a character that no "
            "UTF-8 text can hold")


_SURROGATE = re.compile("[\ud800-\udfff]").search


class RecordSink:
    """Collects documents (or queries), rejecting duplicate ids and skipping empty ones."""

    def __init__(self, display: str, what: str = "document"):
        self.display = display
        self.what = what
        self.items: dict[str, Any] = {}
        self.seen: dict[str, tuple[str, int | None]] = {}  # id -> (file, line) first seen
        self.skipped: Skipped = {}
        self._skips: list[tuple[str, str, int | None]] = []  # (id, file, line)

    def add(self, ident: str, lineno: int | None, value: Any, empty: bool) -> None:
        if ident in self.seen:
            file, first = self.seen[ident]
            where = f" (first on line {first})" if first else ""
            if file != self.display:
                where = f" (first in {file}{f':{first}' if first else ''})"
            raise DataError(f"duplicate {self.what} id '{ident}'{where}", self.display, lineno)
        self.seen[ident] = (self.display, lineno)
        if empty:
            self.skipped[ident] = lineno or 0
            self._skips.append((ident, self.display, lineno))
        else:
            self.items[ident] = value

    def warn_skipped(self, report: LoadReport) -> None:
        """One warning per skipped record, or one counting them when there are many."""
        plural = "queries" if self.what == "query" else f"{self.what}s"
        n = len(self._skips)
        if n <= INDIVIDUAL:
            for ident, display, lineno in self._skips:
                report.warn(f"{self.what} '{ident}' has empty text; skipped", display, lineno)
            return
        examples = ", ".join(f"'{i}'" + (f" (line {ln})" if ln else "")
                             for i, _, ln in self._skips[:EXAMPLES])
        report.warn(f"{n:,} {plural} have empty text and were skipped (e.g. {examples})",
                    self.display)


def jsonl_id_text(text: Text, text_columns: Iterable[str]
                  ) -> Iterator[tuple[int, dict[str, Any], str, str]]:
    """(line, record, id, text) for each JSONL record, checking the id and text fields."""
    display = text.display
    for lineno, obj in _jsonl_records(text):
        key = "_id" if "_id" in obj else "id" if "id" in obj else None
        if key is None:
            raise DataError("missing required field '_id' (or 'id')", display, lineno)
        ident = id_value(obj[key], key, display, lineno)
        tkey = next((k for k in text_columns if k in obj), None)
        if tkey is None:
            raise DataError("missing required field 'text'", display, lineno)
        yield lineno, obj, ident, text_value(obj[tkey], tkey, display, lineno)
