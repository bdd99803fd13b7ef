"""``bench/fusion_nolabels.py`` on the demo with a tiny encoder: the app's label-free hybrid is the
bench's own query-max convex combination at α = 0.5, and nothing is tuned on the reported labels."""
from __future__ import annotations

import pytest

from .conftest import DEMO, bench_module


@pytest.fixture(scope="module")
def bench():
    return bench_module("fusion_nolabels")


def test_the_default_row_is_the_query_max_combination_at_one_half(bench, tiny_encoder):
    results = bench.table({"demo": (DEMO, "test")}, None, model=tiny_encoder)["demo:test"]
    assert results["default (the app's hybrid)"] == pytest.approx(results["query max α 0.5"], abs=1e-9)
    assert set(results) >= {"bm25", "dense", "RRF k 60", "TMM α 0.8", "CLEAR scale-matched λ (before)"}
    assert all(0.0 <= v <= 1.0 for v in results.values())
    gaps = bench.show({"demo:test": results})
    best = max(results["bm25"], results["dense"])
    assert gaps["default (the app's hybrid)"][0] == pytest.approx(results["default (the app's hybrid)"] - best)


def test_the_reported_split_is_the_only_labelled_one(bench):
    from retrieval.readers import load_dataset

    ds = bench.only(load_dataset(DEMO), "test")
    assert ds.splits == ["test"]  # no train split: λ cannot be tuned on anything
