"""``bench/sparse_training.py`` as a user runs it, on the demo with a tiny dense encoder: the sparse
model is trained and evaluated once, a second run (the script's ``main`` in the test's process) reads it
back, and the last line's figures are the JSON's."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import DEMO, ROOT, bench_module, store_copy

pytestmark = pytest.mark.bench


def demo_slice(folder):
    """The demo's queries and labels over its relevant passages and 20 others: a BEIR folder to encode fast."""
    qrels = [line.split("\t") for line in (DEMO / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    qrels += [line.split("\t") for line in (DEMO / "qrels" / "train.tsv").read_text().splitlines()[1:]]
    relevant = {row[1] for row in qrels}
    lines = (DEMO / "corpus.jsonl").read_text().splitlines()
    kept = [line for line in lines if json.loads(line)["_id"] in relevant]
    kept += [line for line in lines if json.loads(line)["_id"] not in relevant][:20]
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("\n".join(kept) + "\n")
    (folder / "queries.jsonl").write_text((DEMO / "queries.jsonl").read_text())
    for split in ("train", "test"):
        (folder / "qrels" / f"{split}.tsv").write_text((DEMO / "qrels" / f"{split}.tsv").read_text())
    return folder


@pytest.mark.slow
def test_the_sparse_model_is_trained_once_and_its_figures_carry_intervals(tmp_path, tiny_model_dir, demo_sparse_store,
                                                                          monkeypatch, capsys):
    """The store holds the bundled SPLADE's vectors of the demo's passages from the start (a copy of the run's
    ``demo_sparse_store``), as a user's store does once the app has indexed the demo: the base is read, the
    fine-tuned model encodes the slice."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONIOENCODING": "utf-8"}
    command = [sys.executable, "bench/sparse_training.py", str(demo_slice(tmp_path / "demo")), "--epochs", "1",
               "--max-steps-per-epoch", "2",
               "--model", str(tiny_model_dir), "--out-dir", str(tmp_path / "model"),
               "--store", str(store_copy(demo_sparse_store, tmp_path / "store.sqlite3")),
               "--json", str(tmp_path / "run.json")]
    res = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, encoding="utf-8", timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    # the same command again, its ``main`` in this process: what it reads back is on disk, not in a process
    monkeypatch.setattr(sys, "argv", command[1:])
    weights = tmp_path / "model" / "model.safetensors"
    written = weights.stat().st_mtime_ns
    capsys.readouterr()
    assert bench_module("sparse_training").main() == 0
    again = capsys.readouterr()
    assert weights.stat().st_mtime_ns == written  # the model is read, not saved again
    first, second = res.stdout.strip().splitlines(), again.out.strip().splitlines()
    assert first[-1] == second[-1], "the second run reads the first one's model and figures back"
    assert "sparse: in-batch" not in again.err  # nothing trained again
    figures = dict(pair.split("=") for pair in first[-1].split())
    assert list(figures) == ["splade_delta", "splade_low", "splade_high", "splade_p", "hybrid3_minus_hybrid",
                             "hybrid3_low", "hybrid3_high"]
    assert float(figures["splade_low"]) <= float(figures["splade_delta"]) <= float(figures["splade_high"])
    saved = json.loads((tmp_path / "run.json").read_text())
    assert saved["splade_delta"] == pytest.approx(float(figures["splade_delta"]), abs=1e-4)
    assert any(re.match(r"fine-tuned − base splade: Δ [+-]\d\.\d{4} \[", line) for line in first)
    for side in ("base", "fine-tuned"):  # each fusion row says the μ it was scored at
        assert any(re.match(rf"{side}\s+hybrid3\s+ndcg@10 \d\.\d{{4}} .* \(μ [\d.]+\)$", line) for line in first), first
