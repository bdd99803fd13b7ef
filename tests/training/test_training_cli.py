"""``python -m training train`` as a user runs it, then the exported folder in ``python -m retrieval``: each
command's ``main(argv)`` in this process (``run``), but for the run killed with SIGKILL, a process of its own."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import asdict

import pytest

from tests.conftest import DEMO, ROOT
from tests.helpers import patience
from training.cli import NOT_CONFIG, build_parser, main
from training.trainer import TrainConfig


def run(module: str, *args, capsys, monkeypatch) -> subprocess.CompletedProcess:
    """``python -m module args`` run in this process: the module's ``main(argv)``, its exit code and what it
    printed (a ``CompletedProcess``, as ``subprocess.run`` returns it). A Python process that imports torch
    and sentence-transformers spends seconds before it does anything, and the process itself (its exit, a
    kill) is not what these tests test: the killed run's test starts one, as a user does. The run's own
    ``RANKSCOPE_HOME`` (``tests/conftest.py``) keeps what the command keeps there out of the user's."""
    from retrieval.cli import main as retrieval_main

    monkeypatch.delenv("RANKSCOPE_STORE", raising=False)
    argv = [str(a) for a in args]
    capsys.readouterr()  # what the test printed before: not the command's
    code = {"training": main, "retrieval": retrieval_main}[module](argv)
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess([sys.executable, "-m", module, *argv], code, out, err)


@pytest.mark.slow
def test_train_then_evaluate_the_exported_model(tmp_path, tiny_model_dir, capsys, monkeypatch):
    store, out = tmp_path / "s.sqlite3", tmp_path / "ft"
    res = run("training", "train", DEMO, "--loss", "triplet", "--negatives", "random", "--model", tiny_model_dir,
              "--epochs", "1", "--max-steps-per-epoch", "3", "--batch-size", "4", "--lr", "1e-3", "--device", "cpu",
              "--store", store, "--out", out, capsys=capsys, monkeypatch=monkeypatch)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("trained on the 'demo' train split, evaluated on its 'test' split; device cpu; ")
    assert lines[0].endswith(f"model saved to {out}")
    # the default held-out check: a fifth of the demo's 39 train queries, then the verdict
    assert lines[1].startswith("held-out selection on 8 queries: "), lines[1]
    lines = lines[:1] + lines[2:]
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in lines[1:5]}
    assert set(rows) == {("base", "dense"), ("base", "hybrid"), ("fine-tuned", "dense"), ("fine-tuned", "hybrid")}
    for (_, system), cells in rows.items():  # "ndcg@10 0.1234 [0.080, 0.170]  recall@100 0.5678 [...]  ..."
        if system == "hybrid":  # and the λ it ran at: "(λ 0.5)"
            assert cells[-2] == "(λ" and cells[-1].endswith(")") and float(cells[-1][:-1]) >= 0, cells
            cells = cells[:-2]
        found = re.findall(r"(\S+) (\d\.\d{4}) \[(\d\.\d{3}), (\d\.\d{3})\]", " ".join(cells))
        assert [m for m, *_ in found] == ["ndcg@10", "recall@100", "mrr@10"], cells
        assert all(0.0 <= float(low) <= float(v) + 5e-4 and float(v) <= float(high) + 5e-4 <= 1.0005
                   for _, v, low, high in found)
    assert lines[5].startswith("p (fine-tuned vs base, dense): ndcg@10 ") and " (Δ " in lines[5]
    assert lines[6].startswith("p (fine-tuned vs base, hybrid): ndcg@10 ")
    assert "3/3" in res.stderr  # the progress bar reached the last of the 3 steps
    assert (out / "modules.json").exists() and "Loss: **triplet**" in (out / "README.md").read_text()

    # the fine-tuned folder is an ordinary encoder for the evaluation CLI; its dense nDCG@10 is the one reported
    ev = run("retrieval", "evaluate", DEMO, "--model", out, "--systems", "dense", "--store", store,
             "--device", "cpu", capsys=capsys, monkeypatch=monkeypatch)
    assert ev.returncode == 0, ev.stderr
    table = ev.stdout.splitlines()
    header = next(i for i, line in enumerate(table) if line.startswith("system"))
    dense = table[header + 2]
    assert dense.startswith("Dense")
    ndcg = float(dense[24:].split()[0].rstrip("†"))
    assert ndcg == pytest.approx(float(rows[("fine-tuned", "dense")][1]), abs=1e-4)


@pytest.mark.slow
def test_holdout_verdict_is_printed(tmp_path, tiny_model_dir, capsys, monkeypatch):
    res = run("training", "train", DEMO, "--loss", "triplet", "--negatives", "random", "--model", tiny_model_dir,
              "--epochs", "2", "--max-steps-per-epoch", "2", "--batch-size", "4", "--device", "cpu", "--holdout",
              "0.3", "--refit", "--store", tmp_path / "s.sqlite3", "--out", tmp_path / "ft", capsys=capsys,
              monkeypatch=monkeypatch)
    assert res.returncode == 0, res.stderr
    verdict = res.stdout.splitlines()[1]
    assert verdict.startswith("held-out selection on 12 queries: ")  # 30% of 39 train queries
    # the base kept: nothing to refit; an epoch kept: trained again on all 39 train queries
    assert ("refit on all 39 train queries" in verdict) == ("the base is kept" not in verdict)
    # the training bar goes on after the check between the epochs: it reaches the last of 2 × 2 steps
    last_bar = res.stderr.rsplit("triplet:", 1)[1]
    assert "4/4" in last_bar and "held-out check — triplet epoch 2" in res.stderr


@pytest.mark.slow
def test_a_killed_run_goes_on_when_the_command_is_run_again(tmp_path, tiny_model_dir, capsys, monkeypatch):
    """SIGKILL once the first epoch's checkpoint is on disk; the same command then resumes from it and
    exports the weights a run never stopped exports. The killed run is a process of its own (the kill is
    what is tested); the two that follow run the same command in this process (``run``), under the same
    CPU precision choices as it (the run's ``RANKSCOPE_HOME``, which it inherits)."""
    import signal
    import time

    from safetensors.torch import load_file

    def command(out):
        return ["train", str(DEMO), "--loss", "triplet", "--negatives", "random", "--model", str(tiny_model_dir),
                "--epochs", "4", "--batch-size", "2", "--device", "cpu", "--no-eval", "--store",
                str(tmp_path / "s.sqlite3"), "--out", str(out)]

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    out, state = tmp_path / "ft", tmp_path / "ft" / "checkpoints" / "train" / "state.pt"
    proc = subprocess.Popen([sys.executable, "-m", "training", *command(out)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + patience(240)
    while not state.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL  # killed in the second epoch, not finished
    assert not (out / "model.safetensors").exists()

    again = run("training", *command(out), capsys=capsys, monkeypatch=monkeypatch)
    assert again.returncode == 0, again.stderr
    assert f"resumed after triplet epoch 1 from {out / 'checkpoints' / 'train'}" in again.stdout.splitlines()
    whole = run("training", *command(tmp_path / "whole"), capsys=capsys, monkeypatch=monkeypatch)
    assert whole.returncode == 0, whole.stderr
    mine, theirs = load_file(str(out / "model.safetensors")), load_file(str(tmp_path / "whole" / "model.safetensors"))
    assert mine.keys() == theirs.keys() and all((mine[k] == theirs[k]).all() for k in mine)
    assert not (out / "checkpoints").exists()


def test_unknown_loss_is_a_usage_error(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        main(["train", str(DEMO), "--loss", "hinge", "--out", str(tmp_path / "x")])
    assert exit_.value.code == 2
    assert "argument --loss: invalid choice: 'hinge'" in capsys.readouterr().err


def test_bad_values_are_reported_without_a_traceback(capsys, tmp_path):
    assert main(["train", str(DEMO), "--family", "sparse", "--loss", "triplet", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the learned sparse model trains with") and "Traceback" not in err
    assert main(["train", str(tmp_path / "missing"), "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.startswith("error: ")
    assert not (tmp_path / "x").exists()


def test_parser_defaults_are_train_configs():
    args = vars(build_parser().parse_args(["train", str(DEMO), "--out", "x"]))
    # every TrainConfig field is an option, and an untouched option is TrainConfig()'s default
    assert {k: v for k, v in args.items() if k not in NOT_CONFIG} == asdict(TrainConfig())
    assert set(NOT_CONFIG) <= set(args)
    assert TrainConfig.from_mapping({k: v for k, v in args.items() if k not in NOT_CONFIG}) == TrainConfig()
    # options map onto fields by name; 0 steps is no limit
    args = vars(build_parser().parse_args(["train", str(DEMO), "--out", "x", "--lambda-train", "0",
                                           "--max-steps-per-epoch", "0", "--pretrain", "ict"]))
    cfg = TrainConfig.from_mapping({k: v for k, v in args.items() if k not in NOT_CONFIG})
    assert (cfg.lambda_train, cfg.max_steps_per_epoch, cfg.pretrain) == (0.0, None, "ict")
    # the held-out check is on by default; --holdout 0 turns it off, --no-refit keeps the held-out run's weights
    args = vars(build_parser().parse_args(["train", str(DEMO), "--out", "x", "--holdout", "0", "--no-refit"]))
    cfg = TrainConfig.from_mapping({k: v for k, v in args.items() if k not in NOT_CONFIG})
    assert (TrainConfig().holdout, TrainConfig().refit, cfg.holdout, cfg.refit) == (0.2, True, 0.0, False)


def write_linked_pages(folder) -> None:
    """Twelve Markdown pages of four topics, each linking to the next page of its topic and to the
    first page of the next topic; a page's lead, then a section."""
    topics = ("river", "mountain", "forest", "desert")
    for t, topic in enumerate(topics):
        for i in range(3):
            nxt, other = f"{topic}-{(i + 1) % 3}.md", f"../{topics[(t + 1) % 4]}/{topics[(t + 1) % 4]}-0.md"
            (folder / topic).mkdir(parents=True, exist_ok=True)
            (folder / topic / f"{topic}-{i}.md").write_text(
                f"# The {topic} page {i}\n\nThe {topic} number {i} is described in this lead sentence. "
                f"It is also linked to [the next {topic}]({nxt}) and to [another place]({other}).\n\n"
                f"## Details\n\nMore about the {topic} number {i} follows here. Visitors of the {topic} "
                f"come back often.\n")


def test_train_on_a_linked_folder_with_ict_bfs_and_wlp(tmp_path, tiny_model_dir, capsys, monkeypatch):
    """A folder of linked Markdown pages loads with its links counted, and ``--pretrain ict+bfs+wlp`` trains
    on a third of the pairs from each task; on the demo (no links) WLP is refused in one line."""
    pages = tmp_path / "pages"
    write_linked_pages(pages)
    info = run("retrieval", "info", pages, capsys=capsys, monkeypatch=monkeypatch)
    assert info.returncode == 0 and '"links": 24' in info.stdout and "warning:" not in info.stdout
    out = tmp_path / "ft"
    res = run("training", "train", pages, "--pretrain", "ict+bfs+wlp", "--pretrain-pairs", "24", "--model",
              tiny_model_dir, "--batch-size", "4", "--lr", "1e-3", "--device", "cpu", "--store", tmp_path / "s.sqlite3",
              "--out", out, capsys=capsys, monkeypatch=monkeypatch)
    assert res.returncode == 0, res.stderr
    assert "pretrain ict+bfs+wlp: 24 pseudo pairs (ict 8, bfs 8, wlp 8)" in res.stdout.splitlines()
    assert (out / "model.safetensors").exists()
    refused = run("training", "train", DEMO, "--pretrain", "wlp", "--out", tmp_path / "x", capsys=capsys,
                  monkeypatch=monkeypatch)
    assert refused.returncode == 2 and refused.stderr.startswith("error: demo has no links between its documents")
    assert not (tmp_path / "x").exists()
