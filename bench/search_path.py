"""What one search costs: encodes, FAISS searches, BM25 scorings, explanations, store writes, latency.

    python bench/search_path.py [--repo DIR] [--model ID_OR_FOLDER] [--data PATH]

Opens the app in-process (``app.create``, the bundled demo and the default encoder unless told
otherwise, a fresh temporary store) and sends every query of the data set through the ``/search``
endpoint with ``gradio_client``: once as typed free text ("about: <query>", never labelled, never
repeated, so no cache can hide an encode) and once as the labelled query's own text. Around each
search it counts, at the libraries' own entry points so that any version of RankScope can be
measured the same way:

* encodes — texts passed to ``SentenceTransformer.encode``;
* FAISS searches — calls of ``faiss.IndexFlatIP.search`` (the flat index);
* BM25 scorings — calls of ``bm25s.BM25.get_scores_from_ids`` (one per score vector over the corpus);
* explanations — calls of ``BM25Index.explain_text`` (one per document explained);
* store writes — rows the SQLite connection changed (``total_changes``).

``--repo DIR`` measures another checkout of RankScope (e.g. ``git worktree add /tmp/before <commit>``)
with this same script, so the before and after figures come from one method. Prints per-search
means and latency p50 / p95 (end to end through the API) for both kinds of query; the last line is
the free-text path: ``encodes=… faiss_searches=… bm25_scorings=… explanations=… store_writes=…
p50_ms=… p95_ms=…``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, json_arg, recorded  # first: it puts the checkout on sys.path

COUNTED = ("encodes", "faiss_searches", "bm25_scorings", "explanations", "store_writes")


class Counters:
    """Counts calls at the libraries' entry points (each call passes through unchanged)."""

    def __init__(self):
        self.n = dict.fromkeys(COUNTED, 0)

    def wrap(self, cls, name: str, counter: str, size=lambda args: 1) -> None:
        real = getattr(cls, name)

        def counted(*args, **kwargs):
            self.n[counter] += size(args)
            return real(*args, **kwargs)

        setattr(cls, name, counted)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repo", default=str(ROOT), help="the RankScope checkout to measure (default: this one)")
    p.add_argument("--model", default=None, help="encoder id or folder (default: all-MiniLM-L6-v2)")
    p.add_argument("--data", default=None, help="data set (default: the bundled demo)")
    json_arg(p)
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # measure from the repository root only, not from bench/ (which Python puts first on sys.path)
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
    sys.path.insert(0, str(Path(args.repo).resolve()))
    os.chdir(args.repo)
    import bm25s
    import faiss
    from gradio_client import Client
    from sentence_transformers import SentenceTransformer

    import app as rankscope
    from retrieval.index.bm25_index import BM25Index

    counters = Counters()
    counters.wrap(SentenceTransformer, "encode", "encodes", lambda a: 1 if isinstance(a[1], str) else len(a[1]))
    counters.wrap(faiss.IndexFlatIP, "search", "faiss_searches")
    counters.wrap(bm25s.BM25, "get_scores_from_ids", "bm25_scorings")
    counters.wrap(BM25Index, "explain_text", "explanations")

    store = Path(tempfile.mkdtemp(prefix="rankscope-bench-")) / "store.sqlite3"
    demo, registry = rankscope.create(args.data, args.model, str(store))
    demo.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=None, quiet=True)
    client = Client(demo.local_url, verbose=False)
    data_path = Path(args.data) if args.data else Path(args.repo) / "data" / "demo"
    queries = [json.loads(line)["text"] for line in (data_path / "queries.jsonl").read_text().splitlines() if line]
    for item in list(registry._items.values()):  # count searches, not a background build's encodes and writes
        for build in item.ws.builds.values():
            build.follow(None, None, 0.5)
    client.predict("warm-up: a first search compiles and loads what later ones reuse", api_name="/search")
    client.predict(queries[-1], api_name="/search")
    print(f"RankScope at {Path(rankscope.__file__).parent}; {len(queries)} queries; "
          f"encoder {registry.model or 'all-MiniLM-L6-v2'}")
    print(f"{'query kind':<12}" + "".join(f"{c:>16}" for c in COUNTED) + f"{'p50 ms':>10}{'p95 ms':>10}")
    results = {}
    for kind, texts in (("labelled", queries[:-1]), ("free text", [f"about: {q}" for q in queries])):
        totals, times = dict.fromkeys(COUNTED, 0), []
        for text in texts:
            counters.n = dict.fromkeys(COUNTED, 0)
            writes = registry.store.db.conn.total_changes
            start = time.perf_counter()
            client.predict(text, api_name="/search")
            times.append(1000 * (time.perf_counter() - start))
            counters.n["store_writes"] = registry.store.db.conn.total_changes - writes
            for c in COUNTED:
                totals[c] += counters.n[c]
        means = {c: totals[c] / len(texts) for c in COUNTED}
        p50, p95 = statistics.median(times), statistics.quantiles(times, n=20)[18]
        results[kind] = (means, p50, p95)
        print(f"{kind:<12}" + "".join(f"{means[c]:>16.2f}" for c in COUNTED) + f"{p50:>10.1f}{p95:>10.1f}")
    demo.close()
    means, p50, p95 = results["free text"]
    print(" ".join(f"{c}={means[c]:.2f}" for c in COUNTED) + f" p50_ms={p50:.1f} p95_ms={p95:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
