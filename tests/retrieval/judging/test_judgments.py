"""Judging: pools, RBO and disagreement, the judging queue, judgments in the store, judgments as
qrels (several judges, merged with imported labels, exported and read back), and the metrics for
incomplete labels on real runs against ranx and ir-measures.

Real SQLite files, real BM25 and the real tiny transformer on the bundled demo corpus; hand-made
runs where a value is worked out by hand.
"""
from __future__ import annotations

import math
import re
import sqlite3
import warnings

import pytest

from retrieval.data.readers import load_dataset, read_qrels
from retrieval.errors import DataError
from retrieval.evaluation.measures import evaluate_run
from retrieval.evaluation.metrics import JUDGING_METRICS
from retrieval.files.trec import write_qrels
from retrieval.judging.judgments import (
    GRADES,
    disagreement,
    disagreements,
    judged_pairs,
    judgments_to_qrels,
    merge_labels,
    order_queries,
    pool,
    queue,
    rbo,
)
from retrieval.store import Store
from retrieval.workspace import Workspace
from tests.conftest import DEMO
from tests.helpers import delete_judgment, integrity_check


def _run(**lists: str) -> dict:
    """A run from strings of one-letter doc ids, best first: ``_run(q1="abc")``."""
    return {q: [(d, 1.0 - i / 100) for i, d in enumerate(docs)] for q, docs in lists.items()}


# ---- pooling ---------------------------------------------------------------------------------
def test_pool_is_the_union_of_top_k_by_best_rank_then_doc_id():
    runs = {"bm25": _run(q1="abcde", q2="xy"), "dense": _run(q1="cbfa", q2="")}
    pools = pool(runs, ["q1", "q2", "q3"], k=3)
    # best ranks: a 1, c 1, b 2, f 3 (d, e are below bm25's top 3; a is 4th in dense but 1st in bm25)
    assert pools["q1"] == ["a", "c", "b", "f"]
    assert pools["q2"] == ["x", "y"]
    assert pools["q3"] == []  # no system has a list for it
    assert pool(dict(reversed(runs.items())), ["q1"], k=3)["q1"] == pools["q1"]  # system order does not matter


# ---- rank-biased overlap ----------------------------------------------------------------------
def test_rbo_identical_disjoint_and_empty_lists():
    for p in (0.5, 0.9, 0.98):
        assert rbo(list("abcdef"), list("abcdef"), p) == pytest.approx(1.0)
        assert rbo(list("abc"), list("xyz"), p) == 0.0
    assert rbo([], []) == 1.0 and rbo([], ["a"]) == 0.0 and rbo(["a"], []) == 0.0


def test_rbo_hand_worked_equal_lengths():
    # S = a b c, L = b a d: X_1 = 0, X_2 = 2, X_3 = 2; eq. 32 with s = l = 3, p = 0.9:
    # (0.1/0.9)(0 + 2/2·0.81 + 2/3·0.729) + 2/3·0.729 = 0.144 + 0.486 = 0.63
    assert rbo(list("abc"), list("bad"), 0.9) == pytest.approx(0.63)
    assert rbo(list("bad"), list("abc"), 0.9) == pytest.approx(0.63)  # symmetric


def test_rbo_hand_worked_uneven_lengths():
    # S = a b (s = 2), L = b c a (l = 3): X_1 = 0, X_2 = 1, X_3 = |{a, b} ∩ {b, c, a}| = 2, X_s = 1;
    # (0.1/0.9)(1/2·0.81 + 2/3·0.729 + 1·(3−2)/(2·3)·0.729) + ((2−1)/3 + 1/2)·0.729 = 0.1125 + 0.6075
    assert rbo(list("ab"), list("bca"), 0.9) == pytest.approx(0.72)
    assert rbo(list("bca"), list("ab"), 0.9) == pytest.approx(0.72)
    # a prefix of the other list agrees as far as it goes: extrapolated, it is identical
    assert rbo(list("ab"), list("abcd"), 0.9) == pytest.approx(1.0)


def test_rbo_rejects_p_outside_the_open_unit_interval():
    for p in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="persistence"):
            rbo(["a"], ["a"], p)


def test_disagreement_is_one_minus_mean_pairwise_rbo():
    runs = {"a": _run(q="abc"), "b": _run(q="bad"), "c": _run(q="xyz")}
    # RBO(a, b) = 0.63, RBO(a, c) = RBO(b, c) = 0 -> 1 − 0.63 / 3
    assert disagreement(runs, "q", k=3) == pytest.approx(1 - 0.63 / 3)
    assert disagreement({"a": _run(q="abc"), "b": _run(q="abc")}, "q") == pytest.approx(0.0)
    assert disagreement({"a": _run(q="abc")}, "q") == 0.0  # one system: nothing to disagree with
    # only the top k counts: the lists agree on their first two
    assert disagreement({"a": _run(q="abx"), "b": _run(q="aby")}, "q", k=2) == pytest.approx(0.0)


def test_order_queries_most_disagreement_first_ties_by_query_id():
    runs = {"a": _run(q1="abc", q2="abc", q3="abc", q4="abc"),
            "b": _run(q1="abc", q2="xyz", q3="bad", q4="abc")}
    order = order_queries(runs, ["q4", "q3", "q2", "q1"], k=3)
    assert [q for q, _ in order] == ["q2", "q3", "q1", "q4"]
    assert dict(order)["q2"] == pytest.approx(1.0) and dict(order)["q3"] == pytest.approx(0.37)


# ---- the judging queue -------------------------------------------------------------------------
RUNS = {"bm25": _run(q1="abc", q2="abc"), "dense": _run(q1="abc", q2="cxa")}


def test_queue_in_pool_order_progress_and_next_unjudged():
    qu = queue(RUNS, ["q1", "q2"], judged={("q2", "x"): 1, ("q9", "zz"): 2}, k=3, order="pool")
    # the grade made before first (← goes back to it); then q2's pool (q2 disagrees, q1 does not;
    # best rank, then id: a, c, b), then q1's
    assert qu.pairs == [("q2", "x"), ("q2", "a"), ("q2", "c"), ("q2", "b"),
                        ("q1", "a"), ("q1", "b"), ("q1", "c")]
    assert qu.handed == 1
    assert qu.disagreement["q1"] == pytest.approx(0.0) and qu.disagreement["q2"] > 0
    assert (qu.judged_count, qu.pooled_count, len(qu)) == (1, 7, 7)  # ("q9", "zz") is not pooled
    assert qu.grade(0) == 1 and qu.grade(1) is None
    assert qu.next_unjudged() == 1 and qu.next_unjudged(1) == 2 and qu.handed == 3
    assert qu.step(2, forward=False) == 1 and qu.step(0, forward=False) == 0
    assert qu.step(2, forward=True) == 3 and qu.handed == 4  # → past the pairs handed out takes the next
    qu.record("q1", "a", 0)
    qu.record("q1", "b", 2)
    qu.record("q1", "c", 1)
    assert qu.next_unjudged(3) == 1  # none left after: back to the start (pairs skipped earlier)
    assert qu.next_unjudged(3, wrap=False) is None
    for d in "acb":
        qu.record("q2", d, 0)
    assert qu.judged_count == 7 and qu.next_unjudged() is None
    qu.forget("q2", "c")
    assert qu.judged_count == 6 and qu.next_unjudged(5) == 2
    assert qu.position("q2", "c") == 2
    assert queue(RUNS, (q for q in ("q1", "q2")), {}, k=3, order="pool").pairs == \
        queue(RUNS, ["q1", "q2"], {}, k=3, order="pool").pairs  # any iterable of ids
    with pytest.raises(KeyError, match="not in the judging pool"):
        qu.position("q1", "x")


RUNS3 = {"bm25": _run(q1="abc", q2="abc"), "dense": _run(q1="abc", q2="cxa"), "splade": _run(q1="xyz", q2="abc")}


def _hand_out_all(qu) -> list:
    out, at = [], -1
    while (at := qu.next_unjudged(at, wrap=False)) is not None:
        out.append(qu.pairs[at])
        qu.record(*qu.pairs[at], 0)
    return out


def test_the_default_order_aims_at_the_comparisons_picked():
    # bm25 and dense rank q1 alike: for that one comparison q1's documents tell nothing, so q2's
    # four come first; over every pair (splade differs on q1) some of q1's come before q2's last
    aimed = _hand_out_all(queue(RUNS3, ["q1", "q2"], {}, k=3, interest=[("bm25", "dense")]))
    assert [q for q, _ in aimed[:4]] == ["q2"] * 4 and len(aimed) == 10 == len(set(aimed))
    every = _hand_out_all(queue(RUNS3, ["q1", "q2"], {}, k=3))
    assert sorted(every) == sorted(aimed) and [q for q, _ in every[:4]] != ["q2"] * 4


def test_queue_names_systems_only_when_asked():
    qu = queue(RUNS, ["q2"], judged={}, k=2)  # q2's pool at depth 2: a, c, b, x
    assert all(len(pair) == 2 for pair in qu.pairs)  # (query id, doc id): no system names
    assert qu.retrieved_by(qu.position("q2", "a")) == {"bm25": 1, "dense": 3}  # whole lists, not only top k
    assert qu.retrieved_by(qu.position("q2", "x")) == {"dense": 2}


# ---- judgments in the store --------------------------------------------------------------------
def test_judgments_survive_a_reopen_and_rejudging_replaces(tmp_path):
    path = tmp_path / "store.sqlite3"
    store = Store(path)
    store.put_judgment("c1", "q1", "cats on mats", "d1", 2, "ann")
    store.put_judgment("c1", "q1", "cats on mats", "d2", 0, "ann")
    store.put_judgment("c1", "q1", "cats on mats", "d1", 1, "bob")
    store.put_judgment("c2", "q1", "another corpus", "d1", 2, "ann")
    store.close()
    store = Store(path)  # a new connection on the same file
    rows = store.judgments("c1")
    assert sorted((r["query_id"], r["doc_id"], r["judge"], r["grade"]) for r in rows) == [
        ("q1", "d1", "ann", 2), ("q1", "d1", "bob", 1), ("q1", "d2", "ann", 0)]
    assert {r["query_text"] for r in rows} == {"cats on mats"} and all(r["time"] > 0 for r in rows)
    store.put_judgment("c1", "q1", "cats on mats", "d1", 0, "ann")  # changed mind
    assert [r["grade"] for r in store.judgments("c1", judge="ann") if r["doc_id"] == "d1"] == [0]
    assert len(store.judgments("c1")) == 3 and store.judgments("c1", judge="ann")[-1]["doc_id"] == "d1"
    assert delete_judgment(store, "c1", "q1", "d2", "ann") is True
    assert delete_judgment(store, "c1", "q1", "d2", "ann") is False
    assert {r["doc_id"] for r in store.judgments("c1", judge="ann")} == {"d1"}
    for bad in (3, -1, True, "2"):
        with pytest.raises(ValueError, match="grade"):
            store.put_judgment("c1", "q1", "t", "d9", bad, "ann")
    with pytest.raises(ValueError, match="judge"):
        store.put_judgment("c1", "q1", "t", "d9", 1, "")
    assert integrity_check(store) == "ok"
    store.close()


def test_a_store_file_made_before_judgments_gains_the_table(tmp_path):
    path = tmp_path / "old.sqlite3"
    Store(path).close()
    conn = sqlite3.connect(path)  # make it a store file written before judgments existed
    with conn:
        conn.execute("drop table judgments")
    assert "judgments" not in {r[0] for r in conn.execute("select name from sqlite_master where type = 'table'")}
    conn.close()
    store = Store(path)
    store.put_judgment("c", "q", "text", "d", 2, "ann")
    assert [r["grade"] for r in store.judgments("c")] == [2]
    store.close()


def test_judgments_are_kept_under_the_corpus_hash_when_queries_are_added(store):
    ds = load_dataset(DEMO)
    qid, text = next(iter(ds.queries.items()))
    doc = ds.doc_ids[0]
    store.put_judgment(ds.corpus_hash, qid, text, doc, GRADES[-1], "ann")
    more = ds.with_queries({"extra-1": "how do interest rates move bond prices"})
    assert more.content_hash != ds.content_hash and more.corpus_hash == ds.corpus_hash
    assert [(r["query_id"], r["doc_id"]) for r in store.judgments(more.corpus_hash)] == [(qid, doc)]
    assert store.judgments(more.content_hash) == []  # not keyed by the content hash


# ---- judgments as relevance labels ---------------------------------------------------------------
def _row(q, d, judge, grade):
    return {"query_id": q, "doc_id": d, "judge": judge, "grade": grade}


ROWS = [_row("q1", "a", "ann", 2), _row("q1", "a", "bob", 0), _row("q1", "a", "cy", 1),  # median 1
        _row("q1", "b", "ann", 1), _row("q1", "b", "bob", 2),  # lower median of 1, 2: 1
        _row("q1", "c", "ann", 0), _row("q1", "c", "bob", 0),  # agree
        _row("q2", "d", "bob", 2)]


def test_judgments_to_qrels_one_judge_or_the_lower_median():
    assert judgments_to_qrels(ROWS) == {"q1": {"a": 1, "b": 1, "c": 0}, "q2": {"d": 2}}
    assert judgments_to_qrels(ROWS, judge="ann") == {"q1": {"a": 2, "b": 1, "c": 0}}
    assert judgments_to_qrels(ROWS, judge="bob") == {"q1": {"a": 0, "b": 2, "c": 0}, "q2": {"d": 2}}
    assert judgments_to_qrels([_row("q", "x", "ann", 0), _row("q", "x", "bob", 2)]) == {"q": {"x": 0}}
    assert judgments_to_qrels([]) == {}
    assert judged_pairs({"q1": {"a": 1}, "q2": {"b": 0}}) == {("q1", "a"): 1, ("q2", "b"): 0}


def test_disagreements_between_judges():
    assert disagreements(ROWS) == [("q1", "a", {"ann": 2, "bob": 0, "cy": 1}),
                                   ("q1", "b", {"ann": 1, "bob": 2})]


def test_merge_labels_prefers_imported_unless_told():
    imported = {"q1": {"a": 2, "b": 0}, "q2": {"x": 1}}
    judged = {"q1": {"a": 0, "c": 1}, "q3": {"y": 2}}
    assert merge_labels(imported, judged) == {"q1": {"a": 2, "b": 0, "c": 1}, "q2": {"x": 1}, "q3": {"y": 2}}
    assert merge_labels(imported, judged, prefer="judgments") == {
        "q1": {"a": 0, "b": 0, "c": 1}, "q2": {"x": 1}, "q3": {"y": 2}}
    assert imported == {"q1": {"a": 2, "b": 0}, "q2": {"x": 1}}  # inputs untouched
    with pytest.raises(ValueError, match="prefer"):
        merge_labels(imported, judged, prefer="newest")


@pytest.mark.parametrize("fmt", ["trec", "beir"])
def test_write_qrels_reads_back_identically(tmp_path, fmt):
    qrels = {"q-10": {"doc:7": 2, "d1": 0}, "q2": {"d1": 1}, "3": {"ä-doc": 1}}
    path = write_qrels(qrels, tmp_path / ("labels.txt" if fmt == "trec" else "beir"), fmt=fmt, split="judged")
    assert read_qrels(path) == qrels
    text = path.read_text(encoding="utf-8")
    if fmt == "beir":
        assert path == tmp_path / "beir" / "qrels" / "judged.tsv"
        assert text.splitlines()[:2] == ["query-id\tcorpus-id\tscore", "3\tä-doc\t1"]
    else:
        assert text.splitlines()[0] == "3 0 ä-doc 1"


def test_write_qrels_refuses_ids_it_cannot_write(tmp_path):
    for qrels, named in (({"q 1": {"d": 1}}, "q 1"), ({"q": {"d\t2": 1}}, "d\t2")):
        with pytest.raises(ValueError, match=re.escape(repr(named))):
            write_qrels(qrels, tmp_path / "bad.txt")
    with pytest.raises(DataError, match="document id"):
        write_qrels({"q": {"a b": 1}}, tmp_path / "bad", fmt="beir")
    with pytest.raises(ValueError, match="empty"):
        write_qrels({"": {"d": 1}}, tmp_path / "bad.txt")
    with pytest.raises(ValueError, match="unknown qrels format"):
        write_qrels({"q": {"d": 1}}, tmp_path / "bad.txt", fmt="json")
    assert not list(tmp_path.iterdir())  # nothing written


# ---- on real runs: the demo corpus, BM25 and the tiny transformer --------------------------------
@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory, tiny_encoder):
    store = Store(tmp_path_factory.mktemp("judging") / "store.sqlite3")
    ws = Workspace(load_dataset(DEMO), store, model=tiny_encoder)
    runs = {s: ws.run(s, "test") for s in ("bm25", "dense")}
    yield ws, runs, store
    store.close()


def test_judging_real_runs_end_to_end(demo_runs):
    ws, runs, store = demo_runs
    qids = list(ws.dataset.split_queries("test"))
    pools = pool(runs, qids)
    for q in qids:
        tops = {d for run in runs.values() for d, _ in run[q][:10]}
        assert set(pools[q]) == tops and len(pools[q]) <= 20
    qu = queue(runs, qids, judged_pairs(judgments_to_qrels(store.judgments(ws.dataset.corpus_hash))))
    assert qu.pooled_count == sum(len(p) for p in pools.values()) and qu.judged_count == 0
    in_order = [qu.disagreement[q] for q in dict.fromkeys(q for q, _ in qu.pairs)]
    assert in_order == sorted(in_order, reverse=True)
    # judge the first five pairs with the imported labels (0 where there is none), as a judge would
    labels = ws.dataset.qrels["test"]
    position = qu.next_unjudged()
    for _ in range(5):
        qid, doc = qu.pairs[position]
        grade = labels.get(qid, {}).get(doc, 0)
        store.put_judgment(ws.dataset.corpus_hash, qid, ws.dataset.queries[qid], doc, grade, "ann")
        qu.record(qid, doc, grade)
        position = qu.next_unjudged(position)
    again = queue(runs, qids, judged_pairs(judgments_to_qrels(store.judgments(ws.dataset.corpus_hash))))
    assert (again.judged_count, again.pooled_count) == (5, qu.pooled_count) == (qu.judged_count, len(qu))
    assert again.next_unjudged() == 5 == position


@pytest.mark.slow
def test_bpref_matches_ranx_and_judged_at_10_matches_ir_measures_on_real_runs(demo_runs):
    import ir_measures
    from ranx import Qrels as RQrels
    from ranx import Run as RRun
    from ranx import evaluate

    ws, runs, _ = demo_runs
    qids = list(ws.dataset.split_queries("test"))
    # the imported labels, plus "not relevant" for the rest of each pool: as if the pool were judged
    judged = {q: dict.fromkeys(docs, 0) for q, docs in pool(runs, qids, k=5).items()}
    labels = merge_labels(ws.dataset.qrels["test"], judged)
    for name, run in runs.items():
        ev = evaluate_run(run, labels, metrics=JUDGING_METRICS)
        assert set(ev.mean) >= set(JUDGING_METRICS)
        # bpref: ranx's, on every query where ranx defines it (a judged non-relevant document exists)
        rr = RRun({q: {d: s for d, s in run[q]} for q in labels})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            evaluate(RQrels(labels), rr, ["bpref"], save_results_in_run=True, make_comparable=True)
        ranx_bpref = {q: float(v) for q, v in rr.scores["bpref"].items() if not math.isnan(v)}
        assert len(ranx_bpref) >= len(qids) // 2
        assert {q: ev.per_query["bpref"][q] for q in ranx_bpref} == pytest.approx(ranx_bpref), name
        assert all(0.0 <= v <= 1.0 for v in ev.per_query["bpref"].values())  # NaN nowhere
        # judged@10: ir-measures' Judged@10, over every labelled query, grade-0 labels counted as judged
        expected = {m.query_id: m.value for m in ir_measures.iter_calc(
            [ir_measures.Judged @ 10], labels, {q: dict(run[q]) for q in labels})}
        assert ev.per_query["judged@10"] == pytest.approx(expected), name
        top5 = {q: [d for d, _ in run[q][:5]] for q in qids}
        assert all(ev.per_query["judged@10"][q] >= 0.5 for q in qids if len(set(top5[q])) == 5)
