"""Query likelihood with Dirichlet smoothing (``retrieval.systems.ql``; Zhai & Lafferty, SIGIR 2001):
its scores against the formula computed by hand, its candidates, its per-term explanation, its
index kept per corpus and counted by the memory budget, and the system shown by every view and the
CLI with no edit beyond its registration line."""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval import Workspace
from retrieval.index.tokenize import Tokenizer
from retrieval.sharing import memory_budget
from retrieval.systems import builtin, label, shown
from retrieval.systems.ql import MU, QLIndex, index_of
from tests.conftest import DEMO

WORDS = ["apple", "berry", "cherry", "date", "elder", "fig"]
PLAIN = Tokenizer(stopwords=None, stemmer=None)


def by_hand(docs: list[list[str]], query: list[str], mu: float = MU) -> dict[int, float]:
    """log p(q | d) of every document holding a query term, straight from the formula."""
    collection = Counter(w for d in docs for w in d)
    total = sum(collection.values())
    out = {}
    for i, d in enumerate(docs):
        tf = Counter(d)
        if not any(tf[w] for w in query if collection[w]):
            continue
        out[i] = sum(c * math.log((tf[w] + mu * collection[w] / total) / (len(d) + mu))
                     for w, c in Counter(query).items() if collection[w])
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(WORDS), min_size=0, max_size=12), min_size=1, max_size=8),
       st.lists(st.sampled_from([*WORDS, "zebra"]), min_size=1, max_size=4),
       st.sampled_from([1.0, 50.0, MU]))
def test_scores_are_the_formulas_and_only_documents_holding_a_query_term_rank(docs, query, mu):
    index = QLIndex([" ".join(d) for d in docs], PLAIN)
    expected = by_hand(docs, query, mu)
    rows, scores = index.top(" ".join(query), len(docs), mu)
    assert sorted(rows.tolist()) == sorted(expected)  # "zebra", in no document, is left out of the sum
    for r, s in zip(rows.tolist(), scores.tolist()):
        assert s == pytest.approx(expected[r], rel=1e-9, abs=1e-9)
    assert all(a >= b for a, b in zip(scores, scores[1:]))
    every = index.scores(index.query(" ".join(query)), np.arange(len(docs)), mu)
    for r in range(len(docs)):  # exact scores: the same, −∞ where no query term is held (never ranked)
        assert every[r] == (pytest.approx(expected[r], rel=1e-9, abs=1e-9) if r in expected else -np.inf)


def test_a_short_document_without_the_terms_does_not_outrank_a_long_one_with_one():
    """The full likelihood would put the short document first (μ p(w|C) / (|d| + μ) favours short
    documents): it holds no query term, so it is not ranked at all."""
    long = "apple " + "filler " * 20_000
    docs = [long, "berry cherry", "date"]
    index = QLIndex(docs, PLAIN)
    q = index.query("apple cherry")
    full = np.log(q.counts[None] * 0 + index.p_collection[q.ids] * MU / (1 + MU))  # "date": no term of the query
    assert full.sum() > index.contributions(q, np.array([0]))[0].sum()  # the trap the candidates avoid
    rows, _ = index.top("apple cherry", 10)
    assert rows.tolist() == [1, 0] and index.scores(q, np.array([2]))[0] == -np.inf


@pytest.fixture(scope="module")
def ws(demo, tiny_encoder):
    return Workspace(demo, None, model=tiny_encoder)


def test_explain_gives_each_query_terms_contribution_summing_to_the_score(ws):
    from retrieval.side_by_side import side_by_side

    res = side_by_side(ws, "leaky faucet washer dripping", k=5, systems=("bm25", "ql"))
    hits = res.systems["ql"]
    assert hits and all(h.system_terms for h in hits)
    for h in hits:
        assert {t.term for t in h.system_terms} <= {"leaky", "faucet", "washer", "dripping"}
        assert sum(t.score for t in h.system_terms) == pytest.approx(h.score, abs=1e-3)
        assert all(t.score < 0 and t.kind == "query term" for t in h.system_terms)
    typed = side_by_side(ws, "why can't the faucet stop", k=5, systems=("ql",)).systems["ql"]
    for h in typed:  # "can't" (the terms "can" and "t") is one term of the list, as typed, their parts summed
        assert [t.term for t in h.system_terms].count("can't") == 1
        assert not {"can", "t"} & {t.term for t in h.system_terms}
        assert sum(t.score for t in h.system_terms) == pytest.approx(h.score, abs=1e-3)


def test_the_index_is_kept_per_corpus_counted_by_the_memory_budget_and_keyed_by_mu_and_tokenizer(ws, tiny_encoder):
    index = index_of(ws)
    assert index_of(ws.with_model(tiny_encoder)) is index  # a sibling shares it
    parts = memory_budget.parts(ws)
    assert [v for k, v in parts.items() if k[0] == "state" and k[2] == "ql"] == [index.nbytes()]
    assert index.nbytes() > index.counts.data.nbytes > 0
    params = ws.system_params("ql", "test")["ql"]
    assert params == {"mu": MU, "smoothing": "dirichlet", "tokenizer": ws.tokenizer.config}


def test_ql_evaluates_with_intervals_and_ranks_like_bm25_on_the_demo(ws):
    ev, bm25 = ws.evaluate("ql", "test"), ws.evaluate("bm25", "test")
    assert 0.2 < ev.mean["ndcg@10"] <= 1.0 and abs(ev.mean["ndcg@10"] - bm25.mean["ndcg@10"]) < 0.2
    assert "pnr" in ev.mean  # exact scores for PNR


@pytest.mark.slow
def test_every_view_and_the_cli_list_ql(ws, sparse_store):
    """Search (its choices), Evaluate (the table), Judge (the pools and the pairs to aim at), Runs
    (a snapshot's systems), Failures (the picker and the gallery's ranks) and the CLI's default. Every
    system on show is run, SPLADE's too: the store holds the demo's learned sparse vectors already
    (``demo_sparse_store``), read as any store's, not encoded again (``test_sparse``'s)."""
    from retrieval.cli import listed_systems
    from retrieval.tracking import snapshots
    from ui.common import shown_systems
    from ui.evaluate import evaluate
    from ui.failures import pair_choices
    from ui.judge import aim_choices, pool_runs
    from ui.runs import take_snapshot
    from ui.search import system_choices

    ws = Workspace(ws.dataset, sparse_store, model=ws.encoder)
    assert "ql" in shown() and builtin("ql").shown_by_default
    assert ("Query likelihood (Dirichlet)", "ql") in system_choices(ws) and "ql" in shown_systems(ws)
    _, rows, wins = evaluate(ws, "test", [])
    assert label("ql") in [r[0] for r in rows] and label("ql") in wins["headers"]
    assert "ql" in pool_runs(ws, 5) and any("ql" in v.split("|") for _, v in aim_choices(ws))
    take_snapshot(sparse_store, ws, "with-ql")
    assert "ql" in snapshots.load(sparse_store, ws.dataset.corpus_hash, "with-ql").runs
    assert ("Query likelihood (Dirichlet)", "ql") in pair_choices(ws)
    assert "ql" in listed_systems(ws, None)


def test_the_cli_searches_with_ql_and_prints_its_whole_label(tmp_path):
    from tests.retrieval.test_cli import run_cli

    res = run_cli("search", DEMO, "leaky faucet", "--systems", "bm25,ql", "-k", "3", "--no-store", tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "Query likelihood (Dirichlet)" in res.stdout and "Dense" not in res.stdout
