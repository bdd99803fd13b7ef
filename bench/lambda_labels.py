#!/usr/bin/env python
"""How many labelled queries does tuning the hybrid's λ need? λ tuned on a few training queries
against the label-free λ, on the data sets that have a train split.

    python bench/lambda_labels.py [--sizes 5,10,20,50,100,200] [--seeds 10] [--store FILE] [--json FILE]

Data sets: the bundled demo and the shared SciFact and NFCorpus (skipped where ``../shared`` is
absent), with the default encoder. For each number n of labelled train queries (and all of them),
``--seeds`` seeded draws of n train queries; λ is chosen on the drawn queries' labels alone and the
test split is scored with it (nDCG@10), in four ways, on the same candidates (BM25's and dense's top
1000, both scored exactly):

* ``raw λ, grid best`` — CLEAR's λ·BM25 + cosine, λ the best of ``LAMBDA_GRID`` (the app before);
* ``query-max λ, grid best`` — λ·BM25/BM25max(q) + cosine, λ the best of ``QUERY_MAX_GRID``;
* ``query-max λ, the app's`` — the same grid, but the label-free λ = 1 is kept unless the grid's best
  beats it on the drawn queries by a paired permutation test at 0.05 (``hybrid.fit_lambda``, what
  ``Workspace.lambda_for`` does);
* ``label-free λ = 1`` — no labels used.

Each cell: the mean over the draws, and the worst draw. Last line:
``worst_gap_vs_label_free=<x> mean_gain_vs_raw_tuned=<y>``: the app's choice minus the label-free
λ, worst over every data set, n and draw; and the app's choice minus the raw grid best, mean over
the data sets and sizes (nDCG@10).
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np  # noqa: E402

from _common import ROOT, SHARED, store_arg, write_json  # first: it puts the checkout on sys.path
from retrieval import Store, Workspace, load_dataset  # noqa: E402
from retrieval.hybrid import Candidates, Hybrid, fit_lambda, lambda_table
from retrieval.lambdas import LABEL_FREE_LAMBDA, LAMBDA_GRID, QUERY_MAX_GRID
from retrieval.store import default_store_path  # noqa: E402

SETS = {"demo": ROOT / "data" / "demo", "scifact": SHARED / "scifact", "nfcorpus": SHARED / "nfcorpus"}
WAYS = ("raw λ, grid best", "query-max λ, grid best", "query-max λ, the app's", "label-free λ = 1")


def candidates(ws: Workspace, queries: dict[str, str]) -> tuple[dict[str, Candidates], dict[str, Candidates]]:
    """(raw, query-max normalized) candidates of ``queries``: the same documents and scores, BM25
    divided by the query's largest possible score in the second."""
    raw = Hybrid(ws.lexical, ws.dense, depth=ws.depth).candidates(queries)
    norm = {q: Candidates(c.rows, c.s_lex / max(ws.bm25.max_score(queries[q]), 1e-9), c.s_emb)
            for q, c in raw.items()}
    return raw, norm


def score(cands: dict[str, Candidates], qrels, ids: list[str], lam: float) -> float:
    return lambda_table(cands, qrels, ids, grid=(lam,))[1][0][1]


def study(folder: Path, store: Store | None, sizes: list[int], seeds: int, model=None) -> dict:
    """{"systems": {bm25, dense}, "rows": [{n, way: [(λ, test nDCG@10) per draw]}]} for one data set
    (``model``: the encoder, default MiniLM)."""
    ds = load_dataset(folder)
    ws = Workspace(ds, store, model=model)
    ws.build_dense()
    ids, train_qrels, test_qrels = ds.doc_ids, ds.qrels["train"], ds.qrels["test"]
    train = {q: t for q, t in ds.split_queries("train").items() if q in train_qrels}
    tr_raw, tr_norm = candidates(ws, train)
    te_raw, te_norm = candidates(ws, ds.split_queries("test"))
    systems = {"bm25": ws.evaluate("bm25", "test").mean["ndcg@10"], "dense": score(te_norm, test_qrels, ids, 0.0)}
    free = score(te_norm, test_qrels, ids, LABEL_FREE_LAMBDA)
    rows = []
    for n in [s for s in sizes if s < len(train)] + [len(train)]:
        draws = [sorted(train)] if n == len(train) else \
            [random.Random(seed).sample(sorted(train), n) for seed in range(seeds)]
        row: dict = {"n": n, **{w: [] for w in WAYS}}
        for qids in draws:
            labels = {q: train_qrels[q] for q in qids}
            raw = fit_lambda({q: tr_raw[q] for q in qids}, labels, ids, grid=LAMBDA_GRID)
            norm = fit_lambda({q: tr_norm[q] for q in qids}, labels, ids, grid=QUERY_MAX_GRID,
                              prior=LABEL_FREE_LAMBDA)
            row[WAYS[0]].append((raw.best, score(te_raw, test_qrels, ids, raw.best)))
            row[WAYS[1]].append((norm.best, score(te_norm, test_qrels, ids, norm.best)))
            row[WAYS[2]].append((norm.chosen, score(te_norm, test_qrels, ids, norm.chosen)))
            row[WAYS[3]].append((LABEL_FREE_LAMBDA, free))
        rows.append(row)
    # the app's own choice on all of train is the last row's
    app = ws.lambda_for("test")
    assert app.value == rows[-1][WAYS[2]][0][0], (app.value, rows[-1][WAYS[2]])
    print(f"{folder.name}: {len(train)} labelled train queries; the app's λ on all of them: {app.value:g} "
          f"({app.how})", file=sys.stderr)
    return {"systems": systems, "rows": rows}


def show(results: dict) -> tuple[float, float]:
    """Print the tables; return (worst app − label-free, mean app − raw grid best)."""
    worst, gains = 0.0, []
    for name, res in results.items():
        s = res["systems"]
        print(f"\n{name}: BM25 {s['bm25']:.4f}, dense {s['dense']:.4f} (test nDCG@10; mean over draws / worst draw)")
        print(f"{'train queries':>14}" + "".join(f"{w:>30}" for w in WAYS))
        for row in res["rows"]:
            cells = []
            for w in WAYS:
                v = [x for _, x in row[w]]
                lam = float(np.median([lam for lam, _ in row[w]]))
                cells.append(f"{np.mean(v):.4f} / {min(v):.4f} (λ~{lam:g})")
            print(f"{row['n']:>14}" + "".join(f"{c:>30}" for c in cells))
            app = np.array([x for _, x in row[WAYS[2]]])
            worst = min(worst, float((app - np.array([x for _, x in row[WAYS[3]]])).min()))
            gains.append(float(app.mean() - np.mean([x for _, x in row[WAYS[0]]])))
    return worst, float(np.mean(gains))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="5,10,20,50,100,200", help="numbers of labelled train queries drawn")
    p.add_argument("--seeds", type=int, default=10, help="draws per size")
    p.add_argument("--sets", default=",".join(SETS), help="data sets (of: " + ", ".join(SETS) + ")")
    store_arg(p, "the usual store; embeddings reused")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    store = Store(args.store or default_store_path())
    sizes = [int(s) for s in args.sizes.split(",") if s]
    results = {}
    for name in args.sets.split(","):
        if not SETS[name].exists():
            print(f"{name}: {SETS[name]} is absent, skipped", file=sys.stderr)
            continue
        results[name] = study(SETS[name], store, sizes, args.seeds)
    worst, gain = show(results)
    if args.json:
        write_json(args.json, results)
    print(f"worst_gap_vs_label_free={worst:.4f} mean_gain_vs_raw_tuned={gain:.4f}")


if __name__ == "__main__":
    main()
