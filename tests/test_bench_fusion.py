"""``bench/fusion_nolabels.py`` on the demo with a tiny encoder: the app's label-free hybrid is the
bench's own query-max combination at α = 0.5 (identifier lookups by BM25 alone) where the encoder
passes the reliability check, BM25 alone where it does not, and nothing is tuned on the reported labels."""
from __future__ import annotations

import numpy as np
import pytest

from .conftest import DEMO, bench_module


@pytest.fixture(scope="module")
def bench():
    return bench_module("fusion_nolabels")


@pytest.fixture(scope="module")
def demo_rows(bench, tiny_encoder):
    return bench.table({"demo": (DEMO, "test", "train")}, ["as is", "codes"], None, model=tiny_encoder)


def test_the_default_row_is_the_gated_query_max_combination(bench, demo_rows, tiny_encoder):
    from retrieval import Workspace, load_dataset
    from retrieval.reliability import dense_reliability

    reliable = dense_reliability(Workspace(bench.KINDS["as is"](load_dataset(DEMO), "test"), None,
                                           model=tiny_encoder)).reliable
    row = demo_rows["demo|as is"]
    expected = row["query max α 0.5, lookups by BM25 alone"] if reliable else row["bm25"]
    assert row[bench.DEFAULT] == pytest.approx(expected, abs=1e-9)
    assert row["query max α 0.5, no reliability or lookup rule"] == pytest.approx(row["query max α 0.5"], abs=1e-9)
    assert set(row) >= {"bm25", "dense", "splade", "RRF k 60", "RRF k 60, three systems", "TMM α 0.5",
                        "agreement-chosen α", "agreement-weighted, three systems"}
    assert all(0.0 <= v <= 1.0 for v in row.values())


def test_codes_are_known_items_bm25_finds_and_the_default_leaves_to_it(demo_rows):
    row = demo_rows["demo|codes"]
    assert row["bm25"] > 0.9 > row["dense"]  # the part number is one exact token
    assert row["query max α 0.5, lookups by BM25 alone"] == pytest.approx(row["bm25"], abs=1e-9)


def test_gaps_are_against_the_better_of_bm25_and_dense(bench, demo_rows):
    g = bench.show(demo_rows)
    worst = [r[bench.DEFAULT] - max(r["bm25"], r["dense"]) for r in demo_rows.values()]
    assert g[bench.DEFAULT] == pytest.approx((min(worst), float(np.mean(worst))))


def test_rbo_is_one_for_equal_lists_and_zero_for_disjoint(bench):
    a = np.arange(30)
    assert bench.rbo(a, a) == pytest.approx(1.0)
    assert bench.rbo(a, a + 100) == 0.0
    assert 0 < bench.rbo(a, a[::-1]) < 1


def test_the_reported_split_is_the_only_labelled_one(bench):
    from retrieval.readers import load_dataset

    for make in bench.KINDS.values():
        assert make(load_dataset(DEMO), "test").splits == ["test"]  # no train split: λ cannot be tuned
