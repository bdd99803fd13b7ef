"""Relevance labels from two sources made one: the labels that came with the data and the
judgments made in the app (``retrieval.judgments``), as the splits every view evaluates with.

A judged pair of a query that already belongs to a split is merged into that split (the data's own
label wins a pair both have, unless ``prefer="judgments"``). Judged queries in no split form new
ones: when the data set has a ``train`` split they all go to ``judged`` (evaluated; λ keeps being
tuned on ``train``); otherwise a seeded share of them (``tune_share``) becomes ``train`` — λ is tuned
there (replacing the label-free λ only where the judged queries show it does significantly better,
``hybrid.fit_lambda``), and fine-tuning trains there — and the rest ``judged``, where everything is reported, so no
number is measured on the queries it was tuned on. Unjudged documents count as not relevant.
"""
from __future__ import annotations

import random

from .dataset import Dataset, Qrels
from .judgments import merge_labels

JUDGED = "judged"


def with_judgments(dataset: Dataset, judged: Qrels, prefer: str = "imported", tune_share: float = 0.5,
                   seed: int = 0) -> Dataset:
    """A copy of ``dataset`` whose splits hold the judgments too (module docstring)."""
    judged = {q: docs for q, docs in judged.items() if q in dataset.queries and docs}
    qrels: dict[str, Qrels] = {}
    placed: set[str] = set()
    for split, labels in dataset.qrels.items():
        mine = {q: docs for q, docs in judged.items() if q in labels}
        qrels[split] = merge_labels(labels, mine, prefer)
        placed |= set(mine)
    new = sorted(q for q in judged if q not in placed)
    if new:
        tune: set[str] = set()
        if "train" not in qrels:
            shuffled = list(new)
            random.Random(seed).shuffle(shuffled)
            tune = set(shuffled[:int(len(shuffled) * tune_share)])
        reported = {q: judged[q] for q in new if q not in tune}
        qrels = {JUDGED: {**qrels.get(JUDGED, {}), **reported}, **{s: v for s, v in qrels.items() if s != JUDGED}}
        if tune:
            qrels["train"] = {q: judged[q] for q in sorted(tune)}
    copy = Dataset(dataset.name, dataset.docs, dataset.queries, qrels, dataset.report, dataset.query_fields)
    copy._corpus_hash, copy._docs_sha = dataset._corpus_hash, dataset._docs_sha
    return copy
