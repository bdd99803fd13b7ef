"""``bench/explain_cost.py`` with the tiny encoder on the demo: every kind of cost measured for each query,
the per-hit and ratio figures computed from them as the docstring says, the last line its two figures
(the times themselves are never checked). The script's ``main`` runs in the test's process on the command
line a user types (the process's memory of explanations is emptied by the script itself where a figure
is cold): a fresh interpreter would only add the seconds of importing torch and sentence-transformers."""
from __future__ import annotations

import json
import re

import pytest

from tests.conftest import DEMO, bench_module

pytestmark = pytest.mark.bench


def test_per_hit_and_ratio_are_means_over_queries():
    bench = bench_module("explain_cost")
    assert bench.per_hit([0.5, 0.2], [10, 4]) == pytest.approx((50 + 50) / 2)
    assert bench.ratio([1.0, 3.0], [0.5, 1.0]) == pytest.approx((2 + 3) / 2)


def test_the_demo_run_measures_every_kind_and_ends_with_its_line(tmp_path, tiny_model_dir, capsys):
    assert bench_module("explain_cost").main([str(DEMO), "--queries", "2", "--model", str(tiny_model_dir),
                                              "--json", str(tmp_path / "run.json")]) == 0
    printed = capsys.readouterr().out
    data = json.loads((tmp_path / "run.json").read_text())
    demo = data["sets"]["demo"]
    assert demo["queries"] == 2 and demo["k"] == 10 and "AVX-512/AMX flags" in data["cpu"]
    for kind in ("dense_cold", "dense_new_query", "dense_warm", "dense_memory", "hybrid_cold", "hybrid_warm"):
        assert demo[f"{kind}_ms_per_hit"] > 0 and demo[f"{kind}_to_search"] > 0
    last = re.fullmatch(r"explain_ms_per_hit=([\d.]+) explain_cached_ms_per_hit=([\d.]+)",
                        printed.strip().splitlines()[-1])
    assert last and float(last[1]) == pytest.approx(demo["dense_cold_ms_per_hit"], abs=0.01)
