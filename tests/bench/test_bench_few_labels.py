"""``bench/few_labels.py``: the label shares it keeps, and a whole run on the demo with a tiny encoder
(every row, the first stage trained once and shared, the last line's fields).

A run is the script's ``main`` on the command line a user types, in the test's process (what it prints read
from the captured output): a fresh interpreter would add the seconds of importing torch and
sentence-transformers to each run, and what is tested (the rows, the models kept in ``--out-dir`` and read
back by a second run) is the script's, not its process's."""
from __future__ import annotations

import json

import pytest

from tests.conftest import DEMO, bench_module, bench_output

pytestmark = pytest.mark.bench


@pytest.fixture(scope="module")
def bench():
    return bench_module("few_labels")


run = bench_output  # what ``python bench/few_labels.py COMMAND`` prints, its ``main`` run here


def test_shares_are_seeded_nested_and_never_touch_test(bench):
    from retrieval.data.readers import load_dataset

    ds = load_dataset(DEMO)
    none, small, some, every = (bench.keep_share(ds, f) for f in (0, 0.01, 0.2, 1.0))
    assert "train" not in none.qrels and none.qrels["test"] == ds.qrels["test"]
    assert len(small.qrels["train"]) == 1  # at least one query once the share is above 0
    assert set(small.qrels["train"]) <= set(some.qrels["train"]) <= set(every.qrels["train"])
    assert every.qrels["train"] == ds.qrels["train"] and some.qrels["test"] == ds.qrels["test"]
    assert bench.keep_share(ds, 0.2).qrels["train"] == some.qrels["train"]  # seeded


@pytest.mark.slow
def test_a_run_on_the_demo(bench, capsys, tiny_model_dir, tmp_path):
    out = tmp_path / "few.json"
    command = [DEMO, "--fractions", "0,0.05", "--pretrain", "ict", "--pretrain-pairs", "32", "--model", tiny_model_dir,
               "--store", tmp_path / "s.sqlite3", "--out-dir", tmp_path / "models", "--json", out]
    printed = run(bench, capsys, command)
    rows = json.loads(out.read_text())["rows"]
    assert [(r["fraction"], r["first_stage"]) for r in rows] == [(0, "none"), (0, "ict"), (0.05, "none"),
                                                                  (0.05, "ict")]
    assert [r["queries"] for r in rows] == [0, 0, 2, 2]
    assert rows[0]["train_s"] == 0 and rows[1]["train_s"] > 0
    assert all(0 <= r[s]["ndcg@10"] <= 1 for r in rows for s in ("dense", "hybrid"))
    assert (tmp_path / "models" / "pretrain-ict" / "modules.json").exists()  # trained once, then shared
    last = printed.strip().splitlines()[-1]
    gain = rows[3]["hybrid"]["ndcg@10"] - rows[2]["hybrid"]["ndcg@10"]
    assert last.startswith("best_few_label_recipe=") and f"gain_at_5pct={gain:.4f}" in last
    assert "gain_at_1pct=nan" in last  # no 1% row asked for
    # run again over the same folder: the finished models are read back, not trained again
    weights = {f: f.stat().st_mtime_ns for f in (tmp_path / "models").glob("*/model.safetensors")}
    assert len(weights) == 3  # the first stage, and 5% from the base and from the first stage
    again = run(bench, capsys, command)
    assert {f: f.stat().st_mtime_ns for f in weights} == weights
    rerun = json.loads(out.read_text())["rows"]
    assert [(r["dense"], r["hybrid"], r["train_s"]) for r in rerun] == \
        [(r["dense"], r["hybrid"], pytest.approx(r["train_s"], abs=0.1)) for r in rows]
    assert again.strip().splitlines()[-1] == last


@pytest.mark.slow
def test_check_runs_what_the_train_tab_runs(bench, capsys, tiny_model_dir, tmp_path):
    """``--check``: the defaults' held-out check and refit; each row says what was kept, with its p."""
    out = tmp_path / "few.json"
    printed = run(bench, capsys, [DEMO, "--fractions", "0,0.3", "--pretrain", "none", "--check", "--model",
                                  tiny_model_dir, "--store", tmp_path / "s.sqlite3", "--out-dir", tmp_path / "models",
                                  "--json", out])
    rows = json.loads(out.read_text())["rows"]
    assert [(r["fraction"], r["first_stage"], r["queries"]) for r in rows] == [(0, "none", 0), (0.3, "none", 12)]
    assert not (tmp_path / "models" / "pretrain-none").exists()  # no first stage was trained
    checked = rows[1]
    assert checked["verdict"].startswith("held-out selection on 2 queries: "), checked
    saved = json.loads((tmp_path / "models" / "0.3-none-check" / "rankscope_training.json").read_text())
    assert saved["config"]["holdout"] == 0.2 and saved["config"]["refit"] is True
    assert checked["kept"] == f"{saved['result']['selection']['chosen']['stage']} " \
                              f"{saved['result']['selection']['chosen']['epoch']}"
    assert checked["verdict"] in printed
