"""Corpora of the kinds a label-free fusion has to survive, made from a BEIR data set (seeded,
built in memory, never written into the checkout):

* ``as_is`` — the data set itself (BM25 and dense usually close);
* ``transliterated`` — every Latin letter of documents and queries written in Greek letters (a
  language the encoder does not read: BM25 matches the same words as before, an English encoder
  sees strings of unknown word pieces);
* ``codes`` — known-item lookup by an identifier: every document gets a part number in its text
  ("Part number QX-4471."), and each query is one document's number (BM25 finds the exact token,
  an encoder spreads it over word pieces);
* ``withheld`` — paraphrase: every query word (by BM25's stems) taken out of the query's relevant
  documents, so the relevant documents say it in other words and the non-relevant ones still share
  the query's words (exact matching misses what a semantic model can still find: BM25 finds none);
* ``half withheld`` — the same with a seeded half of each query's stems taken out (partial
  vocabulary mismatch, as in real paraphrase: some words shared, some not).

Only the corpus and the queries change; the labels are the data set's own (``codes``: one per
query, its document), used to score the final lists and to decide which documents ``withheld``
edits — never by the fusion being measured.

Each kind is made for one split or several (``make(ds, "test")``, ``make(ds, "test", "train")``): with
several, the corpus is edited for all their queries (``withheld`` takes the words of every split's
queries out of its relevant documents; ``codes`` draws each split's queries from documents of the
same numbering), and every split keeps its labels. The first split's queries and edits are the same
either way.
"""
from __future__ import annotations

import random
import re

from retrieval.data.dataset import Dataset, Document
from retrieval.data.language import corpus_tokenizer

TOLERANCE = 0.01  # the target on every kind: never more than this below the better single system (nDCG@10)
GREEK = dict(zip("abcdefghijklmnopqrstuvwxyz", "αβψδεφγηιξκλμνοπϙρστθωςχυζ"))  # one letter for one
_GREEK_TABLE = str.maketrans({**GREEK, **{k.upper(): v.upper() for k, v in GREEK.items()}})


def only(ds: Dataset, *splits: str) -> Dataset:
    """The data set with the labels of ``splits`` alone (with one split: nothing to tune on)."""
    return Dataset(ds.name, ds.docs, ds.queries, {s: ds.qrels[s] for s in splits})


def _queries(ds: Dataset, splits: tuple[str, ...]) -> dict[str, str]:
    return {q: t for s in splits for q, t in ds.split_queries(s).items()}


def as_is(ds: Dataset, *splits: str, seed: int = 0) -> Dataset:
    return only(ds, *splits)


def transliterated(ds: Dataset, *splits: str, seed: int = 0) -> Dataset:
    docs = {i: Document(i, d.title.translate(_GREEK_TABLE), d.text.translate(_GREEK_TABLE)) for i, d in ds.docs.items()}
    queries = {q: t.translate(_GREEK_TABLE) for q, t in _queries(ds, splits).items()}
    return Dataset(f"{ds.name}-transliterated", docs, queries, {s: ds.qrels[s] for s in splits})


def codes(ds: Dataset, *splits: str, seed: int = 0, queries: int = 200) -> Dataset:
    rng = random.Random(f"{seed}:{splits[0]}")  # other numbers and documents for another first split
    letters = "ABCDEFGHJKLMNPQRSTUVWXYZ"
    numbers: dict[str, str] = {}
    taken: set[str] = set()
    for doc_id in ds.doc_ids:
        code = None
        while code is None or code in taken:
            code = f"{rng.choice(letters)}{rng.choice(letters)}-{rng.randrange(1000, 10000)}"
        taken.add(code)
        numbers[doc_id] = code
    docs = {i: Document(i, d.title, f"{d.text} Part number {numbers[i]}.") for i, d in ds.docs.items()}
    qs: dict[str, str] = {}
    qrels: dict[str, dict] = {}
    for split in splits:
        prefix = "code-" if split == splits[0] else f"code-{split}-"
        picked = rng.sample(ds.doc_ids, min(queries, len(ds.doc_ids)))
        qs.update({f"{prefix}{n}": numbers[doc] for n, doc in enumerate(picked)})
        qrels[split] = {f"{prefix}{n}": {doc: 1} for n, doc in enumerate(picked)}
    return Dataset(f"{ds.name}-codes", docs, qs, qrels)


def withheld(ds: Dataset, *splits: str, seed: int = 0, share: float = 1.0) -> Dataset:
    tokenizer = corpus_tokenizer([d.full_text for d in ds.docs.values()])
    queries = _queries(ds, splits)
    drop: dict[str, set[str]] = {}
    for split in splits:
        rng = random.Random(f"{seed}:{split}:withheld")
        for qid, labels in ds.qrels[split].items():
            stems = sorted(set(tokenizer(queries.get(qid, ""))))
            stems = set(rng.sample(stems, round(share * len(stems)))) if share < 1 else set(stems)
            for doc_id, grade in labels.items():
                if grade > 0 and doc_id in ds.docs:
                    drop.setdefault(doc_id, set()).update(stems)

    def strip(text: str, stems: set[str]) -> str:
        cut = [(a, b) for a, b, stem in tokenizer.spans(text) if stem in stems]
        for a, b in reversed(cut):
            text = text[:a] + text[b:]
        return re.sub(r"\s+", " ", text).strip()

    docs = {i: Document(i, strip(d.title, drop[i]), strip(d.text, drop[i])) if i in drop else d
            for i, d in ds.docs.items()}
    return Dataset(f"{ds.name}-withheld-{share:g}", docs, queries, {s: ds.qrels[s] for s in splits})


def half_withheld(ds: Dataset, *splits: str, seed: int = 0) -> Dataset:
    return withheld(ds, *splits, seed=seed, share=0.5)


KINDS = {"as is": as_is, "transliterated": transliterated, "codes": codes, "half withheld": half_withheld,
         "withheld": withheld}
