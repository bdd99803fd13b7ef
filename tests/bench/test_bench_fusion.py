"""``bench/fusion_nolabels.py`` on the demo with a tiny encoder: the app's label-free hybrid is the
bench's own query-max combination at α = 0.5 (identifier lookups by BM25 alone) where the encoder
passes the reliability check, BM25 alone where it does not, and nothing is tuned on the reported labels."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import DEMO, bench_module, store_copy

pytestmark = pytest.mark.bench


@pytest.fixture(scope="module")
def bench():
    return bench_module("fusion_nolabels")


@pytest.fixture(scope="module")
def demo_table(bench, tiny_encoder, demo_sparse_store, tmp_path_factory):
    """The bench's table on the demo and each column's label-free signals, over a store holding the demo's
    learned sparse vectors already (``demo_sparse_store``: only the passages a kind edits go through SPLADE
    here, every one for "codes", the relevant ones for "withheld")."""
    from retrieval.store import Store

    store = Store(store_copy(demo_sparse_store, tmp_path_factory.mktemp("bench-fusion") / "store.sqlite3"))
    signals: dict = {}
    rows = bench.table({"demo": (DEMO, "test", "train")}, ["as is", "codes", "withheld"], store, model=tiny_encoder,
                       signals_=signals)
    yield rows, signals
    store.close()


@pytest.fixture(scope="module")
def demo_rows(demo_table):
    return demo_table[0]


@pytest.mark.slow
def test_the_default_row_is_the_gated_query_max_combination(bench, demo_rows, tiny_encoder):
    from retrieval import Workspace, load_dataset
    from retrieval.systems.reliability import dense_reliability

    reliable = dense_reliability(Workspace(bench.KINDS["as is"](load_dataset(DEMO), "test"), None,
                                           model=tiny_encoder)).reliable
    row = demo_rows["demo|as is"]
    expected = row["query max α 0.5, lookups by BM25 alone"] if reliable else row["bm25"]
    assert row[bench.DEFAULT] == pytest.approx(expected, abs=1e-9)
    assert row["query max α 0.5, no reliability or lookup rule"] == pytest.approx(row["query max α 0.5"], abs=1e-9)
    assert set(row) >= {"bm25", "dense", "splade", "RRF k 60", "RRF k 60, three systems", "TMM α 0.5",
                        "agreement-chosen α", "agreement-weighted, three systems"}
    assert all(0.0 <= v <= 1.0 for v in row.values())


@pytest.mark.slow  # its table encodes the edited corpus with SPLADE: over 20 s on a 2-core AVX2-only AMD EPYC
def test_codes_are_known_items_bm25_finds_and_the_default_leaves_to_it(demo_rows):
    row = demo_rows["demo|codes"]
    assert row["bm25"] > 0.9 > row["dense"]  # the part number is one exact token
    assert row["query max α 0.5, lookups by BM25 alone"] == pytest.approx(row["bm25"], abs=1e-9)


@pytest.mark.slow  # its table encodes the edited corpus with SPLADE: over 20 s on a 2-core AVX2-only AMD EPYC
def test_gaps_are_against_the_better_of_bm25_and_dense(bench, demo_rows):
    g = bench.show(demo_rows)
    worst = [r[bench.DEFAULT] - max(r["bm25"], r["dense"]) for r in demo_rows.values()]
    assert g[bench.DEFAULT] == pytest.approx((min(worst), float(np.mean(worst))))


def test_the_reported_split_is_the_only_labelled_one(bench):
    from retrieval.data.readers import load_dataset

    for make in bench.KINDS.values():
        assert make(load_dataset(DEMO), "test").splits == ["test"]  # no train split: λ cannot be tuned


def test_a_kind_made_for_two_splits_edits_the_corpus_for_both_and_keeps_the_first_as_alone(bench):
    from retrieval.data.language import corpus_tokenizer
    from retrieval.data.readers import load_dataset

    full = load_dataset(DEMO)
    for name, make in bench.KINDS.items():
        one, two = make(full, "test"), make(full, "test", "train")
        assert two.splits == ["test", "train"] and two.qrels["test"] == one.qrels["test"], name
        assert {q: two.queries[q] for q in one.queries} == one.queries, name
    two = bench.KINDS["withheld"](full, "test", "train")
    tok = corpus_tokenizer([d.full_text for d in full.docs.values()])
    for split in ("test", "train"):
        for qid, labels in two.qrels[split].items():
            stems = set(tok(two.queries[qid]))
            relevant = [d for d, g in labels.items() if g > 0 and d in two.docs]
            assert all(not stems & set(tok(two.docs[d].full_text)) for d in relevant)
    codes = bench.KINDS["codes"](full, "test", "train")
    assert not set(codes.qrels["test"]) & set(codes.qrels["train"])
    assert all(codes.queries[q] in codes.docs[d].text for s in ("test", "train")
               for q, labels in codes.qrels[s].items() for d in labels)


@pytest.mark.slow
def test_each_column_shows_its_label_free_signals_beside_the_alphas_that_meet_the_target(bench, demo_table, capsys):
    rows, sig = demo_table
    s = sig["demo|withheld"]
    assert set(s) == set(bench.SIGNALS) and 0 <= s["no word"] <= 1 and 0 <= s["RBO"] <= 1 and s["BM25 ratio"] >= 0
    row, best = rows["demo|withheld"], max(rows["demo|withheld"]["bm25"], rows["demo|withheld"]["dense"])
    within = bench.alphas_within(row)
    assert all((row[f"query max α {a}"] >= best - bench.TOLERANCE) == (a in within) for a in bench.ALPHAS)
    bench.show(rows, sig)
    assert "demo|withheld" in capsys.readouterr().out.split("label-free signals")[1]
