"""History: every run the store holds, readable, and any two compared query by query; and the
encoders fine-tuned on a data set.

Runs are stored by ``Workspace.run`` keyed by (documents and queries, the split's queries, system,
parameters, depth), and listed by the data set's documents and queries (``Dataset.queries_hash``):
labels judged since leave them listed;
``list_runs`` reads them back with a one-line summary of their parameters, and ``compare_runs``
evaluates two of them on the same labels and tests the difference with the paired permutation
test of ``measures.compare``. An imported run's lists are its maker's: on a shared deployment a
viewer's history holds every built-in system's runs and its own imported ones (``Store.runs``).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.data.dataset import Dataset, Qrels
from retrieval.errors import UnknownRun
from retrieval.evaluation.measures import Comparison, compare, evaluate_run
from retrieval.sharing.owners import OPERATOR, Viewer
from retrieval.store import Store
from retrieval.stored_rows import left_out, run_row_problem
from retrieval.systems import BM25
from retrieval.systems.clear_lambda import shown


def list_runs(store: Store, dataset_hash: str | None = None, viewer: Viewer = OPERATOR) -> list[dict[str, Any]]:
    """Stored runs ``viewer`` sees (of the data set whose ``Dataset.queries_hash`` is ``dataset_hash``),
    newest first: key, data set, system, split, depth, parameters and a summary such as "dense ·
    all-MiniLM-L6-v2 · sq8 · 128 dims"."""
    models = {m["fingerprint"]: m["name"] for m in store.models()}
    datasets = {d["hash"]: d["name"] for d in store.datasets()}
    rows, damaged = [], []
    for r in store.runs(dataset_hash, viewer):
        problem = run_row_problem(r)
        if problem is not None:  # a row another program or a hand edit left: not listed, said once
            damaged.append(f"run {str(r.get('key'))[:16]!r}: {problem}")
            continue
        params = json.loads(r["params"])
        try:
            summary = params_summary(r["system"], params, models)
        except (AttributeError, TypeError, KeyError, ValueError):  # parameters of another shape than RankScope's
            damaged.append(f"run {r['key'][:16]!r}: its parameters are not of the shape RankScope writes")
            continue
        rows.append({"key": r["key"], "dataset": datasets.get(r["dataset"], r["dataset"][:12]),
                     "dataset_hash": r["dataset"], "system": r["system"], "split": r["split"], "k": r["k"],
                     "params": params, "summary": summary,
                     "created": r["created"],
                     "when": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["created"]))})
    left_out("runs", damaged)
    return rows


def params_summary(system: str, params: dict[str, Any], model_names: dict[str, str] | None = None) -> str:
    """A human-readable line for a run's parameters (model fingerprints shown by name)."""
    parts = [system]
    bm25 = params.get("bm25")
    if system == BM25 and bm25:
        parts.append(f"k1 {bm25.get('k1')}, b {bm25.get('b')}")
    if "model" in params:
        fp = params["model"]
        parts.append((model_names or {}).get(fp, f"model {fp[:12]}"))
    if "index" in params:
        parts.append(params["index"] + (f" · {params['dims']} dims" if params.get("dims") else ""))
    if "lambda" in params:
        parts.append(f"λ {shown(params['lambda'])}")
    if "imported" in params:
        parts.append(f"imported run {params['hash'][:12]}")
    return " · ".join(parts)


@dataclass
class RunComparison:
    """Run B against run A on one metric: the test, and per-query values sorted by |B − A|."""

    key_a: str
    key_b: str
    split: str
    comparison: Comparison
    per_query: list[dict[str, Any]]  # {"query", "a", "b", "delta"}, largest |delta| first

    @property
    def metric(self) -> str:
        return self.comparison.metric


def compare_runs(store: Store, key_a: str, key_b: str, qrels: Qrels, metric: str = "ndcg@10",
                 test: str = "permutation", split: str = "") -> RunComparison:
    """Evaluate two stored runs on ``qrels`` and compare them query by query (B − A)."""
    evals = []
    for key in (key_a, key_b):
        run = store.get_run(key)
        if run is None:
            raise KeyError(f"no run with key {key!r} in the store")
        if not set(run) & set(qrels):
            raise ValueError(f"run {key[:12]} has no query in common with these labels (another split?)")
        evals.append(evaluate_run(run, qrels, metrics=(metric,)))
    ev_a, ev_b = evals
    cmp = compare(ev_a, ev_b, metric, test=test)
    qa, qb = ev_a.per_query[metric], ev_b.per_query[metric]
    rows: list[dict[str, Any]] = [{"query": q, "a": qa[q], "b": qb[q], "delta": qb[q] - qa[q]} for q in qa if q in qb]
    rows.sort(key=lambda r: (-abs(r["delta"]), r["query"]))
    return RunComparison(key_a, key_b, split, cmp, rows)


def compare_stored(store: Store, dataset: Dataset, key_a: str, key_b: str, metric: str = "ndcg@10",
                   viewer: Viewer = OPERATOR) -> RunComparison:
    """Two stored runs of ``dataset`` that ``viewer`` sees compared on their split's labels:
    ``UnknownRun`` for a key the store does not hold for this data set (or another session's
    imported run), ``ValueError`` when the runs are of different or unlabelled splits."""
    runs = {r["key"]: r for r in list_runs(store, dataset.queries_hash, viewer)}
    for key in (key_a, key_b):
        if key not in runs:
            raise UnknownRun(key)
    split = runs[key_a]["split"]
    if runs[key_b]["split"] != split or split not in dataset.qrels:
        raise ValueError("compare two runs of the same labelled split")
    return compare_runs(store, key_a, key_b, dataset.qrels[split], metric, split=split)


@dataclass
class TrainedEncoder:
    """A fine-tuned model a finished training job left on disk: a dense encoder, or a learned sparse
    model (``family`` "sparse")."""

    job_id: str
    loss: str
    path: str
    family: str = "dense"


def trained_encoders(store: Store, dataset_hash: str, family: str = "dense") -> list[TrainedEncoder]:
    """Models of ``family`` ("dense" encoders, or "sparse" models) fine-tuned on this data set whose
    folder still exists, newest first (a job stored before families were kept trained a dense one)."""
    out = []
    for job in store.jobs():
        config = job.get("config")
        config = config if isinstance(config, dict) else {}
        if (job["status"] == "done" and job["dataset"] == dataset_hash and config.get("family", "dense") == family
                and job.get("model_path") and Path(job["model_path"], "modules.json").exists()):
            out.append(TrainedEncoder(job["id"], str(config.get("loss", "")), job["model_path"], family))
    return out
