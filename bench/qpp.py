#!/usr/bin/env python
"""Query performance prediction, measured: how well each predictor of ``retrieval.qpp`` orders a labelled
corpus's queries by how well each system actually does on them, each correlation with its interval.

    python bench/qpp.py [--sets demo,scifact,nfcorpus,cranfield] [--systems bm25,dense,hybrid]
                        [--k 100] [--resamples 1000] [--store FILE] [--json FILE]

For each set's test split and each system: the actual nDCG@10 of every query (``Workspace.evaluate``, equal
to trec_eval's), and every predictor's value for it (``retrieval.qpp.predict``): the pre-retrieval ones
(avg/max IDF, avg/max SCQ), the post-retrieval ones on that system's own list (NQC, WIG, clarity, the top
documents' embedding coherence), the systems' disagreement, and the two combinations — label-free (the
default: equal-weight mean of the predictors' oriented percentiles) and fitted (ridge regression on judged
queries, cross-fitted: each query predicted by a model fitted on the other folds, so no query is scored by
a model that saw its label). Kendall's τ-b and Spearman's ρ between the prediction and the actual nDCG@10,
each with a 95% percentile bootstrap interval over queries (the queries resampled with replacement, seeded).
A predictor whose literature direction is "higher means harder" (disagreement) is negated first, so a
positive correlation always means it predicts well.

Nothing is tuned here: the predictors' parameters are the papers' (NQC k = 100, WIG k = 5, clarity λ = 0.6),
the label-free combination has no parameter, and the fitted one never sees the label of the query it is
scored on.

What it is compared with: NQC on BM25 over TREC news collections reaches Kendall τ about 0.35–0.45 (Shtok et
al., ACM TOIS 2012, Table 3); for neural rankers the same predictors do markedly worse (Faggioli et al.,
"Query Performance Prediction for Neural IR: Are We There Yet?", ECIR 2023). The figures here are on BEIR
test sets with few relevant documents per query (SciFact: about one), where nDCG@10 per query is close to a
binary outcome and correlations are bounded accordingly.

Last line: ``qpp_tau_min=<x> qpp_tau_median=<y>``: Kendall's τ of the combined predictor the app uses on a
labelled corpus (the fitted one, cross-fitted), the smallest and the median over the corpora × systems
measured.
"""
from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

from _common import DEMO, SHARED, chosen_sets, machine, recorded, timed, write_json  # first: the checkout on sys.path
from retrieval import Workspace, load_dataset
from retrieval.store import Store, default_store_path

SETS = {"demo": DEMO, "scifact": SHARED / "scifact", "nfcorpus": SHARED / "nfcorpus", "cranfield": SHARED / "cranfield"}
SPLIT = "test"
METRIC = "ndcg@10"
SEED = 0
LABEL_FREE, FITTED = "combined (label-free)", "combined (fitted, cross-fitted)"


def correlations(pred: np.ndarray, actual: np.ndarray, resamples: int, rng: np.random.Generator) -> dict:
    """``{"tau": [τ, low, high], "rho": [ρ, low, high]}``: Kendall's τ-b and Spearman's ρ of ``pred`` with
    ``actual``, each with its 95% percentile bootstrap interval over the queries (a resample whose either
    side is constant has no correlation and is left out)."""
    from scipy.stats import kendalltau, spearmanr

    def both(p: np.ndarray, a: np.ndarray) -> tuple[float, float]:
        if np.ptp(p) == 0 or np.ptp(a) == 0:
            return float("nan"), float("nan")
        return float(kendalltau(p, a).statistic), float(spearmanr(p, a).statistic)

    tau, rho = both(pred, actual)
    n = len(pred)
    draws = np.array([both(pred[i], actual[i]) for i in (rng.integers(0, n, n) for _ in range(resamples))])
    out = {}
    for j, (name, value) in enumerate((("tau", tau), ("rho", rho))):
        kept = draws[:, j][np.isfinite(draws[:, j])]
        low, high = (np.percentile(kept, [2.5, 97.5]) if len(kept) else (float("nan"), float("nan")))
        out[name] = [value, float(low), float(high)]
    return out


def predictor_values(predictions, system: str, ids: list[str]) -> dict[str, np.ndarray]:
    """``{predictor label: values over ids, oriented so higher = predicted easier}`` for one system (NaN where
    a query lacks it)."""
    from retrieval.qpp.predictors import PREDICTORS

    by_id = predictions.by_id()
    sign = {p.key: (1.0 if p.higher_means == "easier" else -1.0) for p in PREDICTORS}
    out: dict[str, np.ndarray] = {}
    for p in PREDICTORS:
        def value(q, key=p.key, kind=p.kind):
            row = by_id[q]
            if kind == "pre":
                return row.pre.get(key, np.nan)
            if kind == "agreement":
                return row.disagreement
            return row.post.get(system, {}).get(key, np.nan)
        out[p.label] = sign[p.key] * np.array([value(q) for q in ids], dtype=float)
    return out


def measure(name: str, path, systems: list[str], k: int, resamples: int, store_path: str) -> dict:
    """One set: per system, every predictor's and both combinations' correlations with nDCG@10."""
    from retrieval.qpp.predict import predict

    ds = load_dataset(str(path))
    ws = Workspace(ds, Store(store_path))
    ids = sorted(ds.split_queries(SPLIT))
    actual = {s: ws.evaluate(s, SPLIT).per_query[METRIC] for s in systems}
    free, free_s = timed(lambda: predict(ws, ids, systems, k=k, labels="none"))
    fitted, _ = timed(lambda: predict(ws, ids, systems, k=k, labels="auto"))
    rng = np.random.default_rng(SEED)
    out: dict = {"queries": len(ids), "predict_seconds": round(free_s, 2), "systems": {},
                 "combinations": {s: vars(fitted.combinations[s]) for s in systems if s in fitted.combinations}}
    for s in systems:
        a = np.array([actual[s].get(q, 0.0) for q in ids], dtype=float)
        columns = predictor_values(free, s, ids)
        columns[LABEL_FREE] = np.array([free.by_id()[q].predicted[s] for q in ids], dtype=float)
        columns[FITTED] = np.array([fitted.by_id()[q].predicted[s] for q in ids], dtype=float)
        rows = {}
        for label, values in columns.items():
            have = np.isfinite(values)
            if have.sum() < 3:
                continue
            rows[label] = {"queries": int(have.sum()), **correlations(values[have], a[have], resamples, rng)}
        out["systems"][s] = {"mean_ndcg10": float(a.mean()), "predictors": rows}
    return out


def show(results: dict) -> None:
    for name, r in results.items():
        print(f"\n{name}: {r['queries']} test queries (predicted in {r['predict_seconds']} s)")
        for s, sr in r["systems"].items():
            print(f"  {s} (mean nDCG@10 {sr['mean_ndcg10']:.3f}; fitted: {r['combinations'].get(s, {}).get('how')})")
            for label, row in sr["predictors"].items():
                t, rh = row["tau"], row["rho"]
                print(f"    {label:<34} τ {t[0]:+.3f} [{t[1]:+.3f}, {t[2]:+.3f}]   ρ {rh[0]:+.3f} "
                      f"[{rh[1]:+.3f}, {rh[2]:+.3f}]   ({row['queries']} queries)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sets", default="demo,scifact,nfcorpus,cranfield", help=f"comma-separated, of {', '.join(SETS)}")
    p.add_argument("--systems", default="bm25,dense,hybrid")
    p.add_argument("--k", type=int, default=100, help="depth of each system's list the predictors read")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples of the queries")
    p.add_argument("--store", default=None, help="cache file for embeddings and runs (default: the usual store)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    sets = chosen_sets(p, args.sets, SETS)
    if sets is None:
        return 2  # nothing recorded
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    print(f"machine: {machine()}")
    store = args.store or str(default_store_path())
    results = {s: measure(s, SETS[s], systems, args.k, args.resamples, store) for s in sets}
    show(results)
    write_json(args.json, {"machine": machine(), "sets": results})
    taus = [sr["predictors"][FITTED]["tau"][0] for r in results.values() for sr in r["systems"].values()
            if FITTED in sr["predictors"]]
    print(f"qpp_tau_min={min(taus):.4f} qpp_tau_median={statistics.median(taus):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
