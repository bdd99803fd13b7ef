"""RM3 (``retrieval.systems.rm3``): Anserini's relevance model on a worked example (each rule: the term
filters, a document's pruning, the score weighting, the model's pruning, the interpolation), then as a
system on the real demo corpus: its expanded queries hold the original terms, its run is BM25-sized,
deterministic and the expanded queries' own, its exact scores are the run's, one typed query gives the
same list however deep the probe, its explanations add up with each term's kind, the Search view labels
a query expansion, and Milvus Lite ranks as the in-process engine does."""
from __future__ import annotations

import numpy as np
import pytest

from retrieval import Workspace
from retrieval.index.terms import WeightedQuery
from retrieval.systems import builtin, keys
from retrieval.systems.base import Probe
from retrieval.systems.rm3 import FB_TERMS, ORIGINAL_QUERY_WEIGHT, RM3, document_vector, expand, relevance_model


@pytest.fixture(scope="module")
def ws(demo):
    return Workspace(demo, None)


@pytest.fixture(scope="module")
def queries(demo):
    return {q: demo.queries[q] for q in sorted(demo.qrels["test"])[:12]}


# ---- Anserini's rules, worked by hand ------------------------------------------------------
DF = {"faucet": 2, "washer": 3, "drip": 5, "common": 50, "x": 1, "über": 1, "a" * 21: 1}  # of N = 100 documents
DOC_A = ["faucet"] * 3 + ["washer", "drip"] + ["common"] * 5 + ["x"] * 4 + ["über"] * 6 + ["a" * 21] * 7
DOC_B = ["washer", "washer", "drip", "drip"]


def test_a_documents_vector_keeps_short_plain_rare_terms_its_most_frequent_first():
    # "common" is in half the documents (> 10%), "x" is one character, "über" is not [a-z0-9], the last 21 long
    assert document_vector(DOC_A, DF, 100, fb_terms=10) == {"faucet": 3.0, "drip": 1.0, "washer": 1.0}
    assert document_vector(DOC_A, DF, 100, fb_terms=2) == {"faucet": 3.0, "drip": 1.0}  # a tie: by term


def test_the_relevance_model_and_the_expanded_query_worked_by_hand():
    # A (score 2): faucet 3, drip 1 (pruned to 2) → 3/4·2 = 1.5, 1/4·2 = 0.5; B (score 1): drip 2, washer 2 → 0.5, 0.5.
    # Summed: faucet 1.5, drip 1.0, washer 0.5; the two heaviest, over their sum 2.5: faucet 0.6, drip 0.4.
    feedback = [(DOC_A, 2.0), (DOC_B, 1.0)]
    model = relevance_model(feedback, DF, 100, fb_terms=2)
    assert model == pytest.approx({"faucet": 0.6, "drip": 0.4})
    # the query "faucet leak leak": faucet 1/3, leak 2/3; half of it, half of the model
    query = expand(["faucet", "leak", "leak"], feedback, DF, 100, fb_terms=2, original_query_weight=0.5)
    assert query.names == ["faucet", "leak", "drip"]  # heaviest first
    assert [w for _, w in query.terms] == pytest.approx([0.5 / 3 + 0.3, 1 / 3, 0.2])
    assert expand(["faucet"], [], DF, 100).terms == (("faucet", 0.5),)  # no feedback: the query model alone
    assert expand([], [], DF, 100).terms == ()


# ---- on the demo corpus --------------------------------------------------------------------
def test_expanded_queries_hold_the_original_terms_and_anserinis_feedback_terms(ws, queries):
    rm3, bm25 = builtin("rm3"), ws.bm25
    expanded = rm3.expand_all(ws, queries)
    n, grew = len(bm25), 0
    for q, text in queries.items():
        tokens = ws.tokenizer(text)
        weights = dict(expanded[q].terms)
        assert sum(weights.values()) == pytest.approx(1.0)
        for term in set(tokens):  # each original term, with at least its share of the query model
            assert weights[term] >= ORIGINAL_QUERY_WEIGHT * tokens.count(term) / len(tokens) - 1e-12
        added = set(weights) - set(tokens)
        assert len(added) <= FB_TERMS
        assert all(2 <= len(t) <= 20 and t.isascii() and t.isalnum() and t.lower() == t and bm25.df[t] / n <= 0.1
                   for t in added)
        grew += bool(added)
    assert grew == len(queries)  # every demo query finds feedback terms


def test_the_run_is_bm25_sized_deterministic_and_the_expanded_queries_own(ws, demo, queries):
    rm3 = builtin("rm3")
    run = rm3.search(ws, queries, 20, "test")
    bm25_run = ws.lexical.search(queries, 20)
    assert run.keys() == bm25_run.keys() and all(0 < len(run[q]) <= 20 for q in run)
    assert run == rm3.search(Workspace(demo, None), queries, 20, "test")  # a new workspace: the same run
    expanded = rm3.expand_all(ws, queries)
    assert run == ws.lexical.search(dict(expanded), 20)
    assert any(run[q] != bm25_run[q] for q in run)  # the expansion moves documents
    rows = {q: [ws.doc_row[d] for d, _ in hits] + [0, 1] for q, hits in run.items()}
    exact = rm3.exact_scores(ws, "test", rows, queries)
    for q, hits in run.items():
        assert [exact[q][d] for d, _ in hits] == [s for _, s in hits]
    params = rm3.params(ws, "test")
    assert params["rm3"] == {"fb_docs": 10, "fb_terms": 10, "original_query_weight": 0.5, "filter_terms": True}
    assert params["bm25"]["k1"] == ws.bm25_settings.k1 and "tokenizer" in params["bm25"]
    assert "rm3" in keys() and ws.evaluate("rm3", "test").mean["ndcg@10"] > 0


def test_one_typed_query_gives_the_systems_list_however_deep_the_probe(ws, queries):
    rm3 = builtin("rm3")
    text = next(iter(queries.values()))
    listed = rm3.search(ws, {"q": text}, 10, None)["q"]
    assert rm3.one(ws, Probe(ws, text, 100), 10, None) == listed
    assert rm3.one(ws, Probe(ws, text, 3), 10, None) == listed  # too shallow for the feedback: searched again


def test_explanations_add_up_with_each_terms_kind_and_the_search_view_labels_them(ws, queries):
    from retrieval.side_by_side import side_by_side
    from ui.present.search import side_by_side_html

    text = "can't fall asleep at night"
    res = side_by_side(ws, text, k=5, systems=("bm25", "rm3"))
    typed = {w for w, _ in ws.tokenizer.typed_words(text)}
    kinds = set()
    for hit in res.systems["rm3"]:
        assert sum(t.score for t in hit.system_terms) == pytest.approx(hit.score, abs=1e-3)
        for t in hit.system_terms:
            assert (t.kind == "query term") == (t.term in typed)  # a query term as typed ("can't"), else a stem
            kinds.add(t.kind)
    assert kinds == {"query term", "query expansion"}
    html = side_by_side_html(res, ws.tokenizer)
    assert "RM3 terms:" in html and 'class="query-expansion"' in html and 'class="expansion"' not in html


def test_a_shallow_setting_changes_the_cache_key(ws):
    shallow = ws.with_settings({"rm3": {"fb_docs": 3, "fb_terms": 5}})
    assert RM3().params(shallow, None) != RM3().params(ws, None)
    assert RM3().params(shallow, None)["rm3"]["fb_terms"] == 5
    text = "cheap places to sleep when backpacking"
    assert len(RM3().expand_all(shallow, {"q": text})["q"].terms) <= len(set(ws.tokenizer(text))) + 5


@pytest.mark.milvus
def test_rm3_through_milvus_lite_ranks_as_in_process(demo, ws, queries, tmp_path):
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    from retrieval.index.engines import open_engine

    remote = Workspace(demo, None, engine=open_engine(f"milvus:{tmp_path / 'rm3.db'}"))
    rm3 = builtin("rm3")
    run_l, run_m = rm3.search(ws, queries, 20, "test"), rm3.search(remote, queries, 20, "test")
    assert run_m.keys() == run_l.keys()
    for q in run_l:
        np.testing.assert_allclose([s for _, s in run_m[q]], [s for _, s in run_l[q]], atol=1e-5)
        cut = run_l[q][-1][1] + 1e-5
        assert {d for d, s in run_m[q] if s > cut} == {d for d, s in run_l[q] if s > cut}
    assert isinstance(rm3.expand_all(remote, queries)[next(iter(queries))], WeightedQuery)
