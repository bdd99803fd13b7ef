"""The Evaluate view: metrics of every system on a split (with int8, PCA and fine-tuned variants
on request), significance against BM25, per-query wins and losses, plots, and the compression table."""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import gradio as gr

from retrieval import Workspace
from retrieval.evaluation.compression import comparison_workspaces, compression_table, reduced_dims
from retrieval.evaluation.metric_tables import (
    covered_comparisons,
    headline,
    judged_pool,
    metrics_table,
    per_query_table,
)
from retrieval.evaluation.metrics import METRIC_NAMES, VIEW_METRICS
from retrieval.evaluation.query_kinds import MIN_QUERIES, segment_table
from retrieval.sharing.owners import Viewer
from retrieval.systems import DENSE, keys, label
from retrieval.systems import shown as shown_builtins
from retrieval.systems.hybrid import CLEAR
from ui import knobs, texts
from ui.common import (
    SplitView,
    conclusions_note,
    encoder_choices,
    metrics_caption,
    metrics_formulas,
    metrics_rows,
    require_dense,
    shown_systems,
    sparse_choices,
    split_dropdown,
    weights_note,
)
from ui.data import warnings
from ui.notify import refuse
from ui.pools import HEAVY, LIGHT
from ui.present.escape import text
from ui.present.evaluation import comparison_figures
from ui.present.figures import lambda_sweep
from ui.present.tables import (
    glance_html,
    headline_text,
    pool_headline_text,
    pool_table_html,
    relative_names,
    rounded,
    segment_cells,
    segment_headers,
)
from ui.registry import Context, Registry, session_of
from ui.tables import placeholder, table

WINS_HEADERS = ["query", "text", *(label(s) for s in shown_builtins())]  # before a data set's own (shown_systems)
INDEX_VARIANTS = ("int8", "pca")  # the extras that are not encoders
COMPRESSION_HEAD = "index"  # the compression table's first column
COMPRESSION_WAITS = "Compare index sizes and quality (the button above) to fill this table."


def _require_labels(split: str | None) -> str:
    if not split:
        raise refuse("this data set has no relevance labels to evaluate against")
    return split


def on_request(ws: Workspace) -> list[str]:
    """The registered systems not shown by default (the other hybrids, say): Evaluate adds them when picked."""
    return [s for s in keys() if s not in ws.shown_systems]


def _asked(ws: Workspace, extras: list[str] | None) -> list[str]:
    """Those of ``extras`` that are systems shown on request."""
    offered = on_request(ws)
    return [e for e in extras or [] if e in offered]


def _systems(ws: Workspace, extras: list[str] | None) -> tuple[str, ...]:
    """The systems on show, then those of ``extras`` shown on request, each once its index is built."""
    asked = _asked(ws, extras)
    waiting = ws.pending(asked)
    return (*shown_systems(ws), *(s for s in asked if s not in waiting))


def _ready(ws: Workspace, extras: list[str] | None) -> list[str]:
    """The variants to add (int8, PCA, fine-tuned encoders): none while the base's dense index is
    still being built (each would wait for it, or encode the corpus again)."""
    return [] if ws.pending((DENSE,)) else [e for e in extras or [] if e not in keys()]


def evaluate(ws: Workspace, split: str | None, extras: list[str] | None,
             viewer: Viewer | None = None) -> tuple[str, list[list], dict]:
    """Caption (λ and how it was chosen), the metrics table with † vs BM25, and the per-query table;
    ``viewer``: whose judgments count (the session's, ``Registry.viewer``)."""
    split = _require_labels(split)
    systems = _systems(ws, extras)
    try:
        shown = comparison_workspaces(ws, _ready(ws, extras))
        rows = metrics_rows(shown, split, systems, viewer)
        verdicts = conclusions_note(shown, split, systems, viewer=viewer)
    except (ValueError, OSError) as err:  # e.g. a fine-tuned folder deleted meanwhile
        raise refuse(err) from err
    wins = {"headers": ["query", "text", *(label(s) for s in systems), "disagreement"],
            "data": [[r["query"], r["text"][:80], *(round(r["values"][s], 3) for s in systems),
                      round(r["disagreement"], 3)] for r in per_query_table(ws, split, systems)]}
    waiting = [s for s in _asked(ws, extras) if s not in systems]  # left out by _systems: its index is being built
    lines = [metrics_caption(ws, split), weights_note(ws, split, systems),
             *(f"⏳ {text(label(s))} waits for its index, still being built: evaluate again when it is done."
               for s in waiting), *(f"⚠️ {w}" for w in warnings(ws))]
    note = "\n\n".join(line for line in lines if line)
    return note + (f"\n\n{verdicts}" if verdicts else ""), rows, wins


def summary(ws: Workspace, split: str | None, extras: list[str] | None,
            viewer: Viewer | None = None) -> tuple[str, str, str]:
    """What a stakeholder reads first: the one-line verdict (``metric_tables.headline``) with its interval
    and judged@10, the table of the metrics chosen for a glance (``texts.AT_A_GLANCE``, each
    explained on hover), and the formulas kept behind a toggle. On labels judged in the app the
    verdict and the first table are the judged pool's (``metric_tables.judged_pool``: success@10, P@10
    and the queries every system fails on, over every judged query), and the metrics normalised by
    the relevant documents found so far follow, named relative."""
    if not split:
        return "", "", metrics_formulas(ws, None)
    systems = _systems(ws, extras)
    try:
        shown = comparison_workspaces(ws, _ready(ws, extras))
        rows = metrics_table(shown, split, systems, metrics=VIEW_METRICS, viewer=viewer)
        pool = judged_pool(shown, split, systems, viewer=viewer)
        compared, covered, _ = covered_comparisons(shown, split, systems, viewer=viewer) if pool is None else ([], {},
                                                                                                             None)
    except (ValueError, OSError) as err:
        raise refuse(err) from err
    if pool is not None:
        return (pool_headline_text(pool, split),
                pool_table_html(pool) + glance_html(rows, texts.AT_A_GLANCE, texts.METRIC_HELP, relative_names()),
                metrics_formulas(ws, split))
    return (headline_text(headline(rows, compared), covered, split, METRIC_NAMES),
            glance_html(rows, texts.AT_A_GLANCE, texts.METRIC_HELP, METRIC_NAMES), metrics_formulas(ws, split))


def plots(ws: Workspace, split: str | None, extras: list[str] | None, viewer: Viewer | None = None):
    """Per-query BM25-vs-dense scatter, Recall@k curves, λ sweep (skipped without labels)."""
    if not split:
        return gr.skip(), gr.skip(), gr.skip()
    scatter, curves = comparison_figures(ws, comparison_workspaces(ws, _ready(ws, extras)), split,
                                         _systems(ws, extras), viewer=viewer)
    if ws.pending((DENSE,)):  # encoding in the background: BM25 (and imported runs) only for now
        return None, curves, None
    return scatter, curves, lambda_sweep(CLEAR.lambda_for(ws, split), split, CLEAR.lambda_fit(ws, split).grid)


def segments(ws: Workspace, split: str | None) -> dict:
    """nDCG@10 of every shown system by kind of query (length, digits, question or keywords,
    language, the queries file's own fields), each with its interval, the segments where one system
    is significantly worse first (``retrieval.evaluation.query_kinds``); systems still being built are left out."""
    split = _require_labels(split)
    systems = [s for s in shown_systems(ws) if not ws.pending((s,))]
    evals = {label(s): ws.evaluate(s, split) for s in systems}
    rows = segment_table(evals, ws.dataset)
    if not rows:
        return placeholder("by kind of query", f"No kind of query splits these queries into groups of {MIN_QUERIES} "
                           "or more, short of all of them: the table above is the only row.")
    return segment_cells(rows, list(evals))


def segments_before(ws: Workspace) -> dict:
    """The table by kind of query before it is computed: its columns for the systems on show, no row."""
    return {"headers": segment_headers([label(s) for s in shown_systems(ws)]), "data": []}


def compression(ws: Workspace, split: str | None) -> dict:
    """Quality and bytes per document of float32, int8 and PCA-reduced indexes (dense and hybrid)."""
    split = _require_labels(split)
    d = reduced_dims(ws.encoder.dim)
    require_dense(ws)
    rows = [r.to_dict() for r in compression_table(ws, split, variants=(("flat", None), ("sq8", None),
                                                                          ("flat", d), ("sq8", d)))]
    return {"headers": list(rows[0]), "data": [[rounded(v) for v in r.values()] for r in rows]}


def out_of_date(ws: Workspace, split: str | None, rows, empty: bool) -> bool:
    """Whether Evaluate's results are to be computed again: there are labels to evaluate against, and
    its metrics table (``rows``, as on show) lacks a system on show now (computed while that system's
    index was being built: the note says it waits for it, while the banner says it is ready); or the
    table is empty, where ``empty`` (the tab opened on nothing computed yet)."""
    if not split:
        return False
    on_show = {str(r[0]) for r in (rows.values.tolist() if hasattr(rows, "values") else rows or []) if r}
    if not on_show:
        return empty
    return not {label(s) for s in shown_systems(ws)} <= on_show


def extras_choices(registry: Registry, ws: Workspace) -> list[tuple[str, str]]:
    """What can be evaluated beside the workspace: the systems shown on request, int8 and PCA
    indexes, fine-tuned encoders and fine-tuned learned sparse models."""
    return ([(label(s), s) for s in on_request(ws)]
            + [("int8 index (FAISS SQ8, Baidu §5.1)", "int8"), (f"PCA to {reduced_dims(ws.encoder.dim)} dims", "pca")]
            + [(name, path) for name, path in encoder_choices(registry, ws)[1:] if path != ws.model_name]
            + sparse_choices(registry, ws))


def _labelled(ctx: Context, key: str, split: str | None, request: gr.Request | None,
              chosen: dict | None) -> tuple[Workspace, str | None]:
    """The session's workspace with the judgments as labels now (no split picked: their default,
    ``Context.labelled_split``) and the session's system settings (``knobs.applied``)."""
    ws, split = ctx.labelled_split(key, split, request)
    return knobs.applied(ws, chosen), split


@dataclass
class EvaluateView(SplitView):
    """Evaluate's split picker and its results: a newly opened data set clears the results (they were
    the last data set's), so they are never read as this one's, and opening the tab computes them."""

    results: list = field(default_factory=list)  # note, table, wins, headline, glance, by kind, compression

    def outputs(self) -> list:
        return [self.split, *self.results]

    def refresh(self, ws: Workspace, viewer: Viewer | None = None) -> tuple:
        return (*super().refresh(ws, viewer), "", None, None, "", "", segments_before(ws),
                placeholder(COMPRESSION_HEAD, COMPRESSION_WAITS))


def _computing(labelled: Callable[..., tuple[Workspace, str | None]], on_evaluate: Callable[..., tuple],
               empty: bool) -> Callable[..., tuple]:
    """The tab opened (``empty``: on nothing computed yet too), or a background build over (results
    computed while it ran are computed again, none computed are not): the results, if out of date, and
    whether the rest of the chain computes too."""
    def first(split_: str | None, extras_: list[str], key: str, chosen: dict, rows, request: gr.Request):
        ws, split_ = labelled(key, split_, request, chosen)
        if not out_of_date(ws, split_, rows, empty=empty):
            return gr.skip(), gr.skip(), gr.skip(), False
        return (*on_evaluate(split_, extras_, key, chosen, request), True)
    return first


def build(ctx: Context, tab: gr.Tab, arrived: gr.State | None = None) -> EvaluateView:
    """The view; ``arrived``: the shell's counter bumped when a background build is over (results
    computed while it ran are computed again then)."""
    ws = ctx.start
    with gr.Row():
        split = split_dropdown(ws)
        extras = gr.CheckboxGroup(choices=extras_choices(ctx.registry, ws), value=[], elem_id="eval-extras",
                                  label="Also evaluate (systems on request, compressed indexes, fine-tuned encoders)",
                                  scale=3)
        button = gr.Button("Evaluate", variant="primary", elem_id="evaluate-button", scale=1)
    settings = knobs.build()  # the session's values of the systems' declared parameters: every handler applies them
    headline_ = gr.Markdown(elem_id="eval-headline")
    glance = gr.HTML(elem_id="eval-glance")
    with gr.Accordion("All metrics (every column, † against BM25)", open=False, elem_id="eval-all"):
        metrics = table(["system", *VIEW_METRICS], elem_id="eval-table")
    note = gr.Markdown(elem_id="eval-note")
    with gr.Accordion("How the figures are made (formulas, the statistical rule, each metric)", open=False):
        formulas = gr.Markdown(metrics_formulas(ws, None), elem_id="eval-formulas")
    with gr.Row():
        scatter = gr.Plot(label="Per query: BM25 vs dense nDCG@10", elem_id="eval-scatter")
        recall = gr.Plot(label="Recall@k", elem_id="eval-recall")
    sweep = gr.Plot(label="Hybrid λ sweep", elem_id="eval-sweep")
    gr.Markdown(texts.EVALUATE_INTRO)
    wins = table(WINS_HEADERS)
    with gr.Accordion("By kind of query (nDCG@10 with 95% intervals; where a system is significantly worse first)",
                      open=True):
        gr.Markdown(texts.SEGMENTS_HELP)
        by_kind = table(segments_before(ws)["headers"], elem_id="eval-segments")
    with gr.Accordion("Embedding compression (Baidu §5: int8 codes, fewer dimensions)", open=False):
        compress = gr.Button("Compare index sizes and quality", elem_id="compress-button")
        compress_table = table([COMPRESSION_HEAD], waiting=COMPRESSION_WAITS, elem_id="compress-table")

    def allowed(extras_: list[str] | None) -> list[str]:
        return [e if e in INDEX_VARIANTS or e in keys() else ctx.allowed_model(e) for e in extras_ or [] if e]

    def viewer(request: gr.Request | None) -> Viewer:
        return ctx.registry.viewer(session_of(request))

    labelled = functools.partial(_labelled, ctx)  # the judgments as labels now, with the session's system settings

    def on_evaluate(split_: str | None, extras_: list[str], key: str, chosen: dict, request: gr.Request):
        return evaluate(*labelled(key, split_, request, chosen), allowed(extras_), viewer(request))

    def on_summary(split_: str | None, extras_: list[str], key: str, chosen: dict, request: gr.Request):
        return summary(*labelled(key, split_, request, chosen), allowed(extras_), viewer(request))

    def on_plots(split_: str | None, extras_: list[str], key: str, chosen: dict, request: gr.Request):
        return plots(*labelled(key, split_, request, chosen), allowed(extras_), viewer(request))

    def on_compression(split_: str | None, key: str, chosen: dict, request: gr.Request):
        return compression(*labelled(key, split_, request, chosen))

    def on_segments(split_: str | None, key: str, chosen: dict, request: gr.Request):
        return segments(*labelled(key, split_, request, chosen))

    state = settings.chosen  # a session's state: not an input of the named endpoints
    button.click(on_evaluate, [split, extras, ctx.key, state], [note, metrics, wins], api_name="evaluate",
                 **HEAVY).then(
        on_summary, [split, extras, ctx.key, state], [headline_, glance, formulas], api_visibility="private",
        **HEAVY).then(
        on_plots, [split, extras, ctx.key, state], [scatter, recall, sweep], api_visibility="private",
        **HEAVY).then(
        on_segments, [split, ctx.key, state], by_kind, api_name="segments", **HEAVY)
    compress.click(on_compression, [split, ctx.key, state], compress_table, api_name="compression", **HEAVY)
    def on_extras(key: str, request: gr.Request):
        return gr.update(choices=extras_choices(ctx.registry, ctx.labelled(key, request)))

    tab.select(on_extras, ctx.key, extras, api_visibility="private", **LIGHT)
    opened = gr.State(False)  # the tab was opened on a table left empty or stale: the chain below computes it

    on_open, on_arrival = _computing(labelled, on_evaluate, True), _computing(labelled, on_evaluate, False)

    def on_open_summary(go: bool, split_: str, extras_: list[str], key: str, chosen: dict, request: gr.Request):
        return on_summary(split_, extras_, key, chosen, request) if go else (gr.skip(),) * 3

    def on_open_plots(go: bool, split_: str, extras_: list[str], key: str, chosen: dict, request: gr.Request):
        return on_plots(split_, extras_, key, chosen, request) if go else (gr.skip(),) * 3

    def on_open_segments(go: bool, split_: str, key: str, chosen: dict, request: gr.Request):
        return on_segments(split_, key, chosen, request) if go else gr.skip()

    triggers = [(tab.select, on_open)] + ([(arrived.change, on_arrival)] if arrived is not None else [])
    for trigger, first in triggers:
        trigger(first, [split, extras, ctx.key, state, metrics], [note, metrics, wins, opened],
                api_visibility="private", **HEAVY).then(
            on_open_summary, [opened, split, extras, ctx.key, state],
            [headline_, glance, formulas], api_visibility="private", **HEAVY).then(
            on_open_plots, [opened, split, extras, ctx.key, state],
            [scatter, recall, sweep], api_visibility="private", **HEAVY).then(
            on_open_segments, [opened, split, ctx.key, state], by_kind, api_visibility="private", **HEAVY)
    return EvaluateView(split, [note, metrics, wins, headline_, glance, by_kind, compress_table])
