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


# ---- WLP (Chang et al., ICLR 2020, §3) and combinations of the tasks ------------------------

def linked_corpus() -> Dataset:
    """A hand-built corpus: a ↔ b (a cycle), a → c, c → itself and to a missing page, e → a from a page
    with no sentence; d unlinked. Every sentence is unique, so a pair's query and passage name their pages."""
    docs = [
        Document("a", "Alpha", "Alpha leads with one sentence here. Alpha has a second lead sentence.\n\n## Body\n\n"
                               "Alpha body sentence one goes on. Alpha body sentence two goes on.", ("b", "c")),
        Document("b", "", "Beta lead sentence is this one. Beta lead again right here.\n\n"
                          "Beta second paragraph is never a query.", ("a",)),
        Document("c", "Gamma", "Gamma only paragraph sentence one. Gamma only paragraph sentence two.",
                 ("c", "missing")),
        Document("d", "Delta", "Delta unlinked sentence here. Delta says more here."),
        Document("e", "Epsilon", "Hi.", ("a",)),
    ]
    return Dataset("linked", {d.id: d for d in docs})


def test_first_section_is_the_lead_before_the_first_heading_else_the_first_paragraph():
    from training.pairs import first_section

    assert first_section("# Title\n\nLead one. Lead two.\n\nStill lead.\n\n## History\n\nLater.") == \
        "Lead one. Lead two.\n\nStill lead."  # a heading at the top opens the section; the next one ends it
    assert first_section("Para one here.\n\nPara two here.") == "Para one here."
    assert first_section("  One paragraph. Of two sentences.  ") == "One paragraph. Of two sentences."
    assert first_section("") == ""
    # one pass: 200,000 heading lines before any text (a scan of all that came before at each would not end)
    assert first_section("# h\n" * 200_000 + "Text at last. More of it.\n\nLater.") == "Text at last. More of it."


def test_wlp_pairs_a_lead_sentence_of_the_linked_page_with_a_passage_of_the_page_linking_to_it():
    from training.pairs import first_section, wlp_pairs

    ds = linked_corpus()
    leads = {d.id: sentences(first_section(d.text)) for d in ds.docs.values()}
    body = {d.id: sentences(d.text) for d in ds.docs.values()}
    assert leads["a"] == ["Alpha leads with one sentence here.", "Alpha has a second lead sentence."]
    assert leads["b"] == ["Beta lead sentence is this one.", "Beta lead again right here."]
    expected = {("a", "b"), ("a", "c"), ("b", "a")}  # (links from, links to): c's self-link, e's page make none
    seen_edges, seen_queries = set(), set()
    for seed in range(40):
        pairs = wlp_pairs(ds, seed=seed)
        assert len(pairs) == 3 and {p.task for p in pairs} == {"wlp"}
        edges = set()
        for p in pairs:
            to = [d for d, s in leads.items() if p.query in s]
            frm = [d for d, s in body.items() if any(" ".join(s[i:i + 2]) == p.doc_text for i in range(len(s)))]
            assert len(to) == 1 and len(frm) == 1, p
            assert to != frm  # never a page with itself
            assert p.query not in body[frm[0]]  # the query is the linked page's, the passage the linking one's
            edges.add((frm[0], to[0]))
            seen_queries.add(p.query)
        assert edges == expected
        seen_edges |= edges
    assert "Beta second paragraph is never a query." not in seen_queries  # not in b's first section
    assert "Alpha body sentence one goes on." not in seen_queries  # after a's first heading
    assert set(leads["a"]) | set(leads["b"]) <= seen_queries  # any sentence of the section, drawn at random
    assert wlp_pairs(ds, seed=5) == wlp_pairs(ds, seed=5) and wlp_pairs(ds, 2, seed=5) != wlp_pairs(ds, seed=5)
    assert len(wlp_pairs(ds, 2, seed=5)) == 2


def linked_demo(demo) -> Dataset:
    """The demo's documents, each linking to the next three (a ring)."""
    ids = list(demo.docs)
    docs = {d: Document(d, doc.title, doc.text, tuple(ids[(i + k) % len(ids)] for k in (1, 2, 3)))
            for i, (d, doc) in enumerate(demo.docs.items())}
    return Dataset("linked demo", docs)


def test_a_combination_draws_each_pair_uniformly_from_its_tasks(demo):
    from training.pairs import PRETRAIN_TASKS, counted, pseudo_pairs

    ds = linked_demo(demo)
    assert counted(pseudo_pairs(ds, "ict+bfs+wlp", 30, seed=3)) == {"ict": 10, "bfs": 10, "wlp": 10}
    assert counted(pseudo_pairs(ds, "ict+bfs+wlp", 31, seed=3)) == {"ict": 10, "bfs": 10, "wlp": 11}
    assert counted(pseudo_pairs(ds, "bfs+wlp", 9, seed=3)) == {"bfs": 4, "wlp": 5}
    assert counted(pseudo_pairs(ds, "wlp", 7, seed=3)) == {"wlp": 7}
    assert len(pseudo_pairs(ds, "wlp", None)) == 3 * len(ds.docs)  # one pair per link
    mixed = pseudo_pairs(ds, "ict+bfs+wlp", 60, seed=3)
    assert [p.task for p in mixed] != sorted(p.task for p in mixed)  # shuffled together
    assert set(PRETRAIN_TASKS) == {"ict", "bfs", "wlp", "ict+bfs", "ict+wlp", "bfs+wlp", "ict+bfs+wlp"}
    # a task that can make fewer than its share makes what it can: the hand-built corpus has three links
    small = linked_corpus()
    assert counted(pseudo_pairs(small, "ict+wlp", 20, seed=1)) == {"ict": 4, "wlp": 3}
    with pytest.raises(ValueError, match=r"unknown pseudo-pair task 'wlp\+ict'; choose from ict, bfs, wlp, ict\+bfs"):
        pseudo_pairs(ds, "wlp+ict")


def test_ict_plus_bfs_draws_the_pairs_it_drew_before_wlp(demo):
    """Halves (the odd pair BFS's), ICT seeded with the seed and BFS with the next, shuffled with the seed."""
    import random

    from training.pairs import pseudo_pairs

    for n in (40, 41):
        before = ict_pairs(demo, n // 2, 3) + bfs_pairs(demo, n - n // 2, 4)
        random.Random(3).shuffle(before)
        assert pseudo_pairs(demo, "ict+bfs", n, seed=3) == before


def test_wlp_needs_links_and_says_so_in_one_line(demo):
    from training.pairs import check_links, needs_links

    assert needs_links("ict+bfs+wlp") and needs_links("wlp") and not needs_links("ict+bfs") and not needs_links(None)
    check_links(demo, "ict+bfs")  # no links needed
    check_links(linked_demo(demo), "ict+bfs+wlp")
    with pytest.raises(ValueError, match=r"^demo has no links between its documents: WLP pairs are made from them"):
        check_links(demo, "bfs+wlp")
