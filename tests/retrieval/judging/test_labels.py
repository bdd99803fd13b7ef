"""Judgments as labels: merged into the data's own splits, or new ``judged`` / ``train`` splits."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.data.dataset import Dataset
from retrieval.judging.labels import JUDGED, judged_counts, judged_folds, with_judgments


def test_judgments_of_labelled_queries_merge_into_their_split(toy_dataset):
    judged = {"q3": {"d7": 0, "d1": 2}, "q1": {"d2": 1}}  # q3 in test, q1 in train
    ds = with_judgments(toy_dataset, judged)
    assert ds.qrels["test"]["q3"] == {"d7": 2, "d2": 1, "d8": 0, "d1": 2}  # the data's own d7 label wins
    assert ds.qrels["train"]["q1"]["d2"] == 1 and set(ds.splits) == {"train", "test"}
    mine = with_judgments(toy_dataset, judged, prefer="judgments")
    assert mine.qrels["test"]["q3"]["d7"] == 0
    assert ds.corpus_hash == toy_dataset.corpus_hash and ds.content_hash != toy_dataset.content_hash
    assert toy_dataset.qrels["test"]["q3"] == {"d7": 2, "d2": 1, "d8": 0}  # the original is unchanged


def test_every_judged_query_in_no_split_goes_to_judged_and_is_evaluated(toy_dataset):
    bare = Dataset("bare", toy_dataset.docs, {f"u{i}": f"query {i}" for i in range(10)})
    judged = {f"u{i}": {"d1": i % 3} for i in range(10)}
    ds = with_judgments(bare, judged)
    assert list(ds.qrels) == [JUDGED] and ds.default_split() == JUDGED
    assert ds.qrels[JUDGED] == judged  # all ten: none held back to tune λ on
    with_train = with_judgments(toy_dataset.with_queries({"u1": "query 1"}), {"u1": {"d1": 2}})
    assert with_train.qrels[JUDGED] == {"u1": {"d1": 2}} and "u1" not in with_train.qrels["train"]


def test_judged_counts_say_what_each_count_counts():
    labels = {"a": {"d1": 0, "d2": 2}, "b": {"d1": 0}, "c": {"d3": 1}, "e": {}}
    counts = judged_counts(labels)
    assert (counts.queries, counts.relevant, counts.pairs) == (3, 2, 4)  # one judged query has no relevant document


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text("abcdef", min_size=1, max_size=3),
                       st.dictionaries(st.sampled_from(["d1", "d2", "d3"]), st.integers(0, 2), min_size=1),
                       max_size=30), st.integers(0, 5))
def test_judged_folds_are_two_seeded_halves_sharing_the_relevant_queries_evenly(labels, seed):
    one, two = judged_folds(labels, seed)
    assert not one & two and one | two == set(labels)
    relevant = {q for q, docs in labels.items() if any(g > 0 for g in docs.values())}
    assert abs(len(one & relevant) - len(two & relevant)) <= 1
    assert abs(len(one - relevant) - len(two - relevant)) <= 1
    assert judged_folds(dict(reversed(labels.items())), seed) == (one, two)  # seeded, whatever the order


def test_fine_tuning_on_judged_queries_alone_makes_its_own_held_out_split(toy_dataset):
    """Without a train split the Train tab and ``python -m training`` cut the judged queries
    themselves (the seeded cold-start split): training never sees the queries it is evaluated on."""
    from training.finetune import plan_splits
    from training.pairs import labelled_pairs

    bare = Dataset("bare", toy_dataset.docs, {f"u{i}": f"query {i}" for i in range(10)})
    ds = with_judgments(bare, {f"u{i}": {"d1": 1 + i % 2, "d2": 0} for i in range(10)})
    plan = plan_splits(ds, cold_start=0.8)
    train, test = set(plan.dataset.qrels["train"]), set(plan.dataset.qrels["test"])
    assert plan.eval_split == "test" and train | test == set(ds.qrels[JUDGED]) and not train & test
    pairs = labelled_pairs(plan.dataset, "train")
    assert len(train) == 8 and len(pairs) == 8 and {p.query_id for p in pairs} == train


def test_a_new_grade_recomputes_no_run_and_never_serves_a_stale_evaluation(toy_dataset, store, tiny_encoder):
    """Runs are cached by documents and queries (``Workspace.data_key``): labels merged again after a
    grade read every run from the store, while the evaluation of the split graded is computed again
    (its labels are in its key) and that of a split not graded is read back."""
    from retrieval.workspace import Workspace

    ds = toy_dataset.with_queries({"u1": "cat food prices", "u2": "interest rates"})
    ws = Workspace(ds, store, model=tiny_encoder)
    first = ws.with_dataset(with_judgments(ds, {"u1": {"d4": 2}, "u2": {"d3": 0}}))
    for system in ("bm25", "dense"):
        first.evaluate(system, "test")
        first.evaluate(system, JUDGED)
    runs = {r["key"]: r["created"] for r in store.runs()}
    metrics = store.db["metrics"].count
    again = ws.with_dataset(with_judgments(ds, {"u1": {"d4": 2}, "u2": {"d3": 0, "d6": 2}}))  # one more grade
    assert again.dataset.queries_hash == first.dataset.queries_hash != ds.content_hash
    for system in ("bm25", "dense"):
        again.evaluate(system, "test")
        assert again.evaluate(system, JUDGED).per_query["ndcg@10"]["u2"] > 0  # on the new grade, not the old
    assert {r["key"]: r["created"] for r in store.runs()} == runs  # not one run computed again
    assert store.db["metrics"].count == metrics + 2  # the judged split's two evaluations, and no other


def test_the_store_s_judgments_are_the_labels_every_view_and_command_reads(toy_dataset, store):
    """``with_stored_judgments``: several judges merged by the lower median, the data's own label
    winning a pair both have, judged queries of no split in ``judged``; on a shared deployment only
    the judges the viewer counts (its own and the published ones), every judge's without a viewer."""
    from retrieval.judging.judge_claims import Claim
    from retrieval.judging.labels import with_stored_judgments
    from retrieval.sharing.owners import Viewer
    from retrieval.workspace import Workspace

    ds = toy_dataset.with_queries({"u1": "cat food prices", "u2": "interest rates"})
    corpus = ds.corpus_hash
    assert with_stored_judgments(ds, store)[0] is ds  # nothing judged: the same data set
    store.put_judgments(corpus, [("u1", "cat food prices", "d4", 2, "ann"), ("u1", "cat food prices", "d4", 0, "bo"),
                                 ("u1", "cat food prices", "d1", 1, "ann"), ("u2", "interest rates", "d6", 2, "ann"),
                                 ("q3", "training a young dog", "d7", 0, "ann"),  # the data's own label wins
                                 ("q3", "training a young dog", "d5", 1, "ann"),
                                 ("zz", "no such query here", "d1", 2, "ann")])
    labelled, counts = with_stored_judgments(ds, store)
    assert labelled.qrels[JUDGED] == {"u1": {"d4": 0, "d1": 1}, "u2": {"d6": 2}}  # lower median of 2 and 0
    assert labelled.qrels["test"]["q3"] == {"d7": 2, "d2": 1, "d8": 0, "d5": 1}
    assert (counts.queries, counts.relevant, counts.pairs) == (3, 3, 5)
    mine, _ = with_stored_judgments(ds, store, prefer="judgments")
    assert mine.qrels["test"]["q3"]["d7"] == 0
    assert labelled.queries_hash == ds.queries_hash and labelled.content_hash != ds.content_hash
    # a shared deployment: a judge another session made and did not publish is not counted
    store.put_judgments(corpus, [("u2", "interest rates", "d3", 2, "cy")], claim=Claim("app:other", True, ("cy",)))
    me = Viewer("app:me", shared=True)
    assert "d3" not in with_stored_judgments(ds, store, me)[0].qrels[JUDGED]["u2"]
    assert with_stored_judgments(ds, store)[0].qrels[JUDGED]["u2"] == {"d6": 2, "d3": 2}
    assert with_stored_judgments(ds, None)[0] is ds
    with pytest.raises(ValueError):  # a copy with other labels shares the runs: never other queries
        Workspace(ds, store).with_labels(toy_dataset)
    ws = Workspace(ds, store)
    bm25 = ws.bm25
    copy = ws.with_labels(labelled)  # the indexes built shared, the weights tuned on labels its own
    assert copy.dataset is labelled and copy.bm25 is bm25 and copy.system_states() == {}
