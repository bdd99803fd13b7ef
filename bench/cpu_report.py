#!/usr/bin/env python
"""This CPU's class and the three speed figures that differ between classes, in one line.

    python bench/cpu_report.py [DATASET] [--docs 300] [--repeat 3] [--queries 50000] [--judgments 60]
        [--model ID_OR_FOLDER] [--pace SECONDS]

Runs, one after another in child processes on this machine (keep it otherwise quiet):

* ``encode_speed.py DATASET --docs N --repeat R --no-quality``: RankScope's encoding path (the
  precision and batch size chosen for this CPU class, ``retrieval.index.cpu_choice``) against stock
  sentence-transformers, best of R alternating runs each: ``encode_ratio`` (> 1: ours is faster);
* ``bm25_speed.py DATASET``: our BM25 query path against bm25s on the same tokens: ``bm25_ratio``;
* ``judge_speed.py --queries Q --judgments J``: a grade's round trip through the app's ``/judge``
  called as the page's own client calls it, p95 in ms (``judge_p95_ms``), beside Gradio's own echo
  on this machine (the floor no endpoint goes under); and, where Playwright and Chromium are
  installed, the same in a headless browser on the app's page (``browser_p95_ms``); ``--pace``: its
  seconds between two grades beside searches and in the browser (default: the judging bench's own).

Prints the CPU class (model name, family and model, the instruction flags that change kernels,
cores), each bench's own figures, and last the line
``cpu=<class> encode_ratio=<x> bm25_ratio=<y> judge_p95_ms=<z>`` (``<class>``: ``CpuClass.slug``).
A bench that fails stops the report with its status and its last output.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

from _common import ROOT, SHARED, command_line, figures, json_arg, recorded  # first: it puts the checkout on sys.path
from retrieval.index import machine_load
from retrieval.index.cpu_choice import cpu_class


def run_bench(script: str, args: list[str]) -> dict[str, float | str]:
    """The ``key=value`` figures of ``bench/<script>.py ARGS`` run in a child process; its echo line of
    Gradio's floor too, for the judging bench."""
    env = {**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"), "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, str(ROOT / "bench" / f"{script}.py"), *args]
    print(f"$ {command_line(script, args)}", flush=True)
    res = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, encoding="utf-8")
    lines = res.stdout.splitlines()
    if res.returncode:
        tail = "\n".join((res.stdout + res.stderr).splitlines()[-20:])
        raise SystemExit(f"bench/{script}.py failed with status {res.returncode}:\n{tail}")
    shown = [line for line in lines if line.strip()][-12:]
    print("\n".join(f"  {line}" for line in shown), flush=True)
    found = figures(lines[-3:])
    echo = next((line for line in lines if line.lstrip().startswith("Gradio echo")), None)
    if echo is not None:
        found["echo"] = echo.strip()
    return found


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", nargs="?", default=str(SHARED / "scifact"),
                   help="BEIR folder or zip for the encoding and BM25 benches (default: the shared SciFact)")
    p.add_argument("--docs", type=int, default=300, help="documents encoded by each path in each run")
    p.add_argument("--repeat", type=int, default=3, help="alternating encoding runs of each path; the best is kept")
    p.add_argument("--queries", type=int, default=50000, help="queries of the judging bench's log")
    p.add_argument("--judgments", type=int, default=60, help="grades timed by the judging bench")
    p.add_argument("--model", default=None, help="encoder id or folder for the encoding and judging benches")
    p.add_argument("--pace", type=float, default=None,
                   help="the judging bench's seconds between two grades beside searches and in the browser "
                   "(default: its own)")
    p.add_argument("--store", default=None, help="the judging bench's app store file (default: a new one)")
    json_arg(p)
    args = p.parse_args(argv)
    if args.docs < 1 or args.repeat < 1 or args.queries < 1 or args.judgments < 1:
        p.error("--docs, --repeat, --queries and --judgments must be positive")
    if args.pace is not None and args.pace < 0:
        p.error("--pace must be at least 0")
    klass = cpu_class()
    print(f"CPU class: {klass.label}, {machine_load.cores()} cores ({klass.slug})", flush=True)
    model = ["--model", args.model] if args.model else []
    encode = run_bench("encode_speed", [args.dataset, "--docs", str(args.docs), "--repeat", str(args.repeat),
                                        "--no-quality", *model])
    bm25 = run_bench("bm25_speed", [args.dataset])
    pace = ["--pace", f"{args.pace:g}"] if args.pace is not None else []
    store = ["--store", args.store] if args.store else []
    judge = run_bench("judge_speed", ["--queries", str(args.queries), "--judgments", str(args.judgments), *model,
                                      *pace, *store])
    print()
    if "echo" in judge:
        print(f"the judging floor on this machine: {judge['echo']}")
    if "browser_p95_ms" in judge:
        print(f"a grade's round trip in the browser: p95 {judge['browser_p95_ms']} ms")
    print(f"cpu={klass.slug} encode_ratio={encode['ratio_vs_sentence_transformers']} "
          f"bm25_ratio={bm25['ratio_vs_bm25s']} judge_p95_ms={judge['judge_p95_ms']}")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
