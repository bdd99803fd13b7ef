"""The Runs view: every run the store holds for this data set, and any two compared query by query
(paired permutation test, 95% intervals of both means and of their difference); snapshots of the
systems on show (``retrieval.snapshots``): take one with a note, mark the baseline, a metric's
history across them with intervals, and two snapshots of a system diffed query by query. On labels
judged in the app, neither comparison speaks a verdict where a run's top 10 is not judged enough
(``coverage.verdict``): it says how many more of its documents to judge, with both runs' judged@10."""
from __future__ import annotations

import time
from dataclasses import replace

import gradio as gr

from retrieval import Store, Workspace, snapshots
from retrieval.coverage import coverages, from_judging, verdict
from retrieval.errors import UnknownRun
from retrieval.evaluate import positive_qrels
from retrieval.history import compare_stored, list_runs
from retrieval.intervals import mean_interval
from retrieval.metrics import COMPARE_METRICS, PRIMARY, conclusion, interval_text
from retrieval.systems import label

from . import texts
from .common import shown_systems
from .notify import refuse
from .pools import HEAVY, LIGHT
from .present.escape import code, text
from .present.figures import history_figure
from .present.tables import conclusion_lines, coverage_line
from .registry import Context

RUN_HEADERS = ["when", "system", "split", "depth", "key"]
COMPARE_HEADERS = ["query", "text", "A", "B", "B − A"]


def runs(store: Store, ws: Workspace):
    """The stored runs of this data set, newest first, and the choices of both run pickers."""
    found = list_runs(store, ws.dataset.content_hash)
    rows = [[r["when"], r["summary"], r["split"], r["k"], r["key"]] for r in found]
    choices = [(f"{r['summary']} — {r['split']} ({r['when']})", r["key"]) for r in found]
    return rows, gr.update(choices=choices), gr.update(choices=choices)


def gated_conclusion(store: Store, ws: Workspace, split: str, names: tuple[str, str], runs: tuple, cmp) -> str:
    """``cmp`` (B − A) in words under the coverage gate (``coverage.verdict``, judged@10 of each run's
    top 10 on ``split``'s labels), then each run's judged@10 where the labels were judged in the app."""
    qrels, judgments = ws.dataset.qrels[split], store.judgments(ws.dataset.corpus_hash)
    if not from_judging(positive_qrels(qrels), judgments):  # the data set's own labels: never gated
        return f"{text(conclusion(*names, cmp))}."
    covered = coverages(dict(zip(names, runs)), qrels, judgments)
    word = verdict(*names, cmp, covered[names[0]], covered[names[1]])
    (line,) = conclusion_lines([{"a": names[0], "b": names[1], "comparison": cmp, "verdict": word}])
    shares = coverage_line(covered)
    return f"{text(line)}." + (f" {text(shares)}" if shares else "")


def compare(store: Store, ws: Workspace, key_a: str, key_b: str, metric: str) -> tuple[str, list[list]]:
    """B against A on their split: a summary line (means, wins/losses, p) and the per-query table."""
    if not key_a or not key_b:
        raise refuse("pick two runs")
    try:
        res = compare_stored(store, ws.dataset, key_a, key_b, metric or PRIMARY)
    except (UnknownRun, ValueError) as err:
        raise refuse(err) from err
    c = res.comparison
    summaries = {r["key"]: r["summary"] for r in list_runs(store, ws.dataset.content_hash)}
    iv_a, iv_b = (mean_interval([r[side] for r in res.per_query]) for side in ("a", "b"))
    note = (f"**B − A on {text(res.split)}, {c.metric}:** {c.mean_b:.4f} {interval_text(iv_b)} − {c.mean_a:.4f} "
            f"{interval_text(iv_a)} = {c.delta:+.4f} {interval_text(c.interval)} (95% intervals over "
            f"the {c.queries} queries: the means' by bootstrap, the difference's by the permutation test) · "
            f"{len(c.wins)} queries better, {len(c.losses)} worse, {c.ties} tied · "
            f"paired permutation test p = {c.p_value:.3g}{' (significant)' if c.significant else ''}\n\n"
            f"{gated_conclusion(store, ws, res.split, ('A', 'B'), (store.get_run(key_a), store.get_run(key_b)), c)}"
            "\n\n"
            f"A: {text(summaries[key_a])} · B: {text(summaries[key_b])}")
    rows = [[r["query"], ws.dataset.queries.get(r["query"], "")[:80], round(r["a"], 4), round(r["b"], 4),
             round(r["delta"], 4)] for r in res.per_query]
    return note, rows


SNAPSHOT_HEADERS = ["", "snapshot", "when", "split", "systems", "note"]
DIFF_HEADERS = ["query", "text", "A", "B", "B − A", "top 10s alike (RBO)", "entered the top 10", "left the top 10",
                "A's top 5", "B's top 5"]


def _split(ws: Workspace) -> str:
    split = ws.dataset.default_split()
    if split is None:
        raise refuse("this data set has no relevance labels: a snapshot is evaluated on them (judge some first)")
    return split


def take_snapshot(store: Store, ws: Workspace, name: str, note: str = "", baseline: bool = False) -> str:
    """Keep the systems on show's runs of the default labelled split as a snapshot called ``name``."""
    split = _split(ws)
    try:
        snap = snapshots.take(ws, split, list(shown_systems(ws)), name, note)
        snapshots.save(store, snap)
        if baseline:
            snapshots.mark_baseline(store, snap.corpus, snap.name)
    except (ValueError, KeyError) as err:
        raise refuse(err) from err
    return (f"Snapshot {code(snap.name)} kept: {', '.join(text(s) for s in snap.runs)} on {text(split)}"
            + (", marked the baseline." if baseline else "."))


def mark_baseline(store: Store, ws: Workspace, name: str) -> str:
    try:
        snapshots.mark_baseline(store, ws.dataset.corpus_hash, name or "")
    except KeyError as err:
        raise refuse(err.args[0]) from None
    return f"{code(name)} is the baseline: `python -m retrieval check` holds every change against it."


def snapshot_view(store: Store, ws: Workspace, metric: str = PRIMARY):
    """The corpus's snapshots (the baseline starred), the metric's history across them and the
    choices of the snapshot pickers and the system picker."""
    found = snapshots.listed(store, ws.dataset.corpus_hash)
    rows = [["★" if s.baseline else "", s.name, time.strftime("%Y-%m-%d %H:%M", time.localtime(s.created)), s.split,
             ", ".join(label(r) for r in s.runs), s.note] for s in found]
    split = ws.dataset.default_split()
    points = [replace(p, system=label(p.system)) for p in snapshots.history(store, ws, split, metric or PRIMARY)] \
        if split else []
    names = [s.name for s in found]
    systems = list(dict.fromkeys(r for s in found for r in s.runs))
    return (rows, history_figure(points, metric or PRIMARY), gr.update(choices=names), gr.update(choices=names),
            gr.update(choices=names), gr.update(choices=[(label(r), r) for r in systems],
                                                value=systems[0] if systems else None))


def snapshot_diff(store: Store, ws: Workspace, a: str, b: str, system: str, metric: str = PRIMARY):
    """``system`` in snapshot B against A, query by query on today's labels: a summary and the
    queries that moved most, with what entered and left their top 10."""
    if not a or not b or not system:
        raise refuse("pick two snapshots and a system")
    split = _split(ws)
    try:
        sa, sb = (snapshots.load(store, ws.dataset.corpus_hash, n) for n in (a, b))
        cmp, (iv_a, iv_b), moved = snapshots.diff(sa, sb, system, ws.dataset.qrels[split], metric or PRIMARY)
    except KeyError as err:
        raise refuse(err.args[0]) from None
    except ValueError as err:
        raise refuse(err) from err
    note = (f"**{text(label(system))}, {code(b)} − {code(a)}** on {text(split)} ({cmp.metric}, today's labels): "
            f"{cmp.mean_b:.4f} {interval_text(iv_b)} − {cmp.mean_a:.4f} {interval_text(iv_a)} = {cmp.delta:+.4f} "
            f"{interval_text(cmp.interval)} (95% intervals: the means' by bootstrap over queries, the difference's by "
            f"the permutation test) · "
            f"{len(cmp.wins)} queries better, {len(cmp.losses)} worse, {cmp.ties} tied · p = {cmp.p_value:.3g} · "
            f"{len(moved)} queries changed their top 10 or their score; the largest moves first, then the least "
            f"alike top 10s (rank-biased overlap, 1 = the same list).\n\n"
            f"{gated_conclusion(store, ws, split, (a, b), (sa.runs[system], sb.runs[system]), cmp)}")
    rows = [[d.query_id, ws.dataset.queries.get(d.query_id, "")[:80], round(d.a, 4), round(d.b, 4),
             round(d.b - d.a, 4), round(d.overlap, 3), " ".join(d.entered), " ".join(d.left), " ".join(d.top_a[:5]),
             " ".join(d.top_b[:5])]
            for d in moved]
    return note, rows


def build(ctx: Context, tab: gr.Tab) -> None:
    gr.Markdown(texts.RUNS_INTRO)
    table = gr.Dataframe(headers=RUN_HEADERS, interactive=False, elem_id="runs-table")
    with gr.Row():
        run_a = gr.Dropdown(choices=[], label="Run A", elem_id="run-a", scale=2)
        run_b = gr.Dropdown(choices=[], label="Run B", elem_id="run-b", scale=2)
        metric = gr.Dropdown(list(COMPARE_METRICS), value=PRIMARY, label="Metric", scale=1)
        button = gr.Button("Compare", variant="primary", elem_id="compare-runs-button", scale=1)
    note = gr.Markdown(elem_id="compare-note")
    per_query = gr.Dataframe(headers=COMPARE_HEADERS, interactive=False, elem_id="compare-table")

    def on_open(key: str):
        return runs(ctx.registry.store, ctx.workspace(key))

    def on_compare(a: str, b: str, metric_: str, key: str):
        return compare(ctx.registry.store, ctx.workspace(key), a, b, metric_)

    with gr.Accordion("Snapshots: a baseline, a metric's history, two snapshots side by side", open=False,
                      elem_id="snapshots"):
        gr.Markdown(texts.SNAPSHOTS_HELP)
        with gr.Row():
            snap_name = gr.Textbox(label="Snapshot name", elem_id="snapshot-name", scale=2)
            snap_note = gr.Textbox(label="Note (what changed)", elem_id="snapshot-note", scale=3)
            snap_base = gr.Checkbox(False, label="the baseline", elem_id="snapshot-baseline", scale=1)
            snap_btn = gr.Button("Take a snapshot", variant="primary", elem_id="snapshot-button", scale=1)
        snap_status = gr.Markdown(elem_id="snapshot-status")
        snap_table = gr.Dataframe(headers=SNAPSHOT_HEADERS, interactive=False, elem_id="snapshot-table")
        with gr.Row():
            hist_metric = gr.Dropdown(list(COMPARE_METRICS), value=PRIMARY, label="Metric", scale=1)
            base_pick = gr.Dropdown(choices=[], label="Mark as the baseline", elem_id="baseline-pick", scale=2)
            base_btn = gr.Button("Mark", elem_id="baseline-button", scale=1)
        hist_plot = gr.Plot(elem_id="snapshot-history")
        with gr.Row():
            snap_a = gr.Dropdown(choices=[], label="Snapshot A", elem_id="snapshot-a", scale=2)
            snap_b = gr.Dropdown(choices=[], label="Snapshot B", elem_id="snapshot-b", scale=2)
            diff_system = gr.Dropdown(choices=[], label="System", elem_id="snapshot-system", scale=2)
            diff_btn = gr.Button("Diff", variant="primary", elem_id="snapshot-diff-button", scale=1)
        diff_note = gr.Markdown(elem_id="snapshot-diff-note")
        diff_table = gr.Dataframe(headers=DIFF_HEADERS, interactive=False, elem_id="snapshot-diff-table")

    def on_snapshots(key: str, metric_: str = PRIMARY):
        return snapshot_view(ctx.registry.store, ctx.workspace(key), metric_)

    snap_outputs = [snap_table, hist_plot, base_pick, snap_a, snap_b, diff_system]
    tab.select(on_open, ctx.key, [table, run_a, run_b], api_name="runs", **LIGHT).then(
        on_snapshots, [ctx.key, hist_metric], snap_outputs, api_name="snapshots", **HEAVY)
    button.click(on_compare, [run_a, run_b, metric, ctx.key], [note, per_query], api_name="compare_runs", **HEAVY)
    snap_btn.click(lambda name, note_, base, key: take_snapshot(ctx.registry.store, ctx.workspace(key), name, note_,
                                                                bool(base)),
                   [snap_name, snap_note, snap_base, ctx.key], snap_status, api_name="take_snapshot", **HEAVY).then(
        on_snapshots, [ctx.key, hist_metric], snap_outputs, api_visibility="private", **HEAVY)
    base_btn.click(lambda name, key: mark_baseline(ctx.registry.store, ctx.workspace(key), name), [base_pick, ctx.key],
                   snap_status, api_name="mark_baseline", **LIGHT).then(
        on_snapshots, [ctx.key, hist_metric], snap_outputs, api_visibility="private", **HEAVY)
    hist_metric.change(on_snapshots, [ctx.key, hist_metric], snap_outputs, api_visibility="private", **HEAVY)
    diff_btn.click(lambda a, b, system, metric_, key: snapshot_diff(ctx.registry.store, ctx.workspace(key), a, b,
                                                                    system, metric_),
                   [snap_a, snap_b, diff_system, hist_metric, ctx.key], [diff_note, diff_table],
                   api_name="snapshot_diff", **HEAVY)
