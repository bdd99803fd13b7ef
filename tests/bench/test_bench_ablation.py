"""``bench/train_ablation.py --search`` as a user runs it, on the demo data set with a tiny encoder: the
held-out search tries every (learning rate, epoch), picks the best held-out hybrid (or dense Recall@100),
and the refit uses it.

The script's ``main`` runs in the test's process with the command line a user types (what it prints read
from the captured output): a fresh interpreter would add the seconds of importing torch and
sentence-transformers to every run, twice per test where a run is repeated, and what is tested here (the
search, the refit, the table, a second run reading back what the first wrote to its folder) is the
script's, not its process's."""
from __future__ import annotations

import json

import pytest

from tests.conftest import DEMO, bench_module, bench_output

pytestmark = pytest.mark.bench


@pytest.fixture(scope="module")
def bench():
    return bench_module("train_ablation")


run = bench_output  # what ``python bench/train_ablation.py COMMAND`` prints, its ``main`` run here


@pytest.mark.slow
@pytest.mark.parametrize("select_on", ["hybrid", "dense_recall@100"])
def test_search_picks_the_best_held_out_trial_and_refits_with_it(bench, capsys, tmp_path, tiny_model_dir,
                                                                  select_on):
    out = tmp_path / "abl.json"
    command = [DEMO, "--search", "--search-lr", "1e-4,3e-3", "--search-epochs", "2", "--rows", "base,residual",
               "--model", tiny_model_dir, "--device", "cpu", "--batch-size", "4", "--max-steps-per-epoch", "2",
               "--store", tmp_path / "s.sqlite3", "--out-dir", tmp_path / "runs", "--json", out,
               "--select-on", select_on]
    printed = run(bench, capsys, command)
    rows = {r["row"]: r for r in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"base", "residual"} and "search" not in rows["base"]
    row = rows["residual"]
    trials = row["search"]
    assert [(t["lr"], t["epochs"]) for t in trials] == [(1e-4, 1), (1e-4, 2), (3e-3, 1), (3e-3, 2)]
    assert all(0.0 <= t[k] <= 1.0 for t in trials for k in ("hybrid", "dense", "dense_recall@100"))
    best = max(trials, key=lambda t: (round(t[select_on], 4), -t["epochs"]))
    # the refit trains the chosen configuration on all of train and evaluates at that trial's λ_test
    assert (row["config"]["lr"], row["config"]["epochs"]) == (best["lr"], best["epochs"])
    assert row["lambda_test"] == best["lambda_test"]
    assert row["config"]["loss"] == "residual" and row["config"]["negatives"] == "bm25"
    assert 0.0 <= row["hybrid"]["ndcg@10"] <= 1.0 and row["train_s"] > 0
    assert f"[lr {best['lr']:g}, {best['epochs']} epochs]" in printed
    assert "base encoder on the held-out part: hybrid nDCG@10 " in printed
    # the four trials' lines, in order, then the table
    assert [line.split(":")[0].strip() for line in printed.splitlines() if line.startswith("  residual lr")] == \
        ["residual lr 0.0001 epoch 1", "residual lr 0.0001 epoch 2", "residual lr 0.003 epoch 1",
         "residual lr 0.003 epoch 2"]
    if select_on != "hybrid":
        return
    # the same command again goes on where the first stopped: here nothing is left, so every trial and
    # the refit are read back, not trained again, and the table is the same
    weights = sorted((tmp_path / "runs").rglob("model.safetensors"))
    stamps = [w.stat().st_mtime_ns for w in weights]
    again = run(bench, capsys, command)
    assert [w.stat().st_mtime_ns for w in weights] == stamps and len(weights) == 3  # 2 trials, 1 refit
    lines = [line for line in again.splitlines() if line.startswith("  residual lr")]
    assert len(lines) == 4 and all(line.endswith(" (recorded)") for line in lines)
    row2 = {r["row"]: r for r in json.loads(out.read_text())["rows"]}["residual"]
    assert row2["search"] == trials and row2["config"] == row["config"] and row2["hybrid"] == row["hybrid"]


@pytest.mark.slow
def test_wise_scores_interpolations_with_the_base_beside_the_trials(bench, capsys, tmp_path, tiny_model_dir):
    """α 0 is the base's own weights and α 1 the trial's: their held-out scores must equal the base's
    reference line and the trial's last epoch; α 0.5 is a model of its own, recorded, never chosen."""
    out = tmp_path / "abl.json"
    command = [DEMO, "--search", "--search-lr", "3e-3", "--search-epochs", "1", "--rows", "residual",
               "--model", tiny_model_dir, "--device", "cpu", "--batch-size", "4", "--max-steps-per-epoch", "2",
               "--store", tmp_path / "s.sqlite3", "--out-dir", tmp_path / "runs", "--json", out, "--wise", "0,1"]
    run(bench, capsys, command)
    (trial,) = json.loads(out.read_text())["rows"][0]["search"]
    assert set(trial["wise"]) == {"0", "1"}
    # asked again with one more α: the finished trial is not trained again, only α 0.5 is scored, from its export
    weights = sorted((tmp_path / "runs" / "search").rglob("model.safetensors"))
    stamps = [w.stat().st_mtime_ns for w in weights]
    printed = run(bench, capsys, command[:-1] + ["0,0.5,1"])
    assert [w.stat().st_mtime_ns for w in weights] == stamps and len(weights) == 1
    assert "(interpolations added)" in printed
    (again,) = json.loads(out.read_text())["rows"][0]["search"]
    wise = again["wise"]
    assert set(wise) == {"0", "0.5", "1"} and {a: wise[a] for a in ("0", "1")} == trial["wise"]
    reference = next(line for line in printed.splitlines() if line.startswith("base encoder on the held-out part"))
    assert f"hybrid nDCG@10 {wise['0']['hybrid']:.4f} " in reference and f"dense {wise['0']['dense']:.4f}," in reference
    assert all(wise["1"][k] == trial[k] for k in ("hybrid", "dense", "dense_recall@100", "lambda_test"))
    assert trial["dense"] != wise["0"]["dense"]  # trained at a high rate: the trial moved away from the base
    # the recorded trial's two, then all three once 0.5 is added
    assert printed.count("interpolated with the base at α") == 2 + 3


@pytest.mark.slow
def test_the_closing_table_gives_intervals_and_paired_differences(bench, capsys, tmp_path, tiny_model_dir):
    """Every row's test nDCG@10 with its interval, and its paired difference from the base and from the
    reference row: the difference is the difference of the rows' own means, inside its interval."""
    out = tmp_path / "abl.json"
    command = [DEMO, "--rows", "base,inbatch-bm25,marginmse-hybrid", "--model", tiny_model_dir, "--device", "cpu",
               "--batch-size", "4", "--max-steps-per-epoch", "2", "--lr", "3e-3", "--store", tmp_path / "s.sqlite3",
               "--out-dir", tmp_path / "runs", "--json", out]
    printed = run(bench, capsys, command)
    saved = json.loads(out.read_text())
    rows = {r["row"]: r for r in saved["rows"]}
    table = {line["row"]: line for line in saved["intervals"]}
    assert list(table) == ["base", "inbatch-bm25", "marginmse-hybrid"]
    for name, line in table.items():
        for system in ("dense", "hybrid"):
            cell = line[system]
            assert cell["ndcg@10"] == pytest.approx(rows[name][system]["ndcg@10"], abs=1e-4)
            low, high = cell["interval"]
            assert low <= cell["ndcg@10"] <= high
            expected = {"base": set(), "inbatch-bm25": {"vs_base"}, "marginmse-hybrid": {"vs_base", "vs_inbatch-bm25"}}
            assert {k for k in cell if k.startswith("vs_")} == expected[name]
            for key in expected[name]:
                other = table[key[3:]][system]["ndcg@10"]
                diff = cell[key]
                assert diff["delta"] == pytest.approx(cell["ndcg@10"] - other, abs=1e-9)
                assert diff["interval"][0] <= diff["delta"] <= diff["interval"][1] and 0.0 <= diff["p"] <= 1.0
    shown = [line for line in printed.splitlines()
             if line.startswith("marginmse-hybrid") and "vs inbatch-bm25" in line]
    assert len(shown) == 2 and all("vs base Δ " in line for line in shown)
    # the same command again reads the finished rows back: nothing trained again, the same table
    weights = sorted((tmp_path / "runs").rglob("model.safetensors"))
    stamps = [w.stat().st_mtime_ns for w in weights]
    run(bench, capsys, command)
    assert [w.stat().st_mtime_ns for w in weights] == stamps and weights
    assert json.loads(out.read_text())["intervals"] == saved["intervals"]
