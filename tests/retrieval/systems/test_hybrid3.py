"""The three-way fusion (``retrieval.systems.hybrid3``): BM25, dense and learned sparse scored on one
candidate union, each part normalized to [0, 1]; with μ = 0 it is the CLEAR hybrid exactly; μ is
tuned on training labels only where it beats the label-free μ significantly, cached in the store;
an English-only sparse model on a corpus in another language gets μ = 0; exact scores for PNR."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval import Workspace
from retrieval.data.dataset import Dataset
from retrieval.store import Store
from retrieval.systems import builtin, keys, shown
from retrieval.systems import hybrid3 as h3
from retrieval.systems.clear_lambda import LEX_ONLY
from retrieval.systems.fusion import TIE_BREAK, Candidates, rank_candidates
from retrieval.systems.hybrid import CLEAR
from tests.conftest import store_copy

finite = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(finite, st.floats(-1, 1), finite), min_size=1, max_size=12),
       st.sampled_from([0.0, 0.5, 1.0, 3.0, LEX_ONLY]), st.sampled_from([0.0, 0.5, 1.0, 5.0]), st.booleans())
def test_the_score_is_the_formula_and_mu_zero_is_the_clear_hybrid(parts, lam, mu, lookup):
    rows = np.arange(len(parts))
    lex, emb, sp = (np.array(col, dtype=np.float64) for col in zip(*parts))
    c = h3.Candidates3(rows, lex, emb, sp, lookup)
    got = h3.fused3(lam, mu, c)
    if lookup:
        expected = lex + TIE_BREAK * emb  # an identifier lookup: BM25 alone
    elif math.isinf(lam):
        expected = lex + mu * sp + TIE_BREAK * emb  # the encoder left out: the cosine breaks ties only
    else:
        expected = lam * lex + emb + mu * sp
    assert np.allclose(got, expected)
    ids = [f"d{i}" for i in rows]
    ours = h3.rank3({"q": h3.Candidates3(rows, lex, emb, sp, lookup)}, lam, 0.0, ids, 5)
    theirs = rank_candidates({"q": Candidates(rows, lex, emb, lookup)}, lam, ids, 5)
    assert ours == theirs


@pytest.fixture(scope="module")
def ws(demo, tiny_encoder, tmp_path_factory, demo_sparse_store):
    store = Store(store_copy(demo_sparse_store, tmp_path_factory.mktemp("hybrid3") / "store.sqlite3"))
    return Workspace(demo, store, model=tiny_encoder)


def test_every_candidate_is_scored_by_all_three_models_each_in_its_range(ws):
    queries = dict(list(ws.dataset.split_queries("test").items())[:6])
    cands = h3.candidates(ws, queries)
    svecs = ws.sparse.model.encode(list(queries.values()), query=True)
    for (qid, text), svec in zip(queries.items(), svecs):
        c = cands[qid]
        raw_sp = ws.sparse.index.scores(svec, c.rows)
        assert c.sp_max == pytest.approx(float(raw_sp.max()))
        assert np.allclose(c.s_sp, raw_sp / raw_sp.max()) and c.s_sp.max() == pytest.approx(1.0)
        assert np.allclose(c.s_lex, ws.bm25.scores_at(text, c.rows) / ws.bm25.max_score(text))
        assert c.s_lex.min() >= 0 and c.s_lex.max() <= 1 + 1e-9 and np.abs(c.s_emb).max() <= 1 + 1e-6
        sp_top, _ = ws.sparse.index.top(svec, ws.depth)
        lex_top, _ = ws.bm25.top(text, ws.depth)
        assert set(sp_top.tolist()) | set(lex_top.tolist()) <= set(c.rows.tolist())  # the union of the lists


def test_mu_is_tuned_on_train_kept_only_where_significant_and_cached(ws, demo, tiny_encoder):
    choice = h3.mu_for(ws, "test")
    fit = choice.fit
    assert fit is not None and fit.prior == h3.LABEL_FREE_MU and [m for m, _ in fit.grid] == list(h3.MU_GRID)
    assert fit.queries == len([q for q in demo.split_queries("train") if q in demo.qrels["train"]])
    assert choice.value == fit.chosen and ("beats" in choice.how or "kept" in choice.how or "itself" in choice.how)
    assert choice.lam == CLEAR.lambda_for(ws, "test").value  # μ goes with the CLEAR hybrid's λ for the split
    assert ws.system_params("hybrid3", "test")["mu"] == choice.value
    # the fit is in the store, and a second workspace on it reads the fit back
    import sqlite3

    with sqlite3.connect(ws.store.path) as db:
        assert db.execute("SELECT count(*) FROM metrics WHERE system = 'hybrid3_mu'").fetchone()[0] == 1
    again = Workspace(demo, Store(ws.store.path), model=tiny_encoder)
    assert h3.mu_for(again, "test").fit == fit


def test_with_mu_zero_the_run_is_the_clear_hybrids(ws):
    test = ws.dataset.split_queries("test")
    choice = h3.mu_for(ws, "test")
    run = h3.rank3(h3.candidates(ws, test), choice.lam, 0.0, ws.dataset.doc_ids, 10, choice.lam_by_query)
    clear = ws.search("hybrid", test, 10, split="test")
    for q in test:
        assert [d for d, _ in run[q]] == [d for d, _ in clear[q]]
        assert [s for _, s in run[q]] == pytest.approx([s for _, s in clear[q]])


def test_without_labels_mu_is_label_free_and_the_system_evaluates_with_pnr(ws, demo, tiny_encoder, tmp_path):
    unlabelled = Dataset("demo-test-only", demo.docs, demo.queries, {"test": demo.qrels["test"]})
    store = Store(store_copy(ws.store.path, tmp_path / "store.sqlite3"))
    other = Workspace(unlabelled, store, model=tiny_encoder)
    choice = h3.mu_for(other, "test")
    assert choice.value == h3.LABEL_FREE_MU and choice.fit is None and "label-free" in choice.how
    ev = other.evaluate("hybrid3", "test")
    assert 0.0 <= ev.mean["ndcg@10"] <= 1.0 and "pnr" in ev.mean
    # exact scores: those of the documents the run retrieved are the run's
    run = other.run("hybrid3", "test")
    q = next(q for q in run if run[q])
    rows = {q: [demo.doc_ids.index(d) for d, _ in run[q][:5]]}
    exact = builtin("hybrid3").exact_scores(other, "test", rows, demo.queries)
    assert [exact[q][d] for d, _ in run[q][:5]] == pytest.approx([s for _, s in run[q][:5]], abs=1e-5)


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_an_english_only_sparse_model_on_a_corpus_in_another_language_gets_mu_zero(demo, tiny_encoder, tmp_path):
    from tests.retrieval.systems.test_reliability import GREEK, small

    greek = Workspace(small(demo, GREEK, n=40), Store(tmp_path / "store.sqlite3"), model=tiny_encoder)
    why = h3.sparse_unreliable(greek)
    assert why and "splade-tiny" in why
    choice = h3.mu_for(greek, "test")
    assert choice.value == 0.0 and "CLEAR hybrid" in choice.how
    english = Workspace(small(demo, n=40), Store(tmp_path / "english.sqlite3"), model=tiny_encoder)
    assert h3.sparse_unreliable(english) is None and h3.mu_for(english, "test").value == h3.LABEL_FREE_MU


def test_registered_on_request_and_waiting_for_both_background_builds(ws):
    system = builtin("hybrid3")
    assert system is not None and "hybrid3" in keys() and "hybrid3" not in shown()  # Search's and the CLI's pickers
    assert system.needs.sparse and system.needs.vectors
    assert system.waits_for(ws) == (ws.builds["dense"], ws.builds["sparse"])


def _with_record(src, folder, **trained_on):
    """A copy of the model folder ``src`` whose training record says it was fine-tuned (``trained_on``)."""
    import json
    import shutil

    from retrieval.index.encoder import TRAINING_RECORD

    shutil.copytree(src, folder)
    (folder / TRAINING_RECORD).write_text(json.dumps({"trained_on": trained_on}))
    return str(folder)


def test_mu_is_never_tuned_on_queries_a_fine_tuned_encoder_trained_on(ws, demo, tiny_model_dir, tmp_path):
    """A dense encoder fine-tuned on train (refit on all of it: no held-out query left) gives the fusion
    μ 0 — the CLEAR hybrid its check chose λ for — not μ tuned on the queries it learned; with held-out
    queries recorded, μ is tuned on those alone against μ 0; with the sparse model fine-tuned too, on the
    queries neither trained on, against μ 0 (the base sparse model's μ was given beside the base encoder)."""
    from retrieval.data.dataset import queries_fingerprint
    from retrieval.index.splade import bundled_path

    train = sorted(demo.qrels["train"])
    seen = {"split": "train", "queries": queries_fingerprint(demo.split_queries("train"))}
    refit = Workspace(demo, ws.store, model=_with_record(tiny_model_dir, tmp_path / "refit", **seen))
    assert h3.unseen(refit, "train") == h3.Unseen([], (h3.DENSE_PART,))  # refit on every train query: none left
    choice = h3.mu_for(refit, "test")
    assert choice.value == 0.0 and choice.fit is None
    assert (f"μ 0, {h3.ENCODER_PRIOR}, the CLEAR hybrid: the dense encoder was fine-tuned on the train queries, "
            "so μ is not tuned on them") in choice.how
    test = refit.dataset.split_queries("test")
    assert refit.search("hybrid3", test, 10, split="test") == refit.search("hybrid", test, 10, split="test")
    assert h3.mu_for(ws, "test").fit.queries == len(train)  # the base encoder: tuned on every train query

    held = train[:6]
    checked = Workspace(demo, ws.store, model=_with_record(tiny_model_dir, tmp_path / "held", **seen, held_out=held))
    choice = h3.mu_for(checked, "test")
    assert choice.fit is not None and choice.fit.queries == len(held) and choice.fit.prior == 0.0
    assert "held-out train queries the dense encoder was not fine-tuned on" in choice.how
    assert h3.ENCODER_PRIOR in choice.how
    assert (choice.value == choice.fit.best) == (choice.fit.p_value is not None and choice.fit.p_value < 0.05)

    base_mu = {"best": 0.25, "grid": [[mu, 0.5] for mu in h3.MU_GRID], "queries": 99, "prior": 1.0, "p_value": 0.001}
    sparse = _with_record(bundled_path(), tmp_path / "sparse", **seen, held_out=train[3:9], base_mu=base_mu,
                          base_mu_beside=ws.encoder.fingerprint)
    alone = Workspace(demo, ws.store, model=ws.encoder, sparse_model=sparse)
    assert h3.mu_for(alone, "test").fit.prior == 0.25  # the sparse model alone fine-tuned: its base's μ
    both = Workspace(demo, ws.store, model=_with_record(tiny_model_dir, tmp_path / "both", **seen, held_out=held),
                     sparse_model=sparse)
    assert h3.unseen(both, "train") == h3.Unseen(train[3:6], (h3.DENSE_PART, h3.SPARSE_PART))
    choice = h3.mu_for(both, "test")
    assert choice.fit is not None and choice.fit.queries == 3 and choice.fit.prior == 0.0
    assert "queries neither the dense encoder nor the learned sparse model was fine-tuned on" in choice.how
