"""CLEAR hybrid (candidate union, exact re-scoring, λ), RRF and weighted-sum fusion.

Real BM25 over the demo corpus, real tiny transformer, real FAISS flat index; every expectation is
recomputed from the two models' own scores.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.data.readers import load_dataset
from retrieval.evaluation.measures import evaluate_run
from retrieval.index.bm25_index import BM25Index
from retrieval.index.dense_index import DenseIndex, DenseRetriever
from retrieval.systems.clear_lambda import LAMBDA_GRID, LEX_ONLY
from retrieval.systems.fusion import (
    Candidates,
    Hybrid,
    default_lambda,
    fit_lambda,
    fuse_runs,
    rank_candidates,
    tune_lambda,
)
from retrieval.systems.hybrid import CLEAR
from retrieval.systems.identifier_queries import identifier_lookups, is_identifier_lookup
from retrieval.training_record import LambdaFit
from tests.conftest import DEMO


@pytest.fixture(scope="module")
def demo():
    return load_dataset(DEMO)


@pytest.fixture(scope="module")
def parts(demo, tiny_encoder):
    """(BM25 index, dense retriever, document embeddings) over the demo corpus."""
    texts = [d.full_text for d in demo.docs.values()]
    bm25 = BM25Index(demo.doc_ids, texts)
    emb = tiny_encoder.encode(texts)
    return bm25, DenseRetriever(tiny_encoder, DenseIndex(demo.doc_ids, emb)), emb


def assert_same_run(got, expected):
    assert list(got) == list(expected)
    for q in expected:
        assert [d for d, _ in got[q]] == [d for d, _ in expected[q]], q
        assert [s for _, s in got[q]] == pytest.approx([s for _, s in expected[q]], abs=1e-6), q


def test_candidates_are_the_union_of_both_top_lists_with_exact_scores(demo, parts, tiny_encoder):
    bm25, dense, emb = parts
    depth = 20
    queries = demo.split_queries("test")
    cands = Hybrid(bm25, dense, depth=depth).candidates(queries)
    assert set(cands) == set(queries)
    qvecs = tiny_encoder.encode(list(queries.values()))
    for qv, (qid, text) in zip(qvecs, queries.items()):
        c = cands[qid]
        rows = set(c.rows.tolist())
        assert len(rows) == len(c.rows)
        lex = bm25.scores(text)
        emb_all = emb @ qv
        # BM25 top-20 among matching documents (strictly above the 20th score: no tie ambiguity)
        kth = np.sort(lex)[::-1][depth - 1]
        lex_top = {r for r in range(len(lex)) if lex[r] > max(kth, 0)}
        # dense top-20, up to float32 rounding between FAISS and numpy (1e-5) at the boundary
        dkth = np.sort(emb_all)[::-1][depth - 1]
        dense_top = {r for r in range(len(emb_all)) if emb_all[r] > dkth + 1e-5}
        dense_possible = {r for r in range(len(emb_all)) if emb_all[r] >= dkth - 1e-5}
        assert lex_top <= rows and dense_top <= rows
        # nothing else: a row is there only as a BM25 top match or a dense top document
        lex_possible = {r for r in range(len(lex)) if lex[r] >= kth and lex[r] > 0}
        assert rows <= lex_possible | dense_possible
        assert len(rows) <= 2 * depth
        # every candidate carries both models' exact scores
        np.testing.assert_allclose(c.s_lex, lex[c.rows], rtol=1e-6)
        np.testing.assert_allclose(c.s_emb, emb_all[c.rows], rtol=1e-4, atol=1e-5)
    # at least one query brings in a BM25 match the dense top-20 missed, and vice versa
    assert any(set(c.rows.tolist()) - set(np.argsort(-(emb @ qv))[:depth].tolist())
               for qv, c in zip(qvecs, cands.values()))
    assert any(np.any(c.s_lex == 0) for c in cands.values())


def test_query_matching_no_term_has_only_dense_candidates(parts):
    bm25, dense, _ = parts
    c = Hybrid(bm25, dense, depth=5).candidates({"q": "zzyzx qwxvt"})["q"]
    assert len(c.rows) == 5 and np.all(c.s_lex == 0)


def test_rank_orders_by_lambda_weighted_sum(demo, parts):
    bm25, dense, _ = parts
    h = Hybrid(bm25, dense, depth=30)
    cands = h.candidates(demo.split_queries("test"))
    for lam in (0.0, 0.05, 0.7):
        run = h.rank(cands, lam, k=15)
        for qid, c in cands.items():
            combined = {demo.doc_ids[r]: lam * lx + e for r, lx, e in zip(c.rows, c.s_lex, c.s_emb)}
            expected = sorted(combined, key=lambda d: (combined[d], d), reverse=True)[:15]  # ties: id descending
            assert [d for d, _ in run[qid]] == expected
            for d, s in run[qid]:
                assert s == pytest.approx(combined[d], abs=1e-9)


def test_lambda_zero_is_dense_order_and_huge_lambda_is_bm25_order(demo, parts, tiny_encoder):
    bm25, dense, emb = parts
    depth = 25
    queries = demo.split_queries("test")
    h = Hybrid(bm25, dense, depth=depth)
    cands = h.candidates(queries)
    dense_run = dense.search(queries, depth)
    bm25_run = bm25.search(queries, depth)
    as_dense = h.rank(cands, 0.0, depth)
    as_bm25 = h.rank(cands, 1e6, depth)
    qvecs = dict(zip(queries, tiny_encoder.encode(list(queries.values()))))
    row = {d: i for i, d in enumerate(demo.doc_ids)}
    for qid in queries:
        # λ = 0: the dense ranking, position by position. The random-weight encoder crowds scores
        # near 0.9, and FAISS and numpy round float32 products differently (~1e-7), so two
        # documents closer than that may swap: compare each position's exact score instead.
        exact = emb @ qvecs[qid]
        got = [exact[row[d]] for d, _ in as_dense[qid]]
        assert got == pytest.approx([s for _, s in dense_run[qid]], abs=1e-5)
        assert len({d for d, _ in as_dense[qid]} ^ {d for d, _ in dense_run[qid]}) <= 2
        # BM25's matching documents come first, in BM25's order (compared by BM25 score, as
        # documents with equal BM25 scores are ordered by s_emb here)
        lex_hits = bm25_run[qid]
        assert lex_hits, qid
        head = [d for d, _ in as_bm25[qid][:len(lex_hits)]]
        lex_of = dict(zip((demo.doc_ids[r] for r in cands[qid].rows), cands[qid].s_lex))
        assert [lex_of[d] for d in head] == pytest.approx([s for _, s in lex_hits], rel=1e-6)
        assert {d for d, s in lex_hits if s > lex_hits[-1][1]} <= set(head)


def test_tune_lambda_is_the_grid_argmax(demo, parts, tiny_encoder):
    bm25, dense, emb = parts
    train = demo.split_queries("train")
    qrels = demo.qrels["train"]
    # depth covers the corpus, so the candidate union is every document and the hybrid ranking is
    # simply λ·BM25 + ⟨q, d⟩ over the whole corpus: recompute it without Hybrid
    h = Hybrid(bm25, dense, depth=len(demo.doc_ids))
    fit = tune_lambda(h, train, qrels)
    best, table = fit.best, fit.grid
    assert fit.prior is None and fit.chosen == best and fit.queries == len(train)
    qvecs = tiny_encoder.encode(list(train.values()))
    lex = {q: bm25.scores(t).astype(np.float64) for q, t in train.items()}
    mine = []
    for lam in LAMBDA_GRID:
        run = {}
        for qv, q in zip(qvecs, train):
            s = lam * lex[q] + (emb @ qv).astype(np.float64)
            top = np.argsort(-s, kind="stable")[:100]
            run[q] = [(demo.doc_ids[r], float(s[r])) for r in top]
        mine.append((lam, evaluate_run(run, qrels, metrics=("ndcg@10",)).mean["ndcg@10"]))
    assert [lam for lam, _ in table] == list(LAMBDA_GRID)
    assert [v for _, v in table] == pytest.approx([v for _, v in mine], abs=1e-6)
    top_value = max(v for _, v in mine)
    assert best == min(lam for lam, v in mine if v >= top_value - 1e-9)
    assert max(v for _, v in table) > table[0][1]  # BM25 helps the random-weight encoder
    # a custom grid and another metric are honoured
    fit2 = tune_lambda(h, train, qrels, metric="recall@10", grid=(0.0, 1.0))
    assert [lam for lam, _ in fit2.grid] == [0.0, 1.0] and fit2.best in (0.0, 1.0)


def gated(n_better: int, n_worse: int = 0):
    """Candidates where λ = 0 puts the relevant document first and λ = 1 second on ``n_better``
    queries, and the other way round on ``n_worse``."""
    cands, qrels = {}, {}
    for i in range(n_better + n_worse):
        # rows 0 (relevant) and 1; s_emb prefers row 0 on the better queries, s_lex prefers row 1
        emb, lex = (np.array([0.6, 0.5]), np.array([0.0, 0.3])) if i < n_better else \
            (np.array([0.5, 0.6]), np.array([0.3, 0.0]))
        cands[f"q{i}"] = Candidates(np.array([0, 1]), lex, emb)
        qrels[f"q{i}"] = {"d0": 1}
    return cands, qrels


def test_the_label_free_prior_is_kept_unless_the_tuned_lambda_beats_it_significantly():
    ids = ["d0", "d1"]
    cands, qrels = gated(20)
    fit = fit_lambda(cands, qrels, ids, grid=(0.0, 1.0), prior=1.0)
    assert fit.best == 0.0 and fit.p_value < 0.001 and fit.chosen == 0.0 and fit.queries == 20
    # five queries can never overturn the prior: the smallest two-sided p of 2^5 sign flips is 1/16
    fit = fit_lambda(*gated(5), ids, grid=(0.0, 1.0), prior=1.0)
    assert fit.best == 0.0 and fit.p_value == pytest.approx(1 / 16, abs=1e-9) and fit.chosen == 1.0
    # a split verdict (12 better, 8 worse) is not evidence either
    fit = fit_lambda(*gated(12, 8), ids, grid=(0.0, 1.0), prior=1.0)
    assert fit.best == 0.0 and fit.p_value > 0.05 and fit.chosen == 1.0
    # the prior itself best: nothing to test
    fit = fit_lambda(*gated(0, 20), ids, grid=(0.0, 1.0), prior=1.0)
    assert fit.best == 1.0 and fit.p_value == 1.0 and fit.chosen == 1.0
    # without a prior the grid's best is taken, as CLEAR does
    fit = fit_lambda(*gated(12, 8), ids, grid=(0.0, 1.0))
    assert fit.p_value is None and fit.chosen == fit.best == 0.0
    assert LambdaFit.from_json(fit.to_json()) == fit


def test_how_a_tuned_lambda_met_its_prior_is_said_in_words():
    from retrieval.systems.clear_lambda import against_prior

    ids = ["d0", "d1"]
    beat = fit_lambda(*gated(20), ids, grid=(0.0, 1.0), prior=1.0)
    assert against_prior(beat).startswith(": λ 0 beats the label-free λ 1 (p < 0.001")
    kept = fit_lambda(*gated(5), ids, grid=(0.0, 1.0), prior=1.0)
    assert "does not beat the label-free λ 1 significantly (p 0.062), so λ 1 is kept" in against_prior(kept)
    same = fit_lambda(*gated(0, 20), ids, grid=(0.0, LEX_ONLY), prior=LEX_ONLY)  # ∞ ranks as 1 does here
    assert same.best == LEX_ONLY and against_prior(same) == (
        ": the grid's best is the label-free λ ∞ (BM25 alone: the encoder failed the reliability check) itself")


def test_tune_lambda_needs_labelled_queries(parts):
    bm25, dense, _ = parts
    with pytest.raises(ValueError, match="no labelled queries"):
        tune_lambda(Hybrid(bm25, dense), {"q": "rice"}, {"other": {"cook-001": 1}})


def test_default_lambda_is_median_std_ratio():
    def c(lex, emb):
        return Candidates(np.arange(len(lex)), np.array(lex, float), np.array(emb, float))

    cands = {
        "a": c([1, 3], [0.2, 0.6]),  # std 1 and 0.2 -> 0.2
        "b": c([0, 2, 4], [0, 1, 2]),  # std √(8/3) and √(2/3) -> 0.5
        "c": c([2, 4], [0, 2]),  # std 1 and 1 -> 1.0
        "one": c([5], [9]),  # a single candidate: skipped
        "flat": c([2, 2, 2], [0, 5, 9]),  # no BM25 spread: skipped
    }
    assert default_lambda(cands) == pytest.approx(0.5)
    assert default_lambda({k: cands[k] for k in ("a", "b")}) == pytest.approx(0.35)  # median of two
    assert default_lambda({"flat": cands["flat"]}) == 0.0


def test_hybrid_search_uses_default_lambda_when_none_given(demo, parts):
    bm25, dense, _ = parts
    queries = dict(list(demo.split_queries("test").items())[:5])
    h = Hybrid(bm25, dense, depth=30)
    cands = h.candidates(queries)
    lam = default_lambda(cands)
    assert lam > 0
    assert_same_run(h.search(queries, 10), h.rank(cands, lam, 10))
    assert_same_run(Hybrid(bm25, dense, depth=30, lam=0.3).search(queries, 10), h.rank(cands, 0.3, 10))


# ---- rank fusion -----------------------------------------------------------------------------
RUN_A = {"q": [("a", 3.0), ("b", 2.0), ("c", 1.0)], "only_a": [("x", 1.0), ("y", 0.5)]}
RUN_B = {"q": [("c", 0.9), ("a", 0.5), ("d", 0.1)]}


def test_rrf_matches_hand_formula():
    fused = fuse_runs([RUN_A, RUN_B], "rrf", rrf_k=60)
    expected = {"a": 1 / 61 + 1 / 62, "b": 1 / 62, "c": 1 / 63 + 1 / 61, "d": 1 / 63}
    assert [d for d, _ in fused["q"]] == ["a", "c", "b", "d"]
    assert dict(fused["q"]) == pytest.approx(expected)
    assert dict(fused["only_a"]) == pytest.approx({"x": 1 / 61, "y": 1 / 62})
    fused10 = fuse_runs([RUN_A, RUN_B], "rrf", rrf_k=10)
    assert dict(fused10["q"])["a"] == pytest.approx(1 / 11 + 1 / 12)
    assert [len(h) for h in fuse_runs([RUN_A, RUN_B], "rrf", k=2).values()] == [2, 2]


def test_wsum_is_min_max_normalized_weighted_sum():
    # A normalized: a 1, b 0.5, c 0; B normalized: c 1, a 0.5, d 0 (absent documents: 0)
    fused = fuse_runs([RUN_A, RUN_B], "wsum")
    assert dict(fused["q"]) == pytest.approx({"a": 0.75, "c": 0.5, "b": 0.25, "d": 0.0})
    assert [d for d, _ in fused["q"]] == ["a", "c", "b", "d"]
    weighted = fuse_runs([RUN_A, RUN_B], "wsum", weights=(0.8, 0.2))
    # a 0.8·1 + 0.2·0.5, b 0.8·0.5, c 0.2·1, d 0
    assert dict(weighted["q"]) == pytest.approx({"a": 0.9, "b": 0.4, "c": 0.2, "d": 0.0})
    assert [d for d, _ in weighted["q"]] == ["a", "b", "c", "d"]
    assert dict(fused["only_a"]) == pytest.approx({"x": 0.5, "y": 0.0})


def test_fusion_argument_errors(parts, demo):
    bm25, dense, emb = parts
    with pytest.raises(ValueError, match="unknown fusion"):
        fuse_runs([RUN_A, RUN_B], "combsum")
    with pytest.raises(ValueError, match="unknown fusion"):
        Hybrid(bm25, dense, fusion="combsum")
    perm = list(reversed(range(len(demo.doc_ids))))
    shuffled = DenseRetriever(dense.encoder, DenseIndex([demo.doc_ids[i] for i in perm], emb[perm]))
    with pytest.raises(ValueError, match="same order"):
        Hybrid(bm25, shuffled)


def test_rrf_and_wsum_hybrids_fuse_the_two_runs(demo, parts):
    bm25, dense, _ = parts
    queries = dict(list(demo.split_queries("test").items())[:4])
    lex, emb = bm25.search(queries, 50), dense.search(queries, 50)
    for fusion in ("rrf", "wsum"):
        h = Hybrid(bm25, dense, depth=50, fusion=fusion)
        assert h.params["fusion"] == fusion
        assert_same_run(h.search(queries, 10), fuse_runs([lex, emb], fusion, k=10))


@pytest.mark.parametrize("text, lookup", [
    ("QX-4471", True), ("LX318 baggage", True), ("Polysorbate 80", True), ("WPW10348265", True),
    ("E. coli o157:H7", False),  # one word of three with a digit
    ("omega-3 fatty acids", False), ("effects of omega-3 in 2020 trials", False),
    ("baggage allowance", False), ("", False), ("   ", False)])
def test_an_identifier_lookup_is_a_short_query_mostly_of_words_with_digits(text, lookup):
    assert is_identifier_lookup(text) is lookup


def test_identifier_lookups_are_ranked_by_bm25_alone_and_other_queries_are_fused(demo, parts):
    bm25, dense, _ = parts
    queries = demo.split_queries("test")
    lookups = set(identifier_lookups(queries))
    assert lookups and lookups != set(queries)  # the demo has part-number queries among others
    plain, rule = Hybrid(bm25, dense, depth=30), Hybrid(bm25, dense, depth=30, lookups=True)
    lam = 0.01  # the random-weight encoder crowds its cosines: a small λ lets them reorder BM25
    rule.lam = lam
    got = rule.search(queries, 30)
    cands = plain.candidates(queries)
    fused_run, lex_run = plain.rank(cands, lam, 30), plain.rank(cands, LEX_ONLY, 30)
    for qid in queries:
        expected = lex_run[qid] if qid in lookups else fused_run[qid]
        assert_same_run({qid: got[qid]}, {qid: expected})
    # ...and it changes something: a cosine reorders what BM25 found for at least one lookup
    assert any([d for d, _ in fused_run[q]] != [d for d, _ in lex_run[q]] for q in lookups)
    assert rule.params["identifier_lookups"] and "identifier_lookups" not in plain.params
    # exact scores (PNR) follow the same rule
    rows = {q: [demo.doc_ids.index(d) for d, _ in got[q][:5]] for q in queries}
    exact = rule.exact_scores(lam, rows, queries)
    for q in queries:
        for d, s in got[q][:5]:
            assert exact[q][d] == pytest.approx(s, abs=1e-6)


def test_bm25_alone_keeps_the_cosine_order_in_its_scores_where_bm25_matches_nothing(demo, parts):
    """An evaluator orders a run by its scores: where BM25 matches no document, λ = ∞ must not give
    them all 0 (their order would be the evaluator's), but the cosine's order, scaled down."""
    bm25, dense, _ = parts
    text = "zzyzx qwxvt"  # no term in the corpus
    h = Hybrid(bm25, dense, lam=LEX_ONLY, depth=20)
    hits = h.search({"q": text}, 10)["q"]
    assert [d for d, _ in hits] == [d for d, _ in dense.search({"q": text}, 10)["q"]]
    scores = [s for _, s in hits]
    assert all(a > b for a, b in zip(scores, scores[1:])) and max(scores) < 1e-5
    relevant = hits[3][0]  # judged by a real evaluator, the list is read in the order shown
    got = evaluate_run({"q": hits}, {"q": {relevant: 1}}, metrics=("mrr",)).per_query["mrr"]["q"]
    assert got == pytest.approx(1 / 4)


# ---- cross-fitted λ on judged queries (no train split) -------------------------------------
def test_rank_candidates_ranks_a_query_at_its_own_lambda_where_one_is_given():
    cands, _ = gated(2)  # λ 0 puts row 0 first, λ 1 row 1
    run = rank_candidates(cands, 0.0, ["d0", "d1"], 2, by_query={"q1": 1.0})
    assert run["q0"][0][0] == "d0" and run["q1"][0][0] == "d1"
    assert run["q1"] == rank_candidates({"q1": cands["q1"]}, 1.0, ["d0", "d1"], 2)["q1"]


@pytest.fixture(scope="module")
def judged_only(demo, tiny_encoder):
    """The demo corpus without its labels, its test queries judged in the app (so ``judged`` is the
    only split and there is no ``train``), over an encoder whose scores are not cosines: λ is tuned
    on the raw grid without a prior, so each half's λ is the grid's best there."""
    from retrieval import Workspace
    from retrieval.data.dataset import Dataset
    from retrieval.index.encoder import Encoder
    from retrieval.judging.labels import with_judgments

    ds = with_judgments(Dataset("bare", demo.docs, demo.queries), demo.qrels["test"])
    return Workspace(ds, None, model=Encoder(tiny_encoder.model, name="tiny-raw", normalize=False))


def test_judged_queries_are_ranked_with_the_lambda_tuned_on_the_other_half(judged_only):
    from retrieval.judging.labels import JUDGED, judged_folds

    ws = judged_only
    ds = ws.dataset
    assert list(ds.qrels) == [JUDGED]
    halves = judged_folds(ds.qrels[JUDGED])
    choice = CLEAR.lambda_for(ws, JUDGED)
    h = Hybrid(ws.bm25, ws.dense, depth=ws.depth, lookups=True)
    queries = ds.split_queries(JUDGED)
    fits = [tune_lambda(h, {q: t for q, t in queries.items() if q in other}, ds.qrels[JUDGED], grid=LAMBDA_GRID)
            for other in (halves[1], halves[0])]  # half 1 tuned on half 2, half 2 on half 1
    assert [f.queries for f in choice.folds] == [halves[0], halves[1]]
    assert [f.value for f in choice.folds] == [fits[0].best, fits[1].best]
    assert fits[0].best != fits[1].best  # the two halves' λ differ here, so the test tells them apart
    everything = tune_lambda(h, queries, ds.qrels[JUDGED], grid=LAMBDA_GRID)
    assert choice.value == everything.best  # new queries: λ tuned on every judged query
    assert CLEAR.lambda_for(ws, None).value == everything.best
    assert choice.how.startswith("cross-fitted: each half evaluated with λ tuned on the other half")
    # every judged query is evaluated, each at its half's λ
    run = ws.run("hybrid", JUDGED)
    cands = h.candidates(queries)
    for half, fit in zip(halves, fits):
        for q in half:
            assert choice.at(q) == fit.best
            expected = rank_candidates({q: cands[q]}, fit.best, ds.doc_ids, 10)[q]
            assert [d for d, _ in run[q][:10]] == [d for d, _ in expected], q
    assert set(ws.evaluate("hybrid", JUDGED).per_query["ndcg@10"]) == set(queries)
    # the cache key names both halves and their λ
    params = ws.system_params("hybrid", JUDGED)["cross_fitted"]
    assert [lam for _, lam in params["folds"]] == [fits[0].best, fits[1].best]
    assert params["folds"][0][0] != params["folds"][1][0]
    # a judged query searched on its own is ranked as its evaluation ranks it; a new one at λ of all
    q = sorted(halves[0])[0]
    one = ws.search_one(queries[q], systems=("hybrid",), k=10, eval_split=JUDGED, query_id=q)["hybrid"]
    assert [d for d, _ in one] == [d for d, _ in run[q][:10]]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["q1", "q2", "q3"]),
                                st.lists(st.sampled_from([f"d{i}" for i in range(12)]), unique=True, max_size=10),
                                max_size=3), min_size=2, max_size=3),
       st.sampled_from(["rrf", "wsum"]), st.integers(1, 80), st.data())
@pytest.mark.slow
def test_fusion_equals_ranx(lists, method, rrf_k, data):
    """fuse_runs is ranx's fuse (RRF, min-max weighted sum) without its numba compile: the same
    scores for every document, the same order where scores differ."""
    from ranx import Run as RRun
    from ranx import fuse

    runs = [{q: [(d, float(len(docs) - i)) for i, d in enumerate(docs)] for q, docs in r.items()} for r in lists]
    weights = tuple(data.draw(st.floats(0.05, 1.0)) for _ in runs)
    ours = fuse_runs(runs, method, k=1000, rrf_k=rrf_k, weights=weights)
    qids = list(dict.fromkeys(q for r in runs for q in r))
    if not qids:  # ranx cannot make a run of no query
        assert ours == {}
        return
    ranx_runs = [RRun({q: {d: s for d, s in r.get(q, [])} or {"__none__": 0.0} for q in qids}, name=f"r{i}")
                 for i, r in enumerate(runs)]
    theirs = (fuse(ranx_runs, method="rrf", params={"k": rrf_k}) if method == "rrf" else
              fuse(ranx_runs, norm="min-max", method="wsum", params={"weights": list(weights)})).to_dict()
    for q in qids:
        expected = {d: s for d, s in theirs.get(q, {}).items() if d != "__none__"}
        assert dict(ours[q]) == pytest.approx(expected, abs=1e-9)
        scores = [s for _, s in ours[q]]
        assert scores == sorted(scores, reverse=True)
