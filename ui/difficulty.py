"""Each query's predicted difficulty, for the Search and Judge views: the query table sorted by it, and
the judging sample of the queries predicted to fail first.

Query performance prediction (``retrieval.qpp.predict``) searches every query with every system on
show, which takes a while on a query log: it runs in a worker thread of its own (one at a time, so a
second session asking waits for the first's result rather than computing it again), and a view asks
without waiting (``table``: the table, or a note that it is being computed and a timer to look again).
The result is kept per workspace and per the queries and systems it covers, and goes with its workspace
(a closed workspace takes it along); the predictions themselves are cached in the store by the library.

The queries predicted are those the session may see (``query_sets.seen_queries``): on a shared deployment
another session's private query set never appears in the table, nor in its count, nor in the percentiles
its queries are ranked by, whatever workspace the view was handed.
"""
from __future__ import annotations

import threading
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import gradio as gr

from retrieval import Store, Workspace
from retrieval.data import query_sets
from retrieval.judging.sampling import Difficulty
from retrieval.qpp.predict import VERSION, Predictions, predict
from retrieval.sharing.owners import Viewer
from retrieval.store import cache_key
from ui import texts
from ui.common import shown_systems
from ui.notify import refuse
from ui.pools import LIGHT
from ui.present.escape import text as esc
from ui.present.predicted import ORDERS, SHOWN, labelled_ids, table_html
from ui.registry import Context, session_of

POLL_S = 2.0  # how often an open table looks again while its predictions are computed
# A click on a row of the table sends its query id to Python (event delegation survives re-renders)
ROW_CLICK_JS = ("element.addEventListener('click', (e) => { const row = e.target.closest('tr[data-query-id]'); "
                "if (row) trigger('click', {query_id: row.dataset.queryId}); });")

_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rankscope-qpp")
_KEPT: weakref.WeakKeyDictionary[Workspace, dict[str, Future[Predictions]]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
KEPT_PER_WORKSPACE = 8  # sets of predictions kept per workspace (query sets, systems on show)


def systems_of(ws: Workspace) -> tuple[str, ...]:
    """The systems predicted: the built-in systems on show whose indexes are built (``shown_systems``;
    an imported run answers only the queries it ran, so it is left out)."""
    return tuple(s for s in shown_systems(ws) if s not in ws.imported)


def prediction_key(ws: Workspace, systems: tuple[str, ...], ids: list[str]) -> str:
    """What a set of predictions depends on: the data set (its documents, queries and labels: a fitted
    combination learns from the labels), the encoder, the systems, the predictors' version
    (``retrieval.qpp.predict.VERSION``) and the queries predicted."""
    return cache_key(version=VERSION, content=ws.dataset.content_hash, encoder=ws.encoder.name, systems=list(systems),
                     ids=cache_key(ids=ids), settings=repr(ws.bm25_settings))


def _future(ws: Workspace, store: Store | None, viewer: Viewer | None) -> tuple[str, Future[Predictions]]:
    """The predictions for the queries ``viewer`` may see, started in the worker thread unless kept."""
    ids = query_sets.seen_queries(store, ws.dataset, viewer) if viewer is not None else sorted(ws.dataset.queries)
    systems = systems_of(ws)
    key = prediction_key(ws, systems, ids)
    with _LOCK:
        kept = _KEPT.setdefault(ws, {})
        found = kept.get(key)
        if found is None:
            if len(kept) >= KEPT_PER_WORKSPACE:
                kept.pop(next(iter(kept)))
            found = kept[key] = _POOL.submit(predict, ws, ids, systems)
    return key, found


def _failed(key: str, ws: Workspace) -> None:
    """Forget a failed computation, so the next ask starts it again."""
    with _LOCK:
        _KEPT.get(ws, {}).pop(key, None)


def predictions(ws: Workspace, store: Store | None, viewer: Viewer | None, wait: bool = False) -> Predictions | None:
    """The predicted difficulty of the queries ``viewer`` may see: None while they are being computed
    (``wait``: blocks until they are); a failure is refused in one line (and the next ask tries again)."""
    key, future = _future(ws, store, viewer)
    if not wait and not future.done():
        return None
    try:
        return future.result()
    except Exception as err:  # whatever it was, the next ask computes again
        _failed(key, ws)
        if isinstance(err, (ValueError, OSError, RuntimeError)):
            raise refuse(f"could not predict the queries' difficulty: {err}") from err
        raise


def difficulty(ws: Workspace, store: Store | None, viewer: Viewer | None) -> Difficulty:
    """What the judging sample "the queries predicted to fail first" is drawn by: the predictions' key,
    and each query's difficulty (computed, or waited for, only when a sample must be drawn)."""
    ids = query_sets.seen_queries(store, ws.dataset, viewer) if viewer is not None else sorted(ws.dataset.queries)

    def of(asked: list[str]) -> dict[str, float]:
        found = predictions(ws, store, viewer, wait=True)
        wanted = set(asked)
        return {q.query_id: q.difficulty for q in found.queries if q.query_id in wanted} if found else {}

    return Difficulty(prediction_key(ws, systems_of(ws), ids), of)


def table(ws: Workspace, store: Store | None, viewer: Viewer | None, order: str = "hardest",
          labelled: set[str] | None = None) -> tuple[str, bool]:
    """The query table's HTML (``ui.present.predicted.table_html``: the ``SHOWN`` hardest, or easiest, of
    the queries ``viewer`` may see; ``labelled``: the queries marked labelled, default ``labelled_ids``),
    and whether it is still being computed (the view looks again). A failure is said in the table's place
    (escaped by ``refuse``), not raised, so the view's timer stops rather than ask again every tick."""
    if order not in ORDERS:
        raise refuse(f"order the queries {' or '.join(ORDERS)}, not {str(order)[:40]!r}")
    if not systems_of(ws):
        return '<p class="rs-meta">No system is ready yet: the table fills once one is.</p>', True
    try:
        found = predictions(ws, store, viewer)
    except gr.Error as err:  # said in the table, the timer stopped: asked again with the Show button
        return f'<p class="rs-meta">{err.message}</p>', False
    except Exception as err:  # a fault, not a refusal: named by its kind alone (its text may hold a path)
        return (f'<p class="rs-meta">Could not predict the queries\' difficulty ({esc(type(err).__name__)}); '
                "ask again with Show.</p>"), False
    if found is None:
        n = len(query_sets.seen_queries(store, ws.dataset, viewer)) if viewer is not None else len(ws.dataset.queries)
        return (f'<p class="rs-meta">Predicting the difficulty of {n:,} queries in the background (each system '
                "searches them once); the table fills when it is done.</p>"), True
    return table_html(found, labelled_ids(ws) if labelled is None else labelled, order, SHOWN), False


@dataclass
class DifficultyTable:
    """The query table of a view: the order picked, the table (a click on a row carries its query id),
    and the timer that looks again while it is computed."""

    order: gr.Radio
    html: gr.HTML
    timer: gr.Timer


def build(ctx: Context, name: str, api_name: str | None = None) -> DifficultyTable:
    """The table in an accordion (closed: nothing is computed until it is opened); ``name`` prefixes its
    elements' ids; ``api_name``: the named endpoint that gives it (order -> HTML)."""
    with gr.Accordion("Queries by predicted difficulty (no labels needed)", open=False,
                      elem_id=f"{name}-difficulty-box") as box:
        gr.Markdown(texts.DIFFICULTY_HELP)
        with gr.Row():
            order = gr.Radio([("hardest first", "hardest"), ("easiest first", "easiest")], value="hardest",
                             label=f"Order (the {SHOWN} at that end are listed)", elem_id=f"{name}-difficulty-order",
                             scale=3)
            again = gr.Button("Show", elem_id=f"{name}-difficulty-button", scale=1)
        html = gr.HTML(elem_id=f"{name}-difficulty", js_on_load=ROW_CLICK_JS)
        timer = gr.Timer(POLL_S, active=False)

    def on_show(order_: str, key: str, request: gr.Request | None = None):
        # predicted on the data's own labels (stable while judging: the Judge view's sample is drawn by the
        # same predictions); the queries judged since are marked labelled too
        shown, computing = table(ctx.workspace(key), ctx.registry.store, ctx.registry.viewer(session_of(request)),
                                 order_, labelled_ids(ctx.labelled(key, request)))
        return shown, gr.Timer(active=computing)

    outputs = [html, timer]
    if api_name:  # one view's table is the named endpoint; the other's Show button is no endpoint of its own
        again.click(on_show, [order, ctx.key], outputs, api_name=api_name, **LIGHT)
    else:
        again.click(on_show, [order, ctx.key], outputs, api_visibility="private", **LIGHT)
    for event in (box.expand, order.input, timer.tick):
        event(on_show, [order, ctx.key], outputs, api_visibility="private", show_progress="hidden", **LIGHT)
    return DifficultyTable(order, html, timer)

