"""BM25 scores against rank-bm25 (the reference), explanations, tokenization."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from retrieval.index.bm25_index import BM25Index
from retrieval.index.tokenize import Tokenizer
from tests.conftest import DEMO, shared_dataset

IDF = {
    "lucene": lambda n, df: math.log(1 + (n - df + 0.5) / (df + 0.5)),
    "robertson": lambda n, df: math.log(max(1.0, (n - df + 0.5) / (df + 0.5))),
    "atire": lambda n, df: math.log(n / df),
}


def reference(tokens, method, k1, b):
    """rank-bm25's BM25Okapi with the idf of ``method``; its tf part is tf·(k1+1)/(tf + k1·norm)."""

    class Ref(BM25Okapi):
        def _calc_idf(self, nd):
            for word, freq in nd.items():
                self.idf[word] = IDF[method](self.corpus_size, freq)

    ref = Ref(tokens, k1=k1, b=b)
    scale = 1.0 if method == "atire" else 1.0 / (k1 + 1)  # Lucene/Robertson drop the (k1+1)
    return lambda q: ref.get_scores(q) * scale


def corpus_texts():
    from retrieval.data.readers import load_dataset
    try:
        ds = load_dataset(shared_dataset("scifact"))
        docs = list(ds.docs.values())[:800]
        queries = list(ds.queries.values())[:40]
    except pytest.skip.Exception:
        ds = load_dataset(DEMO)
        docs, queries = list(ds.docs.values()), list(ds.queries.values())
    return [d.id for d in docs], [d.full_text for d in docs], queries


@pytest.mark.parametrize("method,k1,b", [("lucene", 0.9, 0.4), ("lucene", 1.5, 0.75),
                                         ("robertson", 1.2, 0.75), ("atire", 0.9, 0.4)])
def test_scores_match_rank_bm25(method, k1, b):
    ids, texts, queries = corpus_texts()
    index = BM25Index(ids, texts, k1=k1, b=b, method=method)
    ref = reference(index.tokenizer.tokenize_many(texts), method, k1, b)
    for q in queries:
        expected = ref(index.tokenizer(q))
        got = index.scores(q)
        np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-5)


def test_search_ranks_by_score_and_drops_non_matching(toy_dataset):
    docs = toy_dataset.docs
    index = BM25Index(list(docs), [d.full_text for d in docs.values()])
    run = index.search({"a": "cat mat", "b": "zebra xylophone", "c": "the of"}, k=5)
    assert run["b"] == [] and run["c"] == []  # no indexed term / only stopwords
    hits = run["a"]
    assert hits[0][0] == "d1"
    assert {d for d, _ in hits} == {"d1", "d4"}  # only documents holding "cat" or "mat"
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True)
    full = index.scores("cat mat")
    assert full[0] == pytest.approx(hits[0][1], rel=1e-6)


def test_k_larger_than_corpus_is_clamped(toy_dataset):
    docs = toy_dataset.docs
    index = BM25Index(list(docs), [d.full_text for d in docs.values()])
    assert [d for d, _ in index.search({"q": "cat"}, k=1000)["q"]] in (["d1", "d4"], ["d4", "d1"])


def test_explain_sums_to_score_and_names_missing_terms():
    ids, texts, queries = corpus_texts()
    index = BM25Index(ids, texts)
    for q in queries[:10]:
        scores = index.scores(q)
        for row in np.argsort(-scores)[:3]:
            parts = index.explain(q, int(row))
            assert sum(p.score for p in parts) == pytest.approx(float(scores[row]), rel=1e-4, abs=1e-5)
            for p in parts:
                assert (p.tf == 0) == (p.score == 0)
    parts = index.explain("zebra " + queries[0], 0)
    zebra = next(p for p in parts if p.term == "zebra")
    assert zebra.tf == 0 and zebra.score == 0 and zebra.query_words == ("zebra",)


def test_tokenizer_options():
    text = "The Runners were running quickly to the cafés"
    assert Tokenizer()(text) == ["runner", "were", "run", "quick", "café"]
    assert Tokenizer(stemmer=None)(text) == ["runners", "were", "running", "quickly", "cafés"]
    assert Tokenizer(stopwords=None, stemmer=None)(text)[0] == "the"
    assert "were" not in Tokenizer(stopwords="en_plus")(text)
    assert Tokenizer(lowercase=False, stemmer=None, stopwords=None)("Cat cat") == ["Cat", "cat"]
    with pytest.raises(ValueError, match="stopword list"):
        Tokenizer(stopwords="klingon")
    spans = Tokenizer().spans("Running dogs")
    assert spans == [(0, 7, "run"), (8, 12, "dog")]


def test_bad_parameters():
    with pytest.raises(ValueError, match="method"):
        BM25Index(["a"], ["x"], method="bm42")
    with pytest.raises(ValueError, match="empty corpus"):
        BM25Index([], [])


def test_a_saved_index_scores_and_explains_like_the_built_one(tmp_path):
    from retrieval.store import Store

    texts = ["the cat sat on the mat", "a dog chased the cat", "stock markets fell", "soup stock simmered",
             "cats and dogs and cats"]
    ids = [f"d{i}" for i in range(len(texts))]
    built = BM25Index(ids, texts, k1=1.2, b=0.6)
    store = Store(tmp_path / "store.sqlite3")
    store.put_bm25("k", "corpus", built.to_bytes())
    loaded = BM25Index.from_bytes(Store(tmp_path / "store.sqlite3").get_bm25("k"), ids, texts, k1=1.2, b=0.6)
    for q in ("cat", "stock soup", "dogs chasing cats", "unknownword"):
        np.testing.assert_array_equal(loaded.scores(q), built.scores(q))
        assert loaded.explain(q, 4) == built.explain(q, 4)
    assert loaded.avgdl == built.avgdl and loaded.df == built.df
    with pytest.raises(ValueError, match="another corpus"):
        BM25Index.from_bytes(built.to_bytes(), ids[:2], texts[:2])


def test_reopening_a_corpus_reads_its_bm25_index_from_the_store(toy_dataset, tmp_path):
    from retrieval.store import Store
    from retrieval.workspace import Workspace

    class CountingTokenizer(Tokenizer):
        """The real tokenizer, counting the corpus texts it tokenizes."""
        texts = 0

        def tokenize_many(self, texts):
            CountingTokenizer.texts += len(texts)
            return super().tokenize_many(texts)

    path = tmp_path / "store.sqlite3"
    first = Workspace(toy_dataset, Store(path), tokenizer=CountingTokenizer()).bm25
    assert CountingTokenizer.texts == len(toy_dataset.docs)
    more_queries = toy_dataset.with_queries({"q9": "tidal energy"})  # another data set, the same corpus
    again = Workspace(more_queries, Store(path), tokenizer=CountingTokenizer()).bm25
    assert CountingTokenizer.texts == len(toy_dataset.docs)  # read back, not tokenized again
    np.testing.assert_array_equal(again.scores("tidal energy storage"), first.scores("tidal energy storage"))
    assert Workspace(toy_dataset, Store(path), tokenizer=CountingTokenizer(), k1=1.5).bm25  # other settings: built
    assert CountingTokenizer.texts == 2 * len(toy_dataset.docs)


def test_an_index_larger_than_sqlite_allows_is_not_kept(tmp_path):
    import sqlite3

    from retrieval.store import Store

    store = Store(tmp_path / "store.sqlite3")
    store.db.conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 1000)  # SQLite's 1 GB default, scaled down
    assert store.put_bm25("big", "corpus", b"x" * 2000) is False and store.get_bm25("big") is None
    assert store.put_bm25("small", "corpus", b"x" * 500) is True and store.get_bm25("small") == b"x" * 500


def test_max_score_bounds_every_document_and_is_approached():
    """BM25's largest possible score for a query: no document exceeds it, and one holding every
    query term very often comes within a few percent of it."""
    from retrieval.index.bm25_index import BM25Index

    texts = ["the cat sat on the mat", "a dog barked at the cat", "stocks fell on rate fears", "cat food prices rose"]
    for method in BM25Index.METHODS:
        index = BM25Index([f"d{i}" for i in range(len(texts))], texts, method=method)
        query = "cat food cat"
        bound = index.max_score(query)
        assert bound > 0 and index.scores(query).max() <= bound
        saturated = sum(c.score for c in index.explain_text(query, "cat food " * 400, dl=index.avgdl))
        assert saturated == pytest.approx(bound, rel=0.01)
    assert index.max_score("zebra") == 0.0


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire"])
def test_search_in_blocks_is_each_query_ranked_alone_on_bm25s_own_scores(method):
    """``search`` scores queries a block at a time and ranks a block at once: the floats are bm25s's
    own (``get_scores_from_ids``, to the bit) and the ranking is each query's ``top_k``, whatever
    the block budgets (a query per block, a few, all)."""
    from retrieval.index.top_k import top_k

    ids, texts, queries = corpus_texts()
    queries = {f"q{i}": q for i, q in enumerate(queries)} | {"stop": "the of", "none": "zebra xylophone"}
    index = BM25Index(ids, texts, method=method)
    expected = {}
    for qid, q in queries.items():
        term_ids = index._engine.get_tokens_ids(index.tokenizer(q))
        theirs = index._engine.get_scores_from_ids(term_ids) if term_ids else np.zeros(len(ids), np.float32)
        assert np.array_equal(index.scores(q), theirs)
        rows, top = top_k(theirs, 10)
        expected[qid] = list(zip([ids[r] for r in rows], top.tolist()))
    assert index.search(queries, 10) == expected
    for cells, postings in ((1, 1), (3 * len(ids), 10 ** 9), (10 ** 9, 500)):
        index.CELLS_PER_BLOCK, index.POSTINGS_PER_BLOCK = cells, postings
        blocks = index._blocks(list(queries.values()))
        assert [b[0] for b in blocks] == sorted({b[0] for b in blocks}) and blocks[-1][1] == len(queries)
        assert index.search(queries, 10) == expected
    index.POSTINGS_PER_BLOCK = 1  # every query past the budget: added term by term, the same floats
    assert all(np.array_equal(index.scores(q), index._engine.get_scores_from_ids(ids))
               for q in queries.values() if (ids := index._engine.get_tokens_ids(index.tokenizer(q))))



# ---- the words a list of terms shows: as typed ----------------------------------------------
TYPED_INDEX = BM25Index(["a", "b", "c"], ["You can fix it: it won't leak, and O'Brien's tap can't drip.",
                                          "t is a letter; can is a tin; don't drip",
                                          "the faucet drips, the tap leaks"])
TYPED = ["can't", "Can't", "won't", "O'Brien's", "don’t", "it's", "rock'n'roll", "l'eau", "'tis", "can", "t",
         "tap", "Dripping", "faucets", "the", "leak", "x"]


def shown_words(query: str) -> list[str]:
    """Every word the term lists of ``query`` show for each document (the Search view's missing terms and
    BM25 terms, the failure cards' too: ``ui.present.search``), each "/"-joined alternative apart."""
    from ui.present.search import typed_contributions, typed_terms

    terms = TYPED_INDEX.query_terms(query)
    out = []
    for row in range(3):
        parts = TYPED_INDEX.explain(terms, row)
        out += [w for w, _ in typed_terms([p.term for p in parts if p.tf == 0], terms.term_words)]
        out += [w for w, _, _ in typed_contributions([(p.term, p.score) for p in parts if p.tf > 0], terms.term_words)]
    return [alternative for w in out for alternative in w.split("/")]


def test_a_contraction_is_shown_whole_and_matched_by_its_tokens():
    """"can't" is matched as the index reads it ("can" and "t"), and shown as typed: never "can" + "t"."""
    from ui.present.search import typed_contributions, typed_terms

    terms = TYPED_INDEX.query_terms("Why can't the tap drip")
    assert terms.names == ["whi", "can", "t", "tap", "drip"]  # matching: the index's tokens (stems)
    assert terms.term_words == {"whi": "why", "can": "can't", "t": "can't", "tap": "tap", "drip": "drip"}
    assert typed_terms(["whi", "can", "t"], terms.term_words) == [("why", ["whi"]), ("can't", ["can", "t"])]
    parts = TYPED_INDEX.explain(terms, 0)
    by_word = typed_contributions([(p.term, p.score) for p in parts if p.tf > 0], terms.term_words)
    assert [(w, t) for w, t, _ in by_word] == [("can't", ["can", "t"]), ("tap", ["tap"]), ("drip", ["drip"])]
    assert sum(v for _, _, v in by_word) == pytest.approx(sum(p.score for p in parts))  # the same BM25 score
    assert set(shown_words("Why can't the tap drip")) == {"why", "can't", "tap", "drip"}
    assert TYPED_INDEX.query_terms("can or can't").term_words == {"can": "can/can't", "t": "can't"}


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(TYPED) | st.text(alphabet="abtX'’-_ 1", min_size=1, max_size=6), min_size=1,
                max_size=6),
       st.sampled_from([" ", ", ", " - ", "'", "’ "]))
def test_every_word_a_term_list_shows_was_typed_whole(words, between):
    """Each word a term list shows is a word of the query as the user typed it (case aside): a
    substring of it that no letter, and no apostrophe between letters, continues on either side."""
    query = between.join(words)
    typed = query.lower()
    for word in shown_words(query):
        assert word and word in typed, (query, word)
        whole = re.compile(rf"(?<!\w)(?<!\w['’]){re.escape(word)}(?!\w)(?!['’]\w)")
        assert whole.search(typed), (query, word)
