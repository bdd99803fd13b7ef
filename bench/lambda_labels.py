#!/usr/bin/env python
"""How many labelled queries does tuning the hybrid's λ need? λ tuned on a few training queries
against the label-free λ, on the data sets that have a train split.

    python bench/lambda_labels.py [--sizes 5,10,20,50,100,200] [--seeds 10] [--store FILE] [--json FILE]
        [--kinds "as is,half withheld,withheld"] [--precision auto|fp32|bf16]

Data sets: the bundled demo and the shared SciFact and NFCorpus (skipped where ``../shared`` is
absent), with the default encoder; ``--kinds`` (default: as is) makes each of them in the corpus
kinds of ``bench/fusion_nolabels.py`` (``bench/_kinds.py``, the corpus edited for the train and the
test queries alike) — where no label-free fusion holds up (query words withheld from the relevant
documents), this says how many judged queries the app's λ needs to. For each number n of labelled
train queries (and all of them), ``--seeds`` seeded draws of n train queries; λ is chosen on the
drawn queries' labels alone and the test split is scored with it (nDCG@10), in four ways, on the
same candidates (BM25's and dense's top 1000, both scored exactly):

* ``raw λ, grid best`` — CLEAR's λ·BM25 + cosine, λ the best of ``LAMBDA_GRID`` (the app before);
* ``query-max λ, grid best`` — λ·BM25/BM25max(q) + cosine, λ the best of ``QUERY_MAX_GRID``;
* ``query-max λ, the app's`` — the same grid, but the label-free choice is kept unless the grid's best
  beats it on the drawn queries by a paired permutation test at 0.05 (``fusion.fit_lambda``, what
  ``CLEAR.lambda_for`` does);
* ``label-free (the app's)`` — no labels used: λ = 1, or BM25 alone (λ = ∞, also on the grid then)
  where the encoder fails the reliability check (``systems.hybrid.label_free_prior``).

Each cell: the mean over the draws, and the worst draw. The last column is the app's choice minus
the better of BM25 and dense (mean over the draws / worst draw), and a line per kind gives the number
of labelled queries from which on every data set's mean is within 0.01 of its better single system.
Identifier lookups (``retrieval/systems/identifier_queries.py``) are ranked by BM25 alone in the query-max ways, as in
the app. Last line:
``worst_gap_vs_label_free=<x> mean_gain_vs_raw_tuned=<y>``: the app's choice minus the label-free
λ, worst over every data set, n and draw; and the app's choice minus the raw grid best, mean over
the data sets and sizes (nDCG@10).
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np

from _common import ROOT, SHARED, recorded, store_arg, write_json  # first: it puts the checkout on sys.path
from _kinds import KINDS, TOLERANCE
from retrieval import Store, Workspace, load_dataset
from retrieval.index.encoder import PRECISIONS, load_encoder
from retrieval.store import default_store_path
from retrieval.systems.clear_lambda import LAMBDA_GRID, grid_for, shown
from retrieval.systems.fusion import Candidates, Hybrid, fit_lambda, lambda_table
from retrieval.systems.hybrid import CLEAR, label_free_prior
from retrieval.systems.identifier_queries import is_identifier_lookup

SETS = {"demo": ROOT / "data" / "demo", "scifact": SHARED / "scifact", "nfcorpus": SHARED / "nfcorpus"}
WAYS = ("raw λ, grid best", "query-max λ, grid best", "query-max λ, the app's", "label-free (the app's)")


def candidates(ws: Workspace, queries: dict[str, str]) -> tuple[dict[str, Candidates], dict[str, Candidates]]:
    """(raw, query-max normalized) candidates of ``queries``: the same documents and scores, BM25
    divided by the query's largest possible score in the second, where identifier lookups are BM25's alone."""
    raw = Hybrid(ws.lexical, ws.dense, depth=ws.depth).candidates(queries)
    norm = {q: Candidates(c.rows, c.s_lex / max(ws.bm25.max_score(queries[q]), 1e-9), c.s_emb,
                          lex_only=is_identifier_lookup(queries[q]))
            for q, c in raw.items()}
    return raw, norm


def score(cands: dict[str, Candidates], qrels, ids: list[str], lam: float) -> float:
    return lambda_table(cands, qrels, ids, grid=(lam,))[1][0][1]


def study(folder: Path, store: Store | None, sizes: list[int], seeds: int, model=None, kind: str = "as is") -> dict:
    """{"systems": {bm25, dense}, "rows": [{n, way: [(λ, test nDCG@10) per draw]}]} for one data set
    made in ``kind`` (``model``: the encoder, default MiniLM)."""
    ds = KINDS[kind](load_dataset(folder), "test", "train")
    ws = Workspace(ds, store, model=model)
    ws.build_dense()
    ids, train_qrels, test_qrels = ds.doc_ids, ds.qrels["train"], ds.qrels["test"]
    train = {q: t for q, t in ds.split_queries("train").items() if q in train_qrels}
    tr_raw, tr_norm = candidates(ws, train)
    te_raw, te_norm = candidates(ws, ds.split_queries("test"))
    systems = {"bm25": ws.evaluate("bm25", "test").mean["ndcg@10"], "dense": score(te_raw, test_qrels, ids, 0.0)}
    prior = label_free_prior(ws, True)  # the app's hybrid without labels: λ = 1, or BM25 alone
    grid = grid_for(True, prior)
    free = score(te_norm, test_qrels, ids, prior)
    rows = []
    for n in [s for s in sizes if s < len(train)] + [len(train)]:
        draws = [sorted(train)] if n == len(train) else \
            [random.Random(seed).sample(sorted(train), n) for seed in range(seeds)]
        row: dict = {"n": n, **{w: [] for w in WAYS}}
        for qids in draws:
            labels = {q: train_qrels[q] for q in qids}
            raw = fit_lambda({q: tr_raw[q] for q in qids}, labels, ids, grid=LAMBDA_GRID)
            norm = fit_lambda({q: tr_norm[q] for q in qids}, labels, ids, grid=grid, prior=prior)
            row[WAYS[0]].append((raw.best, score(te_raw, test_qrels, ids, raw.best)))
            row[WAYS[1]].append((norm.best, score(te_norm, test_qrels, ids, norm.best)))
            row[WAYS[2]].append((norm.chosen, score(te_norm, test_qrels, ids, norm.chosen)))
            row[WAYS[3]].append((prior, free))
        rows.append(row)
    # the app's own choice on all of train is the last row's
    app = CLEAR.lambda_for(ws, "test")
    assert app.value == rows[-1][WAYS[2]][0][0], (app.value, rows[-1][WAYS[2]])
    print(f"{folder.name}, {kind}: {len(train)} labelled train queries; the app's λ on all of them: {shown(app.value)} "
          f"({app.how})", file=sys.stderr)
    return {"systems": systems, "rows": rows}


def show(results: dict) -> tuple[float, float]:
    """Print the tables ({"set|kind": study(...)}) and, per kind, the number of labelled queries from
    which on the app's λ is within ``TOLERANCE`` of the better single system on every set (mean over
    the draws); return (worst app − label-free, mean app − raw grid best)."""
    worst, gains = 0.0, []
    enough: dict[str, dict[str, int | None]] = {}  # kind -> set -> labelled queries from which on within
    for name, res in results.items():
        s = res["systems"]
        best = max(s["bm25"], s["dense"])
        print(f"\n{name}: BM25 {s['bm25']:.4f}, dense {s['dense']:.4f} (test nDCG@10; mean over draws / worst draw)")
        print(f"{'train queries':>14}" + "".join(f"{w:>30}" for w in WAYS) + f"{'app − better single':>24}")
        first = None
        for row in res["rows"]:
            cells = []
            for w in WAYS:
                v = [x for _, x in row[w]]
                lam = float(np.median([lam for lam, _ in row[w]]))
                cells.append(f"{np.mean(v):.4f} / {min(v):.4f} (λ~{shown(lam)})")
            app = np.array([x for _, x in row[WAYS[2]]])
            gap = app - best
            print(f"{row['n']:>14}" + "".join(f"{c:>30}" for c in cells) + f"{gap.mean():>+12.4f} / {gap.min():+.4f}")
            worst = min(worst, float((app - np.array([x for _, x in row[WAYS[3]]])).min()))
            gains.append(float(app.mean() - np.mean([x for _, x in row[WAYS[0]]])))
            first = (first or row["n"]) if gap.mean() >= -TOLERANCE else None
        set_, kind = name.split("|")
        enough.setdefault(kind, {})[set_] = first
    for kind, sets in enough.items():
        per_set = ", ".join(f"{s} {n if n is not None else '—'}" for s, n in sets.items())
        if None in sets.values():
            missing = ", ".join(s for s, n in sets.items() if n is None)
            print(f"{kind}: the app's λ is not within {TOLERANCE} of the better single system at the largest size on "
                  f"{missing} (labelled queries from which on it is: {per_set})")
        else:
            print(f"{kind}: the app's λ is within {TOLERANCE} of the better single system on every set from "
                  f"{max(sets.values())} labelled queries on ({per_set})")
    return worst, float(np.mean(gains))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="5,10,20,50,100,200", help="numbers of labelled train queries drawn")
    p.add_argument("--seeds", type=int, default=10, help="draws per size")
    p.add_argument("--sets", default=",".join(SETS), help="data sets (of: " + ", ".join(SETS) + ")")
    p.add_argument("--kinds", default="as is", help="corpus kinds (of: " + ", ".join(KINDS) + ")")
    p.add_argument("--precision", default="auto", choices=PRECISIONS,
                   help="the encoder's arithmetic (auto: as the app picks it; vectors are stored per precision)")
    store_arg(p, "the usual store; embeddings reused")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    store = Store(args.store or default_store_path())
    sizes = [int(s) for s in args.sizes.split(",") if s]
    model, results = load_encoder(None, precision=args.precision), {}
    for name in args.sets.split(","):
        if not SETS[name].exists():
            print(f"{name}: {SETS[name]} is absent, skipped", file=sys.stderr)
            continue
        for kind in [k.strip() for k in args.kinds.split(",") if k.strip()]:
            results[f"{name}|{kind}"] = study(SETS[name], store, sizes, args.seeds, model=model, kind=kind)
    worst, gain = show(results)
    write_json(args.json, results)
    print(f"worst_gap_vs_label_free={worst:.4f} mean_gain_vs_raw_tuned={gain:.4f}")


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
