"""Training killed half way goes on from its last finished epoch (``training.checkpoint``): with a
real tiny transformer, the weights after a resume are bit for bit those of a run never stopped, for
every schedule (one stage, the two quadruplet stages, negatives mined by the model), through the
held-out check and its refit, and a checkpoint of another run is never resumed."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

from retrieval.store import Store
from training.finetune import run_training
from training.pairs import labelled_pairs
from training.trainer import Cancelled, TrainConfig, Trainer


def fast(**kw) -> TrainConfig:
    return TrainConfig(**{"device": "cpu", "batch_size": 2, "lr": 1e-3, "seed": 0, "positives_per_query": 0, **kw})


def stop_at(stage_epoch):
    """An ``on_progress`` that asks to cancel at the first step of ``(stage, epoch)``, and its event."""
    cancel = threading.Event()

    def on_progress(p):
        if (p.stage, p.epoch) == stage_epoch:
            cancel.set()
    return on_progress, cancel


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


SCHEDULES = {
    # 4 pairs, batch 2: two steps an epoch; stopped at the first step of the epoch named
    "triplet, random negatives": (fast(loss="triplet", negatives="random", epochs=3), ("triplet", 2)),
    "residual, BM25 negatives": (fast(loss="residual", negatives="bm25", epochs=3, xi=1.0, lambda_train=0.1),
                                 ("residual", 2)),
    "in-batch, negatives mined by the model": (fast(loss="inbatch", negatives="model", epochs=3, model_depth=3),
                                               ("inbatch", 2)),
    "quadruplet, stopped in stage two": (fast(loss="quadruplet", epochs=3, stage1_max_epochs=2,
                                              stage1_tol=float("-inf"), model_depth=3), ("stage 2", 2)),
    "quadruplet, stopped in stage one": (fast(loss="quadruplet", epochs=1, stage1_max_epochs=3,
                                              stage1_tol=float("-inf"), model_depth=3), ("stage 1", 2)),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_a_resumed_run_ends_with_the_weights_of_one_never_stopped(toy_dataset, tiny_model_dir, tmp_path, name):
    cfg, where = SCHEDULES[name]
    pairs = labelled_pairs(toy_dataset, "train")
    whole = Trainer(cfg, toy_dataset, pairs, base_model=str(tiny_model_dir)).train()

    on_progress, cancel = stop_at(where)
    first = Trainer(cfg, toy_dataset, pairs, base_model=str(tiny_model_dir), checkpoint_dir=tmp_path / "ck",
                    on_progress=on_progress, cancel=cancel)
    with pytest.raises(Cancelled):
        first.train()
    steps = []
    again = Trainer(cfg, toy_dataset, pairs, base_model=str(tiny_model_dir), checkpoint_dir=tmp_path / "ck",
                    on_progress=lambda p: steps.append((p.stage, p.step)))
    resumed = again.train()

    saved = again.resumed
    assert saved is not None and where[0].endswith(saved.stage) and saved.epoch >= 1
    assert resumed.stages[0] == f"resumed after {saved.stage} epoch {saved.epoch} from {tmp_path / 'ck'}"
    assert resumed.stages[1:] == whole.stages
    assert same(resumed.model.state_dict(), whole.model.state_dict())
    assert resumed.losses == whole.losses and resumed.epoch_losses == whole.epoch_losses
    trained_again = [s for s in steps if s[0] in ("triplet", "residual", "inbatch", "stage 1", "stage 2")]
    assert trained_again and trained_again[0][1] > 1  # it went on from the checkpoint's step, not from 1
    assert len(trained_again) < len(whole.losses)


def test_a_checkpoint_of_another_run_is_not_resumed(toy_dataset, tiny_model_dir, tmp_path):
    pairs = labelled_pairs(toy_dataset, "train")
    ck = tmp_path / "ck"
    Trainer(fast(loss="triplet", negatives="random", epochs=2), toy_dataset, pairs, base_model=str(tiny_model_dir),
            checkpoint_dir=ck).train()
    other = fast(loss="triplet", negatives="random", epochs=2, lr=5e-4)  # another learning rate: another run
    trainer = Trainer(other, toy_dataset, pairs, base_model=str(tiny_model_dir), checkpoint_dir=ck)
    result = trainer.train()
    assert trainer.resumed is None and not result.stages[0].startswith("resumed")
    fresh = Trainer(other, toy_dataset, pairs, base_model=str(tiny_model_dir)).train()
    assert same(result.model.state_dict(), fresh.model.state_dict())
    # fewer pairs are another run too
    assert Trainer(fast(loss="triplet", negatives="random", epochs=2), toy_dataset, pairs[:3],
                   base_model=str(tiny_model_dir), checkpoint_dir=ck).resume() is None


def test_a_damaged_checkpoint_starts_the_run_again(toy_dataset, tiny_model_dir, tmp_path):
    pairs = labelled_pairs(toy_dataset, "train")
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "state.pt").write_bytes(b"not a checkpoint")
    cfg = fast(loss="triplet", negatives="random", epochs=1)
    result = Trainer(cfg, toy_dataset, pairs, base_model=str(tiny_model_dir), checkpoint_dir=ck).train()
    fresh = Trainer(cfg, toy_dataset, pairs, base_model=str(tiny_model_dir)).train()
    assert same(result.model.state_dict(), fresh.model.state_dict())
    probe = Trainer(cfg, toy_dataset, pairs, base_model=str(tiny_model_dir), checkpoint_dir=ck)
    probe.resume()
    for partial in ({"key": probe.key}, {"key": probe.key, "stage": "triplet", "epoch": 1, "unknown": 1}):
        torch.save(partial, ck / "state.pt")  # this run's key, not a checkpoint's fields: not resumed
        assert Trainer(cfg, toy_dataset, pairs, base_model=str(tiny_model_dir), checkpoint_dir=ck).resume() is None


def weights(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
@pytest.mark.parametrize("stop", [("residual", 2), ("refit: residual", 1)])
def test_held_out_check_and_refit_resume_with_their_scores(demo, tiny_model_dir, tmp_path, stop):
    """Stopped in the held-out run's second epoch, or in the refit: the run started again keeps the
    held-out scores it had (the base is not scored again), and exports what an unstopped run does."""
    cfg = TrainConfig(loss="residual", negatives="bm25", epochs=2, batch_size=8, device="cpu", max_steps_per_epoch=2,
                      xi=0.3, lambda_train=0.02, holdout=0.3, refit=True, lr=1e-3)

    def train(folder, on_progress=None, cancel=None):
        store = Store(tmp_path / "s.sqlite3")
        try:
            return run_training(demo, cfg, folder, base_model=str(tiny_model_dir), store=store,
                                on_progress=on_progress, cancel=cancel)
        finally:
            store.close()

    whole = train(tmp_path / "whole")
    assert whole.selection["chosen"]["stage"] == "residual"  # an epoch was kept, so the refit ran
    assert whole.selection["lambda_fit"]["queries"] == whole.selection["queries"]  # its λ, chosen held out
    on_progress, cancel = stop_at(stop)
    with pytest.raises(Cancelled):
        train(tmp_path / "ft", on_progress, cancel)
    assert (tmp_path / "ft" / "checkpoints").is_dir()
    stages = []
    resumed = train(tmp_path / "ft", lambda p: stages.append(p.stage))
    assert "held-out check — base encoder" not in stages  # its score came back from the checkpoint
    assert resumed.selection == whole.selection and resumed.stages[-1] == whole.stages[-1]
    assert any(s.startswith("resumed after") for s in resumed.stages)
    assert same(weights(Path(resumed.model_path)), weights(Path(whole.model_path)))
    assert resumed.metrics == whole.metrics
    assert not (tmp_path / "ft" / "checkpoints").exists()  # gone once the run has finished
