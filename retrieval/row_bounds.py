"""How large a row of the store may be when it is read back, and the one way a compressed row is
inflated: within the ceiling of its kind, never holding more.

A compressed column (``retrieval.store.keys.pack``: JSON, then zlib) is small on disk and may be anything once
inflated: 0.8 MB of zlib inflates to 768 MiB of zeros, and JSON of a few bytes an item (``[]``,
``["a",0]``) becomes Python objects many times its size. So every compressed column is inflated by
``inflate`` under ``ceiling(kind)``, and every plain JSON column is measured (``stored_rows.loaded``)
before ``json.loads`` sees it. Past its ceiling a row is damaged (``stored_rows``): left out of
what is listed with a warning, or a miss computed again, as any other damaged row.

``inflate`` never holds more than the ceiling. A blob that could inflate past it (deflate inflates
at most ``MAX_RATIO`` to 1) is first inflated in pieces of ``CHUNK`` bytes, each counted and
dropped, so a bomb is refused holding one piece; one that fits is then inflated into one buffer.

**The ceilings, in one place** (``CEILINGS``, bytes of JSON). Each is the most the writer writes,
times ``MARGIN`` and ``SLACK`` more. JSON is written with ASCII escapes, so a character of text is
at most ``ESCAPED`` bytes (a character outside the Basic Multilingual Plane: two ``\\uXXXX``).

=====================  ======================  =============================================================
kind                   column                  the most the writer writes
=====================  ======================  =============================================================
``queries``            a query set's queries   ``QUERY_SET_QUERIES`` ids and texts of ``QUERY_SET_CHARS``
                                               characters in all (``retrieval.data.query_sets``)
``query ids``          a judging sample's      the ids of the largest data set's queries
``hits``               a cached run            a list of the deepest depth asked for (at most the corpus)
                                               per query of the largest data set: ids as long as its
                                               longest, scores as long as a float's longest text
``per-query values``   a cached evaluation     ``METRICS_KEPT`` metrics' value per query
``runs``               a snapshot's runs       ``SNAPSHOT_SYSTEMS`` such runs
``result``             a training job's        its per-query values, and ``JSON_TEXT`` besides
``losses``             a training job's        ``LOSSES`` (every step's loss: about a million steps)
``files``              a kept data set's       ``KEPT_FILES`` file names of 255 characters
others                 JSON text               ``JSON_TEXT`` (parameters, settings, counts, notes of 2,000
                                               characters: a few KB when written)
=====================  ======================  =============================================================

The kinds whose size follows the data (a sample, a run, an evaluation, a snapshot) are sized by
the largest data set opened on the store in this process (``Sizes``, which ``Workspace`` tells of
every data set it opens, and of every depth it searches to): its queries, its documents and its
longest ids. Nothing read from the store sizes them, so a forged row gains nothing; before any
data set is opened, the sizes are ``FLOOR``'s. Every read of such a row follows the opening of its
data set (the app's sessions, the command lines), so a row RankScope wrote always fits.
"""
from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from retrieval.data.dataset import Dataset

MARGIN = 1.25  # a ceiling is the most the writer writes times this …
SLACK = 64 * 1024  # … and this many bytes more
ESCAPED = 12  # bytes JSON writes a character as at most (U+1F600: "\ud83d\ude00")
SCORE = 24  # bytes of the longest text JSON writes a float as ("-2.2250738585072014e-308")
NAME = ESCAPED * 100 + 2  # a system's or metric's name in JSON (``safe_names.NAME_LIMIT`` characters)
QUERY_SET_QUERIES = 10_000  # ``retrieval.data.query_sets.MAX_QUERIES``
QUERY_SET_CHARS = 5_000_000  # ``retrieval.data.query_sets.MAX_CHARS`` (ids and texts)
METRICS_KEPT = 32  # metrics an evaluation keeps per query (``metrics.EVALUATED`` and PNR: 11)
SNAPSHOT_SYSTEMS = 32  # systems a snapshot holds runs of (RankScope registers 9; a fine-tuned encoder adds its own)
KEPT_FILES = 64  # files one kept data set holds (``stored_rows.KEPT_FILES``)
LOSSES = 64 * 2**20  # a training job's losses: [stage, step, loss] a step, about a million steps
JSON_TEXT = 2**20  # a plain JSON column of settings, counts or parameters
DEPTH = 1_000  # the depth runs are kept to (``workspace.EVAL_DEPTH``), unless a deeper one is asked for
CHUNK = 1 << 20  # bytes inflated at a time while a blob is measured
MAX_RATIO = 1032  # the most deflate inflates a byte to (a 258-byte match in 2 bits): zlib's own bound


class TooLarge(ValueError):
    """A row that inflates, or a JSON column that is, past the ceiling of its kind."""


@dataclass(frozen=True)
class Shape:
    """How large a data set is, as far as the rows kept of it can be: its queries and documents, its
    longest ids as JSON writes them (quotes included), and the deepest run asked of it."""

    queries: int
    docs: int
    doc_id: int  # bytes of the longest document id in JSON
    query_id: int  # bytes of the longest query id in JSON
    depth: int = DEPTH

    def merged(self, other: Shape) -> Shape:
        """The larger of the two in each part."""
        return Shape(max(self.queries, other.queries), max(self.docs, other.docs), max(self.doc_id, other.doc_id),
                     max(self.query_id, other.query_id), max(self.depth, other.depth))


FLOOR = Shape(queries=100, docs=DEPTH, doc_id=2 * 32 + 2, query_id=2 * 32 + 2)  # before any data set is opened


def json_id_bytes(ids: Iterable[str]) -> int:
    """The most bytes JSON writes any of ``ids`` as (quotes included): twice its characters for ASCII
    (a quote or backslash is escaped), ``ESCAPED`` times otherwise; 2 for no ids."""
    longest, plain = 0, True
    for ident in ids:
        longest = max(longest, len(ident))
        plain = plain and ident.isascii()
    return (2 if plain else ESCAPED) * longest + 2


class Sizes:
    """The largest data set opened on a store in this process, part by part (``Shape``): what the
    rows that follow the data are sized by. ``FLOOR`` until a data set is seen."""

    def __init__(self) -> None:
        self._shape: Shape | None = None
        self._seen: set[str] = set()  # the corpora and query sets measured already (their ids are not read again)
        self._lock = threading.Lock()

    @property
    def shape(self) -> Shape:
        """The largest shape seen, ``FLOOR`` before any."""
        with self._lock:
            return FLOOR if self._shape is None else self._shape

    def see(self, dataset: Dataset) -> None:
        """Count ``dataset`` (a ``Dataset``): its queries, documents and longest ids (each corpus's
        documents and each set of queries measured once)."""
        corpus, queries = f"c:{dataset.corpus_hash}", f"q:{dataset.queries_hash}"
        with self._lock:
            fresh = corpus not in self._seen, queries not in self._seen
        if not any(fresh):
            return
        doc_id = json_id_bytes(dataset.doc_ids) if fresh[0] else 2
        shape = Shape(len(dataset.queries), len(dataset.docs), doc_id, json_id_bytes(dataset.queries))
        with self._lock:
            if len(self._seen) > 65_536:  # a long-running shared app: forget which were measured (never the sizes)
                self._seen.clear()
            self._seen.update((corpus, queries))
            self._shape = shape if self._shape is None else self._shape.merged(shape)

    def deepen(self, depth: int) -> None:
        """Count a run asked for to ``depth`` (deeper than ``DEPTH``: rows of it are that deep)."""
        if depth > DEPTH:
            with self._lock:
                self._shape = replace(self._shape or FLOOR, depth=max(depth, (self._shape or FLOOR).depth))


def _run(s: Shape) -> int:
    """A run of every query: ``{"q":[["d",score],…],…}``."""
    return 2 + s.queries * (s.query_id + 4 + min(s.depth, s.docs) * (s.doc_id + SCORE + 4))


def _per_query(s: Shape) -> int:
    """``{metric: {query: value or [value, value]}}`` for ``METRICS_KEPT`` metrics."""
    return 2 + METRICS_KEPT * (NAME + 4 + s.queries * (s.query_id + 2 * SCORE + 5))


# kind → the most its writer writes, from the data set's shape (module docstring)
CEILINGS: dict[str, Callable[[Shape], int]] = {
    "queries": lambda s: ESCAPED * QUERY_SET_CHARS + 6 * QUERY_SET_QUERIES + 2,
    "query ids": lambda s: 2 + s.queries * (s.query_id + 1),
    "hits": _run,
    "per-query values": _per_query,
    "runs": lambda s: 2 + SNAPSHOT_SYSTEMS * (NAME + 1 + _run(s)),
    "result": lambda s: _per_query(s) + JSON_TEXT,
    "losses": lambda s: LOSSES,
    "files": lambda s: 2 + KEPT_FILES * (ESCAPED * 255 + 3),
}


def ceiling(kind: str, shape: Shape | None = None) -> int:
    """The most bytes a row of ``kind`` holds when read back (``JSON_TEXT``'s for a kind not in
    ``CEILINGS``), for data sets of ``shape`` (``FLOOR`` when None)."""
    most = CEILINGS[kind](shape or FLOOR) if kind in CEILINGS else JSON_TEXT
    return int(most * MARGIN) + SLACK


def inflate(blob: bytes, limit: int) -> bytes:
    """``blob`` inflated (zlib), never holding more than ``limit`` bytes of it: ``TooLarge`` for one
    that inflates past it (found holding one ``CHUNK`` when it could), ``zlib.error`` for one that
    is not a whole zlib stream."""
    if len(blob) * MAX_RATIO > limit:  # it could inflate past the limit: measured first, piece by piece
        measuring, size, rest = zlib.decompressobj(), 0, blob
        while not measuring.eof:
            piece = measuring.decompress(rest, CHUNK)
            size, rest = size + len(piece), measuring.unconsumed_tail
            if size > limit:
                raise TooLarge(f"inflate past {limit:,} bytes, the most such a row holds")
            if not piece and not rest:
                break  # cut short: said below
    inflating = zlib.decompressobj()
    data = inflating.decompress(blob, limit + 1)
    if len(data) > limit:
        raise TooLarge(f"inflate past {limit:,} bytes, the most such a row holds")
    if not inflating.eof:
        raise zlib.error("incomplete or truncated stream")
    return data
