"""The collapse check reads the corpus sample's vectors the dense build made, never encodes them again:
without a store (``evaluate --no-store``, a bench) they come from the dense index, and they are the
vectors the encoder gives those documents, so the check says what encoding them would say."""
from __future__ import annotations

import pytest

import retrieval.index.dense_index as dense_index
from retrieval import Workspace
from retrieval.systems import reliability
from retrieval.systems.reliability import dense_reliability, sample, sample_rows, spread


def test_the_corpus_sample_is_read_from_the_dense_index_not_encoded(toy_dataset, tiny_model_dir, monkeypatch):
    ws = Workspace(toy_dataset, None, model=str(tiny_model_dir))
    assert ws.dense.index is not None  # the corpus encoded, as a search or an evaluation does before the hybrid asks
    encoded: list[str] = []
    real = dense_index.embed_corpus

    def recording(encoder, texts, store=None, progress=None):
        encoded.extend(texts)
        return real(encoder, texts, store, progress)

    monkeypatch.setattr(dense_index, "embed_corpus", recording)
    reliability._checks.clear()
    check = dense_reliability(ws)
    texts = sample(ws.corpus.texts)
    assert texts and not set(texts) & set(encoded)  # only the English reference passages were encoded
    assert set(encoded) <= set(reliability.reference_texts())
    # the same figure as encoding the sample now
    assert check.spread == pytest.approx(spread(ws.encoder.encode(texts)), abs=1e-5)


def test_the_sample_rows_are_the_sampled_texts_empty_ones_left_out():
    texts = [f"passage {i}" if i % 3 else "  " for i in range(500)]
    rows = sample_rows(texts, n=50, seed=4)
    assert len(rows) == 50 and rows == sorted(rows) and all(texts[i].strip() for i in rows)
    assert [texts[i] for i in rows] == sample(texts, n=50, seed=4)
    assert sample_rows(texts[:9], n=50) == [1, 2, 4, 5, 7, 8]
