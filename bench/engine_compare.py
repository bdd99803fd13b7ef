#!/usr/bin/env python
"""The in-process engine (bm25s + FAISS) and the Milvus engine side by side, on the same data, in one
run: quality (nDCG@10 of BM25, dense and the CLEAR hybrid; dense top-10 lists compared), load time,
search latency and peak memory.

    python bench/engine_compare.py [DATASET ...] [--engine milvus:PATH.db] [--queries 100]
        [--store FILE] [--no-eval] [--work DIR] [--max-seq-length N]

DATASET defaults to ``../shared/datasets/scifact`` and ``../shared/datasets/nfcorpus`` (test
split); any BEIR folder works, e.g. the 100,000-document corpus ``bench/scale.py`` writes (with
``--store`` set to its store, so its vectors are not encoded again, ``--max-seq-length`` as that run
cut its inputs, and ``--no-eval``).
``--engine`` defaults to Milvus Lite in a fresh ``WORK/<data set>.db`` (removed first, so the load
is measured); a ``milvus://HOST:PORT`` server is measured as it is (its collections are dropped
first).

Each engine runs in a process of its own (``--worker``), so its peak RSS is its own: load the data
set, BM25 into the engine (``Workspace.build_lexical``), the vectors (``build_dense``: taken from
the store, where the first engine's run put them; the encoding is not part of the comparison),
then ``--queries`` test queries one at a time through ``Workspace.search_one`` (the Search view's
call; every query encoded, one system per call; p50 / p95), then — unless ``--no-eval`` — nDCG@10
of each system on the test split (λ tuned on train where there is one), with no run cached in
the store. Then the same again in a new process: reopening what the engine holds.

Last line: ``bm25_ndcg_max_delta=<x> dense_top10_identical=<x> hybrid_ndcg_max_delta=<x>
search_p95_ratio=<x> load_ratio=<x>`` — deltas the largest over the data sets (Milvus − in-process,
absolute), the share of test queries whose dense top 10 is the same list, and Milvus over
in-process for the worst system's p95 and for the load (BM25 + vectors), the worst data set.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, SHARED, json_arg, percentile_ms, recorded  # first: it puts the checkout on sys.path
from retrieval.systems.hybrid import CLEAR

SYSTEMS = ("bm25", "dense", "hybrid")


def worker(folder: str, engine_spec: str, store_path: str, n_queries: int, evaluate: bool, reopen: bool,
           out: str, max_seq_length: int = 0) -> None:
    """One engine over one data set; writes its figures (and dense top-10 lists) as JSON to ``out``.
    First (``reopen`` False): BM25 built anew (the in-process index is not read from the store),
    searches timed, the evaluation; reopening: what opening the data set again costs."""
    from retrieval import Store, Workspace, load_dataset
    from retrieval.index.engines import open_engine

    t0 = time.perf_counter()
    ds = load_dataset(folder)
    t_read = time.perf_counter() - t0
    engine = open_engine(engine_spec)
    store = Store(store_path)
    enc = None
    if max_seq_length:  # the vectors bench/scale.py --max-seq-length stored (the cut is in the encoder's fingerprint)
        from retrieval.index.encoder import load_encoder

        enc = load_encoder(None)
        enc.model.max_seq_length = max_seq_length
    if reopen:  # the in-process BM25 index saved in the store (Milvus: its collection, complete already)
        Workspace(ds, store, model=enc, engine=engine).build_lexical()
    ws = Workspace(ds, store if reopen else None, model=enc, engine=engine)
    t = time.perf_counter()
    ws.build_lexical()
    t_bm25 = time.perf_counter() - t
    ws.store = store  # the vectors: from the store (in-process) or the engine
    t = time.perf_counter()
    dense = ws.build_dense()
    t_vec = time.perf_counter() - t
    figures = {"engine": engine.name, "docs": len(ds.docs), "read_s": t_read, "bm25_s": t_bm25, "vectors_s": t_vec,
               "from_store": dense.from_store, "encoded": dense.encoded}
    if reopen:
        figures["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2
        Path(out).write_text(json.dumps(figures))
        return
    ws.store = None  # nothing below is read from (or written to) the cache: every figure is computed
    dense.store = None
    split = "test" if "test" in ds.qrels else ds.default_split()
    queries = list(ds.split_queries(split).items())[:n_queries]
    latency = {}
    for s in SYSTEMS:
        ws.search_one(queries[0][1], systems=(s,), eval_split=split)  # warm-up
        times = []
        for _, text in queries:
            start = time.perf_counter()
            ws.search_one(text, systems=(s,), eval_split=split)
            times.append(time.perf_counter() - start)
        latency[s] = [percentile_ms(times, 50), percentile_ms(times, 95)]
    figures["latency_ms"] = latency
    if evaluate:
        t = time.perf_counter()
        figures["ndcg10"] = {s: ws.evaluate(s, split).mean["ndcg@10"] for s in SYSTEMS}
        figures["eval_s"] = time.perf_counter() - t
        figures["lambda"] = CLEAR.lambda_for(ws, split).value
        figures["dense_top10"] = {q: [d for d, _ in hits[:10]] for q, hits in ws.run("dense", split).items()}
    figures["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2
    Path(out).write_text(json.dumps(figures))


def run_worker(folder: Path, spec: str, store: Path, args, evaluate: bool, reopen: bool = False) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    cmd = [sys.executable, __file__, "--worker", str(folder), "--engine", spec, "--store", str(store),
           "--queries", str(args.queries), "--out", out, "--max-seq-length", str(args.max_seq_length)] \
        + ([] if evaluate else ["--no-eval"]) \
        + (["--reopen"] if reopen else [])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1")}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{spec} on {folder.name} failed:\n{done.stderr[-3000:]}")
    figures = json.loads(Path(out).read_text())
    os.unlink(out)
    return figures


def fresh(spec: str, folder: Path, work: Path) -> str:
    """The Milvus spec for this data set, emptied first (a new Lite folder, or the corpus's collections dropped)."""
    if spec.startswith("milvus://") or spec.startswith("milvus+https://"):
        subprocess.run([sys.executable, "-m", "retrieval", "drop", str(folder), "--engine", spec], cwd=ROOT, check=True,
                       capture_output=True)
        return spec
    path = Path(spec.partition(":")[2]) if spec else work / f"{folder.name}.db"
    shutil.rmtree(path, ignore_errors=True)
    if path.exists():
        path.unlink()
    return f"milvus:{path}"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("datasets", nargs="*", help="BEIR folders (default: the shared SciFact and NFCorpus)")
    p.add_argument("--engine", default="", help="the Milvus engine to compare (default: Milvus Lite in WORK)")
    p.add_argument("--queries", type=int, default=100, help="test queries timed one at a time, per system")
    p.add_argument("--store", default=None, help="the cache holding (or receiving) the document vectors")
    p.add_argument("--no-eval", action="store_true", help="load and latency only (no nDCG, no λ tuning)")
    p.add_argument("--work", default=str(ROOT / ".bench-engines"))
    p.add_argument("--max-seq-length", type=int, default=0,
                   help="cut encoder inputs to this many word pieces (as bench/scale.py did for --store's vectors)")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    p.add_argument("--reopen", action="store_true", help=argparse.SUPPRESS)
    json_arg(p)
    args = p.parse_args(argv)
    if args.worker:
        worker(args.worker, args.engine, args.store, args.queries, not args.no_eval, args.reopen, args.out,
               args.max_seq_length)
        return
    folders = [Path(d) for d in args.datasets] or [SHARED / "scifact", SHARED / "nfcorpus"]
    missing = [str(f) for f in folders if not f.exists()]
    if missing:
        sys.exit(f"not found: {', '.join(missing)}")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    store = Path(args.store or work / "vectors.sqlite3")
    summary = {"bm25": 0.0, "hybrid": 0.0, "identical": 1.0, "p95": 0.0, "load": 0.0}
    for folder in folders:
        spec = fresh(args.engine, folder, work)
        local = run_worker(folder, "in-process", store, args, not args.no_eval)
        remote = run_worker(folder, spec, store, args, not args.no_eval)
        local_again = run_worker(folder, "in-process", store, args, False, reopen=True)
        again = run_worker(folder, spec, store, args, False, reopen=True)
        print(f"\n{folder.name}: {local['docs']:,} documents, Milvus = {spec}")
        print(f"{'':<30}{'in-process':>14}{'milvus':>14}{'reopen: in-process':>20}{'milvus':>10}")
        rows = [("read the data set (s)", "read_s"), ("BM25 into the engine (s)", "bm25_s"),
                ("vectors into the engine (s)", "vectors_s"), ("peak RSS (GB)", "peak_rss_gb")]
        for name, key in rows:
            print(f"{name:<30}{local[key]:>14.2f}{remote[key]:>14.2f}{local_again[key]:>20.2f}{again[key]:>10.2f}")
        counts = [(f"{f['from_store']:,}/{f['encoded']:,}", w) for f, w in
                  ((local, 14), (remote, 14), (local_again, 20), (again, 10))]
        print(f"{'vectors stored / encoded':<30}" + "".join(f"{c:>{w}}" for c, w in counts))
        for s in SYSTEMS:
            (l50, l95), (m50, m95) = local["latency_ms"][s], remote["latency_ms"][s]
            print(f"{'search ' + s + ' p50 / p95 (ms)':<30}{f'{l50:.1f} / {l95:.1f}':>14}"
                  f"{f'{m50:.1f} / {m95:.1f}':>14}")
        worst = lambda f: max(v[1] for v in f["latency_ms"].values())  # noqa: E731
        summary["p95"] = max(summary["p95"], worst(remote) / worst(local))
        load = (remote["bm25_s"] + remote["vectors_s"]) / (local["bm25_s"] + local["vectors_s"])
        summary["load"] = max(summary["load"], load)
        if not args.no_eval:
            for s in SYSTEMS:
                d = remote["ndcg10"][s] - local["ndcg10"][s]
                print(f"{'nDCG@10 ' + s:<30}{local['ndcg10'][s]:>14.4f}{remote['ndcg10'][s]:>14.4f}   Δ {d:+.4f}")
            same = [local["dense_top10"][q] == remote["dense_top10"].get(q) for q in local["dense_top10"]]
            print(f"{'dense top 10 identical':<30}{sum(same):>14}/{len(same)} queries; λ_test {local['lambda']:g} / "
                  f"{remote['lambda']:g}; evaluation {local['eval_s']:.0f} s / {remote['eval_s']:.0f} s")
            summary["bm25"] = max(summary["bm25"], abs(remote["ndcg10"]["bm25"] - local["ndcg10"]["bm25"]))
            summary["hybrid"] = max(summary["hybrid"], abs(remote["ndcg10"]["hybrid"] - local["ndcg10"]["hybrid"]))
            summary["identical"] = min(summary["identical"], sum(same) / len(same))
    nan = float("nan")
    print(f"\nbm25_ndcg_max_delta={summary['bm25'] if not args.no_eval else nan:.4f} "
          f"dense_top10_identical={summary['identical'] if not args.no_eval else nan:.4f} "
          f"hybrid_ndcg_max_delta={summary['hybrid'] if not args.no_eval else nan:.4f} "
          f"search_p95_ratio={summary['p95']:.2f} load_ratio={summary['load']:.2f}")


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
