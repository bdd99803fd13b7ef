#!/usr/bin/env python
"""Does a large judgments import slow other sessions down? A labelled search's latency on an idle
store, then while another thread imports ``--rows`` judgments into the same store.

    python bench/import_contention.py [--docs 5000] [--queries 500] [--rows 1000000] [--judges 3]
        [--searches 1000] [--seed 0] [--work FOLDER]

Writes a seeded synthetic BEIR data set (``--docs`` passages of a Zipf vocabulary of 20,000 words,
``--queries`` queries of 2–6 words each taken from one passage, which is its relevant document, in
a ``test`` split) and a CSV of ``--rows`` judgments of it (query_id, doc_id, grade, judge: each
judge grading the same pairs), then opens it in-process twice over one store (``Workspace``, BM25:
no encoder), as two sessions of the app share the store.

A labelled search, as a session's Search tab does it: one labelled query picked by id
(``ui.search.search_by_id``, BM25) and the system's metrics on the split (``Workspace.evaluate``,
read from the store, where the first search cached them). Two phases on the same workspace:

1. idle: ``--searches`` searches, nothing else running — the reference;
2. during the import: the same searches, round robin, for as long as another thread imports the
   CSV through the Judge tab's import (``ui.judge.import_judgments``: the file read and checked,
   then ``Store.put_judgments``, at background priority: ``staged_writes.in_background``), on another
   session's workspace of the same data set.

Prints the p50 / p95 / max of each phase, the import's seconds and what it stored. Last line:
``search_p95_ratio_during_import=<x>`` (p95 during the import / idle p95, both measured in the same
run on the same machine; the target is 2 or less).
"""
from __future__ import annotations

import argparse
import csv
import html
import json
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import json_arg, percentile_ms, recorded, timed  # first: it puts the checkout on sys.path


def write_data(folder: Path, docs: int, queries: int, seed: int) -> Path:
    """A labelled BEIR folder: ``docs`` seeded passages, ``queries`` queries each from one passage."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(20_000)]
    weights = [1 / (i + 1) for i in range(len(vocab))]
    folder.mkdir(parents=True, exist_ok=True)
    texts = [rng.choices(vocab, weights, k=rng.randint(30, 120)) for _ in range(docs)]
    with (folder / "corpus.jsonl").open("w") as f:
        for i, words in enumerate(texts):
            f.write(json.dumps({"_id": f"doc-{i}", "title": "", "text": " ".join(words)}) + "\n")
    sources = rng.sample(range(docs), min(queries, docs))
    with (folder / "queries.jsonl").open("w") as f:
        for n, i in enumerate(sources):
            f.write(json.dumps({"_id": f"q-{n}", "text": " ".join(rng.sample(texts[i], rng.randint(2, 6)))}) + "\n")
    (folder / "qrels").mkdir(exist_ok=True)
    with (folder / "qrels" / "test.tsv").open("w") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        f.writelines(f"q-{n}\tdoc-{i}\t1\n" for n, i in enumerate(sources))
    return folder


def write_judgments(path: Path, docs: int, queries: int, rows: int, judges: int, seed: int) -> int:
    """A CSV of ``rows`` judgments (every judge grades the same pairs); the rows written."""
    rng = random.Random(seed + 1)
    per_query = min(docs, -(-rows // (judges * queries)))
    written = 0
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["query_id", "doc_id", "grade", "judge"])
        for q in range(queries):
            for d in rng.sample(range(docs), per_query):
                for j in range(judges):
                    if written == rows:
                        return written
                    out.writerow([f"q-{q}", f"doc-{d}", rng.choice((0, 0, 1, 2)), f"judge-{j}"])
                    written += 1
    return written


def summary(seconds: list[float]) -> dict:
    return {"n": len(seconds), "p50_ms": percentile_ms(seconds, 50), "p95_ms": percentile_ms(seconds, 95),
            "max_ms": max(seconds) * 1000}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--docs", type=int, default=5_000)
    p.add_argument("--queries", type=int, default=500)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--judges", type=int, default=3)
    p.add_argument("--searches", type=int, default=1_000, help="idle searches (a few seconds: a steadier p95)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work", default=None, help="folder for the data, the CSV and the store (default: a temporary one)")
    json_arg(p)
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from retrieval import Store, Workspace, load_dataset
    from ui import judge
    from ui.search import search_by_id

    work = Path(args.work or tempfile.mkdtemp(prefix="rankscope-import-contention-"))
    data = write_data(work / "data", args.docs, args.queries, args.seed)
    upload = work / "judgments.csv"
    rows = write_judgments(upload, args.docs, args.queries, args.rows, args.judges, args.seed)
    store = Store(work / "store.sqlite3")
    dataset = load_dataset(data)
    searcher = Workspace(dataset, store)  # BM25 only: no encoder loaded
    importer = searcher.with_dataset(dataset)  # another session's workspace of the same data set and store
    split = searcher.dataset.default_split()
    ids = list(searcher.dataset.qrels[split])

    def search(n: int) -> float:
        start = time.perf_counter()
        search_by_id(searcher, ids[n % len(ids)], ["bm25"])
        searcher.evaluate("bm25", split)
        return time.perf_counter() - start

    for n in range(3):  # the index, the run and its metrics (stored), first calls' imports: out of the timings
        search(n)
    idle = [search(n) for n in range(args.searches)]

    done = threading.Event()
    result: dict = {}

    def run_import() -> None:
        try:
            result["said"], result["seconds"] = timed(lambda: judge.import_judgments(importer, store, str(upload)))
        except BaseException as err:
            result["error"] = err
        finally:
            done.set()

    thread = threading.Thread(target=run_import, name="import")
    thread.start()
    during, n = [], 0
    while not done.is_set():
        during.append(search(n))
        n += 1
    thread.join()
    if "error" in result:
        raise result["error"]
    stored = len(store.judgments(importer.dataset.corpus_hash))
    idle_s, busy_s = summary(idle), summary(during)
    ratio = busy_s["p95_ms"] / idle_s["p95_ms"]
    print(f"{args.docs:,} documents, {args.queries:,} labelled queries; {rows:,} judgments by {args.judges} judges "
          f"imported in {result['seconds']:.1f} s ({stored:,} stored); {os.cpu_count()} CPUs")
    print("  " + html.unescape(result["said"]))  # the Judge tab's status line, as the page shows it
    for name, s in (("idle", idle_s), ("during import", busy_s)):
        print(f"  {name:<14} n {s['n']:>5}   p50 {s['p50_ms']:>8.1f} ms   p95 {s['p95_ms']:>8.1f} ms   "
              f"max {s['max_ms']:>8.1f} ms")
    print(f"search_p95_ratio_during_import={ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
