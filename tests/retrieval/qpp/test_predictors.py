"""The predictors against hand computations on a tiny corpus and on short lists, and against independent
computations (BM25's own scoring of the corpus as one text; clarity summed over the whole vocabulary)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from retrieval.index.bm25_index import BM25Index
from retrieval.index.tokenize import Tokenizer
from retrieval.qpp import predictors
from retrieval.qpp.statistics import CorpusStatistics
from retrieval.systems.ql import QLIndex

TEXTS = ["cat cat dog", "dog fish", "bird"]  # N = 3; df: cat 1, dog 2, fish 1, bird 1; cf: cat 2, dog 2; |C| = 6


@pytest.fixture(scope="module")
def stats() -> CorpusStatistics:
    return CorpusStatistics(QLIndex(TEXTS, Tokenizer(), ["d1", "d2", "d3"]))


def test_corpus_statistics_are_the_hand_counted_ones(stats):
    q = stats.query("cat dog dog zebra")
    assert stats.n == 3 and stats.total == 6 and stats.avgdl == 2
    assert dict(zip(q.ids.tolist(), q.df.tolist())) == {stats.vocab["cat"]: 1, stats.vocab["dog"]: 2}
    assert dict(zip(q.ids.tolist(), q.cf.tolist())) == {stats.vocab["cat"]: 2, stats.vocab["dog"]: 2}
    assert dict(zip(q.ids.tolist(), q.counts.tolist())) == {stats.vocab["cat"]: 1, stats.vocab["dog"]: 2}
    assert q.length == 4  # "zebra" is an analyzed term the corpus lacks: counted in |q|, not in the statistics


def test_idf_and_scq_of_a_query_by_hand(stats):
    q = stats.query("cat dog")
    got = predictors.pre_retrieval(stats.n, q.df, q.cf)
    idf_cat, idf_dog = math.log(3 / 1), math.log(3 / 2)
    scq_cat, scq_dog = (1 + math.log(2)) * math.log(1 + 3 / 1), (1 + math.log(2)) * math.log(1 + 3 / 2)
    assert got["avg_idf"] == pytest.approx((idf_cat + idf_dog) / 2)
    assert got["max_idf"] == pytest.approx(idf_cat)
    assert got["avg_scq"] == pytest.approx((scq_cat + scq_dog) / 2)
    assert got["max_scq"] == pytest.approx(scq_cat)


def test_a_query_with_no_term_of_the_corpus_gets_the_lowest_value_of_each(stats):
    q = stats.query("zebra giraffe")
    assert predictors.pre_retrieval(stats.n, q.df, q.cf) == {k: 0.0 for k in predictors.PRE}
    dog = stats.query("dog zebra")  # the commonest held term still scores above a query of none
    assert all(v > 0 for v in predictors.pre_retrieval(stats.n, dog.df, dog.cf).values())


def test_nqc_is_the_top_k_scores_standard_deviation_over_the_corpus_score():
    # scores 4, 2, 0 (k = 3): mean 2, population variance (4 + 0 + 4) / 3; s(D) = -2: |s(D)| = 2
    assert predictors.nqc(np.array([4.0, 2.0, 0.0, -9.0]), -2.0, k=3) == pytest.approx(math.sqrt(8 / 3) / 2)
    assert predictors.nqc(np.array([]), 1.0) is None
    assert predictors.nqc(np.array([1.0, 0.5]), 0.0) is None  # s(D) = 0: no denominator


def test_wig_is_the_mean_gain_of_the_top_5_over_the_corpus_per_root_query_term():
    scores = np.array([9.0, 7.0, 5.0, 3.0, 1.0, 100.0])  # the sixth is past k = 5
    assert predictors.wig(scores, 2.0, query_terms=4) == pytest.approx(((9 + 7 + 5 + 3 + 1) / 5 - 2) / 2)
    assert predictors.wig(np.array([3.0]), 1.0, query_terms=0) == pytest.approx(2.0)  # |q| at least 1
    assert predictors.wig(np.array([]), 1.0, 1) is None


def _clarity_over_the_whole_vocabulary(stats: CorpusStatistics, rows: list[int], query: list[str],
                                       lam: float = 0.6) -> float:
    """Clarity summed term by term over every word of the vocabulary, from the definitions alone."""
    counts = stats.rows.toarray()
    p_coll = counts.sum(axis=0) / counts.sum()
    docs = counts[rows]
    p_wd = lam * docs / docs.sum(axis=1, keepdims=True) + (1 - lam) * p_coll
    likelihood = np.array([math.prod(p_wd[i, stats.vocab[t]] for t in query) for i in range(len(rows))])
    p_dq = likelihood / likelihood.sum()
    total = 0.0
    for w in range(counts.shape[1]):
        p_wq = sum(p_dq[i] * p_wd[i, w] for i in range(len(rows)))
        total += p_wq * math.log2(p_wq / p_coll[w])
    return total


@pytest.mark.parametrize("rows, text", [([0, 1], "cat dog"), ([1], "dog"), ([0, 1, 2], "bird dog dog"),
                                        ([2], "cat"), ([1], "cat dog fish")])
def test_clarity_equals_the_sum_over_the_whole_vocabulary(stats, rows, text):
    q = stats.query(text)
    got = predictors.clarity(*stats.top_counts(np.array(rows), q))
    assert got == pytest.approx(_clarity_over_the_whole_vocabulary(stats, rows, stats.tokenizer(text)), abs=1e-12)


def test_clarity_by_hand_on_one_document():
    # one document "a a b" of a corpus where P_coll(a) = 0.5, P_coll(b) = 0.25, the rest 0.25 elsewhere;
    # R = {d}: P(D|Q) = 1, P(a|Q) = 0.6·2/3 + 0.4·0.5 = 0.6, P(b|Q) = 0.6·1/3 + 0.4·0.25 = 0.3
    expected = 0.6 * math.log2(0.6 / 0.5) + 0.3 * math.log2(0.3 / 0.25) + 0.4 * math.log2(0.4) * 0.25
    assert predictors.clarity(np.array([[2.0, 1.0]]), np.array([0.5, 0.25]), np.array([0])) == pytest.approx(expected)
    assert predictors.clarity(np.zeros((0, 2)), np.array([0.5, 0.25]), np.array([0])) is None


def test_coherence_is_the_mean_pairwise_cosine():
    v = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]])  # cosines: 0, 1/√2, 1/√2
    assert predictors.coherence(v) == pytest.approx((0 + 2 / math.sqrt(2)) / 3)
    assert predictors.coherence(v[:1]) is None


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire"])
def test_the_bm25_corpus_score_is_bm25s_score_of_the_corpus_as_one_text(stats, method):
    index = BM25Index(["d1", "d2", "d3"], TEXTS, k1=1.2, b=0.75, method=method)
    q = stats.query("cat dog dog fish")
    got = predictors.bm25_corpus_score(predictors.bm25_idf(method, q.df, stats.n), q.counts, q.cf, stats.total,
                                       stats.avgdl, 1.2, 0.75, method)
    whole = sum(c.score for c in index.explain_text("cat dog dog fish", " ".join(TEXTS)))
    assert got == pytest.approx(whole)


def test_the_query_likelihood_corpus_score_is_the_collection_models_log_likelihood(stats):
    q = stats.query("cat dog dog zebra")  # P(cat|C) = P(dog|C) = 2/6; zebra left out
    assert predictors.ql_corpus_score(q.counts, q.cf, stats.total, 1000.0) == pytest.approx(3 * math.log(2 / 6))


def test_every_predictor_is_declared_once_with_its_orientation_and_citation():
    keys = [p.key for p in predictors.PREDICTORS]
    assert keys == ["avg_idf", "max_idf", "avg_scq", "max_scq", "nqc", "wig", "clarity", "coherence", "disagreement"]
    assert {p.key for p in predictors.PREDICTORS if p.higher_means == "harder"} == {"disagreement"}
    assert all(p.citation.title and p.citation.section for p in predictors.PREDICTORS)

