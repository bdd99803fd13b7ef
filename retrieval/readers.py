"""Reading documents, queries and relevance labels from the formats users have.

``load_dataset(path)`` detects the format of a folder, zip or single file;
``load_files(corpus, queries, qrels)`` assembles separately uploaded files;
``read_qrels(path)`` reads BEIR (3-column TSV) or TREC (4-column) relevance labels.

Input that cannot be loaded raises :class:`DataError` reading ``file:line: problem``.
Input that can be loaded with losses (empty texts, labels pointing nowhere) loads, and each
loss is recorded in ``dataset.report``.
"""
from __future__ import annotations

import codecs
import csv
import io
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path, PurePosixPath

from .dataset import Dataset, Document, Qrels
from .errors import DataError, LoadReport
from .safezip import DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRIES, SafeZip

__all__ = ["load_dataset", "load_files", "read_qrels", "detect_role", "DEFAULT_MAX_BYTES"]

PathLike = str | os.PathLike

DOC_ID_COLUMNS = ("_id", "id", "doc_id", "docid")
DOC_TEXT_COLUMNS = ("text", "body", "contents")
QUERY_ID_COLUMNS = ("_id", "id", "query_id", "query-id", "qid", "queryid")
QUERY_TEXT_COLUMNS = ("text", "query")
QRELS_QUERY_HEADERS = {"query-id", "query_id", "queryid", "qid", "query", "topic"}
QRELS_SCORE_HEADERS = {"score", "relevance", "rel", "label", "grade", "judgment", "judgement"}
CORPUS_NAMES = ("corpus.jsonl", "corpus.csv", "corpus.tsv")
QUERY_NAMES = ("queries.jsonl", "queries.csv", "queries.tsv")
QRELS_SUFFIXES = (".tsv", ".txt", ".trec", ".qrels")
DOC_SUFFIXES = (".jsonl", ".ndjson", ".csv", ".tsv")
SPLIT_ORDER = {"test": 0, "dev": 1, "validation": 2, "train": 3}
EXAMPLES = 3  # ids quoted in a warning that counts many
INDIVIDUAL = 5  # up to this many skips are warned one by one (with their line)
EXPECTED = ("corpus.jsonl (BEIR: with optional queries.jsonl and qrels/<split>.tsv, at the "
            "top or inside one folder), or .txt files (one document per file)")

_Skipped = dict[str, int]  # id -> line of a record skipped for empty text


# --------------------------------------------------------------------------------------------
# bytes -> text


def _decode(data: bytes, display: str) -> str:
    """Strict UTF-8 (a BOM is dropped); an empty or blank file is an error."""
    start = 3 if data.startswith(codecs.BOM_UTF8) else 0
    try:
        text = data[start:].decode("utf-8") if start else data.decode("utf-8")
    except UnicodeDecodeError as e:
        offset = e.start + start
        line = data.count(b"\n", 0, offset) + 1
        raise DataError(f"not valid UTF-8: byte 0x{data[offset]:02x} at byte offset {offset}; "
                        f"save the file as UTF-8", display, line) from None
    if not text.strip():
        raise DataError("file is empty", display)
    return text


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) pairs, splitting on LF only and dropping a CR before it."""
    for lineno, line in enumerate(text.split("\n"), 1):
        if line.endswith("\r"):
            line = line[:-1]
        yield lineno, line


def _read_file(path: Path, display: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise DataError("no such file", display) from None
    except IsADirectoryError:
        raise DataError("is a folder, not a file", display) from None
    except OSError as e:
        raise DataError(f"cannot read the file ({e.strerror or e})", display) from None


def _suffix(name: str) -> str:
    return PurePosixPath(name.replace("\\", "/")).suffix.lower()


def _count(n: int, noun: str, plural: str | None = None) -> str:
    """"1 label", "2 labels", "1,234 queries"."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def _verb(n: int, verb: str = "point") -> str:
    if verb == "is":
        return "is" if n == 1 else "are"
    return f"{verb}s" if n == 1 else verb


def _quote(ids: Iterable[str]) -> str:
    return ", ".join(repr(i) for i in ids)


# --------------------------------------------------------------------------------------------
# records: JSONL objects and CSV/TSV rows, each with the line it starts on


def _jsonl_records(text: str, display: str) -> Iterator[tuple[int, dict]]:
    loads = json.loads
    for lineno, line in _lines(text):
        if not line or line.isspace():
            continue
        try:
            obj = loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"invalid JSON: {e.msg} (column {e.colno})", display, lineno) from None
        except RecursionError:
            raise DataError("invalid JSON: nested too deeply", display, lineno) from None
        if not isinstance(obj, dict):
            kind = {list: "an array", str: "a string"}.get(type(obj), "a single value")
            raise DataError(f"expected a JSON object per line, found {kind}", display, lineno)
        yield lineno, obj


_FIELD_LIMIT = 1 << 30


def _table_rows(text: str, display: str, delimiter: str) -> Iterator[tuple[int, list[str]]]:
    if csv.field_size_limit() < _FIELD_LIMIT:  # long documents exceed csv's default 128 KiB
        csv.field_size_limit(_FIELD_LIMIT)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
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


def _first_row(rows: Iterator[tuple[int, list[str]]], display: str) -> tuple[int, list[str]]:
    first = next(rows, None)
    if first is None:
        raise DataError("file is empty (no row with a value)", display)
    return first


def _column(header: list[str], names: tuple[str, ...]) -> int | None:
    cols = [c.strip().lower() for c in header]
    for n in names:
        if n in cols:
            return cols.index(n)
    return None


def _looks_like_qrels_header(cells: list[str]) -> bool:
    cols = [c.strip().lower() for c in cells]
    return (len(cols) in (3, 4) and cols[0] in QRELS_QUERY_HEADERS
            and (cols[-1] in QRELS_SCORE_HEADERS or "corpus-id" in cols))


def _int_like(value: str) -> bool:
    try:
        int(value)
    except ValueError:
        return False
    return True


def _not_qrels(cells: list[str], display: str, lineno: int, what: str) -> None:
    """Relevance labels given where documents or queries belong get an error that says so."""
    if _looks_like_qrels_header(cells) or (len(cells) in (3, 4) and _int_like(cells[-1])):
        raise DataError(f"this looks like relevance labels (qrels), not {what}: its first row "
                        f"is '{', '.join(cells)}'; pass it as qrels", display, lineno)


def _id_value(value: object, field: str, display: str, lineno: int) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise DataError(f"field '{field}' must be a string or an integer", display, lineno)
    ident = str(value).strip()
    if not ident:
        raise DataError(f"field '{field}' is empty", display, lineno)
    return ident


def _text_value(value: object, field: str, display: str, lineno: int) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DataError(f"field '{field}' must be a string", display, lineno)
    return value


# --------------------------------------------------------------------------------------------
# documents


class _DocSink:
    """Collects documents (or queries), rejecting duplicate ids and skipping empty ones."""

    def __init__(self, display: str, what: str = "document"):
        self.display = display
        self.what = what
        self.items: dict = {}
        self.seen: dict[str, tuple[str, int | None]] = {}  # id -> (file, line) first seen
        self.skipped: _Skipped = {}
        self._skips: list[tuple[str, str, int | None]] = []  # (id, file, line)

    def add(self, ident: str, lineno: int | None, value, empty: bool) -> None:
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


def _jsonl_id_text(text: str, display: str, text_columns):
    """(line, record, id, text) for each JSONL record, checking the id and text fields."""
    for lineno, obj in _jsonl_records(text, display):
        key = "_id" if "_id" in obj else "id" if "id" in obj else None
        if key is None:
            raise DataError("missing required field '_id' (or 'id')", display, lineno)
        ident = _id_value(obj[key], key, display, lineno)
        tkey = next((k for k in text_columns if k in obj), None)
        if tkey is None:
            raise DataError("missing required field 'text'", display, lineno)
        yield lineno, obj, ident, _text_value(obj[tkey], tkey, display, lineno)


def _docs_jsonl(text: str, display: str, sink: _DocSink) -> None:
    for lineno, obj, ident, body in _jsonl_id_text(text, display, DOC_TEXT_COLUMNS):
        title = _text_value(obj.get("title"), "title", display, lineno)
        sink.add(ident, lineno, Document(ident, title, body),
                 not body.strip() and not title.strip())


def _docs_table(text: str, display: str, sink: _DocSink, delimiter: str) -> None:
    rows = _table_rows(text, display, delimiter)
    header_line, header = _first_row(rows, display)
    _not_qrels(header, display, header_line, "documents")
    id_col = _column(header, DOC_ID_COLUMNS)
    text_col = _column(header, DOC_TEXT_COLUMNS)
    title_col = _column(header, ("title",))
    for col, names in ((id_col, DOC_ID_COLUMNS), (text_col, DOC_TEXT_COLUMNS)):
        if col is None:
            raise DataError(f"missing required column '{names[0]}' (the header row names one of "
                            f"{', '.join(names)}; it has: {', '.join(header)})",
                            display, header_line)
    width = len(header)
    for lineno, row in rows:
        if len(row) != width:
            raise DataError(f"expected {width} columns as in the header, found {len(row)}",
                            display, lineno)
        ident = _id_value(row[id_col], header[id_col].strip(), display, lineno)
        body = row[text_col]
        title = row[title_col] if title_col is not None else ""
        sink.add(ident, lineno, Document(ident, title, body),
                 not body.strip() and not title.strip())


def _docs_lines(text: str, sink: _DocSink) -> None:
    for lineno, line in _lines(text):
        line = line.strip()
        if line:
            ident = f"line-{lineno}"
            sink.add(ident, lineno, Document(ident, "", line), False)


def _read_docs(data: bytes, filename: str, display: str,
               report: LoadReport) -> tuple[dict[str, Document], _Skipped]:
    """Documents from one file, by its extension (content decides for unknown ones)."""
    text = _decode(data, display)
    kind = _suffix(filename)
    sink = _DocSink(display)
    head = text.lstrip()[:1]
    if kind in (".jsonl", ".ndjson") or (kind == ".json" and head == "{"):
        _docs_jsonl(text, display, sink)
    elif kind == ".json":
        raise DataError("a JSON array or value is not supported; write one JSON object per line "
                        "(JSONL)", display)
    elif kind == ".csv":
        _docs_table(text, display, sink, ",")
    elif kind == ".tsv":
        _docs_table(text, display, sink, "\t")
    elif kind == ".txt":
        _docs_lines(text, sink)
    elif head == "{":
        _docs_jsonl(text, display, sink)
    else:
        raise DataError(f"cannot tell the format of this file ('{kind or 'no extension'}'); "
                        f"expected .jsonl, .csv, .tsv or .txt", display)
    sink.warn_skipped(report)
    return sink.items, sink.skipped


# --------------------------------------------------------------------------------------------
# queries


def _read_queries(data: bytes, filename: str, display: str,
                  report: LoadReport) -> tuple[dict[str, str], _Skipped]:
    text = _decode(data, display)
    kind = _suffix(filename)
    sink = _DocSink(display, "query")
    if kind in (".jsonl", ".ndjson", ".json") or (kind not in (".csv", ".tsv")
                                                   and text.lstrip()[:1] == "{"):
        for lineno, _, ident, qtext in _jsonl_id_text(text, display, QUERY_TEXT_COLUMNS):
            sink.add(ident, lineno, qtext, not qtext.strip())
    elif kind in (".csv", ".tsv"):
        rows = _table_rows(text, display, "," if kind == ".csv" else "\t")
        first_line, first = _first_row(rows, display)
        _not_qrels(first, display, first_line, "queries")
        id_col = _column(first, QUERY_ID_COLUMNS)
        text_col = _column(first, QUERY_TEXT_COLUMNS)
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
            ident = _id_value(row[id_col], "id", display, lineno)
            sink.add(ident, lineno, row[text_col], not row[text_col].strip())
    else:
        raise DataError(f"cannot read queries from a '{kind or 'no extension'}' file; expected "
                        f".jsonl, .csv or .tsv", display)
    sink.warn_skipped(report)
    return sink.items, sink.skipped


# --------------------------------------------------------------------------------------------
# relevance labels


def _label(value: str, display: str, lineno: int) -> int:
    try:
        return int(value)
    except ValueError:
        pass
    try:
        f = float(value)
    except ValueError:
        f = None
    if f is not None and f.is_integer():
        return int(f)
    raise DataError(f"relevance label '{value}' is not an integer", display, lineno)


def _parse_qrels(text: str, display: str, report: LoadReport | None) -> Qrels:
    qrels: Qrels = {}
    ncols = 0
    dups = 0
    first = True
    for lineno, line in _lines(text):
        line = line.strip()
        if not line:
            continue
        parts = line.split("\t") if "\t" in line else line.split()
        if first:
            first = False
            if line[:1] in "{[":
                raise DataError("this looks like JSON, not relevance labels (expected lines "
                                "'query-id<TAB>corpus-id<TAB>score' or TREC 'qid 0 docid rel')",
                                display, lineno)
            if _looks_like_qrels_header(parts):
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
        if n == 3:
            qid, docid, score = parts
        else:
            qid, _, docid, score = parts
        qid, docid = qid.strip(), docid.strip()
        if not qid or not docid:
            raise DataError("empty query id or document id", display, lineno)
        try:
            rel = int(score)
        except ValueError:
            rel = _label(score.strip(), display, lineno)
        row = qrels.get(qid)
        if row is None:
            row = qrels[qid] = {}
        elif docid in row:
            dups += 1
        row[docid] = rel
    if dups and report is not None:
        report.warn(f"{_count(dups, '(query, document) pair')} labelled more than once; "
                    f"the last label was kept", display)
    return qrels


def read_qrels(path: PathLike, report: LoadReport | None = None) -> Qrels:
    """Relevance labels ``{query_id: {doc_id: grade}}`` from a BEIR TSV or a TREC qrels file.

    BEIR: ``query-id<TAB>corpus-id<TAB>score`` with or without the header line. TREC:
    ``qid iter docid rel``, whitespace separated. The layout is detected from the first line.
    """
    display = str(path)
    return _parse_qrels(_decode(_read_file(Path(path), display), display), display, report)


def _split_key(split: str) -> tuple[int, str]:
    return SPLIT_ORDER.get(split, len(SPLIT_ORDER)), split


def _attach_qrels(split: str, display: str, raw: Qrels, docs: Mapping[str, Document],
                  skipped_docs: _Skipped, queries: Mapping[str, str], skipped_queries: _Skipped,
                  report: LoadReport) -> Qrels:
    """Keep the labels whose query and document were loaded; warn about the rest, counted."""
    kept: Qrels = {}
    unknown_q = skipped_q = unknown_d = skipped_d = emptied = 0
    ex_q: list[str] = []
    ex_d: list[str] = []
    doc_keys = docs.keys()
    for qid, row in raw.items():
        if qid not in queries:
            if qid in skipped_queries:
                skipped_q += len(row)
            else:
                unknown_q += len(row)
                if len(ex_q) < EXAMPLES:
                    ex_q.append(qid)
            continue
        if row.keys() <= doc_keys:
            kept[qid] = row
            continue
        new = {}
        for docid, rel in row.items():
            if docid in docs:
                new[docid] = rel
            elif docid in skipped_docs:
                skipped_d += 1
            else:
                unknown_d += 1
                if len(ex_d) < EXAMPLES:
                    ex_d.append(docid)
        if new:
            kept[qid] = new
        else:
            emptied += 1
    if unknown_q:
        if not queries and not skipped_queries:
            report.warn(f"no queries were loaded, so the {_count(unknown_q, 'label')} of split "
                        f"'{split}' cannot be used; dropped", display)
        else:
            report.warn(f"{_count(unknown_q, 'label')} {_verb(unknown_q)} to query ids that are "
                        f"not in the queries (e.g. {_quote(ex_q)}); dropped", display)
    if skipped_q:
        report.warn(f"{_count(skipped_q, 'label')} {_verb(skipped_q, 'belong')} to queries "
                    f"skipped for empty text; dropped", display)
    if unknown_d:
        report.warn(f"{_count(unknown_d, 'label')} {_verb(unknown_d)} to document ids that are "
                    f"not in the corpus (e.g. {_quote(ex_d)}); dropped", display)
    if skipped_d:
        report.warn(f"{_count(skipped_d, 'label')} {_verb(skipped_d)} to documents skipped for "
                    f"empty text; dropped", display)
    if emptied:
        report.warn(f"{_count(emptied, 'query', 'queries')} with no label left dropped from "
                    f"split '{split}'", display)
    if not raw:
        report.warn(f"split '{split}' has no labels; left out", display)
    elif not kept:
        report.warn(f"split '{split}' has no usable label; left out", display)
    return kept


# --------------------------------------------------------------------------------------------
# file trees: a folder on disk or a zip archive read in memory


class _Tree:
    display: str

    def files(self) -> list[str]: ...  # noqa: E704  relative posix paths, ignored ones left out
    def read(self, rel: str) -> bytes: ...  # noqa: E704
    def display_of(self, rel: str) -> str: ...  # noqa: E704
    def is_file(self, rel: str) -> bool: ...  # noqa: E704
    def children(self, rel: str) -> tuple[list[str], list[str]]: ...  # noqa: E704  (dirs, files)


class _FolderTree(_Tree):
    def __init__(self, root: Path, display: str, max_entries: int):
        self.root = root
        self.display = display
        self.max_entries = max_entries

    def display_of(self, rel: str) -> str:
        return os.path.join(self.display, *rel.split("/"))

    def read(self, rel: str) -> bytes:
        return _read_file(self.root.joinpath(*rel.split("/")), self.display_of(rel))

    def is_file(self, rel: str) -> bool:
        return self.root.joinpath(*rel.split("/")).is_file()

    def children(self, rel: str) -> tuple[list[str], list[str]]:
        base = self.root.joinpath(*rel.split("/")) if rel else self.root
        dirs, files = [], []
        try:
            entries = sorted(os.scandir(base), key=lambda e: e.name)
        except OSError:
            return [], []
        for e in entries:
            if e.name.startswith(".") or e.name == "__MACOSX":
                continue
            (dirs if e.is_dir() else files).append(e.name)
        return dirs, files

    def files(self) -> list[str]:
        out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__MACOSX")
            rel = Path(dirpath).relative_to(self.root).as_posix()
            for f in sorted(filenames):
                if not f.startswith("."):
                    out.append(f if rel == "." else f"{rel}/{f}")
            if len(out) > self.max_entries:
                raise DataError(f"folder holds more than {self.max_entries:,} files; point to "
                                f"the data set's own folder", self.display)
        return sorted(out)


class _ZipTree(_Tree):
    def __init__(self, zf: SafeZip):
        self.zf = zf
        self.display = zf.display
        self._names = zf.names()
        self._set = set(self._names)

    def files(self) -> list[str]:
        return list(self._names)

    def read(self, rel: str) -> bytes:
        return self.zf.read(rel)

    def display_of(self, rel: str) -> str:
        return self.zf.display_of(rel)

    def is_file(self, rel: str) -> bool:
        return rel in self._set

    def children(self, rel: str) -> tuple[list[str], list[str]]:
        prefix = f"{rel}/" if rel else ""
        dirs: dict[str, None] = {}
        files = []
        for n in self._names:
            if n.startswith(prefix):
                head, sep, _ = n[len(prefix):].partition("/")
                if sep:
                    dirs[head] = None
                else:
                    files.append(head)
        return list(dirs), files


def _join(base: str, name: str) -> str:
    return f"{base}/{name}" if base else name


def _first_file(tree: _Tree, base: str, names: tuple[str, ...]) -> str | None:
    return next((_join(base, n) for n in names if tree.is_file(_join(base, n))), None)


def _beir_root(tree: _Tree) -> str | None:
    """The folder holding the corpus: the top, or the only sub-folder that has one."""
    if _first_file(tree, "", CORPUS_NAMES):
        return ""
    found = [d for d in tree.children("")[0] if _first_file(tree, d, CORPUS_NAMES)]
    if len(found) > 1:
        raise DataError(f"holds several data sets ({', '.join(found)}); load one of them",
                        tree.display)
    return found[0] if found else None


class _Parts:
    """What the readers found, before labels are matched to documents and queries."""

    def __init__(self, docs: dict[str, Document], skipped_docs: _Skipped, display: str):
        self.docs = docs
        self.skipped_docs = skipped_docs
        self.display = display
        self.queries: dict[str, str] = {}
        self.skipped_queries: _Skipped = {}
        self.qrels: dict[str, tuple[str, Qrels]] = {}  # split -> (file display, labels)

    def assemble(self, name: str, report: LoadReport) -> Dataset:
        if not self.docs:
            raise DataError("no documents left to load (every document has empty text)"
                            if self.skipped_docs else "no documents found", self.display)
        qrels: dict[str, Qrels] = {}
        for split in sorted(self.qrels, key=_split_key):
            display, labels = self.qrels[split]
            kept = _attach_qrels(split, display, labels, self.docs, self.skipped_docs,
                                 self.queries, self.skipped_queries, report)
            if kept:
                qrels[split] = kept
        return Dataset(name=name, docs=self.docs, queries=self.queries, qrels=qrels,
                       report=report)


def _read_tree(tree: _Tree, report: LoadReport) -> _Parts:
    root = _beir_root(tree)
    if root is not None:
        corpus = _first_file(tree, root, CORPUS_NAMES)
        cdisp = tree.display_of(corpus)
        parts = _Parts(*_read_docs(tree.read(corpus), corpus, cdisp, report), cdisp)
        qfile = _first_file(tree, root, QUERY_NAMES)
        if qfile:
            parts.queries, parts.skipped_queries = _read_queries(
                tree.read(qfile), qfile, tree.display_of(qfile), report)
        qdir = _join(root, "qrels")
        for f in tree.children(qdir)[1]:
            if _suffix(f) in QRELS_SUFFIXES:
                rel = _join(qdir, f)
                disp = tree.display_of(rel)
                split = PurePosixPath(f).stem
                if split in parts.qrels:
                    raise DataError(f"two qrels files for split '{split}'", disp)
                parts.qrels[split] = (disp, _parse_qrels(_decode(tree.read(rel), disp), disp,
                                                         report))
        return parts

    files = tree.files()
    txt = [f for f in files if _suffix(f) == ".txt"]
    if txt:
        other = [f for f in files if _suffix(f) != ".txt"]
        if other:
            report.warn(f"ignored {_count(len(other), 'file')} that {_verb(len(other), 'is')} "
                        f"not .txt (e.g. {', '.join(other[:EXAMPLES])})", tree.display)
        sink = _DocSink(tree.display)
        for f in txt:
            disp = tree.display_of(f)
            data = tree.read(f)
            body = _decode(data, disp).strip() if data.strip() else ""
            ident = f[: -len(PurePosixPath(f).suffix)]
            sink.display = disp
            sink.add(ident, None, Document(ident, PurePosixPath(f).stem, body), not body)
        sink.display = tree.display
        sink.warn_skipped(report)
        return _Parts(sink.items, sink.skipped, tree.display)

    docs_files = [f for f in files if _suffix(f) in DOC_SUFFIXES and not f.startswith("qrels/")
                  and PurePosixPath(f).name not in QUERY_NAMES]
    if len(docs_files) == 1:
        f = docs_files[0]
        return _Parts(*_read_docs(tree.read(f), f, tree.display_of(f), report),
                      tree.display_of(f))
    shown = (", ".join(files[:8]) + (", ..." if len(files) > 8 else "")) if files else "no files"
    raise DataError(f"no corpus found: expected {EXPECTED}; found {shown}", tree.display)


# --------------------------------------------------------------------------------------------
# public entry points


def _is_zip(path: Path) -> bool:
    if _suffix(path.name) == ".zip":
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def _default_name(path: Path) -> str:
    if path.is_dir():
        return path.resolve().name or "dataset"
    return path.stem or path.name


def _read_path(path: Path, display: str, report: LoadReport, max_bytes: int,
               max_entries: int) -> _Parts:
    if path.is_dir():
        return _read_tree(_FolderTree(path, display, max_entries), report)
    try:
        size = path.stat().st_size
    except OSError as e:
        raise DataError(f"cannot read the file ({e.strerror or e})", display) from None
    if size < 4096 and not _read_file(path, display).removeprefix(codecs.BOM_UTF8).strip():
        raise DataError("file is empty", display)
    if _is_zip(path):
        with SafeZip(path, display, max_bytes=max_bytes, max_entries=max_entries) as zf:
            return _read_tree(_ZipTree(zf), report)
    return _Parts(*_read_docs(_read_file(path, display), path.name, display, report), display)


def _existing(path: PathLike) -> tuple[Path, str]:
    p = Path(path)
    display = str(path)
    if not p.exists():
        raise DataError("no such file or folder", display)
    return p, display


def load_dataset(path: PathLike, name: str | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES,
                 max_entries: int = DEFAULT_MAX_ENTRIES) -> Dataset:
    """Load a data set from a folder, a zip archive or a single documents file.

    - BEIR folder or zip: ``corpus.jsonl``, optional ``queries.jsonl`` and ``qrels/<split>.tsv``
      (at the top or inside one folder, as in BEIR's own zips);
    - a zip or folder of ``.txt`` files: one document per file (id: path without extension,
      title: file stem);
    - one ``.jsonl``, ``.csv`` or ``.tsv`` file of documents, or a ``.txt`` file with one
      document per non-empty line (ids ``line-<n>``).

    ``max_bytes`` (total uncompressed size) and ``max_entries`` bound what a zip may hold.
    """
    p, display = _existing(path)
    report = LoadReport()
    parts = _read_path(p, display, report, max_bytes, max_entries)
    return parts.assemble(name or _default_name(p), report)


def load_files(corpus: PathLike, queries: PathLike | None = None,
               qrels: Mapping[str, PathLike] | Iterable[PathLike] | PathLike | None = None,
               name: str | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES,
               max_entries: int = DEFAULT_MAX_ENTRIES) -> Dataset:
    """Assemble a data set from separately uploaded files.

    ``corpus`` is anything :func:`load_dataset` reads; ``queries`` a ``.jsonl``, ``.csv`` or
    ``.tsv`` file; ``qrels`` a ``{split: path}`` dict or a list of paths whose file stems name
    the splits (``test.tsv`` is split "test"). Queries and labels given here replace any that
    came with the corpus.
    """
    p, display = _existing(corpus)
    report = LoadReport()
    parts = _read_path(p, display, report, max_bytes, max_entries)
    if queries is not None:
        qp, qdisp = _existing(queries)
        parts.queries, parts.skipped_queries = _read_queries(_read_file(qp, qdisp), qp.name,
                                                             qdisp, report)
    if qrels is not None:
        parts.qrels = {}
        for split, path in _qrels_items(qrels):
            qpath, qdisp = _existing(path)
            if split in parts.qrels:
                raise DataError(f"two qrels files for split '{split}': {parts.qrels[split][0]} "
                                f"and {qdisp}", qdisp)
            parts.qrels[split] = (qdisp, _parse_qrels(_decode(_read_file(qpath, qdisp), qdisp),
                                                      qdisp, report))
    return parts.assemble(name or _default_name(p), report)


def _qrels_items(qrels) -> list[tuple[str, PathLike]]:
    if isinstance(qrels, (str, os.PathLike)):
        qrels = [qrels]
    if isinstance(qrels, Mapping):
        return [(str(k), v) for k, v in qrels.items()]
    return [(Path(p).stem, p) for p in qrels]


def detect_role(path: PathLike) -> str:
    """Guess what an uploaded file holds: "dataset" (folder or zip), "corpus", "queries" or
    "qrels". A hint for sorting uploads; the readers themselves do not rely on it."""
    p, display = _existing(path)
    if p.is_dir() or _is_zip(p):
        return "dataset"
    with open(p, "rb") as f:
        head = f.read(65536).decode("utf-8", errors="replace").lstrip("\ufeff")
    first = next((ln.strip() for ln in head.splitlines() if ln.strip()), "")
    stem = p.stem.lower()
    if first.startswith("{"):
        try:
            obj = json.loads(first)
        except json.JSONDecodeError:
            obj = {}
        if isinstance(obj, dict) and "title" in obj:
            return "corpus"
        if "quer" in stem or "topic" in stem or (isinstance(obj, dict) and "query" in obj):
            return "queries"
        return "corpus"
    parts = first.split("\t") if "\t" in first else first.split(",") if _suffix(p.name) == ".csv" \
        else first.split()
    if _looks_like_qrels_header(parts):
        return "qrels"
    if _suffix(p.name) in (".tsv", ".txt", ".trec", ".qrels", "") and len(parts) in (3, 4) \
            and _int_like(parts[-1]):
        return "qrels"
    if _column(parts, QUERY_ID_COLUMNS) is not None and _column(parts, ("query",)) is not None:
        return "queries"
    if "quer" in stem or "topic" in stem:
        return "queries"
    return "corpus"
