#!/usr/bin/env python
"""Embedding compression: quality, bytes per document and search time of float32, int8 (FAISS 8-bit
scalar quantizer, Baidu ERNIE §5.1 / appendix 9.2), PCA-reduced and PCA + int8 indexes.

    python bench/index_compression.py [DATASET] [--split test] [--dims 128] [--model PATH_OR_ID]
        [--store PATH] [--k 1000] [--repeat 3] [--json FILE]

DATASET defaults to the bundled data/demo. Quality (dense and CLEAR hybrid: nDCG@10, Recall@100,
MRR@10) comes from ``retrieval.evaluation.compression.compression_table``, cached in the store like every
other run; each compressed index is its own dense system with its own λ_test tuned on train.
Every figure is also given as a ratio against the float32 FAISS flat index measured in the same
run. Bytes: the vector code of one document, and the whole serialized FAISS index divided by the
number of documents (adds the quantizer's ranges and the projection matrix). Search time: the
split's queries (encoded once beforehand, so only the index is timed) searched one at a time for
the top ``--k``, on one FAISS thread; best of ``--repeat``.
"""
from __future__ import annotations

import argparse
import sys
import time

import faiss

from _common import DEMO, recorded, store_arg, write_json  # first: it puts the checkout on sys.path
from retrieval.data.readers import load_dataset
from retrieval.evaluation.compression import compression_table, variant_workspace
from retrieval.store import Store
from retrieval.workspace import Workspace

METRICS = ("ndcg@10", "recall@100", "mrr@10")


def search_ms_per_query(index, qvecs, k: int, repeat: int) -> float:
    """Best of ``repeat`` passes over the queries, one ``search`` call per query, in ms/query."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for i in range(len(qvecs)):
            index.search_vectors(qvecs[i:i + 1], k)
        best = min(best, time.perf_counter() - start)
    return 1000 * best / max(1, len(qvecs))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset", nargs="?", default=str(DEMO))
    ap.add_argument("--split", default="test")
    ap.add_argument("--dims", type=int, default=128, help="PCA dimensions of the reduced variants")
    ap.add_argument("--model", default=None)
    store_arg(ap)
    ap.add_argument("--k", type=int, default=1000, help="depth of the timed searches")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    faiss.omp_set_num_threads(1)

    t0 = time.perf_counter()
    ws = Workspace(load_dataset(args.dataset), Store(args.store) if args.store else Store(), model=args.model)
    ws.build_dense()
    print(f"{ws.dataset.name}: {len(ws.dataset.docs):,} documents, {len(ws.dataset.split_queries(args.split))} "
          f"{args.split} queries; encoder {ws.encoder.name} ({ws.encoder.dim} dims); ready in "
          f"{time.perf_counter() - t0:.1f} s")
    variants = (("flat", None), ("sq8", None), ("flat", args.dims), ("sq8", args.dims))
    t0 = time.perf_counter()
    rows = compression_table(ws, args.split, variants=variants, metrics=METRICS)
    print(f"quality of {len(rows)} variants in {time.perf_counter() - t0:.1f} s (cached runs are reused)\n")

    qvecs = ws.dense.encode_queries(ws.dataset.split_queries(args.split))
    dims = {r.label: (r.kind, None if r.dims == ws.encoder.dim else r.dims) for r in rows}
    ms = {r.label: search_ms_per_query(variant_workspace(ws, *dims[r.label]).dense.index, qvecs, args.k, args.repeat)
          for r in rows}
    flat = rows[0]
    header = (f"{'index':<26}{'dims':>5}{'B/doc codes':>16}{'B/doc index':>17}"
              + "".join(f"{s + ' ' + m:>19}" for s in ("dense", "hybrid") for m in METRICS)
              + f"{'ms/query':>15}  λ_test")
    print(header)
    print("-" * len(header))
    out = []
    for r in rows:
        line = (f"{r.label:<26}{r.dims:>5}{r.code_bytes:>9} {r.code_bytes / flat.code_bytes:.3f}×"
                f"{r.index_bytes_per_doc:>10.1f} {r.index_bytes_per_doc / flat.index_bytes_per_doc:.3f}×")
        for s in ("dense", "hybrid"):
            for m in METRICS:
                v, ref = r.metrics[s][m], flat.metrics[s][m]
                line += f"{v:>11.4f}{r.marks.get(s, {}).get(m, ' ')} {v / ref if ref else float('nan'):.3f}×"
        line += f"{ms[r.label]:>8.3f} {ms[r.label] / ms[flat.label]:.2f}×  {r.hybrid_lambda:g}"
        print(line)
        out.append({**r.to_dict(), "marks": r.marks, "ms_per_query": ms[r.label]})
    print(f"\n× = ratio to the float32 flat index; † = differs from it at p < 0.05 (paired permutation "
          f"test); search: top {args.k}, one query per call, one thread, best of {args.repeat}.")
    write_json(args.json, out)


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
