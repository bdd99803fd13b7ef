"""Evaluate as a stakeholder reads it: one headline verdict at the top (with its interval, its
queries and judged@10), never one the comparisons or the judgments cannot carry; a table of the
chosen metrics that fits the page, each explained on hover; the formulas behind a toggle."""
from __future__ import annotations

import re
from html import unescape

import pytest

from retrieval.evaluation.metric_tables import covered_comparisons, headline, metrics_table
from retrieval.evaluation.metrics import METRIC_NAMES
from retrieval.systems import BM25, DENSE, HYBRID, label
from retrieval.workspace import Workspace
from tests.retrieval.judging.test_coverage import judged_in_app, toy_ws  # noqa: F401  (the fixture)
from ui import evaluate as evaluate_view
from ui import texts
from ui.common import metrics_caption


@pytest.mark.slow
def test_the_headline_follows_the_comparisons_of_the_best_system(demo, tiny_encoder, store):
    ws = Workspace(demo, store, model=tiny_encoder)
    systems = (BM25, DENSE, HYBRID)
    rows = metrics_table(ws, "test", systems)
    compared = covered_comparisons(ws, "test", systems)[0]
    h = headline(rows, compared)
    best = max(rows, key=lambda r: r["metrics"]["ndcg@10"])["label"]
    assert h.best == best
    mine = [c for c in compared if best in (c["a"], c["b"])]
    if all(c["comparison"].outcome != "open" for c in mine):
        assert h.state == "best"
    else:  # a rival it is not separable from: never called the best
        assert h.state == "open" and h.against["comparison"].outcome == "open"
    headline_md, glance, formulas = evaluate_view.summary(ws, "test", [])
    words = unescape(headline_md)
    if h.state == "open":
        assert words.startswith("**No single best system yet on test:**") and "not separable" in words
    else:
        assert f"**{best} is the best system on test:**" in words
    assert re.search(r"\[-?\d\.\d{3}, -?\d\.\d{3}\]", words) and "queries" in words and "p " in words
    # the glance: the chosen columns only, each header explained on hover, every system a row
    page = unescape(glance)
    heads = re.findall(r'<th title="([^"]*)">([^<]*) <span', page)
    assert [name for _, name in heads] == [METRIC_NAMES[m] for m in texts.AT_A_GLANCE]
    assert all(title == unescape(texts.METRIC_HELP[m]) for (title, _), m in zip(heads, texts.AT_A_GLANCE))
    assert all(f">{label(s)}<" in page for s in systems)
    assert "pnr" not in page.lower()  # behind "All metrics", with its explanation in the formulas
    assert "can be above 1" in unescape(formulas) and "every shift the same test does not reject" in unescape(formulas)


def test_no_best_system_on_judgments_that_do_not_cover_it(toy_ws, store, tiny_encoder):  # noqa: F811
    """Labels judged in the app on BM25's top 3 only: dense was never pooled, so the headline says
    how many pairs are left to judge for exact figures, with the ranges the pool allows — not who is best."""
    ds = judged_in_app(toy_ws.dataset, store, toy_ws)
    ws = Workspace(ds, store, model=tiny_encoder)
    headline_md, glance, _ = evaluate_view.summary(ws, "test", [])
    words = unescape(headline_md)
    assert re.match(r"\*\*Provisional on test — judge \d+ more\*\* \(the unjudged top-\d+ documents", words), words
    assert "is the best system" not in words and "nDCG" not in words  # the judged pool's word, in ranges
    assert "n/m" in unescape(glance)  # recall@100 reads deeper than the top-3 pool
    # the figures say no more than the table: no Δ and p for the pair held back, no recall past the pool
    scatter, curves, _ = evaluate_view.plots(ws, "test", [])
    title = unescape(scatter.layout.title.text)
    assert "no verdict: not enough of" in title and " wins, " not in title and "p = " not in title
    depth = metrics_table(ws, "test", (BM25, DENSE))[0]["pool_depth"]
    assert all(max(trace.x) <= max(depth, 1) for trace in curves.data)
    assert "not measurable" in curves.layout.title.text


@pytest.mark.slow
def test_the_caption_opens_in_words_and_the_formula_is_behind_the_toggle(demo, tiny_encoder, store):
    ws = Workspace(demo, store, model=tiny_encoder)
    caption = unescape(metrics_caption(ws, "test"))
    assert "BM25max" not in caption and "λ·BM25" not in caption
    assert "The hybrid adds dense's score to BM25's, weighted by λ" in caption or "BM25 alone" in caption
    formulas = unescape(evaluate_view.summary(ws, "test", [])[2])
    assert "λ·BM25" in formulas or "BM25 alone" in formulas
