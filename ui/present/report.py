"""The failure gallery as HTML: card fragments for the app, and one self-contained report file.

``gallery_html`` writes a single document a stakeholder can open offline: the stylesheet inline,
the systems' metrics with their 95% intervals and what they let one conclude (``Summary``), the
counts table (each category's share of the queries with its interval), the plotly figures with
plotly.js inlined once (the first figure carries it, ``include_plotlyjs=True``; the others reuse
it), then the cards of every category. Nothing points outside the file: no ``<script src>``, no
``<link href>``, no web fonts. Every text from the data (queries, titles, documents, terms, ids,
system, data set and split names) goes through ``escape.text``.

The fragments use classes prefixed ``rs-`` (the stylesheet is ``gallery.css`` beside this module,
``GALLERY_CSS``), so the app can show the same cards under its own CSS; each card carries
``data-query-id`` and ``data-category`` so a click can open the Search view on its query.
"""
from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go

from retrieval.evaluation.failure_gallery import FailureCard, Gallery
from retrieval.evaluation.failure_rules import Thresholds, rank_text
from retrieval.evaluation.intervals import proportion_interval
from retrieval.systems import SPLADE, short
from ui.present.escape import text as _e
from ui.present.figures import counts_figure
from ui.present.score_why import dense_why_html, full_text, split_html
from ui.present.search import typed_contributions, typed_terms
from ui.present.vocabulary import category_label, describe

SNIPPET_CHARS = 280
TERM_SPANS = {"query term": '<span class="rs-term">',  # a system's term of each kind (``TermKind``)
              "query expansion": '<span class="rs-term rs-term-query-expansion" title="query expansion: not in '
                                 'the query, added to it">',
              "document expansion": '<span class="rs-term rs-term-expansion" title="document expansion: not in the '
                                    'document, added by the model">'}
PLOTLY_CONFIG = {"displaylogo": False}
GALLERY_CSS = Path(__file__).with_name("gallery.css").read_text(encoding="utf-8")


@dataclass
class Summary:
    """The report's systems section: the metrics table's cells (``metric_tables.table_cells``) and the
    comparisons in words (``metric_tables.conclusion_lines``), with a note on how they were computed."""

    headers: list[str]
    rows: list[list[str]]
    conclusions: list[str]
    segments: dict | None = None  # ``metric_tables.segment_cells``: {"headers", "data"}
    note: str = ""
    coverage: str = ""  # each system's judged@10 beside the verdicts (``metric_tables.coverage_line``)



def _label_html(label: int | None, pooled: bool = False) -> str:
    """The card's label; ``pooled``: the query was judged in the app, so no label means nobody judged it."""
    if label is None and pooled:
        return '<span class="rs-label rs-label-unjudged">unjudged: judge it before calling it a failure</span>'
    if label is None:
        return '<span class="rs-label rs-label-unjudged">unjudged</span>'
    if label > 0:
        return f'<span class="rs-label rs-label-relevant">relevant ({label})</span>'
    return f'<span class="rs-label rs-label-judged0">judged not relevant ({label})</span>'


def _ranks_html(ranks: dict[str, int | None]) -> str:
    head = "".join(f"<th>{_e(short(s))}</th>" for s in ranks)
    cells = "".join(f"<td>{_e(rank_text(r))}</td>" for r in ranks.values())
    return f'<table class="rs-ranks"><tr>{head}</tr><tr>{cells}</tr></table>'


def _terms_html(card: FailureCard) -> str:
    if not card.missing_terms:
        return '<p class="rs-terms">Every query term occurs in the document.</p>'
    terms = "".join(f'<span class="rs-term rs-term-missing" title="{_e(" + ".join(stems))}">{_e(word)}</span>'
                    for word, stems in typed_terms(card.missing_terms, card.term_words))
    return f'<p class="rs-terms">Missing query terms: {terms}</p>'


def _bm25_html(card: FailureCard) -> str:
    """Per-term BM25 contributions as bars scaled to the largest one."""
    contributions = typed_contributions(card.bm25_terms, card.term_words)  # by the query word typed ("can't")
    if not contributions:
        return '<p class="rs-terms">No query term matches: BM25 score 0.</p>'
    largest = max(s for _, _, s in contributions) or 1.0
    rows = "".join(
        f'<li><span class="rs-term" title="{_e(" + ".join(terms))}">{_e(word)}</span>'
        f'<span class="rs-bar"><span class="rs-bar-fill" style="width:{100 * s / largest:.1f}%"></span></span>'
        f'<span class="rs-val">{s:.2f}</span></li>'
        for word, terms, s in contributions)
    total = sum(s for _, s in card.bm25_terms)
    return f'<p class="rs-terms">BM25 {total:.2f} =</p><ul class="rs-bm25">{rows}</ul>'


def _similarity_html(card: FailureCard) -> str:
    text = f"Dense similarity {card.dense_similarity:.3f}"
    if card.tuned_similarity is not None:
        text += f" → fine-tuned {card.tuned_similarity:.3f}"
    return f'<p class="rs-sim">{_e(text)}</p>'


def _sparse_html(card: FailureCard) -> str:
    """Learned sparse's terms for the document, each marked by its kind (a document expansion: its text lacks it)."""
    if not card.sparse_terms:
        return ""
    terms = " · ".join(TERM_SPANS[t.kind] + f"{_e(t.term)}</span> {t.score:.2f}" for t in card.sparse_terms)
    return f'<p class="rs-terms">{_e(short(SPLADE))} terms: {terms}</p>'


def card_html(card: FailureCard, pair: tuple[str, str] | None = None, pooled: bool = False) -> str:
    """One card as an HTML fragment (``rs-`` classes; ``data-query-id`` opens the Search view)."""
    snippet = textwrap.shorten(card.text, SNIPPET_CHARS, placeholder=" …")
    unjudged = pooled or card.category == "unjudged_at_top"
    return (
        f'<article class="rs-card" data-query-id="{_e(card.query_id)}" data-category="{_e(card.category)}" '
        f'data-doc-id="{_e(card.doc_id)}" title="Open this query in the Search view">'
        f'<div class="rs-card-head"><span class="rs-cat">{_e(category_label(card.category, pair))}</span>'
        f'<span class="rs-headline">{_e(card.headline)}</span></div>'
        f'<p class="rs-query">“{_e(card.query)}”<span class="rs-qid">{_e(card.query_id)}</span></p>'
        f'<div class="rs-doc"><span class="rs-title">{_e(card.title or card.doc_id)}</span>'
        f'<span class="rs-docid">{_e(card.doc_id)}</span>{_label_html(card.label, unjudged)}'
        f'<p class="rs-snippet">{_e(snippet)}</p></div>'
        f"{_ranks_html(card.ranks)}{_terms_html(card)}{_bm25_html(card)}{_similarity_html(card)}{_sparse_html(card)}"
        f"{_why_html(card)}</article>")


def _why_html(card: FailureCard) -> str:
    """What carries the document's dense score (query words, best passage) and the CLEAR hybrid's split of its own."""
    cls = "rs-terms rs-why"
    dense = dense_why_html(card.dense_why, full_text(card.doc_id, card.title, card.text), cls) if card.dense_why else ""
    return dense + (split_html(card.hybrid_why, card.term_words, cls) if card.hybrid_why else "")


def _counts_table(gallery: Gallery, thresholds: Thresholds) -> str:
    n = len(gallery.query_categories)

    def share(k: int) -> str:
        b = proportion_interval(k, n)
        return f"{k / n:.1%} [{b.low:.1%}, {b.high:.1%}]" if n and b.defined else "—"

    rows = "".join(
        f'<tr><td><a href="#rs-cat-{_e(c)}">{_e(category_label(c, gallery.pair))}</a></td>'
        f'<td class="rs-count">{gallery.counts[c]}</td><td class="rs-count">{share(gallery.counts[c])}</td>'
        f"<td>{_e(describe(c, thresholds, gallery.pair))}</td></tr>"
        for c in gallery.categories)
    return (f'<table class="rs-counts"><thead><tr><th>category</th><th>queries</th>'
            f"<th>share of the {n} [95% interval]</th><th>definition</th></tr></thead><tbody>{rows}</tbody></table>")


def _summary_html(summary: Summary | None) -> str:
    """The systems' metrics with their intervals, and what they let one conclude."""
    if summary is None:
        return ""
    head = "".join(f"<th>{_e(h)}</th>" for h in summary.headers)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in summary.rows)
    lines = "".join(f"<li>{_e(line)}</li>" for line in summary.conclusions)
    segments = ""
    if summary.segments and summary.segments["data"]:
        shead = "".join(f"<th>{_e(h)}</th>" for h in summary.segments["headers"])
        sbody = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>"
                        for row in summary.segments["data"])
        segments = (f"<h3>By kind of query (nDCG&#64;10; where one system is significantly worse first)</h3>"
                    f'<table class="rs-counts rs-segments"><thead><tr>{shead}</tr></thead>'
                    f"<tbody>{sbody}</tbody></table>")
    return (f'<section class="rs-summary" id="rs-summary"><h2>Systems</h2><p class="rs-meta">{_e(summary.note)}</p>'
            f'<table class="rs-counts"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
            f"{f'<ul class=rs-conclusions>{lines}</ul>' if lines else ''}"
            f"{f'<p class=rs-meta id=rs-coverage>{_e(summary.coverage)}</p>' if summary.coverage else ''}"
            f"{segments}</section>")


def _figures_html(figures: Sequence[go.Figure]) -> str:
    """The figures, plotly.js inlined with the first one only."""
    parts = (fig.to_html(full_html=False, include_plotlyjs=i == 0, config=PLOTLY_CONFIG)
             for i, fig in enumerate(figures))
    return "".join(f'<div class="rs-figure">{part}</div>' for part in parts)


def _category_html(gallery: Gallery, category: str) -> str:
    cards = gallery.cards.get(category, [])
    count = gallery.counts[category]
    pooled = set(gallery.pooled)  # queries judged in the app: no label there means unjudged
    if not cards:
        body = '<p class="rs-empty">No query in this category.</p>'
    else:
        shown = f"showing the {len(cards)} most dramatic of {count}" if len(cards) < count else f"{count} queries"
        body = (f'<p class="rs-shown">{_e(shown)}, largest rank move first</p>'
                f'<div class="rs-cards">{"".join(card_html(c, gallery.pair, c.query_id in pooled) for c in cards)}'
                "</div>")
    return (f'<section class="rs-category" id="rs-cat-{_e(category)}" data-category="{_e(category)}">'
            f"<h2>{_e(category_label(category, gallery.pair))} ({count})</h2>{body}</section>")


def gallery_html(gallery: Gallery, figures: Sequence[go.Figure] = (), title: str | None = None,
                 counts: bool = True, summary: Summary | None = None, predicted: str = "") -> str:
    """The whole gallery as one self-contained HTML document (opens offline).

    ``counts``: put ``counts_figure`` first; ``figures``: more plotly figures after it (e.g. from
    ``figures``); ``predicted``: the section on the queries without labels predicted to fail, after the
    categories (``ui.present.predicted.section_html``, escaped there).
    """
    t = Thresholds(**gallery.thresholds)
    title = title or f"RankScope failure gallery — {gallery.dataset} ({gallery.split})"
    figs = ([counts_figure(gallery)] if counts else []) + list(figures)
    # the systems the cards give a rank for; with the tables, named as their rows are (``report_parts``
    # computes them for the same systems)
    named = [row[0] for row in summary.rows] if summary is not None else [short(s) for s in gallery.systems]
    systems = ", ".join(named)
    meta = (f"{gallery.dataset}, split {gallery.split}: {len(gallery.query_categories)} queries with a relevant "
            f"label analysed, {len(gallery.skipped)} without one skipped. Systems: {systems}; ranks searched to "
            f"depth {t.depth} ({rank_text(None)} = not retrieved). Relevant = label > 0; unjudged documents "
            "count as not relevant.")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{GALLERY_CSS}</style></head>"
        f'<body><main class="rs-gallery"><h1>{_e(title)}</h1><p class="rs-meta">{_e(meta)}</p>'
        f"{_summary_html(summary)}{_counts_table(gallery, t)}{_figures_html(figs)}"
        f'{"".join(_category_html(gallery, c) for c in gallery.categories)}{predicted}'
        "</main></body></html>\n")


def gallery_fragment(gallery: Gallery) -> str:
    """The counts table and every category's cards as an HTML fragment (for an app page; no plots,
    style with ``GALLERY_CSS``)."""
    t = Thresholds(**gallery.thresholds)
    return (f'<div class="rs-gallery">{_counts_table(gallery, t)}'
            f'{"".join(_category_html(gallery, c) for c in gallery.categories)}</div>')


def write_gallery(gallery: Gallery, path: str | Path, figures: Sequence[go.Figure] = (),
                  title: str | None = None, summary: Summary | None = None, predicted: str = "") -> Path:
    """Write ``gallery_html`` to ``path`` (UTF-8); returns the path."""
    return write_html(path, gallery_html(gallery, figures, title, summary=summary, predicted=predicted))


def write_html(path: str | Path, document: str) -> Path:
    """Write a report ``document`` to ``path`` (UTF-8), its folder made; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document, encoding="utf-8")
    return path
