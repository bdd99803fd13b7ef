#!/usr/bin/env python
"""Training throughput against sentence-transformers' own trainer, same loss and same examples.

    python bench/train_speed.py DATASET [--loss residual] [--steps 40] [--skip 5] [--batch-size 16]
        [--max-seq-length 128] [--repeats 2] [--model PATH_OR_ID] [--device auto]

Both train a fresh copy of the base encoder (``training.trainer.load_trainable``) on the same
examples: the (query, positive, negative, BM25 gap) rows that RankScope's ``Trainer`` draws for its
first epoch of the data set's train split (the loss's negatives, the default recipe's one positive
per query), recorded as it draws them and handed to ``SentenceTransformerTrainer`` as a
``datasets.Dataset`` (which it shuffles with its own sampler). The same loss object class (``training.losses``), batch
size, learning rate, linear warm-up and decay, gradient clipping at 1.0, and precision (bf16
autocast on a CUDA device that has it, fp16 on other CUDA devices, fp32 on the CPU, as the Trainer
does); everything else is each trainer's own default (sentence-transformers: fused AdamW, its
data collator).

Throughput is examples per second over steps ``--skip`` + 1 … ``--steps``, timed at the end of each
optimizer step (the first steps pay for lazy initialisation). With ``--repeats`` > 1 the two run in
alternating order and each keeps its best repeat.

Last line: ``train_throughput_ratio=<RankScope ÷ sentence-transformers> device=<device>``.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch

from _common import json_arg, recorded  # first: it puts the checkout on sys.path
from retrieval.data.readers import load_dataset
from retrieval.index.encoder import pick_device
from training.losses import LOSSES, QuadrupletLoss, ResidualMarginLoss, inbatch_loss, triplet_loss
from training.pairs import labelled_pairs
from training.trainer import TrainConfig, Trainer, load_trainable

COLUMNS = ("anchor", "positive", "negative")


def config(args) -> TrainConfig:
    return TrainConfig(loss=args.loss, batch_size=args.batch_size, max_seq_length=args.max_seq_length, epochs=1,
                       max_steps_per_epoch=args.steps, device=args.device, seed=args.seed)


def throughput(stamps: list[float], skip: int, batch_size: int) -> float:
    """Examples per second between the end of step ``skip`` and the end of the last step;
    ``stamps[i]`` is when step i + 1 ended."""
    if len(stamps) <= skip + 1:
        raise ValueError(f"{len(stamps)} steps ran: too few to skip {skip} and time the rest")
    first = stamps[skip - 1] if skip else stamps[0]
    steps = len(stamps) - skip if skip else len(stamps) - 1
    return steps * batch_size / (stamps[-1] - first)


def run_ours(cfg: TrainConfig, dataset, pairs, model: str | None) -> tuple[list[float], list]:
    """RankScope's ``Trainer`` as the CLI and the app run it; returns (the step end times, the
    examples it drew for its epoch, as many as it trained on)."""
    trainer = Trainer(cfg, dataset, pairs, base_model=model)
    drawn: list = []
    draw = trainer.examples

    def recording(pools):  # the epoch's examples, kept as drawn so the other trainer gets the same
        rows = draw(pools)
        drawn.extend(rows[:cfg.max_steps_per_epoch * cfg.batch_size])
        return rows

    trainer.examples = recording
    stamps: list[float] = []
    stage = trainer.stage_prefix + cfg.loss

    def progress(p) -> None:
        if p.stage == stage and p.step >= 1:
            stamps.append(time.perf_counter())

    trainer.on_progress = progress
    trainer.train()
    return stamps, drawn


def st_loss(cfg: TrainConfig, model):
    return {"residual": lambda: ResidualMarginLoss(model, cfg.xi, cfg.lambda_train),
            "triplet": lambda: triplet_loss(model, cfg.margin),
            "inbatch": lambda: inbatch_loss(model),
            "quadruplet": lambda: QuadrupletLoss(model, cfg.margin, stage=1)}[cfg.loss]()


def run_st(cfg: TrainConfig, examples: list, model: str | None, device: str) -> list[float]:
    """``SentenceTransformerTrainer`` on ``examples`` (shuffled by its own sampler), same loss and schedule;
    returns the step end times."""
    from datasets import Dataset as HFDataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from transformers import TrainerCallback

    st_model = load_trainable(model, device, cfg.max_seq_length)
    data = HFDataset.from_dict({**{name: [texts[i] for texts, _ in examples] for i, name in enumerate(COLUMNS)},
                                "label": [float(label) for _, label in examples]})
    stamps: list[float] = []

    class Stamp(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if device == "cuda":
                torch.cuda.synchronize()
            stamps.append(time.perf_counter())

    cuda = device == "cuda"
    bf16 = cuda and torch.cuda.is_bf16_supported()
    steps = len(examples) // cfg.batch_size
    with tempfile.TemporaryDirectory() as out:
        args = SentenceTransformerTrainingArguments(
            output_dir=out, per_device_train_batch_size=cfg.batch_size, max_steps=steps, learning_rate=cfg.lr,
            warmup_steps=int(steps * cfg.warmup_ratio), lr_scheduler_type="linear", max_grad_norm=1.0,
            bf16=bf16, fp16=cuda and not bf16, use_cpu=not cuda, seed=cfg.seed, save_strategy="no",
            logging_strategy="no", report_to="none", disable_tqdm=True, dataloader_drop_last=True)
        trainer = SentenceTransformerTrainer(model=st_model, args=args, train_dataset=data,
                                             loss=st_loss(cfg, st_model), callbacks=[Stamp()])
        trainer.train()
    return stamps


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset")
    p.add_argument("--loss", default="residual", choices=[name for name in LOSSES if name != "quadruplet"])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--skip", type=int, default=5, help="steps left out of the timing (warm-up)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--model", default=None)
    p.add_argument("--device", default="auto")
    p.add_argument("--seed", type=int, default=42)
    json_arg(p)
    args = p.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    dataset = load_dataset(args.dataset)
    split = "train" if "train" in dataset.qrels else dataset.default_split()
    pairs = labelled_pairs(dataset, split)
    cfg = config(args)
    best = {"RankScope Trainer": 0.0, "SentenceTransformerTrainer": 0.0}
    device = pick_device(cfg.device)
    examples: list | None = None
    print(f"{dataset.name}, {split} split: loss {cfg.loss}, {cfg.negatives} negatives, batch {cfg.batch_size}, "
          f"{cfg.max_seq_length} word pieces, {args.steps} steps timed after the first {args.skip}")
    for repeat in range(args.repeats):
        for which in ("ours", "st") if repeat % 2 == 0 else ("st", "ours"):  # the first records the examples
            if which == "ours":
                stamps, drawn = run_ours(cfg, dataset, pairs, args.model)
                examples = examples or drawn
                name = "RankScope Trainer"
            else:
                stamps = run_st(cfg, examples, args.model, device)
                name = "SentenceTransformerTrainer"
            rate = throughput(stamps, args.skip, cfg.batch_size)
            best[name] = max(best[name], rate)
            print(f"  repeat {repeat + 1}  {name:<28}{rate:>9.2f} examples/s ({len(stamps)} steps)")
    ratio = best["RankScope Trainer"] / best["SentenceTransformerTrainer"]
    print(f"best: RankScope {best['RankScope Trainer']:.2f}, sentence-transformers "
          f"{best['SentenceTransformerTrainer']:.2f} examples/s on {device}: ×{ratio:.2f}")
    print(f"train_throughput_ratio={ratio:.3f} device={device}")


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
