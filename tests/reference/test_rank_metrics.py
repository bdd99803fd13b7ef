"""The numpy ranked-list metrics (``retrieval.evaluation.rank_metrics``) against ranx 0.3.21 itself, on
arbitrary small runs and labels and on a real data set's labels."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.evaluation import rank_metrics
from retrieval.evaluation.measures import evaluate_run, positive_qrels
from retrieval.evaluation.metrics import METRICS
from tests.conftest import shared_dataset

FAMILY_METRICS = [f"{name}@{k}" for name in rank_metrics.FAMILIES for k in (1, 2, 3, 5, 10, 20)] + \
    list(rank_metrics.FAMILIES) + ["p@3", "p"]
ALL = list(dict.fromkeys([*METRICS, *FAMILY_METRICS]))
DOCS = [f"d{i}" for i in range(12)]
SCORES = st.one_of(st.sampled_from([0.0, 0.5, 1.0, 2.0]), st.floats(-10, 10, allow_nan=False))  # ties are likely


def assert_equal(ours: dict, theirs: dict) -> None:
    assert ours.keys() == theirs.keys()
    for m in ours:
        assert ours[m].keys() == theirs[m].keys(), m
        for q in ours[m]:
            assert ours[m][q] == pytest.approx(theirs[m][q], abs=1e-9), (m, q, ours[m][q], theirs[m][q])


@st.composite
def run_and_qrels(draw, max_len: int = 15, distinct: bool = False):
    """Up to 4 queries; each list up to ``max_len`` long (repeats allowed) or absent; labels 0/1/2
    (a query may have none relevant, or none at all; labelled documents need not be retrieved)."""
    run, qrels = {}, {}
    for i in range(draw(st.integers(1, 4))):
        q = f"q{i}"
        if draw(st.booleans()) or i == 0:
            qrels[q] = draw(st.dictionaries(st.sampled_from(DOCS), st.integers(0, 2), max_size=6))
        if draw(st.integers(0, 5)):
            if distinct:
                docs = draw(st.lists(st.sampled_from([f"x{j}" for j in range(80)] + DOCS), unique=True,
                                     max_size=max_len))
                order = draw(st.permutations(range(len(docs))))
                run[q] = [(d, float(s)) for d, s in zip(docs, order)]
            else:
                run[q] = draw(st.lists(st.tuples(st.sampled_from(DOCS), SCORES), max_size=max_len))
    return run, qrels


# ranx orders equal scores like a stable sort on lists of up to 15 documents (numba's quicksort
# falls back to insertion sort there): given each list in trec_eval's order, ties are exact against
# ranx up to that depth
@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run_and_qrels())
def test_equals_ranx_on_small_runs_with_ties(data):
    run, qrels = data
    labelled = {q: docs for q, docs in qrels.items() if docs}  # ranx cannot hold a query without labels
    in_trec_order = {q: trec_order(hits) for q, hits in run.items()}
    assert_equal(rank_metrics.scores(run, labelled, ALL), rank_metrics.ranx_scores(in_trec_order, labelled, ALL))


@pytest.mark.slow  # calls ranx itself: its numba kernels compile on a fresh install
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run_and_qrels(max_len=60, distinct=True))
def test_equals_ranx_on_longer_runs_without_ties(data):
    run, qrels = data
    labelled = {q: docs for q, docs in qrels.items() if docs}
    assert_equal(rank_metrics.scores(run, labelled, ALL), rank_metrics.ranx_scores(run, labelled, ALL))


@settings(max_examples=100, deadline=None)
@given(run_and_qrels())
def test_evaluate_run_keeps_its_contract(data):
    """Values over the queries with a relevant label only, 0 where the list is empty or absent."""
    run, qrels = data
    ev = evaluate_run(run, qrels, metrics=METRICS)
    evaluated = positive_qrels(qrels)
    for m in METRICS:
        assert ev.per_query.get(m, {}).keys() == evaluated.keys()
        for q in evaluated:
            if not run.get(q):
                assert ev.per_query[m][q] == 0.0


def test_equal_scores_past_15_go_by_document_id_descending():
    """20 documents of one score: trec_eval's order ranks them (strcmp, descending: d9 … d2, d19 … d10,
    d1, d0), whatever the list's order (ranx's quicksort leaves it open past 15)."""
    run = {"q": [(f"d{i}", 1.0) for i in range(20)]}
    qrels = {"q": {"d17": 2, "d3": 0, "gone": 1}}
    got = rank_metrics.scores(run, qrels, ["mrr@10", "mrr", "recall@10", "recall@20", "ndcg@20", "p@10", "map"])
    assert got["mrr@10"]["q"] == 0.0  # d17 ranks 11th: after d9 … d2 (8), d19 and d18
    assert got["mrr"]["q"] == pytest.approx(1 / 11)
    assert got["recall@10"]["q"] == 0.0 and got["recall@20"]["q"] == 0.5
    assert got["ndcg@20"]["q"] == pytest.approx((2 / np.log2(12)) / (2 + 1 / np.log2(3)))
    assert got["p@10"]["q"] == 0.0 and got["map"]["q"] == pytest.approx((1 / 11) / 2)
    assert rank_metrics.scores({"q": run["q"][::-1]}, qrels, ["mrr"]) == {"mrr": got["mrr"]}  # the list's order: none


def test_a_repeated_document_counts_once_at_its_first_place_with_its_last_score():
    run = {"q": [("a", 3.0), ("b", 2.0), ("a", 1.0), ("c", 0.5)]}  # as ranx's {doc: score}: a scores 1.0
    got = rank_metrics.scores(run, {"q": {"a": 1}}, ["mrr@10", "p@10", "hits@3"])
    assert got == {"mrr@10": {"q": 0.5}, "p@10": {"q": 0.1}, "hits@3": {"q": 1.0}}


@pytest.mark.slow  # calls ranx itself: its numba kernels compile on a fresh install
def test_names_it_does_not_compute_go_to_ranx():
    assert not rank_metrics.supported("bpref") and not rank_metrics.supported("ndcg@10-l2")
    assert not rank_metrics.supported("recall@") and not rank_metrics.supported("rbp.95")
    with pytest.raises(ValueError, match="'r-precision'"):
        rank_metrics.scores({}, {}, ["r-precision"])
    run = {"q": [("a", 2.0), ("b", 1.0)]}
    qrels = {"q": {"a": 1, "b": 2}}
    ev = evaluate_run(run, qrels, metrics=("ndcg@10", "r-precision", "f1@2"))  # the last two through ranx
    theirs = rank_metrics.ranx_scores(run, qrels, ["ndcg@10", "r-precision", "f1@2"])
    assert ev.per_query["r-precision"] == theirs["r-precision"] == {"q": 1.0}
    assert ev.per_query["f1@2"] == pytest.approx(theirs["f1@2"])
    assert ev.per_query["ndcg@10"] == pytest.approx(theirs["ndcg@10"])


@pytest.mark.slow  # calls ranx itself: its numba kernels compile on a fresh install
def test_equals_ranx_on_a_real_data_set():
    """nfcorpus's graded test labels (up to hundreds relevant per query), 1,000-deep lists that hold
    some of them, distinct scores; every metric RankScope shows and the Recall@k curve's depths."""
    from retrieval.data.readers import load_dataset
    from retrieval.evaluation.metric_tables import RECALL_KS

    ds = load_dataset(shared_dataset("nfcorpus"))
    qrels = ds.qrels["test"]
    doc_ids = list(ds.docs)
    rng = np.random.default_rng(0)
    run = {}
    for q in list(qrels)[:50]:
        judged = list(qrels[q])
        pool = list(dict.fromkeys([*rng.choice(judged, size=min(len(judged), 30), replace=False),
                                   *rng.choice(doc_ids, size=1000, replace=False)]))[:1000]
        run[q] = [(str(d), float(s)) for d, s in zip(pool, rng.permutation(len(pool)) + rng.random())]
    metrics = [*METRICS, *(f"recall@{k}" for k in RECALL_KS)]
    subset = {q: qrels[q] for q in run}
    assert_equal(rank_metrics.scores(run, subset, metrics), rank_metrics.ranx_scores(run, subset, metrics))


def trec_order(hits) -> list[tuple[str, float]]:
    """A list in trec_eval's order, written out here: a repeated document once with its last score,
    then score descending, equal scores by the ids' UTF-8 bytes descending (two stable sorts)."""
    last = dict(hits)
    return sorted(sorted(last.items(), key=lambda h: h[0].encode(), reverse=True), key=lambda h: -h[1])


def ir_measures_judged(run, qrels, k: int) -> dict[str, float]:
    """judged@k by ir-measures' "judged" provider (which skips a query without a list: 0 here), given
    each list in trec_eval's order as distinct scores: ir-measures breaks ties by id ascending, and
    RankScope counts the top k every other metric counts (trec_eval's)."""
    import ir_measures

    lists = {q: {d: float(-i) for i, (d, _) in enumerate(trec_order(run[q]))} for q in qrels if run.get(q)}
    out = dict.fromkeys(qrels, 0.0)
    if lists:
        out.update({r.query_id: r.value for r in ir_measures.judged.iter_calc([ir_measures.Judged @ k], qrels, lists)})
    return out


@settings(max_examples=200, deadline=None)
@given(run_and_qrels(max_len=30), st.sampled_from([1, 2, 3, 5, 10, 40]))
def test_judged_equals_ir_measures(data, k):
    """Ties at the cut broken by trec_eval's order, short lists divided by their length, labels of
    grade 0 counting as judged."""
    run, qrels = data
    labelled = {q: docs for q, docs in qrels.items() if docs}
    ours = rank_metrics.judged(run, labelled, k)
    theirs = ir_measures_judged(run, labelled, k)
    assert ours.keys() == theirs.keys()
    for q in ours:
        assert ours[q] == pytest.approx(theirs[q], abs=1e-12), q
    ev = evaluate_run(run, qrels, metrics=(f"judged@{k}",))
    assert ev.per_query.get(f"judged@{k}", {}) == (ours if labelled else {})


def test_judged_at_the_cut_takes_the_greater_document_id_among_equal_scores():
    run = {"q": [("a", 1.0), ("b", 1.0), ("c", 2.0)]}
    assert rank_metrics.judged(run, {"q": {"b": 0}}, 2) == {"q": 0.5}  # c, then b before a (trec_eval's order)
    assert rank_metrics.judged(run, {"q": {"a": 1}}, 2) == {"q": 0.0}
    assert rank_metrics.judged({"q": []}, {"q": {"b": 1}}, 10) == {"q": 0.0}
    with pytest.raises(ValueError, match="k ≥ 1"):
        rank_metrics.judged(run, {"q": {"a": 0}}, 0)
