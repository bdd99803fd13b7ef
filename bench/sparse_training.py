#!/usr/bin/env python
"""The learned sparse model fine-tuned as the Train tab does it, against its base, on a labelled data set.

    python bench/sparse_training.py ../shared/datasets/scifact [--epochs 3] [--max-steps-per-epoch N]
        [--model DENSE_ENCODER] [--out-dir DIR] [--store PATH] [--json FILE]

The app's recipe for ``family="sparse"`` (``training.sparse``: in-batch softmax with one BM25
negative per query and FLOPS regularization, the held-out guard keeping the best epoch or the base)
with ``--epochs``; the train split trains and the test split evaluates (nothing is chosen on test).
Printed, each with its 95% interval: SPLADE and the three-way fusion (BM25 + dense + SPLADE) under
the base and the fine-tuned sparse model; the fine-tuned − base difference with its paired interval
and permutation p; and the three-way fusion with the fine-tuned model against the two-way CLEAR
hybrid (the fusion's μ is tuned on the held-out train queries the model was not trained on, by the
rule that keeps the μ its base was given on the whole train split unless another beats it
significantly; ``systems.hybrid3``), each fusion row with its μ.

A run is kept in ``--out-dir`` (default: under the store's folder): the same command run again reads
the finished model and its evaluation back, and a run killed half way resumes from its last
finished epoch. The last line: ``splade_delta=<Δ nDCG@10> splade_low=<> splade_high=<> splade_p=<>
hybrid3_minus_hybrid=<Δ> hybrid3_low=<> hybrid3_high=<>``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _common import dataset_arg, json_arg, recorded, store_arg, write_json  # first: it puts the checkout on sys.path
from retrieval.data.readers import load_dataset
from retrieval.evaluation.measures import compare
from retrieval.evaluation.metrics import interval_text
from retrieval.store import Store, default_store_path
from retrieval.systems import HYBRID, SPARSE_SYSTEMS, SPLADE
from retrieval.systems.hybrid3 import KEY as HYBRID3
from retrieval.workspace import Workspace
from training.finetune import finished_run, run_training
from training.trainer import TrainConfig

METRIC = "ndcg@10"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    dataset_arg(p)
    p.add_argument("--epochs", type=int, default=TrainConfig().epochs)
    p.add_argument("--max-steps-per-epoch", type=int, default=None, help="shorter runs (default: every triple)")
    p.add_argument("--model", default=None, help="the dense encoder of the fusions (default: all-MiniLM-L6-v2)")
    p.add_argument("--out-dir", default=None, help="where the fine-tuned model is kept (default: beside the store)")
    store_arg(p)
    json_arg(p)
    args = p.parse_args()
    ds = load_dataset(args.dataset)
    store = Store(args.store or default_store_path())
    cfg = TrainConfig(family="sparse", epochs=args.epochs, max_steps_per_epoch=args.max_steps_per_epoch)
    out = Path(args.out_dir or store.path.parent / "bench-sparse" / f"{ds.name}-{ds.content_hash[:8]}")
    result = finished_run(out, cfg) or run_training(ds, cfg, out, store=store, encoder=args.model)
    split = result.eval_split
    print(f"{ds.name}: {result.plan_note}; {result.seconds:.0f} s of training on {result.device}")
    if result.verdict:
        print(result.verdict)
    for system in SPARSE_SYSTEMS:
        for side in ("base", "fine-tuned"):
            m = result.metrics[side][system]
            chose = "".join(f" ({name} {value:g})" for name, value in m.get("weights", {}).items())
            print(f"{side:<11} {system:<8} {METRIC} {m[METRIC]:.4f} {interval_text(m['intervals'][METRIC])}{chose}")
        d = result.differences[system][METRIC]
        print(f"fine-tuned − base {system}: Δ {d['delta']:+.4f} {interval_text(d['interval'])} "
              f"(p {result.significance[system][METRIC]:.4f})")
    base = Workspace(ds, store, model=args.model)
    tuned = base.with_sparse_model(str(out))
    two, three = base.evaluate(HYBRID, split), tuned.evaluate(HYBRID3, split)
    vs = compare(two, three, METRIC)
    print(f"three-way fusion with the fine-tuned model {three.mean[METRIC]:.4f} {interval_text(three.interval(METRIC))}"
          f" against the CLEAR hybrid {two.mean[METRIC]:.4f} {interval_text(two.interval(METRIC))}: "
          f"Δ {vs.delta:+.4f} {interval_text(vs.interval)} (p {vs.p_value:.4f})")
    d = result.differences[SPLADE][METRIC]
    figures = {"splade_delta": d["delta"], "splade_low": d["interval"][0], "splade_high": d["interval"][1],
               "splade_p": result.significance[SPLADE][METRIC], "hybrid3_minus_hybrid": vs.delta,
               "hybrid3_low": vs.interval.low, "hybrid3_high": vs.interval.high}
    write_json(args.json, {"dataset": ds.name, "split": split, "epochs": args.epochs, "result": result.to_json(),
                           "hybrid": two.mean[METRIC], "hybrid3_tuned": three.mean[METRIC], **figures})
    print(" ".join(f"{k}={v:.4f}" for k, v in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
