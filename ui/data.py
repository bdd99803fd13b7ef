"""The Data view: upload a data set (a BEIR zip or separate files) or go back to the bundled demo.
A broken file is reported with its file and line, and the data set loaded before stays loaded."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from retrieval import DataError, Workspace, load_dataset
from retrieval.data import kept, query_sets
from retrieval.data.dataset import Dataset
from retrieval.data.readers import load_uploads
from retrieval.data.readers.assembly import add_queries as add_queries_file
from retrieval.data.readers.decode import count
from retrieval.data.readers.queries import stable_query_id
from retrieval.data.readers.runs import read_run
from retrieval.evaluation.diagnostics import label_health, language_check
from retrieval.index.background_build import duration
from retrieval.progress import Progress
from retrieval.sharing.owners import describe, when
from retrieval.systems import DENSE
from ui import texts
from ui.notify import refuse
from ui.present.counts import split_counted
from ui.present.escape import code, text
from ui.registry import ANONYMOUS, Registry, ServerBusy
from ui.tables import table

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo"
TYPED_QUERIES = 10_000  # queries typed in one go
QUERY_CHARS = 10_000  # characters in one query (typed, or searched)
MAX_WARNINGS = 20  # warnings listed after a load (the CLI's `info` lists them all)


def dataset_summary(ws: Workspace) -> str:
    """One line of Markdown (name, documents and the links between them, queries, labels per split, encoder,
    content hash), then a warning for each reason not to trust the numbers (``warnings``)."""
    ds = ws.dataset
    splits = ", ".join(f"{text(s)}: {split_counted(s, q)} / {sum(len(v) for v in q.values())} labels"
                       for s, q in ds.qrels.items()) or "no relevance labels"
    links = f" ({ds.link_count:,} links between them)" if ds.link_count else ""
    line = (f"**{text(ds.name)}** — {len(ds.docs):,} documents{links}, {len(ds.queries):,} queries ({splits}); "
            f"encoder {code(ws.encoder.name)} ({text(ws.encoder.compute)}); "
            f"BM25 language `{ws.tokenizer.stemmer or 'none'}`; "
            f"content hash `{ds.content_hash[:12]}`")
    where = getattr(ws.engine, "where", None)
    if where:
        line += f"; BM25 and vectors served by {ws.engine.name} at {code(where)}"
    return line + "".join(f"\n\n⚠️ {w}" for w in warnings(ws))


def warnings(ws: Workspace) -> list[str]:
    """Why the numbers may mislead: an English-only encoder on another language, labels that look
    broken, or no labels at all (λ then is a default)."""
    out = []
    lang = language_check(ws)
    if lang.mismatch:
        out.append(f"Most of this corpus is in `{lang.guess.code}` ({lang.guess.share:.0%} of a "
                   f"{lang.guess.sampled}-document sample), but {code(lang.encoder)} was trained on English only: "
                   "dense "
                   "and hybrid results will be poor. Open it with a multilingual encoder (`--model` with a "
                   "Hugging Face id or a folder, e.g. `sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2`).")
    split = ws.dataset.default_split()
    if split is None:
        out.append("No relevance labels: metrics, failures and λ tuning need them. The hybrid adds cosine and "
                   "BM25 as a share of each query's best possible score, equal weights; judged queries can tune λ.")
        return out
    health = label_health(ws, split)
    if health.looks_broken:
        out.append(f"The {code(split)} labels look broken: for {health.found_by_none} of {health.queries} labelled "
                   f"queries no system ranks a relevant document in its top {health.depth}"
                   + (f", and {health.empty_targets} labels point at documents with no indexable word"
                      if health.empty_targets else "")
                   + ". Check that the qrels belong to this corpus (document and query ids).")
    return out


@dataclass
class Loaded:
    """What a load did: the session's key (the new one, or the old one when loading failed), a
    status (Markdown, user text escaped) and its first sentence as plain text (``headline``, for a
    notice, which escapes it itself); ``ok`` says whether the views must show the new workspace."""

    key: str
    status: str
    ok: bool
    headline: str = ""


def failed(key: str, what: str, err: Exception, kept: str) -> Loaded:
    """A load that changed nothing: the session keeps ``key``; the status says ``what`` failed, why
    (``err``, the user's file names and ids in it made inert) and what stays (``kept``)."""
    return Loaded(key, f"❌ **{what}:** {code(err)}\n\n{kept}", False, f"{what}: {err}")


def open_dataset(registry: Registry, dataset: Dataset, progress: Progress | None = None,
                 done: str | None = None, session: str = ANONYMOUS) -> Loaded:
    """Index ``dataset`` (BM25, then the dense index with encoding progress) and report what was
    done (``done``, default "Loaded <name>.") and its warnings. ``ServerBusy`` when the server
    has no room for it."""
    if progress:
        progress(0.0, "indexing")
    started = time.monotonic()
    before = len(dataset.queries)
    dataset = query_sets.restore(registry.store, dataset, registry.viewer(session))  # added before: they come back
    back = len(dataset.queries) - before
    key = registry.open(dataset, progress=progress, session=session)
    used = registry.judged(key, session).pairs  # and its judgments, as labels in every view
    warn = "".join(f"\n- ⚠️ {text(w)}" for w in dataset.report.warnings[:MAX_WARNINGS])
    vectors = embeddings_line(registry.get(key), started)
    done = done or f"Loaded {dataset.name}."
    if back:
        done += f" {count(back, 'query', 'queries')} added to this corpus before came back (Data → query sets)."
    if used:
        done += f" {count(used, 'stored judgment')} of this corpus are its labels (Judge)."
    return Loaded(key, f"✅ {text(done)} {vectors}{warn}", True, done)


def embeddings_line(ws: Workspace, since: float) -> str:
    """Where the corpus's vectors came from in a load that started at ``since`` (monotonic):
    "345 embeddings from the store, 0 encoded (cpu, bf16 …)", or already in memory, or how far
    the encoding that goes on in the background is."""
    if ws.pending((DENSE,)):
        return (f"BM25 is ready; dense and the hybrids join once the corpus is encoded in the background "
                f"({text(ws.encoder.compute)}): {texts.BANNER_FOLLOWS}.")
    dense = ws.dense
    if dense.built_at < since:  # the same corpus was open already: nothing was read or encoded
        return f"{len(dense.index.doc_ids):,} embeddings already in memory ({text(ws.encoder.compute)})."
    also = f"; {dense.repeats:,} documents repeat another's text and share its vector" if dense.repeats > 0 else ""
    where = getattr(ws.engine, "where", None)
    source = f"already stored (the store or {ws.engine.name})" if where else "from the store"
    engine = f" BM25 and the vectors are served by {ws.engine.name} at {code(where)}." if where else ""
    return (f"{dense.from_store:,} embeddings {source}, {dense.encoded:,} encoded "
            f"({text(ws.encoder.compute)}){also}.{engine}")


def waiting_note(ws: Workspace) -> str:
    """For views that leave dense and the hybrids out while the corpus is encoded in the background:
    that they do, not how far the build is (the banner says it: ``texts.BANNER_FOLLOWS``)."""
    return f"Dense and the hybrids are left out until the corpus is encoded ({texts.BANNER_FOLLOWS})."


BUILT = {"dense": ("Dense index", "Dense and the hybrids answer now."),
         "sparse": ("Learned sparse index (SPLADE)", "Learned sparse answers now.")}  # Workspace.builds' kinds


def _build_line(ws: Workspace, kind: str, status) -> str:
    """One build's line of the banner: where it stands, with its rate and time left while it encodes."""
    name, joins = BUILT.get(kind, (f"The {kind} index", "Its systems answer now."))
    if status.state == "waiting":
        return f"- **{name}**: {status.total:,} documents, waits for the build before it (one encoder at a time)."
    if status.state == "encoding":
        rate = f", {status.rate:,.0f} per second" if status.rate else ""
        left = f", about {duration(status.seconds_left)} left" if status.seconds_left is not None else ""
        return f"- **{name}**: {status.done:,} of {status.total:,} documents ({status.fraction:.0%}){rate}{left}."
    if status.state == "indexing":
        return f"- **{name}**: all {status.total:,} documents are encoded; building the index."
    if status.state == "failed":
        return (f"❌ **{name} failed:** {code(status.error or '')}. BM25 still answers; load the data set again to "
                "retry (vectors encoded so far are kept in the store).")
    return (f"✅ **{name} ready**: {status.total:,} documents, encoded and indexed in {duration(status.elapsed_s)}. "
            f"{joins}")


def encoding_banner(ws: Workspace, shown: str = "") -> tuple[str, bool]:
    """The line over the views about the background builds (``Workspace.builds``: the dense index,
    the learned sparse one), given the one on show (``shown``), and whether to look again: each
    build's progress, rate and time left while any runs; once all are over, "ready" for each (or
    its error) if progress was on show, else only the errors."""
    statuses = {kind: b.status for kind, b in ws.builds.items() if b.status is not None}
    if not statuses:
        return "", False
    running = [k for k, st in statuses.items() if st.state in ("waiting", "encoding", "indexing")]
    if running:
        done = [_build_line(ws, k, st) for k, st in statuses.items() if k not in running]
        lines = [_build_line(ws, k, statuses[k]) for k in running]
        return (f"**Encoding the corpus in the background** ({text(ws.encoder.compute)}); BM25 answers now, "
                "each system joins when its index is done.\n" + "\n".join(lines) + "".join(f"\n\n{d}" for d in done),
                True)
    failed = [_build_line(ws, k, st) for k, st in statuses.items() if st.state == "failed"]
    if not shown:
        return "\n\n".join(failed), False
    return "\n\n".join(_build_line(ws, k, st) for k, st in statuses.items()), False


def builds_seen(ws: Workspace) -> str:
    """Which of the workspace's background builds are over (ready or failed), as text: what the
    views computed while it read otherwise are out of date."""
    return ",".join(sorted(kind for kind, b in ws.builds.items() if b.finished))


def load_files(registry: Registry, key: str, paths: list[str] | None, progress: Progress | None = None,
               session: str = ANONYMOUS) -> Loaded:
    """Uploaded files as a data set; on bad input the status names the file (by its own name)
    and line and the previous data set (``key``) stays loaded."""
    if not paths:
        raise refuse("choose one or more files first")
    try:
        dataset = load_uploads([str(p) for p in paths], progress)
        loaded = open_dataset(registry, dataset, progress, session=session)
    except (DataError, ServerBusy) as err:
        return failed(key, "Could not load", err, "The previous data set is still loaded.")
    try:  # its files kept beside the store: a reload, a later visit or a restart reopens it
        found = kept.keep(registry.store, dataset, [str(p) for p in paths], registry.viewer(session))
    except ValueError as err:
        loaded.status += f"\n\n⚠️ {text(err)}"
        return loaded
    if found is not None:
        registry.note_kept(loaded.key, found.id)
        loaded.status += ("\n\nKept beside the store: a reload reopens it, and *Data sets kept* lists it"
                          + (" (for this browser only)." if registry.shared else "."))
    return loaded


def reopen(registry: Registry, key: str, kept_id: str | None, progress: Progress | None = None,
           session: str = ANONYMOUS) -> Loaded:
    """A kept data set (``retrieval.data.kept``) opened again from its files, with the query sets and
    judgments kept with its corpus; one the session does not see is refused in the same words as one
    that does not exist, and the data set loaded before (``key``) stays loaded when it cannot be
    read."""
    if not kept_id:
        raise refuse("pick a kept data set first")
    viewer = registry.viewer(session)
    try:
        dataset = kept.reopen(registry.store, kept_id, viewer, progress)
    except KeyError as err:
        raise refuse(err.args[0]) from err
    except (DataError, ValueError) as err:
        return failed(key, "Could not reopen", err, "The data set loaded before is still loaded.")
    try:
        loaded = open_dataset(registry, dataset, progress, session=session, done=f"Reopened {dataset.name}.")
    except ServerBusy as err:
        return failed(key, "Could not reopen", err, "The data set loaded before is still loaded.")
    registry.note_kept(loaded.key, str(kept_id))
    return loaded


KEPT_HEADERS = ["name", "documents", "queries", "kept", "last opened", "kept by"]


def kept_rows(registry: Registry, session: str = ANONYMOUS) -> tuple[list[list], dict]:
    """The data sets kept beside the store that ``session`` sees (``retrieval.data.kept``: on a shared
    deployment its browser's own), the most recently opened first, and the picker's choices."""
    viewer = registry.viewer(session)
    found = kept.listed(registry.store, viewer)
    rows = [[k.name, k.documents, k.queries, when(k.created), when(k.opened), describe(k.owner, viewer)]
            for k in found]
    return rows, gr.update(choices=[(f"{k.name} ({k.documents:,} documents, {when(k.opened)})", k.id) for k in found],
                           value=found[0].id if found else None)  # the latest: one click reopens it


def forget_kept(registry: Registry, kept_id: str | None, session: str = ANONYMOUS) -> str:
    """Forget a kept data set and its files (what is open stays open); the status line. One the
    session does not see is refused in the same words as one that does not exist."""
    if not kept_id:
        raise refuse("pick a kept data set first")
    try:
        gone = kept.forget(registry.store, kept_id, registry.viewer(session))
    except KeyError as err:
        raise refuse(err.args[0]) from err
    return f"✅ Forgot {code(gone.name)}: its files are no longer kept beside the store (it stays open here)."


def place_of(registry: Registry, place: object, session: str = ANONYMOUS) -> str:
    """The kept data set a browser's page had open (``place``, what the browser kept: ``{"open": id}``)
    when ``session`` may reopen it, else "" (anything else: another browser's, one forgotten, a value
    of another shape — the page opens on the start, saying nothing of it)."""
    wanted = place.get("open") if isinstance(place, dict) else None
    if not isinstance(wanted, str) or not wanted:
        return ""
    try:
        return kept.find(registry.store, wanted, registry.viewer(session)).id
    except KeyError:
        return ""


def load_demo(registry: Registry, progress: Progress | None = None, session: str = ANONYMOUS, key: str = "") -> Loaded:
    """The bundled demo again (``key``: the session's workspace, kept when the server has no room)."""
    try:
        return open_dataset(registry, load_dataset(DEMO), progress, session=session)
    except ServerBusy as err:
        return failed(key, "Could not load the demo", err, "The previous data set is still loaded.")


def add_queries(registry: Registry, key: str, paths: list[str] | None, text: str = "",
                progress: Progress | None = None, session: str = ANONYMOUS) -> Loaded:
    """Queries added to the session's data set: from files (JSONL, CSV/TSV, .txt one per line) and
    from ``text`` (one query per line, stable ids; ``typed_queries``). Bad input names the file and
    line, a session past its query sets (``Limits.query_sets``) is told so, and the data set stays
    as it was."""
    before_ws = registry.get(key)
    dataset = before_ws.dataset
    if not paths and not (text or "").strip():
        raise refuse("upload a queries file or type queries, one per line")
    before = len(dataset.queries)
    try:
        typed = typed_queries(text)
        for path in paths or []:
            dataset = add_queries_file(dataset, str(path), display=Path(path).name)
        dataset = dataset.with_queries(typed)
        registry.count_query_set(session)
        added = len(dataset.queries) - before
        names = [Path(p).name for p in paths or []] + (["typed"] if typed else [])
        kept = query_sets.keep(registry.store, before_ws.dataset, dataset, ", ".join(names), registry.viewer(session))
        also = " Kept with the corpus: they come back on the next visit (Data → query sets)." if kept else ""
        loaded = open_dataset(registry, dataset, progress, session=session,
                              done=(f"Added {count(added, 'query', 'queries')} to {dataset.name}.{also}" if added
                                    else f"No new queries for {dataset.name}: every one given is there already."))
        loaded.key = registry.carry_runs(loaded.key, before_ws, session)
    except (DataError, ValueError) as err:  # SessionLimit, ServerBusy and query_sets' bounds among them
        return failed(key, "Could not add the queries", err, "The data set is unchanged.")
    return loaded


QUERY_SET_HEADERS = ["name", "queries", "added", "id", "added by", "published"]


def query_set_rows(registry: Registry, ws: Workspace, session: str = ANONYMOUS) -> tuple[list[list], dict]:
    """The query sets kept with the session's corpus that it sees (on a shared deployment its own and
    the published ones: name, queries, added, id, by whom, published) and the picker's choices."""
    viewer = registry.viewer(session)
    sets = query_sets.listed(registry.store, ws.dataset.corpus_hash, viewer)
    rows = [[qs["name"], qs["n"], time.strftime("%Y-%m-%d %H:%M", time.localtime(qs["created"])), qs["id"],
             describe(qs["owner"], viewer), "yes" if qs["published"] else "no (only this session sees it)"]
            for qs in sets]
    return rows, gr.update(choices=[(f"{qs['name']} ({count(qs['n'], 'query', 'queries')})", qs["id"]) for qs in sets],
                           value=None)


def remove_query_set(registry: Registry, key: str, set_id: str | None, session: str = ANONYMOUS) -> Loaded:
    """Forget a query set kept with the session's corpus, and reopen the data set without the
    queries only it had (their judgments stay in the store and come back with the queries)."""
    if not set_id:
        raise refuse("pick a query set to remove")
    ws = registry.get(key)
    try:
        dataset = query_sets.drop(registry.store, ws.dataset, set_id, registry.viewer(session))
    except (KeyError, ValueError) as err:  # another session's, on a shared deployment
        raise refuse(err) from err
    gone = len(ws.dataset.queries) - len(dataset.queries)
    try:
        loaded = open_dataset(registry, dataset, session=session,
                              done=f"Removed a query set: {count(gone, 'query', 'queries')} fewer.")
    except ServerBusy as err:
        return failed(key, "Could not reopen the data set", err, "The query set is no longer kept.")
    loaded.key = registry.carry_runs(loaded.key, ws, session)
    return loaded


def publish_query_set(registry: Registry, key: str, set_id: str | None, session: str = ANONYMOUS) -> str:
    """Make the session's query set ``set_id`` visible to every session (a shared deployment's
    Publish); the status line. Refused in one line, nothing changed: off a shared deployment (every
    set is everyone's already), another session's set, one published already."""
    if not registry.shared:
        raise refuse("every query set is everyone's on this deployment already: nothing to publish")
    if not set_id:
        raise refuse("pick a query set to publish")
    try:
        found = query_sets.publish(registry.store, registry.get(key).dataset.corpus_hash, set_id,
                                   registry.viewer(session))
    except (KeyError, ValueError) as err:
        raise refuse(err) from err
    return (f"✅ Published the query set {code(found['name'])} ({count(found['n'], 'query', 'queries')}): every "
            "session that opens this corpus gets its queries; only this session can remove it.")


def restored_start(registry: Registry, key: str, session: str = ANONYMOUS) -> Loaded | None:
    """A new page's workspace with the query sets kept with its corpus (a reload or a restart finds
    them as they were left; the judgments are labels whatever the page: ``Registry.labelled``), or
    None when there are none it lacks (the page stays on ``key``)."""
    ws = registry.get(key)
    restored = query_sets.restore(registry.store, ws.dataset, registry.viewer(session))
    if restored.content_hash == ws.dataset.content_hash:  # nothing kept, or all of it there
        return None
    try:
        return open_dataset(registry, ws.dataset, session=session)  # which adds them back, and says so
    except ServerBusy as err:
        return failed(key, "Could not restore the queries kept with this corpus", err, "The data set is unchanged.")


def typed_queries(text: str | None) -> dict[str, str]:
    """Queries typed one per line, by stable id (``stable_query_id``): at most ``TYPED_QUERIES``
    lines of at most ``QUERY_CHARS`` characters each, else a ValueError naming the line."""
    lines = [(n, line.strip()) for n, line in enumerate((text or "").splitlines(), 1) if line.strip()]
    if len(lines) > TYPED_QUERIES:
        raise ValueError(f"{len(lines):,} typed queries; type at most {TYPED_QUERIES:,}, or upload a file")
    for n, line in lines:
        if len(line) > QUERY_CHARS:
            raise ValueError(f"typed query on line {n} has {len(line):,} characters, more than {QUERY_CHARS:,}")
    return {stable_query_id(line): line for _, line in lines}


def apply_judgments(registry: Registry, key: str, prefer: str = "imported", session: str = ANONYMOUS) -> Loaded:
    """Which label wins, for the session, a pair both the data and a judgment label: the data's own
    ("imported") or the judgments; every view then evaluates so (the judgments are labels in every
    view whatever the choice: ``Registry.labelled``). The session keeps ``key``."""
    try:
        registry.set_prefer(session, prefer)
    except ValueError as err:
        raise refuse(err) from err
    ws = registry.labelled(key, session)
    counted = registry.judged(key, session)
    splits = ", ".join(f"{s}: {split_counted(s, q)}" for s, q in ws.dataset.qrels.items())
    won = "the judgments win" if prefer == "judgments" else "the data's own labels win"
    done = (f"Every view uses {count(counted.pairs, 'judgment')} of {count(counted.queries, 'query', 'queries')} "
            f"({splits or 'no labels yet'}); where both label a pair, {won}; unjudged documents count as not "
            "relevant.")
    return Loaded(key, f"✅ {text(done)}", True, done)


def import_run(registry: Registry, key: str, path: str | None, name: str = "", session: str = ANONYMOUS) -> Loaded:
    """A run file of the analyst's own system (TREC or ranx JSON) as a system of the session's
    workspace, named ``name`` (default: its TREC tag or file name). Bad input names the file and
    line, and the workspace stays as it was."""
    if not path:
        raise refuse("choose a run file first")
    ws = registry.get(key)
    try:
        imported = read_run(str(path), ws.dataset, (name or "").strip() or None, display=Path(path).name)
        new_key = registry.add_run(key, imported, session)
    except (DataError, ValueError) as err:  # SessionLimit among them
        return failed(key, "Could not import the run", err, "The data set is unchanged.")
    lists = sum(1 for hits in imported.run.values() if hits)
    warn = "".join(f"\n- ⚠️ {text(w)}" for w in imported.report.warnings[:MAX_WARNINGS])
    done = (f"Imported run {imported.name}: {lists:,} queries, "
            f"{sum(len(h) for h in imported.run.values()):,} ranked documents.")
    return Loaded(new_key, f"✅ {text(done)}{warn}", True, done)


@dataclass
class DataView:
    files: gr.File
    load: gr.Button
    demo: gr.Button
    query_files: gr.File
    query_text: gr.Textbox
    add: gr.Button
    run_file: gr.File
    run_name: gr.Textbox
    import_run: gr.Button
    status: gr.Markdown
    sets: gr.Dataframe
    set_pick: gr.Dropdown
    remove_set: gr.Button
    publish_set: gr.Button  # shown on a shared deployment only
    kept: gr.Dataframe  # the data sets kept beside the store (``kept_rows``)
    kept_pick: gr.Dropdown
    reopen: gr.Button
    forget: gr.Button


def build(shared: bool = False, registry: Registry | None = None) -> DataView:
    gr.Markdown(texts.DATA_INTRO)
    files = gr.File(label="Data set files", file_count="multiple", elem_id="upload")
    with gr.Row():
        load = gr.Button("Load uploaded files", variant="primary", elem_id="load-button")
        demo = gr.Button("Load the bundled demo")
    rows, picker = kept_rows(registry) if registry is not None else ([], {"choices": [], "value": None})
    with gr.Accordion("Data sets kept beside the store: reopen one as it was left", open=True):
        gr.Markdown(texts.KEPT_HELP_SHARED if shared else texts.KEPT_HELP)
        with gr.Row():
            kept_pick = gr.Dropdown(choices=picker["choices"], value=picker["value"], label="Kept data set",
                                    elem_id="kept-pick", scale=3)
            reopen = gr.Button("Reopen", variant="primary", elem_id="reopen-button", scale=1)
            forget = gr.Button("Forget it and its files", elem_id="forget-kept", scale=1)
        kept_table = gr.Dataframe(value=rows, headers=KEPT_HEADERS, interactive=False, elem_id="kept-table")
    with gr.Accordion("Add queries to the loaded data set (no labels needed)", open=True):
        gr.Markdown(texts.ADD_QUERIES_HELP)
        with gr.Row():
            query_files = gr.File(label="Queries files", file_count="multiple", elem_id="query-upload", scale=2)
            query_text = gr.Textbox(label="…or type them, one per line", lines=4, elem_id="query-text", scale=2)
        add = gr.Button("Add queries", elem_id="add-queries-button")
    with gr.Accordion("Query sets kept with this corpus", open=False):
        gr.Markdown(texts.QUERY_SETS_HELP)
        if shared:
            gr.Markdown(texts.QUERY_SETS_SHARED)
        sets = table(QUERY_SET_HEADERS, elem_id="query-sets")
        with gr.Row():
            set_pick = gr.Dropdown(choices=[], label="Query set", elem_id="query-set-pick", scale=3)
            remove_set = gr.Button("Remove this query set", elem_id="remove-query-set", scale=1)
            publish_set = gr.Button("Publish it to every session", elem_id="publish-query-set", scale=1,
                                    visible=shared)
    with gr.Accordion("Import a run of your own system (TREC or ranx JSON)", open=True):
        gr.Markdown(texts.IMPORT_RUN_HELP)
        with gr.Row():
            run_file = gr.File(label="Run file", elem_id="run-upload", scale=2)
            run_name = gr.Textbox(label="Name (default: its TREC tag or file name)", elem_id="run-name", scale=1)
        import_btn = gr.Button("Import run", elem_id="import-run-button")
    status = gr.Markdown(elem_id="load-status")
    return DataView(files, load, demo, query_files, query_text, add, run_file, run_name, import_btn, status, sets,
                    set_pick, remove_set, publish_set, kept_table, kept_pick, reopen, forget)
