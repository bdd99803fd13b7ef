#!/usr/bin/env python
"""What explaining a dense hit and a CLEAR hybrid hit costs, per hit, beside the query's own search.

    python bench/explain_cost.py [DATASET ...] [--queries 20] [--k 10] [--model ID_OR_FOLDER] [--store FILE]
        [--json FILE]

For each data set (default: the bundled demo and the shared SciFact, skipped where absent) with the
default encoder (all-MiniLM-L6-v2, offline), over its first ``--queries`` test queries:

* search — the query typed in Search ("about: " and the query, as ``search_path.py`` types one, with
  this run's id after it: never in the store, so it is encoded) searched as the view searches it (a
  fresh ``Probe``: the query encoded, FAISS searched; for the hybrid BM25 and the candidates' union
  scored too), the best of 3;
* dense, cold — its dense top ``--k`` explained with nothing kept (``retrieval.systems.dense_why``: the
  process's memory emptied and the store not read): the n + 1 query encodings of occlusion, every
  passage's encoding, the store's writes;
* dense, new query — the same documents explained for another query (the typed one): the passages'
  vectors are in the store now, so only occlusion's n + 1 query encodings and the dot products are
  computed (a document already explained for any query);
* dense, warm — the same explained again after the process's memory is emptied: read back from the store;
* dense, in memory — the same once more: the process's memory answers;
* hybrid, cold and warm — the CLEAR top ``--k`` split (``hybrid_why``), its dense parts cold, then from the store.

Prints, per data set, milliseconds per hit (the mean over queries of a query's time over its hits) and
the ratio of a query's explanation time (all k hits) to its search time; the CPU it ran on (its model
name and its AVX-512 and AMX flags, from ``lscpu``). The last line is the mean over data sets of the
dense cold and warm figures: ``explain_ms_per_hit=<cold> explain_cached_ms_per_hit=<warm>``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import DEMO, SHARED, json_arg, machine, recorded, store_arg, write_json  # first: the checkout on sys.path


def cpu_words() -> str:
    """The CPU's model name and its AVX-512 and AMX flags, from ``lscpu`` (its model name alone where it has none)."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "lscpu unavailable"
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    name = fields.get("Model name", "unknown").strip()
    flags = sorted(f for f in fields.get("Flags", "").split() if f.startswith(("avx512", "amx")))
    return f"{name}; AVX-512/AMX flags: {' '.join(flags) if flags else 'none'}"


def per_hit(seconds: list[float], hits: list[int]) -> float:
    """The mean over queries of a query's milliseconds per hit."""
    return statistics.fmean(1000 * s / max(n, 1) for s, n in zip(seconds, hits))


def ratio(seconds: list[float], search: list[float]) -> float:
    """The mean over queries of (explaining its k hits) / (searching it)."""
    return statistics.fmean(s / max(t, 1e-9) for s, t in zip(seconds, search))


RUN = f"run {os.getpid()} {int(time.time())}"  # makes the typed query new to any store, however often the bench runs
KINDS = ("dense_search", "hybrid_search", "dense_cold", "dense_new_query", "dense_warm", "dense_memory",
         "hybrid_cold", "hybrid_warm")


def seconds(fn) -> float:
    """The seconds one call of ``fn`` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def one_query(ws, text: str, k: int) -> tuple[dict[str, float], int]:
    """One query's seconds of each kind (the module docstring), and how many hits it explained."""
    from functools import partial

    from retrieval.systems import builtin
    from retrieval.systems.base import Probe
    from retrieval.systems.dense_why import explain_dense, forget
    from retrieval.systems.hybrid import make
    from retrieval.systems.hybrid_why import explain_split

    other = f"about: {text} ({RUN})"  # typed, and new to this run: neither its vector nor its explanations kept

    def search(key: str) -> tuple[float, list[int]]:
        system = builtin(key)
        best = min(seconds(lambda: system.one(ws, Probe(ws, other, ws.depth), k, None)) for _ in range(3))
        return best, [ws.doc_row[d] for d, _ in system.one(ws, Probe(ws, text, ws.depth), k, None)]

    out: dict[str, float] = {}
    out["dense_search"], rows = search("dense")
    out["hybrid_search"], h_rows = search("hybrid")
    h = make(ws, "clear", None)
    qvec = Probe(ws, text, ws.depth).vector
    other_vec = Probe(ws, other, ws.depth).vector
    steps = [("dense_cold", True, partial(explain_dense, ws, text, rows, qvec, cached=False)),
             ("dense_new_query", True, partial(explain_dense, ws, other, rows, other_vec)),
             ("dense_warm", True, partial(explain_dense, ws, text, rows, qvec)),
             ("dense_memory", False, partial(explain_dense, ws, text, rows, qvec)),
             ("hybrid_cold", True, partial(explain_split, ws, h, h.lam, text, h_rows, qvec, cached=False)),
             ("hybrid_warm", True, partial(explain_split, ws, h, h.lam, text, h_rows, qvec))]
    for key, empty_memory, fn in steps:
        if empty_memory:
            forget()
        out[key] = seconds(fn)
    return out, len(rows)


def measure(ws, queries: dict[str, str], k: int) -> dict[str, float]:
    """The figures of one data set (the module docstring)."""
    times: dict[str, list[float]] = {key: [] for key in KINDS}
    hits: list[int] = []
    for text in queries.values():
        took, n = one_query(ws, text, k)
        for key, value in took.items():
            times[key].append(value)
        hits.append(n)
    out: dict[str, float] = {"queries": len(queries), "k": k,
                             "dense_search_ms": 1000 * statistics.fmean(times["dense_search"]),
                             "hybrid_search_ms": 1000 * statistics.fmean(times["hybrid_search"])}
    for key in KINDS[2:]:
        search = times["hybrid_search" if key.startswith("hybrid") else "dense_search"]
        out[f"{key}_ms_per_hit"] = per_hit(times[key], hits)
        out[f"{key}_to_search"] = ratio(times[key], search)
    return out


def show(name: str, n_docs: int, split: str, k: int, r: dict[str, float]) -> None:
    """One data set's figures, in words."""
    def cost(key: str) -> str:
        return f"{r[f'{key}_ms_per_hit']:.2f} ms/hit ({r[f'{key}_to_search']:.2f}× the search)"

    print(f"\n{name}: {n_docs:,} documents, {r['queries']:.0f} {split} queries, top {k} explained")
    print(f"  search:  dense {r['dense_search_ms']:.1f} ms, hybrid {r['hybrid_search_ms']:.1f} ms a query")
    print(f"  dense:   cold {cost('dense_cold')}; a new query over kept passages {cost('dense_new_query')}")
    print(f"           from the store {cost('dense_warm')}; in memory {cost('dense_memory')}")
    print(f"  hybrid:  cold {cost('hybrid_cold')}; from the store {cost('hybrid_warm')}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("datasets", nargs="*", default=[str(DEMO), str(SHARED / "scifact")],
                   help="BEIR folders (default: the demo and the shared SciFact, skipped where absent)")
    p.add_argument("--queries", type=int, default=20, help="test queries per data set")
    p.add_argument("--k", type=int, default=10, help="hits explained per query (Search's top 10)")
    p.add_argument("--model", default=None, help="encoder id or folder (default: all-MiniLM-L6-v2)")
    store_arg(p, "a fresh temporary store")
    json_arg(p)
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from retrieval import Workspace
    from retrieval.data.readers import load_dataset
    from retrieval.index.encoder import load_encoder
    from retrieval.store import Store

    print(f"machine: {machine()}")
    print(f"cpu: {cpu_words()}; load average {os.getloadavg()[0]:.1f} at the start (other processes share the cores)")
    encoder = load_encoder(args.model)
    print(f"encoder: {encoder.name} ({encoder.compute}), reads {encoder.max_seq_length} tokens of a document")
    folder = tempfile.mkdtemp(prefix="explain-cost-")
    store = Store(args.store or Path(folder) / "store.sqlite3")
    results: dict[str, dict[str, float]] = {}
    for path in args.datasets:
        if not Path(path).exists():
            print(f"{Path(path).name}: absent, skipped")
            continue
        ds = load_dataset(path)
        split = "test" if "test" in ds.qrels else ds.default_split()
        queries = dict(list(ds.split_queries(split).items())[:args.queries])
        ws = Workspace(ds, store, model=encoder)
        ws.build_dense()  # the corpus encoded (or read from the store) before anything is timed
        results[ds.name] = measure(ws, queries, args.k)
        show(ds.name, len(ds.docs), split, args.k, results[ds.name])
    store.close()
    if not results:
        print("no data set found", file=sys.stderr)
        return 1
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    write_json(args.json, {"cpu": cpu_words(), "machine": machine(), "encoder": encoder.name, "sets": results})
    cold = statistics.fmean(r["dense_cold_ms_per_hit"] for r in results.values())
    warm = statistics.fmean(r["dense_warm_ms_per_hit"] for r in results.values())
    known = statistics.fmean(r["dense_new_query_ms_per_hit"] for r in results.values())
    print(f"\nexplain_new_query_ms_per_hit={known:.2f}")
    print(f"explain_ms_per_hit={cold:.2f} explain_cached_ms_per_hit={warm:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
