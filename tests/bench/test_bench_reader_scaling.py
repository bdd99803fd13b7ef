"""``bench/reader_scaling.py`` at its quick size: a row of rows/s per kind of file at each size, the
ratio of the largest size's rate to the smallest's beside it, and the last line the smallest ratio.
The format only: a speed measured in seconds on a shared machine is no test's business."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.bench

KINDS = ("run, a tag per line", "run, one tag", "judgments, many judges", "qrels (BEIR TSV)")


def test_a_quick_run_prints_each_kinds_rates_and_the_smallest_ratio_last(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "reader_scaling.py"), "--quick", "--rows-per-judge",
                           "10", "--work", str(tmp_path / "work"), "--json", str(tmp_path / "run.json")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("rows/s of each reader at 1,000, 4,000 lines (seed 0; a new judge every 10 rows: "
                               "400 judges at 4,000)")
    rows = {m[1].strip(): (float(m[2].replace(",", "")), float(m[3].replace(",", "")), float(m[4]))
            for line in lines if (m := re.fullmatch(r"  (.+?)\s+([\d,]+)\s+([\d,]+)\s+([\d.]+)", line))}
    assert tuple(rows) == KINDS
    for small, large, ratio in rows.values():
        assert small > 0 and large > 0
        assert ratio == pytest.approx(large / small, rel=0.01, abs=0.01)  # rates printed to the row
    last = re.fullmatch(r"reader_rate_ratio=([\d.]+)", lines[-1])
    assert last and float(last[1]) == min(r for _, _, r in rows.values())
    recorded = json.loads((tmp_path / "run.json").read_text())
    assert recorded["sizes"] == [1000, 4000] and set(recorded["ratio"]) == set(KINDS)
    assert recorded["run"]["figures"] == {"reader_rate_ratio": float(last[1])}
    assert sorted(p.name for p in (tmp_path / "work").iterdir())[:2] == ["0-1000.txt", "0-4000.txt"]
