"""How long one judgment takes, end to end: the judge presses a grade, the grade is stored, the next
pair comes back (``/judge`` through ``gradio_client``).

    python bench/judge_speed.py [--judgments 40] [--depth 10] [--model ID_OR_FOLDER] [--data PATH]

Opens the app in-process on the bundled demo (the default encoder unless ``--model``) with a fresh
store, starts a queue (``/judge_queue``), then grades the pairs it hands out one after another,
timing each round trip. Prints p50 / p95 / max; the comparable figure is the round trip against a
search (``/search``) timed the same way in the same run. Last line:
``judge_p50_ms=… judge_p95_ms=… search_p50_ms=… judgments=…``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT  # first: it puts the checkout on sys.path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--judgments", type=int, default=40)
    p.add_argument("--depth", type=int, default=10)
    p.add_argument("--model", default=None)
    p.add_argument("--data", default=None)
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.path[:] = [q for q in sys.path if Path(q or ".").resolve() != Path(__file__).resolve().parent]
    sys.path.insert(0, str(ROOT))
    from gradio_client import Client

    import app as rankscope

    store = Path(tempfile.mkdtemp(prefix="rankscope-judge-")) / "store.sqlite3"
    demo, registry = rankscope.create(args.data, args.model, str(store))
    demo.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=None, quiet=True)
    client = Client(demo.local_url, verbose=False)
    start = time.perf_counter()
    _, _, shown = client.predict("bench", args.depth, False, api_name="/judge_queue")
    first = 1000 * (time.perf_counter() - start)
    judge_ms, search_ms = [], []
    for n in range(args.judgments):
        if shown["query_id"] is None:
            break
        t = time.perf_counter()
        _, _, shown = client.predict("bench", shown["query_id"], shown["doc_id"], n % 3, args.depth, False,
                                     api_name="/judge")
        judge_ms.append(1000 * (time.perf_counter() - t))
        t = time.perf_counter()
        client.predict(f"about: judging round {n}", api_name="/search")
        search_ms.append(1000 * (time.perf_counter() - t))
    demo.close()
    q = lambda xs, i: statistics.quantiles(xs, n=20)[i]  # noqa: E731
    print(f"pooled pairs {shown['pooled']}; first queue {first:.0f} ms (pools every query's top {args.depth})")
    print(f"{'':<10}{'p50 ms':>10}{'p95 ms':>10}{'max ms':>10}")
    for name, xs in (("judge", judge_ms), ("search", search_ms)):
        print(f"{name:<10}{statistics.median(xs):>10.1f}{q(xs, 18):>10.1f}{max(xs):>10.1f}")
    print(f"judge_p50_ms={statistics.median(judge_ms):.1f} judge_p95_ms={q(judge_ms, 18):.1f} "
          f"search_p50_ms={statistics.median(search_ms):.1f} judgments={len(judge_ms)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
