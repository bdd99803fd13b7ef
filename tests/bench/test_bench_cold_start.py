"""``bench/cold_start.py`` at its smallest: one fresh process per figure, a tiny encoder, no
first-ever runs; its summary line last, and the leaf it imports leaves the heavy libraries out."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.bench


@pytest.mark.slow
def test_a_tiny_run_prints_its_three_figures_last(tmp_path, tiny_model_dir):
    out = tmp_path / "run.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "cold_start.py"), "--repeat", "1", "--skip-first-ever",
                           "--model", str(tiny_model_dir), "--work", str(tmp_path / "work"), "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1].split()
    assert [pair.split("=")[0] for pair in last] == ["cli_help_s", "leaf_import_s", "first_rrf_s"]
    assert all(float(pair.split("=")[1]) > 0 for pair in last)
    figures = json.loads(out.read_text())
    assert figures["leaf_loaded"] == [] and figures["queries"] == 32 and figures["documents"] == 384
    assert figures["rrf_interval"][0] <= figures["rrf_ndcg@10"] <= figures["rrf_interval"][1]
    assert figures["run"]["figures"]["first_rrf_s"] == pytest.approx(figures["first_rrf_s"], abs=0.01)
