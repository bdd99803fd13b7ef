"""``bench/quality.py`` as a user runs it, on the demo with a tiny encoder: every system's nDCG@10 with
its 95% interval, each one's difference from the first system with the paired interval, and the same
figures in the JSON. The script's ``main`` runs in the test's process on the command line a user types: a
fresh interpreter would only add the seconds of importing torch and sentence-transformers."""
from __future__ import annotations

import json
import re

import pytest

from tests.conftest import DEMO, bench_module

pytestmark = pytest.mark.bench


@pytest.mark.slow
def test_every_figure_carries_its_interval_and_each_difference_its_paired_one(tmp_path, tiny_model_dir, capsys):
    bench = bench_module("quality")
    assert bench.main([str(DEMO), "--systems", "hybrid,bm25,dense", "--model", str(tiny_model_dir),
                       "--store", str(tmp_path / "store.sqlite3"), "--json", str(tmp_path / "run.json")]) == 0
    printed = capsys.readouterr().out
    saved = json.loads((tmp_path / "run.json").read_text())
    number = r"(-?\d\.\d{3,4})"
    for system, name in (("hybrid", "Hybrid (CLEAR λ)"), ("bm25", "BM25"), ("dense", "Dense")):
        line = next(line for line in printed.splitlines() if line.startswith(f"{name}: ndcg@10"))
        mean, low, high = map(float, re.match(rf"{re.escape(name)}: ndcg@10 {number} \[{number}, {number}\]",
                                              line).groups())
        assert low <= mean <= high
        assert saved["intervals"][system]["ndcg@10"] == pytest.approx([low, high], abs=1e-3)
        if system != "hybrid":
            d = saved["against_first"][system]
            assert "against Hybrid (CLEAR λ): Δ" in line
            assert d["interval"][0] <= d["delta"] <= d["interval"][1]
            gap = saved["metrics"][system]["ndcg@10"] - saved["metrics"]["hybrid"]["ndcg@10"]
            assert d["delta"] == pytest.approx(gap, abs=1e-9)
