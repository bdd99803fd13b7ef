#!/usr/bin/env python
"""Encoding speed against stock sentence-transformers, and what reduced precision costs in quality.

    python bench/encode_speed.py DATASET [DATASET ...] [--docs 2000] [--repeat 3] [--model PATH_OR_ID]
        [--device auto] [--store PATH] [--no-quality]

Speed: the first ``--docs`` documents of the first DATASET (``title. text``, corpus order), encoded
by stock ``SentenceTransformer.encode`` (fp32, its default batch size, normalized) and by
RankScope's ``Encoder`` as ``load_encoder`` makes it (fp16 on CUDA; on a CPU the precision and
batch size measured fastest for its class, ``retrieval.index.cpu_choice``; longest texts first),
``--repeat`` alternating runs each after one warm-up batch each, the best of each kept; documents
per second and the ratio; the cosine between the two vectors of each document (minimum and mean).

Quality: for each DATASET, dense nDCG@10 on its default split with the encoder forced to fp32 and
at the automatic precision (each encodes the whole corpus; ``--store`` keeps the vectors, keyed by
precision, so a second run reads them), and the difference.

Last line: ``ratio_vs_sentence_transformers=<x> max_ndcg_delta=<d>`` (the largest |Δ nDCG@10|
over the data sets; ``nan`` with ``--no-quality``).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import json_arg, recorded, timed  # first: it puts the checkout on sys.path
from retrieval.data.readers import load_dataset
from retrieval.index.encoder import load_encoder
from retrieval.store import Store
from retrieval.workspace import Workspace


def speed(texts: list[str], model: str | None, device: str, repeat: int = 3) -> tuple[float, str]:
    ours = load_encoder(model, device=device)
    stock = ours.model  # the same weights, called the stock way
    stock.encode(texts[:32], normalize_embeddings=True)
    ours.encode(texts[:32])
    t_stock = t_ours = float("inf")
    for _ in range(repeat):  # alternating, the best of each: drift and a busy moment hit both alike
        ref, t = timed(lambda: np.asarray(stock.encode(texts, normalize_embeddings=True, show_progress_bar=False),
                                          dtype=np.float32))
        t_stock = min(t_stock, t)
        vecs, t = timed(lambda: ours.encode(texts))
        t_ours = min(t_ours, t)
    cosine = (ref * vecs).sum(axis=1)
    print(f"encoding {len(texts)} documents of {model or 'all-MiniLM-L6-v2'} (best of {repeat} alternating runs):")
    print(f"  {'sentence-transformers, fp32':<36}{len(texts) / t_stock:>9.1f} docs/s")
    print(f"  {'RankScope':<36}{len(texts) / t_ours:>9.1f} docs/s"
          f"   ×{t_stock / t_ours:.2f}   cosine to fp32 min {cosine.min():.6f} mean {cosine.mean():.6f}")
    print(f"  RankScope's path: {ours.compute}")
    return t_stock / t_ours, ours.precision


def quality(path: str, model: str | None, device: str, store: Store) -> float:
    ds = load_dataset(path)
    split = ds.default_split()
    rows = []  # (precision, nDCG@10, seconds to embed and index the corpus)
    for asked in ("fp32", "auto"):
        enc = load_encoder(model, device=device, precision=asked)
        ws = Workspace(ds, store, model=enc)
        start = time.perf_counter()
        ws.build_dense()
        rows.append((enc.precision, ws.evaluate("dense", split).mean["ndcg@10"], time.perf_counter() - start))
    (_, base, t_base), (precision, ours, t_ours) = rows
    print(f"{ds.name} ({len(ds.docs)} documents), dense nDCG@10 on {split}: fp32 {base:.4f} ({t_base:.0f} s), "
          f"{precision} {ours:.4f} ({t_ours:.0f} s), Δ {ours - base:+.4f}")
    return abs(ours - base)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("datasets", nargs="+")
    p.add_argument("--docs", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=3, help="alternating timed runs of each; the best is kept")
    p.add_argument("--model", default=None)
    p.add_argument("--device", default="auto")
    p.add_argument("--store", default=None, help="cache file (default: a temporary one, so everything is encoded)")
    p.add_argument("--no-quality", action="store_true")
    json_arg(p)
    args = p.parse_args(argv)
    first = load_dataset(args.datasets[0])
    texts = [d.full_text for d in first.docs.values()][:args.docs]
    ratio, _ = speed(texts, args.model, args.device, max(1, args.repeat))
    delta = float("nan")
    if not args.no_quality:
        with tempfile.TemporaryDirectory() as tmp:
            store = Store(args.store or Path(tmp) / "encode-speed.sqlite3")
            delta = max(quality(path, args.model, args.device, store) for path in args.datasets)
            store.close()
    print(f"ratio_vs_sentence_transformers={ratio:.2f} max_ndcg_delta={delta:.4f}")


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
