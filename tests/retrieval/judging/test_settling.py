"""While judging: which comparisons are settled, and how many more judgments the others need."""
from __future__ import annotations

import numpy as np

from retrieval.judging.settled_comparisons import standings


def runs_and_labels(n_queries: int, seed: int = 0):
    """Three systems over ``n_queries`` queries: ``good`` puts the relevant document first, ``bad``
    never retrieves it, ``close`` is ``good`` a rank lower on a few queries; each query's pool (every
    system's top 10, ten documents) judged, as judging in the app does."""
    rng = np.random.default_rng(seed)
    runs = {"good": {}, "bad": {}, "close": {}}
    judged = {}
    for i in range(n_queries):
        q = f"q{i}"
        others = [(f"d{i}-{j}", 1.0 - j / 20) for j in range(1, 10)]
        runs["good"][q] = [(f"rel{i}", 2.0), *others]
        runs["bad"][q] = others
        lower = [others[0], (f"rel{i}", others[0][1] - 0.001), *others[1:]]  # the relevant one second
        runs["close"][q] = lower if rng.random() < 0.3 else runs["good"][q]
        judged[q] = {f"rel{i}": 2, **{d: 0 for d, _ in others}}
    return runs, judged


def test_a_clear_difference_is_settled_and_a_small_one_gets_a_projection():
    runs, judged = runs_and_labels(30)
    rows = {(r.a, r.b): r for r in standings(runs, judged)}
    assert rows[("bad", "good")].settled and rows[("bad", "close")].settled
    few = {q: judged[q] for q in list(judged)[:8]}  # eight judged queries: the small difference is not settled
    listed = standings(runs, few)
    close = next(r for r in listed if (r.a, r.b) == ("close", "good"))
    assert not close.settled and close.comparison.delta > 0 and close.comparison.p_value >= 0.05
    assert close.more_queries > 0 and close.more_judgments == 10 * close.more_queries  # ten judgments a query
    assert [r.settled for r in listed] == sorted((r.settled for r in listed), reverse=True)  # settled first


def test_the_projection_holds_up_when_judging_goes_on():
    runs, judged = runs_and_labels(200, seed=1)
    small = {q: judged[q] for q in list(judged)[:15]}
    first = next(r for r in standings(runs, small) if {r.a, r.b} == {"close", "good"})
    if first.settled:  # a lucky start; nothing to project
        return
    later = next(r for r in standings(runs, judged) if {r.a, r.b} == {"close", "good"})
    assert later.settled or later.more_queries < first.more_queries


def test_systems_that_score_alike_are_out_of_reach_and_nothing_judged_compares_nothing():
    runs, judged = runs_and_labels(10)
    twin = {"good": runs["good"], "twin": runs["good"]}
    (row,) = standings(twin, judged)
    assert not row.settled and row.more_queries is None and row.more_judgments is None
    assert standings(runs, {"q0": {"d0-1": 0}}) == []  # no relevant document judged yet
