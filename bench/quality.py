#!/usr/bin/env python
"""Retrieval quality of every system on a labelled split: the ``evaluate`` numbers, timed.

    python bench/quality.py ../shared/datasets/scifact [--split test]
        [--systems bm25,dense,hybrid,rrf,wsum] [--model PATH_OR_ID] [--sparse-model PATH_OR_ID] [--store PATH]
        [--recompute] [--json FILE] [--engine milvus:PATH.db|milvus://HOST:PORT]

A thin wrapper over ``retrieval.workspace.Workspace``: it prints the metrics table of
``python -m retrieval evaluate`` (``retrieval.cli.format_table``; significance marks against the
first system), each system's nDCG@10 with its 95% interval and its difference from the first system
with the paired interval and p, the hybrid λ_test and how it was chosen, and the seconds each step took.

The Store caches embeddings, runs, metrics and the tuned λ. By default cached runs and metrics
are used (as the CLI does) and the seconds say which steps were served from the cache;
``--recompute`` ignores cached runs, metrics and λ (recomputing and re-storing them) but still
reads cached document embeddings, so the seconds time retrieval and evaluation themselves.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from _common import dataset_arg, recorded, timed, write_json  # first: it puts the checkout on sys.path
from retrieval import cli
from retrieval.data.readers import load_dataset
from retrieval.data.run import Run, rank_maps
from retrieval.evaluation.failure_rules import Thresholds
from retrieval.evaluation.measures import compare, evaluate_run, significance_marks
from retrieval.evaluation.metrics import PRIMARY, SIGNIFICANCE_LEVEL, SIGNIFICANT, TABLE_METRICS, interval_text
from retrieval.index.engines import open_engine
from retrieval.store import Store, default_store_path
from retrieval.systems import BM25, DENSE, HYBRID, SPLADE, SYSTEMS, label
from retrieval.systems.clear_lambda import shown
from retrieval.systems.hybrid import CLEAR
from retrieval.workspace import Workspace


class CountingStore(Store):
    """The Store, noting which lookups were served from the cache (and, with ``recompute``,
    answering every run and metrics lookup with a miss). Its overrides keep ``StoreProtocol``'s
    signatures (``tests/retrieval/store/test_store_package.py`` holds them to it)."""

    def __init__(self, path, recompute: bool = False):
        super().__init__(path)
        self.recompute = recompute
        self.hits = self.misses = self.emb_cached = self.emb_asked = 0

    def reset(self) -> None:
        self.hits = self.misses = 0

    def _note(self, found):
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def get_run(self, key: str) -> Run | None:
        return self._note(None if self.recompute else super().get_run(key))

    def get_metrics(self, key: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        return self._note(None if self.recompute else super().get_metrics(key))

    def get_embeddings(self, model: str, hashes: list[str], dim: int | None = None) -> dict[str, np.ndarray]:
        out = super().get_embeddings(model, hashes, dim)
        self.emb_asked += len(hashes)
        self.emb_cached += len(out)
        return out

    def provenance(self) -> str:
        if not self.hits:
            return "computed"
        return "from cache" if not self.misses else "partly from cache"


def vocabulary_bridges(ws: Workspace, split: str, t: Thresholds = Thresholds()) -> dict[str, int]:
    """How many vocabulary-mismatch cases (``failure_rules``: a relevant document in dense's top
    ``top`` and beyond BM25's ``low``) learned sparse bridges: it ranks the document in its top ``top``."""
    maps = rank_maps({s: ws.run(s, split) for s in (BM25, DENSE, SPLADE)})
    far = t.depth + 1
    out = dict(queries=0, bridged=0, pairs=0, pairs_bridged=0)
    for qid, labels in ws.dataset.qrels[split].items():
        r = {s: maps[s].get(qid, {}) for s in maps}
        cases = [d for d, g in labels.items()
                 if g > 0 and r[DENSE].get(d, far) <= t.top and r[BM25].get(d, far) > t.low]
        hit = [d for d in cases if r[SPLADE].get(d, far) <= t.top]
        out["queries"] += bool(cases)
        out["bridged"] += bool(hit)
        out["pairs"] += len(cases)
        out["pairs_bridged"] += len(hit)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    dataset_arg(p)
    p.add_argument("--split", default="test", help="labels split to evaluate (default: test)")
    p.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated: {','.join(SYSTEMS)}")
    p.add_argument("--model", default=None, help="sentence-transformers id or folder "
                   "(default: the bundled all-MiniLM-L6-v2)")
    p.add_argument("--sparse-model", default=None, help="the learned sparse model: a folder or id (default: the "
                   "bundled SPLADE-tiny), e.g. one fine-tuned with --family sparse")
    p.add_argument("--store", default=None, help="cache file (default: $RANKSCOPE_STORE or the user cache dir)")
    p.add_argument("--recompute", action="store_true",
                   help="ignore cached runs, metrics and λ (document embeddings still come from the store)")
    p.add_argument("--json", default=None, help="write metrics, λ and seconds here")
    cli.engine_arg(p)
    args = p.parse_args(argv)

    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in SYSTEMS]
    if not systems or unknown:
        p.error(f"unknown system(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(SYSTEMS)}")

    ds = load_dataset(args.dataset)
    for w in ds.report.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if args.split not in ds.qrels:
        p.error(f"no split {args.split!r} in {ds.name} (it has: {', '.join(ds.splits) or 'none'})")
    store = CountingStore(args.store or default_store_path(), recompute=args.recompute)
    engine = open_engine(args.engine, allow_insecure_token=args.allow_insecure_token)
    ws = Workspace(ds, store, model=args.model, engine=engine, sparse_model=args.sparse_model)
    print(f"{ds.name}: {len(ds.docs):,} documents, {len(ds.split_queries(args.split)):,} {args.split} "
          f"queries; store {store.path}{' (runs, metrics and λ recomputed)' if args.recompute else ''}")

    setup: dict[str, float] = {}
    # ranx compiles its metrics (numba) on first use: do it here, not inside the first system's time
    _, setup["metrics warm-up"] = timed(lambda: evaluate_run({"q": [("d", 1.0), ("e", 0.5)]}, {"q": {"d": 1}}))
    _, setup["bm25 index"] = timed(lambda: ws.bm25)
    if any(s != "bm25" for s in systems):
        _, setup["dense index"] = timed(ws.build_dense)
    if SPLADE in systems:
        _, setup["sparse index"] = timed(lambda: ws.sparse)
        emb = f" ({store.emb_cached:,} of {store.emb_asked:,} document embeddings from the store)"
    else:
        emb = ""
    evals, results, seconds, provenance = {}, {}, {}, {}
    for s in systems:
        store.reset()
        evals[s], seconds[s] = timed(lambda s=s: ws.evaluate(s, args.split))
        provenance[s] = store.provenance()
        results[s] = {m: evals[s].mean[m] for m in TABLE_METRICS if m in evals[s].mean}

    base = systems[0]
    marks = significance_marks(evals, base)
    print()
    print(cli.format_table(results, marks))
    if len(systems) > 1:
        print(f"{SIGNIFICANT} p < {SIGNIFICANCE_LEVEL:g} against {label(base)} (paired permutation test)")
    intervals = {s: {m: [evals[s].interval(m).low, evals[s].interval(m).high] for m in results[s]} for s in systems}
    against = {}
    for s in systems:
        line = f"{label(s)}: {PRIMARY} {evals[s].mean[PRIMARY]:.4f} {interval_text(evals[s].interval(PRIMARY))}"
        if s != base:
            c = compare(evals[base], evals[s], PRIMARY)
            against[s] = {"delta": c.delta, "interval": [c.interval.low, c.interval.high], "p": c.p_value}
            line += f"; against {label(base)}: Δ {c.delta:+.4f} {interval_text(c.interval)} (p {c.p_value:.4f})"
        print(line)
    weights = {s: [{"name": w.name, "value": w.value, "how": w.how} for w in ws.system(s).weights(ws, args.split)]
               for s in systems if s != HYBRID}  # the hybrid's λ is the line below
    for s, ws_ in weights.items():
        for w in ws_:
            print(f"{label(s)}: {w['name']} = {shown(w['value'])} ({w['how']})")
    lam = None
    if "hybrid" in systems:
        lam = CLEAR.lambda_for(ws, args.split)
        line = f"hybrid λ_test = {shown(lam.value)} ({lam.how}"
        if lam.grid:
            score = dict(lam.grid).get(lam.value)
            line += f"; grid of {len(lam.grid)} values {min(g for g, _ in lam.grid):g}..{max(g for g, _ in lam.grid):g}"
            line += f", train nDCG@10 {score:.4f} at λ_test" if score is not None else ""
        print(line + ")")
    bridges = None
    if {BM25, DENSE, SPLADE} <= set(systems):
        bridges = vocabulary_bridges(ws, args.split)
        print(f"vocabulary mismatch (a relevant document in dense's top {Thresholds.top}, beyond BM25's "
              f"{Thresholds.low}): {bridges['queries']} queries; SPLADE ranks such a document in its top "
              f"{Thresholds.top} for {bridges['bridged']} of them ({bridges['pairs_bridged']} of "
              f"{bridges['pairs']} query-document pairs)")
    print()
    print("setup seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in setup.items()) + emb)
    print("evaluate seconds: " + ", ".join(f"{s} {seconds[s]:.2f} ({provenance[s]})" for s in systems))

    out = {"dataset": ds.name, "split": args.split, "metrics": results, "intervals": intervals,
           "against_first": against, "weights": weights, "sparse_model": args.sparse_model,
           "significant": marks, "seconds": {**setup, **seconds}, "provenance": provenance,
           "vocabulary_bridges": bridges,
           "lambda": {"value": lam.value, "how": lam.how, "grid": lam.grid} if lam else None}
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
