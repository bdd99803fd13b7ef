"""The Judge view: relevance labels made in the app. Every system on show pools its top k for each
query; the pairs come one at a time, each the one expected to move the comparisons of the systems on
show (or of the pair aimed at) most (``retrieval.judging.order``), the system names hidden unless
asked; grades 0 / 1 / 2 (keys 0, 1, 2), skip (s), previous / next (← →). Each grade
is written to the store the moment it is given, and is a label in every view from then on (the
shell's views follow the grades: ``ui.shell``); the judgments export as TREC or BEIR qrels."""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr

from retrieval import Store, Workspace, numbers
from retrieval.data.readers import judgment_files
from retrieval.data.run import Run
from retrieval.errors import DataError
from retrieval.evaluation.metrics import CONDENSED_DEPTH, conclusion, interval_text, metric_name
from retrieval.files.trec import QRELS_FORMATS, write_qrels
from retrieval.judging import judge_owners, sampling, seen
from retrieval.judging import settled_comparisons as settling
from retrieval.judging import staged_writes as staging
from retrieval.judging.agreement import agreement
from retrieval.judging.coverage import COVERAGE_DEPTH
from retrieval.judging.judgments import (
    AGREEMENT_EVERY,
    DEPTH,
    MAX_DEPTH,
    MERGE_RULES,
    Queue,
    check_depth,
    check_judge,
    disagreement,
    disagreements,
    judge_key,
    judged_pairs,
    judgments_to_qrels,
    merge_labels,
    merged_qrels,
    parse_grade,
    queue,
    store_judge,
)
from retrieval.judging.labels import judged_counts
from retrieval.judging.pool_verdict import success_name
from retrieval.judging.sampling import DEFAULT_SIZE, Sample
from retrieval.judging.settled_comparisons import standings
from retrieval.safe_names import file_name
from retrieval.sharing.owners import Viewer
from retrieval.store import cache_key
from retrieval.systems import label
from ui import texts
from ui.common import shown_systems
from ui.difficulty import DifficultyTable, difficulty
from ui.difficulty import build as difficulty_table
from ui.exports import export_folder
from ui.notify import refuse
from ui.pools import LIGHT
from ui.present.counts import queries_counted
from ui.present.escape import text as esc
from ui.present.search import highlight
from ui.present.tables import gate_rule, shortfall_text
from ui.registry import Context, session_of
from ui.tables import table

GRADE_NAMES = {0: "not relevant", 1: "relevant", 2: "highly relevant"}
# keys 0/1/2 grade, s skips, ← → move, while the Judge tab is on screen and no text box has the focus
KEYS_JS = ("document.addEventListener('keydown', (e) => {"
           " const panel = document.getElementById('judge-panel');"
           " if (!panel || panel.offsetParent === null) return;"
           " const t = e.target; if (t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA')) return;"
           " const ids = {'0': 'judge-0', '1': 'judge-1', '2': 'judge-2', 's': 'judge-skip',"
           " 'ArrowLeft': 'judge-prev', 'ArrowRight': 'judge-next'};"
           " const id = ids[e.key]; if (!id) return;"
           " const b = document.getElementById(id); if (b) { e.preventDefault(); b.click(); } });")


_CACHE: weakref.WeakKeyDictionary[Workspace, dict] = weakref.WeakKeyDictionary()
_CACHE_LOCK = threading.Lock()


def _cached(ws: Workspace, kind: str, key, make):
    """``make()``'s value for (``kind``, ``key``) in ``ws``'s cache: the samples, pools and queues
    live as long as their workspace (a closed workspace takes them with it)."""
    with _CACHE_LOCK:
        found = _CACHE.setdefault(ws, {}).setdefault(kind, {}).get(key)
    if found is None:
        found = make()
        with _CACHE_LOCK:
            per_kind = _CACHE.setdefault(ws, {}).setdefault(kind, {})
            if len(per_kind) >= 16:  # a few depths, samples and judges at a time
                per_kind.pop(next(iter(per_kind)))
            found = per_kind.setdefault(key, found)
    return found


def pool_runs(ws: Workspace, k: int, query_ids: list[str] | None = None) -> dict[str, Run]:
    """Every system on show's top ``k`` for the queries (default: all of the data set's), each
    built-in system searched once per workspace, depth, systems on show and queries (dense and
    hybrid join once their index is built)."""
    systems = shown_systems(ws)
    ids = tuple(query_ids) if query_ids is not None else tuple(ws.dataset.queries)
    return _cached(ws, "pools", (k, systems, cache_key(ids=ids)), lambda: _pool_runs(ws, k, systems, ids))


def _pool_runs(ws: Workspace, k: int, systems: tuple[str, ...], query_ids) -> dict[str, Run]:
    queries = {q: ws.dataset.queries[q] for q in query_ids}
    split = ws.dataset.default_split()
    return {system: ws.search(system, queries, k, split) for system in systems}  # imported: [] where it did not run


def judging_sample(ws: Workspace, store: Store, method: str = "auto", size: int = DEFAULT_SIZE, seed: int = 0,
                   k: int = DEPTH, viewer: Viewer | None = None) -> Sample:
    """The queries to judge (``retrieval.judging.sampling``: every query, or a random, frequency-weighted or
    disagreement-stratified sample, or the queries predicted to fail first, by the predictions of the query
    table, ``ui.difficulty``): the one stored with the corpus, else drawn and stored."""
    method = sampling.default_method(ws.dataset) if method in (None, "", "auto") else method
    try:
        size = max(1, numbers.whole(size or DEFAULT_SIZE, "the sample size"))
        seed = sampling.check_seed(seed)

        def disagreements_of(ids: list[str]) -> dict[str, float]:
            runs = pool_runs(ws, k, ids)
            return {q: disagreement(runs, q, k) for q in ids}

        predicted = difficulty(ws, store, viewer) if method == "predicted" else None  # computed only if drawn
        return _cached(ws, "samples", (method, size, seed, k, viewer.filter if viewer is not None else None,
                                       predicted.key if predicted is not None else None),
                       lambda: sampling.sample_for(store, ws.dataset, method, size, seed, disagreements_of, viewer,
                                                   predicted))
    except (TypeError, ValueError, OverflowError) as err:
        raise refuse(err) from err


def aim_choices(ws: Workspace) -> list[tuple[str, str]]:
    """What the judging can aim at: every pair of the systems on show (""), or one pair ("a|b")."""
    systems = shown_systems(ws)
    return [("every pair of the systems on show", "")] + [
        (f"{label(a)} vs {label(b)}", f"{a}|{b}") for i, a in enumerate(systems) for b in systems[i + 1:]]


def aimed_pair(ws: Workspace, aim: str | None) -> tuple[str, str] | None:
    """The pair of systems ``aim`` names ("a|b", both on show), None for every pair; anything else
    is refused."""
    if not aim:
        return None
    pair = tuple(str(aim).split("|"))
    if len(pair) != 2 or pair[0] == pair[1] or not set(pair) <= set(shown_systems(ws)):
        raise refuse(f"no pair of systems on show called {str(aim)[:80]!r}")
    return pair


def judging_queue(ws: Workspace, store: Store, judge: str, k: int = DEPTH, method: str = "auto",
                  size: int = DEFAULT_SIZE, seed: int = 0, fresh: bool = False, aim: str | None = None,
                  viewer: Viewer | None = None, regrade: bool = False) -> Queue:
    """The judge's queue over the sampled queries (``judging_sample``): their own grades count as
    judged; the next pair is the one expected to move the comparisons of the systems on show most
    (``retrieval.judging.order``), or of the one pair ``aim`` names. Built once per judge, depth,
    sample and aim, then kept up to date grade by grade (``grade_pair``): ``fresh`` rebuilds it from
    the store (starting to judge). A judge's name or a depth out of range
    (``judgments.store_judge``: one that looks like another judge's is refused too, and on a shared
    deployment one another session made, ``viewer``: ``retrieval.judging.judge_owners``; ``check_depth``) is refused.
    The pairs other judges graded are re-graded one in ``judgments.AGREEMENT_EVERY``, for agreement, or
    every one with ``regrade`` (a second opinion on each)."""
    regrade = bool(regrade)
    try:
        (judge, whose), k = judge_key(store, ws.dataset.corpus_hash, judge, viewer), check_depth(k)  # whose: its key
    except ValueError as err:
        raise refuse(err) from err
    sample = judging_sample(ws, store, method, size, seed, k, viewer)
    interest = aimed_pair(ws, aim)
    systems = shown_systems(ws)
    # a workspace is shared by sessions: the queue is the judge's (its key) as the viewer sees the others' grades
    key = (whose, viewer.filter if viewer is not None else None, k, sample.id, interest, regrade)
    carried = (ws.dataset.corpus_hash, ws.encoder.name, ws.bm25_settings, *key)

    def judged() -> dict:
        return judged_pairs(judgments_to_qrels(seen.judgments(store, ws.dataset, viewer, judge)))

    def others() -> dict:  # the pairs the other judges this session counts graded: covered, re-graded for agreement
        rows = [r for r in seen.judgments(store, ws.dataset, viewer) if r["judge"] != judge]
        return judged_pairs(merged_qrels(rows)) if rows else {}

    def build() -> Queue:
        before = None if fresh else _carried(carried, ws, sample.query_ids, systems)
        if before is not None:  # the same judging in the session's previous workspace (a run imported since)
            before.sync(judged())
            before.sync_others(others())
            return before
        return queue(pool_runs(ws, k, sample.query_ids), sample.query_ids, judged(), k,
                     sample=sample, interest=[interest] if interest else None, others=others(), regrade=regrade)

    if fresh:
        with _CACHE_LOCK:
            _CACHE.setdefault(ws, {}).setdefault("queues", {}).pop(key, None)
    q = _cached(ws, "queues", key, build)
    missing = tuple(s for s in systems if s not in q.systems)
    if missing:  # a system joined the ones on show (its index built): its pool joins the queue
        ids = tuple(sample.query_ids)
        q.add_runs(_cached(ws, "pools", (k, missing, cache_key(ids=ids)), lambda: _pool_runs(ws, k, missing, ids)))
    with _CACHE_LOCK:
        _LATEST[carried] = q
    return q


_LATEST: weakref.WeakValueDictionary[tuple, Queue] = weakref.WeakValueDictionary()  # the last queue per judging


def _carried(carried: tuple, ws: Workspace, query_ids, systems: tuple[str, ...]) -> Queue | None:
    """The queue of the same judging (corpus, encoder, judge, depth, sample, aim) made in another
    workspace, when its systems are among this one's and its queries are this one's: a run imported,
    or the judgments applied, opens another workspace, and the judging goes on where it was."""
    with _CACHE_LOCK:
        q = _LATEST.get(carried)
    if q is None or not set(q.systems) <= set(systems) or not all(qid in ws.dataset.queries for qid in query_ids):
        return None
    return q


@dataclass
class Shown:
    """What the view shows of a position in the queue (also the JSON of /judge_queue and /judge)."""

    position: int | None
    query_id: str | None
    doc_id: str | None
    judged: int
    pooled: int
    grade: int | None


def joined_note(q: Queue) -> str:
    """One line while the pairs of systems that joined the queue late go first ("Learned sparse
    joined: its 84 unjudged top-10 documents come first, with the rest of the judged queries' pools"),
    else ""."""
    joined = q.joined
    if joined is None:
        return ""
    names = " and ".join(label(s) for s in joined.systems)
    its = "its" if len(joined.systems) == 1 else "their"
    if not joined.first:
        return (f" — {esc(names)} joined the pool ({joined.pairs:,} unjudged top-{joined.k} documents); the judging "
                "stays aimed at the pair chosen.")
    left = q.joined_left()
    if not left:
        return ""
    they = "it is" if len(joined.systems) == 1 else "they are"
    return (f" — {esc(names)} joined: {its} {left:,} unjudged top-{joined.k} documents come first, with the rest of "
            f"the judged queries' pools, aimed at the comparisons {they} in.")


def show(ws: Workspace, q: Queue, position: int | None, reveal: bool = False) -> tuple[str, str, dict]:
    """Progress line, the pair's HTML and its JSON for ``position`` (None: all judged)."""
    progress = f"**Judged {q.judged_count} of {q.pooled_count} pooled pairs**"
    left = q.uncovered
    if left != q.pooled_count - q.judged_count:  # other judges graded some: what is left for anyone
        progress += f" ({left:,} that no judge has graded yet)"
    queries = len(q.disagreement)
    if left:  # the one count the queue brings down by one with every grade it serves (a system joining adds)
        progress += (f" — judge {left:,} more for exact success@{q.k} and P@{q.k} on all {queries:,} "
                     f"{'query' if queries == 1 else 'queries'} being judged")
    progress += joined_note(q)
    total = len(ws.dataset.queries)
    if q.sample is not None and q.sample.in_order:
        progress += (f" — the {q.sample.size:,} of the {total:,} queries predicted to fail first, hardest first "
                     "(kept with the corpus)")
    elif q.sample is not None and q.sample.method != "all":
        progress += (f" — from a {q.sample.method} sample of {q.sample.size:,} of the {total:,} queries "
                     f"(seed {q.sample.seed}; kept with the corpus)")
    if position is None:
        return progress + " — every pooled pair is judged.", "", Shown(None, None, None, q.judged_count,
                                                                          q.pooled_count, None).__dict__
    qid, doc_id = q.pairs[position]
    doc, query = ws.dataset.docs[doc_id], ws.dataset.queries[qid]
    grade = q.grade(position)
    terms = set(ws.tokenizer(query))
    by = ("<p class='judge-by'>retrieved by: " + ", ".join(f"{esc(label(s))} #{r}" for s, r in
                                                         q.retrieved_by(position).items()) + "</p>") if reveal else ""
    now = f" · graded {grade} ({GRADE_NAMES[grade]})" if grade is not None else ""
    adds = q.adds((qid, doc_id))
    now += (" · adds agreement: another judge graded this pair, your grade measures how far judges agree"
            if adds == "agreement" else " · adds coverage: no judge has graded this pair")
    pair_html = (f"<div class='judge-pair'><p class='judge-query'>Query <code>{esc(qid)}</code>: "
                 f"<b>{esc(query)}</b></p><h3>{esc(doc.title or doc_id)}</h3>"
                 f"<p class='judge-doc'>{highlight(doc.text, ws.tokenizer, terms, limit=2000)}</p>"
                 f"<p class='judge-meta'>{esc(doc_id)} · pair {position + 1} of {q.pooled_count}{now}</p>"
                 f"{by}</div>")
    return (f"{progress} · systems disagree on this query: {q.disagreement[qid]:.2f} (1 − mean RBO)",
            pair_html, Shown(position, qid, doc_id, q.judged_count, q.pooled_count, grade).__dict__)


def grade_pair(ws: Workspace, store: Store, judge: str, query_id: str, doc_id: str, grade, k: int = DEPTH,
               method: str = "auto", size: int = DEFAULT_SIZE, seed: int = 0,
               aim: str | None = None, viewer: Viewer | None = None, regrade: bool = False) -> tuple[Queue, int | None]:
    """Store the judge's grade of the pair now (0, 1 or 2: ``judgments.parse_grade``), note it in the
    judge's queue (never rebuilt per grade) and give the queue and the next unjudged position;
    anything else is refused and nothing is stored. On a shared deployment the judge's name becomes
    ``viewer``'s with its first grade, in that grade's write, and another's published judge is refused
    (``retrieval.judging.judge_owners``)."""
    if not (judge or "").strip():
        raise refuse("type your name as the judge first")
    try:
        judge = store_judge(store, ws.dataset.corpus_hash, judge, viewer)
        grade, k = parse_grade(grade), check_depth(k)
    except ValueError as err:
        raise refuse(err) from err
    if not isinstance(query_id, str) or not isinstance(doc_id, str) \
            or query_id not in ws.dataset.queries or doc_id not in ws.dataset.docs:
        shown = tuple(str(v)[:80] for v in (query_id, doc_id))
        raise refuse(f"no pair {shown!r} in this data set")
    try:  # the name is claimed in the grade's own write: a refused grade claims nothing
        store.put_judgments(ws.dataset.corpus_hash, [(query_id, ws.dataset.queries[query_id], doc_id, grade, judge)],
                            claim=judge_owners.claim(viewer, [judge]))
    except ValueError as err:
        raise refuse(err) from err
    q = judging_queue(ws, store, judge, k, method, size, seed, aim=aim, viewer=viewer, regrade=regrade)
    q.record(query_id, doc_id, grade)
    try:
        after = q.position(query_id, doc_id)
    except KeyError:  # graded through the API outside the pool: start from the top
        after = -1
    return q, q.next_unjudged(after)


def export_qrels(ws: Workspace, store: Store, fmt: str, with_data_labels: bool = False, rule: str = "median",
                 viewer: Viewer | None = None) -> str:
    """Every judge's judgments ``viewer`` counts as a qrels file, a pair graded by several merged by ``rule``
    (``judgments.MERGE_RULES``: the lower median by default; or one judge's grades alone), merged
    with the data set's own labels when asked (those win a pair both have)."""
    try:
        judged = merged_qrels(seen.judgments(store, ws.dataset, viewer), rule or "median")
    except ValueError as err:
        raise refuse(err) from err
    if not judged:
        raise refuse("nothing judged yet")
    if with_data_labels:
        for qrels in ws.dataset.qrels.values():
            judged = merge_labels(qrels, judged)
    if fmt in judgment_files.FORMATS:  # every judge's own grades, one a row: nothing merged
        path = export_folder() / file_name(ws.dataset.name, "judgments", suffix=f".{fmt}")
        return str(judgment_files.write(seen.judgments(store, ws.dataset, viewer), path, fmt))
    target = export_folder() / file_name(ws.dataset.name, "judged", rule or "median",
                                         suffix=".qrels" if fmt == "trec" else "")
    try:
        return str(write_qrels(judged, target, fmt=fmt, split="judged"))
    except ValueError as err:  # an unknown format, an id no qrels file can hold
        raise refuse(err) from err


def import_judgments(ws: Workspace, store: Store, path: str | None, judge: str = "",
                     viewer: Viewer | None = None) -> str:
    """The judgments of an uploaded CSV/TSV (``retrieval.data.readers.judgment_files``: RankScope's own
    export, a spreadsheet's, Quepid's) added to the corpus's, each with its judge (``judge`` for a
    file without a judge column); a row that cannot be mapped is refused with its line, and then
    nothing is stored; so is, on a shared deployment, a judge another session made (``viewer``:
    ``retrieval.judging.judge_owners``). Says how many were new, changed a grade, or were stored already."""
    if not path:
        raise refuse("upload a CSV or TSV of judgments first")

    def work() -> str:  # read, checked and staged at background priority: other sessions' searches go first
        try:
            found = judgment_files.read(path, ws.dataset, (judge or "").strip() or "imported",
                                        display=Path(path).name, existing=store.judges(ws.dataset.corpus_hash, viewer))
        except (DataError, ValueError) as err:
            raise refuse(err) from err
        try:  # staged outside the store's lock: other sessions' searches and views go on meanwhile
            staging.check_count(len(found), Path(path).name)
            stored = store.put_judgments(ws.dataset.corpus_hash,  # the names claimed in the write that copies them
                                         ((j.query_id, j.query_text, j.doc_id, j.grade, j.judge) for j in found),
                                         source=Path(path).name,
                                         claim=judge_owners.claim(viewer, {j.judge for j in found}))
        except ValueError as err:
            raise refuse(err) from err
        judges = sorted({j.judge for j in found})
        read = len(found)
        staging.release(found)
        return (f"Read {read:,} judgments by {', '.join(esc(j) for j in judges)}: {stored.new:,} new, "
                f"{stored.changed:,} changed a grade, {stored.unchanged:,} unchanged (stored already).")

    return staging.in_background(work)


FEW_TO_PROJECT = 5  # judged queries below which no projection of the judging still needed is made


def settled_note(ws: Workspace, store: Store, k: int = DEPTH, method: str = "auto", size: int = DEFAULT_SIZE,
                 seed: int = 0, aim: str | None = None, viewer: Viewer | None = None) -> str:
    """Which comparisons of the systems on show the judgments so far settle (nDCG@10 over the judged
    queries of the sample, every judge's grades merged by the lower median), and about how many more
    judgments the others need (``retrieval.judging.settled_comparisons``); the pair ``aim`` names first. Run after every
    grade, so computed on at most ``settled_comparisons.MAX_QUERIES`` judged queries
    (``settled_comparisons.capped``, only their judgments read), which it says when it cuts."""
    try:
        k = check_depth(k)
    except ValueError as err:
        raise refuse(err) from err
    aimed = {label(s) for s in aimed_pair(ws, aim) or ()}
    sample = judging_sample(ws, store, method, size, seed, k, viewer)
    ids = set(sample.query_ids)
    judged_ids = [q for q in seen.judged_query_ids(store, ws.dataset, viewer) if q in ids]  # the judges viewer counts
    compared = settling.capped(judged_ids)
    judged = {q: docs for q, docs in merged_qrels(seen.judgments(store, ws.dataset, viewer, query_ids=compared)).items()
              if q in ids}
    beyond = 0  # the judged queries the cap leaves out with a relevant document, about: the projection counts them
    if len(compared) < len(judged_ids):
        relevant = sum(any(g > 0 for g in docs.values()) for docs in judged.values())
        beyond = round((len(judged_ids) - len(compared)) * relevant / max(1, len(judged)))
    runs = {label(s): run for s, run in pool_runs(ws, k, sample.query_ids).items()}
    # judged@10 reads each system's top 10, nDCG'@10 its condensed top CONDENSED_DEPTH, as in Evaluate
    tens = {label(s): run for s, run in pool_runs(ws, max(k, CONDENSED_DEPTH), sample.query_ids).items()}
    metric = success_name(min(k, COVERAGE_DEPTH))  # fixed by the pool, gated at its depth: never a verdict on nDCG
    rows = sorted(standings(runs, judged, metric, coverage_runs=tens, beyond=beyond),
                  key=lambda r: {r.a, r.b} != aimed)  # stable: the aimed pair first
    if len(runs) < 2:
        waiting = ", ".join(label(s) for s in ws.pending(ws.shown_systems))
        return (f"Only {esc(', '.join(runs)) or 'no system'} on show so far: a comparison needs two systems"
                + (f" ({esc(waiting)} join once the corpus is encoded)." if waiting else "."))
    if not rows:
        return "No comparison can be made yet: judge until some query has a relevant document."
    on = queries_counted(judged_counts(judged))
    if len(compared) < len(judged_ids):
        on += (f" — a fixed random {len(compared):,} of the sample's {len(judged_ids):,} judged queries: this list "
               f"compares at most {settling.MAX_QUERIES:,}, so it stays quick after every grade; Evaluate compares on "
               "every one —")
    else:
        on += " of the sample"
    head = (f"**Which comparisons are settled** ({metric_name(metric)} — a relevant document in the top "
            f"{min(k, COVERAGE_DEPTH)} — on {on}, nothing relevant found counted too, each system's top {k} pooled; "
            f"{gate_rule(min(k, COVERAGE_DEPTH))}):")
    lines = [head, ""]
    measured = {c.system: c for r in rows if r.verdict is not None for c in r.verdict.coverage if c is not None}
    coverage = {name: measured[name] for name in runs if name in measured}  # what the gate read, in table order
    left = len(ids) - len(judged_ids)  # the sample's queries not judged yet: what more judging can still add
    for r in rows:
        line = conclusion(r.a, r.b, r.comparison)
        few = r.comparison.queries < FEW_TO_PROJECT
        if r.blocked:
            lines.append(f"- **no verdict yet:** {esc(r.b)} and {esc(r.a)} — {esc(shortfall_text(r.verdict))}"
                         + (f"; and {esc(line)}" if r.comparison.queries < 2 else ""))
        elif r.settled:
            lines.append(f"- **settled:** {esc(line)}")
        elif few:
            lines.append(f"- **open:** {esc(line)} — too few judged queries to tell how many more it needs")
        elif r.more_queries is None:
            lines.append(f"- **open:** {esc(line)} — out of reach so far: the two score alike on these queries")
        elif r.more_queries == 0:  # the judged queries the cap left out may be enough
            lines.append(f"- **open:** {esc(line)} — on these {r.comparison.queries:,} queries; the "
                         f"{len(judged_ids):,} judged may be enough if the difference holds: Evaluate compares on "
                         "every one")
        elif r.more_queries > left:
            lines.append(f"- **open:** {esc(line)} — it would take about {r.more_queries:,} more judged queries if "
                         f"the difference holds, more than the {left:,} left in the sample: a larger sample, or "
                         "the two are too close to tell apart")
        else:
            lines.append(f"- **open:** {esc(line)} — about {r.more_judgments:,} more judgments (≈ {r.more_queries:,} "
                         "queries) if the difference holds")
    depth = min(k, COVERAGE_DEPTH)
    lines += ["", f"Judged@{depth} (the share of each system's top {depth} on these queries that has a grade; "
                  "unjudged documents count as not relevant): "
              + ", ".join(f"{esc(name)} {c.judged:.0%} {_percent(c.interval)}" for name, c in coverage.items())]
    return "\n".join(lines)


def _percent(iv) -> str:
    """A share's 95% interval in percent, "[35%, 47%]" ("" when undefined: one query)."""
    return f"[{iv.low:.0%}, {iv.high:.0%}]" if iv.low == iv.low else ""


def agreement_note(ws: Workspace, store: Store, viewer: Viewer | None = None) -> tuple[str, dict]:
    """How far the judges agree, as Markdown (α over all, κ per pair with its interval, each pair's
    confusion matrix), and the export's merge rules (the judges' names among them)."""
    result = agreement(seen.judgments(store, ws.dataset, viewer))
    rules = gr.update(choices=[*MERGE_RULES, *result.judges])
    if len(result.judges) < 2:
        return (f"{len(result.judges)} judge so far: agreement needs a second judge grading some of the same "
                "pairs.", rules)
    alpha = (f"{result.alpha:.3f} {interval_text(result.alpha_interval)}" if result.alpha == result.alpha
             else "— (no pair graded by two judges with some spread yet)")
    lines = [f"**Krippendorff's α (ordinal)** over the {result.items:,} pairs two or more judges graded: {alpha}. "
             "1 is perfect agreement, 0 what chance gives; below about 0.67 the labels are not yet a safe basis "
             "for a verdict (Krippendorff).", "",
             "| judges | pairs both graded | weighted κ [95%] | same grade |", "|---|---:|---:|---:|"]
    for pa in result.pairs:
        kappa = f"{pa.kappa:.3f} {interval_text(pa.interval)}" if pa.kappa == pa.kappa else "—"
        lines.append(f"| {esc(pa.judge_a)} / {esc(pa.judge_b)} | {pa.shared:,} | {kappa} | {pa.exact:.0%} |")
    for pa in result.pairs:
        lines += ["", f"{esc(pa.judge_a)} (rows) against {esc(pa.judge_b)} (columns):", "",
                  "| | 0 | 1 | 2 |", "|---|---:|---:|---:|"]
        lines += [f"| **{g}** | " + " | ".join(str(c) for c in row) + " |" for g, row in enumerate(pa.confusion)]
    listed = "them" if len(result.adjudicate) <= DISAGREEMENTS_SHOWN else f"the first {DISAGREEMENTS_SHOWN:,}"
    lines += ["", f"{len(result.adjudicate):,} pair(s) graded differently: the table below lists {listed}, the "
                  "widest spread of grades first — adjudicate those first."]
    return "\n".join(lines), rules


DISAGREEMENTS_SHOWN = 1_000  # rows of the table of pairs to adjudicate (the widest spread first)


def disagreement_rows(ws: Workspace, store: Store, viewer: Viewer | None = None) -> list[list]:
    """The pairs judges graded differently, the widest spread first: the first ``DISAGREEMENTS_SHOWN``."""
    return [[q, ws.dataset.queries.get(q, "")[:60], d, ", ".join(f"{j}: {g}" for j, g in by.items())]
            for q, d, by in disagreements(seen.judgments(store, ws.dataset, viewer))[:DISAGREEMENTS_SHOWN]]


def publish_judge(store: Store, ws: Workspace, judge: str | None, viewer: Viewer) -> str:
    """Make the session's judge ``judge`` count in every session's views (a shared deployment's
    Publish: ``retrieval.judging.judge_owners``); the status line. Refused in one line, nothing changed: off
    a shared deployment (every judge counts for everyone already), no name, a judge this session
    has not graded under, another's, one published already."""
    if not viewer.shared:
        raise refuse("every judge's grades count for everyone on this deployment already: nothing to publish")
    if not (judge or "").strip():
        raise refuse("type the judge's name to publish first")
    try:
        name = check_judge(judge)
        judge_owners.publish(store, ws.dataset.corpus_hash, name, viewer)
    except (KeyError, ValueError) as err:
        raise refuse(err) from err
    return (f"✅ Published the judge {esc(name)}: its grades now count in every session's views (Judge, Evaluate, "
            "Runs, Failures, the labels applied). Only this session grades under the name.")


def _key_action(ws: Workspace, store: Store, judge: str, shown_: dict, action: str, k: int, method: str, size: int,
                seed: int, aim: str, viewer: Viewer, regrade: bool = False) -> tuple[Queue, int | None]:
    """What a key or button of the judging panel does to the pair on show (``shown_``): a grade (``action``
    "0", "1" or "2") stored, or skip, previous or next; returns the queue and the position to show."""
    if action in ("0", "1", "2"):
        return grade_pair(ws, store, judge, shown_["query_id"], shown_["doc_id"], int(action), k, method, size, seed,
                          aim, viewer, regrade)
    q = judging_queue(ws, store, judge, k, method, size, seed, aim=aim, viewer=viewer, regrade=regrade)
    here = shown_["position"]
    return q, (q.next_unjudged(here) if action == "skip" else q.step(here, action == "next"))


@dataclass
class JudgeView:
    prefer: gr.Radio  # which label wins a pair both the data and a judgment label (wired by the shell)
    aim: gr.Dropdown | None = None  # the pairs of systems on show (refreshed by the shell when a system joins)
    grades: list = field(default_factory=list)  # the events that store grades: the shell's views follow them
    difficulty: DifficultyTable | None = None  # the query table (a click on a row opens it in Search: the shell)


def build(ctx: Context) -> JudgeView:
    gr.Markdown(texts.JUDGE_HELP)
    with gr.Row():
        judge = gr.Textbox(label="Judge (your name)", elem_id="judge-name", scale=2)
        depth = gr.Number(DEPTH, label="Pool depth (each system's top k)", precision=0, minimum=1, maximum=MAX_DEPTH,
                          scale=1)
        reveal = gr.Checkbox(False, label="Show which systems retrieved it", elem_id="judge-reveal", scale=1)
        regrade = gr.Checkbox(False, label="Re-grade the pairs other judges graded (else one in "
                                           f"{AGREEMENT_EVERY}, for agreement)", elem_id="judge-regrade", scale=1)
        aim = gr.Dropdown([("every pair of the systems on show", "")], value="", elem_id="judge-aim", scale=2,
                          label="Aim the judging at (the next pair is the one expected to settle these most)")
        start = gr.Button("Start judging", variant="primary", elem_id="judge-start", scale=1)
    if ctx.registry.shared:
        gr.Markdown(texts.JUDGES_SHARED)
    with gr.Row(visible=ctx.registry.shared):
        publish_btn = gr.Button("Publish this judge's grades to every session", elem_id="publish-judge", scale=1)
        publish_status = gr.Markdown(elem_id="judge-publish-status")
    with gr.Accordion("Which queries (a sample when there are many)", open=False):
        gr.Markdown(texts.SAMPLE_HELP)
        with gr.Row():
            method = gr.Radio([("automatic", "auto"), *((texts.SAMPLE_METHODS[m], m) for m in sampling.METHODS)],
                              value="auto", label="Queries to judge", elem_id="judge-method", scale=3)
            size = gr.Number(DEFAULT_SIZE, label="Sample size", precision=0, minimum=1, elem_id="judge-size", scale=1)
            seed = gr.Number(0, label="Seed", precision=0, elem_id="judge-seed", scale=1)
    by_difficulty = difficulty_table(ctx, "judge")
    progress = gr.Markdown(elem_id="judge-progress")
    pair = gr.HTML(elem_id="judge-panel", js_on_load=KEYS_JS)
    settled = gr.Markdown(elem_id="judge-settled")
    with gr.Row():
        grades = [gr.Button(f"{g} · {GRADE_NAMES[g]}", elem_id=f"judge-{g}", variant="primary" if g else "secondary")
                  for g in (0, 1, 2)]
        skip = gr.Button("Skip (s)", elem_id="judge-skip")
        prev_btn = gr.Button("← Previous", elem_id="judge-prev")
        next_btn = gr.Button("Next →", elem_id="judge-next")
    with gr.Row():
        prefer = gr.Radio([("the data's own labels", "imported"), ("my judgments", "judgments")], value="imported",
                          label="Every grade is a label in every view at once; where the data's own labels and a "
                                "grade label one pair, keep", elem_id="judge-prefer", scale=2)
    shown = gr.JSON(visible=False)
    with gr.Row(visible=False):  # the /judge endpoint's inputs: any pair by id, for scripts
        api_query, api_doc = gr.Textbox(label="query id"), gr.Textbox(label="document id")
        api_grade, api_go = gr.Textbox(label="grade (0, 1 or 2)"), gr.Button("judge")  # checked, not rounded
    with gr.Accordion("Export the judgments; judges who disagree", open=False):
        with gr.Row():
            agree_btn = gr.Button("How far do the judges agree?", elem_id="judge-agreement-button", scale=1)
        agreement_md = gr.Markdown(elem_id="judge-agreement")
        with gr.Row():
            fmt = gr.Radio([*QRELS_FORMATS, *judgment_files.FORMATS], value="trec", elem_id="judge-format",
                           label="Format (TREC qrels or BEIR judged.tsv, merged by the rule; CSV or TSV: every "
                                 "judge's grades)")
            rule = gr.Dropdown(list(MERGE_RULES), value="median", elem_id="judge-rule",
                               label="A pair several judges graded: lower median, majority, min, max, or one judge's")
            with_data = gr.Checkbox(False, label="Merge with the data set's own labels (they win a pair both have)")
            export_btn = gr.Button("Export qrels", elem_id="export-qrels")
        export_file = gr.File(label="Qrels", elem_id="qrels-file")
        with gr.Row():
            import_file = gr.File(label="Import judgments: CSV/TSV with query, document, grade (and judge) columns, "
                                        "or Quepid's exports", elem_id="judgments-upload", scale=3)
            import_btn = gr.Button("Import", elem_id="judgments-import", scale=1)
        import_status = gr.Markdown(elem_id="judgments-import-status")
        disagree = table(["query", "text", "document", "grades"], elem_id="judge-disagreements")

    def render(key, q: Queue, position, reveal_):
        return show(ctx.workspace(key), q, position, bool(reveal_))

    def viewer(request: gr.Request | None) -> Viewer:
        """The session's viewer: whose judge names it may grade under, whose grades its views count."""
        return ctx.registry.viewer(session_of(request))

    def on_start(judge_, k, reveal_, key, method_="auto", size_=DEFAULT_SIZE, seed_=0, aim_="", regrade_=False,
                 request: gr.Request | None = None):
        if not (judge_ or "").strip():
            raise refuse("type your name as the judge first")
        q = judging_queue(ctx.workspace(key), ctx.registry.store, judge_, k, method_, size_, seed_, fresh=True,
                          aim=aim_, viewer=viewer(request), regrade=regrade_)
        return render(key, q, q.next_unjudged(), reveal_)

    def on_key(judge_, k, reveal_, shown_, key, method_, size_, seed_, aim_, regrade_, evt: gr.EventData,
               request: gr.Request):
        """A grade (0/1/2), skip, previous or next: one event for all of them, so a key pressed
        again before the pair on screen has changed is dropped, never applied to that pair."""
        if not shown_ or shown_.get("position") is None:
            raise refuse("start judging first")
        ws = ctx.workspace(key)
        pressed = (getattr(evt.target, "elem_id", None) or "").removeprefix("judge-")
        q, to = _key_action(ws, ctx.registry.store, judge_, shown_, pressed, k,
                            method_, size_, seed_, aim_, viewer(request), regrade_)
        return render(key, q, to, reveal_)

    def on_api_judge(judge_, query_id, doc_id, grade, k, reveal_, key, method_="auto", size_=DEFAULT_SIZE, seed_=0,
                     aim_="", regrade_=False, request: gr.Request | None = None):
        q, nxt = grade_pair(ctx.workspace(key), ctx.registry.store, judge_, query_id, doc_id, grade, k, method_, size_,
                            seed_, aim_, viewer(request), regrade_)
        return render(key, q, nxt, reveal_)

    # the re-grade choice reaches the handlers as the session's state: the named endpoints keep their inputs
    regrading = gr.State(False)
    regrade.change(lambda on: bool(on), regrade, regrading, api_visibility="private", **LIGHT)
    inputs = [judge, depth, reveal, shown, ctx.key, method, size, seed, aim, regrading]
    outputs = [progress, pair, shown]
    def on_settled(k, key, method_, size_, seed_, aim_="", request: gr.Request | None = None):
        return settled_note(ctx.workspace(key), ctx.registry.store, k, method_, size_, seed_, aim_, viewer(request))

    def on_disagreements(key, request: gr.Request):
        return disagreement_rows(ctx.workspace(key), ctx.registry.store, viewer(request))

    def on_agreement(key, request: gr.Request):
        return agreement_note(ctx.workspace(key), ctx.registry.store, viewer(request))

    def on_export(fmt_, with_, rule_, key, request: gr.Request):
        return export_qrels(ctx.workspace(key), ctx.registry.store, fmt_, with_, rule_, viewer(request))

    def on_import(path, judge_, key, request: gr.Request):
        return import_judgments(ctx.workspace(key), ctx.registry.store, path, judge_, viewer(request))

    def on_publish(judge_, key, request: gr.Request):
        return publish_judge(ctx.registry.store, ctx.workspace(key), judge_, viewer(request))

    settle_inputs = [depth, ctx.key, method, size, seed, aim]
    start.click(on_start, [judge, depth, reveal, ctx.key, method, size, seed, aim, regrading], outputs,
                api_name="judge_queue",
                **LIGHT).then(on_settled, settle_inputs, settled, api_name="settled", **LIGHT).then(
        lambda key, aim_: gr.update(choices=aim_choices(ctx.workspace(key)), value=aim_), [ctx.key, aim], aim,
        api_visibility="private", **LIGHT).then(
        on_disagreements, ctx.key, disagree, api_visibility="private", **LIGHT)
    graded = gr.on([b.click for b in (*grades, skip, prev_btn, next_btn)], on_key, inputs, outputs,
                   api_visibility="private", trigger_mode="once", **LIGHT)
    graded.then(on_settled, settle_inputs, settled, api_visibility="private", trigger_mode="always_last", **LIGHT)
    api_graded = api_go.click(on_api_judge, [judge, api_query, api_doc, api_grade, depth, reveal, ctx.key, method,
                                             size, seed, aim, regrading], outputs, api_name="judge", **LIGHT)
    agree_btn.click(on_agreement, ctx.key, [agreement_md, rule], api_name="agreement", **LIGHT).then(
        on_disagreements, ctx.key, disagree, api_visibility="private", **LIGHT)
    export_btn.click(on_export, [fmt, with_data, rule, ctx.key], export_file, api_name="export_qrels", **LIGHT).then(
        on_disagreements, ctx.key, disagree, api_visibility="private", **LIGHT)
    imported = import_btn.click(on_import, [import_file, judge, ctx.key], import_status, api_name="import_judgments",
                                **LIGHT)
    imported.then(on_disagreements, ctx.key, disagree, api_visibility="private", **LIGHT)
    published = publish_btn.click(on_publish, [judge, ctx.key], publish_status, api_name="publish_judge", **LIGHT)
    return JudgeView(prefer, aim, [graded, api_graded, imported, published], by_difficulty)
