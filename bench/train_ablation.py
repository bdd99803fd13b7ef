"""The fine-tuning comparison: every loss and negative source, trained on the same data, one table.

    python bench/train_ablation.py ../shared/datasets/scifact [--epochs 1] [--max-steps-per-epoch N]
        [--train-max-seq-length 128] [--rows base,triplet-random,...] [--refit] [--store PATH] [--json FILE]

The train split is cut (seeded, by query) into a fit part (80%) that trains and a held-out part
(20%, exposed as the ``train`` split) on which the hybrid λ_test is tuned; the test split is only
ever evaluated. CLEAR's ξ and λ_train come from the fit part's BM25 score gaps
(``training.losses.suggest_scale``), not from test.

``--refit`` is the usual select-then-refit protocol: each row is first trained on the fit part and
its λ_test tuned on the held-out part; then the same configuration is trained again on the whole
train split and evaluated on test with that λ_test. The base row's λ_test is then tuned on the
whole train split (the base encoder was never trained on it). Without ``--refit`` the models
trained on the fit part are the ones evaluated.

``--search`` adds a held-out hyperparameter search before the refit: for each learning rate in
``--search-lr`` a row is trained on the fit part for ``--search-epochs`` epochs, and after every
epoch (every stage-2 epoch for quadruplet) the model's hybrid nDCG@10 on the held-out part, at
the λ tuned there, is measured (and the dense Recall@100 there, the criterion with ``--select-on
dense_recall@100``). The best (learning rate, epochs) — fewer epochs on a tie — is then
trained again on all of train with that many epochs and evaluated on test at that trial's λ_test.
The test split plays no part in any choice.

``--wise 0.5`` (with ``--search``) also scores, after each trial's last epoch, the weight-space
interpolation of that model with the base, (1 − α)·θ_base + α·θ_trained (WiSE-FT: Mitchell
Wortsman, Gabriel Ilharco, Jong Wook Kim, Mike Li, Simon Kornblith, Rebecca Roelofs, Raphael Gontijo
Lopes, Hannaneh Hajishirzi, Ali Farhadi, Hongseok Namkoong, Ludwig Schmidt, "Robust fine-tuning of
zero-shot models", CVPR 2022, arXiv:2109.01903, §2), on the held-out part: reported beside the
trials, never chosen.

Every row prints dense and hybrid nDCG@10 and Recall@100 on test, training time and device; the
closing table gives each row's nDCG@10 with its 95% interval and its paired difference from the base
and from ``--reference`` (the first trained row unless named) with interval and p;
results are appended to ``--json`` as each row finishes, so an interrupted run keeps what it
measured. The same command run again with the same ``--out-dir`` goes on where it stopped: a row
that finished is read back, not trained again (with or without ``--refit``); a
search trial's held-out scores are recorded after every epoch (``search/<row>-lr<lr>.trials.json``)
and its training resumes from its last checkpoint; finished trials and refits are read back, not
trained again.
"""
from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from _common import dataset_arg, recorded, store_arg, write_json  # first: it puts the checkout on sys.path
from retrieval.data.dataset import Dataset
from retrieval.data.readers import load_dataset
from retrieval.evaluation.measures import Evaluation, compare
from retrieval.evaluation.metrics import PRIMARY, SUMMARY_METRICS, interval_text
from retrieval.index.encoder import Encoder, load_encoder, pick_device
from retrieval.store import Store, default_store_path
from retrieval.systems.hybrid import CLEAR
from retrieval.workspace import Workspace
from training.finetune import finished_run, run_training
from training.losses import suggest_scale
from training.negatives import bm25_pool
from training.pairs import known_positives, labelled_pairs
from training.trainer import TrainConfig, load_trainable

ROWS = {
    "triplet-random": dict(loss="triplet", negatives="random"),
    "triplet-bm25": dict(loss="triplet", negatives="bm25"),
    "quadruplet": dict(loss="quadruplet"),
    "residual": dict(loss="residual", negatives="bm25"),
    "residual-constant-margin": dict(loss="residual", negatives="bm25", lambda_train=0.0),
    "residual-random-negatives": dict(loss="residual", negatives="random"),
    "inbatch-bm25": dict(loss="inbatch", negatives="bm25"),
    "marginmse-hybrid": dict(loss="marginmse", negatives="bm25", teacher="hybrid"),  # the hybrid as a teacher
}


def fit_holdout(dataset: Dataset, fraction: float = 0.8, seed: int = 42) -> Dataset:
    """qrels: fit (trains), train (held out: λ_test is tuned here), test (evaluated only)."""
    qids = sorted(dataset.qrels["train"])
    random.Random(seed).shuffle(qids)
    cut = round(len(qids) * fraction)
    fit, held = set(qids[:cut]), set(qids[cut:])
    qrels = {"fit": {q: v for q, v in dataset.qrels["train"].items() if q in fit},
             "train": {q: v for q, v in dataset.qrels["train"].items() if q in held},
             "test": dataset.qrels["test"]}
    return Dataset(f"{dataset.name}[fit/held-out]", dataset.docs, dataset.queries, qrels, dataset.report)


def clear_scale(ds: Dataset, ws: Workspace, seed: int) -> tuple[float, float]:
    """ξ, λ_train from BM25 gaps s_lex(q,d⁺) − s_lex(q,d⁻) of fit pairs against BM25-error negatives."""
    pairs = labelled_pairs(ds, "fit")
    pool = bm25_pool(ws.bm25, {p.query: p.query_id for p in pairs}, known_positives(ds), 100)
    rng, gaps = random.Random(seed), []
    row = ws.doc_row
    for p in pairs[:400]:
        neg = pool.sample(p.query, rng)
        if neg is not None:
            scores = ws.bm25.scores(p.query)
            gaps.append(float(scores[row[p.doc_id]] - scores[neg]))
    return suggest_scale(gaps, normalized=True)


def held_out_scores(ws_held: Workspace, model, max_seq_length: int, name: str) -> dict:
    """λ_test and dense / hybrid nDCG@10 on the held-out part (``ws_held``'s "train" split) of a model
    mid-training; it is read at the evaluation length, then put back as it was."""
    train_length = model.max_seq_length
    model.max_seq_length = max_seq_length
    try:
        ws = ws_held.with_model(Encoder(model, name=name, precision=ws_held.encoder.precision))  # as the base
        fit = CLEAR.lambda_fit(ws, "train")  # λ chosen as the app chooses it, on the held-out queries
        dense = ws.evaluate("dense", "train").mean
        return {"lambda_test": fit.chosen, "hybrid": dict(fit.grid)[fit.chosen], "dense": dense["ndcg@10"],
                "dense_recall@100": dense["recall@100"]}
    finally:
        model.max_seq_length = train_length


SELECT_ON = {"hybrid": "hybrid nDCG@10", "dense_recall@100": "dense Recall@100"}  # held-out criteria of --search


def interpolated(base, trained, alpha: float):
    """A copy of ``trained`` with every weight it shares with ``base`` set to (1 − α)·base + α·trained
    (WiSE-FT, Wortsman et al., CVPR 2022, §2); weights only ``trained`` has (poly-attention) stay."""
    mixed, theirs = copy.deepcopy(trained), base.state_dict()
    mixed.load_state_dict({k: (1 - alpha) * theirs[k].to(v.device) + alpha * v
                           if k in theirs and v.is_floating_point() else v for k, v in trained.state_dict().items()})
    return mixed


def search_row(name: str, cfg: TrainConfig, ws_held: Workspace, store: Store, out_dir: Path, model: str | None,
               lrs: list[float], max_epochs: int, select_on: str = "hybrid",
               wise: list[float] = ()) -> tuple[TrainConfig, float, list[dict]]:
    """(the chosen config, its λ_test, every trial): learning rate × epochs chosen on the held-out
    part by ``select_on`` (a key of ``SELECT_ON``); each ``wise`` α's interpolation of a trial's last
    epoch with the base is scored and recorded (``"wise"`` of that trial), not chosen from."""
    trials: list[dict] = []
    base = load_trainable(model, "cpu", ws_held.encoder.max_seq_length) if wise else None
    length = ws_held.encoder.max_seq_length
    for lr in lrs:
        trial_cfg, folder = replace(cfg, lr=lr, epochs=max_epochs), out_dir / "search" / f"{name}-lr{lr:g}"
        record = folder.parent / f"{folder.name}.trials.json"  # each epoch's held-out scores, as they come
        saved = json.loads(record.read_text()) if record.exists() else {}
        scored = {t["epochs"]: t for t in saved.get("trials", [])} if saved.get("config") == asdict(trial_cfg) else {}

        def show(trial: dict, how: str = "") -> None:
            print(f"  {name} lr {trial['lr']:g} epoch {trial['epochs']}: held-out hybrid nDCG@10 {trial['hybrid']:.4f} "
                  f"(λ {trial['lambda_test']:g}), dense {trial['dense']:.4f}, dense R@100 "
                  f"{trial['dense_recall@100']:.4f}{how}", flush=True)
            for a, w in trial.get("wise", {}).items():
                print(f"    interpolated with the base at α {a}: held-out hybrid nDCG@10 {w['hybrid']:.4f} "
                      f"(λ {w['lambda_test']:g}), dense {w['dense']:.4f}, dense R@100 {w['dense_recall@100']:.4f}",
                      flush=True)

        def save(scored=scored, record=record, trial_cfg=trial_cfg) -> None:
            record.parent.mkdir(parents=True, exist_ok=True)
            record.write_text(json.dumps({"config": asdict(trial_cfg), "trials": [scored[e] for e in sorted(scored)]}))

        def interpolations(st_model, alphas=wise, lr=lr) -> dict:
            return {f"{a:g}": held_out_scores(ws_held, interpolated(base, st_model, a), length,
                                              f"{name}-lr{lr:g}-e{max_epochs}-wise{a:g}") for a in alphas}

        def after_epoch(st_model, stage: str, epoch: int, lr=lr, scored=scored) -> None:
            if stage.endswith("stage 1"):
                return  # quadruplet's stage one is a warm-up, not a candidate
            t = time.perf_counter()
            scores = held_out_scores(ws_held, st_model, length, f"{name}-lr{lr:g}-e{epoch}")
            trial = {"lr": lr, "epochs": epoch, **scores}
            trial["eval_s"] = round(time.perf_counter() - t, 1)
            if epoch == max_epochs and wise:
                trial["wise"] = interpolations(st_model)
            scored[epoch] = trial
            save()
            show(trial)

        for epoch in sorted(scored):  # scored by an earlier run of the same command
            show(scored[epoch], " (recorded)")
        if finished_run(folder, trial_cfg) is None or len(scored) < max_epochs:  # else: nothing left to train
            run_training(ws_held.dataset, trial_cfg, folder, model, store, train_split="fit", evaluate=False,
                         on_epoch=after_epoch)  # an interrupted trial goes on from its last checkpoint
        elif missing := [a for a in wise if f"{a:g}" not in scored[max_epochs].get("wise", {})]:
            # trained before these α were asked for: the trial's export is its last epoch
            last = scored[max_epochs]
            added = interpolations(load_trainable(str(folder), "cpu", length), missing)
            last["wise"] = {**last.get("wise", {}), **added}
            save()
            show(last, " (interpolations added)")
        trials.extend(scored[e] for e in sorted(scored))
    best = max(trials, key=lambda r: (round(r[select_on], 4), -r["epochs"]))
    return replace(cfg, lr=best["lr"], epochs=best["epochs"]), best["lambda_test"], trials


def refit_row(name: str, cfg: TrainConfig, full: Dataset, ws_held: Workspace, ws_full: Workspace, store: Store,
              out_dir: Path, model: str | None,
              search: tuple[list[float], int, str, list[float]] | None = None) -> dict:
    """Train on the fit part, tune λ_test (and, with ``search``, lr and epochs) on the held-out part;
    train again on all of train, evaluate on test."""
    trials = None
    if search:
        t = time.perf_counter()
        cfg, lam, trials = search_row(name, cfg, ws_held, store, out_dir, model, *search)
        sel_s = time.perf_counter() - t
    else:
        sel = finished_run(out_dir / "select" / name, cfg) or run_training(
            ws_held.dataset, cfg, out_dir / "select" / name, model, store, train_split="fit", evaluate=False)
        sel_s = sel.seconds
        # the held-out queries are ``ws_held``'s "train" split; the grid is cached like any other λ
        lam = CLEAR.lambda_fit(ws_held.with_model(load_encoder(sel.model_path, device=cfg.device)), "train").chosen
    res = finished_run(out_dir / name, cfg) or run_training(full, cfg, out_dir / name, model, store,
                                                            eval_split="test", train_split="train", evaluate=False)
    ws_ft = ws_full.with_model(load_encoder(res.model_path, device=cfg.device))
    CLEAR.fix_lambda(ws_ft, lam, "tuned on the held-out part with the fit-part model", "test")
    row = {"row": name, "train_s": round(res.seconds, 1), "select_s": round(sel_s, 1),
           "device": res.device, "note": "; ".join(res.stages), "lambda_test": lam,
           "config": dict(vars(cfg)), "p_vs_base": {}}
    if trials is not None:
        row["search"] = trials
    for system in ("dense", "hybrid"):
        ev, ev0 = ws_ft.evaluate(system, "test"), ws_full.evaluate(system, "test")
        row[system] = {m: ev.mean[m] for m in ("ndcg@10", "recall@100")}
        row["p_vs_base"][system] = {m: compare(ev0, ev, m).p_value for m in SUMMARY_METRICS}
        row.setdefault("per_query", {})[system] = ev.per_query.get(PRIMARY, {})
    return row


def intervals_table(results: list[dict], reference: str | None) -> list[dict]:
    """Each row's test nDCG@10 (dense, hybrid) with its 95% interval, and its paired difference
    from the base row and from ``reference`` (the first trained row when None) with the interval and
    p of the permutation test (``measures.compare``), from the per-query nDCG@10 each row kept."""
    rows = [r for r in results if r.get("per_query")]
    trained = [r["row"] for r in rows if r["row"] != "base"]
    reference = reference or (trained[0] if trained else None)
    evals = {r["row"]: {s: Evaluation({PRIMARY: float(np.mean(list(q.values())))}, {PRIMARY: q})
                        for s, q in r["per_query"].items()} for r in rows}
    table = []
    for r in rows:
        line: dict = {"row": r["row"]}
        for system, ev in evals[r["row"]].items():
            iv = ev.interval(PRIMARY)
            line[system] = {"ndcg@10": ev.mean[PRIMARY], "interval": [iv.low, iv.high]}
            for against in ("base", reference) if r["row"] != "base" else ():
                if against and against != r["row"] and against in evals:
                    c = compare(evals[against][system], ev, PRIMARY)
                    line[system][f"vs_{against}"] = {"delta": c.delta, "interval": [c.interval.low, c.interval.high],
                                                     "p": c.p_value}
        table.append(line)
    return table


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    dataset_arg(ap)
    ap.add_argument("--rows", default="base," + ",".join(ROWS))
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--max-steps-per-epoch", type=int, default=None)
    ap.add_argument("--train-max-seq-length", type=int, default=256)
    ap.add_argument("--stage1-max-epochs", type=int, default=3)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--model", default=None)
    store_arg(ap)
    ap.add_argument("--out-dir", default="/tmp/rankscope-ablation")
    ap.add_argument("--json", default=None)
    ap.add_argument("--reference", default=None,
                    help="the row every other row's paired difference is also read against "
                    "(default: the first trained)")
    ap.add_argument("--refit", action="store_true",
                    help="select λ_test with a fit-part model, then train again on the whole train split")
    ap.add_argument("--search", action="store_true",
                    help="with --refit: choose lr and epochs on the held-out part too (see --search-lr/-epochs)")
    ap.add_argument("--search-lr", default="2e-5,5e-5", help="learning rates tried by --search")
    ap.add_argument("--search-epochs", type=int, default=3, help="epochs tried by --search: 1 … N")
    ap.add_argument("--select-on", default="hybrid", choices=tuple(SELECT_ON),
                    help="the held-out score --search maximizes: hybrid nDCG@10, or dense Recall@100")
    ap.add_argument("--wise", default="", help="with --search: α values (e.g. 0.5) at which each trial's last "
                    "epoch, interpolated in weight space with the base, is scored on the held-out part too")
    args = ap.parse_args(argv)
    if args.search:
        args.refit = True
    search = ([float(x) for x in args.search_lr.split(",")], args.search_epochs, args.select_on,
              [float(x) for x in args.wise.split(",") if x.strip()]) if args.search else None

    full = load_dataset(args.dataset)
    ds = fit_holdout(full, seed=args.seed)
    store = Store(args.store or default_store_path())
    base = load_encoder(args.model, device=args.device)
    ws = Workspace(ds, store, model=base)
    ws_full = Workspace(full, store, model=base) if args.refit else None
    xi, lam_train = clear_scale(ds, ws, args.seed)
    device = pick_device(args.device)
    print(f"{ds.name}: fit {len(ds.qrels['fit'])} queries, held-out {len(ds.qrels['train'])} (λ_test), "
          f"test {len(ds.qrels['test'])}; device {device}; CLEAR ξ = {xi}, λ_train = {lam_train} "
          f"(from fit-split BM25 gaps); {'refit on all of train' if args.refit else 'evaluating fit-part models'}",
          flush=True)
    common = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, xi=xi, lambda_train=lam_train,
                         max_seq_length=args.train_max_seq_length, device=args.device, seed=args.seed,
                         stage1_max_epochs=args.stage1_max_epochs, max_steps_per_epoch=args.max_steps_per_epoch,
                         holdout=0.0, refit=False)  # the fit / held-out cut above is this script's own
    results = []
    if search:  # the reference every trial is read against
        ref = held_out_scores(ws, base.model, base.max_seq_length, base.name)
        print(f"base encoder on the held-out part: hybrid nDCG@10 {ref['hybrid']:.4f} (λ {ref['lambda_test']:g}), "
              f"dense {ref['dense']:.4f}, dense R@100 {ref['dense_recall@100']:.4f}", flush=True)
    for name in [r.strip() for r in args.rows.split(",") if r.strip()]:
        t = time.perf_counter()
        if name == "base":
            row = {"row": name, "train_s": 0.0, "device": device, "note": "no training"}
            base_ws = ws_full or ws  # λ_test on all of train under --refit, else on the held-out part
            for system in ("dense", "hybrid"):
                ev = base_ws.evaluate(system, "test")
                row[system] = {m: ev.mean[m] for m in ("ndcg@10", "recall@100")}
                row.setdefault("per_query", {})[system] = ev.per_query.get(PRIMARY, {})
            row["lambda_test"] = CLEAR.lambda_for(base_ws, "test").value
        elif args.refit:
            row = refit_row(name, replace(common, **ROWS[name]), full, ws, ws_full, store, Path(args.out_dir),
                            args.model, search)
        else:
            cfg = replace(common, **ROWS[name])
            res = finished_run(Path(args.out_dir) / name, cfg) or run_training(  # a finished row is read back
                ds, cfg, Path(args.out_dir) / name, args.model, store, eval_split="test", train_split="fit")
            m = res.metrics["fine-tuned"]
            row = {"row": name, "train_s": round(res.seconds, 1), "device": res.device, "note": "; ".join(res.stages),
                   "dense": {k: m["dense"][k] for k in ("ndcg@10", "recall@100")},
                   "hybrid": {k: m["hybrid"][k] for k in ("ndcg@10", "recall@100")},
                   "lambda_test": m["hybrid"]["lambda"], "p_vs_base": res.significance,
                   "config": {k: v for k, v in vars(cfg).items()},
                   "per_query": {system: {q: tuned for q, (_, tuned) in by_query.items()}
                                 for system, by_query in res.per_query.items()}}
        row["wall_s"] = round(time.perf_counter() - t, 1)
        results.append(row)
        chosen = f" [lr {row['config']['lr']:g}, {row['config']['epochs']} epochs]" if "search" in row else ""
        print(f"{name:<28}{chosen} dense nDCG@10 {row['dense']['ndcg@10']:.4f} "
              f"R@100 {row['dense']['recall@100']:.4f} | hybrid nDCG@10 {row['hybrid']['ndcg@10']:.4f} "
              f"R@100 {row['hybrid']['recall@100']:.4f} (λ_test {row['lambda_test']:g}) | "
              f"train {row['train_s']:.0f} s on {row['device']}, wall {row['wall_s']:.0f} s", flush=True)
        write_json(args.json, {"dataset": ds.name, "xi": xi, "lambda_train": lam_train, "args": vars(args),
                               "rows": results})
    print()
    print(f"{'row':<28}{'dense nDCG@10':>14}{'dense R@100':>12}{'hybrid nDCG@10':>16}{'hybrid R@100':>14}"
          f"{'train s':>9}  device")
    for r in results:
        print(f"{r['row']:<28}{r['dense']['ndcg@10']:>14.4f}{r['dense']['recall@100']:>12.4f}"
              f"{r['hybrid']['ndcg@10']:>16.4f}{r['hybrid']['recall@100']:>14.4f}{r['train_s']:>9.0f}  {r['device']}")
    table = intervals_table(results, args.reference)
    print()
    print("test nDCG@10 with 95% intervals; Δ: paired difference with its interval and p (permutation test)")
    for line in table:
        for system in ("dense", "hybrid"):
            cell = line.get(system)
            if not cell:
                continue
            text = f"{line['row']:<28}{system:<8}{cell['ndcg@10']:.4f} {interval_text(cell['interval'])}"
            for key, against in cell.items():
                if key.startswith("vs_"):
                    text += (f"; vs {key[3:]} Δ {against['delta']:+.4f} {interval_text(against['interval'])} "
                             f"p {against['p']:.4f}")
            print(text)
    write_json(args.json, {"dataset": ds.name, "xi": xi, "lambda_train": lam_train, "args": vars(args),
                           "rows": results, "intervals": table})
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
