"""The Failures view: counts per failure category and the cards (most dramatic rank moves first), then
the queries no split labels predicted to fail (query performance prediction: a data set without labels
shows them alone); a click on a card, or a pick from the list, opens its query (by id) in the Search
view; the gallery exports as one self-contained HTML file."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from retrieval import Store, Workspace
from retrieval.data import query_sets
from retrieval.evaluation.failure_gallery import Gallery, failure_gallery
from retrieval.safe_names import file_name
from retrieval.sharing.owners import Viewer
from retrieval.systems import label
from retrieval.tracking.history import trained_encoders
from ui import difficulty, texts
from ui.common import SplitView, require_dense, split_dropdown
from ui.exports import export_folder
from ui.notify import refuse
from ui.pools import HEAVY, LIGHT
from ui.present.evaluation import report_parts
from ui.present.figures import counts_figure
from ui.present.predicted import PredictedFailures, has_unlabelled, report_html, section_html, unlabelled
from ui.present.report import GALLERY_CSS, gallery_fragment, write_gallery, write_html
from ui.present.vocabulary import category_label
from ui.registry import Context, Registry, session_of

# A click anywhere on a failure card sends its query id to Python (event delegation survives re-renders)
CARD_CLICK_JS = ("element.addEventListener('click', (e) => { const card = e.target.closest('.rs-card'); "
                 "if (card) trigger('click', {query_id: card.dataset.queryId}); });")


def tuned_choices(registry: Registry, ws: Workspace) -> list[tuple[str, str]]:
    """"none", then every encoder fine-tuned on this data set (its folder as the value)."""
    return [("none", "")] + [(f"fine-tuned: {e.loss} ({e.job_id})", e.path)
                             for e in trained_encoders(registry.store, ws.dataset.content_hash)]


def pair_choices(ws: Workspace) -> list[tuple[str, str]]:
    """"—" (no pair), then every system of the workspace, imported runs included."""
    return [("—", "")] + [(label(s), s) for s in ws.system_names]


def tuned_dropdown(label: str, elem_id: str) -> gr.Dropdown:
    """A fine-tuned encoder picker (filled when its tab opens; any model folder or id typed is accepted)."""
    return gr.Dropdown(choices=[("none", "")], value="", label=label, elem_id=elem_id, scale=2,
                       allow_custom_value=True)


def gallery(ws: Workspace, split: str | None, tuned: str, pair: tuple[str, str] | None = None,
            viewer: Viewer | None = None) -> Gallery:
    """The failure gallery (``retrieval.evaluation.failure_gallery``), with the judgments ``viewer`` counts."""
    if not split:
        raise refuse("this data set has no relevance labels: failures need them")
    require_dense(ws)
    try:
        return failure_gallery(ws, split, tuned_ws=ws.with_model(tuned) if tuned else None, pair=pair, viewer=viewer)
    except (ValueError, OSError) as err:
        raise refuse(err) from err


def chosen_pair(a: str, b: str) -> tuple[str, str] | None:
    """Two different systems picked (A, B), else None."""
    return (a, b) if a and b and a != b else None


def predicted(ws: Workspace, store: Store | None, viewer: Viewer | None) -> PredictedFailures | None:
    """The queries predicted to fail among those no split labels that ``viewer`` may see (predicted among
    all of them, in the worker thread, as the query table is: ``ui.difficulty``), None when every one is
    labelled (nothing is predicted then)."""
    ids = query_sets.seen_queries(store, ws.dataset, viewer) if viewer is not None else None
    if not has_unlabelled(ws, ids):
        return None
    found = difficulty.predictions(ws, store, viewer, wait=True)
    return unlabelled(ws, found) if found is not None else None


def _predicted_picks(found: PredictedFailures | None) -> list[tuple[str, str]]:
    return [(f"predicted to fail · {q.query_id}: {q.text[:70]} (difficulty {q.difficulty:.2f})", q.query_id)
            for q in (found.queries if found is not None else [])]


def failures(ws: Workspace, split: str | None, tuned: str, pair: tuple[str, str] | None = None,
             viewer: Viewer | None = None, store: Store | None = None):
    """Counts figure, cards HTML, the card picker (values: query ids) and the gallery as JSON;
    ``pair`` (A, B) adds "B finds, A misses" and the reverse; ``viewer``: whose judgments count. The
    queries no split labels that ``viewer`` sees follow as "queries predicted to fail"; a data set without
    labels shows that section alone (no counts)."""
    if not split:
        require_dense(ws)
        alone = predicted(ws, store, viewer)
        if alone is None:
            raise refuse("this data set has no queries to predict")
        return (None, section_html(alone), gr.update(choices=_predicted_picks(alone), value=None),
                {"predicted": [{"query_id": q.query_id, "difficulty": q.difficulty, "predicted": q.predicted}
                               for q in alone.queries]})
    found = gallery(ws, split, tuned, pair, viewer)
    extra = predicted(ws, store, viewer)
    picks = [(f"{category_label(c.category, found.pair)} · {c.query_id}: {c.query[:70]} ({c.headline})", c.query_id)
             for cards in found.cards.values() for c in cards] + _predicted_picks(extra)
    section = section_html(extra, labelled=True) if extra is not None else ""
    return (counts_figure(found), gallery_fragment(found) + section,
            gr.update(choices=list(dict.fromkeys(picks)), value=None), found.to_json())


def export(ws: Workspace, split: str | None, tuned: str, pair: tuple[str, str] | None = None,
           viewer: Viewer | None = None, store: Store | None = None) -> str:
    """The gallery with its plots as one HTML file that opens offline, the queries without labels predicted
    to fail after it (a data set without labels: that section alone); returns its path."""
    if not split:
        require_dense(ws)
        alone = predicted(ws, store, viewer)
        if alone is None:
            raise refuse("this data set has no queries to predict")
        name = file_name("rankscope-predicted", ws.dataset.name, suffix=".html")
        return str(write_html(export_folder() / name, report_html(alone, ws.dataset.name, GALLERY_CSS)))
    found = gallery(ws, split, tuned, pair, viewer)
    workspaces = {"": ws, **({f"fine-tuned {Path(tuned).name}": ws.with_model(tuned)} if tuned else {})}
    figures, summary = report_parts(ws, workspaces, found, viewer=viewer)
    extra = predicted(ws, store, viewer)
    name = file_name("rankscope-failures", ws.dataset.name, split, suffix=".html")  # a slug and a hash
    return str(write_gallery(found, export_folder() / name, figures, summary=summary,
                             predicted=section_html(extra, labelled=True) if extra is not None else ""))


@dataclass
class FailuresView(SplitView):
    cards: gr.HTML
    pick: gr.Dropdown
    open: gr.Button


def build(ctx: Context, tab: gr.Tab) -> FailuresView:
    ws = ctx.start
    gr.Markdown(texts.FAILURES_INTRO)
    with gr.Row():
        split = split_dropdown(ws)
        tuned = tuned_dropdown("Fine-tuned encoder to compare", "failures-tuned")
        button = gr.Button("Find failures", variant="primary", elem_id="failures-button", scale=1)
        export_btn = gr.Button("Export HTML report", elem_id="export-button", scale=1)
    with gr.Row():
        pair_a = gr.Dropdown(choices=pair_choices(ws), value="", label="Compare two systems: A", elem_id="pair-a")
        pair_b = gr.Dropdown(choices=pair_choices(ws), value="",
                             label="…and B (adds “B finds, A misses” and the reverse)",
                             elem_id="pair-b")
        pair = gr.State(None)
    with gr.Row():
        pick = gr.Dropdown(choices=[], label="Open a card's query in the Search view", elem_id="failures-pick", scale=4)
        open_btn = gr.Button("Open in Search", elem_id="failures-open", scale=1)
    export_file = gr.File(label="Report (one self-contained HTML file)", elem_id="export-file")
    counts = gr.Plot(label="Failures per category", elem_id="failures-counts")
    gr.Markdown("Click a card to open its query in the Search view.")
    cards = gr.HTML(elem_id="failures-cards", js_on_load=CARD_CLICK_JS)
    as_json = gr.JSON(visible=False)

    def on_failures(split_: str, tuned_: str, key: str, pair_, request: gr.Request):
        return failures(*ctx.labelled_split(key, split_, request), ctx.allowed_model(tuned_), pair_,
                        ctx.registry.viewer(session_of(request)), ctx.registry.store)

    def on_export(split_: str, tuned_: str, key: str, pair_, request: gr.Request):
        return export(*ctx.labelled_split(key, split_, request), ctx.allowed_model(tuned_), pair_,
                      ctx.registry.viewer(session_of(request)), ctx.registry.store)

    def on_open(key: str, request: gr.Request):
        ws_ = ctx.labelled(key, request)
        systems = gr.update(choices=pair_choices(ws_))
        return gr.update(choices=tuned_choices(ctx.registry, ws_)), systems, systems

    tab.select(on_open, ctx.key, [tuned, pair_a, pair_b], api_visibility="private", **LIGHT)
    for box in (pair_a, pair_b):  # the pair is session state: /failures keeps its (split, tuned) signature
        box.input(chosen_pair, [pair_a, pair_b], pair, api_visibility="private", **LIGHT)
    button.click(on_failures, [split, tuned, ctx.key, pair], [counts, cards, pick, as_json], api_name="failures",
                 **HEAVY)
    export_btn.click(on_export, [split, tuned, ctx.key, pair], export_file, api_name="export_failures", **HEAVY)
    return FailuresView(split, cards, pick, open_btn)
