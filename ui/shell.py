"""The app's page: the tabs, each built by its view's module, and the events that cross views —
a failure card opens its query (by id) in Search; loading a data set refreshes every view."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from ui import common, data, embeddings, evaluate, failures, judge, runs, search, texts, train
from ui.common import View
from ui.notify import inform, refuse
from ui.pools import HEAVY, LIGHT, SEARCH
from ui.registry import ANONYMOUS, Context, Registry, session_of

BANNER_EVERY_S = 2.0


def build_app(registry: Registry, start_key: str, jobs) -> gr.Blocks:
    """The whole app over ``registry``, each new session starting on the workspace ``start_key``."""
    start = registry.get(start_key)
    with gr.Blocks(title="RankScope") as app:
        ctx = Context(registry, jobs, gr.State(start_key), start)
        gr.Markdown(texts.TITLE)
        summary = gr.Markdown(data.dataset_summary(start), elem_id="dataset-summary")
        banner = Banner(gr.Markdown(elem_id="encoding-status"), gr.State(""), gr.Timer(BANNER_EVERY_S),
                        gr.State(0), gr.State(seen(start_key, start)))
        labels = Labels(gr.State(start.dataset.content_hash), gr.State(0))
        secret = registry.page_secret  # the same after a restart: what a browser kept stays readable
        browser = Browser(gr.BrowserState(None, storage_key="rankscope-identity", secret=secret),
                          gr.BrowserState(None, storage_key="rankscope-place", secret=secret), gr.State(""))
        reading: list[gr.Tab] = []  # the tabs whose views read labels: opening one looks at the judgments again
        with gr.Tabs():
            with gr.Tab("Search", id="search", elem_id="tab-search") as tab:
                search_view = search.build(ctx, summary)
                reading.append(tab)
            with gr.Tab("Judge", id="judge"):
                judge_view = judge.build(ctx)
            with gr.Tab("Evaluate", id="evaluate") as tab:
                evaluate_view = evaluate.build(ctx, tab, banner.arrived)
                reading.append(tab)
            with gr.Tab("Train", id="train") as tab:
                train.build(ctx, tab)
                reading.append(tab)
            with gr.Tab("Embeddings", id="embeddings") as tab:
                embeddings_view = embeddings.build(ctx, tab)
                reading.append(tab)
            with gr.Tab("Failures", id="failures") as tab:
                failures_view = failures.build(ctx, tab)
                reading.append(tab)
            with gr.Tab("Runs", id="runs") as tab:
                runs.build(ctx, tab)
                reading.append(tab)
            with gr.Tab("Data", id="data"):
                data_view = data.build(registry.shared, registry)
        _open_cards_in_search(ctx, failures_view, search_view, judge_view)
        load = _refresh_on_load(app, ctx, data_view, summary, search_view, judge_view,
                                [search_view, evaluate_view, failures_view, embeddings_view], banner, labels, browser)
        _follow_encoding(ctx, banner, summary, search_view, judge_view)
        _follow_labels(ctx, labels, summary, search_view, [evaluate_view, failures_view, embeddings_view],
                       [load, *judge_view.grades], reading)

        def on_unload(request: gr.Request) -> None:  # the tab closed: its workspace is no longer held by it
            registry.release(session_of(request))

        app.unload(on_unload)
    return app


# Shows the Search tab, in the page: the tabs are never an event's output, since the page re-reads every
# output's components (for a gr.Tabs, the whole app) each time any event starts or ends
SHOW_SEARCH_JS = "() => { document.getElementById('tab-search-button')?.click(); }"


def _open_cards_in_search(ctx: Context, failures_view, search_view, judge_view) -> None:
    """A click on a failure card (its ``data-query-id``), on a row of Search's or Judge's query table by
    predicted difficulty, or a pick from the list opens that query in Search, passed by id."""
    outputs = [search_view.query, search_view.results, search_view.raw]

    def open_query(query_id: str, key: str, chosen: list[str], request: gr.Request):
        return search.open_by_id(ctx.registry, ctx.labelled(key, request), session_of(request), query_id, chosen)

    def on_card(key: str, chosen: list[str], evt: gr.EventData, request: gr.Request):
        query_id = getattr(evt, "query_id", None)
        if not query_id or query_id not in ctx.workspace(key).dataset.queries:
            raise refuse("that card's query is not in the data set loaded now: show the failures again")
        return open_query(query_id, key, chosen, request)

    tables = [v.difficulty.html for v in (search_view, judge_view) if v.difficulty is not None]
    for clicked in (failures_view.cards, *tables):  # a card, or a row of a query table (its data-query-id)
        clicked.click(on_card, [ctx.key, search_view.chosen], outputs, api_visibility="private",
                      **SEARCH).success(None, js=SHOW_SEARCH_JS)
    failures_view.open.click(open_query, [failures_view.pick, ctx.key, search_view.chosen], outputs,
                             api_visibility="private", **SEARCH).success(None, js=SHOW_SEARCH_JS)


def seen(key: str, ws) -> str:
    """What a page's views were computed with: the workspace's key and which of its background builds
    were over (``data.builds_seen``); when it differs from now, they are out of date."""
    return f"{key}|{data.builds_seen(ws)}"


@dataclass
class Banner:
    """The line about the background builds (``Workspace.builds``): its Markdown, the text on show,
    the timer that looks again every ``BANNER_EVERY_S`` while one runs, a counter bumped when the
    views must be computed again, and what they were computed with (``seen``: the page's build-time
    content, or the last refresh)."""

    text: gr.Markdown
    shown: gr.State
    timer: gr.Timer
    arrived: gr.State
    seen: gr.State


def _follow_encoding(ctx: Context, banner: Banner, summary: gr.Markdown, search_view, judge_view) -> None:
    """While the session's corpus is encoded in the background (the dense index, the learned sparse
    one, any build of ``Workspace.builds``), the banner shows how far each is; whenever one is over —
    on an open page, or before a new page opened whose content was computed earlier — the summary,
    Search's metrics (and its results, where a query is on show) and the Judge view's pairs of systems
    are computed again (in the heavy pool), and the timer stops when nothing runs."""

    def on_tick(key: str, shown: str, arrived: int, was: str, request: gr.Request):
        return follow(ctx, key, shown, arrived, was, session_of(request))

    def on_arrival(key: str, aim: str, request: gr.Request):
        return arrival(ctx, key, aim, session_of(request))

    def on_rerun(key: str, chosen: list[str], request: gr.Request):
        return rerun(ctx, key, chosen, session_of(request))

    banner.timer.tick(on_tick, [ctx.key, banner.shown, banner.arrived, banner.seen],
                      [banner.text, banner.shown, banner.timer, banner.arrived, banner.seen], api_visibility="private",
                      show_progress="hidden", **LIGHT)
    banner.arrived.change(on_arrival, [ctx.key, judge_view.aim],
                          [summary, search_view.metrics_note, search_view.metrics_table, judge_view.aim],
                          api_visibility="private", show_progress="hidden", **HEAVY).then(
        on_rerun, [ctx.key, search_view.chosen], [search_view.results, search_view.raw],
        api_visibility="private", show_progress="hidden", **SEARCH)


@dataclass
class Browser:
    """What the page's browser keeps in its local storage (``gr.BrowserState``): its token
    (``Registry.identify``) and the kept data set it had open (``{"open": id}``); and, for the page's
    load, the one it may reopen."""

    identity: gr.BrowserState
    place: gr.BrowserState
    wanted: gr.State


@dataclass
class Labels:
    """What labels a page's views were computed with (``labelled``: the labelled data set's content
    hash) and a counter bumped when they must be computed again."""

    seen: gr.State
    changed: gr.State


def labelled(ctx: Context, key: str, session: str = ANONYMOUS) -> str:
    """The labels ``session``'s views of workspace ``key`` read now (``Registry.labelled``: the data's
    own and the judgments it counts, as they stand), as one value: the labelled data set's hash."""
    return ctx.registry.labelled(key, session).dataset.content_hash


def _follow_labels(ctx: Context, labels: Labels, summary: gr.Markdown, search_view, split_views: list[View],
                   after: list, tabs: list[gr.Tab]) -> None:
    """The judgments are labels the moment they are stored (``Registry.labelled``); a page's views
    follow: after each grade or import the session makes (``after``: the Judge view's events, the
    page's load) and whenever a tab whose view reads labels (``tabs``) is opened, the labels are looked at
    again (``look``), and when they changed since the page's views were computed (another session's
    grades among them), the summary, the split pickers (results computed on the earlier labels
    cleared: opening Evaluate computes them again), the labelled queries and Search's metrics are
    computed again (``relabel``)."""

    def on_look(key: str, was: str, changed: int, request: gr.Request):
        return look(ctx, key, was, changed, session_of(request))

    def on_relabel(key: str, request: gr.Request):
        return relabel(ctx, key, split_views, session_of(request))

    def on_metrics(key: str, request: gr.Request):
        ws = ctx.labelled(key, request)
        split = ws.dataset.default_split()
        viewer = ctx.registry.viewer(session_of(request))
        return (search.metrics_note(ws, split),
                common.metrics_rows(ws, split, common.shown_systems(ws), viewer) if split else [])

    looked = ([ctx.key, labels.seen, labels.changed], [labels.seen, labels.changed])
    for event in after:
        event.success(on_look, *looked, api_visibility="private", show_progress="hidden", **LIGHT)
    for tab in tabs:
        tab.select(on_look, *looked, api_visibility="private", show_progress="hidden", **LIGHT)
    labels.changed.change(on_relabel, ctx.key, [summary, *(c for v in split_views for c in v.outputs()),
                                                search_view.picker], api_visibility="private",
                          show_progress="hidden", trigger_mode="always_last", **LIGHT).then(
        on_metrics, ctx.key, [search_view.metrics_note, search_view.metrics_table], api_visibility="private",
        show_progress="hidden", trigger_mode="always_last", **HEAVY)


def look(ctx: Context, key: str, was: str, changed: int, session: str = ANONYMOUS) -> tuple:
    """The labels looked at again: (what the views will have been computed with, the counter bumped)
    when they differ from ``was``, what the page's views were computed with; nothing where they are
    the same, where the session shows another workspace now, or where it was closed."""
    if elsewhere(ctx, key, session):
        return gr.skip(), gr.skip()
    try:
        now = labelled(ctx, key, session)
    except gr.Error:  # closed to free memory: the views say so when used
        return gr.skip(), gr.skip()
    return (gr.skip(), gr.skip()) if now == was else (now, changed + 1)


def relabel(ctx: Context, key: str, split_views: list[View], session: str = ANONYMOUS) -> tuple:
    """The views computed again on the labels as they stand: the summary, each split view's picker
    (``View.refresh``: its results cleared), the labelled queries to pick from; nothing where the
    session shows another workspace now."""
    count = 2 + sum(len(v.outputs()) for v in split_views)
    if elsewhere(ctx, key, session):
        return tuple(gr.skip() for _ in range(count))
    ws, viewer = ctx.registry.labelled(key, session), ctx.registry.viewer(session)
    return (data.dataset_summary(ws), *(u for v in split_views for u in v.refresh(ws, viewer)),
            gr.update(choices=common.query_choices(ws), value=None))


def elsewhere(ctx: Context, key: str, session: str) -> bool:
    """Whether ``session`` shows another workspace than ``key`` now: an event started with ``key``
    that ends after the page loaded another data set must change nothing (its outputs would put the
    old data set's figures, or its stopped timer, over the new one's)."""
    return ctx.registry.holding(session) not in (None, key)


def follow(ctx: Context, key: str, shown: str, arrived: int, was: str, session: str = ANONYMOUS) -> tuple:
    """The banner's look at the builds: its text (twice: on show, and kept), the timer (on while one
    runs), the counter bumped when the views are out of date (``was``, what they were computed with,
    differs from ``seen`` now) and what they will have been computed with; nothing where the session
    shows another workspace now."""
    if elsewhere(ctx, key, session):
        return tuple(gr.skip() for _ in range(5))
    try:
        ws = ctx.workspace(key)
    except gr.Error:  # closed to free memory: the views say so when used; the banner stops
        return "", "", gr.Timer(active=False), gr.skip(), gr.skip()
    text, polling = data.encoding_banner(ws, shown)
    now = seen(key, ws)
    if now == was:
        return text, text, gr.Timer(active=polling), gr.skip(), gr.skip()
    return text, text, gr.Timer(active=polling), arrived + 1, now


def arrival(ctx: Context, key: str, aim: str | None, session: str = ANONYMOUS) -> tuple:
    """The views computed again once a build is over: the summary, Search's metrics caption and
    rows (every system on show, with the judgments the session counts), the Judge view's pairs of
    systems (``aim`` kept); nothing where the session shows another workspace now."""
    if elsewhere(ctx, key, session):
        return tuple(gr.skip() for _ in range(4))
    ws = ctx.registry.labelled(key, session)
    split = ws.dataset.default_split()
    return (data.dataset_summary(ws), search.metrics_note(ws, split),
            common.metrics_rows(ws, split, common.shown_systems(ws), ctx.registry.viewer(session)) if split else [],
            gr.update(choices=judge.aim_choices(ws), value=aim))


def rerun(ctx: Context, key: str, chosen: list[str], session: str = ANONYMOUS) -> tuple:
    """The results on show computed again after a build (the systems that joined among them): those
    of the query the session last asked for (``Registry.ask``), not of whatever the query box holds;
    nothing where it asked for none, shows another workspace, or asked for another query while
    this ran (that search's results stand) — a refresh never puts an older query over a newer one."""
    asked = ctx.registry.asked(session)
    if not asked or elsewhere(ctx, key, session):
        return gr.skip(), gr.skip()
    try:
        out = search.search(ctx.registry.labelled(key, session), asked, chosen)
    except gr.Error:  # closed to free memory, or refused: the refresh says nothing; a search will
        return gr.skip(), gr.skip()
    if ctx.registry.asked(session) != asked:
        return gr.skip(), gr.skip()
    return out


def refreshed(key: str, ws, views: list[View], viewer=None) -> tuple[str, list]:
    """Every view's updates for the workspace ``ws`` (``View.refresh``), and what they were computed
    with (``seen``) taken before them: a build that ends while they are computed is then new to the
    banner's next look, which computes them again (taken after, it would pass for seen by views
    that left its systems out, and they would say it is still being built beside a banner saying
    it is ready)."""
    before = seen(key, ws)
    return before, [u for view in views for u in view.refresh(ws, viewer)]


def _refresh_on_load(app: gr.Blocks, ctx: Context, data_view: data.DataView, summary: gr.Markdown, search_view,
                     judge_view, views: list[View], banner: Banner, labels: Labels, browser: Browser):
    """Loading uploaded files or the demo, or adding or removing queries (from the Data view, or the
    Search box's query with one click), switches the session's workspace and refreshes every view (a
    failed load changes nothing but the status); a new page whose corpus has query sets kept with it
    opens with them. Every view reads the labels as the session counts them (``Registry.labelled``).
    Returns the page's load event (the labels are looked at again after it)."""
    # Judge's query table by predicted difficulty, emptied as Search's is (it fills again when asked)
    judged_table = [judge_view.difficulty.html] if judge_view.difficulty is not None else []
    outputs = [ctx.key, data_view.status, summary, *(c for view in views for c in view.outputs()), *judged_table,
               banner.timer,
               banner.seen, data_view.sets, data_view.set_pick, search_view.query_set, labels.seen, data_view.kept,
               data_view.kept_pick]

    def show(loaded: data.Loaded, request: gr.Request | None, fresh: bool = False):
        if not loaded.ok:
            return (loaded.key, loaded.status, *(gr.skip() for _ in outputs[2:]))
        session = session_of(request)
        ctx.registry.hold(session, loaded.key, fresh)
        ws, viewer = ctx.registry.labelled(loaded.key, session), ctx.registry.viewer(session)
        before, updates = refreshed(loaded.key, ws, views, viewer)
        return (loaded.key, loaded.status, data.dataset_summary(ws), *updates, *("" for _ in judged_table),
                gr.Timer(active=True), before,
                *data.query_set_rows(ctx.registry, ws, session),
                search.query_set_choices(ctx.registry, ws, viewer), ws.dataset.content_hash,
                *data.kept_rows(ctx.registry, session))

    def on_remove_set(set_id, key, request: gr.Request):
        return show(data.remove_query_set(ctx.registry, key, set_id, session_of(request)), request)

    page = _open_page(app, ctx, browser, outputs, show)
    data_view.remove_set.click(on_remove_set, [data_view.set_pick, ctx.key], outputs, api_name="remove_query_set",
                               **HEAVY)

    def on_publish_set(set_id, key, request: gr.Request):
        status = data.publish_query_set(ctx.registry, key, set_id, session_of(request))
        return (status, *data.query_set_rows(ctx.registry, ctx.workspace(key), session_of(request)))

    data_view.publish_set.click(on_publish_set, [data_view.set_pick, ctx.key],
                                [data_view.status, data_view.sets, data_view.set_pick], api_name="publish_query_set",
                                **LIGHT)

    def on_load(paths, key, request: gr.Request, progress=gr.Progress()):
        loaded = data.load_files(ctx.registry, key, paths, lambda f, what: progress(f, desc=what), session_of(request))
        return show(loaded, request, fresh=True)

    def on_demo(key, request: gr.Request, progress=gr.Progress()):
        loaded = data.load_demo(ctx.registry, lambda f, what: progress(f, desc=what), session_of(request), key)
        return show(loaded, request, fresh=True)

    def on_add(paths, text, key, request: gr.Request, progress=gr.Progress()):
        return show(data.add_queries(ctx.registry, key, paths, text, lambda f, what: progress(f, desc=what),
                                     session_of(request)), request)

    def on_add_typed(text, key, request: gr.Request):
        loaded = data.add_queries(ctx.registry, key, None, text, session=session_of(request))
        inform(loaded.headline)
        return show(loaded, request)

    _keep_place(ctx, data_view, browser, outputs, show, [
        data_view.load.click(on_load, [data_view.files, ctx.key], outputs, api_name="load_dataset", **HEAVY),
        data_view.demo.click(on_demo, [ctx.key], outputs, api_name="load_demo", **HEAVY)])

    def on_import(path, name, key, request: gr.Request):
        return show(data.import_run(ctx.registry, key, path, name, session_of(request)), request)

    def on_prefer(prefer, key, request: gr.Request):
        loaded = data.apply_judgments(ctx.registry, key, prefer, session_of(request))
        inform(loaded.headline.split(";")[0])
        return show(loaded, request)

    judge_view.prefer.input(on_prefer, [judge_view.prefer, ctx.key], outputs, api_name="use_judgments", **HEAVY)
    data_view.import_run.click(on_import, [data_view.run_file, data_view.run_name, ctx.key], outputs,
                               api_name="import_run", **HEAVY)
    data_view.add.click(on_add, [data_view.query_files, data_view.query_text, ctx.key], outputs,
                        api_name="add_queries", **HEAVY)
    search_view.add.click(on_add_typed, [search_view.query, ctx.key], outputs, api_visibility="private",
                          **HEAVY).then(search_view.rerun, [search_view.query, ctx.key, search_view.chosen],
                                        [search_view.results, search_view.raw],
                                        api_visibility="private", **SEARCH)
    return page

def _open_page(app: gr.Blocks, ctx: Context, browser: Browser, outputs: list, show):
    """A new page: who its browser is (``Registry.identify``), then the kept data set that browser had
    open, reopened with its added queries and its judgments (``data.reopen``, in the heavy pool), or
    the start with the query sets kept with its corpus; the last six ``outputs`` are the lists
    (query sets, Search's set picker, the labels seen, the kept data sets). Returns the last event."""

    def on_identity(token, place_, request: gr.Request):
        """Who the page's browser is (its token: ``Registry.identify``; a new one when it has none the
        app handed out) and the kept data set it had open that this browser may reopen ("" for none)."""
        session = session_of(request)
        kept_token = ctx.registry.identify(session, token)
        return (kept_token if kept_token != token else gr.skip()), data.place_of(ctx.registry, place_, session)

    def on_page(key, wanted_, request: gr.Request):
        session = session_of(request)
        if wanted_:  # the browser's data set is reopened next (``on_reopen_place``): the start is not shown
            return (*(gr.skip() for _ in outputs[:-2]), *data.kept_rows(ctx.registry, session))
        loaded = data.restored_start(ctx.registry, key, session)
        if loaded is not None and elsewhere(ctx, key, session):
            # the page loaded another data set while the start's kept queries were restored: that load
            # stands (this event would otherwise put the start back over it when it ends)
            return tuple(gr.skip() for _ in outputs)
        if loaded is None:  # the start as it is; its labels are looked at next (``_follow_labels``)
            ws = ctx.workspace(key)
            return (*(gr.skip() for _ in outputs[:-6]), *data.query_set_rows(ctx.registry, ws, session),
                    search.query_set_choices(ctx.registry, ws, ctx.registry.viewer(session)), gr.skip(),
                    *data.kept_rows(ctx.registry, session))
        return show(loaded, request)

    def on_reopen_place(key, wanted_, request: gr.Request, progress=gr.Progress()):
        """The kept data set the browser had open, reopened (with its added queries and judgments),
        unless the page loaded another meanwhile."""
        session = session_of(request)
        if not wanted_ or elsewhere(ctx, key, session):
            return tuple(gr.skip() for _ in outputs)
        return show(data.reopen(ctx.registry, key, wanted_, lambda f, what: progress(f, desc=what), session), request,
                    fresh=True)

    return app.load(on_identity, [browser.identity, browser.place], [browser.identity, browser.wanted],
                    api_visibility="private", **LIGHT).then(
        on_page, [ctx.key, browser.wanted], outputs, api_visibility="private", **LIGHT).then(
        on_reopen_place, [ctx.key, browser.wanted], outputs, api_visibility="private", **HEAVY)


def _keep_place(ctx: Context, data_view: data.DataView, browser: Browser, outputs: list, show, loads: list) -> None:
    """The data sets kept beside the store (``retrieval.data.kept``): reopened (``/reopen_dataset``) or
    forgotten (``/forget_dataset``) from the Data view; and after each load (``loads``: an upload, the
    demo) or reopening, the browser keeps which kept data set it has open (``Browser.place``), what
    its next page reopens."""

    def on_reopen(kept_id, key, request: gr.Request, progress=gr.Progress()):
        return show(data.reopen(ctx.registry, key, kept_id, lambda f, what: progress(f, desc=what),
                                session_of(request)), request, fresh=True)

    def on_forget(kept_id, request: gr.Request):
        status = data.forget_kept(ctx.registry, kept_id, session_of(request))
        return (status, *data.kept_rows(ctx.registry, session_of(request)))

    def on_place(key: str):
        """What the browser keeps of where it is: the kept data set the session's workspace was opened
        from ("" for the demo, or a data set not kept), reopened by its next page."""
        return {"open": ctx.registry.kept_of(key)}

    reopened = data_view.reopen.click(on_reopen, [data_view.kept_pick, ctx.key], outputs, api_name="reopen_dataset",
                                      **HEAVY)
    for event in (*loads, reopened):
        event.success(on_place, ctx.key, browser.place, api_visibility="private", show_progress="hidden", **LIGHT)
    data_view.forget.click(on_forget, data_view.kept_pick, [data_view.status, data_view.kept, data_view.kept_pick],
                           api_name="forget_dataset", **LIGHT)
