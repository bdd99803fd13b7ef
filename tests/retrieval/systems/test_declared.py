"""The declaration vocabulary (``retrieval.systems.declared``): a parameter's value is read by one
parser over the number grammar, written so that it reads back the same, held to its declared range
with a one-line refusal naming the system, the parameter, the value and the range; and every
registered system's declarations are truthful over a real workspace of the demo corpus (its
defaults in range, each parameter in its cache key and changing it, a citation, exact scores
exactly where it declares them)."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval import Workspace
from retrieval.systems import builtin, keys
from retrieval.systems.declared import (
    BOOL,
    CHOICE,
    FLOAT,
    INT,
    STR,
    TERM_KINDS,
    Capabilities,
    Parameter,
    keyed,
    parse,
    written,
)

BOUNDS = st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False))


@st.composite
def declared_numbers(draw):
    """A number parameter with any range (open or closed at either end), and a value the range holds."""
    kind = draw(st.sampled_from([INT, FLOAT]))
    low, high = draw(BOUNDS), draw(BOUNDS)
    if kind == INT:
        low, high = (None if v is None else float(math.floor(v)) for v in (low, high))
    if low is not None and high is not None and low > high:
        low, high = high, low
    low_open, high_open = draw(st.booleans()), draw(st.booleans())
    lo, hi = -1e7 if low is None else low, 1e7 if high is None else high
    lo_open, hi_open = low_open and low is not None, high_open and high is not None
    if kind == INT:
        least, most = math.ceil(lo) + lo_open, math.floor(hi) - hi_open
        if least > most:
            return None
        value: int | float = draw(st.integers(least, most))
    else:
        if (lo == hi and (lo_open or hi_open)) or (lo_open and hi_open and math.nextafter(lo, math.inf) >= hi):
            return None  # no float lies strictly between
        value = draw(st.floats(lo, hi, exclude_min=lo_open, exclude_max=hi_open, allow_nan=False,
                               allow_infinity=False))
    p = Parameter("x", kind, value, "a test parameter", low=low, high=high, low_open=low_open, high_open=high_open)
    return p if p.holds(value) else None


@settings(max_examples=300, deadline=None)
@given(declared_numbers())
def test_a_written_value_is_read_back_the_same(p):
    if p is None:
        return
    back = parse(p, written(p, p.default), "T")
    assert back == p.default and type(back) is type(p.default if p.kind == INT else float(p.default))


@settings(max_examples=300, deadline=None)
@given(declared_numbers(), st.floats(allow_nan=False, allow_infinity=False) | st.integers(-10**7, 10**7))
def test_a_value_outside_the_range_is_refused_in_one_line_naming_everything(p, value):
    if p is None or (p.kind == INT and isinstance(value, float)):
        return
    if p.holds(float(value)):
        assert parse(p, value, "T") == value
        return
    with pytest.raises(ValueError) as err:
        parse(p, written(p, value) if p.kind == FLOAT else str(value), "T")
    said = str(err.value)
    assert "\n" not in said and said.startswith("T's x is ") and p.range_text in said


@pytest.mark.parametrize("p, value, said", [
    (Parameter("b", FLOAT, 0.4, "", low=0, high=1), "7", "BM25's b is a number from 0 to 1, not '7'"),
    (Parameter("mu", FLOAT, 1000.0, "", low=0, low_open=True), 0, "BM25's mu is a number above 0, not 0"),
    (Parameter("n", INT, 3, "", low=1), "2.5", "BM25's n '2.5' is not an integer"),
    (Parameter("n", INT, 3, "", low=1), True, "BM25's n is bool, not an integer"),
    (Parameter("m", CHOICE, "a", "", choices=("a", "b")), "c", "BM25's m is one of a, b, not 'c'"),
    (Parameter("m", CHOICE, "a", "", choices=("a", "b")), 3, "BM25's m is one of a, b, not int 3"),
    (Parameter("f", BOOL, True, ""), "maybe", "BM25's f is true or false, not 'maybe'"),
    (Parameter("s", STR, "x", ""), "a\x1b[2Jb", "BM25's s is a text of printable characters"),
    (Parameter("k1", FLOAT, 0.9, "", low=0), "١", "U+0661 ARABIC-INDIC DIGIT ONE")])
def test_hostile_values_are_refused_by_the_one_parser(p, value, said):
    with pytest.raises(ValueError, match=None) as err:
        parse(p, value, "BM25")
    assert said in str(err.value) and "\n" not in str(err.value)


def test_a_declaration_is_checked_when_made():
    with pytest.raises(ValueError, match="kind"):
        Parameter("x", "complex", 0, "")
    with pytest.raises(ValueError, match="choices"):
        Parameter("x", CHOICE, "a", "")
    with pytest.raises(ValueError, match="range"):
        Parameter("x", STR, "a", "", low=0)
    with pytest.raises(ValueError, match="kinds"):
        Capabilities(True, frozenset({"stopword"}))


def test_the_cache_key_takes_every_declared_value_and_refuses_a_contradiction():
    assert keyed("ql", {"ql": {"smoothing": "dirichlet"}}, {"mu": 500.0}) == {"ql": {"smoothing": "dirichlet",
                                                                                      "mu": 500.0}}
    assert keyed("dense", {"model": "m"}, {}) == {"model": "m"}
    with pytest.raises(ValueError, match="mu"):
        keyed("ql", {"ql": {"mu": 1000.0}}, {"mu": 500.0})


# ---- every registered system, over a real workspace of the demo --------------------------------------

@pytest.fixture(scope="module")
def ws(demo, tiny_encoder):
    return Workspace(demo, None, model=tiny_encoder)


@pytest.mark.parametrize("key", keys())
def test_each_system_declares_itself_truthfully(ws, key):
    system = builtin(key)
    assert system is not None and system.citation is not None
    c = system.citation
    assert c.authors and c.title and c.venue and c.section and 1950 < c.year < 2100
    assert all(k in keys() and k != key for k in system.relations.based_on)
    assert bool(system.relations.based_on) == bool(system.relations.relation)
    assert system.capabilities.explanation is None or system.capabilities.explanation <= set(TERM_KINDS)
    names = [p.name for p in system.parameters]
    assert len(names) == len(set(names))
    for p in system.parameters:
        assert parse(p, p.default, system.short) == p.default and p.doc  # the default is in range
        assert parse(p, written(p, p.default), system.short) == p.default


def another(p: Parameter):
    """A value of ``p`` other than its default, in its range."""
    if p.kind == CHOICE:
        return next(c for c in p.choices if c != p.default)
    if p.kind == BOOL:
        return not p.default
    if p.kind == STR:
        return f"{p.default}x"
    value = p.default / 2 if p.default and p.holds(p.default / 2) else p.default + 1
    assert p.holds(value) and value != p.default
    return int(value) if p.kind == INT else float(value)


@pytest.mark.parametrize("key", [k for k in keys() if builtin(k).parameters])
def test_each_declared_parameter_is_in_the_cache_key_and_changes_it(ws, key):
    system = builtin(key)
    params = system.params(ws, "test")
    for p in system.parameters:
        assert params[key][p.name] == ws.settings_of(key)[p.name]
        other = another(p)
        changed = ws.with_settings({key: {p.name: other}})
        assert changed.settings_of(key)[p.name] == other and ws.settings_of(key)[p.name] == p.default
        assert system.params(changed, "test") != params, (key, p.name)


def test_changing_mu_and_k1_changes_what_ql_and_bm25_rank(ws):
    queries = dict(list(ws.dataset.split_queries("test").items())[:8])
    ql, bm25 = ws.search("ql", queries, 10), ws.search("bm25", queries, 10)
    other = ws.with_settings({"ql": {"mu": "50"}, "bm25": {"k1": 3}})
    assert ws.with_settings({}) is ws and other.settings_of("ql")["mu"] == 50.0
    assert other.search("ql", queries, 10) != ql and other.search("bm25", queries, 10) != bm25
    assert ws.search("ql", queries, 10) == ql  # the first workspace keeps its values and its lists


def test_a_workspace_refuses_an_unknown_system_or_parameter_or_value(demo):
    for values, said in [({"nosuch": {"x": 1}}, "unknown system 'nosuch'"), ({"ql": {"nu": 1}}, "no parameter 'nu'"),
                         ({"ql": {"mu": "-1"}}, "QL's mu is a number above 0, not '-1'")]:
        with pytest.raises(ValueError, match=None) as err:
            Workspace(demo, None, model="unused", settings=values)
        assert said in str(err.value)


@pytest.mark.parametrize("key", keys())
def test_exact_scores_are_declared_exactly_where_a_system_gives_them(ws, key):
    if builtin(key).needs.sparse:
        pytest.skip("the learned sparse systems' exact scores: "
                    "tests/retrieval/index/engines/test_engine_contract.py over the sparse store")
    system = builtin(key)
    queries = dict(list(ws.dataset.split_queries("test").items())[:2])
    run = system.search(ws, queries, 3, "test")
    rows = {q: [ws.doc_row[d] for d, _ in hits] for q, hits in run.items()}
    assert (system.exact_scores(ws, "test", rows, queries) is not None) == system.capabilities.exact_scores


@pytest.mark.parametrize("key", keys())
def test_a_score_is_explained_exactly_where_a_system_declares_it(ws, key):
    from retrieval.systems.base import Probe
    from retrieval.systems.dense_why import DenseWhy
    from retrieval.systems.hybrid_why import HybridWhy

    system = builtin(key)
    if system.needs.sparse:
        pytest.skip("the learned sparse systems explain terms, not a score: their index is the sparse store's")
    text = next(iter(ws.dataset.split_queries("test").values()))
    probe = Probe(ws, text, ws.depth)
    rows = [ws.doc_row[d] for d, _ in system.one(ws, probe, 3, "test")]
    whys = system.explain_score(ws, probe, rows, "test")
    declared = system.capabilities.explains_score
    assert (whys is not None) == (declared is not None)
    if whys is not None:
        assert set(whys) == set(rows)
        kind = {"dense": DenseWhy, "split": HybridWhy}[declared]
        assert all(isinstance(w, kind) for w in whys.values())


def test_a_score_explanation_is_one_of_the_declared_kinds():
    with pytest.raises(ValueError, match="one of dense, split, not 'words'"):
        Capabilities(exact_scores=True, explains_score="words")
