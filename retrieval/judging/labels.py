"""Relevance labels from two sources made one: the labels that came with the data and the
judgments made in the app (``retrieval.judging.judgments``), as the splits every view evaluates with; and
the counts of judged queries every view reports. ``with_stored_judgments`` is the data set with the
store's judgments of its corpus, the one way the app's views and the command line read labels.

A judged pair of a query that already belongs to a split is merged into that split (the data's own
label wins a pair both have, unless ``prefer="judgments"``). Judged queries in no split all go to
``judged``, where everything is reported: every judged query is evaluated. λ, the CLEAR hybrid's
weight, is tuned on ``train`` where the data set has one; otherwise on the judged queries,
cross-fitted when ``judged`` itself is evaluated (``judged_folds``: each half is ranked with the λ
tuned on the other half, ``systems.hybrid.lambda_for``), so no query is measured at a λ tuned on
itself. Unjudged documents count as not relevant.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from retrieval.data.dataset import Dataset, Qrels
from retrieval.judging import seen
from retrieval.judging.judgments import PREFER, judgments_to_qrels, merge_labels

if TYPE_CHECKING:
    from retrieval.sharing.owners import Viewer
    from retrieval.store import Store

JUDGED = "judged"
FOLDS_SEED = 0  # the seed of ``judged_folds``: in the cache keys of the runs it shapes


@dataclass(frozen=True)
class JudgedCounts:
    """How many queries some labels (judgments, or a split's qrels) cover, each count with its meaning."""

    queries: int  # queries with at least one judged pair
    relevant: int  # of those, queries with a relevant (> 0) document: the ones every metric is evaluated on
    pairs: int  # (query, document) pairs judged


def judged_counts(labels: Qrels) -> JudgedCounts:
    """The counts of ``labels`` (``JudgedCounts``): the one count of judged queries every view shows."""
    labelled = {q: docs for q, docs in labels.items() if docs}
    return JudgedCounts(len(labelled), sum(any(g > 0 for g in docs.values()) for docs in labelled.values()),
                        sum(len(docs) for docs in labelled.values()))


def judged_folds(labels: Qrels, seed: int = FOLDS_SEED) -> tuple[frozenset[str], frozenset[str]]:
    """Two seeded halves of the labelled queries for cross-fitting λ: the queries with a relevant
    document are dealt out alternately after a seeded shuffle, then those without, so each half has
    half the queries that can tune λ (and a query's half does not depend on the others' grades)."""
    relevant = sorted(q for q, docs in labels.items() if any(g > 0 for g in docs.values()))
    rest = sorted(q for q, docs in labels.items() if docs and not any(g > 0 for g in docs.values()))
    halves: tuple[list[str], list[str]] = ([], [])
    for group in (relevant, rest):
        random.Random(seed).shuffle(group)
        for i, q in enumerate(group):
            halves[i % 2].append(q)
    return frozenset(halves[0]), frozenset(halves[1])


def with_judgments(dataset: Dataset, judged: Qrels, prefer: str = "imported") -> Dataset:
    """A copy of ``dataset`` whose splits hold the judgments too (module docstring)."""
    judged = {q: docs for q, docs in judged.items() if q in dataset.queries and docs}
    qrels: dict[str, Qrels] = {}
    placed: set[str] = set()
    for split, labels in dataset.qrels.items():
        mine = {q: docs for q, docs in judged.items() if q in labels}
        qrels[split] = merge_labels(labels, mine, prefer)
        placed |= set(mine)
    new = {q: judged[q] for q in sorted(judged) if q not in placed}
    if new:
        qrels = {JUDGED: {**qrels.get(JUDGED, {}), **new}, **{s: v for s, v in qrels.items() if s != JUDGED}}
    copy = Dataset(dataset.name, dataset.docs, dataset.queries, qrels, dataset.report, dataset.query_fields)
    copy._corpus_hash, copy._docs_sha = dataset._corpus_hash, dataset._docs_sha
    if "queries" in dataset._keys:  # the same documents and queries: the same runs
        copy._keys["queries"] = dataset._keys["queries"]
    return copy


def with_stored_judgments(dataset: Dataset, store: Store | None, viewer: Viewer | None = None,
                          prefer: str = "imported") -> tuple[Dataset, JudgedCounts]:
    """``dataset`` with the judgments ``store`` keeps for its corpus as labels, as every view and
    command evaluates with (``with_judgments``): several judges' grades of a pair merged by the lower
    median (``judgments.judgments_to_qrels``); with ``viewer`` only the judges it counts (on a shared
    deployment its own and the published ones: ``Store.judgments``), without, every judge's (the
    command line, a deployment that is not shared); the data's own label wins a pair both have unless
    ``prefer`` is "judgments". Returns the data set (the same object when the store holds no
    judgment of its queries) and the counts of the judgments it took (``JudgedCounts``).

    Args:
        dataset: The data set as loaded (with its own labels, if any).
        store: The store; None adds nothing.
        viewer: Whose judges count (``retrieval.sharing.owners.Viewer``); None: every judge.
        prefer: "imported" (the data's own label wins a pair both label) or "judgments".

    Returns:
        The data set with the judgments, and their counts.

    Raises:
        ValueError: ``prefer`` is neither.
    """
    if prefer not in PREFER:
        raise ValueError(f"prefer is one of {', '.join(PREFER)}, not {str(prefer)[:40]!r}")
    rows = seen.judgments(store, dataset, viewer)
    judged = {q: docs for q, docs in judgments_to_qrels(rows).items() if q in dataset.queries and docs}
    if not judged:
        return dataset, judged_counts({})
    return with_judgments(dataset, judged, prefer), judged_counts(judged)
