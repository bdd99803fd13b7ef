"""``bench/import_contention.py`` at a tiny size: the idle and during-import latencies of a labelled
search, every judgment stored, and the last line the issue's figure.

The script's ``main`` runs in the test's process, as its own does (the two sessions are two workspaces and
a thread of one process): a fresh interpreter would only add the seconds of importing the app's modules."""
from __future__ import annotations

import re

import pytest

from tests.conftest import bench_module

pytestmark = pytest.mark.bench


@pytest.mark.slow
def test_a_tiny_run_prints_both_phases_and_the_ratio_last(tmp_path, capsys):
    bench = bench_module("import_contention")
    assert bench.main(["--docs", "100", "--queries", "12", "--rows", "3000", "--searches", "10", "--work",
                       str(tmp_path), "--json", str(tmp_path / "run.json")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert re.search(r"3,000 judgments by 3 judges imported in [\d.]+ s \(3,000 stored\)", lines[0])
    phases = {m[1]: float(m[3]) for line in lines
              if (m := re.match(r"\s+(idle|during import)\s+n\s+(\d+)\s+p50\s+[\d.]+ ms\s+p95\s+([\d.]+) ms", line))}
    assert set(phases) == {"idle", "during import"}
    last = re.fullmatch(r"search_p95_ratio_during_import=([\d.]+)", lines[-1])
    # the p95s are printed to 0.1 ms, the ratio from them unrounded
    assert last and float(last[1]) == pytest.approx(phases["during import"] / phases["idle"], rel=0.1)
