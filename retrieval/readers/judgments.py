"""Judgments as a spreadsheet's CSV/TSV, each judge's grades kept: read (every row checked first,
nothing stored unless the whole file maps) and written.

Layouts read, told apart by the header row:

* **long** — one judgment a row: a query column (``query_id``, ``qid``, ``query-id``: an id of the
  data set; or ``query``, ``query_text``: a query's text, matched exactly), a document column
  (``doc_id``, ``docid``, ``document``, ``corpus-id``), a grade column (``grade``, ``rating``,
  ``relevance``, ``label``, ``score``) and, optionally, a judge column (``judge``, ``rater``,
  ``user``, ``annotator``, ``judge_name``). RankScope writes this layout: ``query_id, query,
  doc_id, grade, judge``. Quepid's case ratings export (``query, docid, rating``) is one.
* **wide** — Quepid's book judgements export: ``query, docid`` and then one column per judge, a
  judge's grade in their column (empty: not graded by them).

A row the importer cannot map — an unknown query or document, a grade outside 0, 1, 2, an empty
judge — is refused with ``file:line``. ``write`` writes through ``retrieval.tabular``: every text
cell quoted (a CR, LF or tab in a query's text stays in its cell) and a cell a spreadsheet would
run as a formula guarded with ``'``, losslessly. A file with RankScope's header (``COLUMNS``, in
that order) is read back through ``tabular.unguard``, so ``-5`` and ``'-5``, or judges ``=x`` and
``'=x``, stay apart; another tool's file loses only a ``'`` before ``= + - @`` (Quepid's guard).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import tabular
from ..dataset import Dataset
from ..errors import DataError
from ..judgments import check_judge, parse_grade
from .decode import Text
from .records import column, first_row, table_rows

QUERY_ID = ("query_id", "qid", "query-id", "queryid")
QUERY_TEXT = ("query", "query_text", "query text")
DOC = ("doc_id", "docid", "document", "doc", "corpus-id", "doc id")
GRADE = ("grade", "rating", "relevance", "label", "score", "judgment", "judgement")
JUDGE = ("judge", "rater", "user", "annotator", "judge_name", "judge name", "assessor")
COLUMNS = ("query_id", "query", "doc_id", "grade", "judge")  # what ``write`` writes
FORMULA = tuple("=+-@")


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


def _cells(cells: list[str], plain=_plain):
    """The row's cell at a column index ("" past its end or for no column), its guard undone."""
    return lambda i: plain(cells[i]) if i is not None and i < len(cells) else ""


def read(path: str | Path, dataset: Dataset, judge: str = "imported", display: str | None = None) -> list[Judgment]:
    """Every judgment in the file (module docstring), checked against ``dataset``; ``judge`` names
    the judge of a file without a judge column. A DataError names the file and line of the first
    row that cannot be mapped."""
    display = display or Path(path).name
    delimiter = "\t" if str(display).lower().endswith((".tsv", ".tab")) else ","
    rows = table_rows(Text.of_file(Path(path), display), delimiter)
    lineno, header = first_row(rows, display)
    by_text = {text.strip(): qid for qid, text in dataset.queries.items()}
    q_id, q_text, doc = column(header, QUERY_ID), column(header, QUERY_TEXT), column(header, DOC)
    grade_col, judge_col = column(header, GRADE), column(header, JUDGE)
    if doc is None or (q_id is None and q_text is None):
        raise DataError(f"no query and document columns in the header ({', '.join(c.strip() for c in header)}); "
                        "expected query_id or query, doc_id or docid, grade or rating, and optionally judge",
                        display, lineno)
    if grade_col is None:  # Quepid's book export: a column per judge after query and docid
        judges = {i: name.strip() for i, name in enumerate(header) if i not in (q_id, q_text, doc) and name.strip()}
        if not judges:
            raise DataError("no grade column (grade, rating, …) and no judge columns", display, lineno)
    else:
        judges = {}
    default_judge = check_judge(judge)
    plain = _own if [c.strip() for c in header] == list(COLUMNS) else _plain  # RankScope's own export
    out: list[Judgment] = []
    for lineno, cells in rows:
        cell = _cells(cells, plain)

        qid = cell(q_id) if q_id is not None else ""
        if q_id is None:
            text = cell(q_text)
            qid = by_text.get(text, "")
            if not qid:
                raise DataError(f"query {text[:80]!r} is not a query of {dataset.name} (add it first)", display,
                                lineno)
        elif qid not in dataset.queries:
            raise DataError(f"query id {qid[:80]!r} is not in {dataset.name}", display, lineno)
        doc_id = cell(doc)
        if doc_id not in dataset.docs:
            raise DataError(f"document {doc_id[:80]!r} is not in {dataset.name}", display, lineno)
        graded = {judges[i]: cell(i) for i in judges if cell(i)} if judges else \
            {cell(judge_col) if judge_col is not None else default_judge: cell(grade_col)}
        for who, value in graded.items():
            try:
                out.append(Judgment(qid, dataset.queries[qid], doc_id, parse_grade(value), check_judge(who), lineno))
            except ValueError as err:
                raise DataError(str(err), display, lineno) from None
    if not out:
        raise DataError("no judgments in the file", display)
    return out


FORMATS = tabular.FORMATS  # what ``write`` writes


def write(rows: list[dict], path: str | Path, fmt: str = "csv") -> Path:
    """The store's judgment rows (``Store.judgments``) as the long layout, one judge's grade a row,
    comma- (``csv``) or tab-separated (``tsv``), through ``tabular.write`` (quoted, guarded)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown judgments format {fmt!r}; choose from {', '.join(FORMATS)}")
    ordered = sorted(rows, key=lambda r: (r["query_id"], r["doc_id"], r["judge"]))
    return tabular.write(path, COLUMNS, ([r["query_id"], r.get("query_text") or "", r["doc_id"], int(r["grade"]),
                                          r["judge"]] for r in ordered), fmt)
