"""The Embeddings view: UMAP of queries, positives, hard and easy negatives for a sample of labelled
queries or one query's neighbourhood; base and fine-tuned encoder side by side on the same points,
with query–document similarity histograms."""
from __future__ import annotations

import threading

import gradio as gr

from retrieval import Workspace, numbers
from retrieval.evaluation.projection import project, sample_points, sample_ranks, similarities, umap_is_warm, warm_up
from retrieval.progress import Progress, scaled
from ui import texts
from ui.common import SplitView, query_choices, require_dense, split_dropdown
from ui.failures import tuned_choices, tuned_dropdown
from ui.notify import refuse
from ui.pools import HEAVY, LIGHT
from ui.present.embeddings import COMPILE_NOTE, projection_figure, side_by_side_figure, similarity_histogram
from ui.registry import Context


def _compile_noted(progress: Progress | None) -> Progress | None:
    """Progress that says, while UMAP is fitted for the first time in this process, why it is slow."""
    if progress is None or umap_is_warm():
        return progress
    return lambda fraction, what: progress(fraction, f"{what} — {COMPILE_NOTE}" if what.startswith("fitting") else what)


def project_view(ws: Workspace, split: str | None, n_queries: float, query_text: str, tuned: str,
                 progress: Progress | None = None):
    """UMAP of a sample (or one query's neighbourhood, ``query_text``), base beside fine-tuned
    (``tuned``: a model folder or id, "" = none): status line, figure, histograms, JSON summary."""
    if not split:
        raise refuse("this data set has no relevance labels: projections need labelled queries")
    qid = None
    if query_text:  # one query: its own split's labels
        qid, qsplit = ws.dataset.find_query(query_text)
        split = qsplit or split
    require_dense(ws)
    was_warm = umap_is_warm()  # the first fit in a process compiles numba code: say so
    progress = _compile_noted(progress)
    try:
        sample = sample_points(ws, split, n_queries=numbers.whole(n_queries or 40, "the sampled queries"), query_id=qid)
        base = project(ws, sample, progress=scaled(progress, 0.0, 0.5 if tuned else 1.0))
        sims = {"base": similarities(ws, sample)}
        done = None
        if tuned:
            ws_t = ws.with_model(tuned)
            done = project(ws_t, sample, progress=scaled(progress, 0.5, 1.0))
            sims["fine-tuned"] = similarities(ws_t, sample)
            figure = side_by_side_figure(base, done, sample, tuned_ranks=sample_ranks(ws_t, sample))
        else:
            figure = projection_figure(base, sample, ws.encoder.name)
    except (ValueError, OSError) as err:
        raise refuse(err) from err
    counts = sample.counts()
    shown = [(name, p) for name, p in (("base", base), ("fine-tuned", done)) if p is not None]
    timing = "; ".join(f"{name}: {'from the cache' if p.cached else f'fitted in {p.seconds:.1f} s'}"
                       for name, p in shown)
    compiled = not was_warm and not all(p.cached for _, p in shown)
    status = (f"{len(sample.points)} points ({', '.join(f'{n} {r}' for r, n in counts.items())}) · {timing}"
              + (f" · note: {COMPILE_NOTE}" if compiled else ""))
    summary = {"points": len(sample.points), "counts": counts, "cached": [p.cached for _, p in shown],
               "seconds": [round(p.seconds, 2) for _, p in shown],
               "mean_similarity": {name: {r: float(v.mean()) if len(v) else None for r, v in by.items()}
                                   for name, by in sims.items()}}
    return status, figure, similarity_histogram(sims), summary


def warm_up_in_background() -> None:
    """Compile UMAP's numba code in a thread while the user picks a sample (not at start-up: it holds
    the numba lock, which labelled searches' metrics need too)."""
    if not umap_is_warm() and not any(t.name == "umap-warm-up" for t in threading.enumerate()):
        threading.Thread(target=warm_up, name="umap-warm-up", daemon=True).start()


def build(ctx: Context, tab: gr.Tab) -> SplitView:
    ws = ctx.start
    gr.Markdown(texts.EMBEDDINGS_INTRO)
    with gr.Row():
        split = split_dropdown(ws)
        n = gr.Slider(5, 300, value=40, step=5, label="Sampled queries", scale=2)
        query = gr.Dropdown(choices=_query_text_choices(ws), value="", elem_id="emb-query", scale=2,
                            label="…or one query and its neighbourhood")
        tuned = tuned_dropdown("Fine-tuned encoder beside it", "emb-tuned")
        button = gr.Button("Project", variant="primary", elem_id="project-button", scale=1)
    status = gr.Markdown(elem_id="emb-status")
    plot = gr.Plot(label="UMAP projection", elem_id="emb-plot")
    hist = gr.Plot(label="Query–document cosine similarities", elem_id="emb-hist")
    summary = gr.JSON(visible=False)

    def on_open(key: str, request: gr.Request):
        warm_up_in_background()
        ws_ = ctx.labelled(key, request)
        return gr.update(choices=tuned_choices(ctx.registry, ws_)), gr.update(choices=_query_text_choices(ws_))

    def on_project(split_, n_, query_, tuned_, key, request: gr.Request, progress=gr.Progress()):
        return project_view(*ctx.labelled_split(key, split_, request), n_, query_, ctx.allowed_model(tuned_),
                            progress=lambda f, what: progress(f, desc=what))

    tab.select(on_open, ctx.key, [tuned, query], api_visibility="private", **LIGHT)
    button.click(on_project, [split, n, query, tuned, ctx.key], [status, plot, hist, summary], api_name="project",
                 **HEAVY)
    return SplitView(split)


def _query_text_choices(ws: Workspace) -> list[tuple[str, str]]:
    """"a sample of queries" (""), then every labelled query by its text (the ``/project`` API takes text)."""
    return [("a sample of queries", "")] + [(name, ws.dataset.queries[qid]) for name, qid in query_choices(ws)]
