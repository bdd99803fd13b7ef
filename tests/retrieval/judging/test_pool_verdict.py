"""What a judged pool determines, and one rule for the gate and the queue.

* P@k and success@k over every judged query are exact once each system's top k is judged, equal to
  what the answer key gives and to trec_eval's (pytrec_eval) on the same labels, queries with
  nothing relevant included; before that, the ranges they report hold the truth.
* The judging queue serves first exactly the pairs the gate counts (the unjudged top-k documents of
  the systems on the judged queries): "judge N more" falls by one with every grade taken in the
  queue's order, whatever the pools, the answer key and the judging order; once the queue is
  exhausted the verdict states each system's success rate and the queries every system fails on,
  equal to the answer key's.
"""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.judging.coverage import coverages, verdicts
from retrieval.judging.judgments import queue
from retrieval.judging.pool_verdict import beyond_pool, judged_queries, pool_verdict, unjudged_pairs
from retrieval.judging.pools import top_ids

SYSTEMS = ("bm25", "dense", "hybrid", "splade")


def make_runs(seed: int, queries: int, k: int, vocabulary: int, systems=SYSTEMS):
    """Systems ranking overlapping documents of one small vocabulary per query, distinct scores."""
    rng = random.Random(seed)
    runs: dict[str, dict] = {s: {} for s in systems}
    for q in range(queries):
        docs = [f"q{q}d{i}" for i in range(vocabulary)]
        for s in systems:
            chosen = rng.sample(docs, min(len(docs), k + rng.randint(0, 3)))
            runs[s][f"q{q}"] = [(d, 10.0 - i / 10) for i, d in enumerate(chosen)]
    return runs


def answer_key(seed: int, runs, rate: float):
    """Per query, the relevant documents: none on most queries when ``rate`` is low (a hard corpus)."""
    rng = random.Random(seed + 1)
    key = {}
    for q in next(iter(runs.values())):
        pooled = sorted({d for run in runs.values() for d, _ in run[q]})
        key[q] = {d for d in pooled if rng.random() < rate} if rng.random() < 0.5 else set()
    return key


def truth(runs, key, k):
    """success@k and P@k of every system by the answer key, and the queries every system fails on."""
    success = {s: {q: float(any(d in key[q] for d in top_ids(run, q, k))) for q in key} for s, run in runs.items()}
    precision = {s: {q: sum(d in key[q] for d in top_ids(run, q, k)) / k for q in key} for s, run in runs.items()}
    fail = sum(all(success[s][q] == 0 for s in runs) for q in key)
    return success, precision, fail


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 8), st.sampled_from([3, 5, 10]), st.floats(0.0, 0.4),
       st.floats(0.0, 1.0))
def test_the_pool_fixes_success_and_precision_and_its_ranges_hold_the_truth(seed, n, k, rate, share):
    runs = make_runs(seed, n, k, vocabulary=2 * k)
    key = answer_key(seed, runs, rate)
    success, precision, fail = truth(runs, key, k)
    rng = random.Random(seed + 2)
    pooled = [(q, d) for q in key for d in sorted({d for run in runs.values() for d in top_ids(run, q, k)})]
    judged = [pair for pair in pooled if rng.random() < share] or pooled[:1]
    labels: dict[str, dict[str, int]] = {}
    for q, d in judged:
        labels.setdefault(q, {})[d] = int(d in key[q])
    ids = sorted(labels)
    pv = pool_verdict(runs, labels, ids, k)
    for s, score in pv.scores.items():
        true_success = sum(success[s][q] for q in ids)
        assert score.successes <= true_success <= score.successes + score.undecided
        true_p = sum(precision[s][q] for q in ids) / len(ids)
        assert score.precision - 1e-12 <= true_p <= score.precision_high + 1e-12
        if score.exact:
            assert score.successes == true_success and score.precision == pytest.approx(true_p)
    true_fail = sum(all(success[s][q] == 0 for s in runs) for q in ids)
    assert pv.all_fail <= true_fail <= pv.all_fail + pv.all_fail_undecided
    assert len(pv.unjudged) == len(set(pv.unjudged)) == sum(pair not in judged for pair in pooled if pair[0] in ids)

    whole = {q: {d: int(d in key[q]) for qq, d in pooled if qq == q} for q in key}  # every pooled pair judged
    pv = pool_verdict(runs, whole, list(key), k)
    assert pv.complete and pv.all_fail == fail and pv.everyone_fails == (fail == len(key))
    for s, score in pv.scores.items():
        assert score.exact and score.successes == sum(success[s].values()) and score.failures == n - score.successes
        assert score.precision == pytest.approx(sum(precision[s].values()) / n)


def test_the_figures_equal_trec_evals_queries_with_nothing_relevant_included():
    import pytrec_eval

    runs = make_runs(7, 12, 10, vocabulary=20)
    key = answer_key(7, runs, 0.2)
    labels = {q: {d: int(d in key[q]) for run in runs.values() for d in top_ids(run, q, 10)} for q in key}
    assert any(not any(v for v in docs.values()) for docs in labels.values())  # a query with nothing relevant
    pv = pool_verdict(runs, labels, list(labels), 10)
    for s, run in runs.items():
        measured = pytrec_eval.RelevanceEvaluator(labels, {"P", "success"}).evaluate(
            {q: {d: score for d, score in hits} for q, hits in run.items()})
        assert pv.scores[s].precision == pytest.approx(sum(m["P_10"] for m in measured.values()) / len(labels))
        assert pv.scores[s].success == pytest.approx(sum(m["success_10"] for m in measured.values()) / len(labels))


def as_judgments(labels):
    return [{"query_id": q, "doc_id": d, "grade": g, "judge": "ann"} for q, docs in labels.items()
            for d, g in docs.items()]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 6), st.sampled_from(["mtc-ndcg", "mtc-p", "mtc", "depth", "mtf",
                                                                    "bandit", "pool"]),
       st.floats(0.0, 0.3))
def test_judge_n_more_falls_by_one_with_every_grade_in_the_queues_order(seed, n, order, rate):
    k = 5
    runs = make_runs(seed, n, k, vocabulary=3 * k)
    key = answer_key(seed, runs, rate)
    q = queue(runs, list(key), {}, k=k, order=order)
    labels: dict[str, dict[str, int]] = {}
    remaining = q.pooled_count
    steps = 0
    while (position := q.next_unjudged()) is not None:
        qid, doc = q.pairs[position]
        before = len(pool_verdict(runs, labels, judged_queries(labels, as_judgments(labels)), k).unjudged)
        assert before == q.to_complete()
        gated = unjudged_pairs(runs, labels, sorted(labels), k)
        if gated:  # the queue serves a pair the gate counts, the first in its order
            assert (qid, doc) == gated[0] or (qid, doc) in gated
        grade = int(doc in key[qid])
        labels.setdefault(qid, {})[doc] = grade
        q.record(qid, doc, grade)
        after = pool_verdict(runs, labels, judged_queries(labels, as_judgments(labels)), k)
        if before:
            assert len(after.unjudged) == before - 1  # "judge N more" falls by one
        # every system the gate holds back needs exactly the pairs counted, the union of theirs
        lacking = {s for s, c in coverages(runs, labels, as_judgments(labels), k=k).items() if not c.sufficient}
        union = unjudged_pairs({s: runs[s] for s in lacking}, labels, sorted(labels), k)
        assert set(union) <= set(after.unjudged) and (not lacking) == (not after.unjudged)
        remaining -= 1
        assert q.pooled_count - q.judged_count == remaining
        steps += 1
    assert steps == q.pooled_count  # every pooled pair, each once
    success, _, fail = truth(runs, key, k)
    pv = pool_verdict(runs, labels, list(key), k)
    assert pv.complete and pv.all_fail == fail
    assert {s: sc.successes for s, sc in pv.scores.items()} == {s: sum(v.values()) for s, v in success.items()}


def test_a_verdict_on_judged_labels_waits_for_the_judged_queries_top_10_whole():
    """One query judged in full, a second with one pair: no verdict; the count to judge is that
    second query's unjudged top-10 documents of the systems; judging them gives one."""
    runs = make_runs(3, 8, 10, vocabulary=14, systems=("bm25", "dense"))
    key = answer_key(3, runs, 0.3)
    labels = {"q0": {d: int(d in key["q0"]) for run in runs.values() for d in top_ids(run, "q0", 10)}}
    first = top_ids(runs["bm25"], "q1", 10)[0]
    labels["q1"] = {first: int(first in key["q1"])}
    found = verdicts(runs, labels, as_judgments(labels))
    assert found and not any(v.may_conclude for v in found)
    gap = unjudged_pairs(runs, labels, ["q0", "q1"], 10)
    assert gap and {q for q, _ in gap} == {"q1"}
    for q, d in gap:
        labels[q][d] = int(d in key[q])
    assert all(v.may_conclude for v in verdicts(runs, labels, as_judgments(labels)))


def test_what_would_settle_a_whole_pools_open_comparison():
    from retrieval.evaluation.measures import Evaluation, compare

    a = Evaluation({}, {"success@10": {f"q{i}": float(i < 3) for i in range(10)}})
    b = Evaluation({}, {"success@10": {f"q{i}": float(i < 5) for i in range(10)}})
    cmp = compare(a, b, "success@10")
    assert cmp.outcome == "open"
    more = beyond_pool(cmp)
    assert more is not None and more > 0
    assert beyond_pool(compare(a, a, "success@10")) is None


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.integers(3, 6), st.sampled_from(["mtc-ndcg", "depth", "pool"]),
       st.integers(5, 60))
def test_a_second_judge_adds_coverage_and_re_grades_a_stated_share_for_agreement(seed, n, order, first):
    """ana grades ``first`` pairs in her queue's order; bo's queue then serves the pairs nobody graded,
    every tenth of his one ana graded (for agreement, and said so), and each of his coverage grades
    brings the merged labels' "judge N more" down by one; asked to re-grade, ana's pairs come first."""
    from retrieval.judging.judgments import AGREEMENT_EVERY

    k = 5
    runs = make_runs(seed, n, k, vocabulary=3 * k)
    key = answer_key(seed, runs, 0.2)
    ana = queue(runs, list(key), {}, k=k, order=order)
    hers: dict[tuple[str, str], int] = {}
    for _ in range(first):
        position = ana.next_unjudged()
        if position is None:
            break
        pair = ana.pairs[position]
        hers[pair] = int(pair[1] in key[pair[0]])
        ana.record(*pair, hers[pair])
    bo = queue(runs, list(key), {}, k=k, order=order, others=hers)
    labels: dict[str, dict[str, int]] = {}
    for (q, d), g in hers.items():
        labels.setdefault(q, {})[d] = g
    mine, again = 0, 0
    while (position := bo.next_unjudged()) is not None:
        pair = bo.pairs[position]
        before = len(pool_verdict(runs, labels, sorted(labels), k).unjudged)
        if pair in hers:
            assert bo.adds(pair) == "agreement"
            again += 1
            assert again * AGREEMENT_EVERY <= mine + 1  # never more than its share
        else:
            assert bo.adds(pair) == "coverage"
            labels.setdefault(pair[0], {})[pair[1]] = int(pair[1] in key[pair[0]])
            if before:
                assert len(pool_verdict(runs, labels, sorted(labels), k).unjudged) == before - 1
        mine += 1
        bo.record(*pair, int(pair[1] in key[pair[0]]))
        if bo.uncovered == 0:
            break
    assert bo.uncovered == 0 and again <= max(1, mine // AGREEMENT_EVERY)
    if hers:
        regrade = queue(runs, list(key), {}, k=k, order=order, others=hers, regrade=True)
        served = []
        for _ in range(len(hers)):
            position = regrade.next_unjudged()
            served.append(regrade.pairs[position])
            regrade.record(*served[-1], 1)
        assert set(served) == set(hers)  # every pair ana graded, first


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(3, 8), st.sampled_from([2, 3, 5, 10]))
def test_the_depth_a_pool_was_judged_to_is_read_from_the_labels_a_late_system_aside(seed, n, k):
    """On corpora larger than a pool (lists that share some documents, not most) the depth the judging
    used, with or without a system that joined after it and left its lists unjudged."""
    from retrieval.judging.pool_verdict import judged_depth

    runs = make_runs(seed, n, 10, vocabulary=60)
    late = make_runs(seed + 7, n, 10, vocabulary=60, systems=("late",))
    key = answer_key(seed, runs, 0.2)
    labels = {q: {d: int(d in key[q]) for run in runs.values() for d in top_ids(run, q, k)} for q in key}
    assert judged_depth(runs, labels, list(key)) == k
    assert judged_depth({**runs, **late}, labels, list(key)) == k  # joined after: its unjudged lists change nothing


def test_the_headline_says_what_the_pool_says_in_words():
    """Provisional with ranges while the pool is not whole; once it is, the queries every system
    fails on with their interval, each system's rate, and what would settle the nearest rival that
    differs (not one that succeeds on the very same queries)."""
    from ui.present.tables import pool_headline

    runs = {"A": {}, "B": {}, "C": {}}
    labels: dict[str, dict[str, int]] = {}
    for i in range(6):
        q = f"q{i}"
        runs["A"][q] = [(f"{q}a", 1.0), (f"{q}x", 0.5)]
        runs["B"][q] = [(f"{q}a", 1.0), (f"{q}y", 0.5)]  # A's twin on success@2
        runs["C"][q] = [(f"{q}z", 1.0), (f"{q}w", 0.5)]
        labels[q] = {f"{q}a": int(i < 2), f"{q}x": 0, f"{q}y": 0, f"{q}z": 0}
    head, rest = pool_headline(pool_verdict(runs, labels, list(labels), 2))
    assert head == "Provisional — judge 6 more" and "fails on 0–4 of the 6 judged queries" in rest
    assert "A 2 of 6 (33% [10%, 70%]), B 2 of 6 (33% [10%, 70%]), C 0–6 of 6" in rest  # C's range: unjudged
    for q in labels:
        labels[q][f"{q}w"] = 0
    head, rest = pool_headline(pool_verdict(runs, labels, list(labels), 2))
    assert head == "Every system fails on 4 of 6 judged queries" and rest.startswith(" (67% [30%, 90%]")
    assert "A 2 of 6 (33% [" in rest and "C 0 of 6 (0% [" in rest
    assert "A and C are not separable on success@2" in rest and "more judged queries" in rest
    everyone = {q: {d: 0 for d in docs} for q, docs in labels.items()}
    said = pool_headline(pool_verdict(runs, everyone, list(everyone), 2))[0]
    assert said == "Every system fails on all 6 judged queries:"
