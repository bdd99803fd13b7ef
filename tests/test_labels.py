"""Judgments as labels: merged into the data's own splits, or new ``judged`` / ``train`` splits."""
from __future__ import annotations

from retrieval.dataset import Dataset
from retrieval.labels import JUDGED, with_judgments


def test_judgments_of_labelled_queries_merge_into_their_split(toy_dataset):
    judged = {"q3": {"d7": 0, "d1": 2}, "q1": {"d2": 1}}  # q3 in test, q1 in train
    ds = with_judgments(toy_dataset, judged)
    assert ds.qrels["test"]["q3"] == {"d7": 2, "d2": 1, "d8": 0, "d1": 2}  # the data's own d7 label wins
    assert ds.qrels["train"]["q1"]["d2"] == 1 and set(ds.splits) == {"train", "test"}
    mine = with_judgments(toy_dataset, judged, prefer="judgments")
    assert mine.qrels["test"]["q3"]["d7"] == 0
    assert ds.corpus_hash == toy_dataset.corpus_hash and ds.content_hash != toy_dataset.content_hash
    assert toy_dataset.qrels["test"]["q3"] == {"d7": 2, "d2": 1, "d8": 0}  # the original is unchanged


def test_judged_queries_without_labels_get_a_seeded_tuning_part_and_a_reported_part(toy_dataset):
    bare = Dataset("bare", toy_dataset.docs, {f"u{i}": f"query {i}" for i in range(10)})
    judged = {f"u{i}": {"d1": i % 3} for i in range(10)}
    ds = with_judgments(bare, judged)
    assert list(ds.qrels) == [JUDGED, "train"] and ds.default_split() == JUDGED
    assert len(ds.qrels["train"]) == 5 and len(ds.qrels[JUDGED]) == 5
    assert not set(ds.qrels["train"]) & set(ds.qrels[JUDGED])
    assert with_judgments(bare, judged).qrels == ds.qrels  # seeded
    with_train = with_judgments(toy_dataset.with_queries({"u1": "query 1"}), {"u1": {"d1": 2}})
    assert with_train.qrels[JUDGED] == {"u1": {"d1": 2}} and "u1" not in with_train.qrels["train"]
