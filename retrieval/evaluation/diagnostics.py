"""Checks that say when the numbers should not be trusted: labels that look broken, and a corpus
in a language the dense encoder was not trained on. Plain data; the views word the warnings."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from retrieval.data.language import LanguageGuess, detect_language, encoder_mismatch
from retrieval.systems import BM25, DENSE
from retrieval.workspace import Workspace


@dataclass(frozen=True)
class LabelHealth:
    """How a split's relevance labels sit with what the systems retrieve."""

    split: str
    queries: int  # labelled queries with at least one relevant (> 0) label
    found_by_none: int  # of those, queries whose relevant documents no system ranks within ``depth``
    depth: int
    empty_targets: int  # relevant labels on documents with no indexable term (empty after tokenizing)

    @property
    def looks_broken(self) -> bool:
        """Most labelled queries have no relevant document in any system's top ``depth``, or labels
        point at empty documents: likely ids from another corpus, or a shifted qrels file."""
        return self.found_by_none * 2 > self.queries or self.empty_targets > 0


def label_health(ws: Workspace, split: str, systems: Sequence[str] = (BM25, DENSE),
                 depth: int | None = None) -> LabelHealth:
    """``LabelHealth`` of ``split`` from the systems' cached runs. ``depth`` defaults to 100, or a
    tenth of a smaller corpus (at least 10): on a few hundred documents a top 100 holds a third of
    the corpus, and chance alone would place a misplaced label there. Systems still waiting for
    the dense index (``Workspace.pending``) are left out."""
    depth = depth or max(10, min(100, len(ws.dataset.docs) // 10))
    qrels = ws.dataset.qrels[ws.require_split(split)]
    waiting = ws.pending(systems)
    runs = {s: ws.run(s, split) for s in systems if s not in waiting}
    relevant = {q: {d for d, v in labels.items() if v > 0} for q, labels in qrels.items()}
    relevant = {q: docs for q, docs in relevant.items() if docs}
    missed = sum(1 for q, docs in relevant.items()
                 if not any(d in docs for run in runs.values() for d, _ in run.get(q, [])[:depth]))
    empty = sum(1 for docs in relevant.values() for d in docs
                if d in ws.doc_row and ws.bm25.doc_len[ws.doc_row[d]] == 0)
    return LabelHealth(split, len(relevant), missed, depth, empty)


@dataclass(frozen=True)
class LanguageCheck:
    guess: LanguageGuess
    encoder: str
    mismatch: bool  # an English-only encoder on a corpus mostly in another language


def language_check(ws: Workspace) -> LanguageCheck:
    """The corpus's language (a seeded sample) against the workspace's encoder."""
    guess = detect_language([d.full_text for d in ws.dataset.docs.values()])
    return LanguageCheck(guess, ws.encoder.name, encoder_mismatch(guess, ws.encoder.name))
