"""Evaluation tables as plain data: every system's metrics with significance marks, Recall@k at
many depths, and each query's metric under each system (the wins and losses against BM25).

* ``metrics_table`` — every system of one or more workspaces (base, fine-tuned, compressed
  indexes), each mean with its 95% interval over queries (``intervals``), and "†" where a system
  differs from BM25 (p below ``metrics.SIGNIFICANCE_LEVEL``, paired permutation test,
  ``measures.significance_marks``).
* ``covered_comparisons`` — every pair of those systems on one metric: the paired difference, its interval
  and p-value (``measures.compare``), the separable pairs first, each with the coverage gate's
  ``coverage.Verdict`` (on labels judged in the app, no verdict where a system's top 10 is not
  judged enough).
* ``table_coverage`` — each system's judged@10 (``coverage.coverages``) and the depth the labels
  judged in the app were pooled to (``coverage.pool_depth``): ``metrics_table`` marks the metrics
  that read deeper than that pool as not measurable.
* ``judged_pool`` — on labels judged in the app, what the judged pool fixes exactly
  (``pool_verdict.PoolVerdict``: success@10 and P@10 over every judged query, the queries every
  system fails on, and the pairs still to judge for exact figures): what Evaluate leads with there.
* ``headline`` — the one verdict Evaluate opens with: the best system on the mean, and whether the
  judgments carry calling it the best (``Headline``).
* ``recall_at_ks`` — Recall@k = |relevant ∩ top k| / |relevant|, averaged over queries, for k from
  1 to 1000, computed by ranx from the cached runs, with 95% intervals.
* ``per_query_table`` — each query's nDCG@10 under each system, the queries where another system
  gains most over the first listed first.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from retrieval import numbers
from retrieval.data.dataset import Qrels
from retrieval.data.run import Run
from retrieval.evaluation.measures import (
    Comparison,
    Evaluation,
    compare,
    compare_pairs,
    evaluate_run,
    positive_qrels,
    significance_marks,
)
from retrieval.evaluation.metrics import JUDGED_AT_10, METRICS, PRIMARY
from retrieval.judging import seen
from retrieval.judging.coverage import (
    Coverage,
    condensed_ndcg,
    coverages,
    from_judging,
    gated_marks,
    judged_verdict,
    measurable,
    pool_depth,
    skew,
)
from retrieval.judging.judgments import DEPTH, disagreement
from retrieval.judging.pool_verdict import PoolVerdict, judged_depth, judged_queries, pool_score, pool_verdict
from retrieval.sharing.owners import Viewer
from retrieval.systems import BASE_SYSTEMS, BM25, DENSE, label
from retrieval.workspace import Workspace

RECALL_KS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
Entry = tuple[str, Workspace, str]  # (label shown, workspace, system name)


Systems = Sequence[str] | Mapping[str, Sequence[str]]  # every workspace's systems, or {label: systems}

def system_entries(workspaces: Workspace | dict[str, Workspace], split: str, systems: Systems) -> list[Entry]:
    """(label, workspace, system) for each system of each workspace, BM25 first and only once.

    ``workspaces``: one workspace, or ``{label: workspace}`` (e.g. base, fine-tuned, int8) whose
    systems are labelled "Dense · int8". ``systems``: the systems of every workspace, or
    ``{label: systems}``, each workspace's own (a fine-tuned encoder's dense and hybrid beside every
    system of the base). A system whose parameters repeat an earlier one (BM25 shared by
    ``with_model`` / ``with_index`` siblings) is listed once.
    """
    named = workspaces if isinstance(workspaces, dict) else {"": workspaces}
    entries, seen = [], set()
    for ws_label, ws in named.items():
        own = systems.get(ws_label, ()) if isinstance(systems, dict) else systems
        for s in (BM25, *[s for s in own if s != BM25]):
            key = json.dumps([s, ws.system_params(s, split)], sort_keys=True, default=str)
            if key in seen:
                continue
            seen.add(key)
            entries.append((label(s) if s == BM25 or not ws_label else f"{label(s)} · {ws_label}", ws, s))
    return entries


def metrics_table(ws_by_label: Workspace | dict[str, Workspace], split: str, systems: Systems = BASE_SYSTEMS,
                  metrics: Sequence[str] = METRICS, viewer: Viewer | None = None) -> list[dict[str, Any]]:
    """One row per system: ``{"label", "system", "metrics": {m: mean}, "intervals": {m: Interval},
    "marks": {m: "†"}, "queries": evaluated queries, "measurable": {m: bool}, "pool_depth": int | None}``.

    BM25 always comes first: it is the base of the significance marks, which labels judged in the app
    give only between systems whose top 10 is judged enough (``coverage.gated_marks``).
    ``measurable`` is False for a metric that reads deeper than the pool the split's labels judged
    in the app were judged to (``coverage.measurable``; ``pool_depth`` None where no label came from
    judging in the app). ``viewer``: whose judgments tell which labels were judged in the app (a
    session of a shared deployment counts its own judges' and the published ones: ``Store.judgments``;
    None, every judge's); every function here that reads judgments takes it.
    """
    entries = system_entries(ws_by_label, split, systems)
    evals = {name: ws.evaluate(s, split) for name, ws, s in entries}
    base = entries[0][0]
    marks = significance_marks(evals, base, [m for m in metrics if not m.startswith("judged@")])  # coverage: no test
    judgments = _judgments(entries[0][1], viewer)
    runs = _runs(entries, split) if _pooled(entries, split, judgments) else None  # read only where needed
    depth = judged_pool_depth(entries, split, runs, judgments)
    covered: dict[str, Coverage] = {}
    if depth is not None and runs is not None:  # labels judged in the app: no mark where a top 10 is not judged
        covered = table_coverage(ws_by_label, split, systems, entries, runs, judgments)[0]
        marks = gated_marks(marks, covered, base)
    elif any(g <= 0 for docs in entries[0][1].dataset.qrels[split].values() for g in docs.values()):
        marks = _unskewed_marks(marks, entries, split, judgments, base)
    rows = [{"label": name, "system": s, "metrics": {m: evals[name].mean.get(m, float("nan")) for m in metrics},
             "intervals": {m: evals[name].interval(m) for m in metrics}, "marks": marks.get(name, {}),
             "queries": len(evals[name].per_query.get(PRIMARY, {})),
             "measurable": {m: measurable(m, depth) for m in metrics}, "pool_depth": depth} for name, _, s in entries]
    if covered and runs is not None:
        _pool_figures(rows, runs, entries[0][1].dataset.qrels[split], covered, metrics)
    return rows


def _unskewed_marks(marks: dict[str, Any], entries: list[Entry], split: str, judgments: list[dict[str, Any]],
                    base: str) -> dict[str, Any]:
    """A data set's own labels that judge a pool: no nDCG@10 mark against ``base`` for a system the
    labels cover differently beyond noise (``coverage.skew``), a verdict those labels cannot carry."""
    covered = coverages(_runs(entries, split), entries[0][1].dataset.qrels[split], judgments)
    if base not in covered:
        return marks
    return {name: m for name, m in marks.items() if name not in covered or skew(covered[base], covered[name]) is None}


def _pool_figures(rows: list[dict[str, Any]], runs: dict[str, Run], qrels: Qrels, covered: dict[str, Coverage],
                  metrics: Sequence[str]) -> None:
    """On labels judged in the app, the figures the pool fixes, over every labelled query of the split
    (a query judged with nothing relevant found counts, as trec_eval counts it): P@k
    (``pool_verdict.pool_score``; ranx leaves such queries out, which inflates it) and judged@10 as
    the coverage gate reads it (``coverage.coverages``), so a page shows one judged@10."""
    labelled = [q for q, docs in qrels.items() if docs]
    for row in rows:
        for m in metrics:
            if m.startswith("p@") and numbers.is_count(m[2:]):
                score = pool_score(row["label"], runs[row["label"]], qrels, labelled, int(m[2:]))
                row["metrics"][m], row["intervals"][m] = score.precision, score.precision_interval
            elif m == JUDGED_AT_10 and row["label"] in covered:
                c = covered[row["label"]]
                row["metrics"][m], row["intervals"][m] = c.judged, c.interval


def _judgments(ws: Workspace, viewer: Viewer | None) -> list[dict[str, Any]]:
    """The store's judgments of the workspace's corpus that ``viewer`` counts (none without a store)."""
    return seen.judgments(ws.store, ws.dataset, viewer)


def _runs(entries: list[Entry], split: str) -> dict[str, Any]:
    """Each entry's run on the split, by label: read (and decoded) from the store once per table."""
    return {name: w.run(s, split) for name, w, s in entries}


def _pooled(entries: list[Entry], split: str, judgments: list[dict[str, Any]]) -> set[str]:
    """The split's queries with a relevant label whose labels came from judging in the app."""
    return from_judging(positive_qrels(entries[0][1].dataset.qrels[split]), judgments)


def table_coverage(ws_by_label: Workspace | dict[str, Workspace], split: str, systems: Systems = BASE_SYSTEMS,
                   entries: list[Entry] | None = None, runs: dict[str, Run] | None = None,
                   judgments: list[dict[str, Any]] | None = None, viewer: Viewer | None = None
                   ) -> tuple[dict[str, Coverage], int | None]:
    """(each system's ``coverage.Coverage`` on the split, by label; the depth the split's labels
    judged in the app were pooled to, None where none came from judging in the app). ``runs`` and
    ``judgments``: the entries' runs and the corpus's judgments where the caller has read them."""
    entries = entries or system_entries(ws_by_label, split, systems)
    runs = runs if runs is not None else _runs(entries, split)
    judgments = judgments if judgments is not None else _judgments(entries[0][1], viewer)
    return (coverages(runs, entries[0][1].dataset.qrels[split], judgments),
            judged_pool_depth(entries, split, runs, judgments))


def judged_pool_depth(entries: list[Entry], split: str, runs: dict[str, Run] | None = None,
                      judgments: list[dict[str, Any]] | None = None, viewer: Viewer | None = None) -> int | None:
    """``coverage.pool_depth`` of the split's queries judged in the app, over the entries' runs;
    None where no query's labels came from judging in the app."""
    pooled = _pooled(entries, split, judgments if judgments is not None else _judgments(entries[0][1], viewer))
    if not pooled:
        return None
    return pool_depth(runs if runs is not None else _runs(entries, split), entries[0][1].dataset.qrels[split], pooled)


def judged_pool(ws_by_label: Workspace | dict[str, Workspace], split: str, systems: Systems = BASE_SYSTEMS,
                viewer: Viewer | None = None, k: int | None = None) -> PoolVerdict | None:
    """The ``pool_verdict.PoolVerdict`` of the systems (labelled as in ``metrics_table``) at depth ``k``
    on the split's queries whose labels were all judged in the app (``pool_verdict.judged_queries``:
    those with no relevant document found included); None where no query's were. ``k`` None: the
    depth the judging pooled to (``pool_verdict.judged_depth``), 10 at most."""
    entries = system_entries(ws_by_label, split, systems)
    qrels = entries[0][1].dataset.qrels[split]
    ids = judged_queries(qrels, _judgments(entries[0][1], viewer))
    if not ids:
        return None
    runs = _runs(entries, split)
    return pool_verdict(runs, qrels, ids, k or judged_depth(runs, qrels, ids, DEPTH))


def covered_comparisons(ws_by_label: Workspace | dict[str, Workspace], split: str, systems: Systems = BASE_SYSTEMS,
                        metric: str = PRIMARY, pairs: list[tuple[str, str]] | None = None,
                        viewer: Viewer | None = None) -> tuple[list[dict[str, Any]], dict[str, Coverage], int | None]:
    """Every pair of the systems (or the ``pairs`` of labels asked for) compared on ``metric``, with what
    the comparisons were gated on: (rows ``{"a", "b", "comparison": evaluate.Comparison}`` with B the
    better on the mean, the separable pairs (significant, the interval of B − A above 0) first, then by
    the size of the difference, each row's ``"verdict"`` (``coverage.Verdict``) saying whether the
    judgments carry a verdict on it and the pairs they do not last; each system's ``Coverage``; the
    judged pool's depth (``table_coverage``)), the runs and judgments read once for all three."""
    entries = system_entries(ws_by_label, split, systems)
    evals = {name: ws.evaluate(s, split) for name, ws, s in entries}
    for pair in pairs or []:
        missing = [n for n in pair if n not in evals]
        if missing:
            raise KeyError(f"no system labelled {missing[0]!r} on this split")
    rows = compared_pairs(evals, metric, pairs)
    runs, judgments = _runs(entries, split), _judgments(entries[0][1], viewer)
    covered, depth = table_coverage(ws_by_label, split, systems, entries, runs, judgments)
    qrels = positive_qrels(entries[0][1].dataset.qrels[split])
    basis = {q: qrels[q] for q in from_judging(qrels, judgments)} or qrels
    cond = {name: condensed_ndcg(run, basis) for name, run in runs.items()}
    for r in rows:
        r["verdict"] = judged_verdict(r["a"], r["b"], r["comparison"], covered, runs, basis, cond)
    return sorted(rows, key=lambda r: not r["verdict"].may_conclude), covered, depth  # stable: the order above


@dataclass(frozen=True)
class Headline:
    """What Evaluate opens with, as data: the system with the best mean on ``metric`` and how far
    the judgments carry a verdict on it (``headline``).

    ``state``: ``"best"`` — it beats every other system shown (each comparison separable and, on
    labels judged in the app, covered); ``"open"`` — it leads but ``against`` is not separable from
    it yet; ``"coverage"`` — ``against``'s pair gets no verdict because a system's top 10 is not
    judged enough (``coverage.Verdict.lacking``). ``against`` is the comparison row (``covered_comparisons``)
    that decides the state: the nearest rival when it is best, the pair in question otherwise."""

    best: str
    row: dict[str, Any]  # its ``metrics_table`` row
    state: str
    against: dict[str, Any]
    metric: str = PRIMARY


def headline(rows: list[dict[str, Any]], compared: list[dict[str, Any]], metric: str = PRIMARY) -> Headline | None:
    """The ``Headline`` of a ``metrics_table`` and its ``covered_comparisons`` (on ``metric``); None with
    fewer than two systems or no defined mean. A pair held back for coverage wins over an open one
    (more judging, not more queries, is what it needs), and among several the least covered."""
    ranked = sorted((r for r in rows if not math.isnan(r["metrics"].get(metric, math.nan))),
                    key=lambda r: -r["metrics"][metric])
    if len(ranked) < 2:
        return None
    best = ranked[0]["label"]
    mine = [c for c in compared if best in (c["a"], c["b"]) and c["comparison"].metric == metric]
    if not mine:
        return None
    held = [c for c in mine if c.get("verdict") is not None and not c["verdict"].may_conclude]
    if held:
        worst = min(held, key=lambda c: min((s.judged for s in c["verdict"].lacking), default=1.0))
        return Headline(best, ranked[0], "coverage", worst, metric)
    open_ = [c for c in mine if c["comparison"].outcome == "open"]
    if open_:
        return Headline(best, ranked[0], "open", min(open_, key=lambda c: abs(c["comparison"].delta)), metric)
    return Headline(best, ranked[0], "best", min(mine, key=lambda c: abs(c["comparison"].delta)), metric)


def compared_pairs(evals: dict[str, Any], metric: str = PRIMARY,
                   pairs: list[tuple[str, str]] | None = None) -> list[dict[str, Any]]:
    """``measures.compare_pairs`` as ``{"a", "b", "comparison"}`` rows, the separable pairs first,
    then by the size of the difference (what ``covered_comparisons`` and the CLI show)."""
    rows = [{"a": a, "b": b, "comparison": cmp} for a, b, cmp in compare_pairs(evals, metric, pairs)]
    return sorted(rows, key=lambda r: (r["comparison"].outcome == "open", -abs(r["comparison"].delta)))


def recall_at_ks(workspaces: Workspace | dict[str, Workspace], split: str, systems: Systems = BASE_SYSTEMS,
                 ks: Sequence[int] = RECALL_KS) -> dict[str, dict[str, list[float]]]:
    """``{label: {"mean": [mean Recall@k for k in ks], "low": [...], "high": [...]}}`` from each
    system's cached run, by ranx, with each mean's 95% interval over the queries (``intervals``)."""
    metrics = tuple(f"recall@{k}" for k in ks)
    out = {}
    for name, ws, s in system_entries(workspaces, split, systems):
        ev = evaluate_run(ws.run(s, split), ws.dataset.qrels[split], metrics=metrics)
        bounds = [ev.interval(m) for m in metrics]
        out[name] = {"mean": [ev.mean[m] for m in metrics], "low": [b.low for b in bounds],
                     "high": [b.high for b in bounds]}
    return out


def versus(ws: Workspace, split: str, a: str = BM25, b: str = DENSE,
           metric: str = PRIMARY) -> tuple[Evaluation, Evaluation, Comparison]:
    """(A's evaluation, B's, their paired comparison on ``metric``): the per-query scatter's data
    (``ui.present.figures.per_query_scatter``), BM25 against dense unless told otherwise."""
    eval_a, eval_b = ws.evaluate(a, split), ws.evaluate(b, split)
    return eval_a, eval_b, compare(eval_a, eval_b, metric)


def per_query_table(ws: Workspace, split: str, systems: Sequence[str] = BASE_SYSTEMS,
                    metric: str = PRIMARY) -> list[dict[str, Any]]:
    """Each evaluated query's ``metric`` under every system: ``{"query", "text", "values": {system:
    value}, "disagreement": 1 − mean pairwise RBO of the systems' top 10}``, ordered by how much the
    best of the other systems gains over the first (largest first): where dense and hybrid win and
    lose against BM25."""
    per = {s: ws.evaluate(s, split).per_query.get(metric, {}) for s in systems}
    runs = {s: ws.run(s, split) for s in systems}
    first, others = systems[0], systems[1:]
    qids = sorted(per[first], key=lambda q: -(max((per[s].get(q, 0) for s in others), default=0) - per[first][q]))
    return [{"query": q, "text": ws.dataset.queries.get(q, ""), "values": {s: per[s].get(q, 0.0) for s in systems},
             "disagreement": disagreement(runs, q, DEPTH)} for q in qids]
