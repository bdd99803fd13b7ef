"""``python -m training train DATASET --loss quadruplet|residual|triplet|inbatch ... --out DIR``.

Trains with a progress bar, exports a sentence-transformers folder with a model card, and prints
dense and hybrid metrics of the base and the fine-tuned encoder on the evaluation split. The
folder then works with ``python -m retrieval evaluate DATASET --model DIR``.
"""
from __future__ import annotations

import argparse
import sys

from retrieval.errors import DataError
from retrieval.readers import load_dataset
from retrieval.store import Store, default_store_path

from .losses import LOSSES
from .negatives import SOURCES
from .run import REPORT_METRICS, run_training
from .trainer import Cancelled, TrainConfig


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m training", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="fine-tune the dense encoder")
    d = TrainConfig()
    t.add_argument("dataset")
    t.add_argument("--loss", choices=LOSSES, default=d.loss)
    t.add_argument("--negatives", choices=SOURCES, default=d.negatives,
                   help="bm25: BM25's top-N mistakes (CLEAR); model: the encoder's top-k; random")
    t.add_argument("--epochs", type=int, default=d.epochs)
    t.add_argument("--batch-size", type=int, default=d.batch_size)
    t.add_argument("--lr", type=float, default=d.lr)
    t.add_argument("--margin", type=float, default=d.margin, help="quadruplet / triplet margin m")
    t.add_argument("--xi", type=float, default=d.xi, help="CLEAR ξ")
    t.add_argument("--lambda-train", type=float, default=d.lambda_train, help="CLEAR λ_train (0: constant margin)")
    t.add_argument("--bm25-depth", type=int, default=d.bm25_depth)
    t.add_argument("--model-depth", type=int, default=d.model_depth)
    t.add_argument("--max-seq-length", type=int, default=d.max_seq_length)
    t.add_argument("--max-steps-per-epoch", type=int, default=None)
    t.add_argument("--stage1-max-epochs", type=int, default=d.stage1_max_epochs)
    t.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
    t.add_argument("--seed", type=int, default=d.seed)
    t.add_argument("--model", default=None, help="base encoder (default: all-MiniLM-L6-v2)")
    t.add_argument("--split", default=None, help="evaluation split (default: test)")
    t.add_argument("--cold-start", type=float, default=None,
                   help="train on this fraction of the evaluation split's queries (seeded), evaluate on the rest")
    t.add_argument("--pretrain", choices=("ict", "bfs", "ict+bfs"), default=None,
                   help="first stage on pseudo pairs from the corpus (ICT/BFS), then the labelled stage; "
                        "the only stage for a corpus without labels")
    t.add_argument("--pretrain-pairs", type=int, default=d.pretrain_pairs)
    t.add_argument("--store", default=None)
    t.add_argument("--no-eval", action="store_true", help="train and export only")
    t.add_argument("--out", required=True, help="output folder for the fine-tuned model")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    cfg = TrainConfig(loss=args.loss, negatives=args.negatives, epochs=args.epochs, batch_size=args.batch_size,
                      lr=args.lr, margin=args.margin, xi=args.xi, lambda_train=args.lambda_train,
                      bm25_depth=args.bm25_depth, model_depth=args.model_depth,
                      max_seq_length=args.max_seq_length, device=args.device, seed=args.seed,
                      stage1_max_epochs=args.stage1_max_epochs, max_steps_per_epoch=args.max_steps_per_epoch,
                      pretrain=args.pretrain, pretrain_pairs=args.pretrain_pairs)
    try:
        cfg.validate()
        dataset = load_dataset(args.dataset)
    except (DataError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from tqdm.auto import tqdm

    bars: dict[str, tqdm] = {}

    def progress(p) -> None:
        bar = bars.get(p.stage)
        if bar is None:
            for b in bars.values():
                b.close()
            bar = bars[p.stage] = tqdm(total=p.total, desc=p.stage, unit="step", file=sys.stderr)
        bar.set_postfix(loss=f"{p.loss:.4f}", ex_s=f"{p.examples_per_s:.1f}")
        bar.n = p.step
        bar.refresh()

    store = Store(args.store or default_store_path())
    try:
        result = run_training(dataset, cfg, args.out, args.model, store, args.split, args.cold_start,
                              on_progress=progress, evaluate=not args.no_eval)
    except Cancelled as err:
        print(f"cancelled: {err}", file=sys.stderr)
        return 1
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        for b in bars.values():
            b.close()
    print(f"{result.plan_note}; device {result.device}; {result.seconds:.0f} s; model saved to {result.model_path}")
    for label, systems in result.metrics.items():
        for system, m in systems.items():
            cells = "  ".join(f"{k} {m[k]:.4f}" for k in REPORT_METRICS if isinstance(m.get(k), float))
            print(f"{label:<11} {system:<7} {cells}")
    for system, ps in result.significance.items():
        print(f"p (fine-tuned vs base, {system}): " + ", ".join(f"{k} {v:.4f}" for k, v in ps.items()))
    return 0
