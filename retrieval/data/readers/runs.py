"""Run files of other systems: an analyst's own ranked lists, read beside BM25, dense and hybrid.

Two formats, told apart by the content (a file whose first character is ``{`` or ``[`` is JSON, unless
its first line is a TREC line: a query id may start with either):

- TREC, trec_eval's run format: ``qid Q0 docid rank score tag``, exactly 6 whitespace-separated
  columns a line. The run is named after the tag of the first line (a warning says so when the
  lines carry several tags).
- ranx's JSON: one object ``{qid: {docid: score}}`` for the whole file, named after the file.

Each query's list is ordered as trec_eval orders it (``retrieval.data.ranking``): by score, highest
first, equal scores by document id, descending; the file's rank column is read and checked but, as
in trec_eval, orders nothing. So the list the app shows, and its top k, are what trec_eval
evaluates on the same file; a warning counts the ties. A document listed twice for one query keeps
its highest score (a warning counts the repeats and gives an example).

Bad input gets the care data files get: a wrong column count, a missing, non-numeric or non-finite
score or rank is a :class:`DataError` reading ``file:line: problem``; JSON that is not an object
of objects of numbers is one naming the query id; so is an empty file, and an id holding
whitespace (which TREC run and qrels files cannot hold).

Matched to a data set (``match_dataset``, or ``read_run(path, dataset)``), query ids not among its
queries and document ids not in its corpus are counted, warned about with examples and left out
(they never reach the metrics). When more than half of the run's query ids, or of its (query,
document) rows, are unknown, the run is refused: it looks like it belongs to another data set.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval import numbers
from retrieval.data import ranking
from retrieval.data.dataset import Dataset
from retrieval.data.readers.decode import PathLike, Text, count, verb_for
from retrieval.data.readers.records import EXAMPLES, require_id
from retrieval.data.run import Run
from retrieval.errors import DataError, LoadReport
from retrieval.safe_names import check_name, shown

TREC_COLUMNS = "qid Q0 docid rank score tag"
UNKNOWN_LIMIT = 0.5  # more than this share of unknown query ids or rows: another data set's run

Rows = dict[str, dict[str, tuple[float, float]]]  # query id -> doc id -> (score, rank in the file)


@dataclass
class ImportedRun:
    """A run read from a file: its lists best first, and what reading it found."""

    name: str
    run: Run
    source: str  # the file as given
    content_hash: str  # sha256 of the normalized run (``run_hash``)
    report: LoadReport = field(default_factory=LoadReport)
    format: str = "trec"  # or "json"
    rows: int = 0  # (query, document) rows read, a repeated document counted once
    duplicates: int = 0  # repeated (query, document) rows merged into one
    ties: int = 0  # rows whose score equals that of the row ranked just above
    unknown_queries: int = 0  # distinct query ids not among the data set's queries (left out)
    unknown_docs: int = 0  # rows of known queries whose document is not in the corpus (left out)
    dataset: str | None = None  # content hash of the data set its ids were matched to


@dataclass
class _Parsed:
    """What a format's parser gives: the rows, their duplicates and the default name."""

    rows: Rows
    duplicates: int = 0
    example: str = ""  # where the first duplicate stands, for the warning
    name: str = ""


def read_run(path: PathLike, dataset: Dataset | None = None, name: str | None = None,
             display: str | None = None) -> ImportedRun:
    """A TREC or ranx-JSON run file as an :class:`ImportedRun` named ``name`` (default: the TREC
    tag, or the JSON file's stem); with ``dataset``, matched to it (``match_dataset``). Messages
    name the file ``display`` (default: the path as given)."""
    display = display or str(path)
    text = Text.of_file(Path(path), display)
    report = LoadReport()
    kind = "json" if text.head() in ("{", "[") and not _trec_first_line(text) else "trec"
    parsed = _parse_json(text.read(), display, Path(path)) if kind == "json" else _parse_trec(text, report)
    if not any(parsed.rows.values()):
        raise DataError("the run holds no ranked document", display)
    if parsed.duplicates:
        report.warn(f"{count(parsed.duplicates, 'document')} {verb_for(parsed.duplicates, 'is')} listed more "
                    f"than once for a query (e.g. {parsed.example}); the highest score was kept", display)
    run, ties = _ranked(parsed.rows)
    if ties:
        report.warn(f"{count(ties, 'document')} {verb_for(ties, 'share')} the score of the one ranked just "
                    f"above; ties are broken by document id, descending, as trec_eval breaks them", display)
    imported = ImportedRun(run_name(name, parsed.name), run, display, run_hash(run), report, kind,
                           rows=sum(len(r) for r in parsed.rows.values()), duplicates=parsed.duplicates, ties=ties)
    return match_dataset(imported, dataset) if dataset is not None else imported


def run_name(given: str | None, default: str) -> str:
    """The name a run is listed under: ``given``, else ``default`` (the TREC tag, or the file's
    stem with its whitespace turned into "_"): one word (it is a TREC tag) of at most
    ``safe_names.NAME_LIMIT`` characters, no control or invisible character (``safe_names.check_name``)."""
    if given is None:
        return check_name(re.sub(r"\s+", "_", default.strip()) or "run", "run name (by default its TREC tag "
                          "or file name)", spaces=False)
    return check_name(given, "run's name", spaces=False)


def run_hash(run: Run) -> str:
    """sha256 of the run's lists by query id, each best first: the same lists, the same hash."""
    normal = [[q, [[d, float(s)] for d, s in run[q]]] for q in sorted(run)]
    return hashlib.sha256(json.dumps(normal, ensure_ascii=False).encode("utf-8")).hexdigest()


# ---- the formats ----------------------------------------------------------------------------
def _number(value: str, what: str, display: str, lineno: int) -> float:
    """A score or rank by the one number grammar (``retrieval.numbers.number``), else a DataError."""
    try:
        return numbers.number(value, what)
    except ValueError as err:
        raise DataError(str(err), display, lineno) from None


def _parse_trec(text: Text, report: LoadReport) -> _Parsed:
    parsed = _Parsed({})
    tags: dict[str, None] = {}  # each distinct tag once, in the order first met (a dict: a set that keeps order)
    display = text.display
    for lineno, line in text.lines():
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 6:
            hint = " (is the score missing?)" if len(parts) == 5 else ""
            raise DataError(f"expected 6 columns ({TREC_COLUMNS}), found {len(parts)}{hint}", display, lineno)
        qid, _, doc, rank, score, tag = parts
        qid, doc = require_id(qid, "query id", display, lineno), require_id(doc, "document id", display, lineno)
        tag = require_id(tag, "tag", display, lineno)
        tags.setdefault(tag)
        entry = (_number(score, "score", display, lineno), _number(rank, "rank", display, lineno))
        _add(parsed, qid, doc, entry, f"'{doc}' for query '{qid}' on line {lineno}")
    if len(tags) > 1:
        shown = ", ".join(f"'{t}'" for t in itertools.islice(tags, EXAMPLES))
        report.warn(f"the lines carry {len(tags):,} different tags ({shown}{', ...' if len(tags) > EXAMPLES else ''}); "
                    f"they are read as one run, named after the first unless a name is given", display)
    parsed.name = next(iter(tags))
    return parsed


class _Pairs(list[tuple[str, Any]]):
    """A JSON object as its (key, value) pairs, so that repeated keys are seen."""


class _Refused(str):
    """A JSON number the one number grammar refuses (``retrieval.numbers``), kept as its text until
    its place (the query and document it scores) can be named."""


def _json_number(text: str) -> float | _Refused:
    """A JSON number (integer or not) as a score: the grammar's float, or the text it refuses."""
    return float(text) if numbers.is_number(text) else _Refused(text)


def _kind(value: object) -> str:
    if isinstance(value, _Pairs):
        return "an object"
    if isinstance(value, _Refused):
        return "a number"
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")


def _trec_first_line(text: Text) -> bool:
    """Whether the first non-blank line is a TREC run line (6 fields, an integer rank, a number
    score): a query id may start with ``{`` or ``[`` too, and such a file is still TREC."""
    for _, line in text.lines():
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 6:
            return False
        return numbers.is_integer(fields[3]) and numbers.is_number(fields[4])
    return False


def _parse_json(text: str, display: str, path: Path) -> _Parsed:
    try:
        obj = json.loads(text, object_pairs_hook=_Pairs, parse_int=_json_number, parse_float=_json_number)
    except json.JSONDecodeError as e:
        raise DataError(f"invalid JSON: {e.msg} (column {e.colno})", display, e.lineno) from None
    except RecursionError:
        raise DataError("invalid JSON: nested too deeply", display) from None
    if not isinstance(obj, _Pairs):
        raise DataError(f"expected one JSON object {{query id: {{document id: score}}}}, found {_kind(obj)}", display)
    parsed = _Parsed({}, name=path.stem)
    seen: set[str] = set()
    for qid, docs in obj:
        qid = _json_id(qid, "query id", display)
        if qid in seen:
            raise DataError(f"query '{qid}' is listed twice in the JSON object; a run lists each query once", display)
        seen.add(qid)
        if not isinstance(docs, _Pairs):
            raise DataError(f"query '{qid}': expected an object {{document id: score}}, found {_kind(docs)}", display)
        for doc, score in docs:
            doc = _json_id(doc, f"query {shown(qid)}: document id", display)
            _add(parsed, qid, doc, (_json_score(score, f"query '{qid}': the score of document '{doc}'", display), 0.0),
                 f"'{doc}' for query '{qid}'")
    return parsed


def _json_score(score: object, what: str, display: str) -> float:
    """A JSON score as a finite float: a DataError for anything else (text, a boolean, null,
    Infinity or NaN, a number the one number grammar refuses: past a double's range, or of more than
    ``numbers.NUMBER_CHARS`` characters)."""
    if isinstance(score, _Refused):
        try:
            numbers.number(str(score), what)
        except ValueError as err:
            raise DataError(str(err), display) from None
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        raise DataError(f"{what} is {_kind(score)}, not a number", display)
    try:
        value = float(score)
    except OverflowError:
        raise DataError(f"{what} is a {len(str(abs(score))):,}-digit integer, too large for a score", display) from None
    if not math.isfinite(value):
        raise DataError(f"{what} is {score}, not a finite number", display)
    return value


def _json_id(ident: str, what: str, display: str) -> str:
    if not ident.strip():
        raise DataError(f"{what} is empty", display)
    return require_id(ident, what, display)


def _add(parsed: _Parsed, qid: str, doc: str, entry: tuple[float, float], where: str) -> None:
    """One row into ``parsed``; a repeated document keeps its highest score (the first on a tie)."""
    row = parsed.rows.setdefault(qid, {})
    if doc in row:
        parsed.duplicates += 1
        parsed.example = parsed.example or where
        if entry[0] <= row[doc][0]:
            return
    row[doc] = entry


def _ranked(rows: Rows) -> tuple[Run, int]:
    """Each query's list in trec_eval's order (``ranking.sorted_hits``: score descending, then document
    id descending; the rank column orders nothing); and the ties."""
    run: Run = {}
    ties = 0
    for qid, docs in rows.items():
        hits = ranking.sorted_hits((doc, score) for doc, (score, _) in docs.items())
        run[qid] = hits
        ties += sum(1 for a, b in zip(hits, hits[1:]) if a[1] == b[1])
    return run, ties


# ---- matching a data set --------------------------------------------------------------------
def match_dataset(imported: ImportedRun, dataset: Dataset) -> ImportedRun:
    """``imported`` keeping only the query ids among ``dataset``'s queries and the documents in its
    corpus, the rest counted and warned about; a DataError when most ids are unknown."""
    display = imported.source
    if not dataset.queries:
        raise DataError(f"data set '{dataset.name}' has no queries for the run's lists to belong to", display)
    kept: Run = {}
    unknown_q: list[str] = []
    unknown_d: list[str] = []
    left_q = left_d = total = 0
    for qid, hits in imported.run.items():
        total += len(hits)
        if qid not in dataset.queries:
            unknown_q.append(qid)
            left_q += len(hits)
            continue
        known = [(d, s) for d, s in hits if d in dataset.docs]
        if len(known) < len(hits):
            left_d += len(hits) - len(known)
            unknown_d += [d for d, _ in hits if d not in dataset.docs][:EXAMPLES - len(unknown_d)]
        if known:
            kept[qid] = known
    share_q = len(unknown_q) / max(1, len(imported.run))
    share_rows = (left_q + left_d) / max(1, total)
    if share_q > UNKNOWN_LIMIT or share_rows > UNKNOWN_LIMIT:
        raise DataError(f"this run looks like it belongs to another data set: {share_q:.0%} of its query ids and "
                        f"{share_rows:.0%} of its (query, document) rows are unknown to data set "
                        f"'{dataset.name}'", display)
    report = LoadReport(list(imported.report.warnings))
    if unknown_q:
        report.warn(f"{count(len(unknown_q), 'query id')} {verb_for(len(unknown_q), 'is')} not among the data "
                    f"set's queries (e.g. {_quote(unknown_q)}); their {count(left_q, 'row')} left out", display)
    if left_d:
        report.warn(f"{count(left_d, 'row')} {verb_for(left_d, 'name')} a document that is not in the corpus "
                    f"(e.g. {_quote(unknown_d)}); left out", display)
    return dataclasses.replace(imported, run=kept, content_hash=run_hash(kept), report=report,
                               unknown_queries=len(unknown_q), unknown_docs=left_d,
                               dataset=dataset.content_hash)


def _quote(ids: list[str]) -> str:
    return ", ".join(f"'{i}'" for i in ids[:EXAMPLES])
