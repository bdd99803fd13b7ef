"""``python -m training train DATASET [--loss residual|quadruplet|triplet|inbatch ...] --out DIR``.

Trains with a progress bar, exports a sentence-transformers folder with a model card, and prints
dense and hybrid metrics of the base and the fine-tuned encoder on the evaluation split. The
folder then works with ``python -m retrieval evaluate DATASET --model DIR``.
"""
from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

from retrieval import numbers
from retrieval.data.readers import load_dataset
from retrieval.errors import DataError
from retrieval.evaluation.metrics import SUMMARY_METRICS, interval_text
from retrieval.files.terminal import safe_output
from retrieval.store import Store, default_store_path
from retrieval.systems.clear_lambda import shown
from training.finetune import noted_stages, run_training
from training.losses import FAMILIES, LOSSES, TEACHERS
from training.negatives import SOURCES
from training.pairs import PRETRAIN_TASKS, check_train_fraction
from training.trainer import QUERY_POOLINGS, Cancelled, TrainConfig, check_number

NOT_CONFIG = ("command", "dataset", "model", "split", "cold_start", "store", "no_eval", "out")  # the rest: TrainConfig


def build_parser() -> argparse.ArgumentParser:
    """``train``'s options: every ``TrainConfig`` field, its default from ``TrainConfig()``, plus ``NOT_CONFIG``."""
    p = argparse.ArgumentParser(prog="python -m training", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="fine-tune the dense encoder or the learned sparse model")
    defaults = TrainConfig()

    def config(flag: str, help: str = "", **kw) -> None:
        name = flag[2:].replace("-", "_")
        if kw.get("type") in (int, float):  # read by the one number grammar, held to the config's range
            kw["type"] = numbers.flag(functools.partial(check_number, name))
        t.add_argument(flag, default=getattr(defaults, name), help=f"{help} (default: %(default)s)".lstrip(), **kw)

    t.add_argument("dataset")
    config("--family", "what to fine-tune: the dense encoder, or the learned sparse model (SPLADE; in-batch loss "
                       "with FLOPS regularization)", choices=FAMILIES)
    config("--loss", choices=LOSSES)
    config("--teacher", "marginmse: the system whose score margins the encoder learns", choices=TEACHERS)
    config("--negatives", "bm25: BM25's top-N mistakes (CLEAR); model: the encoder's top-k; random", choices=SOURCES)
    config("--epochs", type=int)
    config("--batch-size", type=int)
    config("--lr", type=float)
    config("--warmup-ratio", "fraction of the steps warming up", type=float)
    config("--margin", "quadruplet / triplet margin m", type=float)
    config("--xi", "CLEAR ξ", type=float)
    config("--lambda-train", "CLEAR λ_train (0: constant margin)", type=float)
    config("--bm25-depth", "bm25 negatives: BM25's top N", type=int)
    config("--model-depth", "model negatives: the encoder's top k", type=int)
    config("--max-seq-length", "training inputs only; the exported model reads as far as the base", type=int)
    config("--max-steps-per-epoch", "0: no limit", type=int)
    config("--positives-per-query", "labelled positives drawn per query each epoch; 0: every pair", type=int)
    config("--holdout", "share of the training queries held out (at most 500) to keep the best epoch, or the "
                        "base encoder when no epoch beats it; 0: off", type=float)
    config("--refit", "with --holdout: once an epoch is kept, train again from the start on all of train for "
                      "that many epochs (the base stays when none was kept); --no-refit exports the kept epoch "
                      "as trained on the rest", action=argparse.BooleanOptionalAction)
    config("--stage1-max-epochs", "quadruplet stage one", type=int)
    config("--stage1-tol", "quadruplet stage one ends when the epoch loss falls by less than this fraction",
           type=float)
    config("--device", "auto, cpu, cuda or mps")
    config("--seed", type=int)
    config("--pretrain", "first stage on pseudo pairs from the corpus (ICT, BFS, WLP from the links between its "
                         "documents, or a combination: each pair drawn uniformly from the tasks), then the labelled "
                         "stage; the only stage for a corpus without labels", choices=PRETRAIN_TASKS)
    config("--pretrain-pairs", type=int)
    config("--query-pooling", "poly: poly-attention over the query's tokens (Baidu §3.2); documents keep mean "
                              "pooling", choices=QUERY_POOLINGS)
    config("--poly-codes", "poly-attention's number of context codes m", type=int)
    t.add_argument("--model", default=None, help="base model: the dense encoder (default: all-MiniLM-L6-v2), "
                   "with --family sparse the learned sparse model (default: the bundled SPLADE-tiny)")
    t.add_argument("--split", default=None, help="evaluation split (default: test)")
    t.add_argument("--cold-start", type=numbers.flag(check_train_fraction), default=None,
                   help="train on this fraction of the evaluation split's queries (seeded), evaluate on the rest")
    t.add_argument("--store", default=None)
    t.add_argument("--no-eval", action="store_true", help="train and export only")
    t.add_argument("--out", required=True, help="output folder for the fine-tuned model")
    return p


def main(argv=None) -> int:
    with safe_output():  # ids and names may hold terminal escapes: printed visibly, never obeyed
        return _main(argv)


def _progress_bar(bars: dict):
    """``run_training``'s progress callback: one tqdm bar on stderr per stage, the last one open in ``bars``
    (closed by the caller)."""
    from tqdm.auto import tqdm

    def progress(p) -> None:
        bar = bars.get(p.stage)
        if bar is None:  # a new stage, or one come back after another (training after a held-out check)
            for b in bars.values():
                b.close()
            bars.clear()
            bar = bars[p.stage] = tqdm(total=p.total, desc=p.stage, unit="step", file=sys.stderr)
        bar.set_postfix(loss=f"{p.loss:.4f}", ex_s=f"{p.examples_per_s:.1f}")
        bar.n = p.step
        bar.refresh()

    return progress


def _main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = TrainConfig.from_mapping({k: v for k, v in vars(args).items() if k not in NOT_CONFIG})
        dataset = load_dataset(args.dataset)
        store = Store(args.store or default_store_path())
    except (DataError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    bars: dict = {}  # the one open bar, under its stage's name
    try:
        result = run_training(dataset, cfg, args.out, args.model, store, args.split, args.cold_start,
                              on_progress=_progress_bar(bars), evaluate=not args.no_eval)
    except Cancelled as err:
        print(f"cancelled: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"interrupted: the same command goes on from the last finished epoch (checkpoints in "
              f"{Path(args.out) / 'checkpoints'})", file=sys.stderr)
        return 130
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        for b in bars.values():
            b.close()
        store.close()  # the store written and closed before the verdict is printed
    _print_result(result)
    return 0


def _print_result(result) -> None:
    """Where the model went, any resumption, the verdict, each system's metrics with their intervals and the
    paired tests of fine-tuned against base."""
    print(f"{result.plan_note}; device {result.device}; {result.seconds:.0f} s; model saved to {result.model_path}")
    for line in noted_stages(result.stages):
        print(line)
    if result.verdict:
        print(result.verdict)
    for label, systems in result.metrics.items():
        for system, m in systems.items():
            bounds = m.get("intervals", {})
            cells = "  ".join(f"{k} {m[k]:.4f} {interval_text(bounds.get(k))}".rstrip() for k in SUMMARY_METRICS
                              if isinstance(m.get(k), float))
            lam = f"  (λ {shown(m['lambda'])})" if "lambda" in m else ""
            print(f"{label:<11} {system:<7} {cells}{lam}")
    for system, ps in result.significance.items():
        diff = result.differences.get(system, {})
        print(f"p (fine-tuned vs base, {system}): " + ", ".join(
            f"{k} {v:.4f}" + (f" (Δ {diff[k]['delta']:+.4f} {interval_text(diff[k]['interval'])})" if k in diff else "")
            for k, v in ps.items()))
    if result.metrics:
        print("[low, high]: 95% intervals over the evaluated queries (percentile bootstrap; Δ paired)")
