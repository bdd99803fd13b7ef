"""``bench/session_memory.py`` on a small synthetic corpus: one child process per corpus, the app's
memory estimate beside what the process really grew, and the last line the issue's figures."""
from __future__ import annotations

import re
import subprocess
import sys

from .conftest import ROOT


def test_a_small_run_measures_held_and_untrimmed_memory_against_the_estimate(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "session_memory.py"), "--docs", "400", "--datasets", "",
                           "--dim", "64", "--work", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    row = next(line for line in lines if line.startswith("synthetic 400"))
    estimated, held, _, untrimmed, _ = (float(x) for x in row.split()[3:])
    assert 0 < held <= untrimmed and estimated > 0
    last = re.fullmatch(r"held_over_estimated_max=([\d.]+) untrimmed_over_estimated_max=([\d.]+)", lines[-1])
    assert last and 0 < float(last[1]) <= float(last[2])
