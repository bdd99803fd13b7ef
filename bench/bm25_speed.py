#!/usr/bin/env python
"""BM25 speed: our BM25Index against rank-bm25 (the reference) and bm25s used directly.

    python bench/bm25_speed.py ../shared/datasets/scifact [--repeat 3] [--k 100] [--max-queries 200]

The corpus is tokenized once with our Tokenizer; rank-bm25 and bm25s index those token lists.
BM25Index takes texts, so its indexing time includes tokenizing the corpus again (the
tokenization time is printed on its own so it can be compared). Every engine uses k1 = 1.5,
b = 0.75:

* ours      BM25Index(method="lucene")  idf log(1 + (N − df + 0.5)/(df + 0.5)), tf/(tf + k1·norm)
* bm25s     bm25s.BM25(method="lucene") the same formula, default numpy backend
* rank-bm25 BM25Okapi                   idf log((N − df + 0.5)/(df + 0.5)), negative idf floored at
                                        0.25·mean idf; tf·(k1+1)/(tf + k1·norm). The tf part
                                        ranks the same as Lucene's; only the idf differs.

Query throughput is top-k retrieval over all the data set's queries, timed from query text to
ranked ids: ours is one ``BM25Index.search(queries, k)`` call (it tokenizes the queries); bm25s
is our Tokenizer over the queries plus ``retrieve``; rank-bm25 is our Tokenizer plus
``get_scores`` and an argpartition top-k per query, on the first --max-queries queries only
(it is slow). Each measurement is warmed up once, then the best of --repeat runs is kept.

The last line printed is ``ratio_vs_rank_bm25=<x> ratio_vs_bm25s=<y>``: our queries/second
divided by the peer's.
"""
from __future__ import annotations

import argparse
import sys
import time

import bm25s
import numpy as np
from rank_bm25 import BM25Okapi

from _common import best_of, dataset_arg, json_arg, recorded  # first: it puts the checkout on sys.path
from retrieval.data.readers import load_dataset
from retrieval.index.bm25_index import BM25Index
from retrieval.index.tokenize import Tokenizer

K1, B, METHOD = 1.5, 0.75, "lucene"
AGREE_AT = 10


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Row indices of the k highest scores, best first."""
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.argsort(-scores[part], kind="stable")]


def agreement(ours: dict[str, list[tuple[str, float]]], qids: list[str], docs: np.ndarray,
              scores: np.ndarray, doc_ids: list[str], at: int = AGREE_AT) -> tuple[float, int, int]:
    """Fraction of queries whose top-``at`` document sets (positive scores only) are equal
    between ours and bm25s, and how many of the disagreements involve only documents tied
    (to 1e-5) with the ``at``-th score, i.e. an arbitrary cut among equal scores."""
    same = ties = 0
    for row, q in enumerate(qids):
        a = ours[q][:at]
        b = [(doc_ids[d], float(s)) for d, s in zip(docs[row][:at], scores[row][:at]) if s > 0]
        sa, sb = {d for d, _ in a}, {d for d, _ in b}
        if sa == sb:
            same += 1
            continue
        cut = min([s for _, s in a][-1:] + [s for _, s in b][-1:], default=0.0)
        differing = {s for d, s in a + b if d in sa ^ sb}
        if len(a) == len(b) and all(abs(s - cut) <= 1e-5 * max(1.0, abs(cut)) for s in differing):
            ties += 1
    return same / max(1, len(qids)), len(qids) - same, ties


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    dataset_arg(p)
    p.add_argument("--repeat", type=int, default=3, help="timed runs per measurement; the best is kept")
    p.add_argument("--k", type=int, default=100, help="documents retrieved per query")
    p.add_argument("--max-queries", type=int, default=200,
                   help="queries timed for rank-bm25 (the others run all queries)")
    json_arg(p)
    args = p.parse_args(argv)
    if args.repeat < 1 or args.k < 1 or args.max_queries < 1:
        p.error("--repeat, --k and --max-queries must be positive")

    ds = load_dataset(args.dataset)
    doc_ids = ds.doc_ids
    texts = [d.full_text for d in ds.docs.values()]
    qids = list(ds.queries)
    if not qids:
        p.error(f"{ds.name} has no queries")
    qtexts = [ds.queries[q] for q in qids]
    k = min(args.k, len(doc_ids))
    tok = Tokenizer()

    t = time.perf_counter()
    corpus_tokens = tok.tokenize_many(texts)  # the one tokenization the peers index
    tokenize_cold = time.perf_counter() - t
    tokenize_warm, _ = best_of(lambda: tok.tokenize_many(texts), args.repeat, warm_up=True)
    n_tokens = sum(map(len, corpus_tokens))
    print(f"{ds.name}: {len(doc_ids):,} documents ({n_tokens:,} tokens), {len(qids):,} queries; "
          f"k={k}, k1={K1}, b={B}, best of {args.repeat}")
    print(f"corpus tokenization with our Tokenizer: {tokenize_cold:.2f} s cold, {tokenize_warm:.2f} s "
          f"warm stem cache (inside ours' index time, not the peers')")

    # ---- indexing ------------------------------------------------------------------------
    def build_ours():
        return BM25Index(doc_ids, texts, k1=K1, b=B, method=METHOD, tokenizer=tok)

    def build_bm25s():
        r = bm25s.BM25(k1=K1, b=B, method=METHOD)
        r.index(corpus_tokens, show_progress=False)
        return r

    idx_ours, ours = best_of(build_ours, args.repeat, warm_up=True)
    idx_bm25s, ref_bm25s = best_of(build_bm25s, args.repeat, warm_up=True)
    idx_rank, okapi = best_of(lambda: BM25Okapi(corpus_tokens, k1=K1, b=B), args.repeat, warm_up=True)
    if ours._engine.vocab_dict != ref_bm25s.vocab_dict:  # same tokens in, same vocabulary out
        print("warning: our index and bm25s have different vocabularies", file=sys.stderr)

    # ---- queries -------------------------------------------------------------------------
    queries = dict(zip(qids, qtexts))

    def query_ours():
        return ours.search(queries, k)

    def query_bm25s():
        return ref_bm25s.retrieve([tok(q) for q in qtexts], k=k, show_progress=False)

    sub = qtexts[:args.max_queries]

    def query_rank():
        return [top_k(okapi.get_scores(tok(q)), k) for q in sub]

    sec_ours, run_ours = best_of(query_ours, args.repeat, warm_up=True)
    sec_bm25s, (docs_bm25s, scores_bm25s) = best_of(query_bm25s, args.repeat, warm_up=True)
    sec_rank, tops_rank = best_of(query_rank, args.repeat, warm_up=True)
    qps = {"ours": len(qids) / sec_ours, "bm25s": len(qids) / sec_bm25s,
           "rank": len(sub) / sec_rank}

    # ---- agreement -----------------------------------------------------------------------
    agree, differ, tied = agreement(run_ours, qids, docs_bm25s, scores_bm25s, doc_ids)
    overlap_rank = np.mean([len({d for d, _ in run_ours[q][:AGREE_AT]}
                                & {doc_ids[i] for i in top[:AGREE_AT]}) / AGREE_AT
                            for q, top in zip(qids, tops_rank)])

    rows = [("ours (BM25Index, lucene)", idx_ours, len(qids), qps["ours"]),
            ("bm25s (lucene, numpy)", idx_bm25s, len(qids), qps["bm25s"]),
            ("rank-bm25 (BM25Okapi)", idx_rank, len(sub), qps["rank"])]
    print()
    header = f"{'engine':<26}{'index s':>10}{'queries':>10}{'queries/s':>12}{'ms/query':>10}"
    print(header)
    print("-" * len(header))
    for name, idx, n, q in rows:
        print(f"{name:<26}{idx:>10.3f}{n:>10,}{q:>12,.1f}{1000 / q:>10.3f}")
    print()
    print(f"top-{AGREE_AT} agreement ours vs bm25s: {agree:.4f} of {len(qids):,} queries "
          f"({differ} differ, {tied} of them only among documents tied at the cut)")
    print(f"mean top-{AGREE_AT} overlap ours vs rank-bm25 (different idf): {overlap_rank:.4f} "
          f"on {len(sub):,} queries")
    print(f"ratio_vs_rank_bm25={qps['ours'] / qps['rank']:.2f} ratio_vs_bm25s={qps['ours'] / qps['bm25s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
