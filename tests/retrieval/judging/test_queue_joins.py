"""A system that joins the systems on show late (its index built, a run imported) joins the judging
queue at once: its unjudged top k is pooled and handed out next, aimed at the comparisons it is in —
after the rest of the pool of the queries already graded, which the coverage gate counts first
(``Queue._gate_pair``); grades and the positions handed out before stay as they were."""
from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.data.run import Run
from retrieval.judging.judgments import queue, top_ids


def ranked(docs: list[str]) -> list[tuple[str, float]]:
    return [(d, float(len(docs) - i)) for i, d in enumerate(docs)]


def runs_for(seed: int, queries: int = 6, k: int = 5) -> tuple[Run, Run, Run]:
    """BM25-like and dense-like runs that share some documents, and a late system that shares fewer."""
    rng = random.Random(seed)
    bm25, dense, late = {}, {}, {}
    for q in range(queries):
        docs = [f"d{i}" for i in range(30)]
        bm25[f"q{q}"] = ranked(rng.sample(docs[:12], k))
        dense[f"q{q}"] = ranked(rng.sample(docs[4:16], k))
        late[f"q{q}"] = ranked(rng.sample(docs[8:30], k))
    return bm25, dense, late


def hand_out(q, n: int) -> list[tuple[str, str]]:
    """The next ``n`` pairs the queue hands out past those handed out already, each skipped (left
    unjudged) as a judge may."""
    out, at = [], q.handed - 1
    for _ in range(n):
        at = q.next_unjudged(at, wrap=False)
        if at is None:
            break
        out.append(q.pairs[at])
    return out


def gate_rest(q, ids, runs, handed, k) -> set[tuple[str, str]]:
    """The pooled pairs of the queries graded so far that are neither graded nor handed out: what the
    gate serves before anything else."""
    graded = {qid for qid, d in handed if q.grade(q.position(qid, d)) is not None}
    return {(qid, d) for qid in ids if qid in graded for run in runs for d in top_ids(run, qid, k)
            if (qid, d) not in handed}


def test_a_late_system_goes_next_and_what_was_judged_and_handed_stays():
    bm25, dense, late = runs_for(0)
    ids = list(bm25)
    q = queue({"bm25": bm25}, ids, {}, k=5)  # the first judgments came from a BM25-only queue
    first = hand_out(q, 4)
    for qid, doc in first[:3]:
        q.record(qid, doc, 1)
    before = list(q.pairs[:q.handed])
    pooled = q.pooled_count

    joined = q.add_runs({"bm25": bm25, "dense": dense, "splade": late})  # bm25 was pooled already
    assert joined.systems == ("dense", "splade") and joined.first and joined.k == 5
    assert q.systems == ("bm25", "dense", "splade")
    assert q.pairs[:q.handed] == before  # positions handed out stay
    assert all(q.grade(q.position(*pair)) == 1 for pair in first[:3])  # grades kept
    theirs = {(qid, d) for qid in ids for run in (dense, late) for d in top_ids(run, qid, 5)} - set(first)
    assert joined.pairs == len(theirs) == q.joined_left() and q.pooled_count > pooled
    assert q.pooled_count == len({(qid, d) for qid in ids for run in (bm25, dense, late) for d in top_ids(run, qid, 5)})
    first_up = theirs | gate_rest(q, ids, (bm25, dense, late), set(first), 5)
    nxt = hand_out(q, len(first_up))
    assert set(nxt) == first_up  # the graded queries' pools, then every unjudged top-5 document of the joining
    assert q.joined_left() == 0  # systems, before any other
    assert q.add_runs({"dense": dense}) is None  # pooled already: nothing changes


def test_the_late_system_goes_first_in_pool_order_too_and_an_aim_is_kept():
    bm25, dense, late = runs_for(1)
    ids = list(bm25)
    q = queue({"bm25": bm25, "dense": dense}, ids, {}, k=5, order="pool")
    hand_out(q, 2)
    joined = q.add_runs({"splade": late})
    mine = {(qid, d) for qid in ids for d in top_ids(late, qid, 5)} - set(q.pairs[:q.handed])
    assert joined.first and set(hand_out(q, len(mine))) == mine

    aimed = queue({"bm25": bm25, "dense": dense}, ids, {}, k=5, interest=[("bm25", "dense")])
    joined = aimed.add_runs({"splade": late})
    assert not joined.first and aimed.joined_left() == 0  # the analyst's aim stays; the pairs are pooled
    assert "splade" in aimed.systems and all(aimed.position(qid, d) >= 0 for qid in ids
                                             for d in top_ids(late, qid, 5))


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 12), st.sampled_from(["mtc-ndcg", "mtc-p", "mtc", "depth", "mtf"]))
def test_joined_pairs_come_first_whatever_the_order(seed, before, order):
    bm25, dense, late = runs_for(seed, queries=4, k=4)
    ids = list(bm25)
    q = queue({"bm25": bm25, "dense": dense}, ids, {}, k=4, order=order)
    handed = hand_out(q, before)
    for i, (qid, doc) in enumerate(handed):
        if i % 2:
            q.record(qid, doc, i % 3)
    grades = {pair: q.grade(q.position(*pair)) for pair in handed}
    joined = q.add_runs({"late": late})
    assert q.pairs[:len(handed)] == handed and {p: q.grade(q.position(*p)) for p in handed} == grades
    theirs = {(qid, d) for qid in ids for d in top_ids(late, qid, 4)} - set(handed)
    assert joined.pairs == len(theirs)
    first_up = theirs | gate_rest(q, ids, (bm25, dense, late), set(handed), 4)
    assert set(hand_out(q, len(first_up))) == first_up
