"""Queries from one file: JSONL, or CSV/TSV with a header row or as bare ``id, text`` rows."""
from __future__ import annotations

from ..errors import DataError, LoadReport
from .decode import decode, suffix
from .records import (QUERY_ID_COLUMNS, QUERY_TEXT_COLUMNS, RecordSink, Skipped, column,
                      first_row, id_value, jsonl_id_text, not_qrels, table_rows)


def read_queries(data: bytes, filename: str, display: str,
                 report: LoadReport) -> tuple[dict[str, str], Skipped]:
    """Queries from one file, by its extension (JSONL when an unknown one starts with '{')."""
    text = decode(data, display)
    kind = suffix(filename)
    sink = RecordSink(display, "query")
    if kind in (".jsonl", ".ndjson", ".json") or (kind not in (".csv", ".tsv")
                                                   and text.lstrip()[:1] == "{"):
        for lineno, _, ident, qtext in jsonl_id_text(text, display, QUERY_TEXT_COLUMNS):
            sink.add(ident, lineno, qtext, not qtext.strip())
    elif kind in (".csv", ".tsv"):
        rows = table_rows(text, display, "," if kind == ".csv" else "\t")
        first_line, first = first_row(rows, display)
        not_qrels(first, display, first_line, "queries")
        id_col = column(first, QUERY_ID_COLUMNS)
        text_col = column(first, QUERY_TEXT_COLUMNS)
        if id_col is not None and text_col is not None:
            width, pending = len(first), []
        elif len(first) == 2:  # no header: id, text (MS MARCO style)
            id_col, text_col, width, pending = 0, 1, 2, [(first_line, first)]
        else:
            raise DataError(f"missing required columns: the header row names an id "
                            f"({', '.join(QUERY_ID_COLUMNS)}) and a text column "
                            f"({', '.join(QUERY_TEXT_COLUMNS)}); it has: {', '.join(first)}",
                            display, first_line)
        for lineno, row in (*pending, *rows):
            if len(row) != width:
                raise DataError(f"expected {width} columns, found {len(row)}", display, lineno)
            ident = id_value(row[id_col], "id", display, lineno)
            sink.add(ident, lineno, row[text_col], not row[text_col].strip())
    else:
        raise DataError(f"cannot read queries from a '{kind or 'no extension'}' file; expected "
                        f".jsonl, .csv or .tsv", display)
    sink.warn_skipped(report)
    return sink.items, sink.skipped
