"""``bench/train_speed.py`` as a user runs it, on the demo data set with a tiny encoder: RankScope's
trainer and sentence-transformers' own trainer each train the same examples with the same loss,
and the last line is their throughput ratio. The script's ``main`` runs in the test's process on the
command line a user types: a fresh interpreter would only add the seconds of importing torch and
sentence-transformers."""
from __future__ import annotations

import re

import pytest

from tests.conftest import DEMO, bench_module

pytestmark = pytest.mark.bench


@pytest.mark.slow
def test_both_trainers_run_the_timed_steps_and_the_last_line_is_their_ratio(tmp_path, tiny_model_dir, capsys):
    pytest.importorskip("datasets")
    bench_module("train_speed").main([str(DEMO), "--model", str(tiny_model_dir), "--device", "cpu", "--steps", "6",
                                      "--skip", "2", "--batch-size", "4", "--repeats", "2",
                                      "--json", str(tmp_path / "run.json")])
    lines = capsys.readouterr().out.strip().splitlines()
    runs = [line.split() for line in lines if line.startswith("  repeat")]
    # two repeats, in alternating order, each trainer running all six steps
    assert [(r[1], r[2]) for r in runs] == [("1", "RankScope"), ("1", "SentenceTransformerTrainer"),
                                            ("2", "SentenceTransformerTrainer"), ("2", "RankScope")]
    assert all("(6 steps)" in line for line in lines if line.startswith("  repeat"))
    last = re.fullmatch(r"train_throughput_ratio=(\d+\.\d{3}) device=cpu", lines[-1])
    assert last, lines[-1]
    rates: dict[str, list[float]] = {}
    for r in runs:
        rates.setdefault(r[2], []).append(float(r[-4]))  # "… <rate> examples/s (6 steps)"
    ours, theirs = max(rates["RankScope"]), max(rates["SentenceTransformerTrainer"])
    assert float(last.group(1)) == pytest.approx(ours / theirs, rel=0.01)


def test_throughput_skips_the_warm_up_steps():
    speed = bench_module("train_speed")
    # five steps ending at these times; skipping two, steps 3–5 ran from 11.0 to 15.0: 3 × 4 examples in 4 s
    assert speed.throughput([10.0, 11.0, 12.0, 13.5, 15.0], skip=2, batch_size=4) == pytest.approx(12 / 4)
    assert speed.throughput([1.0, 2.0, 4.0], skip=0, batch_size=2) == pytest.approx(4 / 3)
    with pytest.raises(ValueError, match="too few"):
        speed.throughput([1.0, 2.0], skip=2, batch_size=4)
