"""The failure rules as a pure function of labels and ranks (no workspace): each category on
hand-made ranks, with the default thresholds (top 10, low 100, fp_top 3, depth 1000)."""
from __future__ import annotations

import pytest

from retrieval.evaluation.failure_gallery import headline
from retrieval.evaluation.failure_rules import CATEGORIES, SPARSE_CATEGORIES, Thresholds, classify


def ranks_of(**lists):
    """system -> query -> doc -> rank, from system=[(query, [doc, doc, ...]), ...] (rank = position)."""
    return {s: {q: {d: i for i, d in enumerate(docs, 1)} for q, docs in rows} for s, rows in lists.items()}


def padded(docs_at: dict[int, str], length: int) -> list[str]:
    """``length`` documents: the chosen ones at their ranks, the same non-relevant fillers x1, x2, …
    in order around them (so every system ranks the fillers alike and none is a false positive)."""
    fillers = iter(f"x{i}" for i in range(1, length + 1))
    return [docs_at[rank] if rank in docs_at else next(fillers) for rank in range(1, length + 1)]


def test_an_exact_match_miss_is_the_mirror_of_a_vocabulary_mismatch():
    labels = {"code": {"e24": 2}, "words": {"leak": 2}}
    ranks = ranks_of(bm25=[("code", padded({1: "e24"}, 300)), ("words", padded({250: "leak"}, 300))],
                     dense=[("code", padded({240: "e24"}, 300)), ("words", padded({2: "leak"}, 300))],
                     hybrid=[("code", padded({3: "e24"}, 300)), ("words", padded({1: "leak"}, 300))])
    found = classify(labels, ranks)
    assert found.found["exact_match_miss"] == [("code", "e24", 239)]
    assert found.found["vocabulary_mismatch"] == [("words", "leak", 248)]
    assert found.query_categories == {"code": ["exact_match_miss"], "words": ["vocabulary_mismatch"]}
    assert headline("exact_match_miss", {"bm25": 1, "dense": 240}) == "dense 240 → BM25 1"
    assert headline("exact_match_miss", {"bm25": 4, "dense": None}) == "dense — → BM25 4"


def test_not_retrieved_counts_as_depth_plus_one_and_thresholds_are_inclusive():
    labels = {"q": {"a": 1, "b": 2}}
    ranks = ranks_of(bm25=[("q", ["b", "a"])], dense=[("q", padded({100: "a"}, 120))], hybrid=[("q", ["a"])])
    found = classify(labels, ranks)  # b: BM25 1, dense never (1001); a: BM25 2, dense 100 (not below 100)
    assert found.found["exact_match_miss"] == [("q", "b", 1000)]
    tight = classify(labels, ranks, Thresholds(low=99))
    assert tight.found["exact_match_miss"] == [("q", "b", 1000), ][:1] and tight.counts["exact_match_miss"] == 1


def test_queries_without_a_relevant_label_are_skipped_and_every_category_is_counted():
    labels = {"none": {"z": 0}, "q": {"a": 2}}
    ranks = ranks_of(bm25=[("q", ["a"])], dense=[("q", ["a"])], hybrid=[("q", ["a"])])
    found = classify(labels, ranks)
    assert found.skipped == ["none"] and found.query_categories == {"q": []}
    assert found.categories == [c for c in CATEGORIES if "finetuning" not in c and c not in SPARSE_CATEGORIES]
    assert set(found.counts.values()) == {0}
    tuned = {**ranks, "tuned_dense": {}, "tuned_hybrid": {}, "splade": {}}
    assert classify(labels, tuned, finetuning=True).categories == list(CATEGORIES)


def test_expansion_bridges_what_exact_matching_misses_when_learned_sparse_is_given():
    labels = {"words": {"leak": 2, "drip": 1}, "both": {"a": 1}}
    ranks = ranks_of(bm25=[("words", padded({250: "leak", 120: "drip"}, 300)), ("both", ["a"])],
                     dense=[("words", padded({40: "leak"}, 300)), ("both", ["a"])],
                     hybrid=[("words", padded({30: "leak"}, 300)), ("both", ["a"])],
                     splade=[("words", padded({7: "leak", 3: "drip"}, 300)), ("both", ["a"])])
    found = classify(labels, ranks)
    assert found.found["bridged_by_expansion"] == [("words", "leak", 243)]  # the largest move: 250 → 7, not 120 → 3
    assert found.query_categories == {"words": ["bridged_by_expansion", "both_fail"], "both": []}
    assert headline("bridged_by_expansion", {"bm25": 250, "splade": 7}) == "BM25 250 → SPLADE 7"
    assert headline("bridged_by_expansion", {"bm25": None, "splade": 7}) == "BM25 — → SPLADE 7"


def test_tuned_system_must_be_dense_or_hybrid():
    with pytest.raises(ValueError, match="tuned_system must be 'dense' or 'hybrid'"):
        Thresholds(tuned_system="bm25")


def test_any_two_systems_compared_mirror_the_built_in_pair():
    labels = {"code": {"e24": 2}, "words": {"leak": 2}}
    ranks = ranks_of(bm25=[("code", padded({1: "e24"}, 300)), ("words", padded({250: "leak"}, 300))],
                     dense=[("code", padded({240: "e24"}, 300)), ("words", padded({2: "leak"}, 300))],
                     hybrid=[("code", padded({3: "e24"}, 300)), ("words", padded({1: "leak"}, 300))])
    found = classify(labels, ranks, pair=("dense", "bm25"))  # A = dense, B = BM25
    assert found.pair == ("dense", "bm25") and found.categories[-2:] == ["pair_b_finds", "pair_a_finds"]
    assert found.found["pair_b_finds"] == found.found["exact_match_miss"] == [("code", "e24", 239)]
    assert found.found["pair_a_finds"] == found.found["vocabulary_mismatch"] == [("words", "leak", 248)]
    assert headline("pair_b_finds", {"bm25": 1, "dense": 240}, pair=("dense", "bm25")) == "dense 240 → BM25 1"
    with pytest.raises(ValueError, match="two different systems"):
        classify(labels, ranks, pair=("bm25", "bm25"))


def test_on_queries_judged_in_the_app_an_unjudged_document_is_counted_apart_not_as_a_false_positive():
    """The same ranks: with the data set's labels (unlisted = not relevant) the unlabelled document
    dense puts first is a semantic false positive and BM25's unlabelled first a lexical trap; on a
    query whose labels came from judging a pool, nobody judged them: unjudged at the top, no failure."""
    labels = {"q": {"rel": 2, "judged0": 0}, "trap": {"rel": 1}}
    ranks = ranks_of(bm25=[("q", padded({5: "rel", 1: "judged0"}, 300)), ("trap", padded({1: "new", 2: "rel"}, 300))],
                     dense=[("q", padded({1: "unseen", 2: "rel"}, 300)), ("trap", padded({1: "rel"}, 300))],
                     hybrid=[("q", ["rel"]), ("trap", ["rel"])])
    ranks["bm25"]["q"].pop("unseen", None)
    ranks["dense"]["trap"].pop("new", None)
    data = classify(labels, ranks)
    assert "unjudged_at_top" not in data.categories and data.pooled == []
    assert data.found["semantic_false_positive"] == [("q", "unseen", 1000)]
    assert {row[:2] for row in data.found["lexical_trap"]} == {("trap", "new"), ("q", "judged0")}
    pooled = classify(labels, ranks, pooled={"q", "trap"})
    assert pooled.categories.index("unjudged_at_top") == pooled.categories.index("lexical_trap") + 1
    assert pooled.found["semantic_false_positive"] == []
    assert [row[:2] for row in pooled.found["lexical_trap"]] == [("q", "judged0")]  # judged not relevant: still a trap
    assert {row[:2] for row in pooled.found["unjudged_at_top"]} == {("q", "unseen"), ("trap", "new")}
    assert pooled.counts["unjudged_at_top"] == 2 and sorted(pooled.pooled) == ["q", "trap"]
    assert headline("unjudged_at_top", {"bm25": None, "dense": 1}) == "BM25 — → dense 1"
