"""The metric vocabulary: which metrics are computed and shown where, and how a value is written
with its significance mark.

Metric names follow ranx / trec_eval (``ndcg@10``, ``recall@100``, ``map``, ``p@10``); ``pnr`` is
the positive-negative ratio of Liu et al., "Pre-trained Language Model for Web-scale Retrieval in
Baidu Search", KDD 2021 (arXiv:2106.03373), §6.2, computed in ``retrieval.evaluate``. For labels
made by judging a pool (``retrieval.judgments``), where most documents are unjudged: ``bpref``
(Buckley and Voorhees, "Retrieval Evaluation with Incomplete Information", SIGIR 2004) and
``judged@10``, the share of a system's top 10 that is judged; both computed through ir-measures.
"""
from __future__ import annotations

import math

METRICS = ("ndcg@10", "mrr@10", "recall@10", "recall@100", "recall@1000", "map", "p@10")  # through ranx
PNR = "pnr"
BPREF = "bpref"
JUDGED_AT_10 = "judged@10"  # any "judged@K" is understood
JUDGING_METRICS = ("ndcg@10", BPREF, JUDGED_AT_10)  # labels from judging: nDCG beside bpref, and coverage
EVALUATED = (*METRICS, BPREF, JUDGED_AT_10)  # what ``Workspace.evaluate`` computes and caches (PNR besides)
TABLE_METRICS = (*METRICS, PNR)  # the CLI's table
VIEW_METRICS = ("ndcg@10", "mrr@10", "recall@10", "recall@100", "map", "p@10", PNR, BPREF, JUDGED_AT_10)  # the app's
SUMMARY_METRICS = ("ndcg@10", "recall@100", "mrr@10")  # short summaries: training, one query, compression
COMPARE_METRICS = ("ndcg@10", "mrr@10", "recall@100", "map")  # what two runs can be compared on
PRIMARY = "ndcg@10"  # the one metric λ is tuned on and per-query wins and losses are counted in

SIGNIFICANCE_LEVEL = 0.05  # paired permutation test (``evaluate.compare``)
SIGNIFICANT = "†"


def significance_mark(p_value: float) -> str:
    """"†" when ``p_value`` is below ``SIGNIFICANCE_LEVEL``, else ""."""
    return SIGNIFICANT if p_value < SIGNIFICANCE_LEVEL else ""


def cell(value, mark: str = "") -> str:
    """A metric value as shown in every table: 4 decimals, then its mark; "—" when undefined."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
        return "—"
    return f"{value:.4f}{mark}"
