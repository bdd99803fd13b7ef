"""A weighted query through the in-process lexical seam, on the demo corpus: Σ_t w_t · bm25(t, d) to the
bit (term by term in float32, as the index sums a text query), the formula's own value (rank-bm25's
per-term scores, through ``explain``), a text query's floats when the weights are its counts, its top k
the top of its scores, and a weighted query that is not one refused in one line. (Milvus Lite answers
the same: ``tests/retrieval/index/engines/test_engines.py``.)"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.index.bm25_index import BM25Index
from retrieval.index.terms import WeightedQuery
from retrieval.index.top_k import top_k
from tests.conftest import DEMO


@pytest.fixture(scope="module")
def index():
    from retrieval.data.readers import load_dataset

    demo = load_dataset(DEMO)
    return BM25Index(demo.doc_ids, [d.full_text for d in demo.docs.values()])


def demo_terms(index: BM25Index) -> list[str]:
    """Terms of the demo corpus, from rare to common, and one it never holds."""
    common = sorted(index.df, key=lambda t: (index.df[t], t))
    return [*common[::max(1, len(common) // 40)][:40], "zzzunheard"]


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_weighted_scores_are_the_weighted_sum_of_single_term_scores(index, data):
    terms = data.draw(st.lists(st.sampled_from(demo_terms(index)), min_size=1, max_size=12, unique=True))
    weights = data.draw(st.lists(st.floats(0, 5, allow_nan=False, width=32), min_size=len(terms),
                                 max_size=len(terms)))
    query = WeightedQuery.of(zip(terms, weights))
    expected = np.zeros(len(index), dtype=np.float32)
    for term, weight in zip(terms, weights):  # in the query's order, in float32, as the index sums
        expected += np.float32(weight) * index.scores(WeightedQuery.of([(term, 1.0)]))
    got = index.scores(query)
    assert np.array_equal(got, expected)
    rows = np.arange(0, len(index), 5)
    assert np.array_equal(index.scores_at(query, rows), expected[rows])
    formula = [sum(c.score for c in index.explain(query, r)) for r in rows]  # the BM25 formula, term by term
    np.testing.assert_allclose(got[rows], formula, rtol=1e-5, atol=1e-5)
    want_rows, want_scores = top_k(expected, 10, tie_rank=index.tie_rank)  # ties as trec_eval ranks them
    top_rows, top_scores = index.top(query, 10)
    assert top_rows.tolist() == want_rows.tolist() and np.array_equal(top_scores, want_scores)
    assert index.search({"q": query}, 10)["q"] == list(zip([index.doc_ids[r] for r in want_rows],
                                                             want_scores.tolist()))


def test_integer_weights_score_as_the_text_query_with_repeated_terms(index):
    for text in ("leaky faucet faucet dripping faucet", "cold cold nose spray", "the faucet"):
        counted = WeightedQuery.counted(index.tokenizer(text))
        np.testing.assert_allclose(index.scores(counted), index.scores(text), rtol=1e-6, atol=1e-6)
        assert index.top(counted, 10)[0].tolist() == index.top(text, 10)[0].tolist()
    assert WeightedQuery.counted(["faucet", "leak", "faucet"]).terms == (("faucet", 2.0), ("leak", 1.0))


def test_text_and_weighted_queries_searched_together_rank_as_each_alone(index):
    """One ``search`` of both kinds (blocks of mixed queries, within and past the budgets): each query's
    list is the one it gets alone; a text query's floats are untouched by a weighted one beside it."""
    queries = {"text": "leaky faucet", "weighted": WeightedQuery.of([("faucet", 0.25), ("leak", 3.0)]),
               "empty": WeightedQuery(()), "unheard": WeightedQuery.of([("zzzunheard", 2.0)])}
    alone = {q: index.search({q: text}, 10)[q] for q, text in queries.items()}
    assert alone["empty"] == [] and alone["unheard"] == []
    assert index.search(queries, 10) == alone
    index.POSTINGS_PER_BLOCK = 1  # every query past the budget: added term by term
    try:
        assert index.search(queries, 10) == alone
    finally:
        del index.POSTINGS_PER_BLOCK


@pytest.mark.parametrize("terms, problem", [
    ((("faucet", -1.0),), "finite number of 0 or more"),
    ((("faucet", float("nan")),), "finite number of 0 or more"),
    ((("faucet", float("inf")),), "finite number of 0 or more"),
    ((("faucet", True),), "finite number of 0 or more"),
    ((("faucet", 1.0), ("faucet", 2.0)), "appears twice"),
    ((("two words", 1.0),), "without spaces"),
    ((("", 1.0),), "without spaces"),
    ((("faucet",),), "(term, weight) pair"),
])
def test_a_weighted_query_that_is_not_one_is_refused(terms, problem):
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        WeightedQuery(terms)
