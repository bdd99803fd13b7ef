"""The Runs view: every run the store holds for this data set, and any two compared query by query
(paired permutation test, 95% intervals of both means and of their difference); snapshots of the
systems on show (``retrieval.tracking.snapshots``): take one with a note, mark the baseline, a metric's
history across them with intervals, and two snapshots of a system diffed query by query. On labels
judged in the app, neither comparison speaks a verdict where a run's top 10 is not judged enough
(``coverage.verdict``): it says how many more of its documents to judge, with both runs' judged@10.

Snapshots have makers (``retrieval.sharing.owners``, the session's ``Registry.viewer``): a name in use is
refused with a free one suggested, unless its maker asks to replace it ("Replace mine of this
name", ``/replace_snapshot``); the baseline line says who set it and when; on a shared deployment
a session sees its own snapshots and the published ones, and publishes its own, and a private
snapshot's name is its session's alone (``retrieval.tracking.snapshots``). The runs listed are the
built-in systems' and the session's own imported ones (``Store.runs``)."""
from __future__ import annotations

from dataclasses import replace

import gradio as gr

from retrieval import Store, Workspace
from retrieval.errors import UnknownRun
from retrieval.evaluation.intervals import mean_interval
from retrieval.evaluation.measures import positive_qrels
from retrieval.evaluation.metrics import COMPARE_METRICS, PRIMARY, conclusion, interval_text, metric_name
from retrieval.judging import seen
from retrieval.judging.coverage import coverages, from_judging, verdict
from retrieval.sharing.owners import OPERATOR, Viewer, describe, when
from retrieval.systems import label
from retrieval.tracking import snapshots
from retrieval.tracking.history import compare_stored, list_runs
from ui import texts
from ui.common import shown_systems
from ui.notify import refuse
from ui.pools import HEAVY, LIGHT
from ui.present.escape import code, text
from ui.present.figures import history_figure
from ui.present.tables import conclusion_lines, coverage_line
from ui.registry import Context, session_of
from ui.tables import table

RUN_HEADERS = ["when", "system", "split", "depth", "key"]
COMPARE_HEADERS = ["query", "text", "A", "B", "B − A"]


def runs(store: Store, ws: Workspace, viewer: Viewer = OPERATOR):
    """The stored runs of this data set that ``viewer`` sees (every built-in system's, its own imported
    ones), newest first, and the choices of both run pickers."""
    found = list_runs(store, ws.dataset.queries_hash, viewer)
    rows = [[r["when"], r["summary"], r["split"], r["k"], r["key"]] for r in found]
    choices = [(f"{r['summary']} — {r['split']} ({r['when']})", r["key"]) for r in found]
    return rows, gr.update(choices=choices), gr.update(choices=choices)


def gated_conclusion(store: Store, ws: Workspace, split: str, names: tuple[str, str], runs: tuple, cmp,
                     viewer: Viewer | None = None) -> str:
    """``cmp`` (B − A) in words under the coverage gate (``coverage.verdict``, judged@10 of each run's
    top 10 on ``split``'s labels), then each run's judged@10 where the labels were judged in the app
    (by the judges ``viewer`` counts: ``Store.judgments``)."""
    qrels, judgments = ws.dataset.qrels[split], seen.judgments(store, ws.dataset, viewer)
    if not from_judging(positive_qrels(qrels), judgments):  # the data set's own labels: never gated
        return f"{text(conclusion(*names, cmp))}."
    covered = coverages(dict(zip(names, runs)), qrels, judgments)
    word = verdict(*names, cmp, covered[names[0]], covered[names[1]])
    (line,) = conclusion_lines([{"a": names[0], "b": names[1], "comparison": cmp, "verdict": word}])
    shares = coverage_line(covered)
    return f"{text(line)}." + (f" {text(shares)}" if shares else "")


def compare(store: Store, ws: Workspace, key_a: str, key_b: str, metric: str,
            viewer: Viewer | None = None) -> tuple[str, list[list]]:
    """B against A on their split: a summary line (means, wins/losses, p) and the per-query table."""
    if not key_a or not key_b:
        raise refuse("pick two runs")
    try:
        res = compare_stored(store, ws.dataset, key_a, key_b, metric or PRIMARY, viewer or OPERATOR)
    except (UnknownRun, ValueError) as err:
        raise refuse(err) from err
    c = res.comparison
    summaries = {r["key"]: r["summary"] for r in list_runs(store, ws.dataset.queries_hash, viewer or OPERATOR)}
    pair = (store.get_run(key_a), store.get_run(key_b))
    iv_a, iv_b = (mean_interval([r[side] for r in res.per_query]) for side in ("a", "b"))
    note = (f"**B − A on {text(res.split)}, {metric_name(c.metric)}:** {c.mean_b:.4f} {interval_text(iv_b)} − "
            f"{c.mean_a:.4f} {interval_text(iv_a)} = {c.delta:+.4f} {interval_text(c.interval)} (95% intervals over "
            f"the {c.queries} queries: the means' by bootstrap, the difference's by the permutation test) · "
            f"{len(c.wins)} queries better, {len(c.losses)} worse, {c.ties} tied · "
            f"paired permutation test p = {c.p_value:.3g}{' (significant)' if c.significant else ''}\n\n"
            f"{gated_conclusion(store, ws, res.split, ('A', 'B'), pair, c, viewer)}"
            "\n\n"
            f"A: {text(summaries[key_a])} · B: {text(summaries[key_b])}")
    rows = [[r["query"], ws.dataset.queries.get(r["query"], "")[:80], round(r["a"], 4), round(r["b"], 4),
             round(r["delta"], 4)] for r in res.per_query]
    return note, rows


SNAPSHOT_HEADERS = ["", "snapshot", "when", "split", "systems", "note", "taken by", "published"]
DIFF_HEADERS = ["query", "text", "A", "B", "B − A", "top 10s alike (RBO)", "entered the top 10", "left the top 10",
                "A's top 5", "B's top 5"]


def _split(ws: Workspace) -> str:
    split = ws.dataset.default_split()
    if split is None:
        raise refuse("this data set has no relevance labels: a snapshot is evaluated on them (judge some first)")
    return split


def take_snapshot(store: Store, ws: Workspace, name: str, note: str = "", baseline: bool = False,
                  viewer: Viewer = OPERATOR, replace: bool = False) -> str:
    """Keep the systems on show's runs of the default labelled split as a snapshot called ``name``,
    made by ``viewer``; its name, note and bounds are checked before any run is computed
    (``snapshots.admit``), and a refusal keeps nothing and says why in one line."""
    split = _split(ws)
    corpus = ws.dataset.corpus_hash
    try:
        name = snapshots.admit(store, corpus, name, note, viewer, replace, baseline)
        replaced = replace and name in store.snapshot_names(corpus, viewer)
        snap = snapshots.save(store, snapshots.take(ws, split, list(shown_systems(ws)), name, note), viewer, replace)
        if baseline:
            snapshots.mark_baseline(store, corpus, snap.name, viewer)
    except (ValueError, KeyError) as err:
        raise refuse(err) from err
    private = " Only this session sees it until you publish it." if viewer.shared and not snap.published else ""
    return (f"Snapshot {code(snap.name)} {'replaced' if replaced else 'kept'}: "
            f"{', '.join(text(s) for s in snap.runs)} on {text(split)}"
            + (", marked the baseline." if baseline else ".") + private)


def mark_baseline(store: Store, ws: Workspace, name: str, viewer: Viewer = OPERATOR) -> str:
    """Move the corpus's baseline to the snapshot ``name`` as ``viewer`` (logged, with who and when);
    the status says from which snapshot it moved. A snapshot the session does not see, or (on a shared
    deployment) one not published, is refused."""
    if not name:
        raise refuse("pick a snapshot to mark as the baseline")
    corpus = ws.dataset.corpus_hash
    try:
        move = snapshots.mark_baseline(store, corpus, name, viewer)
    except (KeyError, ValueError) as err:
        raise refuse(err) from err
    if move is None:
        return f"{code(name)} is the baseline already ({text(snapshots.baseline_line(store, corpus, viewer))})."
    was = f", moved from {code(move.moved_from)}" if move.moved_from else ""
    return (f"{code(name)} is the baseline{was} (set by {text(describe(move.who, viewer))} on {when(move.at)}): "
            "`python -m retrieval check` holds every change against it.")


def publish_snapshot(store: Store, ws: Workspace, name: str, viewer: Viewer) -> str:
    """Make the session's snapshot ``name`` visible to every session (a shared deployment's Publish)."""
    if not viewer.shared:
        raise refuse("every snapshot is everyone's on this deployment already: nothing to publish")
    if not name:
        raise refuse("pick a snapshot to publish")
    try:
        snapshots.publish(store, ws.dataset.corpus_hash, name, viewer)
    except (KeyError, ValueError) as err:
        raise refuse(err) from err
    return f"Published {code(name)}: every session sees it now, and it can be the baseline; only you can replace it."


def snapshot_view(store: Store, ws: Workspace, metric: str = PRIMARY, viewer: Viewer = OPERATOR):
    """The corpus's snapshots ``viewer`` sees (the baseline starred; who took each, whether it is
    published), the metric's history across them, the choices of the snapshot pickers and the
    system picker, and the baseline line ("baseline: X, set by … on …")."""
    corpus = ws.dataset.corpus_hash
    found = snapshots.listed(store, corpus, viewer)
    rows = [["★" if s.baseline else "", s.name, when(s.created), s.split, ", ".join(label(r) for r in s.runs), s.note,
             describe(s.owner, viewer), "yes" if s.published else "no (only this session sees it)"] for s in found]
    split = ws.dataset.default_split()
    points = [replace(p, system=label(p.system))
              for p in snapshots.history(store, ws, split, metric or PRIMARY, viewer, found)] if split else []
    names = list(dict.fromkeys(s.name for s in found))  # a name meaning two (its own and a published one): once
    systems = list(dict.fromkeys(r for s in found for r in s.runs))
    return (rows, history_figure(points, metric or PRIMARY), gr.update(choices=names), gr.update(choices=names),
            gr.update(choices=names), gr.update(choices=[(label(r), r) for r in systems],
                                                value=systems[0] if systems else None),
            text(snapshots.baseline_line(store, corpus, viewer)))


def snapshot_diff(store: Store, ws: Workspace, a: str, b: str, system: str, metric: str = PRIMARY,
                  viewer: Viewer = OPERATOR):
    """``system`` in snapshot B against A (both seen by ``viewer``), query by query on today's labels:
    a summary and the queries that moved most, with what entered and left their top 10."""
    if not a or not b or not system:
        raise refuse("pick two snapshots and a system")
    split = _split(ws)
    try:
        sa, sb = (snapshots.load(store, ws.dataset.corpus_hash, n, viewer) for n in (a, b))
        cmp, (iv_a, iv_b), moved = snapshots.diff(sa, sb, system, ws.dataset.qrels[split], metric or PRIMARY)
    except (KeyError, ValueError) as err:
        raise refuse(err) from err
    note = (f"**{text(label(system))}, {code(b)} − {code(a)}** on {text(split)} ({cmp.metric}, today's labels): "
            f"{cmp.mean_b:.4f} {interval_text(iv_b)} − {cmp.mean_a:.4f} {interval_text(iv_a)} = {cmp.delta:+.4f} "
            f"{interval_text(cmp.interval)} (95% intervals: the means' by bootstrap over queries, the difference's by "
            f"the permutation test) · "
            f"{len(cmp.wins)} queries better, {len(cmp.losses)} worse, {cmp.ties} tied · p = {cmp.p_value:.3g} · "
            f"{len(moved)} queries changed their top 10 or their score; the largest moves first, then the least "
            f"alike top 10s (rank-biased overlap, 1 = the same list).\n\n"
            f"{gated_conclusion(store, ws, split, (a, b), (sa.runs[system], sb.runs[system]), cmp, viewer)}")
    rows = [[d.query_id, ws.dataset.queries.get(d.query_id, "")[:80], round(d.a, 4), round(d.b, 4),
             round(d.b - d.a, 4), round(d.overlap, 3), " ".join(d.entered), " ".join(d.left), " ".join(d.top_a[:5]),
             " ".join(d.top_b[:5])]
            for d in moved]
    return note, rows


def build(ctx: Context, tab: gr.Tab) -> None:
    gr.Markdown(texts.RUNS_INTRO)
    runs_table = table(RUN_HEADERS, elem_id="runs-table")
    with gr.Row():
        run_a = gr.Dropdown(choices=[], label="Run A", elem_id="run-a", scale=2)
        run_b = gr.Dropdown(choices=[], label="Run B", elem_id="run-b", scale=2)
        metric = gr.Dropdown(list(COMPARE_METRICS), value=PRIMARY, label="Metric", scale=1)
        button = gr.Button("Compare", variant="primary", elem_id="compare-runs-button", scale=1)
    note = gr.Markdown(elem_id="compare-note")
    per_query = table(COMPARE_HEADERS, elem_id="compare-table")

    def on_open(key: str, request: gr.Request):  # runs are listed by documents and queries, and by maker
        return runs(ctx.registry.store, ctx.workspace(key), ctx.registry.viewer(session_of(request)))

    def on_compare(a: str, b: str, metric_: str, key: str, request: gr.Request):
        return compare(ctx.registry.store, ctx.labelled(key, request), a, b, metric_,
                       ctx.registry.viewer(session_of(request)))

    shared = ctx.registry.shared
    with gr.Accordion("Snapshots: a baseline, a metric's history, two snapshots side by side", open=False,
                      elem_id="snapshots"):
        gr.Markdown(texts.SNAPSHOTS_HELP)
        if shared:
            gr.Markdown(texts.SNAPSHOTS_SHARED)
        with gr.Row():
            snap_name = gr.Textbox(label="Snapshot name", elem_id="snapshot-name", scale=2)
            snap_note = gr.Textbox(label=f"Note (what changed; at most {snapshots.NOTE_CHARS:,} characters)",
                                   max_length=snapshots.NOTE_CHARS, elem_id="snapshot-note", scale=3)
            snap_base = gr.Checkbox(False, label="the baseline", elem_id="snapshot-baseline", scale=1)
            with gr.Column(scale=1, min_width=160):
                snap_btn = gr.Button("Take a snapshot", variant="primary", elem_id="snapshot-button")
                replace_btn = gr.Button("Replace mine of this name", size="sm", elem_id="snapshot-replace-button")
        snap_status = gr.Markdown(elem_id="snapshot-status")
        base_line = gr.Markdown(elem_id="baseline-line")
        snap_table = table(SNAPSHOT_HEADERS, elem_id="snapshot-table")
        with gr.Row():
            hist_metric = gr.Dropdown(list(COMPARE_METRICS), value=PRIMARY, label="Metric", scale=1)
            base_pick = gr.Dropdown(choices=[], label="Snapshot", elem_id="baseline-pick", scale=2)
            base_btn = gr.Button("Mark as the baseline", elem_id="baseline-button", scale=1)
            publish_btn = gr.Button("Publish it to every session", elem_id="publish-snapshot", scale=1,
                                    visible=shared)
        hist_plot = gr.Plot(elem_id="snapshot-history")
        with gr.Row():
            snap_a = gr.Dropdown(choices=[], label="Snapshot A", elem_id="snapshot-a", scale=2)
            snap_b = gr.Dropdown(choices=[], label="Snapshot B", elem_id="snapshot-b", scale=2)
            diff_system = gr.Dropdown(choices=[], label="System", elem_id="snapshot-system", scale=2)
            diff_btn = gr.Button("Diff", variant="primary", elem_id="snapshot-diff-button", scale=1)
        diff_note = gr.Markdown(elem_id="snapshot-diff-note")
        diff_table = table(DIFF_HEADERS, elem_id="snapshot-diff-table")

    store = ctx.registry.store

    def viewer(request: gr.Request | None) -> Viewer:
        return ctx.registry.viewer(session_of(request))

    def on_snapshots(key: str, metric_: str, request: gr.Request):
        return snapshot_view(store, ctx.labelled(key, request), metric_, viewer(request))

    def on_take(name: str, note_: str, base: bool, key: str, request: gr.Request):
        return take_snapshot(store, ctx.labelled(key, request), name, note_, bool(base), viewer(request))

    def on_replace(name: str, note_: str, base: bool, key: str, request: gr.Request):
        return take_snapshot(store, ctx.labelled(key, request), name, note_, bool(base), viewer(request), replace=True)

    def on_mark(name: str, key: str, request: gr.Request):
        return mark_baseline(store, ctx.workspace(key), name, viewer(request))

    def on_publish(name: str, key: str, request: gr.Request):
        return publish_snapshot(store, ctx.workspace(key), name, viewer(request))

    def on_diff(a: str, b: str, system: str, metric_: str, key: str, request: gr.Request):
        return snapshot_diff(store, ctx.labelled(key, request), a, b, system, metric_, viewer(request))

    snap_outputs = [snap_table, hist_plot, base_pick, snap_a, snap_b, diff_system, base_line]
    tab.select(on_open, ctx.key, [runs_table, run_a, run_b], api_name="runs", **LIGHT).then(
        on_snapshots, [ctx.key, hist_metric], snap_outputs, api_name="snapshots", **HEAVY)
    button.click(on_compare, [run_a, run_b, metric, ctx.key], [note, per_query], api_name="compare_runs", **HEAVY)
    snap_btn.click(on_take, [snap_name, snap_note, snap_base, ctx.key], snap_status, api_name="take_snapshot",
                   **HEAVY).success(on_snapshots, [ctx.key, hist_metric], snap_outputs, api_visibility="private",
                                    **HEAVY)
    replace_btn.click(on_replace, [snap_name, snap_note, snap_base, ctx.key], snap_status,
                      api_name="replace_snapshot", **HEAVY).success(
        on_snapshots, [ctx.key, hist_metric], snap_outputs, api_visibility="private", **HEAVY)
    base_btn.click(on_mark, [base_pick, ctx.key], snap_status, api_name="mark_baseline", **LIGHT).success(
        on_snapshots, [ctx.key, hist_metric], snap_outputs, api_visibility="private", **HEAVY)
    publish_btn.click(on_publish, [base_pick, ctx.key], snap_status, api_name="publish_snapshot", **LIGHT).success(
        on_snapshots, [ctx.key, hist_metric], snap_outputs, api_visibility="private", **HEAVY)
    hist_metric.change(on_snapshots, [ctx.key, hist_metric], snap_outputs, api_visibility="private", **HEAVY)
    diff_btn.click(on_diff, [snap_a, snap_b, diff_system, hist_metric, ctx.key], [diff_note, diff_table],
                   api_name="snapshot_diff", **HEAVY)
