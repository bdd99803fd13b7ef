"""The queries predicted to fail, as HTML: the query table of the Search and Judge views, and the failure
report's section for queries without labels.

Query performance prediction (``retrieval.qpp``) gives every query, labelled or not, each system's
predicted performance and a difficulty (1 − their mean: higher is more likely to fail). Without labels
nothing says which queries fail; the prediction says which are most likely to, so an analyst starts
there. The table lists the hardest (or the easiest) ``shown`` queries of the set with their text, the
difficulty, each system's prediction, the systems' disagreement (1 − mean RBO of their top lists) and
whether the query is labelled; a row carries ``data-query-id`` so a click opens the query in Search.
The report's section (``section_html``) lists the hardest queries with each system's top documents
(titles), so a stakeholder sees concrete likely failures without a label. Every text from the data
(ids, queries, titles, system names) goes through ``escape.text``; nothing is sent for the rows not
shown, so a query log of 10,000 queries sends the browser ``shown`` rows and a count.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from retrieval.systems import short
from ui.present.escape import text as _e

if TYPE_CHECKING:
    from retrieval import Workspace
    from retrieval.qpp.predict import Combination, Predictions, QueryPrediction

SHOWN = 200  # rows of the app's table (the hardest, or the easiest, of the set)
IN_REPORT = 20  # queries of the report's section, each with its systems' top documents
TOP = 3  # documents per system under each query of the report's section
ORDERS = ("hardest", "easiest")


def picked(predictions: Predictions, order: str = "hardest", n: int = SHOWN) -> list[QueryPrediction]:
    """The ``n`` hardest queries, hardest first (``order`` "hardest"), or the ``n`` easiest, easiest first."""
    if order not in ORDERS:
        raise ValueError(f"order the queries {' or '.join(ORDERS)} first, not {str(order)[:40]!r}")
    return predictions.hardest(n) if order == "hardest" else list(reversed(predictions.queries))[:max(0, n)]


def how_predicted(combinations: dict[str, Combination]) -> str:
    """One sentence: how each system's prediction was combined (label-free, or fitted on judged queries)."""
    fitted = {s: c for s, c in combinations.items() if c.how == "fitted"}
    if not fitted:
        return ("Each system's prediction is the label-free combination: every predictor's percentile within the "
                "query set, averaged with each family of evidence weighing once (1 = predicted easiest).")
    parts = ", ".join(f"{_e(short(s))} on {c.judged:,} judged queries ({c.folds} folds)" for s, c in fitted.items())
    return (f"Each system's prediction is its predicted nDCG@10, fitted on the judged queries (cross-fitted: a judged "
            f"query is predicted by a model that did not see it): {parts}"
            f"{'; the others are label-free' if len(fitted) < len(combinations) else ''}.")


def table_html(predictions: Predictions, labelled: set[str], order: str = "hardest", n: int = SHOWN,
               total: int | None = None) -> str:
    """The query table as an HTML fragment: a note (how many of how many, and how they were predicted),
    then one row per query, ``data-query-id`` on each (a click opens it in Search)."""
    rows = picked(predictions, order, n)
    total = len(predictions.queries) if total is None else total
    systems = predictions.systems
    head = ("<tr><th>query</th><th>text</th><th>difficulty</th>"
            + "".join(f"<th>{_e(short(s))}: predicted</th>" for s in systems)
            + "<th>disagreement</th><th>labelled</th></tr>")
    body = "".join(
        f'<tr data-query-id="{_e(q.query_id)}" title="Open this query in Search"><td><code>{_e(q.query_id)}</code>'
        f"</td><td>{_e(q.text)}</td><td class=rs-count>{q.difficulty:.2f}</td>"
        + "".join(f"<td class=rs-count>{q.predicted.get(s, float('nan')):.2f}</td>" for s in systems)
        + f"<td class=rs-count>{q.disagreement:.2f}</td><td>{'yes' if q.query_id in labelled else ''}</td></tr>"
        for q in rows)
    which = "hardest" if order == "hardest" else "easiest"
    shown = (f"the {len(rows):,} {which} of {total:,} queries" if len(rows) < total
             else f"all {total:,} {'query' if total == 1 else 'queries'}")
    note = (f'<p class="rs-meta">Predicted difficulty (1 − the systems\' mean predicted performance; higher is more '
            f"likely to fail), {which} first: {shown}. {how_predicted(predictions.combinations)} "
            "Click a query to search it.</p>")
    return (f'<div class="rs-predicted">{note}<table class="rs-counts rs-predicted-table"><thead>{head}</thead>'
            f"<tbody>{body}</tbody></table></div>")


@dataclass
class PredictedFailures:
    """The report's section: the hardest queries of those without labels, each system's top documents."""

    predictions: Predictions
    queries: list[QueryPrediction]  # the hardest, hardest first
    total: int  # queries predicted (those without labels)
    top: dict[str, dict[str, list[tuple[str, str]]]] = field(default_factory=dict)  # query -> system -> (doc, title)


def predicted_failures(ws: Workspace, predictions: Predictions, n: int = IN_REPORT, depth: int = TOP
                       ) -> PredictedFailures:
    """The ``n`` hardest queries of ``predictions`` with each system's top ``depth`` documents (id, title),
    searched now for those queries alone."""
    queries = predictions.hardest(n)
    asked = {q.query_id: q.text for q in queries}
    top: dict[str, dict[str, list[tuple[str, str]]]] = {q: {} for q in asked}
    for system in predictions.systems:
        run = ws.search(system, asked, depth) if asked else {}
        for qid in asked:
            top[qid][system] = [(doc, ws.dataset.docs[doc].title if doc in ws.dataset.docs else "")
                                for doc, _ in run.get(qid, [])[:depth]]
    return PredictedFailures(predictions, queries, len(predictions.queries), top)


def labelled_ids(ws: Workspace) -> set[str]:
    """The queries some split labels (the data's own labels, and the judgments the workspace counts)."""
    return {qid for qrels in ws.dataset.qrels.values() for qid in qrels}


def has_unlabelled(ws: Workspace, query_ids: Sequence[str] | None = None) -> bool:
    """Whether some query (of ``query_ids``, default every query of the data set) has no label."""
    labelled = labelled_ids(ws)
    return any(q not in labelled for q in (ws.dataset.queries if query_ids is None else query_ids))


def unlabelled(ws: Workspace, found: Predictions, n: int = IN_REPORT) -> PredictedFailures | None:
    """The report's section for the queries of ``found`` no split labels: the ``n`` hardest with their top
    documents (``predicted_failures``; predicted among every query of the set, as the query table is), None
    when every one is labelled."""
    labelled = labelled_ids(ws)
    kept = tuple(q for q in found.queries if q.query_id not in labelled)
    return predicted_failures(ws, replace(found, queries=kept), n) if kept else None


def _list_html(found: PredictedFailures, q: QueryPrediction, system: str) -> str:
    """One system's top documents for the query, under its prediction."""
    docs = found.top.get(q.query_id, {}).get(system, [])
    items = "".join(f'<li><span class="rs-title">{_e(title or doc)}</span> <span class="rs-docid">{_e(doc)}</span></li>'
                    for doc, title in docs)
    listed = f"<ol>{items}</ol>" if docs else '<p class="rs-empty">no document retrieved</p>'
    return (f'<div class="rs-predicted-list"><h4>{_e(short(system))} · predicted '
            f'{q.predicted.get(system, float("nan")):.2f}</h4>{listed}</div>')


def _query_html(found: PredictedFailures, q: QueryPrediction) -> str:
    lists = "".join(_list_html(found, q, s) for s in found.predictions.systems)
    return (f'<article class="rs-card rs-predicted-card" data-query-id="{_e(q.query_id)}">'
            f'<div class="rs-card-head"><span class="rs-cat">difficulty {q.difficulty:.2f}</span>'
            f'<span class="rs-headline">systems disagree {q.disagreement:.2f} (1 − mean RBO)</span></div>'
            f'<p class="rs-query">“{_e(q.text)}”<span class="rs-qid">{_e(q.query_id)}</span></p>'
            f'<div class="rs-predicted-lists">{lists}</div></article>')


def section_html(found: PredictedFailures, labelled: bool = False) -> str:
    """The report's section "Queries predicted to fail": what it is, then a card per query (hardest first)
    with each system's prediction and top documents. ``labelled``: the data set has labels (the section then
    covers its queries without one, below the labelled gallery)."""
    which = "queries without labels" if labelled else "queries"
    shown = (f"the {len(found.queries):,} hardest of {found.total:,} {which}" if len(found.queries) < found.total
             else f"all {found.total:,} {which}, hardest first")
    intro = (f"No label says which of these queries fail: query performance prediction says which are most likely "
             f"to — {shown}. Difficulty is 1 − the systems' mean predicted performance. "
             f"{how_predicted(found.predictions.combinations)} Under each query, each system's top "
             f"{TOP} documents: look there first, and judge them before calling a query a failure.")
    cards = "".join(_query_html(found, q) for q in found.queries)
    body = f'<div class="rs-cards">{cards}</div>' if cards else '<p class="rs-empty">No query to predict.</p>'
    return (f'<section class="rs-category rs-predicted" id="rs-predicted"><h2>Queries predicted to fail</h2>'
            f'<p class="rs-meta">{intro}</p>{body}</section>')


def report_html(found: PredictedFailures, dataset: str, css: str, title: str | None = None,
                summary: Sequence[str] = ()) -> str:
    """A self-contained report of the queries predicted to fail alone (a data set without labels): the
    stylesheet inline, nothing fetched."""
    title = title or f"RankScope: queries predicted to fail — {dataset}"
    systems = ", ".join(short(s) for s in found.predictions.systems)
    meta = (f"{dataset}: no relevance labels, {found.total:,} queries predicted. Systems: {systems}."
            + "".join(f" {line}" for line in summary))
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{css}</style></head>"
            f'<body><main class="rs-gallery"><h1>{_e(title)}</h1><p class="rs-meta">{_e(meta)}</p>'
            f"{section_html(found)}</main></body></html>\n")
