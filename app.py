"""RankScope — the Gradio app: a thin layer of views over the ``retrieval`` library.

    python app.py [--data PATH] [--model ID_OR_FOLDER] [--store FILE] [--host H] [--port P]

Opens the bundled demo corpus (already indexed at start-up) unless ``--data`` names another data
set. Named API endpoints (see the README): ``search``, ``evaluate``, ``load_dataset``.
"""
from __future__ import annotations

import argparse
import html
import os
import re
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from pathlib import Path

import gradio as gr
import plotly.graph_objects as go

from retrieval import DataError, Store, Workspace, load_dataset, load_files
from retrieval.compare import DEFAULT_SYSTEMS, SideBySide, find_query, side_by_side
from retrieval.compression import compression_table
from retrieval.failures import CATEGORY_LABELS, failure_gallery
from retrieval.history import compare_runs, list_runs
from retrieval.plots import lambda_sweep, metrics_table, per_query_scatter, recall_curves, table_cells
from retrieval.projection import (COMPILE_NOTE, project, projection_figure, sample_points, sample_ranks,
                                  side_by_side_figure, similarities, similarity_histogram, umap_is_warm, warm_up)
from retrieval.readers import detect_role
from retrieval.report import GALLERY_CSS, counts_figure, gallery_fragment, write_gallery
from retrieval.workspace import SYSTEM_LABELS
from training.job import FINAL, JobQueue, JobSpec
from training.losses import LOSSES
from training.trainer import TrainConfig

ROOT = Path(__file__).resolve().parent
DEMO = ROOT / "data" / "demo"
CSS_PATH = ROOT / "assets" / "style.css"
MAX_UPLOAD = os.environ.get("RANKSCOPE_MAX_UPLOAD", "200mb")
LABEL_BADGE = {2: ("rel-2", "relevant (2)"), 1: ("rel-1", "partly relevant (1)"), 0: ("rel-0", "judged not relevant (0)")}
METRIC_COLUMNS = ("ndcg@10", "mrr@10", "recall@10", "recall@100", "map", "p@10", "pnr")
# A click anywhere on a failure card sends its query id to Python (event delegation survives re-renders)
CARD_CLICK_JS = ("element.addEventListener('click', (e) => { const card = e.target.closest('.rs-card'); "
                 "if (card) trigger('click', {query_id: card.dataset.queryId}); });")
# Concurrency: searches have their own pool, so one user's encoding, evaluation or projection
# (HEAVY, a small pool) never queues another user's search; training runs in its own job thread.
SEARCH = {"concurrency_id": "search", "concurrency_limit": 8}
HEAVY = {"concurrency_id": "heavy", "concurrency_limit": 2}
LIGHT = {"concurrency_id": "light", "concurrency_limit": 8}


class Registry:
    """Opened workspaces (shared by every session), at most ``size`` kept, least recent dropped."""

    def __init__(self, store: Store, model: str | None, size: int = 4):
        self.store, self.model, self.size = store, model, size
        self._items: OrderedDict[str, Workspace] = OrderedDict()
        self._lock = threading.Lock()

    def open(self, dataset, progress=None, model: str | None = None) -> str:
        """Open ``dataset`` with ``model`` (default: the app's encoder); returns the session key."""
        model = model or self.model
        key = f"{dataset.content_hash}:{model or ''}"
        with self._lock:
            ws = self._items.get(key)
            if ws is None:
                ws = Workspace(dataset, self.store, model=model)
        ws.bm25  # noqa: B018 - build now, so the first search is fast
        ws.build_dense(progress=progress)
        with self._lock:
            self._items[key] = ws
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return key

    def get(self, key: str) -> Workspace:
        with self._lock:
            ws = self._items.get(key)
        if ws is None:
            raise gr.Error("this data set was closed to free memory; load it again on the Data tab")
        return ws


# ---- rendering (pure functions of library results) ---------------------------------------
def highlight(text: str, ws: Workspace, terms: set[str], limit: int = 420) -> str:
    """HTML-escaped ``text`` (cut near ``limit`` chars) with query-term matches in <mark>."""
    cut = text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " …"
    out, pos = [], 0
    for start, end, token in ws.tokenizer.spans(cut):
        if token in terms:
            out.append(html.escape(cut[pos:start]))
            out.append(f"<mark>{html.escape(cut[start:end])}</mark>")
            pos = end
    out.append(html.escape(cut[pos:]))
    return "".join(out)


def render_side_by_side(res: SideBySide, ws: Workspace) -> str:
    terms = set(res.terms)
    cols = []
    for system, hits in res.systems.items():
        cards = []
        for h in hits:
            badge = ""
            if h.label is not None:
                cls, title = LABEL_BADGE.get(h.label, ("rel-1", f"label {h.label}"))
                badge = f'<span class="badge {cls}" title="{title}">{h.label}</span>'
            elsewhere = " · ".join(
                f"{SYSTEM_LABELS[o].split(' ')[0]} {'#' + str(r) if r else '—'}"
                for o, r in h.ranks.items() if o != system)
            why = " · ".join(f"{html.escape(t)} {v:.2f}" for t, v in h.bm25_terms)
            why = f'<div class="why">BM25 terms: {why}</div>' if why else ""
            missing = (f'<div class="missing">no exact match: {html.escape(", ".join(h.missing_terms))}</div>'
                       if h.missing_terms and res.terms else "")
            cards.append(
                f'<div class="hit"><div class="hit-head"><span class="rank">{h.rank}</span>{badge}'
                f'<span class="title">{html.escape(h.title or h.doc_id)}</span>'
                f'<span class="score">{h.score:.3f}</span></div>'
                f'<div class="meta">{html.escape(h.doc_id)} · also: {elsewhere}</div>'
                f'<div class="snippet">{highlight(h.text, ws, terms)}</div>{why}{missing}</div>')
        metric = res.per_query_metrics.get(system, {})
        head = SYSTEM_LABELS[system]
        if metric:
            head += f' <span class="qmetric">nDCG@10 {metric.get("ndcg@10", 0):.3f}</span>'
        cols.append(f'<div class="col"><h3>{head}</h3>{"".join(cards) or "<p>no document matches</p>"}</div>')
    summary = ""
    if res.query_id:
        rows = "".join(
            f"<tr><td>{html.escape(r['doc_id'])}</td><td>{html.escape(r['title'] or '')}</td><td>{r['label']}</td>"
            + "".join(f"<td>{r['ranks'][s] or '—'}</td>" for s in res.systems) + "</tr>"
            for r in res.relevant)
        summary = (f'<details open class="judged"><summary>Labelled documents for {html.escape(res.query_id)} '
                   f'({html.escape(res.split or "")} split): rank under each system</summary>'
                   f'<table><tr><th>doc</th><th>title</th><th>label</th>'
                   + "".join(f"<th>{SYSTEM_LABELS[s]}</th>" for s in res.systems) + f"</tr>{rows}</table></details>")
    return f'<div class="sbs">{"".join(cols)}</div>{summary}'


def metrics_rows(ws: Workspace | dict[str, Workspace], split: str, systems=DEFAULT_SYSTEMS) -> list[list]:
    """The metrics table (every system of every workspace given), † = differs from BM25, p < 0.05."""
    return table_cells(metrics_table(ws, split, systems, METRIC_COLUMNS), METRIC_COLUMNS)


def fmt(v) -> object:
    """Table cell: floats to 4 decimals."""
    return round(v, 4) if isinstance(v, float) else v


def bm25_dense_scatter(ws: Workspace, split: str):
    """Per-query nDCG@10, BM25 (x) against dense (y): the Evaluate tab's and the report's scatter."""
    return per_query_scatter(ws.evaluate("bm25", split), ws.evaluate("dense", split), "BM25", "Dense",
                             query_text=ws.dataset.queries)


def reduced_dims(ws: Workspace) -> int:
    """The reduced dimensionality offered: 128 (a third of MiniLM's 384), or half a smaller encoder's."""
    return 128 if ws.encoder.dim > 128 else max(2, ws.encoder.dim // 2)


def comparison_choices(registry: "Registry", ws: Workspace) -> list[tuple[str, str]]:
    return ([("int8 index (FAISS SQ8, Baidu §5.1)", "int8"), (f"PCA to {reduced_dims(ws)} dims", "pca")]
            + [(label, path) for label, path in encoder_choices(registry, ws)[1:] if path != ws.model_name])


def comparison_workspaces(ws: Workspace, extras: list[str] | None) -> dict[str, Workspace]:
    """The evaluated workspace plus the variants ticked: "int8", "pca", or a fine-tuned model folder."""
    out = {"": ws}
    for extra in extras or []:
        if extra == "int8":
            out["int8 index"] = ws.with_index("sq8")
        elif extra == "pca":
            dims = reduced_dims(ws)
            out[f"PCA {dims} dims"] = ws.with_index("flat", dims)
        elif extra:
            out[f"fine-tuned {Path(extra).name}"] = ws.with_model(extra)
    return out


def dataset_markdown(ws: Workspace) -> str:
    ds = ws.dataset
    splits = ", ".join(f"{s}: {len(q)} queries / {sum(len(v) for v in q.values())} labels"
                       for s, q in ds.qrels.items()) or "no relevance labels"
    return (f"**{html.escape(ds.name)}** — {len(ds.docs):,} documents, {len(ds.queries):,} queries ({splits}); "
            f"encoder `{ws.encoder.name}`; content hash `{ds.content_hash[:12]}`")


def query_choices(ws: Workspace) -> list[tuple[str, str]]:
    out = []
    for split, qrels in ws.dataset.qrels.items():
        for qid in qrels:
            if qid in ws.dataset.queries:
                out.append((f"[{split}] {qid}: {ws.dataset.queries[qid]}", ws.dataset.queries[qid]))
    return out


# ---- the app -----------------------------------------------------------------------------
def build_app(registry: Registry, default_key: str, jobs: JobQueue | None = None) -> gr.Blocks:
    jobs = jobs or JobQueue(registry.store)
    default_ws = registry.get(default_key)

    with gr.Blocks(title="RankScope") as demo:
        key_state = gr.State(default_key)
        gr.Markdown("# RankScope\nWhy does first-stage retrieval fail? BM25, dense and hybrid, side by side.")
        data_md = gr.Markdown(dataset_markdown(default_ws), elem_id="dataset-summary")

        with gr.Tabs() as tabs:
            with gr.Tab("Search", id="search"):
                with gr.Row():
                    query = gr.Textbox(label="Query", placeholder="type a query, or pick a labelled one",
                                       scale=4, elem_id="query-box")
                    go = gr.Button("Search", variant="primary", scale=1, elem_id="search-button")
                with gr.Row():
                    picker = gr.Dropdown(choices=query_choices(default_ws), label="Labelled queries",
                                         value=None, elem_id="query-picker", scale=3)
                    encoder_dd = gr.Dropdown(choices=encoder_choices(registry, default_ws), value="",
                                             label="Dense encoder", elem_id="encoder-picker", scale=1,
                                             allow_custom_value=True)
                results = gr.HTML(elem_id="results")
                with gr.Accordion("Raw results (JSON)", open=False):
                    raw = gr.JSON()
                with gr.Accordion("Metrics of the three systems on the whole query set", open=True):
                    split0 = default_ws.dataset.default_split()
                    metrics_note = gr.Markdown(metrics_caption(default_ws, split0))
                    metrics_table = gr.Dataframe(
                        value=metrics_rows(default_ws, split0) if split0 else [],
                        headers=["system", *METRIC_COLUMNS], interactive=False, elem_id="metrics-table")

            with gr.Tab("Evaluate", id="evaluate") as eval_tab:
                with gr.Row():
                    split_dd = gr.Dropdown(choices=default_ws.dataset.splits, value=split0, label="Split", scale=1)
                    extras_cb = gr.CheckboxGroup(choices=comparison_choices(registry, default_ws), value=[],
                                                 label="Also evaluate (compressed indexes, fine-tuned encoders)",
                                                 elem_id="eval-extras", scale=3)
                    eval_btn = gr.Button("Evaluate", variant="primary", elem_id="evaluate-button", scale=1)
                eval_note = gr.Markdown(elem_id="eval-note")
                eval_table = gr.Dataframe(headers=["system", *METRIC_COLUMNS], interactive=False, elem_id="eval-table")
                with gr.Row():
                    scatter_plot = gr.Plot(label="Per query: BM25 vs dense nDCG@10", elem_id="eval-scatter")
                    recall_plot = gr.Plot(label="Recall@k", elem_id="eval-recall")
                sweep_plot = gr.Plot(label="Hybrid λ sweep", elem_id="eval-sweep")
                gr.Markdown("Per-query nDCG@10 against BM25: where dense and hybrid win and lose.")
                wins_table = gr.Dataframe(headers=["query", "text", "BM25", "Dense", "Hybrid"], interactive=False)
                with gr.Accordion("Embedding compression (Baidu §5: int8 codes, fewer dimensions)", open=False):
                    compress_btn = gr.Button("Compare index sizes and quality", elem_id="compress-button")
                    compress_table = gr.Dataframe(interactive=False, elem_id="compress-table")

            with gr.Tab("Train", id="train"):
                gr.Markdown(TRAIN_HELP)
                with gr.Row():
                    loss_dd = gr.Dropdown(choices=[(LOSS_HELP[l], l) for l in LOSSES], value="quadruplet",
                                          label="Loss", scale=2)
                    neg_dd = gr.Dropdown(choices=[(NEG_HELP[n], n) for n in NEG_HELP], value="bm25",
                                         label="Negatives (residual, triplet, in-batch)", scale=2)
                d = TrainConfig()
                with gr.Row():
                    epochs_in = gr.Number(d.epochs, label="Epochs", precision=0, minimum=1)
                    batch_in = gr.Number(d.batch_size, label="Batch size", precision=0, minimum=2)
                    lr_in = gr.Number(d.lr, label="Learning rate")
                    seq_in = gr.Number(d.max_seq_length, label="Max sequence length", precision=0, minimum=16,
                                       elem_id="train-seq")
                    steps_in = gr.Number(None, label="Max steps per epoch (blank: all)", precision=0, elem_id="train-steps")
                with gr.Row():
                    margin_in = gr.Number(d.margin, label="Margin m (quadruplet, triplet)")
                    xi_in = gr.Number(0.3, label="ξ (residual; paper 1.0 for unnormalized BERT)")
                    lam_in = gr.Number(0.01, label="λ_train (residual; 0 = constant margin)")
                    device_dd = gr.Dropdown(["auto", "cpu", "cuda", "mps"], value="auto", label="Device")
                    cold_in = gr.Slider(0.05, 0.95, value=0.8, step=0.05,
                                        label="Cold-start train fraction (only without a train split)")
                    pretrain_dd = gr.Dropdown([("none", ""), ("ICT", "ict"), ("BFS", "bfs"), ("ICT + BFS", "ict+bfs")],
                                              value="", label="First stage on pseudo pairs (ICT/BFS)")
                with gr.Row():
                    train_btn = gr.Button("Start training", variant="primary", elem_id="train-button")
                    cancel_btn = gr.Button("Cancel", variant="stop")
                job_state = gr.State("")
                train_status = gr.Markdown(elem_id="train-status")
                loss_plot = gr.Plot(label="Loss")
                train_table = gr.Dataframe(headers=["encoder", "system", "nDCG@10", "Recall@100", "MRR@10"],
                                           interactive=False, elem_id="train-results")
                gr.Markdown("Per query (nDCG@10 on the evaluated split): what fine-tuning fixed first, what it "
                            "broke last.")
                train_per_query = gr.Dataframe(headers=PER_QUERY_HEADERS, interactive=False,
                                               elem_id="train-per-query")
                timer = gr.Timer(1.0, active=False)

            with gr.Tab("Embeddings", id="embeddings") as emb_tab:
                gr.Markdown("UMAP (cosine) of queries, their positives, hard negatives (the encoder's own top "
                            "non-relevant hits) and easy negatives (random), for a sample of labelled queries or one "
                            "query and its neighbourhood — base and fine-tuned encoder on the same points, with the "
                            "query–document similarities the quadruplet loss is meant to pull apart.")
                with gr.Row():
                    emb_split = gr.Dropdown(choices=default_ws.dataset.splits, value=split0, label="Split", scale=1)
                    emb_n = gr.Slider(5, 300, value=40, step=5, label="Sampled queries", scale=2)
                    emb_query = gr.Dropdown(choices=[("a sample of queries", "")] + query_choices(default_ws),
                                            value="", label="…or one query and its neighbourhood",
                                            elem_id="emb-query", scale=2)
                    emb_tuned = tuned_dropdown("Fine-tuned encoder beside it", "emb-tuned")
                    emb_btn = gr.Button("Project", variant="primary", elem_id="project-button", scale=1)
                emb_status = gr.Markdown(elem_id="emb-status")
                emb_plot = gr.Plot(label="UMAP projection", elem_id="emb-plot")
                emb_hist = gr.Plot(label="Query–document cosine similarities", elem_id="emb-hist")

            with gr.Tab("Failures", id="failures") as failures_tab:
                gr.Markdown("Where and why retrieval fails, query by query: vocabulary mismatch (BM25 misses a "
                            "relevant document dense finds), semantic false positives (dense invents a topically "
                            "related wrong one), lexical traps, both fail, fixed by hybrid, and — with a fine-tuned "
                            "encoder — fixed or broken by fine-tuning.")
                with gr.Row():
                    fail_split = gr.Dropdown(choices=default_ws.dataset.splits, value=split0, label="Split", scale=1)
                    fail_tuned = tuned_dropdown("Fine-tuned encoder to compare", "failures-tuned")
                    fail_btn = gr.Button("Find failures", variant="primary", elem_id="failures-button", scale=1)
                    export_btn = gr.Button("Export HTML report", elem_id="export-button", scale=1)
                with gr.Row():
                    fail_pick = gr.Dropdown(choices=[], label="Open a card's query in the Search view",
                                            elem_id="failures-pick", scale=4)
                    open_btn = gr.Button("Open in Search", elem_id="failures-open", scale=1)
                export_file = gr.File(label="Report (one self-contained HTML file)", elem_id="export-file")
                fail_counts = gr.Plot(label="Failures per category", elem_id="failures-counts")
                gr.Markdown("Click a card to open its query in the Search view.")
                fail_html = gr.HTML(elem_id="failures-cards", js_on_load=CARD_CLICK_JS)

            with gr.Tab("Runs", id="runs") as runs_tab:
                gr.Markdown("Every run computed on this data set, from the store (nothing is computed twice). "
                            "Pick two to compare them query by query on their split's labels.")
                runs_table = gr.Dataframe(headers=RUN_HEADERS, interactive=False, elem_id="runs-table")
                with gr.Row():
                    run_a = gr.Dropdown(choices=[], label="Run A", elem_id="run-a", scale=2)
                    run_b = gr.Dropdown(choices=[], label="Run B", elem_id="run-b", scale=2)
                    metric_dd = gr.Dropdown(["ndcg@10", "mrr@10", "recall@100", "map"], value="ndcg@10",
                                            label="Metric", scale=1)
                    compare_btn = gr.Button("Compare", variant="primary", elem_id="compare-runs-button", scale=1)
                compare_note = gr.Markdown(elem_id="compare-note")
                compare_table = gr.Dataframe(headers=["query", "text", "A", "B", "B − A"], interactive=False,
                                             elem_id="compare-table")

            with gr.Tab("Data", id="data"):
                gr.Markdown("Load a BEIR folder as a .zip, or separate files: documents (JSONL, CSV/TSV "
                            "with id/title/text, or .txt), queries (JSONL) and labels (BEIR .tsv or TREC qrels). "
                            "A broken file is reported with its line; the current data set stays loaded.")
                files = gr.File(label="Data set files", file_count="multiple", elem_id="upload")
                with gr.Row():
                    load_btn = gr.Button("Load uploaded files", variant="primary", elem_id="load-button")
                    demo_btn = gr.Button("Load the bundled demo")
                load_status = gr.Markdown(elem_id="load-status")

        # ---- handlers ----------------------------------------------------------------------
        def do_search(text: str, key: str):
            ws = registry.get(key)
            try:
                res = side_by_side(ws, text or "")
            except ValueError as err:
                raise gr.Error(str(err)) from err
            return render_side_by_side(res, ws), res.to_json()

        def do_evaluate(split: str, extras: list[str], key: str):
            ws = registry.get(key)
            if not split:
                raise gr.Error("this data set has no relevance labels to evaluate against")
            try:
                rows = metrics_rows(comparison_workspaces(ws, extras), split)
            except (ValueError, OSError) as err:  # e.g. a fine-tuned folder deleted meanwhile
                raise gr.Error(str(err)) from err
            evals = {s: ws.evaluate(s, split) for s in DEFAULT_SYSTEMS}
            per = {s: evals[s].per_query.get("ndcg@10", {}) for s in DEFAULT_SYSTEMS}
            qids = sorted(per["bm25"], key=lambda q: -(max(per["dense"].get(q, 0), per["hybrid"].get(q, 0))
                                                        - per["bm25"][q]))
            wins = [[q, ws.dataset.queries.get(q, "")[:80]] + [round(per[s].get(q, 0.0), 3) for s in DEFAULT_SYSTEMS]
                    for q in qids]
            return metrics_caption(ws, split), rows, wins

        def do_eval_plots(split: str, extras: list[str], key: str):
            ws = registry.get(key)
            if not split:
                return gr.skip(), gr.skip(), gr.skip()
            return bm25_dense_scatter(ws, split), recall_curves(comparison_workspaces(ws, extras), split), lambda_sweep(ws, split)

        def do_compression(split: str, key: str):
            """Quality and bytes per document of float32, int8 and PCA-reduced indexes (dense and hybrid)."""
            ws = registry.get(key)
            if not split:
                raise gr.Error("this data set has no relevance labels to evaluate against")
            d = reduced_dims(ws)
            rows = [r.to_dict() for r in compression_table(
                ws, split, variants=(("flat", None), ("sq8", None), ("flat", d), ("sq8", d)))]
            return {"headers": list(rows[0]), "data": [[fmt(v) for v in r.values()] for r in rows]}

        def do_project(split: str, n_queries: float, query_text: str, tuned: str, key: str,
                       progress=gr.Progress()):
            """UMAP of a sample (or one query's neighbourhood), base beside fine-tuned, and the similarities."""
            ws = registry.get(key)
            if not split:
                raise gr.Error("this data set has no relevance labels: projections need labelled queries")
            qid = None
            if query_text:  # one query: its own split's labels
                qid, qsplit = find_query(ws, query_text)
                split = qsplit or split
            was_warm = umap_is_warm()  # the first fit in a process compiles numba code: say so
            try:
                sample = sample_points(ws, split, n_queries=int(n_queries or 40), query_id=qid)
                base = project(ws, sample, progress=lambda f, what: progress(f * (0.5 if tuned else 1), desc=what))
                sims = {"base": similarities(ws, sample)}
                if tuned:
                    ws_t = ws.with_model(tuned)
                    done = project(ws_t, sample, progress=lambda f, what: progress(0.5 + f / 2, desc=what))
                    sims["fine-tuned"] = similarities(ws_t, sample)
                    figure = side_by_side_figure(base, done, sample, tuned_ranks=sample_ranks(ws_t, sample))
                else:
                    done, figure = None, projection_figure(base, sample, ws.encoder.name)
            except (ValueError, OSError) as err:
                raise gr.Error(str(err)) from err
            counts = sample.counts()
            timing = "; ".join(f"{label}: {'from the cache' if p.cached else f'fitted in {p.seconds:.1f} s'}"
                               for label, p in (("base", base), ("fine-tuned", done)) if p is not None)
            status = (f"{len(sample.points)} points ({', '.join(f'{n} {r}' for r, n in counts.items())}) · {timing}"
                      + ("" if was_warm or (base.cached and (done is None or done.cached))
                         else f" · note: {COMPILE_NOTE}"))
            summary = {"points": len(sample.points), "counts": counts, "cached": [p.cached for p in (base, done) if p],
                       "seconds": [round(p.seconds, 2) for p in (base, done) if p],
                       "mean_similarity": {label: {r: float(v.mean()) if len(v) else None for r, v in by.items()}
                                           for label, by in sims.items()}}
            return status, figure, similarity_histogram(sims), summary

        def gallery_for(split: str, tuned: str, key: str):
            ws = registry.get(key)
            if not split:
                raise gr.Error("this data set has no relevance labels: failures need them")
            try:
                return ws, failure_gallery(ws, split, tuned_ws=ws.with_model(tuned) if tuned else None)
            except (ValueError, OSError) as err:
                raise gr.Error(str(err)) from err

        def do_failures(split: str, tuned: str, key: str):
            """Counts per category and the cards (most dramatic rank moves first); JSON for the API."""
            ws, gallery = gallery_for(split, tuned, key)
            picks = [(f"{CATEGORY_LABELS[c.category]} · {c.query_id}: {c.query[:70]} ({c.headline})", c.query)
                     for cards in gallery.cards.values() for c in cards]
            return (counts_figure(gallery), gallery_fragment(gallery),
                    gr.update(choices=list(dict.fromkeys(picks)), value=None), gallery.to_json())

        def do_export(split: str, tuned: str, key: str):
            """The gallery with its plots as one HTML file that opens offline."""
            ws, gallery = gallery_for(split, tuned, key)
            workspaces = {"": ws, **({f"fine-tuned {Path(tuned).name}": ws.with_model(tuned)} if tuned else {})}
            figures = [recall_curves(workspaces, split), bm25_dense_scatter(ws, split)]
            folder = Path(tempfile.mkdtemp(prefix="rankscope-report-"))
            name = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"rankscope-failures-{ws.dataset.name}-{split}.html")
            return str(write_gallery(gallery, folder / name, figures))

        def do_open_card(key: str, evt: gr.EventData):
            """A click on a card (``data-query-id``) opens that query in the Search view."""
            qid = getattr(evt, "query_id", None)
            text = registry.get(key).dataset.queries.get(qid or "")
            if not text:
                return gr.skip(), gr.skip(), gr.skip(), gr.skip()
            return do_open_in_search(text, key)

        def do_open_in_search(text: str, key: str):
            if not text:
                raise gr.Error("pick a card first")
            html_out, raw_out = do_search(text, key)
            return text, html_out, raw_out, gr.Tabs(selected="search")

        def do_runs(key: str):
            """The stored runs of this session's data set, newest first."""
            ws = registry.get(key)
            runs = list_runs(registry.store, ws.dataset.content_hash)
            rows = [[r["when"], r["summary"], r["split"], r["k"], r["key"]] for r in runs]
            choices = [(f"{r['summary']} — {r['split']} ({r['when']})", r["key"]) for r in runs]
            return rows, gr.update(choices=choices), gr.update(choices=choices)

        def do_compare_runs(key_a: str, key_b: str, metric: str, key: str):
            ws = registry.get(key)
            if not key_a or not key_b:
                raise gr.Error("pick two runs")
            runs = {r["key"]: r for r in list_runs(registry.store, ws.dataset.content_hash)}
            if key_a not in runs or key_b not in runs:
                raise gr.Error("unknown run: refresh the list")
            split = runs[key_a]["split"]
            if runs[key_b]["split"] != split or split not in ws.dataset.qrels:
                raise gr.Error("compare two runs of the same labelled split")
            res = compare_runs(registry.store, key_a, key_b, ws.dataset.qrels[split], metric or "ndcg@10")
            c = res.comparison
            note = (f"**B − A on {split}, {c.metric}:** {c.mean_b:.4f} − {c.mean_a:.4f} = {c.mean_b - c.mean_a:+.4f} · "
                    f"{len(c.wins)} queries better, {len(c.losses)} worse, {c.ties} tied · paired permutation "
                    f"test p = {c.p_value:.3g}{' (significant)' if c.significant else ''}\n\n"
                    f"A: {runs[key_a]['summary']} · B: {runs[key_b]['summary']}")
            rows = [[r["query"], ws.dataset.queries.get(r["query"], "")[:80], round(r["a"], 4), round(r["b"], 4),
                     round(r["delta"], 4)] for r in res.per_query]
            return note, rows

        def do_load(paths, key, progress=gr.Progress()):
            if not paths:
                raise gr.Error("choose one or more files first")
            paths = [str(p) for p in paths]
            try:
                dataset = load_uploaded(paths)
            except DataError as err:
                # the previous data set stays loaded: state, tables and summary are left untouched
                return (key, f"❌ **Could not load:** `{err}`\n\nThe previous data set is still loaded.",
                        gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip())
            return switch_to(dataset, progress)

        def do_demo(key, progress=gr.Progress()):
            return switch_to(load_dataset(DEMO), progress)

        def switch_to(dataset, progress):
            progress(0, desc="indexing")
            new_key = registry.open(dataset, progress=lambda f, what: progress(f, desc=what))
            ws = registry.get(new_key)
            split = ws.dataset.default_split()
            warn = "".join(f"\n- ⚠️ {html.escape(w)}" for w in dataset.report.warnings[:20])
            status = f"✅ Loaded **{html.escape(dataset.name)}**.{warn}"
            splits = gr.update(choices=ws.dataset.splits, value=split)  # Evaluate, Failures, Embeddings
            return (new_key, status, dataset_markdown(ws),
                    gr.update(choices=query_choices(ws), value=None),
                    metrics_caption(ws, split), metrics_rows(ws, split) if split else [],
                    splits, "", splits, splits)

        def do_train(key, loss, negatives, epochs, batch, lr, seq, steps, margin, xi, lam, device, cold, pretrain=""):
            ws = registry.get(key)
            cfg = TrainConfig(loss=loss, negatives=negatives, epochs=int(epochs), batch_size=int(batch),
                              lr=float(lr), max_seq_length=int(seq), margin=float(margin), xi=float(xi),
                              lambda_train=float(lam), device=device,
                              max_steps_per_epoch=int(steps) if steps else None, pretrain=pretrain or None)
            try:
                cfg.validate()
            except ValueError as err:
                raise gr.Error(str(err)) from err
            if ws.dataset.default_split() is None and not cfg.pretrain:
                raise gr.Error("this data set has no relevance labels: choose a first stage on pseudo pairs (ICT/BFS)")
            has_train = "train" in ws.dataset.qrels and ws.dataset.default_split() != "train"
            out = models_dir(registry.store) / time.strftime("%Y%m%d-%H%M%S")
            job_id = jobs.submit(JobSpec(ws.dataset, cfg, str(out), base_model=ws.model_name,
                                         cold_start=None if has_train else float(cold)))
            return job_id, f"Job `{job_id}` queued.", gr.Timer(active=True)

        def do_poll(job_id, key):
            if not job_id:
                return gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.Timer(active=False)
            job = jobs.status(job_id)
            done = job["status"] in FINAL
            try:
                queries = registry.get(key).dataset.queries
            except gr.Error:  # the data set was closed meanwhile: ids without their text
                queries = {}
            return (job_markdown(job), loss_figure(job), result_rows(job) if done else gr.skip(),
                    per_query_rows(job, queries) if done else gr.skip(), gr.Timer(active=not done))

        def do_cancel(job_id):
            if job_id and jobs.cancel(job_id):
                return f"Cancelling `{job_id}` …"
            return "No running job to cancel."

        def do_encoder(choice, key):
            ws = registry.get(key)
            try:
                new_key = registry.open(ws.dataset, model=choice or None)
            except ValueError as err:  # a folder or id that is not a sentence-transformers model
                raise gr.Error(str(err)) from err
            ws = registry.get(new_key)
            split = ws.dataset.default_split()
            return (new_key, dataset_markdown(ws), metrics_caption(ws, split),
                    metrics_rows(ws, split) if split else [], "")

        def training_status(job_id: str) -> dict:
            """A training job's state, progress, losses and (when done) base vs fine-tuned metrics."""
            job = jobs.status(job_id)
            if job is None:
                raise gr.Error(f"no training job {job_id!r}")
            return job

        gr.api(training_status, api_name="training_status")
        train_inputs = [key_state, loss_dd, neg_dd, epochs_in, batch_in, lr_in, seq_in, steps_in, margin_in,
                        xi_in, lam_in, device_dd, cold_in, pretrain_dd]
        train_btn.click(do_train, train_inputs, [job_state, train_status, timer], api_name="train", **LIGHT)
        timer.tick(do_poll, [job_state, key_state], [train_status, loss_plot, train_table, train_per_query, timer],
                   api_visibility="private",
                   **LIGHT)
        cancel_btn.click(do_cancel, job_state, train_status, api_name="cancel_training", **LIGHT)
        encoder_dd.focus(lambda key: gr.update(choices=encoder_choices(registry, registry.get(key))),
                         key_state, encoder_dd, api_visibility="private")
        encoder_dd.input(do_encoder, [encoder_dd, key_state],
                         [key_state, data_md, metrics_note, metrics_table, results], api_name="use_encoder",
                         **HEAVY)

        load_outputs = [key_state, load_status, data_md, picker, metrics_note, metrics_table, split_dd, results,
                        fail_split, emb_split]
        go.click(do_search, [query, key_state], [results, raw], api_name="search", **SEARCH)
        query.submit(do_search, [query, key_state], [results, raw], api_visibility="private", **SEARCH)
        picker.input(lambda q: q, picker, query, api_visibility="private", **LIGHT).then(
            do_search, [query, key_state], [results, raw], api_visibility="private", **SEARCH)
        eval_btn.click(do_evaluate, [split_dd, extras_cb, key_state], [eval_note, eval_table, wins_table],
                       api_name="evaluate", **HEAVY).then(
            do_eval_plots, [split_dd, extras_cb, key_state], [scatter_plot, recall_plot, sweep_plot],
            api_visibility="private", **HEAVY)
        eval_tab.select(lambda key: gr.update(choices=comparison_choices(registry, registry.get(key))),
                        key_state, extras_cb, api_visibility="private", **LIGHT)
        def on_embeddings_tab(key: str):
            # compile UMAP's numba code in the background while the user picks a sample (not at start-up:
            # it holds the numba lock, which labelled searches' metrics need too)
            if not umap_is_warm() and not any(t.name == "umap-warm-up" for t in threading.enumerate()):
                threading.Thread(target=warm_up, name="umap-warm-up", daemon=True).start()
            ws = registry.get(key)
            return (gr.update(choices=tuned_choices(registry, ws)),
                    gr.update(choices=[("a sample of queries", "")] + query_choices(ws)))

        emb_tab.select(on_embeddings_tab, key_state, [emb_tuned, emb_query], api_visibility="private", **LIGHT)
        projection_json = gr.JSON(visible=False)
        emb_btn.click(do_project, [emb_split, emb_n, emb_query, emb_tuned, key_state],
                      [emb_status, emb_plot, emb_hist, projection_json], api_name="project", **HEAVY)
        failures_tab.select(lambda key: gr.update(choices=tuned_choices(registry, registry.get(key))),
            key_state, fail_tuned, api_visibility="private", **LIGHT)
        failures_json = gr.JSON(visible=False)
        fail_btn.click(do_failures, [fail_split, fail_tuned, key_state],
                       [fail_counts, fail_html, fail_pick, failures_json], api_name="failures", **HEAVY)
        export_btn.click(do_export, [fail_split, fail_tuned, key_state], export_file, api_name="export_failures",
                         **HEAVY)
        fail_html.click(do_open_card, key_state, [query, results, raw, tabs], api_visibility="private", **SEARCH)
        open_btn.click(do_open_in_search, [fail_pick, key_state], [query, results, raw, tabs],
                       api_visibility="private", **SEARCH)
        runs_tab.select(do_runs, key_state, [runs_table, run_a, run_b], api_name="runs", **LIGHT)
        compare_btn.click(do_compare_runs, [run_a, run_b, metric_dd, key_state], [compare_note, compare_table],
                          api_name="compare_runs", **HEAVY)
        compress_btn.click(do_compression, [split_dd, key_state], compress_table, api_name="compression", **HEAVY)
        load_btn.click(do_load, [files, key_state], load_outputs, api_name="load_dataset", **HEAVY)
        demo_btn.click(do_demo, [key_state], load_outputs, api_name="load_demo", **HEAVY)
    return demo


def metrics_caption(ws: Workspace, split: str | None) -> str:
    if not split:
        return "_No relevance labels: metrics need a qrels file._"
    lam = ws.lambda_for(split)
    n = len(ws.dataset.split_queries(split))
    return (f"Split **{split}** ({n} queries). Hybrid: λ·BM25 + cosine with λ = {lam.value:g} ({lam.how}). "
            "† p < 0.05 against BM25, paired permutation test.")


TRAIN_HELP = """Fine-tune the dense encoder in the background (one job at a time; the app stays usable).
Data: the train split trains and the test split evaluates; without a train split, a seeded
cold-start split by query is made. When the job ends, the new encoder is evaluated beside the base
and appears in the Search tab's *Dense encoder* list."""
LOSS_HELP = {
    "quadruplet": "quadruplet — QuadrupletBERT: (q, p, random n, hard n), two stages",
    "residual": "residual margin — CLEAR: margin shrinks where BM25 already ranks well",
    "triplet": "triplet — three-tower Sentence-BERT baseline, cosine",
    "inbatch": "in-batch — softmax over batch + hard negatives (Baidu)",
}
NEG_HELP = {"bm25": "BM25 errors (CLEAR §3.3)", "model": "encoder's own top-k (QuadrupletBERT stage 2)",
            "random": "random (easy)"}


def models_dir(store: Store) -> Path:
    return Path(store.path).parent / "models"


def encoder_choices(registry: Registry, ws: Workspace) -> list[tuple[str, str]]:
    """The base encoder and every fine-tuned encoder trained on this data set that still exists."""
    out = [(f"base: {registry.model or 'all-MiniLM-L6-v2'}", "")]
    for job in registry.store.jobs():
        path = job.get("model_path") or ""
        if job["status"] == "done" and job["dataset"] == ws.dataset.content_hash and Path(path, "modules.json").exists():
            out.append((f"fine-tuned: {job['config'].get('loss')} ({job['id']})", path))
    current = ws.model_name
    if current and current not in [v for _, v in out]:
        out.append((current, current))
    return out


def tuned_choices(registry: Registry, ws: Workspace) -> list[tuple[str, str]]:
    """"none", then every fine-tuned encoder of this data set (a folder path as the value)."""
    return [("none", "")] + encoder_choices(registry, ws)[1:]


def tuned_dropdown(label: str, elem_id: str) -> gr.Dropdown:
    """A fine-tuned encoder picker (filled when its tab opens; any model folder or id typed is accepted)."""
    return gr.Dropdown(choices=[("none", "")], value="", label=label, elem_id=elem_id, scale=2,
                       allow_custom_value=True)


def job_markdown(job: dict) -> str:
    p = job.get("progress") or {}
    head = f"**Job `{job['id']}` — {job['status']}** on {job.get('device') or '…'}"
    if job["status"] == "running" and p:
        loss = p.get("loss")
        eta = p.get("eta_s") or 0
        if isinstance(loss, float) and loss == loss:  # a training step
            head += (f" · {p.get('stage')}: step {p.get('step')}/{p.get('total')}, loss {loss:.4f}, "
                     f"{p.get('examples_per_s', 0):.1f} examples/s, ETA {eta:.0f} s")
        else:  # mining hard negatives or evaluating: no loss, a share of the work done
            head += f" · {p.get('stage')} ({(p.get('step') or 0) / max(p.get('total') or 1, 1):.0%})"
    if job["status"] == "failed":
        head += f"\n\n```\n{job.get('error', '')[-2000:]}\n```"
    if job["status"] == "cancelled":
        head += f" — {job.get('error', '')}"
    if job["status"] == "done":
        r = job.get("result") or {}
        head += f" · {r.get('plan_note', '')}; {r.get('seconds', 0):.0f} s of training; saved to `{job.get('model_path')}`"
    return head


def loss_figure(job: dict):
    fig = go.Figure()
    by_stage: dict[str, list] = {}
    for i, (stage, _, value) in enumerate(job.get("losses") or []):
        by_stage.setdefault(stage, []).append((i + 1, value))
    for stage, points in by_stage.items():
        fig.add_trace(go.Scatter(x=[x for x, _ in points], y=[y for _, y in points], mode="lines", name=stage))
    fig.update_layout(xaxis_title="step", yaxis_title="training loss", height=300, margin=dict(l=40, r=10, t=10, b=40))
    return fig


RUN_HEADERS = ["when", "system", "split", "depth", "key"]
PER_QUERY_HEADERS = ["query", "text", "dense base", "dense fine-tuned", "Δ dense", "hybrid base",
                     "hybrid fine-tuned", "Δ hybrid"]


def per_query_rows(job: dict, queries: dict[str, str]) -> list[list]:
    """Each evaluated query's nDCG@10 before and after fine-tuning, biggest hybrid gains first."""
    pq = (job.get("result") or {}).get("per_query") or {}
    dense, hybrid = pq.get("dense", {}), pq.get("hybrid", {})
    rows = []
    for q in sorted(set(dense) | set(hybrid)):
        d, h = dense.get(q, [0.0, 0.0]), hybrid.get(q, [0.0, 0.0])
        rows.append([q, queries.get(q, "")[:80], d[0], d[1], round(d[1] - d[0], 4), h[0], h[1], round(h[1] - h[0], 4)])
    return sorted(rows, key=lambda r: (-r[7], -r[4], r[0]))


def result_rows(job: dict) -> list[list]:
    r = job.get("result") or {}
    sig = r.get("significance") or {}
    rows = []
    for label, systems in (r.get("metrics") or {}).items():
        for system, m in systems.items():
            cells = []
            for k in ("ndcg@10", "recall@100", "mrr@10"):
                v = m.get(k)
                mark = "†" if label == "fine-tuned" and sig.get(system, {}).get(k, 1) < 0.05 else ""
                cells.append(f"{v:.4f}{mark}" if isinstance(v, float) else "—")
            rows.append([label, system, *cells])
    return rows


def load_uploaded(paths: list[str]):
    """One zip/folder → a whole data set; several files → sorted into corpus, queries, qrels."""
    if len(paths) == 1 and detect_role(paths[0]) in ("dataset", "corpus"):
        return load_dataset(paths[0])
    roles: dict[str, list[str]] = {}
    for p in paths:
        roles.setdefault(detect_role(p), []).append(p)
    corpus = roles.get("corpus", []) + roles.get("dataset", [])
    if len(corpus) != 1:
        raise DataError(f"expected exactly one documents file among the uploads, found {len(corpus)}: "
                        + ", ".join(Path(p).name for p in paths))
    queries = roles.get("queries", [])
    if len(queries) > 1:
        raise DataError("more than one queries file uploaded: " + ", ".join(Path(p).name for p in queries))
    return load_files(corpus[0], queries[0] if queries else None, roles.get("qrels") or None,
                      name=Path(corpus[0]).stem)


def create(data: str | Path | None = None, model: str | None = None, store_path: str | None = None):
    """Open the store and the starting data set, and build the Blocks (used by main and tests)."""
    store = Store(store_path) if store_path else Store()
    registry = Registry(store, model)
    dataset = load_dataset(data or DEMO)

    def report(fraction: float, what: str) -> None:
        print(f"\r{what} ({fraction:.0%})", end="" if fraction < 1 else "\n", file=sys.stderr, flush=True)

    key = registry.open(dataset, progress=report)
    return build_app(registry, key, JobQueue(store)), registry


def launch_kwargs(store: Store | None = None, max_upload: str = MAX_UPLOAD) -> dict:
    """Server settings: upload size limit, and nothing served outside Gradio's own cache.

    Gradio serves only its upload/output cache (no ``allowed_paths``, no static paths); the code
    folder, the store file and the trained models are blocked outright on top of that.
    """
    blocked = [str(ROOT)]
    if store is not None:
        db = Path(store.path).resolve()
        blocked += [str(db), f"{db}-wal", f"{db}-shm", str(models_dir(store).resolve())]
    return {"css_paths": [CSS_PATH] if CSS_PATH.exists() else None, "css": GALLERY_CSS, "max_file_size": max_upload,
            "blocked_paths": blocked, "allowed_paths": []}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description="RankScope: compare BM25, dense and hybrid retrieval.")
    p.add_argument("--data", default=None, help="data set to open (default: the bundled demo)")
    p.add_argument("--model", default=None, help="sentence-transformers id or folder (default: all-MiniLM-L6-v2)")
    p.add_argument("--store", default=None, help="cache file (default: $RANKSCOPE_STORE or the user cache dir)")
    p.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", "7860")))
    args = p.parse_args(argv)
    demo, registry = create(args.data, args.model, args.store)
    demo.queue(default_concurrency_limit=2).launch(server_name=args.host, server_port=args.port,
                                                   **launch_kwargs(registry.store))


if __name__ == "__main__":
    main()
