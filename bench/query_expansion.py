#!/usr/bin/env python
"""Query expansion: RM3 (pseudo-relevance feedback over BM25, Pyserini's defaults) against BM25 itself,
on the shared BEIR sets, each figure with its 95% interval and the paired difference with its own.

    python bench/query_expansion.py [--sets scifact,nfcorpus] [--json FILE]

Both systems as the app and the CLI run them (``Workspace.evaluate``, nothing cached: no store), on
each set's test split: BM25 (k1 0.9, b 0.4, RankScope's tokenizer) and RM3 over it
(``retrieval.systems.rm3``: 10 feedback documents, 10 feedback terms, original query weight 0.5, as
Pyserini's ``LuceneSearcher.set_rm3`` defaults; Abdul-Jaleel et al., "UMass at TREC 2004: Novelty and
HARD", TREC 2004, §3.1). Metrics: nDCG@10, Recall@100 and Recall@1000; each mean with its percentile
bootstrap interval over queries, and RM3 − BM25 with the interval and p of the paired sign-flip test
(``measures.compare``, the test every view uses).

What it is compared with: Pyserini publishes BM25 flat figures for BEIR (its two-click reproductions:
SciFact nDCG@10 0.6789, NFCorpus 0.3218) and no RM3 figure for BEIR; the BM25 row is the check that
ours is that BM25 (our tokenizer is not Lucene's analyzer), and RM3 is compared with it, paired, query
by query.

Last line: ``rm3_ndcg10_delta_min=<x> rm3_recall1000_delta_min=<y>``: RM3 − BM25, the smallest over
the sets measured (negative: RM3 loses there).
"""
from __future__ import annotations

import argparse
import sys

from _common import DEMO, SHARED, chosen_sets, recorded, write_json  # first: it puts the checkout on sys.path
from retrieval import Workspace, load_dataset
from retrieval.evaluation.measures import compare

SETS = {"demo": DEMO, "scifact": SHARED / "scifact", "nfcorpus": SHARED / "nfcorpus", "cranfield": SHARED / "cranfield"}
METRICS = ("ndcg@10", "recall@100", "recall@1000")
SYSTEMS = ("bm25", "rm3")
SPLIT = "test"


def measure(path) -> dict:
    """``{metric: {"bm25": [mean, low, high], "rm3": [...], "delta": [d, low, high], "p": p}}`` on one set."""
    ws = Workspace(load_dataset(str(path)), None)
    ev = {s: ws.evaluate(s, SPLIT) for s in SYSTEMS}
    out: dict = {"queries": len(ev["bm25"].per_query.get(METRICS[0], {}))}
    for metric in METRICS:
        row: dict = {}
        for s in SYSTEMS:
            iv = ev[s].interval(metric)
            row[s] = [ev[s].mean[metric], iv.low, iv.high]
        c = compare(ev["bm25"], ev["rm3"], metric)
        row["delta"], row["p"] = [c.delta, c.interval.low, c.interval.high], c.p_value
        out[metric] = row
    return out


def show(results: dict) -> None:
    for name, r in results.items():
        print(f"{name} ({r['queries']} test queries)")
        for metric in METRICS:
            m = r[metric]
            b, x, d = m["bm25"], m["rm3"], m["delta"]
            print(f"  {metric:<12} BM25 {b[0]:.4f} [{b[1]:.3f}, {b[2]:.3f}]   RM3 {x[0]:.4f} [{x[1]:.3f}, {x[2]:.3f}]"
                  f"   Δ {d[0]:+.4f} [{d[1]:+.3f}, {d[2]:+.3f}] p {m['p']:.4f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sets", default="scifact,nfcorpus", help=f"comma-separated, of {', '.join(SETS)}")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    sets = chosen_sets(p, args.sets, SETS)
    if sets is None:
        return 2  # nothing recorded
    results = {s: measure(SETS[s]) for s in sets}
    show(results)
    write_json(args.json, results)
    print(f"rm3_ndcg10_delta_min={min(r['ndcg@10']['delta'][0] for r in results.values()):.4f} "
          f"rm3_recall1000_delta_min={min(r['recall@1000']['delta'][0] for r in results.values()):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
