"""The label-free hybrid does not let an encoder that cannot read the corpus pull BM25 down: with the
real all-MiniLM-L6-v2 (offline), demo passages written in Greek letters are a language it was not
trained on and a corpus it maps almost alike, so without labels the hybrid is BM25 alone and the
caption says why; the same passages in English keep the equal-weights hybrid."""
from __future__ import annotations

import html
import math

import numpy as np
import pytest

from retrieval import Workspace
from retrieval.data.dataset import Dataset, Document
from retrieval.systems.clear_lambda import LABEL_FREE_LAMBDA, LEX_ONLY
from retrieval.systems.hybrid import CLEAR
from retrieval.systems.reliability import COLLAPSE_RATIO, REFERENCE, dense_reliability, reference_texts, spread
from ui.common import metrics_caption

GREEK = str.maketrans(dict(zip("abcdefghijklmnopqrstuvwxyz", "αβψδεφγηιξκλμνοπϙρστθωςχυζ")))


@pytest.fixture(scope="module")
def minilm():
    from retrieval.index.encoder import load_encoder

    return load_encoder(None, device="cpu", precision="fp32")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One store for the module's workspaces, as one user's store holds every corpus they open: the English
    reference sample's MiniLM vectors (``reliability.reference_texts``) and a corpus's own are encoded once
    and read back after, as the check reads them in use, not encoded again for every test."""
    from retrieval.store import Store

    shared = Store(tmp_path_factory.mktemp("reliability") / "store.sqlite3")
    yield shared
    shared.close()


def small(demo, translate=None, n: int = 60) -> Dataset:
    """The demo's first ``n`` passages and the test queries about them (optionally transliterated)."""
    t = (lambda s: s.translate(translate)) if translate else (lambda s: s)
    docs = {i: Document(i, t(d.title), t(d.text)) for i, d in list(demo.docs.items())[:n]}
    qrels = {q: {d: g for d, g in labels.items() if d in docs} for q, labels in demo.qrels["test"].items()}
    qrels = {q: labels for q, labels in qrels.items() if labels}
    return Dataset("small" + ("-greek" if translate else ""), docs, {q: t(demo.queries[q]) for q in qrels},
                   {"test": qrels})


def test_the_english_reference_text_is_found():
    """Without it the collapse check is off (reference_spread None): the demo corpus, from any install."""
    assert REFERENCE.is_file() and len(reference_texts()) > 100


def test_spread_is_one_minus_the_mean_cosine_between_distinct_rows():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(7, 5))
    unit = v / np.linalg.norm(v, axis=1, keepdims=True)
    cos = unit @ unit.T
    assert spread(v) == pytest.approx(1 - (cos.sum() - 7) / 42)
    assert spread(np.ones((4, 3))) == pytest.approx(0.0)


@pytest.mark.slow
def test_a_corpus_the_encoder_cannot_read_leaves_the_hybrid_to_bm25(demo, minilm, store):
    greek = Workspace(small(demo, GREEK), store, model=minilm)
    check = dense_reliability(greek)
    assert check.language == "el" and check.language_mismatch
    assert check.collapsed and check.spread < COLLAPSE_RATIO * check.reference_spread
    choice = CLEAR.lambda_for(greek, "test")
    assert choice.value == LEX_ONLY and choice.lexical_only and "BM25 alone" in choice.how
    assert "'el'" in choice.how and "almost alike" in choice.how
    hybrid, bm25 = greek.run("hybrid", "test"), greek.run("bm25", "test")
    for qid, hits in bm25.items():  # BM25's order; cosine only breaks BM25's ties and orders what it scores 0
        score = dict(hits)
        assert [score.get(d, 0.0) for d, _ in hybrid[qid][:len(hits)]] == pytest.approx([s for _, s in hits])
    params = greek.system_params("hybrid", "test")  # the cache key: λ, and how BM25 alone scores
    assert params["lambda"] == math.inf and params["bm25_alone"] == "BM25 + 1e-06 × cosine"
    caption = metrics_caption(greek, "test")
    assert "λ = ∞" in caption and "BM25 alone" in caption and "paraphrase" not in caption  # no equal weights here


@pytest.mark.slow
def test_a_corpus_it_reads_keeps_equal_weights(demo, minilm, store):
    english = Workspace(small(demo), store, model=minilm)
    check = dense_reliability(english)
    assert check.reliable and check.language == "en" and check.spread > 0.5 * check.reference_spread
    assert CLEAR.lambda_for(english, "test").value == LABEL_FREE_LAMBDA


@pytest.mark.slow
def test_identifier_lookups_are_left_to_bm25_and_the_caption_says_so(demo, minilm, store):
    base = small(demo)
    codes = {d: f"QX-{4000 + n}" for n, d in enumerate(base.docs)}
    docs = {i: Document(i, d.title, f"{d.text} Part number {codes[i]}.") for i, d in base.docs.items()}
    picked = list(docs)[::6]
    queries = {**{f"code-{d}": codes[d] for d in picked}, **base.queries}
    qrels = {**{f"code-{d}": {d: 1} for d in picked}, **base.qrels["test"]}
    ws = Workspace(Dataset("small-codes", docs, queries, {"test": qrels}), store, model=minilm)
    assert CLEAR.lambda_for(ws, "test").value == LABEL_FREE_LAMBDA  # English: the fusion stays for the other queries
    run = ws.run("hybrid", "test")
    for d in picked:  # the part number's own document first, as BM25 ranks it
        assert run[f"code-{d}"][0][0] == d
    assert ws.system_params("hybrid", "test")["identifier_lookups"]  # in the cache key
    caption = metrics_caption(ws, "test")
    assert f"{len(picked)} of these queries look up an identifier" in caption and "BM25 alone" in caption


@pytest.mark.slow
def test_with_labels_on_a_corpus_the_encoder_cannot_read_bm25_alone_stays_unless_they_beat_it(demo, minilm, store):
    from ui.present.figures import lambda_sweep

    greek = small(demo, GREEK)
    qids = sorted(greek.qrels["test"])
    train, test = qids[::2], qids[1::2]
    split = Dataset(greek.name, greek.docs, greek.queries, {"train": {q: greek.qrels["test"][q] for q in train},
                                                            "test": {q: greek.qrels["test"][q] for q in test}})
    ws = Workspace(split, store, model=minilm)
    fit = CLEAR.lambda_fit(ws, "train")
    assert fit.prior == LEX_ONLY and LEX_ONLY in [lam for lam, _ in fit.grid]  # BM25 alone is on the grid too
    choice = CLEAR.lambda_for(ws, "test")
    assert choice.value == fit.chosen and "tuned on train" in choice.how
    assert "label-free λ ∞ (BM25 alone" in choice.how  # whichever way the fit went, the prior it met is named
    again = CLEAR.lambda_fit(Workspace(split, store, model=minilm), "train")  # read back from the store, ∞ and all
    assert again.prior == LEX_ONLY and again.grid == fit.grid and again.best == fit.best
    assert "∞" in list(lambda_sweep(choice, "test").data[0].x)


@pytest.mark.slow
def test_judged_queries_without_a_train_split_cross_fit_lambda_against_bm25_alone(demo, minilm, store):
    """The judged queries of a corpus the encoder cannot read, in no split: each half is ranked with
    the λ tuned on the other half against the prior BM25 alone, and the caption and the sweep show both."""
    from retrieval.judging.labels import JUDGED, judged_folds, with_judgments
    from ui.present.figures import lambda_sweep

    greek = small(demo, GREEK)
    ds = with_judgments(Dataset(greek.name, greek.docs, greek.queries), greek.qrels["test"])
    ws = Workspace(ds, store, model=minilm)
    choice = CLEAR.lambda_for(ws, JUDGED)
    halves = judged_folds(ds.qrels[JUDGED])
    assert [f.queries for f in choice.folds] == list(halves)
    for fold, other in zip(choice.folds, reversed(halves)):
        fit = CLEAR.lambda_fit(ws, JUDGED, other)
        assert fold.fit == fit and fit.prior == LEX_ONLY and fit.queries == len(other)
        assert all(choice.at(q) == fit.chosen for q in fold.queries)
    caption = html.unescape(metrics_caption(ws, JUDGED))
    assert "cross-fitted: each half evaluated with λ tuned on the other half" in caption
    assert f"λ = {choice.values_shown}" in caption and "(half 1) and" in choice.values_shown
    assert caption.count("label-free λ ∞ (BM25 alone") >= 2  # each half's fit names the prior it met
    names = [t.name for t in lambda_sweep(choice, JUDGED, CLEAR.lambda_fit(ws, JUDGED).grid).data]
    assert any(n.startswith("half 1: λ = ") for n in names) and any(n.startswith("half 2: λ = ") for n in names)
