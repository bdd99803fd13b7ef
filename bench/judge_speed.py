"""Judging at the scale of a query log: how long the first judging queue takes to be ready, one
judgment's round trip (the grade stored, the next pair back), and whether another user's searches
slow down meanwhile.

    python bench/judge_speed.py [--queries 50000] [--judgments 60] [--depth 10] [--model ID_OR_FOLDER]

Writes the bundled demo's corpus with ``--queries`` queries (the demo's own, then seeded log-like
queries of 1–6 words drawn from the corpus's vocabulary, each with a Zipf-distributed ``count``
column) to a temporary folder, opens the app in-process on it (the default encoder unless
``--model``, a fresh store), waits for its background builds (the corpus's dense and learned sparse
vectors: the server is idle when the timing starts) and, through ``gradio_client``:

1. times ``--searches`` searches (``/search``) on an idle server: the baseline;
2. times the first ``/judge_queue`` — with more than 1,000 queries the default judges a random
   sample of 200 (``retrieval.judging.sampling``), pooled by every system on show;
3. grades ``--judgments`` pairs one after another through ``/judge``, the judge alone on the server
   (beside it, the same work in-process, and Gradio's own round trip to an endpoint that returns its
   input: the floor no endpoint goes under);
4. grades ``--judgments`` more while a second client keeps searching, timing every judgment and
   every search.

Prints p50 / p95 / max of each; the comparable figures are the searches' p95 on the idle server and
the judgments' p95 alone, measured in the same run. Last line: ``queue_s=… judge_p95_ms=…
search_p95_ms=…`` (a judgment alone; searches while judging).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import DEMO, ROOT, json_arg, percentile_ms, recorded  # first: it puts the checkout on sys.path


def log_folder(n_queries: int, seed: int = 0) -> Path:
    """The demo corpus and labels with ``n_queries`` queries (its own first), as a BEIR folder."""
    folder = Path(tempfile.mkdtemp(prefix="rankscope-judge-log-"))
    (folder / "corpus.jsonl").write_text((DEMO / "corpus.jsonl").read_text())
    (folder / "qrels").mkdir()
    for split in (DEMO / "qrels").iterdir():
        (folder / "qrels" / split.name).write_text(split.read_text())
    own = [json.loads(line) for line in (DEMO / "queries.jsonl").read_text().splitlines() if line.strip()]
    words = sorted({w.lower().strip(".,;:!?()\"'") for line in (DEMO / "corpus.jsonl").read_text().splitlines()
                    for w in json.loads(line)["text"].split() if w.isalpha() and len(w) > 3})
    rng = random.Random(seed)
    rows = [{"_id": q["_id"], "text": q["text"], "count": 1} for q in own]
    texts = {q["text"] for q in own}
    while len(rows) < n_queries:
        text = " ".join(rng.sample(words, rng.randint(1, 6)))
        if text not in texts:
            texts.add(text)
            rows.append({"_id": f"log-{len(rows)}", "text": text, "count": max(1, int(1000 / rng.paretovariate(1.1)))})
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return folder


def echo_round_trip_ms(n: int = 30) -> list[float]:
    """Gradio's own floor: round trips through ``gradio_client`` to an endpoint that returns its input."""
    import gradio as gr
    from gradio_client import Client

    with gr.Blocks() as echo:
        box, out = gr.Textbox(), gr.Textbox()
        gr.Button().click(lambda x: x, box, out, api_name="echo")
    echo.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=None, quiet=True)
    client = Client(echo.local_url, verbose=False)
    times = []
    for _ in range(n):
        t = time.perf_counter()
        client.predict("ping", api_name="/echo")
        times.append(1000 * (time.perf_counter() - t))
    echo.close()
    return times


def in_process_ms(folder: Path, store: Path, n: int, depth: int, model: str | None) -> list[float]:
    """The judgment's own work without the web round trip: ``ui.judge.grade_pair`` (the grade stored
    and noted in the queue) and ``show`` (the next pair's HTML), on the same data and store."""
    from retrieval import Store, load_dataset
    from ui import judge
    from ui.registry import Registry

    registry = Registry(Store(store), model, foreground_s=600)
    ws = registry.get(registry.open(load_dataset(folder), budgeted=False))
    q = judge.judging_queue(ws, registry.store, "in-process", depth, fresh=True)
    position, times = q.next_unjudged(), []
    for i in range(n):
        if position is None:
            break
        qid, doc = q.pairs[position]
        t = time.perf_counter()
        q, position = judge.grade_pair(ws, registry.store, "in-process", qid, doc, i % 3, depth)
        judge.show(ws, q, position)
        times.append(1000 * (time.perf_counter() - t))
    return times


def summary(name: str, ms: list[float]) -> str:
    return f"{name:<24}{statistics.median(ms):>10.1f}{percentile_ms([x / 1000 for x in ms], 95):>10.1f}{max(ms):>10.1f}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--queries", type=int, default=50_000)
    p.add_argument("--judgments", type=int, default=60)
    p.add_argument("--searches", type=int, default=40, help="searches on the idle server (the baseline)")
    p.add_argument("--depth", type=int, default=10)
    p.add_argument("--model", default=None)
    json_arg(p)
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.path[:] = [q for q in sys.path if Path(q or ".").resolve() != Path(__file__).resolve().parent]
    sys.path.insert(0, str(ROOT))
    from gradio_client import Client

    import app as rankscope

    folder = log_folder(args.queries)
    store = Path(tempfile.mkdtemp(prefix="rankscope-judge-")) / "store.sqlite3"
    started = time.perf_counter()
    demo, _ = rankscope.create(str(folder), args.model, str(store))
    demo.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=None, quiet=True)
    print(f"{args.queries:,} queries over the demo's documents; app ready in {time.perf_counter() - started:.1f} s",
          file=sys.stderr)
    from retrieval.index.background_build import running

    while builds := running():  # the corpus's vectors (dense, learned sparse) encoded first: the server idle when timed
        for build in builds:  # one build may start the next: asked again until none runs
            build.wait(3600)
    print(f"background builds done {time.perf_counter() - started:.1f} s after the start", file=sys.stderr)
    judge, searcher = Client(demo.local_url, verbose=False), Client(demo.local_url, verbose=False)
    searches = ["descale a kettle", "winter tyres", "sourdough starter", "leaky faucet washer", "budget travel"]

    idle = []
    for n in range(args.searches):
        t = time.perf_counter()
        searcher.predict(searches[n % len(searches)], api_name="/search")
        idle.append(1000 * (time.perf_counter() - t))

    t = time.perf_counter()
    progress, _, shown = judge.predict("bench", args.depth, False, api_name="/judge_queue")
    queue_s = time.perf_counter() - t

    def grade(n: int) -> float:
        nonlocal shown
        t0 = time.perf_counter()
        _, _, shown = judge.predict("bench", shown["query_id"], shown["doc_id"], n % 3, args.depth, False,
                                    api_name="/judge")
        return 1000 * (time.perf_counter() - t0)

    alone = [grade(n) for n in range(args.judgments)]  # one judge on the server
    busy, done = [], threading.Event()

    def keep_searching():
        n = 0
        while not done.is_set():
            t0 = time.perf_counter()
            searcher.predict(searches[n % len(searches)], api_name="/search")
            busy.append(1000 * (time.perf_counter() - t0))
            n += 1

    thread = threading.Thread(target=keep_searching)
    thread.start()
    try:
        judged = [grade(args.judgments + n) for n in range(args.judgments)]  # while another user searches
    finally:
        done.set()
        thread.join()
        demo.close()
    floor = echo_round_trip_ms()
    own = in_process_ms(folder, store, args.judgments, args.depth, args.model)
    print(f"first queue: {queue_s:.2f} s — {progress.split('**')[1] if '**' in progress else progress}")
    print(f"{'':<24}{'p50 ms':>10}{'p95 ms':>10}{'max ms':>10}")
    print(summary("Gradio echo (the floor)", floor))
    print(summary("judgment, in-process", own))
    print(summary("search, idle server", idle))
    print(summary("judgment, alone", alone))
    print(summary("judgment, beside searches", judged))
    print(summary("search, while judging", busy))
    p95 = {name: percentile_ms([x / 1000 for x in xs], 95) for name, xs in (("idle", idle), ("busy", busy),
                                                                             ("alone", alone), ("judge", judged))}
    print(f"searches while judging: p95 {p95['busy'] / p95['idle']:.2f} × the idle server's; a judgment beside "
          f"them: p95 {p95['judge'] / p95['alone']:.2f} × alone")
    print(f"queue_s={queue_s:.2f} judge_p95_ms={p95['alone']:.1f} search_p95_ms={p95['busy']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
