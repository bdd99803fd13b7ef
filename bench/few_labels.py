#!/usr/bin/env python
"""Fine-tuning with few labels, with and without a first stage on pseudo pairs (ICT / BFS / WLP).

    python bench/few_labels.py ../shared/datasets/scifact [--fractions 0,0.01,0.05,1]
        [--pretrain ict+bfs|none|KIND,KIND...] [--check] [--store FILE] [--out-dir DIR] [--json FILE]

The label regimes of Wei-Cheng Chang, Felix X. Yu, Yin-Wen Chang, Yiming Yang, Sanjiv Kumar,
"Pre-training Tasks for Embedding-based Large-scale Retrieval", ICLR 2020 (arXiv:2002.03932),
Tables 3–5 (1% / 5% of the labelled pairs), on a BEIR data set: a seeded share of the train
split's queries keeps its labels (at least one query once the share is above 0), the rest of
train is dropped, and test is only ever evaluated. Each share is trained with the app's default
recipe (``TrainConfig()`` without its held-out check, so every kept label trains), once from the
base encoder and once from the encoder after a first stage on pseudo pairs from the corpus
(``--pretrain``, trained once and shared by every share; the multi-stage paradigm of Yiding Liu
et al., "Pre-trained Language Model for Web-scale Retrieval in Baidu Search", KDD 2021,
arXiv:2106.03373, §4; ``none`` leaves it out). Share 0 is the base encoder, and the pseudo-pair
stage alone. ``--check`` trains with the held-out check and refit as well, exactly what the Train
tab runs by default, and each row then says what the check kept and its p against the base.

The hybrid is what the app gives with those labels: λ tuned on the kept train queries (kept
only where it beats the label-free λ there significantly), or with none the label-free default
(BM25 over its per-query maximum plus the cosine).

A model already finished in ``--out-dir`` (its ``rankscope_training.json`` written) is read back,
not trained again, so a run that stopped goes on where it stopped and a changed evaluation
re-scores the same models; its training seconds are the recorded ones.

Prints one row per (share, first stage): dense and hybrid nDCG@10 (with its 95% interval over the
test queries) and Recall@100 on test, the training time; last line ``best_few_label_recipe=<none|pretrain>
gain_at_1pct=<x> gain_at_5pct=<y>``: the hybrid nDCG@10 the first stage adds at 1% and 5% of the labels
(positive: it helps). With several first stages, the recipe is the one whose gains add up highest
(named by its kind; none where no gain is positive), and the gains are its.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

from _common import dataset_arg, recorded, store_arg, write_json  # first: it puts the checkout on sys.path
from retrieval import Store, Workspace, load_dataset
from retrieval.data.dataset import Dataset
from retrieval.index.encoder import load_encoder
from retrieval.store import default_store_path
from retrieval.systems.hybrid import CLEAR
from training.finetune import finished_run, run_training
from training.pairs import PRETRAIN_TASKS
from training.trainer import TrainConfig


def keep_share(ds: Dataset, fraction: float, seed: int = 42) -> Dataset:
    """``ds`` with a seeded ``fraction`` of its train queries (≥ 1 when > 0) and its test split."""
    qids = sorted(ds.qrels["train"])
    random.Random(seed).shuffle(qids)
    n = 0 if fraction <= 0 else max(1, round(len(qids) * fraction))
    qrels = {"test": ds.qrels["test"]}
    if n:
        qrels["train"] = {q: ds.qrels["train"][q] for q in qids[:n]}
    return Dataset(ds.name, ds.docs, ds.queries, qrels, ds.report)


def scores(ws: Workspace) -> dict:
    """Dense and hybrid nDCG@10 and Recall@100 on test, each mean with its 95% interval (``_ci``), and λ."""
    out = {}
    for system in ("dense", "hybrid"):
        ev = ws.evaluate(system, "test")
        out[system] = {m: ev.mean[m] for m in ("ndcg@10", "recall@100")}
        out[system].update({f"{m}_ci": [ev.interval(m).low, ev.interval(m).high] for m in ("ndcg@10", "recall@100")})
    out["lambda"] = CLEAR.lambda_for(ws, "test").value
    return out


def first_stages(value: str) -> list[str]:
    """``--pretrain``: ``none``, or one or more kinds of ``PRETRAIN_TASKS``, comma-separated."""
    kinds = [k.strip() for k in value.split(",") if k.strip()]
    if kinds == ["none"]:
        return []
    bad = [k for k in kinds if k not in PRETRAIN_TASKS]
    if bad or not kinds:
        raise argparse.ArgumentTypeError(f"{', '.join(bad) or 'nothing'}: choose none or kinds of "
                                         f"{', '.join(PRETRAIN_TASKS)}, comma-separated")
    return list(dict.fromkeys(kinds))


def shown(row: dict, system: str) -> str:
    low, high = row[system]["ndcg@10_ci"]
    return f"{row[system]['ndcg@10']:.4f} [{low:.3f}, {high:.3f}]"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    dataset_arg(ap)
    ap.add_argument("--fractions", default="0,0.01,0.05,1")
    ap.add_argument("--pretrain", default=["ict+bfs"], type=first_stages,
                    help="none, or first stages (kinds of training.pairs.PRETRAIN_TASKS), comma-separated")
    ap.add_argument("--check", action="store_true",
                    help="train with the defaults' held-out check and refit (what the Train tab runs)")
    ap.add_argument("--pretrain-pairs", type=int, default=TrainConfig().pretrain_pairs)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--model", default=None)
    store_arg(ap)
    ap.add_argument("--out-dir", default="/tmp/rankscope-few-labels")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    full = load_dataset(args.dataset)
    if "train" not in full.qrels or "test" not in full.qrels:
        print(f"error: {args.dataset} needs a train and a test split", file=sys.stderr)
        return 2
    store = Store(args.store or default_store_path())
    out_dir = Path(args.out_dir)
    base = load_encoder(args.model)
    no_check = replace(TrainConfig(), seed=args.seed, holdout=0.0, refit=False)  # every kept label trains
    recipe = replace(TrainConfig(), seed=args.seed) if args.check else no_check
    fractions = [float(x) for x in args.fractions.split(",")]
    links = f", {full.link_count:,} links between its documents" if full.link_count else ""
    print(f"{full.name}: {len(full.qrels['train'])} train queries, {len(full.qrels['test'])} test{links}; "
          f"recipe {recipe.loss}/{recipe.negatives}, lr {recipe.lr:g}, {recipe.epochs} epochs"
          f"{f', held-out share {recipe.holdout:g}, refit' if args.check else ''}; "
          f"first stage {', '.join(args.pretrain) or 'none'} on {args.pretrain_pairs} pseudo pairs", flush=True)

    starts = {"none": (args.model, 0.0)}
    for kind in args.pretrain:  # the first stage's config has no check: it is shared by both kinds of run
        unlabelled = Dataset(full.name, full.docs, full.queries, {})
        pre_cfg = replace(no_check, pretrain=kind, pretrain_pairs=args.pretrain_pairs)
        pre_dir = out_dir / f"pretrain-{kind}"
        pre = finished_run(pre_dir, pre_cfg) or run_training(unlabelled, pre_cfg, pre_dir, args.model, store,
                                                             evaluate=False)
        starts[kind] = (str(pre_dir), pre.seconds)

    rows = []
    for fraction in fractions:
        ds = keep_share(full, fraction, args.seed)
        n = len(ds.qrels.get("train", {}))
        for first, (start, start_s) in starts.items():
            t = time.perf_counter()
            check = {}
            if n == 0:  # nothing to fine-tune on: the starting encoder itself
                enc = base if start is None else load_encoder(start)
                row_scores, train_s = scores(Workspace(ds, store, model=enc)), start_s
            else:
                folder = out_dir / f"{fraction:g}-{first}{'-check' if args.check else ''}"
                done = finished_run(folder, recipe) or run_training(ds, recipe, folder, start, store,
                                                                    eval_split="test", evaluate=False)
                enc = load_encoder(str(folder))
                row_scores, train_s = scores(Workspace(ds, store, model=enc)), done.seconds + start_s
                if args.check:
                    chosen = (done.selection or {}).get("chosen") or {}
                    check = {"kept": f"{chosen.get('stage', 'none')} {chosen.get('epoch', '')}".strip(),
                             "p": (done.selection or {}).get("p_value"), "verdict": done.verdict}
            row = {"fraction": fraction, "queries": n, "first_stage": first, **row_scores, **check,
                   "train_s": round(train_s, 1), "wall_s": round(time.perf_counter() - t, 1)}
            rows.append(row)
            print(f"{fraction:>6.0%} ({n:>3} queries)  first stage {first:<11} dense nDCG@10 "
                  f"{shown(row, 'dense')} R@100 {row['dense']['recall@100']:.4f} | hybrid nDCG@10 "
                  f"{shown(row, 'hybrid')} R@100 {row['hybrid']['recall@100']:.4f} (λ {row['lambda']:g}) | "
                  f"train {train_s:.0f} s", flush=True)
            if check:
                print(f"        {check['verdict']}", flush=True)
            write_json(args.json, {"dataset": full.name, "args": vars(args), "rows": rows})

    def hybrid(fraction: float, first: str) -> float | None:
        return next((r["hybrid"]["ndcg@10"] for r in rows if r["fraction"] == fraction and r["first_stage"] == first),
                    None)

    def gains_of(kind: str) -> dict[float, float | None]:
        out = {}
        for fraction in (0.01, 0.05):
            with_pre, without = hybrid(fraction, kind), hybrid(fraction, "none")
            out[fraction] = None if with_pre is None or without is None else with_pre - without
        return out

    def total(kind: str) -> float:
        return sum(g for g in gains_of(kind).values() if g is not None)

    kinds = args.pretrain or ["none"]
    top = max(kinds, key=total)
    gains = gains_of(top)
    known = [g for g in gains.values() if g is not None]
    best = "none" if not known or sum(known) <= 0 else "pretrain" if len(kinds) == 1 else top
    fmt = {f: ("nan" if g is None else f"{g:.4f}") for f, g in gains.items()}
    print(f"best_few_label_recipe={best} gain_at_1pct={fmt[0.01]} gain_at_5pct={fmt[0.05]}")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
