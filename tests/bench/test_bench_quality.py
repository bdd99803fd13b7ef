"""``bench/quality.py`` as a user runs it, on the demo with a tiny encoder: every system's nDCG@10 with
its 95% interval, each one's difference from the first system with the paired interval, and the same
figures in the JSON."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import DEMO, ROOT

pytestmark = pytest.mark.bench


@pytest.mark.slow
def test_every_figure_carries_its_interval_and_each_difference_its_paired_one(tmp_path, tiny_model_dir):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONIOENCODING": "utf-8"}
    res = subprocess.run([sys.executable, "bench/quality.py", str(DEMO), "--systems", "hybrid,bm25,dense",
                          "--model", str(tiny_model_dir), "--store", str(tmp_path / "store.sqlite3"),
                          "--json", str(tmp_path / "run.json")],
                         cwd=ROOT, env=env, capture_output=True, text=True, encoding="utf-8", timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    saved = json.loads((tmp_path / "run.json").read_text())
    number = r"(-?\d\.\d{3,4})"
    for system, name in (("hybrid", "Hybrid (CLEAR λ)"), ("bm25", "BM25"), ("dense", "Dense")):
        line = next(line for line in res.stdout.splitlines() if line.startswith(f"{name}: ndcg@10"))
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
