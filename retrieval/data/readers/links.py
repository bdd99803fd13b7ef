"""Links between documents: read with each document, then resolved once every document has loaded.

A document's outgoing links come from its file: a JSONL record's ``links`` field (a list of document
ids), a CSV/TSV ``links`` column (ids separated by white space: an id never holds any), or the anchors
of a Markdown or HTML page (``pages``, resolved by relative path or by title). Each id read from a
field passes the one name boundary as every id does (``records.require_id``: refused, naming the file
and line, when it cannot be an id; kept in its NFC form).

Bounds: at most ``MAX_LINKS_PER_DOCUMENT`` links in one document and ``MAX_LINKS`` in a corpus; past
either the file is refused, naming the file and line (a document with more links than a wiki page
has is not one to guess at). Reading is linear in the links, and ``resolve`` makes one pass over them.

Resolved (``resolve``): a link to a document that loaded keeps that document's id; a link to the
document itself, or to nothing that loaded (no such id, a document skipped for its empty text, a
path outside the folder, a title several pages share) is dropped, and counted in the load report
with the file and line of the first ones: never guessed. A document's second link to one document is
the same link (kept once).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from retrieval.data.dataset import Document
from retrieval.data.readers.records import EXAMPLES, INDIVIDUAL, Skipped, id_value, require_id
from retrieval.errors import DataError, LoadReport
from retrieval.safe_names import shown

MAX_LINKS_PER_DOCUMENT = 10_000  # a long Wikipedia article links to a few thousand pages
MAX_LINKS = 50_000_000  # links in one corpus: 50 per document of a million


@dataclass
class RawLinks:
    """One document's links as its file gives them, before they are resolved.

    ``targets``: ids (a JSONL or CSV record) or anchors' targets (a page); ``line``: the record's line,
    or ``lines``: each anchor's; ``base``: the page's folder in its tree (where a relative path starts);
    ``titles``: which targets name a page's title rather than its path (a page's wiki links)."""

    targets: list[str]
    display: str
    line: int | None = None
    lines: list[int] | None = None
    base: str = ""
    titles: list[bool] | None = None

    def line_of(self, i: int) -> int | None:
        return self.lines[i] if self.lines is not None else self.line


Lookup = Callable[[RawLinks, int], tuple[str | None, str]]  # target i -> (the document id, "") or (None, why not)


class LinkSink:
    """Collects each document's links as its file is read, under the bounds; ``_one`` keeps one
    string per distinct target, so a million links to a thousand pages hold a thousand strings."""

    def __init__(self) -> None:
        self.raw: dict[str, RawLinks] = {}
        self.total = 0
        self._one: dict[str, str] = {}

    def add(self, doc_id: str, targets: list[str], display: str, line: int | None = None,
            lines: list[int] | None = None, base: str = "", titles: list[bool] | None = None) -> None:
        if not targets:
            return
        self.total += len(targets)
        if self.total > MAX_LINKS:
            raise DataError(f"more than {MAX_LINKS:,} links in the corpus; at most {MAX_LINKS:,} are read",
                            display, line if lines is None else lines[0])
        one = self._one.setdefault
        self.raw[doc_id] = RawLinks([one(t, t) for t in targets], display, line, lines, base, titles)


def check_count(n: int, doc_id: str, display: str, line: int | None) -> None:
    if n > MAX_LINKS_PER_DOCUMENT:
        raise DataError(f"document {shown(doc_id)} has {n:,} links; at most {MAX_LINKS_PER_DOCUMENT:,} are read "
                        "per document", display, line)


def field_links(value: object, doc_id: str, display: str, line: int) -> list[str]:
    """A JSONL record's ``links`` field: a list of ids (strings or integers), each through the name
    boundary; missing or null: none."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise DataError("field 'links' must be a list of document ids", display, line)
    check_count(len(value), doc_id, display, line)
    return [id_value(v, "links", display, line, f"link {i} of field 'links'", f"link {i}")
            for i, v in enumerate(value, 1)]


def cell_links(cell: str, doc_id: str, display: str, line: int) -> list[str]:
    """A CSV/TSV ``links`` cell: ids separated by white space (an id never holds any)."""
    ids = cell.split()
    check_count(len(ids), doc_id, display, line)
    return [require_id(v, f"link {i}", display, line) for i, v in enumerate(ids, 1)]


def by_id(docs: dict[str, Document], skipped: Skipped) -> Lookup:
    """Targets that are document ids (a JSONL or CSV field)."""

    def lookup(raw: RawLinks, i: int) -> tuple[str | None, str]:
        target = raw.targets[i]
        if target in docs:
            return target, ""
        return None, "a document skipped for its empty text" if target in skipped else "no such document"

    return lookup


@dataclass
class _Dropped:
    """Links dropped for one reason: how many, and the first few (document, target, file, line, why)."""

    count: int = 0
    first: list[tuple[str, str, str, int | None, str]] = field(default_factory=list)

    def add(self, doc_id: str, target: str, raw: RawLinks, i: int, why: str) -> None:
        self.count += 1
        if len(self.first) < INDIVIDUAL + 1:
            self.first.append((doc_id, target, raw.display, raw.line_of(i), why))


def resolve(docs: dict[str, Document], sink: LinkSink, lookup: Lookup, report: LoadReport) -> None:
    """Each loaded document's links resolved (``lookup``) into ``docs`` (a document with links is
    replaced by one that holds them); what is dropped is warned of in ``report``."""
    unresolved, to_self = _Dropped(), _Dropped()
    for doc_id, raw in sink.raw.items():
        doc = docs.get(doc_id)
        if doc is None:  # the document itself did not load (its text was empty): so neither do its links
            continue
        out: dict[str, None] = {}
        for i, target in enumerate(raw.targets):
            found, why = lookup(raw, i)
            if found is None:
                unresolved.add(doc_id, target, raw, i, why)
            elif found == doc_id:
                to_self.add(doc_id, target, raw, i, "")
            else:
                out[docs[found].id] = None  # the document's own id string: one per document, however many link to it
        if out:
            docs[doc_id] = replace(doc, links=tuple(out))
    sink.raw.clear()
    _warn(report, unresolved, "names no document that loaded and was dropped", "link to no document that loaded")
    _warn(report, to_self, "is to the document itself and was dropped", "link to the document itself")


def _warn(report: LoadReport, dropped: _Dropped, individually: str, kind: str) -> None:
    first = dropped.first
    if dropped.count <= INDIVIDUAL:
        for doc_id, target, display, line, why in first:
            report.warn(f"link {shown(target)} of document {shown(doc_id)} {individually}"
                        + (f" ({why})" if why else ""), display, line)
        return
    examples = ", ".join(f"{shown(target)} in {display}{f':{line}' if line else ''}"
                         + (f" ({why})" if why else "") for _, target, display, line, why in first[:EXAMPLES])
    report.warn(f"{dropped.count:,} links were dropped, each a {kind} (e.g. {examples})")
