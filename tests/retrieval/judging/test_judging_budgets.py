"""The Judge tab's views stay within their budgets after a large import: ``/agreement``'s bootstraps
cost the same for any number of pairs (and give the krippendorff package's α, and the intervals of
resampling the pairs themselves), ``/settled`` reads and compares at most ``settled_comparisons.MAX_QUERIES``
judged queries, and says so when it cuts."""
from __future__ import annotations

import html
import random
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.evaluation.intervals import percentile_interval
from retrieval.judging import settled_comparisons as settling
from retrieval.judging.agreement import agreement, alpha_from_patterns


def rows_of(matrix: list[list[int | None]]) -> list[dict]:
    """Judgment rows from a judges × items matrix of grades (None: not graded)."""
    return [{"query_id": f"q{i // 4}", "doc_id": f"d{i}", "judge": f"j{j}", "grade": g, "query_text": "", "time": 0.0}
            for j, grades in enumerate(matrix) for i, g in enumerate(grades) if g is not None]


def as_array(matrix) -> np.ndarray:
    return np.array([[np.nan if g is None else g for g in row] for row in matrix], dtype=np.float64)


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 4).flatmap(lambda judges: st.lists(
    st.lists(st.one_of(st.none(), st.sampled_from([0, 1, 2])), min_size=judges, max_size=judges),
    min_size=1, max_size=30)))
def test_alpha_is_the_krippendorff_packages_for_any_grades(items):
    import krippendorff

    matrix = [list(col) for col in zip(*items)]  # judges × items
    got = agreement(rows_of(matrix))
    data = as_array(matrix)
    multi = data[:, (~np.isnan(data)).sum(axis=0) >= 2]
    values = multi[~np.isnan(multi)]
    assert got.items == multi.shape[1]
    if multi.shape[1] == 0 or len(np.unique(values)) < 2:
        assert np.isnan(got.alpha)
    else:
        want = krippendorff.alpha(reliability_data=multi, level_of_measurement="ordinal", value_domain=[0, 1, 2])
        assert got.alpha == pytest.approx(want, abs=1e-9)


def test_the_bootstraps_give_the_intervals_of_resampling_the_pairs_themselves():
    import krippendorff

    rng = np.random.default_rng(1)
    first = rng.choice(3, 300, p=[0.6, 0.3, 0.1])
    matrix = [list(first)] + [list(np.where(rng.random(300) < 0.7, first, rng.integers(0, 3, 300)))
                              for _ in range(2)]
    got = agreement(rows_of([[int(g) for g in row] for row in matrix]))
    data = as_array(matrix)
    resampled = [rng.integers(0, 300, 300) for _ in range(2_000)]
    alphas = [krippendorff.alpha(reliability_data=data[:, i], level_of_measurement="ordinal", value_domain=[0, 1, 2])
              for i in resampled]
    direct = percentile_interval(alphas)
    assert got.alpha_interval.low == pytest.approx(direct.low, abs=0.015)
    assert got.alpha_interval.high == pytest.approx(direct.high, abs=0.015)
    from sklearn.metrics import cohen_kappa_score

    a, b = data[0].astype(int), data[1].astype(int)
    kappas = [cohen_kappa_score(a[i], b[i], weights="quadratic", labels=[0, 1, 2]) for i in resampled[:1_000]]
    pair = got.pairs[0]
    assert pair.interval.low == pytest.approx(np.percentile(kappas, 2.5), abs=0.015)
    assert pair.interval.high == pytest.approx(np.percentile(kappas, 97.5), abs=0.015)


def test_alpha_from_patterns_weighs_patterns_as_repeated_items():
    patterns = np.array([[2, 0, 0], [1, 1, 0], [0, 1, 2]])
    once = alpha_from_patterns(np.repeat(patterns, [3, 1, 2], axis=0), np.ones(6))
    assert alpha_from_patterns(patterns, np.array([3, 1, 2])) == pytest.approx(once)
    both = alpha_from_patterns(patterns, np.array([[3, 1, 2], [1, 1, 1]]))  # several resamples at once
    assert both[0] == pytest.approx(once) and both[1] == pytest.approx(alpha_from_patterns(patterns, np.ones(3)))
    assert np.isnan(alpha_from_patterns(np.array([[2, 0, 0], [3, 0, 0]]), np.array([1, 1])))  # one grade: undefined


def test_agreement_after_a_200000_row_import_takes_a_second_not_a_minute():
    rng = random.Random(0)
    rows = []
    for i in range(66_667):  # three judges grade the same pairs, the others agreeing with the first on ~70%
        first = rng.choices((0, 1, 2), (6, 3, 1))[0]
        for j in range(3):
            grade = first if j == 0 or rng.random() < 0.7 else rng.randrange(3)
            rows.append({"query_id": f"q{i // 67}", "doc_id": f"d{i}", "judge": f"j{j}", "grade": grade,
                         "query_text": "", "time": 0.0})
    started = time.perf_counter()
    got = agreement(rows)
    assert time.perf_counter() - started < 5  # 22 s with the bootstraps that resampled the pairs
    assert got.items == 66_667 and got.alpha_interval.low < got.alpha < got.alpha_interval.high
    assert all(p.interval.low < p.kappa < p.interval.high for p in got.pairs)


def test_capped_is_a_fixed_subset_that_a_new_query_joins_only_in_its_turn():
    ids = [f"q{i}" for i in range(1_000)]
    first = settling.capped(ids, 100)
    assert len(first) == 100 and first == sorted(first) and set(first) <= set(ids)
    assert settling.capped(list(reversed(ids)), 100) == first  # the order given does not matter
    assert settling.capped(ids[:80], 100) == sorted(ids[:80]) == settling.capped(ids[:80])
    grown = settling.capped(ids + [f"new{i}" for i in range(100)], 100)
    assert len(set(grown) & set(first)) >= 80  # most stay: the newcomers take only the places their hash wins
    assert abs(sum(q.startswith("new") for q in grown) - 100 * 100 / 1_100) < 10


def test_the_projection_counts_the_judged_queries_the_cap_left_out():
    rng = random.Random(1)
    runs: dict[str, dict] = {"A": {}, "B": {}}
    judged = {}
    for i in range(12):  # every top 10 judged, one relevant document a query, B ranking it a little higher
        docs = [f"q{i}-d{j}" for j in range(10)]
        judged[f"q{i}"] = {d: 2 if j == 0 else 0 for j, d in enumerate(docs)}
        for system, lift in (("A", 0), ("B", 1)):
            order = rng.sample(docs, 10)
            at = max(0, order.index(docs[0]) - rng.randint(0, lift))
            order.remove(docs[0])
            order.insert(at, docs[0])
            runs[system][f"q{i}"] = [(d, 10.0 - r) for r, d in enumerate(order)]
    alone = settling.standings(runs, judged)[0]
    assert not alone.settled and not alone.blocked and alone.more_queries > 10
    more = alone.more_queries
    assert settling.standings(runs, judged, beyond=more - 3)[0].more_queries == 3
    left_out = settling.standings(runs, judged, beyond=more + 6)[0]
    assert left_out.more_queries == 0 and left_out.more_judgments == 0 and not left_out.settled  # may be enough


@pytest.fixture
def demo_ws(demo, store, tiny_encoder):
    from retrieval.systems import SPLADE
    from retrieval.workspace import Workspace

    ws = Workspace(demo, store, model=tiny_encoder)
    ws.pending = lambda names: [s for s in names if s == SPLADE]  # BM25, dense and hybrid on show
    return ws


def test_the_settled_list_reads_and_compares_at_most_the_cap_and_says_so(demo_ws, store, monkeypatch):
    from ui import judge

    ws = demo_ws
    queries = sorted(ws.dataset.queries)[:30]
    runs = judge.pool_runs(ws, 10, queries)
    grades = [(q, ws.dataset.queries[q], d, 2 if i == 0 else 0, judge_)
              for q in queries for judge_ in ("ann", "bob")
              for i, d in enumerate(dict.fromkeys(d for run in runs.values() for d, _ in run[q][:10]))]
    store.put_judgments(ws.dataset.corpus_hash, grades)
    read = []
    judgments = store.judgments
    monkeypatch.setattr(store, "judgments", lambda *a, **k: read.append(k.get("query_ids")) or judgments(*a, **k))

    whole = html.unescape(judge.settled_note(ws, store, 10))
    assert "30 judged queries" in whole and "of the sample" in whole and "fixed random" not in whole
    monkeypatch.setattr(settling, "MAX_QUERIES", 12)
    read.clear()
    cut = html.unescape(judge.settled_note(ws, store, 10))
    assert "12 judged queries" in cut
    assert ("a fixed random 12 of the sample's 30 judged queries: this list compares at most 12, so it stays quick "
            "after every grade; Evaluate compares on every one") in cut
    assert len(read) == 1 and len(read[0]) == 12 and set(read[0]) <= set(queries)  # only theirs read
    assert html.unescape(judge.settled_note(ws, store, 10)) == cut  # the same subset grade after grade
