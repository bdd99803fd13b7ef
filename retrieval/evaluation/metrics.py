"""The metric vocabulary: which metrics are computed and shown where, and how a value is written
with its 95% interval and significance mark, and what a comparison of two systems lets one conclude.

Metric names follow ranx / trec_eval (``ndcg@10``, ``recall@100``, ``map``, ``p@10``); ``pnr`` is
the positive-negative ratio of Liu et al., "Pre-trained Language Model for Web-scale Retrieval in
Baidu Search", KDD 2021 (arXiv:2106.03373), §6.2, computed in ``retrieval.evaluation.measures``. For labels
made by judging a pool (``retrieval.judging.judgments``), where most documents are unjudged: ``bpref``
(Buckley and Voorhees, "Retrieval Evaluation with Incomplete Information", SIGIR 2004) and
``judged@10``, the share of a system's top 10 that is judged; both computed through ir-measures.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from retrieval.evaluation.intervals import Interval

METRICS = ("ndcg@10", "mrr@10", "recall@10", "recall@100", "recall@1000", "map", "p@10")  # through ranx
PNR = "pnr"
BPREF = "bpref"
JUDGED_AT_10 = "judged@10"  # any "judged@K" is understood
NDCG_CONDENSED = "ndcg'@10"  # nDCG@10 of the list without its unjudged documents (Sakai, SIGIR 2007): evaluate.py
# each metric's name as written for a reader (its key is ir-measures' / ranx's lower case)
METRIC_NAMES = {"ndcg@10": "nDCG@10", "mrr@10": "MRR@10", "recall@10": "Recall@10", "recall@100": "Recall@100",
                "recall@1000": "Recall@1000", "map": "MAP", "p@10": "P@10", "pnr": "PNR", "bpref": "bpref",
                "judged@10": "judged@10", NDCG_CONDENSED: "nDCG'@10"}
JUDGING_METRICS = ("ndcg@10", BPREF, JUDGED_AT_10)  # labels from judging: nDCG beside bpref, and coverage
CONDENSED_DEPTH = 100  # nDCG'@10 condenses each list's top 100 (Sakai 2007; ``evaluate``): one value everywhere
EVALUATED = (*METRICS, BPREF, JUDGED_AT_10, NDCG_CONDENSED)  # what ``Workspace.evaluate`` computes and caches
# (PNR besides)
TABLE_METRICS = (*METRICS, PNR)  # the CLI's table
VIEW_METRICS = ("ndcg@10", "mrr@10", "recall@10", "recall@100", "map", "p@10", PNR, BPREF, JUDGED_AT_10,
                NDCG_CONDENSED)  # the app's
SUMMARY_METRICS = ("ndcg@10", "recall@100", "mrr@10")  # short summaries: training, one query, compression
COMPARE_METRICS = ("ndcg@10", "mrr@10", "recall@100", "map")  # what two runs can be compared on
PRIMARY = "ndcg@10"  # the one metric λ is tuned on and per-query wins and losses are counted in

SIGNIFICANCE_LEVEL = 0.05  # paired permutation test (``measures.compare``)
MAX_UNBOUNDED = 5  # with this many queries or fewer no sign-flip p falls below 0.05 (2 / 2⁵ > 0.05)
SIGNIFICANT = "†"


def significance_mark(p_value: float) -> str:
    """"†" when ``p_value`` is below ``SIGNIFICANCE_LEVEL``, else ""."""
    return SIGNIFICANT if p_value < SIGNIFICANCE_LEVEL else ""


def _undefined(value: object) -> bool:
    return not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value)


UNBOUNDED = f"[unbounded: ≤ {MAX_UNBOUNDED} queries]"  # a difference's interval on too few queries, in words


def interval_text(interval: Interval | Sequence[float] | None) -> str:
    """``[0.701, 0.765]`` (3 decimals) for an ``intervals.Interval``, or a [low, high] pair; "" when
    there is none (fewer than 2 queries). A difference's interval on 5 queries or fewer is every shift
    (the sign-flip test accepts them all: ``intervals.sign_flip_test``), written ``UNBOUNDED`` in words,
    as ``conclusion`` says it, never "[-inf, inf]"; an open end alone is written −∞ or ∞."""
    if interval is None:
        return ""
    low, high = (interval.low, interval.high) if isinstance(interval, Interval) else interval
    if _undefined(low) or _undefined(high):
        return ""
    if math.isinf(low) and math.isinf(high):
        return UNBOUNDED
    return f"[{_end(low)}, {_end(high)}]"


NUMERIC_ZERO = 1e-6  # an end within a millionth of 0 is floating-point noise: written 0.000


def _end(value: float) -> str:
    """One end, 3 decimals; a non-zero end that 3 decimals would write as 0 is written to its first
    significant digit (up to 6 decimals), so whether the interval holds 0 reads from it: "-0.0004",
    not "-0.000"; one within ``NUMERIC_ZERO`` of 0 is 0."""
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if abs(value) < NUMERIC_ZERO:
        return f"{0.0:.3f}"
    text, places = f"{value:.3f}", 3
    while float(text) == 0:
        places += 1
        text = f"{value:.{places}f}"
    return text


def cell(value: float | None, mark: str = "", interval: Interval | Sequence[float] | None = None) -> str:
    """A metric value as shown in every table: 4 decimals, its 95% interval when given, then its
    mark ("0.7338 [0.701, 0.765]†"); "—" when undefined."""
    if _undefined(value):
        return "—"
    bounds = interval_text(interval)
    return f"{value:.4f}{' ' + bounds if bounds else ''}{mark}"


def metric_name(metric: str) -> str:
    """``metric`` as written for a reader (``METRIC_NAMES``: "nDCG@10"); an unknown key as it is."""
    return METRIC_NAMES.get(metric, metric)


def p_text(p_value: float) -> str:
    """"p < 0.001" or "p = 0.012"."""
    return "p < 0.001" if p_value < 0.001 else f"p = {p_value:.3f}"


class Compared(Protocol):
    """What ``conclusion`` reads of a comparison (``measures.Comparison``, which imports this module)."""

    @property
    def queries(self) -> int: ...
    @property
    def metric(self) -> str: ...
    @property
    def same(self) -> bool: ...
    @property
    def p_value(self) -> float: ...
    @property
    def outcome(self) -> str: ...
    @property
    def delta(self) -> float: ...
    @property
    def interval(self) -> Interval: ...


def conclusion(label_a: str, label_b: str, cmp: Compared) -> str:
    """What a stakeholder can conclude from ``evaluate.compare(A, B)`` (B − A), in words, by one rule
    (the interval is the shifts the test does not reject, so a verdict comes with p < 0.05 and an
    interval that excludes 0, and never one without the other):
    "Hybrid beats BM25 by 0.053 [0.029, 0.078] nDCG@10 (p < 0.001, 300 queries)", or
    "Dense and BM25: not separable yet (Δ −0.032 [−0.071, 0.009], p = 0.121, 300 queries)"; with 5
    queries or fewer, where no p can fall below 0.05, it says so instead of an unbounded interval;
    where the two scored the same on every query, "Hybrid (3 systems) and Hybrid: the same on all
    300 queries (Δ 0 nDCG@10)" ("not separable yet" would promise that more queries might tell them
    apart)."""
    n, metric = cmp.queries, metric_name(cmp.metric)
    if n < 2:
        return f"{label_b} and {label_a}: too few queries to compare ({n} with labels)"
    if cmp.same:
        return f"{label_b} and {label_a}: the same on all {n} queries (Δ 0 {metric})"
    basis = f"{p_text(cmp.p_value)}, {n} queries"
    if cmp.outcome == "open" and cmp.interval.defined and math.isinf(cmp.interval.width):
        return (f"{label_b} and {label_a}: not separable on {n} queries (Δ {cmp.delta:+.3f} {metric}, "
                f"{p_text(cmp.p_value)}; a difference needs at least 6 queries to reach p < 0.05)")
    if cmp.outcome == "b":
        return f"{label_b} beats {label_a} by {cmp.delta:.3f} {interval_text(cmp.interval)} {metric} ({basis})"
    if cmp.outcome == "a":
        flipped = (-cmp.interval.high, -cmp.interval.low)
        return f"{label_a} beats {label_b} by {-cmp.delta:.3f} {interval_text(flipped)} {metric} ({basis})"
    return (f"{label_b} and {label_a}: not separable yet (Δ {cmp.delta:+.3f} {interval_text(cmp.interval)} "
            f"{metric}, {basis})")
