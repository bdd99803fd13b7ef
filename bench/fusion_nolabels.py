#!/usr/bin/env python
"""Hybrid fusion without labels: every label-free way of fusing BM25 and dense, on data sets whose
labels are withheld from every choice, against the better single system.

    python bench/fusion_nolabels.py [--store FILE] [--json FILE]

Data sets: the bundled demo and the shared SciFact, NFCorpus and Cranfield (skipped where
``../shared`` is absent), each reported on its test split. The labels are used only to score the
final lists: each data set is opened with its test labels alone (no train split), so the hybrid
the app and the CLI give (``Workspace.run("hybrid", "test")``) is the label-free default
(``retrieval.hybrid``: BM25 divided by the query's largest possible BM25 score, plus the cosine,
λ = 1). Beside it, on the same candidates (the union of BM25's and dense's top 1000, both scored
exactly): the scale-matched CLEAR λ (the default before), CLEAR with the paper's λ = 0.5, RRF
(k = 60), convex combinations α·dense + (1 − α)·BM25 of min-max, TMM (Bruch et al., TOIS 2023:
theoretical minimum, list maximum) and query-max normalized scores for α = 0.3 … 0.9, and the z-score
sum.

How the default was chosen without the reported labels: ``--select`` prints the same table on
the other splits (demo train, SciFact train, NFCorpus dev) and the normalization and α with the best
worst case there were taken (query max, α = 0.5, i.e. λ = 1); Cranfield has no other split and was
not looked at before.

Last line: ``worst_gap_vs_best_single=<x> mean_gain_vs_best_single=<y>``: the default's nDCG@10
minus the better of BM25 and dense, the worst and the mean over the data sets.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np  # noqa: E402

from _common import ROOT, SHARED, store_arg, write_json  # first: it puts the checkout on sys.path
from retrieval import Store, Workspace, load_dataset  # noqa: E402
from retrieval.dataset import Dataset  # noqa: E402
from retrieval.evaluate import evaluate_run  # noqa: E402
from retrieval.hybrid import Hybrid, default_lambda  # noqa: E402
from retrieval.store import default_store_path  # noqa: E402

REPORT = {"demo": (ROOT / "data" / "demo", "test"), "scifact": (SHARED / "scifact", "test"),
          "nfcorpus": (SHARED / "nfcorpus", "test"), "cranfield": (SHARED / "cranfield", "test")}
SELECT = {"demo": (ROOT / "data" / "demo", "train"), "scifact": (SHARED / "scifact", "train"),
          "nfcorpus": (SHARED / "nfcorpus", "dev")}
ALPHAS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def only(ds: Dataset, split: str) -> Dataset:
    """The data set with the labels of ``split`` alone (nothing to tune on)."""
    return Dataset(ds.name, ds.docs, ds.queries, {split: ds.qrels[split]})


def fusions(ws: Workspace, queries: dict[str, str]) -> dict[str, callable]:
    """Label-free fusions as functions of one query's candidates (``Candidates``) and text."""
    def mm(x):
        return (x - x.min()) / (x.max() - x.min()) if x.max() > x.min() else np.zeros_like(x)

    def z(x):
        return (x - x.mean()) / x.std() if x.std() > 0 else np.zeros_like(x)

    def rrf(c, _):
        rank_l = np.empty(len(c.rows))
        rank_l[np.argsort(-c.s_lex, kind="stable")] = np.arange(1, len(c.rows) + 1)
        rank_d = np.empty(len(c.rows))
        rank_d[np.argsort(-c.s_emb, kind="stable")] = np.arange(1, len(c.rows) + 1)
        return (c.s_lex > 0) / (60 + rank_l) + 1 / (60 + rank_d)

    out = {"bm25": lambda c, _: c.s_lex + 1e-9 * c.s_emb, "dense": lambda c, _: c.s_emb,
           "CLEAR λ 0.5 (paper)": lambda c, _: 0.5 * c.s_lex + c.s_emb, "RRF k 60": rrf,
           "z-score sum": lambda c, _: z(c.s_emb) + z(c.s_lex)}
    for a in ALPHAS:
        out[f"min-max α {a}"] = lambda c, _, a=a: a * mm(c.s_emb) + (1 - a) * mm(c.s_lex)
        out[f"TMM α {a}"] = lambda c, _, a=a: (a * (c.s_emb + 1) / (c.s_emb.max() + 1)
                                               + (1 - a) * c.s_lex / max(c.s_lex.max(), 1e-9))
        out[f"query max α {a}"] = (lambda c, text, a=a:
                                   a * c.s_emb + (1 - a) * c.s_lex / max(ws.bm25.max_score(text), 1e-9))
    return out


def table(sets: dict, store: Store | None, model=None) -> dict[str, dict[str, float]]:
    """{data set: {fusion: nDCG@10}} on each data set's split (``model``: the encoder, default MiniLM)."""
    results = {}
    for name, (folder, split) in sets.items():
        if not folder.exists():
            print(f"{name}: {folder} is absent, skipped", file=sys.stderr)
            continue
        ds = only(load_dataset(folder), split)
        ws = Workspace(ds, store, model=model)
        ws.build_dense()
        queries, qrels, ids = ds.split_queries(split), ds.qrels[split], ds.doc_ids
        cands = Hybrid(ws.lexical, ws.dense, depth=ws.depth).candidates(queries)
        row = {}
        for fusion, score in fusions(ws, queries).items():
            run = {}
            for qid, c in cands.items():
                s = score(c, queries[qid])
                order = np.argsort(-s, kind="stable")[:100]
                run[qid] = [(ids[c.rows[j]], float(s[j])) for j in order]
            row[fusion] = evaluate_run(run, qrels, metrics=("ndcg@10",)).mean["ndcg@10"]
        lam = default_lambda(cands)
        run = Hybrid(ws.lexical, ws.dense, lam=lam, depth=ws.depth).rank(cands, lam, 100)
        row["CLEAR scale-matched λ (before)"] = evaluate_run(run, qrels, metrics=("ndcg@10",)).mean["ndcg@10"]
        choice = ws.lambda_for(split)
        row["default (the app's hybrid)"] = ws.evaluate("hybrid", split).mean["ndcg@10"]
        print(f"{name} ({split}, {len(queries)} queries): hybrid λ = {choice.value:g}, {choice.how}", file=sys.stderr)
        results[f"{name}:{split}"] = row
    return results


def show(results: dict[str, dict[str, float]]) -> dict[str, tuple[float, float]]:
    """Print the table; return {fusion: (worst gap, mean gap)} against the better single system."""
    names = list(results)
    fusions_ = list(next(iter(results.values())))
    print(f"{'nDCG@10':<34}" + "".join(f"{n:>16}" for n in names) + f"{'worst gap':>11}{'mean gap':>10}")
    gaps = {}
    for f in fusions_:
        g = [results[n][f] - max(results[n]["bm25"], results[n]["dense"]) for n in names]
        gaps[f] = (min(g), float(np.mean(g)))
        print(f"{f:<34}" + "".join(f"{results[n][f]:>16.4f}" for n in names)
              + f"{gaps[f][0]:>+11.4f}{gaps[f][1]:>+10.4f}")
    return gaps


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    store_arg(p, "the usual store; embeddings reused")
    p.add_argument("--select", action="store_true", help="the selection table (other splits) instead")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    store = Store(args.store or default_store_path())
    results = table(SELECT if args.select else REPORT, store)
    gaps = show(results)
    if args.json:
        write_json(args.json, results)
    worst, mean = gaps["default (the app's hybrid)"]
    print(f"worst_gap_vs_best_single={worst:.4f} mean_gain_vs_best_single={mean:.4f}")


if __name__ == "__main__":
    main()
