"""The in-memory data set: documents, queries and graded relevance labels per split."""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from retrieval.errors import LoadReport

if TYPE_CHECKING:
    from _hashlib import HASH  # what hashlib.sha256() returns (its class lives in the C module)

Qrels = dict[str, dict[str, int]]  # query id -> doc id -> graded label


def _hash_queries(h: HASH, queries: Mapping[str, str]) -> None:
    """Feed ``queries`` (ids and texts, in id order) to the hash ``h``."""
    for qid in sorted(queries):
        h.update(json.dumps([qid, queries[qid]], ensure_ascii=False).encode())


def queries_fingerprint(queries: Mapping[str, str]) -> str:
    """A hash of queries, ids and texts, in any order: e.g. which queries an encoder trained on."""
    h = hashlib.sha256()
    _hash_queries(h, queries)
    return h.hexdigest()


@dataclass(frozen=True)
class Document:
    """One document. ``links``: the ids of the documents it links to, each once, in the order its file
    gives them, never its own (``retrieval.data.readers.links`` resolves and checks them): what Wiki
    Link Prediction pairs are made of (``training.pairs.wlp_pairs``)."""

    id: str
    title: str
    text: str
    links: tuple[str, ...] = ()

    @property
    def full_text(self) -> str:
        """What both retrievers see: the title, then the body (BEIR's convention)."""
        return f"{self.title}. {self.text}" if self.title else self.text


_dumps = json.JSONEncoder(ensure_ascii=False).encode


def _plain(value: str) -> bool:
    """Whether JSON writes ``value`` as it is between quotes: printable throughout (no control
    character, no lone surrogate), no quote, no backslash."""
    return value.isprintable() and '"' not in value and "\\" not in value


def _as_json(d: Document) -> str:
    """``json.dumps([id, title, text], ensure_ascii=False)``, the same characters; built directly
    where nothing needs escaping (twice as fast, and a million documents are hashed on every open).
    A document with links is ``[id, title, text, [links]]``: a corpus without links hashes as it did
    before documents had them, so what is cached under its hash stays found."""
    if d.links:
        return _dumps([d.id, d.title, d.text, list(d.links)])
    if _plain(d.id) and _plain(d.title) and _plain(d.text):
        return f'["{d.id}", "{d.title}", "{d.text}"]'
    return _dumps([d.id, d.title, d.text])


@dataclass
class Dataset:
    """Documents, optional queries and optional relevance labels (``qrels[split][qid][docid]``).

    ``content_hash`` identifies the content (not the file it came from), so the store can key
    cached embeddings, runs and metrics by it.
    """

    name: str
    docs: dict[str, Document]
    queries: dict[str, str] = field(default_factory=dict)
    qrels: dict[str, Qrels] = field(default_factory=dict)
    report: LoadReport = field(default_factory=LoadReport)
    query_fields: dict[str, dict[str, str]] = field(default_factory=dict)  # qid -> segment fields of its file
    _hash: str | None = field(default=None, repr=False, compare=False)
    _corpus_hash: str | None = field(default=None, repr=False, compare=False)
    _by_text: dict[str, str] | None = field(default=None, repr=False, compare=False)
    _docs_sha: HASH | None = field(default=None, repr=False, compare=False)  # hashlib state after the documents
    # queries_hash, split_key, labels_key
    _keys: dict[str | tuple[str, str | None], str] = field(default_factory=dict, repr=False, compare=False)
    _link_count: int | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.doc_ids: list[str] = list(self.docs)

    def find_query(self, text: str) -> tuple[str | None, str | None]:
        """(query id, split) of the query with exactly this text (surrounding spaces aside), else
        (None, None); the split is the first that labels it (None if none does)."""
        if self._by_text is None:
            index: dict[str, str] = {}
            for qid, qtext in self.queries.items():
                index.setdefault(qtext.strip(), qid)
            self._by_text = index  # built once: a data set's queries never change (``with_queries`` copies)
        found = self._by_text.get(text.strip())
        return (found, self.query_split(found)) if found is not None else (None, None)

    def query_split(self, query_id: str) -> str | None:
        """The first split whose labels hold ``query_id`` (None: an unlabelled query)."""
        return next((split for split, qrels in self.qrels.items() if query_id in qrels), None)

    @property
    def splits(self) -> list[str]:
        return list(self.qrels)

    def split_queries(self, split: str | None) -> dict[str, str]:
        """Queries judged in ``split`` (all queries when ``split`` is None)."""
        if split is None:
            return dict(self.queries)
        labels = self.qrels[split]
        return {qid: text for qid, text in self.queries.items() if qid in labels}

    def default_split(self) -> str | None:
        for name in ("test", "dev", "validation"):
            if name in self.qrels:
                return name
        return next(iter(self.qrels), None)

    @property
    def corpus_hash(self) -> str:
        """A hash of the documents alone: what stays the same when queries or labels are added
        (judgments made on a corpus are kept under it)."""
        if self._corpus_hash is None:
            self._corpus_hash = self._documents_hashed().hexdigest()
        return self._corpus_hash

    @property
    def content_hash(self) -> str:
        """A hash of the documents, queries and labels: what cached runs and metrics are keyed by."""
        if self._hash is None:
            h = self._documents_hashed()
            h.update(b"\x00queries")
            _hash_queries(h, self.queries)
            h.update(b"\x00qrels")
            h.update(json.dumps(self.qrels, sort_keys=True).encode())
            self._hash = h.hexdigest()
        return self._hash

    @property
    def queries_hash(self) -> str:
        """A hash of the documents and queries, not the labels: what a system's runs are computed from
        (labels added or judged leave it, and every run cached under it, as it was)."""
        if "queries" not in self._keys:
            h = self._documents_hashed()
            h.update(b"\x00queries")
            _hash_queries(h, self.queries)
            self._keys["queries"] = h.hexdigest()
        return self._keys["queries"]

    def split_key(self, split: str | None) -> str:
        """A hash of which queries ``split`` holds (None: every query): beside ``queries_hash``, what
        a run of the split searches."""
        key = ("split", split)
        if key not in self._keys:
            ids = sorted(self.queries) if split is None else sorted(q for q in self.qrels[split] if q in self.queries)
            self._keys[key] = hashlib.sha256(json.dumps(ids).encode()).hexdigest()
        return self._keys[key]

    def labels_key(self, split: str) -> str:
        """A hash of ``split``'s labels: what an evaluation on it, or a weight tuned on it, is measured
        against (a grade judged on another split leaves it as it was)."""
        key = ("labels", split)
        if key not in self._keys:
            self._keys[key] = hashlib.sha256(json.dumps(self.qrels[split], sort_keys=True).encode()).hexdigest()
        return self._keys[key]

    def with_queries(self, queries: dict[str, str], report: LoadReport | None = None,
                     fields: dict[str, dict[str, str]] | None = None) -> Dataset:
        """A copy with ``queries`` (and their segment ``fields``) added (its documents, labels and
        warnings shared, ``report``'s warnings appended). A query id already present must come with
        the same text."""
        for qid, text in queries.items():
            if qid in self.queries and self.queries[qid].strip() != text.strip():
                raise ValueError(f"query id {qid!r} is already in {self.name!r} with another text "
                                 f"({self.queries[qid]!r})")
        merged = LoadReport(list(self.report.warnings) + list(report.warnings if report else []))
        copy = Dataset(self.name, self.docs, {**self.queries, **queries}, self.qrels, merged,
                       {**self.query_fields, **(fields or {})})
        copy._corpus_hash, copy._docs_sha = self._corpus_hash, self._docs_sha
        return copy

    def without_queries(self, ids: Iterable[str]) -> Dataset:
        """A copy without the queries ``ids`` (their labels too); the same object when none is there."""
        gone = set(ids) & set(self.queries)
        if not gone:
            return self
        qrels = {split: {q: labels for q, labels in split_qrels.items() if q not in gone}
                 for split, split_qrels in self.qrels.items()}
        copy = Dataset(self.name, self.docs, {q: t for q, t in self.queries.items() if q not in gone}, qrels,
                       self.report, {q: f for q, f in self.query_fields.items() if q not in gone})
        copy._corpus_hash, copy._docs_sha = self._corpus_hash, self._docs_sha
        return copy

    def _documents_hashed(self) -> HASH:
        """A SHA-256 that has read every document (id, title, text as a JSON array each): one pass
        over the corpus, copied for each hash that starts with it (a million documents take seconds)."""
        if self._docs_sha is None:
            h = hashlib.sha256()
            docs = list(self.docs.values())
            for start in range(0, len(docs), 4096):
                h.update("".join([_as_json(d) for d in docs[start:start + 4096]]).encode())
            self._docs_sha = h
        return self._docs_sha.copy()

    @property
    def link_count(self) -> int:
        """How many links the documents hold (each a document's link to another, counted once)."""
        if self._link_count is None:
            self._link_count = sum(len(d.links) for d in self.docs.values())
        return self._link_count

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "documents": len(self.docs),
            **({"links": self.link_count} if self.link_count else {}),
            "queries": len(self.queries),
            "splits": {s: {"queries": len(q), "labels": sum(len(v) for v in q.values())}
                       for s, q in self.qrels.items()},
            "hash": self.content_hash[:12],
            "warnings": len(self.report.warnings),
        }
