"""Training pairs: from labelled queries (a train split, or a seeded cold-start split), or pseudo
query–document pairs from unlabeled text (ICT and BFS).

Cold start (Peiyang Liu, Sen Wang, Xi Wang, Wei Ye, Shikun Zhang, "QuadrupletBERT: An Efficient
Model For Embedding-Based Large-Scale Retrieval", NAACL-HLT 2021, §4.1, uses 5%/95% and 80%/20%
train/test splits by question): the queries of one labelled split are shuffled with a seed and cut
in two; the result is a new ``Dataset`` whose ``train`` and ``test`` splits never share a query, so
a query used for training is never evaluated on.

Pseudo pairs (Wei-Cheng Chang, Felix X. Yu, Yin-Wen Chang, Yiming Yang, Sanjiv Kumar, "Pre-training
Tasks for Embedding-based Large-scale Retrieval", ICLR 2020, arXiv:2002.03932, §3):
* ICT (Inverse Cloze Task) — a random sentence of a passage is the query; the passage without
  that sentence is the document.
* BFS (Body First Selection) — a sentence from the document's first section (its title or lead
  sentence) is the query; another passage (sentence window) of the same document is the document.
"""
from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

from retrieval import numbers
from retrieval.data.dataset import Dataset

SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
PRETRAIN_TASKS = ("ict", "bfs", "ict+bfs")  # pseudo-pair tasks: ``pseudo_pairs``' kinds, ``TrainConfig.pretrain``


@dataclass(frozen=True)
class Pair:
    """One positive training pair. ``doc_id`` is None for pseudo documents not in the corpus."""

    query: str
    doc_text: str
    query_id: str | None = None
    doc_id: str | None = None


def labelled_pairs(dataset: Dataset, split: str, min_label: int = 1) -> list[Pair]:
    """(query, relevant document) for every label ≥ ``min_label`` of ``split``."""
    if split not in dataset.qrels:
        raise ValueError(f"no split {split!r} (have: {', '.join(dataset.splits) or 'none'})")
    out = []
    for qid, docs in dataset.qrels[split].items():
        if qid not in dataset.queries:
            continue
        for doc_id, label in docs.items():
            if label >= min_label and doc_id in dataset.docs:
                out.append(Pair(dataset.queries[qid], dataset.docs[doc_id].full_text, qid, doc_id))
    return out


def most_pairs_per_epoch(dataset: Dataset, positives_per_query: int) -> int:
    """The most labelled pairs (``labelled_pairs``) an epoch on any one split of ``dataset`` draws:
    ``positives_per_query`` of each query's (every one when 0). Whichever split trains, an epoch draws
    no more (a cold-start part of a split, or what the held-out check leaves, draws fewer)."""
    most = 0
    for qrels in dataset.qrels.values():
        drawn = 0
        for qid, docs in qrels.items():
            if qid in dataset.queries:
                positives = sum(1 for doc_id, label in docs.items() if label >= 1 and doc_id in dataset.docs)
                drawn += min(positives, positives_per_query) if positives_per_query else positives
        most = max(most, drawn)
    return most


def known_positives(dataset: Dataset) -> dict[str, set[str]]:
    """Every document labelled relevant (> 0) for each query, over all splits: never a negative."""
    pos: dict[str, set[str]] = {}
    for qrels in dataset.qrels.values():
        for qid, docs in qrels.items():
            pos.setdefault(qid, set()).update(d for d, v in docs.items() if v > 0)
    return pos


def check_train_fraction(value: object) -> float:
    """A cold-start split's training fraction: a number (``retrieval.numbers``) strictly between 0
    and 1; a ValueError in one line otherwise."""
    try:
        fraction = numbers.number(value, "train_fraction")
    except ValueError:
        fraction = math.nan
    if not 0 < fraction < 1:
        raise ValueError(f"train_fraction must be between 0 and 1, not {numbers.shown(value)}")
    return fraction


def cold_start_split(dataset: Dataset, split: str, train_fraction: float, seed: int = 42) -> Dataset:
    """A copy of ``dataset`` whose ``train``/``test`` splits partition ``split``'s queries."""
    check_train_fraction(train_fraction)
    if split not in dataset.qrels:
        raise ValueError(f"no split {split!r} (have: {', '.join(dataset.splits) or 'none'})")
    qids = sorted(dataset.qrels[split])
    random.Random(seed).shuffle(qids)
    cut = max(1, min(len(qids) - 1, round(len(qids) * train_fraction)))
    train, test = set(qids[:cut]), set(qids[cut:])
    qrels = {"train": {q: v for q, v in dataset.qrels[split].items() if q in train},
             "test": {q: v for q, v in dataset.qrels[split].items() if q in test}}
    name = f"{dataset.name}[{split} {round(train_fraction * 100)}/{round((1 - train_fraction) * 100)} seed {seed}]"
    return Dataset(name, dataset.docs, dataset.queries, qrels, dataset.report)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in SENTENCE.split(text) if len(s.split()) >= 3]


def ict_pairs(dataset: Dataset, n: int | None = None, seed: int = 42, keep_sentence: float = 0.0) -> list[Pair]:
    """ICT: one random sentence of a passage as the query, the rest of the passage as the document.

    ``keep_sentence`` is the probability of leaving the sentence in the document (ICT's own paper,
    Kenton Lee, Ming-Wei Chang, Kristina Toutanova, "Latent Retrieval for Weakly Supervised Open
    Domain Question Answering", ACL 2019, arXiv:1906.00300, keeps it 10% of the time so the model
    still learns lexical matching); default 0, as in Chang et al. §3.
    """
    rng = random.Random(seed)
    out = []
    for doc in dataset.docs.values():
        sents = sentences(doc.text)
        if len(sents) < 2:
            continue
        i = rng.randrange(len(sents))
        rest = sents if rng.random() < keep_sentence else sents[:i] + sents[i + 1:]
        body = " ".join(rest)
        out.append(Pair(sents[i], f"{doc.title}. {body}" if doc.title else body, None, None))
    rng.shuffle(out)
    return out[:n] if n else out


def bfs_pairs(dataset: Dataset, n: int | None = None, seed: int = 42, window: int = 2) -> list[Pair]:
    """BFS: the title (or, without one, the lead sentence) against a later window of sentences."""
    rng = random.Random(seed)
    out = []
    for doc in dataset.docs.values():
        sents = sentences(doc.text)
        query, body = (doc.title, sents) if doc.title else (sents[0] if sents else "", sents[1:])
        if not query or len(body) < 1:
            continue
        start = rng.randrange(max(1, len(body) - window + 1))
        out.append(Pair(query, " ".join(body[start:start + window]), None, None))
    rng.shuffle(out)
    return out[:n] if n else out


def pseudo_pairs(dataset: Dataset, kind: str, n: int | None = None, seed: int = 42) -> list[Pair]:
    """ICT, BFS or half of each (``"ict+bfs"``), at most ``n`` pairs."""
    if kind == "ict":
        return ict_pairs(dataset, n, seed)
    if kind == "bfs":
        return bfs_pairs(dataset, n, seed)
    if kind == "ict+bfs":
        halves = (None, None) if n is None else (n // 2, n - n // 2)
        mixed = ict_pairs(dataset, halves[0], seed) + bfs_pairs(dataset, halves[1], seed + 1)
        random.Random(seed).shuffle(mixed)
        return mixed
    raise ValueError(f"unknown pseudo-pair task {kind!r}; choose from {', '.join(PRETRAIN_TASKS)}")
