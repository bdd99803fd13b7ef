"""The Runs view: every run the store holds for this data set, and any two compared query by query
(paired permutation test, 95% intervals of both means and of their difference)."""
from __future__ import annotations

import gradio as gr

from retrieval import Store, Workspace
from retrieval.errors import UnknownRun
from retrieval.history import compare_stored, list_runs
from retrieval.intervals import mean_interval
from retrieval.metrics import COMPARE_METRICS, PRIMARY, conclusion, interval_text

from . import texts
from .notify import refuse
from .pools import HEAVY, LIGHT
from .present.escape import text
from .registry import Context

RUN_HEADERS = ["when", "system", "split", "depth", "key"]
COMPARE_HEADERS = ["query", "text", "A", "B", "B − A"]


def runs(store: Store, ws: Workspace):
    """The stored runs of this data set, newest first, and the choices of both run pickers."""
    found = list_runs(store, ws.dataset.content_hash)
    rows = [[r["when"], r["summary"], r["split"], r["k"], r["key"]] for r in found]
    choices = [(f"{r['summary']} — {r['split']} ({r['when']})", r["key"]) for r in found]
    return rows, gr.update(choices=choices), gr.update(choices=choices)


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
            f"{interval_text(iv_a)} = {c.delta:+.4f} {interval_text(c.interval)} (95% intervals, bootstrap over "
            f"the {c.queries} queries) · {len(c.wins)} queries better, {len(c.losses)} worse, {c.ties} tied · "
            f"paired permutation test p = {c.p_value:.3g}{' (significant)' if c.significant else ''}\n\n"
            f"{text(conclusion('A', 'B', c))}.\n\n"
            f"A: {text(summaries[key_a])} · B: {text(summaries[key_b])}")
    rows = [[r["query"], ws.dataset.queries.get(r["query"], "")[:80], round(r["a"], 4), round(r["b"], 4),
             round(r["delta"], 4)] for r in res.per_query]
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

    tab.select(on_open, ctx.key, [table, run_a, run_b], api_name="runs", **LIGHT)
    button.click(on_compare, [run_a, run_b, metric, ctx.key], [note, per_query], api_name="compare_runs", **HEAVY)
