"""Documents from one file: JSONL, CSV/TSV with a header row, or text with one per line; with the
documents' links where a JSONL record has a ``links`` field or a CSV/TSV file a ``links`` column
(``links``: resolved once every document has loaded)."""
from __future__ import annotations

from retrieval.data.dataset import Document
from retrieval.data.readers.decode import Text, suffix
from retrieval.data.readers.links import LinkSink, cell_links, field_links
from retrieval.data.readers.pages import PAGE_SUFFIXES
from retrieval.data.readers.records import (
    DOC_ID_COLUMNS,
    DOC_TEXT_COLUMNS,
    RecordSink,
    Skipped,
    column,
    first_row,
    id_value,
    jsonl_id_text,
    not_qrels,
    table_rows,
    text_value,
)
from retrieval.errors import DataError, LoadReport


def _docs_jsonl(text: Text, sink: RecordSink, links: LinkSink) -> None:
    display = text.display
    for lineno, obj, ident, body in jsonl_id_text(text, DOC_TEXT_COLUMNS):
        title = text_value(obj.get("title"), "title", display, lineno)
        sink.add(ident, lineno, Document(ident, title, body),
                 not body.strip() and not title.strip())
        if "links" in obj:
            links.add(ident, field_links(obj["links"], ident, display, lineno), display, lineno)


def _docs_table(text: Text, sink: RecordSink, links: LinkSink, delimiter: str) -> None:
    display = text.display
    rows = table_rows(text, delimiter)
    header_line, header = first_row(rows, display)
    not_qrels(header, display, header_line, "documents")
    id_col = column(header, DOC_ID_COLUMNS)
    text_col = column(header, DOC_TEXT_COLUMNS)
    title_col = column(header, ("title",))
    links_col = column(header, ("links",))
    if id_col is None or text_col is None:
        names = DOC_ID_COLUMNS if id_col is None else DOC_TEXT_COLUMNS
        raise DataError(f"missing required column '{names[0]}' (the header row names one of "
                        f"{', '.join(names)}; it has: {', '.join(header)})",
                        display, header_line)
    width = len(header)
    for lineno, row in rows:
        if len(row) != width:
            raise DataError(f"expected {width} columns as in the header, found {len(row)}",
                            display, lineno)
        ident = id_value(row[id_col], header[id_col].strip(), display, lineno)
        body = row[text_col]
        title = row[title_col] if title_col is not None else ""
        sink.add(ident, lineno, Document(ident, title, body),
                 not body.strip() and not title.strip())
        if links_col is not None:
            links.add(ident, cell_links(row[links_col], ident, display, lineno), display, lineno)


def _docs_lines(text: Text, sink: RecordSink) -> None:
    for lineno, line in text.lines():
        line = line.strip()
        if line:
            ident = f"line-{lineno}"
            sink.add(ident, lineno, Document(ident, "", line), False)


def read_docs(text: Text, filename: str, report: LoadReport) -> tuple[dict[str, Document], Skipped, LinkSink]:
    """Documents from one file, by its extension (content decides for unknown ones), read as a
    stream: the file's text is never held whole, only the documents; and their links as read, to
    be resolved once every document has loaded (``links.resolve``)."""
    display = text.display
    kind = suffix(filename)
    sink = RecordSink(display)
    links = LinkSink()
    head = text.head() if kind not in (".jsonl", ".ndjson", ".csv", ".tsv", ".txt") else ""
    if kind in (".jsonl", ".ndjson") or (kind == ".json" and head == "{"):
        _docs_jsonl(text, sink, links)
    elif kind == ".json":
        raise DataError("a JSON array or value is not supported; write one JSON object per line "
                        "(JSONL)", display)
    elif kind == ".csv":
        _docs_table(text, sink, links, ",")
    elif kind == ".tsv":
        _docs_table(text, sink, links, "\t")
    elif kind == ".txt":
        _docs_lines(text, sink)
    elif head == "{":
        _docs_jsonl(text, sink, links)
    elif kind in PAGE_SUFFIXES:
        raise DataError(f"a {kind} page is one document: load a folder or a .zip of pages (their links to each "
                        "other are read), or a .jsonl, .csv or .tsv file of documents", display)
    else:
        raise DataError(f"cannot tell the format of this file ('{kind or 'no extension'}'); "
                        f"expected .jsonl, .csv, .tsv or .txt", display)
    sink.warn_skipped(report)
    return sink.items, sink.skipped, links
