"""``bench/import_contention.py`` at a tiny size: the idle and during-import latencies of a labelled
search, every judgment stored, and the last line the issue's figure."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.bench


@pytest.mark.slow
def test_a_tiny_run_prints_both_phases_and_the_ratio_last(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "import_contention.py"), "--docs", "100", "--queries",
                           "12", "--rows", "3000", "--searches", "10", "--work", str(tmp_path),
                           "--json", str(tmp_path / "run.json")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert re.search(r"3,000 judgments by 3 judges imported in [\d.]+ s \(3,000 stored\)", lines[0])
    phases = {m[1]: float(m[3]) for line in lines
              if (m := re.match(r"\s+(idle|during import)\s+n\s+(\d+)\s+p50\s+[\d.]+ ms\s+p95\s+([\d.]+) ms", line))}
    assert set(phases) == {"idle", "during import"}
    last = re.fullmatch(r"search_p95_ratio_during_import=([\d.]+)", lines[-1])
    # the p95s are printed to 0.1 ms, the ratio from them unrounded
    assert last and float(last[1]) == pytest.approx(phases["during import"] / phases["idle"], rel=0.1)
