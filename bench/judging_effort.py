#!/usr/bin/env python
"""How many judgments does each judging order need before the judged queries tell the systems
apart as all the labels do, and before λ tuned on them is as good as λ tuned on all?

    python bench/judging_effort.py [--sets demo,scifact,nfcorpus,cranfield] [--strategies ...]
                                   [--depth 10] [--store FILE] [--json FILE]

A simulated judge answers each (query, document) pair with the data set's test label (0 where the
pair has none). On every data set (the bundled demo; the shared SciFact, NFCorpus and Cranfield,
skipped where ``../shared`` is absent), with the default encoder, the systems on show are nine:
BM25 (the app's k1 0.9, b 0.4, and Robertson's k1 1.2, b 0.75), dense (flat, int8 scalar-quantized,
PCA to 128 dimensions), learned sparse (SPLADE), the CLEAR hybrid, RRF and the weighted sum. Each
strategy of ``retrieval.judging.order`` grades the systems' depth-10 pools of the test queries, one
pair at a time, until every pooled pair is graded; after every grade the systems are evaluated on
the grades so far as the app does (nDCG@10 over the queries with a relevant grade, unjudged
documents not relevant).

* **to τ 0.9**: the judgments after which the systems' order by nDCG@10 agrees with their order on
  all the labels at Kendall's τ ≥ 0.9 and stays there for every later grade (τ-b, as Voorhees uses
  it for "the same ranking of systems", "Variations in relevance judgments and the measurement of
  retrieval effectiveness", IP&M 36(5), 2000).
* **to λ**: the judgments after which the CLEAR hybrid's λ tuned on the judged queries (the best of
  the query-max grid on the grades so far; λ = 1 before any) scores within 0.005 nDCG@10 (on all
  the labels) of λ tuned on all the labels, and stays there.

Judgments are counted as a share of the pool too. The ratio is each strategy's judgments to τ 0.9
over depth pooling's (queries in file order, each query's whole pool). Last line:
``judgments_to_tau90_ratio_vs_depth_pooling=<x> judgments_to_lambda=<n>`` for the app's order
(``order.DEFAULT``): the worst data set's ratio, and its largest judgments to λ.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

from _common import DEMO, SHARED, recorded, store_arg, write_json  # first: it puts the checkout on sys.path
from retrieval import Store, Workspace, load_dataset
from retrieval.evaluation.measures import evaluate_run, paired_permutation_p
from retrieval.evaluation.metrics import SIGNIFICANCE_LEVEL
from retrieval.index.bm25_index import BM25Index
from retrieval.judging.judgments import top_ids
from retrieval.judging.order import DEFAULT, STRATEGIES, make
from retrieval.store import default_store_path
from retrieval.systems import BM25, DENSE, HYBRID, RRF, SPLADE, WSUM
from retrieval.systems.clear_lambda import LABEL_FREE_LAMBDA, QUERY_MAX_GRID
from retrieval.systems.fusion import rank_candidates

SETS = {"demo": DEMO, "scifact": SHARED / "scifact", "nfcorpus": SHARED / "nfcorpus",
        "cranfield": SHARED / "cranfield"}
TAU = 0.9
PCA_DIMS = 128  # the PCA variant's dimensions (half the encoder's, if fewer)
SHUFFLES = 10  # query orders per strategy: the file's and seeded shuffles
LAMBDA_TOLERANCE = 0.005


def systems(ws: Workspace, queries: dict[str, str]) -> dict:
    """The nine systems' runs of the test queries (module docstring)."""
    runs = {name: ws.run(name, "test") for name in (BM25, DENSE, SPLADE, HYBRID, RRF, WSUM)}
    runs["dense int8"] = ws.with_index("sq8").run(DENSE, "test")
    runs[f"dense pca{PCA_DIMS}"] = ws.with_index("flat", min(PCA_DIMS, ws.encoder.dim // 2)).run(DENSE, "test")
    other = BM25Index(ws.corpus.doc_ids, ws.corpus.texts, k1=1.2, b=0.75, tokenizer=ws.bm25.tokenizer)
    runs["bm25 k1 1.2 b 0.75"] = other.search(queries, 100)
    return runs


class Judged:
    """nDCG@10 of many runs on the grades so far, updated one grade at a time: each run's DCG per
    query, each query's ideal DCG from its relevant grades (linear gain, as ranx's ndcg)."""

    def __init__(self, runs: dict[str, dict], query_ids: list[str], k: int = 10):
        self.names, self.k = list(runs), k
        self.col = {q: i for i, q in enumerate(query_ids)}
        self.hits: dict[tuple[str, str], list[tuple[int, float]]] = {}
        for r, run in enumerate(runs.values()):
            for q in query_ids:
                for rank, doc in enumerate(top_ids(run, q, k), 1):
                    self.hits.setdefault((q, doc), []).append((r, 1.0 / np.log2(rank + 1)))
        self.dcg = np.zeros((len(runs), len(query_ids)))
        self.idcg = np.zeros(len(query_ids))
        self.rel: dict[str, list[int]] = {}
        self._ideal = 1.0 / np.log2(np.arange(2, k + 2))

    def record(self, q: str, doc: str, grade: int) -> bool:
        """Note a grade; whether it changed anything (only relevant grades do)."""
        if grade <= 0 or q not in self.col:
            return False
        c = self.col[q]
        for r, disc in self.hits.get((q, doc), ()):
            self.dcg[r, c] += grade * disc
        rel = sorted(self.rel.setdefault(q, []) + [grade], reverse=True)
        self.rel[q] = rel
        self.idcg[c] = float(np.dot(rel[:self.k], self._ideal[:len(rel[:self.k])]))
        return True

    def means(self) -> np.ndarray:
        on = self.idcg > 0
        if not on.any():
            return np.zeros(len(self.names))
        return (self.dcg[:, on] / self.idcg[on]).mean(axis=1)

    def per_query(self) -> np.ndarray:
        """nDCG@10 of every run (rows) on every query with a relevant grade (columns)."""
        on = self.idcg > 0
        return self.dcg[:, on] / self.idcg[on]


def separable(per_query: np.ndarray) -> np.ndarray:
    """Which pairs of systems (i < j) all the labels tell apart: the paired permutation test of
    their per-query nDCG@10 at p < 0.05 (``measures.paired_permutation_p``, as the app's tables)."""
    n = per_query.shape[0]
    out = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for j in range(i + 1, n):
            out[i, j] = paired_permutation_p(per_query[j] - per_query[i]) < SIGNIFICANCE_LEVEL
    return out


def tau_separable(est: np.ndarray, ref: np.ndarray, sep: np.ndarray) -> float:
    """Kendall's τ over the pairs the labels tell apart (``sep``): (concordant − discordant) over
    their number, a tie in ``est`` neither; 1.0 when no pair is separable."""
    i, j = np.nonzero(sep)
    if not len(i):
        return 1.0
    sign = np.sign(est[i] - est[j]) * np.sign(ref[i] - ref[j])
    return float(sign.sum() / len(i))


def simulate(order, runs: dict, lam_runs: dict, qrels: dict, query_ids: list[str], full: np.ndarray,
             sep: np.ndarray) -> dict:
    """Grade every pooled pair in the judging ``order``; the judgments to τ 0.9 and to λ."""
    n_sys = len(runs)
    judged = Judged({**runs, **lam_runs}, query_ids)
    lam_values = list(lam_runs)
    full_sys, full_lam = full[:n_sys], full[n_sys:]
    best_lam = full_lam[int(np.argmax(full_lam))]
    taus, sep_taus, lam_gaps = [], [], []
    tau, sep_tau, gap = 0.0, 0.0, best_lam - full_lam[lam_values.index(LABEL_FREE_LAMBDA)]
    while (pair := order.next()) is not None:
        grade = int(qrels.get(pair[0], {}).get(pair[1], 0))
        order.record(pair, grade)
        if judged.record(pair[0], pair[1], grade):
            m = judged.means()
            t = kendalltau(m[:n_sys], full_sys).statistic
            tau = 0.0 if np.isnan(t) else float(t)
            sep_tau = tau_separable(m[:n_sys], full_sys, sep)
            lam_scores = m[n_sys:]
            chosen = int(np.argmax(lam_scores))  # the smaller λ on a tie: the grid is ascending
            gap = float(best_lam - full_lam[chosen])
        taus.append(tau)
        sep_taus.append(sep_tau)
        lam_gaps.append(gap)
    reached = np.array(taus) >= TAU
    return {"pooled": len(taus), "to_tau": settle(reached), "to_tau_first": first(reached),
            "to_tau_separable": settle(np.array(sep_taus) >= TAU),
            "to_lambda": settle(np.array(lam_gaps) <= LAMBDA_TOLERANCE), "final_tau": taus[-1] if taus else 0.0}


def first(ok: np.ndarray) -> int | None:
    """Judgments after which ``ok`` first holds (None: never)."""
    hits = np.flatnonzero(ok)
    return int(hits[0]) + 1 if len(hits) else None


def settle(ok: np.ndarray) -> int | None:
    """Judgments after which ``ok`` holds for every later grade (0: from the start; None: not even
    at the end)."""
    if not len(ok) or not ok[-1]:
        return None
    failing = np.flatnonzero(~ok)
    return int(failing[-1]) + 1 if len(failing) else 0


def inputs(folder: Path, store: Store, model=None) -> dict:
    """The systems' runs of the test queries (top 10), the hybrid's runs at every λ of the
    query-max grid, the test labels and the query ids in the queries file's order."""
    from lambda_labels import candidates  # the hybrid's candidates in the query-max space, as there

    ds = load_dataset(folder)
    ws = Workspace(ds, store, model=model)
    ws.build_dense()
    qrels = ds.qrels["test"]
    queries = {q: t for q, t in ds.split_queries("test").items() if q in qrels}
    query_ids = list(queries)
    runs = {name: {q: run.get(q, [])[:10] for q in query_ids} for name, run in systems(ws, queries).items()}
    _, norm = candidates(ws, queries)
    lam_runs = {lam: rank_candidates(norm, lam, ds.doc_ids, 10) for lam in QUERY_MAX_GRID}
    return {"runs": runs, "lam_runs": lam_runs, "qrels": qrels, "query_ids": query_ids}


def measure(name: str, data: dict, strategies: list[str], depth: int, shuffles: int = SHUFFLES, order=make) -> dict:
    """Every strategy simulated on one data set's ``inputs``, once with the queries in file order and
    on ``shuffles`` − 1 seeded shuffles of them (``order``: strategy -> judging order)."""
    runs, lam_runs, qrels, query_ids = data["runs"], data["lam_runs"], data["qrels"], data["query_ids"]
    everything = Judged({**runs, **lam_runs}, query_ids)  # every figure on all the labels
    for q, docs in qrels.items():
        for d, g in docs.items():
            everything.record(q, d, int(g))
    full = everything.means()
    ranx = evaluate_run(runs[BM25], {q: qrels[q] for q in query_ids}).mean["ndcg@10"]
    assert abs(ranx - full[0]) < 1e-6, (ranx, full[0])  # the incremental nDCG is ranx's
    sep = separable(everything.per_query()[:len(runs)])
    out = {"queries": len(query_ids), "systems": dict(zip(runs, np.round(full[:len(runs)], 4).tolist())),
           "separable_pairs": int(sep.sum()), "pairs": len(runs) * (len(runs) - 1) // 2,
           "lambda_all": float(QUERY_MAX_GRID[int(np.argmax(full[len(runs):]))]), "strategies": {}}
    orders = [query_ids] + [random.Random(seed).sample(query_ids, len(query_ids)) for seed in range(1, shuffles)]
    for strategy in strategies:
        start = time.perf_counter()
        each = [simulate(order(strategy, runs, ids, depth), runs, lam_runs, qrels, ids, full, sep) for ids in orders]
        out["strategies"][strategy] = {"pooled": each[0]["pooled"], "each": each,
                                       **{key: median([e[key] for e in each], each[0]["pooled"])
                                          for key in ("to_tau", "to_tau_first", "to_tau_separable", "to_lambda")}}
        print(f"  {name} {strategy}: " + ", ".join(f"{key} {out['strategies'][strategy][key]}" for key in
                                                   ("to_tau", "to_tau_separable", "to_lambda"))
              + f" ({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    return out


def median(values: list[int | None], never: int) -> int:
    """The median judgments over the query orders, "never" counted as the whole pool."""
    return int(np.median([never if v is None else v for v in values]))


def show(results: dict, strategies: list[str]) -> dict:
    """Print the tables; return DEFAULT's worst ratios over the data sets and its largest
    judgments to λ."""
    worst = {"to_tau": 0.0, "to_tau_first": 0.0, "to_tau_separable": 0.0, "to_lambda": 0}
    for name, res in results.items():
        pooled = res["strategies"]["depth"]["pooled"]
        print(f"\n{name}: {res['queries']} test queries, {pooled:,} pooled pairs (depth 10, {len(res['systems'])} "
              f"systems); {res['separable_pairs']} of {res['pairs']} pairs of systems told apart by all the labels; "
              f"λ on all labels {res['lambda_all']:g}")
        print("  nDCG@10 on all labels: " + ", ".join(f"{s} {v:.4f}" for s, v in res["systems"].items()))
        print(f"  {'order':<8}{'to τ 0.9':>15}{'ratio':>7}{'first τ 0.9':>15}{'ratio':>7}"
              f"{'to τ 0.9, told apart':>22}{'ratio':>7}{'to λ ±0.005':>15}")
        base = res["strategies"]["depth"]
        for s in strategies:
            r = res["strategies"][s]
            ratios = {key: r[key] / max(1, base[key]) for key in ("to_tau", "to_tau_first", "to_tau_separable")}
            apart, once = r["to_tau_separable"], r["to_tau_first"]
            print(f"  {s:<8}{r['to_tau']:>9,} ({r['to_tau'] / pooled:>3.0%}){ratios['to_tau']:>7.2f}"
                  f"{once:>9,} ({once / pooled:>3.0%}){ratios['to_tau_first']:>7.2f}"
                  f"{apart:>16,} ({apart / pooled:>3.0%}){ratios['to_tau_separable']:>7.2f}"
                  f"{r['to_lambda']:>9,} ({r['to_lambda'] / pooled:>3.0%})")
            if s == DEFAULT:
                worst = {**{key: max(worst[key], ratio) for key, ratio in ratios.items()},
                         "to_lambda": max(worst["to_lambda"], r["to_lambda"])}
        for s in strategies[1:]:  # the spread over the query orders, each order's ratio to depth pooling in it
            cells = []
            for key, label in (("to_tau", "to τ 0.9"), ("to_tau_separable", "told apart"), ("to_lambda", "to λ")):
                mine = [pooled if e[key] is None else e[key] for e in res["strategies"][s]["each"]]
                theirs = [pooled if e[key] is None else e[key] for e in base["each"]]
                ratio = [m / max(1, t) for m, t in zip(mine, theirs)]
                cells.append(f"{label} {min(mine):,}–{max(mine):,} judgments, ratio {min(ratio):.2f}–{max(ratio):.2f}")
            print(f"  {s:<8} over {len(mine)} query orders: " + "; ".join(cells))
    print("\nJudgments: the median over the file's query order and seeded shuffles (their range below each "
          "table, with each order's ratio to depth pooling in the same order); a criterion never met counts as "
          "the whole pool.")
    return worst


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sets", default=",".join(SETS), help="data sets (of: " + ", ".join(SETS) + ")")
    p.add_argument("--strategies", default=",".join(STRATEGIES), help="judging orders (depth is the baseline)")
    p.add_argument("--depth", type=int, default=10, help="pool depth: each system's top k")
    p.add_argument("--shuffles", type=int, default=SHUFFLES, help="query orders per strategy (the file's, then "
                                                                   "seeded shuffles)")
    store_arg(p, "the usual store; embeddings and runs reused")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    strategies = [s for s in args.strategies.split(",") if s]
    if "depth" not in strategies:
        strategies.insert(0, "depth")
    store = Store(args.store or default_store_path())
    results = {}
    for name in args.sets.split(","):
        if not SETS[name].exists():
            print(f"{name}: {SETS[name]} is absent, skipped", file=sys.stderr)
            continue
        results[name] = measure(name, inputs(SETS[name], store), strategies, args.depth, args.shuffles)
    worst = show(results, strategies)
    write_json(args.json, results)
    print(f"\njudgments_to_tau90_ratio_vs_depth_pooling={worst['to_tau']:.3f} "
          f"judgments_to_lambda={worst['to_lambda']} "
          f"judgments_to_tau90_told_apart_ratio_vs_depth_pooling={worst['to_tau_separable']:.3f}")


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
