"""Evaluate as a stakeholder reads it: one headline verdict at the top (with its interval, its
queries and judged@10), never one the comparisons or the judgments cannot carry; a table of the
chosen metrics that fits the page, each explained on hover; the formulas behind a toggle."""
from __future__ import annotations

import re
from html import unescape

import gradio as gr
import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval.evaluation.metric_tables import covered_comparisons, headline, metrics_table
from retrieval.evaluation.metrics import METRIC_NAMES
from retrieval.systems import BM25, DENSE, HYBRID, label
from retrieval.workspace import Workspace
from tests.retrieval.judging.test_coverage import judged_in_app, toy_ws  # noqa: F401  (the fixture)
from ui import evaluate as evaluate_view
from ui import knobs, texts
from ui.common import metrics_caption


@pytest.fixture(scope="module")
def demo_ws(demo, tiny_encoder, tmp_path_factory, demo_sparse_store):
    """The demo's workspace over the tiny encoder, on a copy of the store that holds the demo's SPLADE
    vectors already (the learned sparse system on show is read, not encoded again): the tests of the
    headline and the caption only read it."""
    from retrieval.store import Store
    from tests.conftest import store_copy

    store = Store(store_copy(demo_sparse_store, tmp_path_factory.mktemp("evaluate-view") / "store.sqlite3"))
    yield Workspace(demo, store, model=tiny_encoder)
    store.close()


@pytest.mark.slow
def test_the_headline_follows_the_comparisons_of_the_best_system(demo_ws):
    ws = demo_ws
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
def test_the_caption_opens_in_words_and_the_formula_is_behind_the_toggle(demo_ws):
    ws = demo_ws
    caption = unescape(metrics_caption(ws, "test"))
    assert "BM25max" not in caption and "λ·BM25" not in caption
    assert "The hybrid adds dense's score to BM25's, weighted by λ" in caption or "BM25 alone" in caption
    formulas = unescape(evaluate_view.summary(ws, "test", [])[2])
    assert "λ·BM25" in formulas or "BM25 alone" in formulas


# ---- the systems' settings: knobs from the declarations, the session's values, /system_settings -------------


def test_the_knobs_are_every_registered_systems_declared_parameters():
    """One knob per declared parameter of every registered system, RM3's three among them, each saying
    its range and its default; a system registered for a while gets its knobs without an edit in ui/."""
    from retrieval.systems import builtin, keys, register, unregister
    from retrieval.systems.declared import INT, Parameter
    from retrieval.systems.ql import QueryLikelihood

    assert knobs.declared() == [(k, p) for k in keys() for p in builtin(k).parameters]
    assert [p.name for k, p in knobs.declared() if k == "rm3"] == ["fb_docs", "fb_terms", "original_query_weight"]
    fb_terms = dict((p.name, p) for k, p in knobs.declared() if k == "rm3")["fb_terms"]
    assert "an integer from 1 to 1000" in knobs.info(fb_terms) and "default 10" in knobs.info(fb_terms)

    class Probe(QueryLikelihood):
        key, label, short = "probe_knob", "Probe", "probe"
        parameters = (Parameter("depth", INT, 3, "how deep", low=1, high=9),)

    register(Probe())
    try:
        assert ("probe_knob", Probe.parameters[0]) in knobs.declared()
        assert knobs.from_json('{"probe_knob": {"depth": 4}}') == {"probe_knob": {"depth": 4}}
    finally:
        unregister("probe_knob")


@pytest.mark.parametrize("sent, words", [
    ('{"rm3": {"fb_terms": 1000000000}}', "RM3's fb_terms is an integer from 1 to 1000, not 1000000000"),
    ('{"rm3": {"fb_terms": 99999999999999999999999}}', "RM3's fb_terms"),
    ('{"ql": {"mu": NaN}}', "QL's mu nan is not a finite number"),
    ('{"rm3": {"original_query_weight": 1e999}}', "RM3's original_query_weight inf is not a finite number"),
    ('{"rm3": {"original_query_weight": 1.5}}', "RM3's original_query_weight is a number from 0 to 1, not 1.5"),
    ('{"ql": {"mu": 0}}', "QL's mu is a number above 0, not 0"),
    ('{"bm25": {"method": "<b>x</b>"}}', "BM25's method is one of lucene, robertson, atire"),
    ('{"rm3": {"fb_terms": true}}', "RM3's fb_terms"),
    ('{"dense": {"k": 1}}', "no registered system with parameters is called 'dense'"),
    ('{"rm3": {"expansion": 5}}', "RM3 has no parameter 'expansion'"),
    ('{"rm3": 5}', "RM3's settings are an object of parameter values"),
    ('[1, 2]', "the system settings are an object of systems"),
    ("<img src=x>", "the system settings are not JSON"),
    ("[" * 100_000, "at most 10,000 characters"),
])
def test_system_settings_refuse_bad_values_in_one_line(sent, words):
    with pytest.raises(ValueError) as err:
        knobs.from_json(sent)
    message = str(err.value)
    assert words in message and "\n" not in message and len(message) < 300


@given(st.integers(1, 1000), st.floats(0, 1, allow_nan=False))
def test_system_settings_read_back_what_the_declarations_write(fb_terms, weight):
    """A value written as the declarations write it (``declared.written``) reads back as itself, a
    default left out (the state holds what differs from the defaults only)."""
    from retrieval.systems.declared import written

    declared = {p.name: p for k, p in knobs.declared() if k == "rm3"}
    sent = {"fb_terms": written(declared["fb_terms"], fb_terms),
            "original_query_weight": written(declared["original_query_weight"], weight)}
    expected = {n: v for n, v in (("fb_terms", fb_terms), ("original_query_weight", weight))
                if v != declared[n].default}
    assert knobs.read({"rm3": sent}) == ({"rm3": expected} if expected else {})


def test_the_settings_apply_only_what_differs_from_the_workspaces_own(toy_dataset, store):
    ws = Workspace(toy_dataset, store)
    assert knobs.applied(ws, {}) is ws and knobs.applied(ws, {"rm3": {"fb_terms": 10}}) is ws  # the default
    other = knobs.applied(ws, {"rm3": {"fb_terms": 3}})
    assert other is not ws and other.settings_of("rm3")["fb_terms"] == 3 and ws.settings_of("rm3")["fb_terms"] == 10
    assert other.system("rm3").params(other, "test") != ws.system("rm3").params(ws, "test")  # cached apart
    assert other.bm25_settings == ws.bm25_settings  # RM3's settings leave BM25 (and its index) as they were
    with pytest.raises(gr.Error) as err:
        knobs.applied(ws, {"rm3": {"fb_terms": 0}})
    assert unescape(err.value.message) == "RM3's fb_terms is an integer from 1 to 1000, not 0"


def test_a_declared_system_not_shown_by_default_is_in_every_systems_picker(toy_dataset, store):
    """RM3 (registered, not shown by default) is offered wherever systems are picked, from the registry."""
    from ui import failures, search

    ws = Workspace(toy_dataset, store)
    assert "rm3" not in ws.shown_systems
    rm3 = (label("rm3"), "rm3")
    assert rm3 in search.system_choices(ws)  # Search's columns
    assert rm3 in failures.pair_choices(ws)  # Failures' pair
    assert "rm3" in evaluate_view.on_request(ws)  # Evaluate's extras


@pytest.fixture(scope="module")
def settings_app(tiny_model_dir, tmp_path_factory, demo_sparse_store):
    import app as rankscope_app
    from tests.conftest import DEMO, store_copy

    store = store_copy(demo_sparse_store, tmp_path_factory.mktemp("settings-store") / "store.sqlite3")
    demo, registry = rankscope_app.create(DEMO, model=str(tiny_model_dir), store_path=str(store))
    demo.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=None, quiet=True,
                        **rankscope_app.launch_kwargs(registry.store))
    yield demo
    demo.close()


@pytest.mark.slow
@pytest.mark.server
def test_rm3s_figures_follow_its_settings_and_one_sessions_settings_never_reach_another(settings_app):
    from gradio_client.exceptions import AppError

    from tests.helpers import app_client

    ana, bo = (app_client(settings_app.local_url) for _ in range(2))

    def rm3_row(client) -> list:
        _, table, _ = client.predict("test", ["rm3"], api_name="/evaluate")
        return next(r for r in table["data"] if r[0] == label("rm3"))

    default = rm3_row(ana)
    note = ana.predict('{"rm3": {"fb_terms": 1, "original_query_weight": 0.2}}', api_name="/system_settings")
    assert "fb_terms 1 (default 10)" in re.sub(r"<[^>]+>", "", unescape(note))
    changed = rm3_row(ana)
    assert changed[1:] != default[1:]  # RM3's figures moved with its feedback settings
    assert rm3_row(bo) == default  # another session evaluates with the defaults still
    for sent in ('{"rm3": {"fb_terms": 1000000000}}', '{"ql": {"mu": NaN}}', '{"nope": {"x": 1}}'):
        with pytest.raises(AppError) as err:
            ana.predict(sent, api_name="/system_settings")
        assert "\n" not in str(err.value) and len(str(err.value)) < 300
    assert rm3_row(ana) == changed  # a refused request changed nothing
    ana.predict("{}", api_name="/system_settings")
    assert rm3_row(ana) == default  # back to the defaults, from the same cache
