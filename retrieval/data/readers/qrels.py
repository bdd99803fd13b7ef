"""Relevance labels: read BEIR or TREC qrels, then keep those whose query and document loaded.

A first line is a header only when its grade column is not a number, so no label is taken for one
(``records.looks_like_qrels_header``). A pair labelled twice alike is read once (counted); labelled
twice differently, the file is refused, naming both lines. Labels that point nowhere are dropped
with a counted warning, never silently.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from retrieval import numbers
from retrieval.data.dataset import Document, Qrels
from retrieval.data.readers.decode import PathLike, Text, count, verb_for
from retrieval.data.readers.records import EXAMPLES, Skipped, looks_like_qrels_header, require_id
from retrieval.errors import DataError, LoadReport
from retrieval.safe_names import shown

SPLIT_ORDER = {"test": 0, "dev": 1, "validation": 2, "train": 3}
MAX_GRADE = 100  # labels are integers within ±MAX_GRADE (TREC's run from -2 to 4)


def _quote(ids: Iterable[str]) -> str:
    return ", ".join(repr(i) for i in ids)


def _dropped(n: int, verb: str, where: str) -> str:
    """"3 labels point to <where>; dropped": the warning for labels that lost their target."""
    return f"{count(n, 'label')} {verb_for(n, verb)} to {where}; dropped"


def _label(value: str, display: str, lineno: int) -> int:
    """A label as the one number grammar reads a whole number (``retrieval.numbers.whole``: ``2``,
    ``2.0``; not ``+2``, ``2_0`` or another script's digits), within ±``MAX_GRADE``."""
    try:
        grade = numbers.whole(value, "relevance label")
    except ValueError:
        if numbers.INTEGER.fullmatch(value):  # digits too many to keep: out of range as any other
            _out_of_range(value, display, lineno)
        raise DataError(f"relevance label {numbers.shown(value)} is not an integer{numbers.reason(value)}", display,
                        lineno) from None
    if abs(grade) > MAX_GRADE:
        _out_of_range(value, display, lineno)
    return grade


def _out_of_range(value: str, display: str, lineno: int) -> NoReturn:
    shown = value if len(value) <= 20 else f"{value[:20]}… ({len(value):,} characters)"
    raise DataError(f"relevance label '{shown}' is out of range (labels are integers from {-MAX_GRADE} "
                    f"to {MAX_GRADE})", display, lineno)


def _labels(text: Text) -> Iterator[tuple[int, str, str, int]]:
    """(line, query id, document id, grade) for each label of a qrels file, its header left out.

    The layout is told by the first line: 3 columns (BEIR) or 4 (TREC), tab-separated where the
    line holds a tab, else by whitespace. The first line is the header only when
    ``records.looks_like_qrels_header`` says so, by its grade column (not a number) first: a line
    the writer wrote (``qid 0 corpus-id 2``) is a label whatever its ids. A line that is not a
    label is a DataError naming the file and line."""
    ncols = 0
    first = True
    display = text.display
    for lineno, line in text.lines():
        line = line.strip()
        if not line:
            continue
        parts = line.split("\t") if "\t" in line else line.split()
        if first:
            first = False
            if line[:1] in "{[" and len(parts) not in (3, 4):  # a query id may start with "{" too
                raise DataError("this looks like JSON, not relevance labels (expected lines "
                                "'query-id<TAB>corpus-id<TAB>score' or TREC 'qid 0 docid rel')",
                                display, lineno)
            if looks_like_qrels_header(parts):
                continue
        n = len(parts)
        if not ncols:
            if n not in (3, 4):
                raise DataError(f"expected 3 columns (query-id, corpus-id, score) or 4 (TREC: "
                                f"query-id, iteration, doc-id, relevance), found {n}",
                                display, lineno)
            ncols = n
        elif n != ncols:
            raise DataError(f"expected {ncols} columns like the lines above, found {n}",
                            display, lineno)
        qid, docid, score = (parts[0], parts[1], parts[2]) if n == 3 else (parts[0], parts[2], parts[3])
        qid, docid = qid.strip(), docid.strip()
        if not qid or not docid:
            raise DataError("empty query id or document id", display, lineno)
        qid, docid = require_id(qid, "query id", display, lineno), require_id(docid, "document id", display, lineno)
        yield lineno, qid, docid, _label(score.strip(), display, lineno)


def parse_qrels(text: Text, report: LoadReport | None) -> Qrels:
    """The labels of a qrels file (``_labels``) as ``{query id: {document id: grade}}``. A (query,
    document) pair labelled twice with one grade is read once (a warning counts the repeats); with
    two different grades it is a DataError naming both lines: which one is meant, no reader can
    tell. Linear in the file: the first line of a pair is looked for again only then."""
    qrels: Qrels = {}
    repeats = 0
    for lineno, qid, docid, rel in _labels(text):
        row = qrels.get(qid)
        if row is None:
            row = qrels[qid] = {}
        elif docid in row:
            if row[docid] != rel:
                raise _conflict(text, qid, docid, rel, lineno)
            repeats += 1
            continue
        row[docid] = rel
    if repeats and report is not None:
        report.warn(f"{count(repeats, '(query, document) pair')} labelled again with the same grade; "
                    f"read once", text.display)
    return qrels


def _conflict(text: Text, qid: str, docid: str, rel: int, lineno: int) -> DataError:
    """The error for a pair labelled ``rel`` on ``lineno`` and otherwise on an earlier line: that
    line found by reading the labels again (on this error only, so the reading stays linear)."""
    first, was = next((n, g) for n, q, d, g in _labels(text) if q == qid and d == docid)
    return DataError(f"query {shown(qid)} and document {shown(docid)} are labelled {was} on line {first} and "
                     f"{rel} on line {lineno}; a pair has one label, so keep one of the lines", text.display, lineno)


def read_qrels(path: PathLike, report: LoadReport | None = None) -> Qrels:
    """Relevance labels ``{query_id: {doc_id: grade}}`` from a BEIR TSV or a TREC qrels file.

    BEIR: ``query-id<TAB>corpus-id<TAB>score`` with or without the header line. TREC:
    ``qid iter docid rel``, whitespace separated. The layout is detected from the first line.
    """
    display = str(path)
    return parse_qrels(Text.of_file(Path(path), display), report)


def split_key(split: str) -> tuple[int, str]:
    return SPLIT_ORDER.get(split, len(SPLIT_ORDER)), split


@dataclass
class _Dropped:
    """What ``attach_qrels`` left out, counted, with a few example ids of each kind."""
    unknown_q: int = 0  # labels of a query id not in the queries
    skipped_q: int = 0  # labels of a query skipped for empty text
    unknown_d: int = 0  # labels of a document id not in the corpus
    skipped_d: int = 0  # labels of a document skipped for empty text
    emptied: int = 0  # queries with no label left
    ex_q: list[str] = field(default_factory=list)
    ex_d: list[str] = field(default_factory=list)


def _kept_docs(row: Mapping[str, int], docs: Mapping[str, Document], skipped_docs: Skipped,
               dropped: _Dropped) -> dict[str, int]:
    """The labels of one query whose document was loaded; the rest counted in ``dropped``."""
    new = {}
    for docid, rel in row.items():
        if docid in docs:
            new[docid] = rel
        elif docid in skipped_docs:
            dropped.skipped_d += 1
        else:
            dropped.unknown_d += 1
            if len(dropped.ex_d) < EXAMPLES:
                dropped.ex_d.append(docid)
    return new


def _keep(raw: Qrels, docs: Mapping[str, Document], skipped_docs: Skipped, queries: Mapping[str, str],
          skipped_queries: Skipped) -> tuple[Qrels, _Dropped]:
    """The labels whose query and document were loaded, and what was left out."""
    kept: Qrels = {}
    dropped = _Dropped()
    doc_keys = docs.keys()
    for qid, row in raw.items():
        if qid not in queries:
            if qid in skipped_queries:
                dropped.skipped_q += len(row)
            else:
                dropped.unknown_q += len(row)
                if len(dropped.ex_q) < EXAMPLES:
                    dropped.ex_q.append(qid)
            continue
        if row.keys() <= doc_keys:
            kept[qid] = row
            continue
        new = _kept_docs(row, docs, skipped_docs, dropped)
        if new:
            kept[qid] = new
        else:
            dropped.emptied += 1
    return kept, dropped


def _warn_dropped(dropped: _Dropped, split: str, display: str, nothing_loaded: bool, report: LoadReport) -> None:
    """One counted warning per kind of label left out."""
    if dropped.unknown_q:
        if nothing_loaded:
            report.warn(f"no queries were loaded, so the {count(dropped.unknown_q, 'label')} of split "
                        f"'{split}' cannot be used; dropped", display)
        else:
            report.warn(_dropped(dropped.unknown_q, "point", f"query ids that are not in the queries "
                                                             f"(e.g. {_quote(dropped.ex_q)})"), display)
    if dropped.skipped_q:
        report.warn(_dropped(dropped.skipped_q, "belong", "queries skipped for empty text"), display)
    if dropped.unknown_d:
        report.warn(_dropped(dropped.unknown_d, "point", f"document ids that are not in the corpus "
                                                         f"(e.g. {_quote(dropped.ex_d)})"), display)
    if dropped.skipped_d:
        report.warn(_dropped(dropped.skipped_d, "point", "documents skipped for empty text"), display)
    if dropped.emptied:
        report.warn(f"{count(dropped.emptied, 'query', 'queries')} with no label left dropped from "
                    f"split '{split}'", display)


def attach_qrels(split: str, display: str, raw: Qrels, docs: Mapping[str, Document],
                 skipped_docs: Skipped, queries: Mapping[str, str], skipped_queries: Skipped,
                 report: LoadReport) -> Qrels:
    """Keep the labels whose query and document were loaded; warn about the rest, counted."""
    kept, dropped = _keep(raw, docs, skipped_docs, queries, skipped_queries)
    _warn_dropped(dropped, split, display, not queries and not skipped_queries, report)
    if not raw:
        report.warn(f"split '{split}' has no labels; left out", display)
    elif not kept:
        report.warn(f"split '{split}' has no usable label; left out", display)
    return kept
