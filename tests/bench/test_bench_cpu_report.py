"""``bench/cpu_report.py`` as a user runs it, on the demo with a tiny encoder: the CPU class, each bench
run for real in its own process, and the one line of the three figures. The judging bench grades at
``--pace 0``: a judge's reading time between two grades is a wait of the user's, not work of the app's,
and its seconds would only lengthen the test; its app opens a copy of the store that holds SPLADE's vectors
of the demo (``--store``), so nothing encodes the demo again before the timings."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from retrieval.index.cpu_choice import cpu_class
from tests.conftest import DEMO, ROOT, store_copy

pytestmark = pytest.mark.bench
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONIOENCODING": "utf-8"}


@pytest.mark.slow
@pytest.mark.server
def test_the_report_runs_the_three_benches_and_ends_with_their_figures(tmp_path, tiny_model_dir, demo_sparse_store):
    store = store_copy(demo_sparse_store, tmp_path / "judge" / "store.sqlite3")  # SPLADE's demo vectors: read
    res = subprocess.run([sys.executable, "bench/cpu_report.py", str(DEMO), "--docs", "24", "--repeat", "1",
                          "--queries", "300", "--judgments", "3", "--pace", "0", "--model", str(tiny_model_dir),
                          "--store", str(store), "--json", str(tmp_path / "run.json")],
                         cwd=ROOT, env=ENV, capture_output=True, text=True, encoding="utf-8", timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    lines = res.stdout.splitlines()
    klass = cpu_class()
    assert lines[0].startswith(f"CPU class: {klass.label}, ") and lines[0].endswith(f"({klass.slug})")
    last = re.fullmatch(r"cpu=(\S+) encode_ratio=(\d+\.\d+) bm25_ratio=(\d+\.\d+) judge_p95_ms=(\d+\.\d+)", lines[-1])
    assert last and last.group(1) == klass.slug and all(float(x) > 0 for x in last.groups()[1:])
    for script in ("encode_speed", "bm25_speed", "judge_speed"):  # each bench's own lines, its command first
        assert any(line.startswith(f"$ python bench/{script}.py") for line in lines)
    assert any(line.startswith("$ python bench/judge_speed.py") and line.endswith(f" --pace 0 --store {store}")
               for line in lines)
    assert store.is_file()  # a store it was given is the user's: kept
    assert any(line.startswith("the judging floor on this machine: Gradio echo") for line in lines)
    saved = json.loads((tmp_path / "run.json").read_text())
    figures = saved["run"]["figures"]
    assert figures["cpu"] == klass.slug and figures["judge_p95_ms"] == float(last.group(4))
    assert klass.label in saved["run"]["machine"]


def test_a_failing_bench_stops_the_report_with_its_output(tmp_path):
    res = subprocess.run([sys.executable, "bench/cpu_report.py", str(tmp_path / "missing"), "--docs", "4"],
                         cwd=ROOT, env=ENV, capture_output=True, text=True, encoding="utf-8", timeout=300)
    assert res.returncode != 0
    assert "bench/encode_speed.py failed with status" in res.stderr and "missing" in res.stderr
    assert "cpu=" not in res.stdout
