"""``bench/first_use.py`` at its smallest: a tiny encoder, the test session's numba cache folder (filled by
the first process if the session has not), the warm projection, no training; its summary line last."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from retrieval.evaluation.numba_guard import cache_folder
from tests.conftest import ROOT

pytestmark = pytest.mark.bench


@pytest.mark.slow  # two fresh interpreters that import torch and umap-learn (one gradio too): 48 s at load 7, 2 cores
def test_a_tiny_run_prints_its_figures_last_and_its_projection_compiles_nothing(tmp_path, tiny_model_dir):
    out = tmp_path / "run.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "first_use.py"), "--skip-cold", "--skip-training",
                           "--model", str(tiny_model_dir), "--work", str(tmp_path / "work"), "--json", str(out),
                           "--numba-cache", str(cache_folder())],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    last = dict(pair.split("=") for pair in done.stdout.strip().splitlines()[-1].split())
    assert list(last) == ["first_projection_s", "first_projection_cold_s", "smallest_training_s", "busy"]
    assert float(last["first_projection_s"]) > 0 and last["busy"] == "0"
    assert last["first_projection_cold_s"] == last["smallest_training_s"] == "none"
    figures = json.loads(out.read_text())
    warm = figures["runs"]["warm"]
    # the first process filled numba's cache folder: the projection's process loads UMAP's kernels, compiles none
    assert warm["compiled"] == 0 and warm["loaded"] > 0 and warm["points"] > 0
    assert set(figures["runs"]) == {"fill", "warm"} and figures["runs"]["fill"]["warm_up_s"] > 0
    assert figures["run"]["figures"]["first_projection_s"] == pytest.approx(figures["first_projection_s"], abs=0.01)
