"""The Search view: one query (typed, or a labelled one picked by id), every system side by side,
the metrics of the systems on show on the whole split, and the dense encoder in use."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from retrieval import Workspace
from retrieval.data import query_sets
from retrieval.data.readers.decode import count
from retrieval.errors import EncoderLoadError
from retrieval.evaluation.metrics import VIEW_METRICS
from retrieval.sharing.owners import Viewer
from retrieval.side_by_side import side_by_side
from retrieval.systems import SPLADE, label
from retrieval.systems import shown as shown_builtins
from ui.common import encoder_choices, metrics_caption, metrics_rows, query_choices, shown_systems, sparse_choices
from ui.data import QUERY_CHARS, dataset_summary
from ui.difficulty import DifficultyTable
from ui.difficulty import build as difficulty_table
from ui.notify import refuse, warn
from ui.pools import HEAVY, LIGHT, SEARCH
from ui.present.escape import text as esc
from ui.present.search import side_by_side_html
from ui.registry import ANONYMOUS, Context, Registry, session_of
from ui.tables import table

# ---- handlers --------------------------------------------------------------------------------
MAX_COLUMNS = 4


def default_columns(ws: Workspace) -> tuple[str, ...]:
    """The columns a newly opened workspace starts with, four at most: the systems shown by default
    (``retrieval.systems.shown``: BM25, dense, hybrid, learned sparse …), an imported run taking the
    last column (those whose index is being built show as waiting, then fill)."""
    shown = shown_builtins()
    return (*shown[:MAX_COLUMNS - 1], *ws.imported, *shown[MAX_COLUMNS - 1:])[:MAX_COLUMNS]


def columns(ws: Workspace, chosen: list[str] | None) -> tuple[str, ...]:
    """The systems to put side by side: those ``chosen`` that the workspace has (at most four),
    else the default columns."""
    kept = tuple(s for s in chosen or () if s in ws.system_names)[:MAX_COLUMNS]
    return kept or default_columns(ws)


def _bounded(text: str | None) -> str:
    """A typed query, refused in one line past ``QUERY_CHARS`` characters."""
    if len(text or "") > QUERY_CHARS:
        raise refuse(f"a query has at most {QUERY_CHARS:,} characters")
    return text or ""


def search(ws: Workspace, text: str, systems: list[str] | None = None) -> tuple[str, dict]:
    """Free text: the side-by-side HTML and its JSON (labels too when the text is a labelled query's)."""
    _bounded(text)
    try:
        res = side_by_side(ws, text or "", systems=columns(ws, systems))
    except ValueError as err:
        raise refuse(err) from err
    return side_by_side_html(res, ws.tokenizer), res.to_json()


def search_by_id(ws: Workspace, query_id: str, systems: list[str] | None = None) -> tuple[str, str, dict]:
    """A data set query by id: its text (for the query box), the HTML and the JSON."""
    if not query_id or query_id not in ws.dataset.queries:
        raise refuse("pick a query first")
    res = side_by_side(ws, query_id=query_id, systems=columns(ws, systems))
    return res.query, side_by_side_html(res, ws.tokenizer), res.to_json()


def open_by_id(registry: Registry, ws: Workspace, session: str, query_id: str,
               systems: list[str] | None = None) -> tuple[str, str, dict]:
    """``search_by_id`` for ``session``, its query recorded as the one it last asked for
    (``Registry.ask``): what a refresh after a build shows again."""
    if query_id in ws.dataset.queries:
        registry.ask(session, ws.dataset.queries[query_id])
    return search_by_id(ws, query_id, systems)


LABELLED = ""  # the query-set picker's value for the labelled queries


def query_set_options(registry: Registry, ws: Workspace, viewer: Viewer) -> list[tuple[str, str]]:
    """The query-set picker's choices: the labelled queries, then every query set kept with the
    corpus (``retrieval.data.query_sets``) that ``viewer`` sees and that has queries in this data set."""
    sets = [(qs["id"], qs["name"], sum(q in ws.dataset.queries for q in qs["queries"]))
            for qs in query_sets.listed(registry.store, ws.dataset.corpus_hash, viewer)]
    return [("labelled queries", LABELLED)] + [(f"{name} ({n:,} quer{'y' if n == 1 else 'ies'})", sid)
                                               for sid, name, n in sets if n]


def query_set_choices(registry: Registry, ws: Workspace, viewer: Viewer) -> dict:
    """The query-set picker for a newly opened workspace: its options, the labelled queries chosen."""
    return gr.update(choices=query_set_options(registry, ws, viewer), value=LABELLED)


def set_queries(registry: Registry, ws: Workspace, set_id: str | None, viewer: Viewer) -> list[tuple[str, str]]:
    """The queries of the set ``set_id`` (``LABELLED``: the labelled ones, ``common.query_choices``)
    that this data set has, as ("id: text", id) in the set's order; an unknown set is refused."""
    if not set_id:
        return query_choices(ws)
    found = next((qs for qs in query_sets.listed(registry.store, ws.dataset.corpus_hash, viewer)
                  if qs["id"] == set_id), None)
    if found is None:
        raise refuse("that query set is no longer kept with this corpus (Data → query sets)")
    return [(f"{qid}: {ws.dataset.queries[qid]}", qid) for qid in found["queries"] if qid in ws.dataset.queries]


def metrics_note(ws: Workspace, split: str | None) -> str:
    """The caption over Search's metrics table: how many systems it lists and which, counted from the
    systems on show now (``shown_systems``: more join as their indexes are built), then the metrics
    caption (``metrics_caption``)."""
    systems = shown_systems(ws)
    listed = (f"**{count(len(systems), 'system')} on show:** {', '.join(esc(label(s)) for s in systems)}.\n\n"
              if split else "")
    return listed + metrics_caption(ws, split)


def system_choices(ws: Workspace) -> list[tuple[str, str]]:
    """Every system of the workspace as (label, key), for the columns picker."""
    return [(label(s), s) for s in ws.system_names]


def use_encoder(registry: Registry, ws: Workspace, choice: str, session: str = ANONYMOUS) -> tuple[str, str, str, list]:
    """Switch this session to the encoder ``choice`` ("" = the base), its imported runs kept: the
    new key, the data set summary, the metrics caption and rows. A choice the model policy does
    not offer, or that does not load, is refused in one line."""
    try:
        key = registry.open(ws.dataset, model=registry.allowed_model(choice), session=session)
        key = registry.carry_runs(key, ws, session)
    except (EncoderLoadError, ValueError) as err:  # refused by the policy, not a model, no room, too many runs
        raise refuse(err) from err
    registry.hold(session, key)
    ws = registry.labelled(key, session)
    split = ws.dataset.default_split()
    rows = metrics_rows(ws, split, shown_systems(ws), registry.viewer(session)) if split else []
    return key, dataset_summary(ws), metrics_note(ws, split), rows


EXPANSION_HEADERS = ["term", "base weight", "fine-tuned weight", "added (not in the query)"]


def expansion(registry: Registry, ws: Workspace, text: str, choice: str | None) -> dict:
    """The query's heaviest terms under the learned sparse model in use and under a fine-tuned one
    (``choice``: its folder, as the model policy offers it; "" compares the base with itself), each
    weight from the whole vector and whether the query lacks the term (an expansion): what
    fine-tuning changed in how the query is expanded."""
    from retrieval.index.splade import compare_terms, is_sparse_folder, load_sparse_model

    text = _bounded(text).strip()
    if not text:
        raise refuse("type a query, or pick a labelled one, first")
    if ws.pending((SPLADE,)):
        raise refuse("the learned sparse index is still being built: try again when it is done")
    base = ws.sparse.model
    tuned = base
    if (choice or "").strip():
        try:
            path = registry.allowed_model(choice)
        except ValueError as err:
            raise refuse(err) from err
        if not path or not is_sparse_folder(path):
            raise refuse("that folder does not hold a learned sparse model (pick one from the list)")
        try:
            tuned = load_sparse_model(path)
        except EncoderLoadError as err:
            raise refuse(err) from err
    rows = compare_terms(base, tuned, text)
    return {"headers": EXPANSION_HEADERS, "data": [[r.term, r.base, r.tuned, "yes" if r.expansion else ""]
                                                   for r in rows]}


# ---- the view --------------------------------------------------------------------------------
@dataclass
class SearchView:
    query: gr.Textbox
    results: gr.HTML
    raw: gr.JSON
    picker: gr.Dropdown
    metrics_note: gr.Markdown
    metrics_table: gr.Dataframe
    encoder: gr.Dropdown
    add: gr.Button  # adds the query in the box to the data set's queries (wired by the shell)
    rerun: object  # the search handler, to show the results again after the data set changed
    systems: gr.CheckboxGroup  # which systems stand side by side
    chosen: gr.State  # the session's choice of them (not an API parameter: /search takes the text only)
    query_set: gr.Dropdown | None = None  # which queries the picker lists: the labelled ones, or a kept set
    difficulty: DifficultyTable | None = None  # the query table (a click on a row searches it: the shell)

    def outputs(self) -> list:
        """What ``refresh`` updates, in its order."""
        return [self.picker, self.metrics_note, self.metrics_table, self.results, self.systems, self.chosen,
                *([self.difficulty.html] if self.difficulty is not None else [])]

    def refresh(self, ws: Workspace, viewer: Viewer | None = None) -> tuple:
        """Updates for a newly opened workspace: the labelled queries, the metrics (with the judgments
        ``viewer`` counts), no results, and its systems to choose from (an imported run put beside
        BM25, dense and hybrid); the query table by predicted difficulty emptied (it fills when asked)."""
        split = ws.dataset.default_split()
        chosen = list(default_columns(ws))
        return (gr.update(choices=query_choices(ws), value=None), metrics_note(ws, split),
                metrics_rows(ws, split, shown_systems(ws), viewer) if split else [], "",
                gr.update(choices=system_choices(ws), value=chosen),
                chosen, *([""] if self.difficulty is not None else []))  # the query table: shown again on asking


def build(ctx: Context, summary: gr.Markdown) -> SearchView:
    ws = ctx.start
    with gr.Row():
        query = gr.Textbox(label="Query", placeholder="type a query, or pick a labelled one", scale=4,
                           elem_id="query-box")
        search_btn = gr.Button("Search", variant="primary", scale=1, elem_id="search-button")
        add = gr.Button("Add to the queries", scale=1, elem_id="add-query-button")
    with gr.Row():
        query_set = gr.Dropdown(choices=query_set_options(ctx.registry, ws, ctx.registry.viewer(ANONYMOUS)),
                                value=LABELLED,
                                label="Query set", elem_id="query-set-picker", scale=1)
        picker = gr.Dropdown(choices=query_choices(ws), label="Labelled queries", value=None,
                             elem_id="query-picker", scale=3)
        encoder = gr.Dropdown(choices=encoder_choices(ctx.registry, ws), value="", label="Dense encoder",
                              elem_id="encoder-picker", scale=1, allow_custom_value=True)
    systems = gr.CheckboxGroup(choices=system_choices(ws), value=list(default_columns(ws)), elem_id="search-systems",
                               label=f"Systems side by side (up to {MAX_COLUMNS}; imported runs show their lists "
                                     "for the queries they ran)")
    chosen = gr.State(list(default_columns(ws)))
    results = gr.HTML(elem_id="results")
    by_difficulty = difficulty_table(ctx, "search", api_name="query_difficulty")
    with gr.Accordion("Raw results (JSON)", open=False):
        raw = gr.JSON()
    with gr.Accordion("Query expansion (learned sparse model): base vs fine-tuned", open=False):
        with gr.Row():
            sparse_model = gr.Dropdown(choices=[("the base model alone", ""), *sparse_choices(ctx.registry, ws)],
                                       value="", label="Fine-tuned learned sparse model", elem_id="sparse-picker",
                                       scale=3)
            expand_btn = gr.Button("Show the query's terms", elem_id="expansion-button", scale=1)
        expanded = table(EXPANSION_HEADERS, elem_id="expansion-table")
    with gr.Accordion("Metrics of the systems on show, on the whole query set", open=True):
        split = ws.dataset.default_split()
        note = gr.Markdown(metrics_note(ws, split))
        rows = metrics_rows(ws, split, shown_systems(ws), ctx.registry.viewer(ANONYMOUS)) if split else []
        metrics = table(["system", *VIEW_METRICS], elem_id="metrics-table", value=rows)

    def on_search(text: str, key: str, chosen_: list[str], request: gr.Request):
        ws_ = ctx.labelled(key, request)
        if _bounded(text).strip():
            ctx.registry.ask(session_of(request), text)
        return search(ws_, text, chosen_)

    def on_pick(query_id: str, key: str, chosen_: list[str], request: gr.Request):
        return open_by_id(ctx.registry, ctx.labelled(key, request), session_of(request), query_id, chosen_)

    def on_choose(picked: list[str]):
        if len(picked) > MAX_COLUMNS:
            warn(f"at most {MAX_COLUMNS} systems side by side: the first {MAX_COLUMNS} are shown")
        return picked[:MAX_COLUMNS], picked[:MAX_COLUMNS]

    def on_set(set_id: str, key: str, request: gr.Request):
        ws_ = ctx.workspace(key)
        return gr.update(choices=set_queries(ctx.registry, ws_, set_id, ctx.registry.viewer(session_of(request))),
                         value=None,
                         label="Labelled queries" if not set_id else "Queries of the set")

    def on_encoder(choice: str, key: str, request: gr.Request):
        return (*use_encoder(ctx.registry, ctx.workspace(key), choice, session_of(request)), "")

    search_btn.click(on_search, [query, ctx.key, chosen], [results, raw], api_name="search", **SEARCH)
    expand_btn.click(lambda text, choice, key: expansion(ctx.registry, ctx.workspace(key), text, choice),
                     [query, sparse_model, ctx.key], expanded, api_name="expansion", **HEAVY)
    sparse_model.focus(lambda key: gr.update(choices=[("the base model alone", ""),
                                                      *sparse_choices(ctx.registry, ctx.workspace(key))]),
                       ctx.key, sparse_model, api_visibility="private", **LIGHT)
    query.submit(on_search, [query, ctx.key, chosen], [results, raw], api_visibility="private", **SEARCH)
    query_set.input(on_set, [query_set, ctx.key], picker, api_visibility="private", **LIGHT)
    def on_sets(key: str, request: gr.Request):
        viewer = ctx.registry.viewer(session_of(request))
        return gr.update(choices=query_set_options(ctx.registry, ctx.workspace(key), viewer))

    query_set.focus(on_sets, ctx.key, query_set, api_visibility="private", **LIGHT)
    picker.input(on_pick, [picker, ctx.key, chosen], [query, results, raw], api_visibility="private", **SEARCH)
    systems.input(on_choose, systems, [systems, chosen], api_visibility="private", **LIGHT).then(
        on_search, [query, ctx.key, chosen], [results, raw], api_visibility="private", **SEARCH)
    encoder.focus(lambda key: gr.update(choices=encoder_choices(ctx.registry, ctx.workspace(key))),
                  ctx.key, encoder, api_visibility="private", **LIGHT)
    encoder.input(on_encoder, [encoder, ctx.key], [ctx.key, summary, note, metrics, results], api_name="use_encoder",
                  **HEAVY)
    return SearchView(query, results, raw, picker, note, metrics, encoder, add, on_search, systems, chosen, query_set,
                      by_difficulty)
