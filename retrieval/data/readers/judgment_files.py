"""Judgments as a spreadsheet's CSV/TSV, each judge's grades kept: read (every row checked first,
nothing stored unless the whole file maps) and written.

Layouts read, told apart by the header row:

* **long** — one judgment a row: a query column (``query_id``, ``qid``, ``query-id``: an id of the
  data set; or ``query``, ``query_text``: a query's text, matched exactly, a text that several of
  the data set's queries share refused, naming them), a document column
  (``doc_id``, ``docid``, ``document``, ``corpus-id``), a grade column (``grade``, ``rating``,
  ``relevance``, ``label``, ``score``) and, optionally, a judge column (``judge``, ``rater``,
  ``user``, ``annotator``, ``judge_name``). RankScope writes this layout: ``query_id, query,
  doc_id, grade, judge``. Quepid's case ratings export (``query, docid, rating``) is one.
* **wide** — Quepid's book judgements export: ``query, docid`` and then one column per judge, a
  judge's grade in their column (empty: not graded by them). A column before them, or one named as
  a column of another kind (``NOT_JUDGES``: a title, a rank, a note), is refused as unknown, never
  read as a judge; so is a value in a column without a name.

A header naming one column twice is refused, naming both. A row the importer cannot map — an
unknown query or document, a grade outside 0, 1, 2, an empty judge, a judge's name that looks like
another's without being it (``judgments.check_judge``) — is refused with ``file:line``; so is a row
grading a (query, document) pair its judge graded differently on an earlier line (both lines
named). A row that repeats an earlier one exactly is read once and counted (``Judgments.duplicates``).
Ids are matched as written, else in NFC (``safe_names.normal_id``), as every reader keeps them.

``write`` writes through ``retrieval.files.tabular``: every text
cell quoted (a CR, LF or tab in a query's text stays in its cell) and a cell a spreadsheet would
run as a formula guarded with ``'``, losslessly. A file with RankScope's header (``COLUMNS``, in
that order) is read back through ``tabular.unguard``, so ``-5`` and ``'-5``, or judges ``=x`` and
``'=x``, stay apart; another tool's file loses only a ``'`` before ``= + - @`` (Quepid's guard).
"""
from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.data.dataset import Dataset
from retrieval.data.readers.decode import Text
from retrieval.data.readers.records import EXAMPLES, column, first_row, table_rows
from retrieval.errors import DataError
from retrieval.files import tabular
from retrieval.judging.judgments import check_judge, parse_grade
from retrieval.safe_names import NameIndex, normal_id, shown

QUERY_ID = ("query_id", "qid", "query-id", "queryid")
QUERY_TEXT = ("query", "query_text", "query text")
DOC = ("doc_id", "docid", "document", "doc", "corpus-id", "doc id")
GRADE = ("grade", "rating", "relevance", "label", "score", "judgment", "judgement")
JUDGE = ("judge", "rater", "user", "annotator", "judge_name", "judge name", "assessor")
COLUMNS = ("query_id", "query", "doc_id", "grade", "judge")  # what ``write`` writes
FORMULA = tuple("=+-@")
# names of columns that are not a judge's grades (besides the ones read): never a judge in the book layout
NOT_JUDGES = {*QUERY_ID, *QUERY_TEXT, *DOC, *GRADE, *JUDGE, "id", "_id", "title", "text", "body", "contents", "url",
              "rank", "position", "notes", "note", "comment", "comments", "explanation", "iteration", "q0", "tag",
              "run", "system", "information_need", "information need"}
ACCEPTED = ("the columns read are query_id or query, doc_id or docid, grade or rating and optionally judge (one "
            "judgment a row), or query and docid followed by one column per judge (Quepid's book export)")


@dataclass
class Judgment:
    query_id: str
    query_text: str
    doc_id: str
    grade: int
    judge: str
    line: int


def _plain(cell: str) -> str:
    cell = cell.strip()
    return cell[1:] if cell.startswith("'") and cell[1:2] and cell[1:2] in FORMULA else cell


def _own(cell: str) -> str:
    return tabular.unguard(cell).strip()


def _cells(cells: list[str], plain: Callable[[str], str] = _plain) -> Callable[[int | None], str]:
    """The row's cell at a column index ("" past its end or for no column), its guard undone."""
    return lambda i: plain(cells[i]) if i is not None and i < len(cells) else ""


class Judgments(list[Judgment]):
    """The judgments a file holds (a list of :class:`Judgment`), and how many rows repeated one
    exactly (``duplicates``: the same judge, query, document and grade; read once)."""

    duplicates: int = 0


def _header(header: list[str], display: str, lineno: int) -> None:
    """A header naming one column twice (its case and blanks aside) is refused, naming it."""
    seen: dict[str, int] = {}
    for i, name in enumerate(header, 1):
        key = unicodedata.normalize("NFKC", name.strip()).casefold()
        if not key:
            continue
        if key in seen:
            raise DataError(f"the header names one column twice: {shown(header[seen[key] - 1].strip())} (column "
                            f"{seen[key]}) and {shown(name.strip())} (column {i}); a column is read once, so rename "
                            "or remove one", display, lineno)
        seen[key] = i


def _book_judges(header: list[str], read_cols: tuple[int, ...], existing: NameIndex, display: str,
                 lineno: int) -> dict[int, str]:
    """Quepid's book layout: the judge of each column after the query and document columns. A
    column that is not a judge's — before them, or named as a column of another kind (a title, a
    rank, a note) — is refused, naming it and the columns read; so is a judge's name that
    ``judgments.check_judge`` refuses, or one that looks like another judge's (in the file, or
    ``existing``, which each judge read joins) without being it."""
    after = max(read_cols)
    judges: dict[int, str] = {}
    for i, raw in enumerate(header):
        name = raw.strip()
        if i in read_cols or not name:
            continue
        if i < after or name.lower() in NOT_JUDGES:
            raise DataError(f"unknown column {shown(name)} (column {i + 1}): {ACCEPTED}", display, lineno)
        try:
            judges[i] = check_judge(name, existing)
            existing.add(judges[i])
        except ValueError as err:
            raise DataError(f"column {i + 1}: {err}", display, lineno) from None
    if not judges:
        raise DataError(f"no grade column (grade, rating, …) and no judge columns: {ACCEPTED}", display, lineno)
    return judges


def _refuse_unnamed(cells: list[str], judges: dict[int, str], read_cols: tuple[int | None, ...], display: str,
                    lineno: int) -> None:
    """In the book layout, a grade in a column the header gives no judge would be lost: refused."""
    unnamed = next((i for i, c in enumerate(cells) if c.strip() and i not in judges and i not in read_cols), None)
    if unnamed is not None:
        raise DataError(f"a value in column {unnamed + 1}, which the header names no judge of: {ACCEPTED}",
                        display, lineno)


def _texts(dataset: Dataset) -> dict[str, list[str]]:
    """Each query text of ``dataset`` (stripped) -> the ids of the queries that have it, in order."""
    by_text: dict[str, list[str]] = {}
    for qid, text in dataset.queries.items():
        by_text.setdefault(text.strip(), []).append(qid)
    return by_text


def _query_id(cell: Callable[[int | None], str], q_id: int | None, q_text: int | None, dataset: Dataset,
              by_text: dict[str, list[str]], display: str, lineno: int) -> str:
    """The row's query id in ``dataset`` (as written, else in NFC), from its id column or else its
    text's. A text that several queries of the data set share names none of them: refused, naming
    them (a grade given to one of them by chance would be a wrong label)."""
    if q_id is None:
        text = cell(q_text)
        qids = by_text.get(text)
        if not qids:
            raise DataError(f"query {shown(text)} is not a query of {dataset.name} (add it first)", display,
                            lineno)
        if len(qids) > 1:
            more = f", … ({len(qids):,} in all)" if len(qids) > EXAMPLES else ""
            raise DataError(f"query {shown(text)} is the text of {len(qids):,} queries of {dataset.name} "
                            f"({', '.join(shown(q) for q in qids[:EXAMPLES])}{more}); a grade given by the text cannot "
                            "tell which it is for: give a query_id column", display, lineno)
        qid = qids[0]
    else:
        qid = cell(q_id)
        if qid not in dataset.queries and normal_id(qid) not in dataset.queries:
            raise DataError(f"query id {shown(qid)} is not in {dataset.name}", display, lineno)
    return qid if qid in dataset.queries else normal_id(qid)


def _doc_id(doc_id: str, dataset: Dataset, display: str, lineno: int) -> str:
    """The row's document id in ``dataset``: as written, else in NFC."""
    if doc_id not in dataset.docs:
        if normal_id(doc_id) not in dataset.docs:
            raise DataError(f"document {shown(doc_id)} is not in {dataset.name}", display, lineno)
        doc_id = normal_id(doc_id)
    return doc_id


def read(path: str | Path, dataset: Dataset, judge: str = "imported", display: str | None = None,
         existing: Iterable[str] = ()) -> Judgments:
    """Every judgment in the file (module docstring), checked against ``dataset``; ``judge`` names
    the judge of a file without a judge column. A DataError names the file and line of the first
    row that cannot be mapped; of a header naming a column twice or a column it cannot read; of a
    judge's name that looks like one of ``existing`` (the corpus's judges) or another of the file
    without being it (``safe_names.check_new_name``); of a row that grades a pair a second time,
    differently (both lines named). A row repeating another exactly is read once, and counted."""
    display = display or Path(path).name
    known = NameIndex(existing)  # the corpus's judges, then each of the file's: a look-up per new name
    delimiter = "\t" if str(display).lower().endswith((".tsv", ".tab")) else ","
    rows = table_rows(Text.of_file(Path(path), display), delimiter)
    lineno, header = first_row(rows, display)
    _header(header, display, lineno)
    q_id, q_text, doc = column(header, QUERY_ID), column(header, QUERY_TEXT), column(header, DOC)
    by_text = _texts(dataset) if q_id is None else {}  # read by text only where no query id is given
    grade_col, judge_col = column(header, GRADE), column(header, JUDGE)
    if doc is None or (q_id is None and q_text is None):
        raise DataError(f"no query and document columns in the header ({', '.join(c.strip() for c in header)}); "
                        f"{ACCEPTED}", display, lineno)
    if grade_col is None:  # Quepid's book export: a column per judge after query and docid
        read_cols = tuple(c for c in (q_id, q_text, doc) if c is not None)
        judges = _book_judges(header, read_cols, known, display, lineno)
    else:
        judges = {}
    default_judge = check_judge(judge)
    named: dict[str, str] = {j: j for j in judges.values()}  # a judge's name as read -> as kept (checked once)
    plain = _own if [c.strip() for c in header] == list(COLUMNS) else _plain  # RankScope's own export
    out = Judgments()
    first: dict[tuple[str, str, str], tuple[int, int]] = {}  # (query, document, judge) -> (grade, line)
    for lineno, cells in rows:
        cell = _cells(cells, plain)
        if judges:
            _refuse_unnamed(cells, judges, (q_id, q_text, doc), display, lineno)
        qid = _query_id(cell, q_id, q_text, dataset, by_text, display, lineno)
        doc_id = _doc_id(cell(doc), dataset, display, lineno)
        graded = {judges[i]: cell(i) for i in judges if cell(i)} if judges else \
            {cell(judge_col) if judge_col is not None else default_judge: cell(grade_col)}
        for who, value in graded.items():
            try:
                grade = parse_grade(value)
                if who not in named:
                    named[who] = check_judge(who, known)
                    known.add(named[who])
            except ValueError as err:
                raise DataError(str(err), display, lineno) from None
            who = named[who]
            key = (qid, doc_id, who)
            if key in first:
                was, line = first[key]
                if was != grade:
                    raise DataError(f"judge {shown(who)} grades query {shown(qid)} and document {shown(doc_id)} "
                                    f"{was} on line {line} and {grade} on line {lineno}; keep one row", display,
                                    lineno)
                out.duplicates += 1
                continue
            first[key] = (grade, lineno)
            out.append(Judgment(qid, dataset.queries[qid], doc_id, grade, who, lineno))
    if not out:
        raise DataError("no judgments in the file", display)
    return out


FORMATS = tabular.FORMATS  # what ``write`` writes


def write(rows: list[dict[str, Any]], path: str | Path, fmt: str = "csv") -> Path:
    """The store's judgment rows (``Store.judgments``) as the long layout, one judge's grade a row,
    comma- (``csv``) or tab-separated (``tsv``), through ``tabular.write`` (quoted, guarded)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown judgments format {fmt!r}; choose from {', '.join(FORMATS)}")
    ordered = sorted(rows, key=lambda r: (r["query_id"], r["doc_id"], r["judge"]))
    return tabular.write(path, COLUMNS, ([r["query_id"], r.get("query_text") or "", r["doc_id"], int(r["grade"]),
                                          r["judge"]] for r in ordered), fmt)
