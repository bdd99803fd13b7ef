#!/usr/bin/env python
"""RankScope on a corpus of N documents: load, BM25, encoding, FAISS, search latency, memory, store,
reopen, and SciFact's quality under distractors.

    python bench/scale.py --docs 100000 [--seed 0] [--work DIR] [--store FILE]
        [--max-seq-length T] [--queries 100] [--index auto|flat|hnsw] [--skip-dense] [--precision auto|fp32|bf16]
        [--engine milvus:PATH.db|milvus://HOST:PORT]

The corpus (seeded, written once to ``WORK/scale-<N>-seed<S>/`` in BEIR format and reused):
SciFact's 5,183 abstracts, whose train and test labels still hold, plus N − 5,183 distractors.
Each distractor is a new passage of 3–8 sentences drawn at random from the other shared corpora
(NFCorpus and Cranfield), under a new id, so the retrieval task gets harder the way a bigger
collection makes it harder. Needs ``../shared/datasets``.

Steps, each timed: ``load_dataset`` (parse and validate), the BM25 index, embedding every
document into the store (``--store``, default ``WORK/scale-<N>-seed<S>.sqlite3``; committed every
1,024 documents, so an interrupted run resumes and a finished one reads everything back; the rate
counts only documents encoded in this run), the FAISS index over the vectors, the λ tuning on
SciFact's train split. ``--max-seq-length T`` cuts the encoder's input to T word pieces for the
index (a cheaper index for a big N on a CPU; the output says so).

Search: ``--queries`` SciFact test queries, one at a time through ``Workspace.search_one`` (what
the app's Search view calls: BM25 scoring, query encoding, FAISS search, hybrid fusion), one
system per call, p50 / p95 in ms; every query is encoded (the store's query vectors from an
earlier run are not used). Flat against HNSW on the same vectors and queries: build time,
FAISS-only latency, recall of flat's top 10 and top 100. Quality: BM25, dense and CLEAR hybrid nDCG@10 on SciFact's test
split. Reopen: a fresh process loads the folder, reads BM25 from the store and the built dense
index from the file kept beside the store; then the same without that file (every vector read back
from the store, the index built again), for the ratio. Peak RSS of this process (``ru_maxrss``); store size on disk.

Last line: ``docs=<N> load_bm25_s=<x> encode_docs_per_s=<x> search_p95_ms=<x> peak_rss_gb=<x>
reopen_s=<x> scifact_hybrid_ndcg10=<x>`` (p95 the worst of the three systems).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from _common import ROOT, SHARED, json_arg, percentile_ms, recorded, timed  # first: it puts the checkout on sys.path
from retrieval.cli import engine_arg
from retrieval.data.readers import load_dataset
from retrieval.index.dense_index import DenseIndex
from retrieval.index.encoder import PRECISIONS, load_encoder
from retrieval.index.engines import open_engine
from retrieval.store import Store
from retrieval.systems.hybrid import CLEAR
from retrieval.workspace import Workspace

SENTENCE = re.compile(r"(?<=[.!?])\s+")


def build_corpus(n: int, seed: int, work: Path) -> Path:
    """SciFact plus seeded distractors, as a BEIR folder (written once, then reused)."""
    out = work / f"scale-{n}-seed{seed}"
    if (out / "corpus.jsonl").exists():
        return out
    tmp = work / f".scale-{n}-seed{seed}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "qrels").mkdir(parents=True)
    scifact = SHARED / "scifact"
    pool = []
    for name in ("nfcorpus", "cranfield"):
        with (SHARED / name / "corpus.jsonl").open() as f:
            for line in f:
                doc = json.loads(line)
                pool += [s for s in SENTENCE.split(doc.get("text", "")) if len(s.split()) >= 5]
    rng = random.Random(seed)
    with (tmp / "corpus.jsonl").open("w") as f:
        written = 0
        with (scifact / "corpus.jsonl").open() as src:
            for line in src:
                f.write(line if line.endswith("\n") else line + "\n")
                written += 1
        for i in range(n - written):
            text = " ".join(rng.choice(pool) for _ in range(rng.randint(3, 8)))
            f.write(json.dumps({"_id": f"x{i}", "title": "", "text": text}) + "\n")
    shutil.copy(scifact / "queries.jsonl", tmp / "queries.jsonl")
    for split in ("train", "test"):
        shutil.copy(scifact / "qrels" / f"{split}.tsv", tmp / "qrels" / f"{split}.tsv")
    tmp.rename(out)
    return out


def flat_vs_hnsw(ds, dense, flat: DenseIndex, n_queries: int) -> None:
    """HNSW (M 32, efSearch 512) against the exact ``flat`` index on the same vectors and queries: build
    time, FAISS-only latency of one query (top 100), and how much of flat's top 10 / top 100 HNSW
    finds — in a top-100 search, and in a top-1,000 one, the depth the app's evaluations and hybrid
    candidates ask for (FAISS's HNSW does not widen its search to k). Where "auto" gave the
    workspace an HNSW index already (from ``HNSW_FROM`` documents), that one is compared (its build
    time is part of the embedding step's)."""
    if dense.index.kind == "hnsw":
        hnsw, t_hnsw = dense.index, float("nan")
    else:
        hnsw, t_hnsw = timed(lambda: DenseIndex(ds.doc_ids, dense.index.embeddings, kind="hnsw"))
    queries = dict(list(ds.split_queries("test").items())[:n_queries])
    qvecs = dense.encode_queries(queries)
    found, deep, lat = {10: [], 100: []}, {10: [], 100: []}, {"flat": [], "hnsw": []}
    for q in qvecs:
        (_, exact), t_flat = timed(lambda q=q: flat.search_vectors(q[None], 100))
        (_, approx), t_approx = timed(lambda q=q: hnsw.search_vectors(q[None], 100))
        _, approx_deep = hnsw.search_vectors(q[None], 1000)
        lat["flat"].append(t_flat)
        lat["hnsw"].append(t_approx)
        for k in found:
            found[k].append(len(set(exact[0][:k]) & set(approx[0][:k])) / k)
            deep[k].append(len(set(exact[0][:k]) & set(approx_deep[0][:k])) / k)
    built = "the workspace's own (auto)" if np.isnan(t_hnsw) else f"built in {t_hnsw:.1f} s"
    print(f"HNSW index: {built}; recall of flat's top 10 {np.mean(found[10]):.4f}, "
          f"top 100 {np.mean(found[100]):.4f} (searching the top 1,000: {np.mean(deep[10]):.4f}, "
          f"{np.mean(deep[100]):.4f}); one query (FAISS only, top 100): "
          f"flat p50 {percentile_ms(lat['flat'], 50):.2f} / p95 {percentile_ms(lat['flat'], 95):.2f} ms, "
          f"HNSW p50 {percentile_ms(lat['hnsw'], 50):.2f} / p95 {percentile_ms(lat['hnsw'], 95):.2f} ms")


REOPEN = """
import sys, time
t = time.perf_counter()
from retrieval import Store, Workspace, load_dataset
from retrieval.index.encoder import load_encoder
enc = load_encoder(None, precision=sys.argv[5])
if int(sys.argv[3]):
    enc.model.max_seq_length = int(sys.argv[3])
ws = Workspace(load_dataset(sys.argv[1]), Store(sys.argv[2]), model=enc, index_kind=sys.argv[4])
ws.bm25
dense = ws.build_dense()
print(time.perf_counter() - t, dense.encoded)
"""


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work", default=str(ROOT / ".bench-scale"), help="where the corpus and store go")
    p.add_argument("--store", default=None)
    p.add_argument("--max-seq-length", type=int, default=0, help="cut encoder inputs to this many word pieces")
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--index", default="auto", choices=("auto", "flat", "hnsw"),
                   help="the dense index (auto: flat below 500,000 documents, HNSW from there)")
    p.add_argument("--skip-dense", action="store_true", help="BM25 only (no encoding, no dense or hybrid)")
    p.add_argument("--precision", default="auto", choices=PRECISIONS,
                   help="the encoder's arithmetic (auto: as the app picks it; vectors are stored per precision)")
    engine_arg(p)
    json_arg(p)
    args = p.parse_args(argv)
    if not (SHARED / "scifact" / "corpus.jsonl").exists():
        sys.exit(f"{SHARED} is absent: the corpus is built from the shared BEIR data sets")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    folder, t_build = timed(lambda: build_corpus(args.docs, args.seed, work))
    store_path = Path(args.store or work / f"scale-{args.docs}-seed{args.seed}.sqlite3")
    print(f"corpus {folder} ({t_build:.0f} s to build or find)")

    ds, t_load = timed(lambda: load_dataset(folder))
    enc = load_encoder(None, precision=args.precision)  # the GPU where there is one
    if args.max_seq_length:
        enc.model.max_seq_length = args.max_seq_length
    engine = open_engine(args.engine, allow_insecure_token=args.allow_insecure_token)
    ws = Workspace(ds, Store(store_path), model=enc, engine=engine, index_kind=args.index)
    _, t_bm25 = timed(lambda: ws.build_lexical())
    print(f"{len(ds.docs):,} documents: load {t_load:.1f} s, BM25 index {t_bm25:.1f} s")
    systems = ["bm25"] if args.skip_dense else ["bm25", "dense", "hybrid"]
    rate = float("nan")
    if not args.skip_dense:
        def progress(fraction: float, what: str) -> None:
            print(f"\r  {what} ({fraction:.0%})", end="" if fraction < 1 else "\n", file=sys.stderr, flush=True)

        dense, t_embed = timed(lambda: ws.build_dense(progress=progress))
        rate = dense.encoded / t_embed if dense.encoded else float("nan")
        cut = f", inputs cut to {args.max_seq_length} word pieces" if args.max_seq_length else ""
        print(f"embeddings: {dense.from_store:,} from the store, {dense.encoded:,} encoded in {t_embed:.0f} s "
              f"({rate:.1f} docs/s on {enc.compute}{cut})")
        if engine.capabilities.index_variants:  # FAISS's own: another engine keeps the vectors itself
            flat, t_faiss = timed(lambda: DenseIndex(ds.doc_ids, dense.index.embeddings))
            print(f"FAISS flat index over {len(ds.docs):,} vectors: {t_faiss:.1f} s")
            flat_vs_hnsw(ds, dense, flat, args.queries)
            del flat
        fit, t_lam = timed(lambda: CLEAR.lambda_fit(ws, "train"))
        lam = fit.chosen
        print(f"λ tuned on train: {lam:g} ({t_lam:.0f} s)")
    queries = list(ds.split_queries("test").items())[:args.queries]
    latency = {}
    if not args.skip_dense:
        ws.dense.store = None  # every query encoded now, never read back from an earlier run's cache
    for s in systems:
        ws.search_one(queries[0][1], systems=(s,), eval_split="test")  # warm-up
        times = [timed(lambda t=text, s=s: ws.search_one(t, systems=(s,), eval_split="test"))[1] for _, text in queries]
        latency[s] = (percentile_ms(times, 50), percentile_ms(times, 95))
        print(f"search {s:<7} p50 {latency[s][0]:7.1f} ms   p95 {latency[s][1]:7.1f} ms   ({len(times)} queries)")
    if not args.skip_dense:
        ws.dense.store = ws.store
    ndcg = {s: ws.evaluate(s, "test").mean["ndcg@10"] for s in systems}
    print("SciFact test nDCG@10 under distractors: " + ", ".join(f"{s} {v:.4f}" for s, v in ndcg.items()))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2
    ws.store.close()
    size = sum(f.stat().st_size for f in store_path.parent.glob(store_path.name + "*"))
    reopen = float("nan")
    if not args.skip_dense:
        kept = store_path.parent / "indexes"
        size += sum(f.stat().st_size for f in kept.glob("*.faiss"))

        def reopened() -> tuple[float, str]:
            res = subprocess.run([sys.executable, "-c", REOPEN, str(folder), str(store_path),
                                  str(args.max_seq_length), args.index, args.precision], capture_output=True,
                                 text=True, cwd=ROOT,
                                 env={**os.environ, "PYTHONPATH": str(ROOT)})
            seconds, encoded = res.stdout.split()[-2:] if res.returncode == 0 else ("nan", "?")
            return float(seconds), encoded

        reopen, encoded = reopened()
        print(f"reopen in a new process (load, BM25, the kept {ws.index_kind} index read back; {encoded} encoded): "
              f"{reopen:.1f} s")
        aside = kept.with_name("indexes-aside")
        shutil.rmtree(aside, ignore_errors=True)
        if kept.exists():
            kept.rename(aside)  # the same reopen without the kept index: vectors from the store, index rebuilt
            rebuilt, _ = reopened()
            shutil.rmtree(kept, ignore_errors=True)
            aside.rename(kept)
            print(f"reopen without the kept index (vectors read from the store, the index built again): "
                  f"{rebuilt:.1f} s; kept / rebuilt {reopen / rebuilt:.2f}")
    print(f"peak RSS {peak:.2f} GB; store {size / 1024 ** 3:.2f} GB")
    worst = max(p95 for _, p95 in latency.values())
    print(f"docs={len(ds.docs)} load_bm25_s={t_load + t_bm25:.1f} encode_docs_per_s={rate:.1f} "
          f"search_p95_ms={worst:.1f} peak_rss_gb={peak:.2f} reopen_s={reopen:.1f} "
          f"scifact_hybrid_ndcg10={ndcg.get('hybrid', float('nan')):.4f}")


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
