"""Queries from one file: JSONL; CSV/TSV with a header row (an id column optional) or as bare
``id, text`` rows; or plain text, one query per line.

Queries that come without ids (a .txt file, a CSV/TSV whose header names only a ``query`` or
``text`` column) get stable ids from their text (``stable_query_id``): the same query has the same
id in every upload, whatever its line, so judgments made on it stay attached. A query repeated in
such a file is kept once, with a warning counting the repeats.

Besides id and text, a query may carry fields an analyst segments by (``retrieval.evaluation.query_kinds``): a
JSONL record's other scalar values and those of its ``metadata`` object, a CSV/TSV file's other
columns. They are kept as text (at most ``FIELD_CHARS`` characters each, ``MAX_FIELDS`` fields).
"""
from __future__ import annotations

import hashlib
from typing import Any

from retrieval.data.readers.decode import Text, suffix
from retrieval.data.readers.records import (
    EXAMPLES,
    QUERY_ID_COLUMNS,
    QUERY_TEXT_COLUMNS,
    RecordSink,
    Skipped,
    column,
    first_row,
    id_value,
    jsonl_id_text,
    not_qrels,
    surrogate_problem,
    table_rows,
    whole_text,
)
from retrieval.errors import DataError, LoadReport
from retrieval.safe_names import shown

FIELD_CHARS = 100
MAX_FIELDS = 20
_NOT_FIELDS = {*QUERY_ID_COLUMNS, *QUERY_TEXT_COLUMNS, "title", "metadata"}


def _scalar_fields(obj: dict[str, Any]) -> dict[str, str]:
    """A JSONL query's segment fields: its other scalar values, then its ``metadata``'s."""
    out: dict[str, str] = {}
    meta = obj.get("metadata")
    for source in (obj, meta if isinstance(meta, dict) else {}):
        for k, v in source.items():
            if (source is meta or k not in _NOT_FIELDS) and isinstance(v, (str, int, float, bool)) and str(k).strip():
                out.setdefault(str(k).strip()[:FIELD_CHARS], str(v).strip()[:FIELD_CHARS])
    return dict(list(out.items())[:MAX_FIELDS])


def stable_query_id(text: str) -> str:
    """``q-`` and the first 10 hex digits of the SHA-256 of the whitespace-normalized text; a
    ValueError in one line for a text holding a lone surrogate (which UTF-8 cannot encode)."""
    problem = surrogate_problem(text)
    if problem:
        raise ValueError(f"query {shown(text)} {problem}")
    return "q-" + hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()[:10]


class _TextSink:
    """Collects id-less queries under stable ids, keeping each distinct text once."""

    def __init__(self, sink: RecordSink):
        self.sink = sink
        self.repeats: list[int] = []

    def add(self, lineno: int, qtext: str) -> None:
        if not qtext.strip():
            return  # a blank line or cell: nothing to ask
        ident = stable_query_id(qtext)
        if ident in self.sink.seen:
            self.repeats.append(lineno)
            return
        self.sink.add(ident, lineno, qtext.strip(), False)

    def warn_repeats(self, report: LoadReport) -> None:
        if self.repeats:
            lines_ = ", ".join(str(n) for n in self.repeats[:EXAMPLES])
            report.warn(f"{len(self.repeats):,} repeated {'query' if len(self.repeats) == 1 else 'queries'} kept "
                        f"once (e.g. line {lines_})", self.sink.display)


def _table_queries(text: Text, delimiter: str, sink: RecordSink, report: LoadReport,
                   fields: dict[str, dict[str, str]]) -> None:
    display = text.display
    rows = table_rows(text, delimiter)
    first_line, first = first_row(rows, display)
    not_qrels(first, display, first_line, "queries")
    id_col = column(first, QUERY_ID_COLUMNS)
    text_col = column(first, QUERY_TEXT_COLUMNS)
    extra = [(i, name.strip()[:FIELD_CHARS]) for i, name in enumerate(first)
             if i not in (id_col, text_col) and name.strip()][:MAX_FIELDS]

    def keep_fields(ident: str, row: list[str]) -> None:  # a query kept (not skipped, not a repeat): its fields
        values = {name: row[i].strip()[:FIELD_CHARS] for i, name in extra if row[i].strip()}
        if values and ident in sink.items and ident not in fields:
            fields[ident] = values

    if id_col is None and text_col is not None:  # a header with the queries only: stable ids
        texts = _TextSink(sink)
        for lineno, row in rows:
            if len(row) != len(first):
                raise DataError(f"expected {len(first)} columns, found {len(row)}", display, lineno)
            texts.add(lineno, row[text_col])
            keep_fields(stable_query_id(row[text_col]), row)
        texts.warn_repeats(report)
        return
    if id_col is not None and text_col is not None:
        width, pending = len(first), []
    elif len(first) == 2:  # no header: id, text (MS MARCO style)
        id_col, text_col, width, pending, extra = 0, 1, 2, [(first_line, first)], []  # no header: no fields
    else:
        raise DataError(f"missing required columns: the header row names a text column "
                        f"({', '.join(QUERY_TEXT_COLUMNS)}) and optionally an id "
                        f"({', '.join(QUERY_ID_COLUMNS)}); it has: {', '.join(first)}",
                        display, first_line)
    for lineno, row in (*pending, *rows):
        if len(row) != width:
            raise DataError(f"expected {width} columns, found {len(row)}", display, lineno)
        ident = id_value(row[id_col], "id", display, lineno)
        sink.add(ident, lineno, row[text_col], not row[text_col].strip())
        keep_fields(ident, row)


def read_queries(text: Text, filename: str, report: LoadReport
                 ) -> tuple[dict[str, str], Skipped, dict[str, dict[str, str]]]:
    """Queries from one file, by its extension (JSONL when an unknown one starts with '{'): their
    texts, the ids skipped for empty text, and each query's segment fields (module docstring)."""
    display = text.display
    kind = suffix(filename)
    sink = RecordSink(display, "query")
    fields: dict[str, dict[str, str]] = {}
    if kind in (".jsonl", ".ndjson", ".json") or (kind not in (".csv", ".tsv", ".txt")
                                                   and text.head() == "{"):
        for lineno, obj, ident, qtext in jsonl_id_text(text, QUERY_TEXT_COLUMNS):
            sink.add(ident, lineno, qtext, not qtext.strip())
            values = _scalar_fields(obj)
            for key, value in values.items():
                whole_text(key, f"field name {shown(key)}", display, lineno)
                whole_text(value, f"field {shown(key)}", display, lineno)
            if values and qtext.strip():
                fields[ident] = values
    elif kind in (".csv", ".tsv"):
        _table_queries(text, "," if kind == ".csv" else "\t", sink, report, fields)
    elif kind == ".txt":
        texts = _TextSink(sink)
        for lineno, line in text.lines():
            texts.add(lineno, line)
        texts.warn_repeats(report)
    else:
        raise DataError(f"cannot read queries from a '{kind or 'no extension'}' file; expected "
                        f".jsonl, .csv, .tsv or .txt (one query per line)", display)
    sink.warn_skipped(report)
    return sink.items, sink.skipped, fields
