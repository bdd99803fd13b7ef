"""Training pairs (``training.pairs``): labelled pairs, known positives, cold-start splits, and the
ICT / BFS pseudo pairs, on the toy and demo data sets."""
from __future__ import annotations

import pytest

from retrieval.data.dataset import Dataset, Document
from training.pairs import bfs_pairs, cold_start_split, ict_pairs, known_positives, labelled_pairs, sentences


def test_labelled_pairs_keep_only_relevant_labels(toy_dataset):
    pairs = labelled_pairs(toy_dataset, "train")
    # train: q1 {d1: 2, d4: 0, d5: 1}, q2 {d3: 2, d6: 1} → d4 (label 0) is left out
    assert {(p.query_id, p.doc_id) for p in pairs} == {("q1", "d1"), ("q1", "d5"), ("q2", "d3"), ("q2", "d6")}
    d1 = next(p for p in pairs if p.doc_id == "d1")
    assert d1.query == "cat on a mat" and d1.doc_text == "Cats. The cat sat on the warm mat near the fire."
    assert {(p.query_id, p.doc_id) for p in labelled_pairs(toy_dataset, "train", min_label=2)} == \
        {("q1", "d1"), ("q2", "d3")}
    with pytest.raises(ValueError, match=r"no split 'dev' \(have: train, test\)"):
        labelled_pairs(toy_dataset, "dev")


def test_labelled_pairs_skip_labels_pointing_nowhere(toy_dataset):
    qrels = {"train": {"q1": {"d1": 1, "gone": 2}, "q-missing": {"d2": 1}}}
    ds = Dataset("t", toy_dataset.docs, toy_dataset.queries, qrels)
    assert [(p.query_id, p.doc_id) for p in labelled_pairs(ds, "train")] == [("q1", "d1")]


def test_demo_train_pairs_count_labels_at_least_one(demo):
    expected = sum(1 for docs in demo.qrels["train"].values() for v in docs.values() if v >= 1)
    pairs = labelled_pairs(demo, "train")
    assert len(pairs) == expected == 80  # 90 train labels, 10 of them 0
    assert all(demo.qrels["train"][p.query_id][p.doc_id] >= 1 for p in pairs)


def test_known_positives_cover_every_split(toy_dataset):
    # label > 0 in train or test; label-0 documents (d4, d8) are never positives
    assert known_positives(toy_dataset) == {"q1": {"d1", "d5"}, "q2": {"d3", "d6"},
                                            "q3": {"d7", "d2"}, "q4": {"d5", "d1"}}


def test_cold_start_split_partitions_the_queries(demo):
    test_qids = set(demo.qrels["test"])  # 32 queries
    split = cold_start_split(demo, "test", 0.25, seed=7)
    train, test = set(split.qrels["train"]), set(split.qrels["test"])
    assert split.splits == ["train", "test"]
    assert train.isdisjoint(test) and train | test == test_qids
    assert len(train) == 8 and len(test) == 24  # round(32 · 0.25) = 8
    for q in test_qids:  # labels are carried over unchanged
        assert (split.qrels["train"].get(q) or split.qrels["test"][q]) == demo.qrels["test"][q]
    assert split.docs is demo.docs and split.queries == demo.queries
    assert split.name == "demo[test 25/75 seed 7]"
    # seeded: the same seed gives the same split, another seed another one
    assert set(cold_start_split(demo, "test", 0.25, seed=7).qrels["train"]) == train
    assert set(cold_start_split(demo, "test", 0.25, seed=8).qrels["train"]) != train
    # 0.8 → 26 / 6; a tiny fraction still leaves one query on each side
    assert len(cold_start_split(demo, "test", 0.8).qrels["train"]) == 26
    tiny = cold_start_split(demo, "test", 0.01)
    assert len(tiny.qrels["train"]) == 1 and len(tiny.qrels["test"]) == 31


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.5, 1.5])
def test_cold_start_fraction_must_be_inside_zero_one(demo, fraction):
    with pytest.raises(ValueError, match="between 0 and 1"):
        cold_start_split(demo, "test", fraction)


def test_cold_start_unknown_split(demo):
    with pytest.raises(ValueError, match="no split 'dev'"):
        cold_start_split(demo, "dev", 0.5)


SENT_DOCS = {  # sentences of at least three words; one single-sentence document, one without title
    "a": Document("a", "Rice", "Rinse the rice twice. Boil the water first. Simmer for eighteen minutes. Let it rest."),
    "b": Document("b", "Bread", "Knead the dough well. Let the dough rise overnight. Bake it very hot."),
    "c": Document("c", "Tea", "Warm the pot first."),
    "d": Document("d", "", "Tides follow the moon. Spring tides are the strongest. Neap tides are weak."),
}
SENT_DS = Dataset("sentences", SENT_DOCS)


def test_sentences_split_on_sentence_ends_and_drop_short_ones():
    assert sentences("Rinse the rice twice. Boil it. Simmer for ten minutes! Serve? Is it done?") == \
        ["Rinse the rice twice.", "Simmer for ten minutes!", "Is it done?"]


def test_ict_query_sentence_is_removed_from_its_document():
    pairs = ict_pairs(SENT_DS, seed=3)
    assert len(pairs) == 3  # "c" has one sentence: no pair
    sources = set()
    for p in pairs:
        # the document is "title. the other sentences in order" of exactly one passage
        matches = []
        for doc in SENT_DOCS.values():
            sents = sentences(doc.text)
            if p.query in sents:
                rest = " ".join(s for s in sents if s != p.query)
                if p.doc_text == (f"{doc.title}. {rest}" if doc.title else rest):
                    matches.append(doc.id)
        assert len(matches) == 1, p
        sources.add(matches[0])
        assert p.query not in p.doc_text and p.query_id is None and p.doc_id is None
    assert sources == {"a", "b", "d"}
    assert ict_pairs(SENT_DS, seed=3) == pairs  # seeded: the same seed, the same pairs
    assert any(ict_pairs(SENT_DS, seed=s) != pairs for s in (4, 5, 6))  # other seeds, other sentences
    assert len(ict_pairs(SENT_DS, n=2, seed=3)) == 2


def test_ict_keep_sentence_one_leaves_the_sentence_in():
    for p in ict_pairs(SENT_DS, seed=3, keep_sentence=1.0):
        doc = next(d for d in SENT_DOCS.values() if p.query in sentences(d.text))
        body = " ".join(sentences(doc.text))
        assert p.doc_text == (f"{doc.title}. {body}" if doc.title else body)
        assert p.query in p.doc_text


def test_ict_on_the_demo_corpus(demo):
    pairs = ict_pairs(demo, seed=1)
    assert len(pairs) == 384  # every demo passage has ≥ 3 sentences
    for p in pairs:
        assert p.query not in p.doc_text
    # each query is a sentence of the passage whose title opens the document
    by_title = {}
    for d in demo.docs.values():
        by_title.setdefault(d.title, []).append(d)
    for p in pairs[:50]:
        title = p.doc_text.split(". ", 1)[0]
        assert any(p.query in sentences(d.text) for d in by_title[title])


def test_bfs_title_queries_a_window_of_the_same_document():
    pairs = bfs_pairs(SENT_DS, seed=5, window=2)
    assert len(pairs) == 4  # "c" (title + one sentence) still has a one-sentence window
    for p in pairs:
        doc = next((d for d in SENT_DOCS.values() if d.title == p.query), None)
        if doc is None:  # no title: the lead sentence is the query, the window comes from the rest
            doc = SENT_DOCS["d"]
            sents = sentences(doc.text)
            assert p.query == sents[0]
            body = sents[1:]
        else:
            body = sentences(doc.text)
        windows = {" ".join(body[i:i + 2]) for i in range(max(1, len(body) - 1))}
        assert p.doc_text in windows, p
    assert {p.query for p in pairs} == {"Rice", "Bread", "Tea", "Tides follow the moon."}
    assert bfs_pairs(SENT_DS, seed=5, window=2) == pairs
    # window 1: a single sentence of the document
    for p in bfs_pairs(SENT_DS, seed=5, window=1):
        doc = next((d for d in SENT_DOCS.values() if d.title == p.query), SENT_DOCS["d"])
        assert p.doc_text in sentences(doc.text) and p.doc_text != p.query
