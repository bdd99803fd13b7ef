"""``bench/query_expansion.py`` on the bundled demo: BM25 and RM3 per metric with their intervals, RM3 −
BM25 with the paired test's interval and p, the figures equal to what the workspace evaluates, and the
last line the smallest differences. The notebook's table of the recorded run is checked elsewhere
(``tests/bench/test_bench_notebook.py``)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from retrieval import Workspace, load_dataset
from retrieval.evaluation.measures import compare
from tests.conftest import DEMO, ROOT

pytestmark = pytest.mark.bench


def test_the_demo_run_prints_both_systems_the_paired_difference_and_the_smallest_deltas_last(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "query_expansion.py"), "--sets", "demo",
                           "--json", str(tmp_path / "run.json")], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    data = json.loads((tmp_path / "run.json").read_text())["demo"]
    ws = Workspace(load_dataset(str(DEMO)), None)
    bm25, rm3 = ws.evaluate("bm25", "test"), ws.evaluate("rm3", "test")
    for metric in ("ndcg@10", "recall@100", "recall@1000"):
        row = data[metric]
        assert row["bm25"][0] == pytest.approx(bm25.mean[metric]) and row["rm3"][0] == pytest.approx(rm3.mean[metric])
        assert row["bm25"][1] <= row["bm25"][0] <= row["bm25"][2]
        c = compare(bm25, rm3, metric)
        assert row["delta"] == pytest.approx([c.delta, c.interval.low, c.interval.high]) and row["p"] == c.p_value
    last = re.fullmatch(r"rm3_ndcg10_delta_min=(-?[\d.]+) rm3_recall1000_delta_min=(-?[\d.]+)", lines[-1])
    assert last and float(last[1]) == pytest.approx(data["ndcg@10"]["delta"][0], abs=1e-4)


def test_an_unknown_set_is_refused_by_name():
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "query_expansion.py"), "--sets", "nosuch"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "nosuch" in proc.stderr
