"""Where a system fails, by kind of query: per-segment metrics with 95% intervals, and the segments
where one system is significantly worse than another named first.

Segments of the evaluated queries (each query falls in one value of each kind):

* ``length`` — 1–2 words, 3–5 words, 6 or more (split on whitespace);
* ``digits`` — with digits (part numbers, codes, years, versions) or without;
* ``form`` — a question (ends with "?", or starts with an English question word: what, how, why,
  is, can, does, …) or keywords;
* ``language`` — detected per query (py3langid, as the corpus's language is); queries under
  ``MIN_WORDS_FOR_LANGUAGE`` words are "too short to tell";
* every segment field the queries file carries (a JSONL record's other values or its
  ``metadata``, a CSV/TSV file's other columns: ``Dataset.query_fields``) that takes between 2 and
  ``MAX_VALUES`` values on the evaluated queries.

A segment value with fewer than ``MIN_QUERIES`` queries is left out (no interval worth the name).
In each segment every pair of systems is compared (``measures.compare``: paired permutation test,
and the interval of the difference that test gives); with many segments and pairs some tests come out
below 0.05 by chance, so a difference counts as significant only when its p-value stays below
``metrics.SIGNIFICANCE_LEVEL`` after the Benjamini–Hochberg correction over every test of the
table (Benjamini and Hochberg, "Controlling the False Discovery Rate", JRSS B 57(1), 1995;
``scipy.stats.false_discovery_control``).
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from retrieval.data.dataset import Dataset
from retrieval.evaluation.intervals import Interval, mean_interval
from retrieval.evaluation.measures import Comparison, Evaluation, compare_pairs
from retrieval.evaluation.metrics import PRIMARY, SIGNIFICANCE_LEVEL

MIN_QUERIES = 5
MAX_VALUES = 20
MIN_WORDS_FOR_LANGUAGE = 3
QUESTION_WORDS = {"what", "how", "why", "when", "where", "who", "whom", "whose", "which", "is", "are", "was",
                  "were", "can", "could", "does", "do", "did", "should", "would", "will", "may", "has", "have"}
KINDS = ("length", "digits", "form", "language")


def length_of(text: str) -> str:
    n = len(text.split())
    return "1–2 words" if n <= 2 else "3–5 words" if n <= 5 else "6+ words"


def digits_of(text: str) -> str:
    return "with digits" if re.search(r"\d", text) else "without digits"


def form_of(text: str) -> str:
    words = text.strip().split()
    question = text.rstrip().endswith("?") or (bool(words) and words[0].lower().strip("¿¡,.") in QUESTION_WORDS)
    return "question" if question else "keywords"


def languages_of(texts: dict[str, str]) -> dict[str, str]:
    """Each query's detected language code, or "too short to tell"."""
    import py3langid

    return {q: py3langid.classify(t)[0] if len(t.split()) >= MIN_WORDS_FOR_LANGUAGE else "too short to tell"
            for q, t in texts.items()}


def segment_values(dataset: Dataset, qids: Iterable[str]) -> dict[str, dict[str, str]]:
    """``{kind: {query id: segment value}}`` for the built-in kinds and the file's segment fields
    (those with 2 to ``MAX_VALUES`` values on ``qids``)."""
    texts = {q: dataset.queries.get(q, "") for q in qids}
    out = {"length": {q: length_of(t) for q, t in texts.items()},
           "digits": {q: digits_of(t) for q, t in texts.items()},
           "form": {q: form_of(t) for q, t in texts.items()},
           "language": languages_of(texts)}
    names = dict.fromkeys(k for q in texts for k in dataset.query_fields.get(q, {}))
    for name in names:
        values = {q: dataset.query_fields[q][name] for q in texts if name in dataset.query_fields.get(q, {})}
        if 2 <= len(set(values.values())) <= MAX_VALUES and f"field {name}" not in out:
            out[f"field {name}"] = values
    return out


@dataclass
class Difference:
    """A significant difference in one segment: ``worse`` below ``better``."""

    worse: str
    better: str
    comparison: Comparison  # better − worse
    adjusted_p: float


@dataclass
class SegmentRow:
    kind: str  # "length", "digits", "form", "language", "field <name>"
    value: str
    queries: int
    means: dict[str, float]  # system label -> mean
    intervals: dict[str, Interval]
    differences: list[Difference] = field(default_factory=list)  # significant after the correction, largest first


def segment_table(evals: dict[str, Evaluation], dataset: Dataset, metric: str = PRIMARY) -> list[SegmentRow]:
    """Every segment value with at least ``MIN_QUERIES`` queries evaluated by every system, and not
    all of them (a kind every query shares repeats the overall means, row after row): each
    system's mean ``metric`` with its 95% interval, and the pairs of systems that differ
    significantly there (Benjamini–Hochberg over every test in the table); segments with such a
    difference first (the largest first), then by kind and size."""
    per = {label: ev.per_query.get(metric, {}) for label, ev in evals.items()}
    common = [q for q in next(iter(per.values()), {}) if all(q in p for p in per.values())]
    rows, tests = [], []
    for kind, values in segment_values(dataset, common).items():
        for value in sorted(set(values.values())):
            qids = [q for q in common if values.get(q) == value]
            if len(qids) < MIN_QUERIES or len(qids) == len(common):  # a kind every query shares tells nothing
                continue
            sub = {label: Evaluation({}, {metric: {q: p[q] for q in qids}}) for label, p in per.items()}
            row = SegmentRow(kind, value, len(qids),
                             {label: float(np.mean([per[label][q] for q in qids])) for label in per},
                             {label: mean_interval([per[label][q] for q in qids]) for label in per})
            tests += [(row, worse, better, cmp) for worse, better, cmp in compare_pairs(sub, metric)]
            rows.append(row)
    if tests:
        from scipy.stats import false_discovery_control

        adjusted = false_discovery_control([t[3].p_value for t in tests], method="bh")
        for (row, worse, better, cmp), p in zip(tests, adjusted):
            if p < SIGNIFICANCE_LEVEL and cmp.interval.excludes(0.0):
                row.differences.append(Difference(worse, better, cmp, float(p)))
    for row in rows:
        row.differences.sort(key=lambda d: -d.comparison.delta)
    kinds = {k: i for i, k in enumerate(KINDS)}
    return sorted(rows, key=lambda r: (not r.differences, -(r.differences[0].comparison.delta if r.differences else 0),
                                       kinds.get(r.kind, len(kinds)), r.kind, -r.queries, r.value))
