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
* WLP (Wiki Link Prediction) — a random sentence of the first section (``first_section``) of a
  document B is the query; a passage of another document A that links to B (``Document.links``) is
  the document: "the document d is a passage from another page where there is a hyperlink link to
  the page of q_3" (§3). A document is never paired with itself.
* Combinations (``ict+bfs``, ``ict+bfs+wlp``, …): "each pair is uniformly sampled from the three
  pre-training tasks" (§4.1): each task gives an equal share of the pairs asked for.
"""
from __future__ import annotations

import math
import random
import re
from array import array
from dataclasses import dataclass

from retrieval import numbers
from retrieval.data.dataset import Dataset

SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+\S.*$", re.MULTILINE)  # a Markdown heading line (pages keep them)
PARAGRAPH = re.compile(r"\n[ \t]*\n")
TASKS = ("ict", "bfs", "wlp")  # the paper's three tasks, in the order a combination names them
LINKED_TASKS = ("wlp",)  # the tasks that need links between the documents
# ``pseudo_pairs``' kinds and ``TrainConfig.pretrain``'s: each task alone, and every combination, in TASKS' order
PRETRAIN_TASKS = ("ict", "bfs", "wlp", "ict+bfs", "ict+wlp", "bfs+wlp", "ict+bfs+wlp")


@dataclass(frozen=True)
class Pair:
    """One positive training pair. ``doc_id`` is None for pseudo documents not in the corpus."""

    query: str
    doc_text: str
    query_id: str | None = None
    doc_id: str | None = None
    task: str = ""  # the pseudo-pair task that made it (``TASKS``); "" for a labelled pair


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
    """The sentences of ``text`` of three words or more; a page's heading lines are not sentences."""
    if "#" in text:
        text = HEADING.sub("\n", text)
    return [s.strip() for s in SENTENCE.split(text) if len(s.split()) >= 3]


def first_section(text: str) -> str:
    """A document's first section (Chang et al. §3: "the first section of a Wikipedia page", its lead):
    the text before its first heading that follows some text (a page read from Markdown or HTML keeps
    its headings, ``retrieval.data.readers.pages``); in a text without one, its first paragraph (up to
    the first blank line); in a text of one paragraph, the whole text."""
    body = text.strip()
    after = 0  # where the last heading so far ends: before it, headings alone
    for heading in HEADING.finditer(body):
        if body[after:heading.start()].strip():
            return body[after:heading.start()].strip()
        after = heading.end()
    return PARAGRAPH.split(body[after:].strip(), 1)[0].strip()


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
        out.append(Pair(sents[i], f"{doc.title}. {body}" if doc.title else body, None, None, "ict"))
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
        out.append(Pair(query, " ".join(body[start:start + window]), None, None, "bfs"))
    rng.shuffle(out)
    return out[:n] if n else out


def wlp_pairs(dataset: Dataset, n: int | None = None, seed: int = 42, window: int = 2) -> list[Pair]:
    """WLP: for a link from document A to document B (``Document.links``, A ≠ B), a random sentence of
    B's first section (``first_section``) against a random passage (a window of ``window`` sentences)
    of A; one pair per link, at most ``n`` of them drawn at random (seeded). A link whose B has no
    sentence in its first section, or whose A has none at all, makes no pair."""
    rng = random.Random(seed)
    docs = dataset.docs
    ids = list(docs)
    row = {ident: i for i, ident in enumerate(ids)}
    leads: dict[int, bool] = {}
    sources, targets = array("q"), array("q")
    for a, doc in enumerate(docs.values()):
        if not doc.links or not sentences(doc.text):
            continue
        for linked in doc.links:
            b = row.get(linked, a)
            if b == a:
                continue
            if b not in leads:
                leads[b] = bool(sentences(first_section(docs[ids[b]].text)))
            if leads[b]:
                sources.append(a)
                targets.append(b)
    total = len(sources)
    out = []
    for i in rng.sample(range(total), min(n, total) if n else total):  # in a random order
        linking, linked_to = docs[ids[sources[i]]], docs[ids[targets[i]]]
        passage = sentences(linking.text)
        start = rng.randrange(max(1, len(passage) - window + 1))
        out.append(Pair(rng.choice(sentences(first_section(linked_to.text))), " ".join(passage[start:start + window]),
                        None, None, "wlp"))
    return out


_MAKERS = {"ict": ict_pairs, "bfs": bfs_pairs, "wlp": wlp_pairs}


def tasks_of(kind: str) -> tuple[str, ...]:
    """The tasks a pseudo-pair kind combines (``"ict+bfs+wlp"`` → ict, bfs, wlp); a ValueError in one
    line for a kind that is not one of ``PRETRAIN_TASKS``."""
    if kind not in PRETRAIN_TASKS:
        raise ValueError(f"unknown pseudo-pair task {kind!r}; choose from {', '.join(PRETRAIN_TASKS)}")
    return tuple(kind.split("+"))


def needs_links(kind: str | None) -> bool:
    """Whether a pseudo-pair kind holds a task made from links between documents (WLP)."""
    return bool(kind) and any(t in LINKED_TASKS for t in tasks_of(kind or ""))


def check_links(dataset: Dataset, kind: str | None) -> None:
    """A ValueError in one line when ``kind`` needs links and no document of ``dataset`` has one."""
    if needs_links(kind) and not dataset.link_count:
        raise ValueError(f"{dataset.name} has no links between its documents: WLP pairs are made from them (a "
                         "'links' field of document ids, or a folder of Markdown or HTML pages); choose ict, bfs or "
                         "ict+bfs")


def pseudo_pairs(dataset: Dataset, kind: str, n: int | None = None, seed: int = 42) -> list[Pair]:
    """The pairs of one task (``ict``, ``bfs``, ``wlp``) or of a combination of them (``ict+bfs+wlp``),
    at most ``n``. A combination samples each pair uniformly from its tasks (Chang et al. §4.1): each
    of its k tasks makes ``n // k`` of them (the last ones one more, to make ``n``), the i-th seeded
    with ``seed + i``, and the pairs are shuffled together (seeded); a task that can make fewer makes
    what it can (``Pair.task`` says which made each). Without ``n``, each makes all it can."""
    tasks = tasks_of(kind)
    if len(tasks) == 1:
        return _MAKERS[kind](dataset, n, seed)
    k = len(tasks)
    shares = [None] * k if n is None else [n // k + (1 if i >= k - n % k else 0) for i in range(k)]
    mixed = [pair for i, (task, share) in enumerate(zip(tasks, shares, strict=True))
             for pair in _MAKERS[task](dataset, share, seed + i)]
    random.Random(seed).shuffle(mixed)
    return mixed


def counted(pairs: list[Pair]) -> dict[str, int]:
    """How many of ``pairs`` each task made, in ``TASKS``' order."""
    made = {task: 0 for task in TASKS}
    for pair in pairs:
        if pair.task in made:
            made[pair.task] += 1
    return {task: c for task, c in made.items() if c}
