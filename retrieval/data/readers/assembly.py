"""Assembly: the public entry points that turn paths into a :class:`Dataset`.

A folder, a zip or a single file (:func:`load_dataset`), separately given files
(:func:`load_files`) or a batch of uploads sorted by :func:`detect_role` (:func:`load_uploads`)
are read into parts (documents, queries, labels by split), which are then put together:
labels are matched to the documents and queries that loaded, and every loss is reported.
"""
from __future__ import annotations

import codecs
import json
import os
import posixpath
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath

from retrieval.data.dataset import Dataset, Document, Qrels
from retrieval.data.readers.decode import PathLike, Text, count, decode, read_file, regular_file, suffix, verb_for
from retrieval.data.readers.documents import read_docs
from retrieval.data.readers.links import LinkSink, Lookup, by_id, check_count, resolve
from retrieval.data.readers.pages import PAGE_SUFFIXES, TREE_SUFFIXES, PageIndex, external, read_page
from retrieval.data.readers.qrels import attach_qrels, parse_qrels, split_key
from retrieval.data.readers.queries import read_queries
from retrieval.data.readers.records import (
    EXAMPLES,
    QUERY_ID_COLUMNS,
    RecordSink,
    Skipped,
    column,
    int_like,
    looks_like_qrels_header,
)
from retrieval.data.readers.safezip import DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRIES, SafeZip
from retrieval.data.readers.trees import (
    CORPUS_NAMES,
    QUERY_NAMES,
    FolderTree,
    PagesTree,
    Tree,
    ZipTree,
    beir_root,
    first_file,
    join,
)
from retrieval.errors import DataError, LoadReport
from retrieval.progress import Progress
from retrieval.safe_names import check_name, describe_char, display_name, hidden_char, normal_id

__all__ = ["load_dataset", "load_files", "load_uploads", "detect_role"]

QRELS_SUFFIXES = (".tsv", ".txt", ".trec", ".qrels")
DOC_SUFFIXES = (".jsonl", ".ndjson", ".csv", ".tsv")
EXPECTED = ("corpus.jsonl (BEIR: with optional queries.jsonl and qrels/<split>.tsv, at the "
            "top or inside one folder), or .txt, .md or .html files (one document per file)")


class _Parts:
    """What the readers found, before labels are matched to documents and queries."""

    def __init__(self, docs: dict[str, Document], skipped_docs: Skipped, links: LinkSink, display: str,
                 lookup: Lookup | None = None):
        self.docs = docs
        self.skipped_docs = skipped_docs
        self.links = links  # resolved by ``lookup`` (default: by id) once the documents are in
        self.lookup = lookup or by_id(docs, skipped_docs)
        self.display = display
        self.queries: dict[str, str] = {}
        self.query_fields: dict[str, dict[str, str]] = {}
        self.skipped_queries: Skipped = {}
        self.qrels: dict[str, tuple[str, Qrels]] = {}  # split -> (file display, labels)

    def assemble(self, name: str, report: LoadReport) -> Dataset:
        if not self.docs:
            raise DataError("no documents left to load (every document has empty text)"
                            if self.skipped_docs else "no documents found", self.display)
        resolve(self.docs, self.links, self.lookup, report)
        qrels: dict[str, Qrels] = {}
        seen: set[str] = set()
        for split in sorted(self.qrels, key=split_key):
            display, labels = self.qrels[split]
            try:
                name_of_split = check_name(split, "split name (the labels file's name)")
            except ValueError as err:
                raise DataError(str(err), display) from None
            if name_of_split in seen:  # two file names that differ only by their normalization
                raise DataError(f"two qrels files for split {name_of_split!r}", display)
            seen.add(name_of_split)
            kept = attach_qrels(name_of_split, display, labels, self.docs, self.skipped_docs,
                                self.queries, self.skipped_queries, report)
            if kept:
                qrels[name_of_split] = kept
        return Dataset(name=display_name(name), docs=self.docs, queries=self.queries, qrels=qrels,
                       report=report, query_fields=self.query_fields)


def _read_tree(tree: Tree, report: LoadReport, progress: Progress | None = None) -> _Parts:
    """A BEIR data set, else a tree of .txt, Markdown and HTML files (one document each; ``pages``),
    else its one documents file; anything else is a DataError listing what the tree holds."""
    root = beir_root(tree)
    if root is not None:
        corpus = first_file(tree, root, CORPUS_NAMES)
        assert corpus is not None  # beir_root found the root by its corpus file
        cdisp = tree.display_of(corpus)
        parts = _Parts(*read_docs(tree.text(corpus, progress), corpus, report), cdisp)
        qfile = first_file(tree, root, QUERY_NAMES)
        if qfile:
            parts.queries, parts.skipped_queries, parts.query_fields = read_queries(tree.text(qfile), qfile, report)
        qdir = join(root, "qrels")
        for f in tree.children(qdir)[1]:
            if suffix(f) in QRELS_SUFFIXES:
                rel = join(qdir, f)
                disp = tree.display_of(rel)
                split = PurePosixPath(f).stem
                if split in parts.qrels:
                    raise DataError(f"two qrels files for split '{split}'", disp)
                parts.qrels[split] = (disp, parse_qrels(tree.text(rel), report))
        return parts

    files = tree.files()
    pages = [f for f in files if suffix(f) in TREE_SUFFIXES]
    if pages:
        other = [f for f in files if suffix(f) not in TREE_SUFFIXES]
        if other:
            report.warn(f"ignored {count(len(other), 'file')} that {verb_for(len(other), 'is')} "
                        f"not .txt, .md or .html (e.g. {', '.join(other[:EXAMPLES])})", tree.display)
        return _read_pages(tree, pages, report)

    docs_files = [f for f in files if suffix(f) in DOC_SUFFIXES and not f.startswith("qrels/")
                  and PurePosixPath(f).name not in QUERY_NAMES]
    if len(docs_files) == 1:
        f = docs_files[0]
        return _Parts(*read_docs(tree.text(f, progress), f, report), tree.display_of(f))
    shown = (", ".join(files[:8]) + (", ..." if len(files) > 8 else "")) if files else "no files"
    raise DataError(f"no corpus found: expected {EXPECTED}; found {shown}", tree.display)


def _read_pages(tree: Tree, files: list[str], report: LoadReport) -> _Parts:
    """One document per file: a ``.txt`` file's text (title: the file's name), a page's title, text and
    links (``pages.read_page``; title: the file's name where the page names none); its id the path
    without the extension."""
    sink = RecordSink(tree.display)
    links = LinkSink()
    for f in files:
        disp = tree.display_of(f)
        data = tree.read(f)
        kind = suffix(f)
        stem = PurePosixPath(f).stem
        ident = _tree_id(f[: -len(PurePosixPath(f).suffix)], disp)
        source = decode(data, disp) if data.strip() else ""
        if kind == ".txt":
            title, body, anchors = stem, source.strip(), []
        else:
            page = read_page(source, kind)
            title, body = page.title or stem, page.text
            anchors = [a for a in page.anchors if not external(a[0])]
        sink.display = disp
        sink.add(ident, None, Document(ident, title, body), not body)
        if anchors:
            check_count(len(anchors), ident, disp, anchors[-1][1])
            links.add(ident, [a[0] for a in anchors], disp, lines=[a[1] for a in anchors],
                      base=posixpath.dirname(f), titles=[a[2] for a in anchors])
    sink.display = tree.display
    sink.warn_skipped(report)
    return _Parts(sink.items, sink.skipped, links, tree.display, PageIndex(sink.items).lookup)


def _tree_id(ident: str, display: str) -> str:
    """A .txt file's path (without ``.txt``) as its document's id, NFC as every id is
    (``safe_names.normal_id``); a file name holding a control or invisible character, a noncharacter or
    a lone surrogate (a name on disk that is not UTF-8) is refused. Whitespace is kept: file names
    have it (such an id cannot be exported to a TREC file, which says so then)."""
    c = hidden_char(ident)
    if c is not None:
        raise DataError(f"a file name holding {describe_char(c)} cannot be a document id; rename the file", display)
    return normal_id(ident)


def _is_zip(path: Path) -> bool:
    if suffix(path.name) == ".zip":
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
               max_entries: int, progress: Progress | None = None) -> _Parts:
    if path.is_dir():
        return _read_tree(FolderTree(path, display, max_entries), report, progress)
    try:
        size = path.stat().st_size
    except OSError as e:
        raise DataError(f"cannot read the file ({e.strerror or e})", display) from None
    if size < 4096 and not read_file(path, display).removeprefix(codecs.BOM_UTF8).strip():
        raise DataError("file is empty", display)
    if _is_zip(path):
        with SafeZip(path, display, max_bytes=max_bytes, max_entries=max_entries) as zf:
            return _read_tree(ZipTree(zf), report, progress)
    return _Parts(*read_docs(Text.of_file(path, display, progress), path.name, report), display)


Displays = Mapping[str, str]  # a path as given -> how messages name it (an upload: its file name)


def _existing(path: PathLike, displays: Displays | None = None) -> tuple[Path, str]:
    p = Path(path)
    display = (displays or {}).get(str(path), str(path))
    if not p.exists():
        raise DataError("no such file or folder", display)
    if not p.is_dir():
        regular_file(p, display)  # never a FIFO or a device: nothing opens one
    return p, display


def load_dataset(path: PathLike, name: str | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES,
                 max_entries: int = DEFAULT_MAX_ENTRIES, progress: Progress | None = None,
                 displays: Displays | None = None) -> Dataset:
    """Load a data set from a folder, a zip archive or a single documents file.

    - BEIR folder or zip: ``corpus.jsonl``, optional ``queries.jsonl`` and ``qrels/<split>.tsv``
      (at the top or inside one folder, as in BEIR's own zips);
    - a zip or folder of ``.txt`` files: one document per file (id: path without extension,
      title: file stem);
    - one ``.jsonl``, ``.csv`` or ``.tsv`` file of documents, or a ``.txt`` file with one
      document per non-empty line (ids ``line-<n>``).

    ``max_bytes`` (total uncompressed size) and ``max_entries`` bound what a zip may hold. The
    documents file is read as a stream (``decode.Text``), its progress by bytes reported to
    ``progress``. Messages name a file as ``displays`` says (default: the path as given).

    Args:
        path: The folder, zip archive or documents file.
        name: The data set's name; None: the folder's name or the file's stem.
        max_bytes: The most bytes a zip may hold uncompressed.
        max_entries: The most files a zip may hold.
        progress: ``progress(fraction, message)`` as the documents file is read, or None.
        displays: How messages name a path (a path as given -> its name; an upload's file name).

    Returns:
        The data set, with the warnings of what was skipped in its ``report``.

    Raises:
        DataError: The path is missing or holds no data set it can read; the message names the file
            and line.
    """
    p, display = _existing(path, displays)
    report = LoadReport()
    parts = _read_path(p, display, report, max_bytes, max_entries, progress)
    return parts.assemble(name or _default_name(p), report)


def load_files(corpus: PathLike, queries: PathLike | None = None,
               qrels: Mapping[str, PathLike] | Iterable[PathLike] | PathLike | None = None,
               name: str | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES,
               max_entries: int = DEFAULT_MAX_ENTRIES, progress: Progress | None = None,
               displays: Displays | None = None) -> Dataset:
    """Assemble a data set from separately uploaded files.

    ``corpus`` is anything :func:`load_dataset` reads; ``queries`` a ``.jsonl``, ``.csv`` or
    ``.tsv`` file; ``qrels`` a ``{split: path}`` dict or a list of paths whose file stems name
    the splits (``test.tsv`` is split "test"). Queries and labels given here replace any that
    came with the corpus.

    Args:
        corpus: The documents: anything ``load_dataset`` reads.
        queries: The queries file, or None.
        qrels: The labels: ``{split: path}``, paths named by split, one path, or None.
        name: The data set's name; None: the corpus's folder name or file stem.
        max_bytes: The most bytes a zip may hold uncompressed.
        max_entries: The most files a zip may hold.
        progress: ``progress(fraction, message)`` as the documents file is read, or None.
        displays: How messages name a path (a path as given -> its name).

    Returns:
        The data set, with the warnings of what was skipped in its ``report``.

    Raises:
        DataError: A file is missing or unreadable, or two label files name one split; the message
            names the file and line.
    """
    p, display = _existing(corpus, displays)
    report = LoadReport()
    parts = _read_path(p, display, report, max_bytes, max_entries, progress)
    if queries is not None:
        qp, qdisp = _existing(queries, displays)
        parts.queries, parts.skipped_queries, parts.query_fields = read_queries(Text.of_file(qp, qdisp), qp.name,
                                                                                 report)
    if qrels is not None:
        parts.qrels = {}
        for split, path in _qrels_items(qrels):
            qpath, qdisp = _existing(path, displays)
            if split in parts.qrels:
                raise DataError(f"two qrels files for split '{split}': {parts.qrels[split][0]} "
                                f"and {qdisp}", qdisp)
            parts.qrels[split] = (qdisp, parse_qrels(Text.of_file(qpath, qdisp), report))
    return parts.assemble(name or _default_name(p), report)


def add_queries(dataset: Dataset, queries: PathLike, display: str | None = None) -> Dataset:
    """``dataset`` with the queries of the file ``queries`` added (any format ``read_queries``
    takes: JSONL, CSV/TSV with or without an id column, .txt one per line). An id the data set
    already has with another text is a DataError naming the file; what was loaded stays loaded."""
    qp, qdisp = _existing(queries, {str(queries): display} if display else None)
    report = LoadReport()
    found, _, fields = read_queries(Text.of_file(qp, qdisp), qp.name, report)
    if not found:
        raise DataError("no query found (every line is empty)", qdisp)
    try:
        return dataset.with_queries(found, report, fields)
    except ValueError as err:
        raise DataError(str(err), qdisp) from None


def _qrels_items(qrels: Mapping[str, PathLike] | Iterable[PathLike] | PathLike) -> list[tuple[str, PathLike]]:
    if isinstance(qrels, (str, os.PathLike)):
        qrels = [qrels]
    if isinstance(qrels, Mapping):
        return [(str(k), v) for k, v in qrels.items()]
    return [(Path(p).stem, p) for p in qrels]


def detect_role(path: PathLike, displays: Displays | None = None) -> str:
    """Guess what an uploaded file holds: "dataset" (folder or zip), "corpus", "queries" or
    "qrels". A hint for sorting uploads; the readers themselves do not rely on it."""
    p, display = _existing(path, displays)
    if p.is_dir() or _is_zip(p):
        return "dataset"
    with open(p, "rb") as f:
        head = f.read(65536).decode("utf-8", errors="replace").lstrip("\ufeff")
    first = next((ln.strip() for ln in head.splitlines() if ln.strip()), "")
    stem = p.stem.lower()
    if first.startswith("{"):
        try:
            obj = json.loads(first)
        except ValueError:  # not JSON, or an integer of thousands of digits: the readers will say which
            obj = {}
        if isinstance(obj, dict) and "title" in obj:
            return "corpus"
        if "quer" in stem or "topic" in stem or (isinstance(obj, dict) and "query" in obj):
            return "queries"
        return "corpus"
    parts = first.split("\t") if "\t" in first else first.split(",") if suffix(p.name) == ".csv" \
        else first.split()
    if looks_like_qrels_header(parts):
        return "qrels"
    if suffix(p.name) in (".tsv", ".txt", ".trec", ".qrels", "") and len(parts) in (3, 4) \
            and int_like(parts[-1]):
        return "qrels"
    if column(parts, QUERY_ID_COLUMNS) is not None and column(parts, ("query",)) is not None:
        return "queries"
    if "quer" in stem or "topic" in stem:
        return "queries"
    return "corpus"


def _load_pages(paths: list[str], displays: Displays) -> Dataset:
    """Markdown or HTML pages uploaded together: one folder of them, by their file names (``displays``)."""
    named: dict[str, Path] = {}
    for p in paths:
        path, name = _existing(p, displays)
        if name in named:
            raise DataError(f"two uploaded pages are named {name!r}: a page is known by its name", name)
        named[name] = path
    report = LoadReport()
    parts = _read_pages(PagesTree(named, "pages"), sorted(named), report)
    return parts.assemble("pages", report)


def load_uploads(paths: list[str], progress: Progress | None = None) -> Dataset:
    """Load what a user uploaded in one go, sorting the files by :func:`detect_role`.

    A single folder, zip or documents file is read whole by :func:`load_dataset` (its name
    from the path); several Markdown or HTML pages are one folder of pages, by their names (data set
    "pages"). Several files are sorted into exactly one documents file (a folder or
    zip counts as one), at most one queries file and any number of qrels files, whose stems
    name the splits, and read by :func:`load_files` under the documents file's stem. Any
    other mix raises :class:`DataError` naming the files. Messages name each file by its own
    name, never by where the upload was stored.
    """
    displays = {str(p): Path(p).name for p in paths}
    if len(paths) == 1 and detect_role(paths[0], displays) in ("dataset", "corpus"):
        return load_dataset(paths[0], progress=progress, displays=displays)
    if len(paths) > 1 and all(suffix(str(p)) in PAGE_SUFFIXES for p in paths):
        return _load_pages(paths, displays)
    roles: dict[str, list[str]] = {}
    for p in paths:
        roles.setdefault(detect_role(p, displays), []).append(p)
    corpus = roles.get("corpus", []) + roles.get("dataset", [])
    if len(corpus) != 1:
        raise DataError(f"expected exactly one documents file among the uploads, found "
                        f"{len(corpus)}: " + ", ".join(Path(p).name for p in paths))
    queries = roles.get("queries", [])
    if len(queries) > 1:
        raise DataError("more than one queries file uploaded: "
                        + ", ".join(Path(p).name for p in queries))
    return load_files(corpus[0], queries[0] if queries else None, roles.get("qrels") or None,
                      name=Path(corpus[0]).stem, progress=progress, displays=displays)
