#!/usr/bin/env python
"""How long the CLI's ``evaluate`` and ``check`` take on a 5,000-document corpus, and the ranked-list
metrics computed from the runs (``retrieval.evaluation.rank_metrics``) against ranx on the same runs.

    python bench/eval_speed.py [--docs 5000] [--queries 40] [--seed 0] [--model ID_OR_FOLDER]
        [--work DIR] [--profile FILE]

The corpus: seeded synthetic passages (a Zipf vocabulary of 20,000 words, 30–200 words a passage, a
title of 3–8 words), written once under ``--work`` (default: a temporary folder), with ``--queries``
test queries, each five words of one passage (labelled 2), with two other passages drawn at random
labelled 1 and two labelled 0. Six systems: the built-in BM25, dense,
hybrid, reciprocal-rank fusion and weighted sum, and an imported TREC run (BM25's lists, their
scores rounded, so ties occur).

The encoder is a random-weight one-layer BERT of 384 dimensions with MiniLM's tokenizer (what the
vectors cost, not what they find), or ``--model`` (all-MiniLM-L6-v2 with ``--model default``). Its
encoding of the corpus is put in a store first, untimed; each timed command starts from a copy of
that store (the embeddings only: every run searched, every metric computed):

* ``evaluate``: ``python -m retrieval evaluate`` of the six systems on the test split (with the
  bootstrap intervals and the permutation tests of every pair);
* ``check``: ``python -m retrieval check`` of the six against a baseline snapshot of them taken
  (untimed) in the same store.

Each is timed twice: in a fresh process as a user runs it, with an empty numba cache
(``NUMBA_CACHE_DIR``: what a container whose site-packages numba cannot write pays on every run; wall
clock, imports, the corpus read and the encoder's load included), and in this process after an
untimed evaluate, snapshot and check of another copy (``retrieval.cli.main``: the commands' own work,
imports done, the encoder loaded, numba's kernels compiled), beside the seconds the CLI reports
evaluating each system (its search included). Then, in a fresh process with an empty numba cache,
the ranked-list metrics of the six runs (``metrics.METRICS`` and the Recall@k curve's depths) by
``rank_metrics`` against ranx on the same lists (ranx's first call, its numba compile included,
then a second), and how many values differ.
``--profile FILE``: the fresh check under cProfile, its statistics written to FILE.

Last line: ``evaluate_s=<x> check_s=<y>``, the fresh-process seconds (what a user running the command
waits for, imports and numba's first compiles included; target ≤ 10 s each).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, json_arg, recorded, timed  # first: it puts the checkout on sys.path

SYSTEMS = ("bm25", "dense", "hybrid", "rrf", "wsum")
IMPORTED = "imported"


def synthetic(folder: Path, n_docs: int, n_queries: int, seed: int) -> Path:
    """A BEIR folder of ``n_docs`` seeded passages and ``n_queries`` labelled test queries (written once)."""
    path = folder / f"eval-{n_docs}-{n_queries}-seed{seed}"
    if (path / "qrels" / "test.tsv").exists():
        return path
    (path / "qrels").mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(20_000)]
    weights = [1 / (i + 1) for i in range(len(vocab))]
    texts = []
    with (path / "corpus.jsonl").open("w") as f:
        for i in range(n_docs):
            title = " ".join(rng.choices(vocab, weights, k=rng.randint(3, 8)))
            text = " ".join(rng.choices(vocab, weights, k=rng.randint(30, 200)))
            texts.append(text.split())
            f.write(json.dumps({"_id": f"doc-{i}", "title": title, "text": text}) + "\n")
    with (path / "queries.jsonl").open("w") as fq, (path / "qrels" / "test.tsv").open("w") as fr:
        fr.write("query-id\tcorpus-id\tscore\n")
        for q in range(n_queries):
            target = rng.randrange(n_docs)
            words = rng.sample(texts[target], k=min(5, len(texts[target])))
            fq.write(json.dumps({"_id": f"q-{q}", "text": " ".join(words)}) + "\n")
            labels = {target: 2}
            for other in rng.sample(range(n_docs), 4):
                labels.setdefault(other, 1 if len(labels) < 3 else 0)
            for doc, grade in labels.items():
                fr.write(f"q-{q}\tdoc-{doc}\t{grade}\n")
    return path


def model_folder(folder: Path, dim: int = 384) -> Path:
    """A random-weight one-layer BERT sentence-transformer of ``dim`` dimensions (written once)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from session_memory import model_folder as tiny

    return tiny(folder, dim)


def fresh(argv: list[str], profile: str | None = None) -> tuple[float, str, str]:
    """(wall seconds, stdout, stderr) of ``python ARGV`` in a fresh process with an empty numba cache
    (``NUMBA_CACHE_DIR``: as where numba cannot keep its compiled kernels, a container's read-only
    site-packages); fails loudly."""
    prefix = [sys.executable, "-m", "cProfile", "-o", profile] if profile else [sys.executable]
    with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "NUMBA_CACHE_DIR": cache}
        start = time.perf_counter()
        done = subprocess.run([*prefix, *argv], cwd=ROOT, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):  # check: 1 is "regressed", which a baseline of itself is not
        raise SystemExit(f"python {' '.join(argv)} failed:\n{done.stderr[-3000:]}")
    return seconds, done.stdout, done.stderr


def cli(*args: str, profile: str | None = None) -> tuple[float, str]:
    """(wall seconds, stderr) of ``python -m retrieval ARGS`` in a fresh process (``fresh``)."""
    seconds, _, err = fresh(["-m", "retrieval", *args], profile)
    return seconds, err


def warm(data: Path, store: Path, model: str) -> None:
    """The corpus encoded into ``store`` (what a first load does; not timed)."""
    from retrieval.data.readers import load_dataset
    from retrieval.store import Store
    from retrieval.workspace import Workspace

    s = Store(store)
    try:
        Workspace(load_dataset(data), s, model=model, precision="fp32").build_dense()
    finally:
        s.close()


def imported_run(data: Path, store: Path, model: str, out: Path) -> Path:
    """BM25's test lists as a TREC file, their scores rounded to 1 decimal (ties, as many runs have)."""
    from retrieval.data.readers import load_dataset
    from retrieval.files.trec import write_trec
    from retrieval.workspace import Workspace

    ws = Workspace(load_dataset(data), None, model=model, precision="fp32")
    run = ws.run("bm25", "test")
    return write_trec({q: [(d, round(s, 1)) for d, s in hits] for q, hits in run.items()}, out, IMPORTED)


def metrics_in_process(data: Path, store: Path, model: str) -> dict:
    """The six runs' ranked-list metrics by ``rank_metrics`` and by ranx, timed in this process."""
    from retrieval.data.readers import load_dataset, read_run
    from retrieval.evaluation import rank_metrics
    from retrieval.evaluation.measures import positive_qrels
    from retrieval.evaluation.metric_tables import RECALL_KS
    from retrieval.evaluation.metrics import METRICS
    from retrieval.store import Store
    from retrieval.workspace import Workspace

    s = Store(store)
    try:
        ds = load_dataset(data)
        ws = Workspace(ds, s, model=model, precision="fp32")
        runs = [ws.run(name, "test") for name in SYSTEMS]
    finally:
        s.close()
    runs.append(read_run(data.parent / f"{IMPORTED}.trec").run)
    qrels = positive_qrels(ds.qrels["test"])
    metrics = list(dict.fromkeys([*METRICS, *(f"recall@{k}" for k in RECALL_KS)]))

    def ours():
        return [rank_metrics.scores(r, qrels, metrics) for r in runs]

    def theirs():
        return [rank_metrics.ranx_scores(r, qrels, metrics) for r in runs]

    a, ours_s = timed(ours)  # first: ranx's import and first call do not warm anything for it
    b, ranx_first_s = timed(theirs)
    _, ranx_s = timed(theirs)
    names = [*SYSTEMS, IMPORTED]
    differing = {n: sum(abs(x[m][q] - y[m][q]) > 1e-9 for m in metrics for q in qrels)
                 for n, x, y in zip(names, a, b)}
    return {"ours_s": ours_s, "ranx_first_s": ranx_first_s, "ranx_s": ranx_s,
            "differing": sum(differing.values()), "differing_runs": [n for n, c in differing.items() if c],
            "lists": sum(len(r) for r in runs), "metrics": len(metrics)}


def in_process(*args: str) -> tuple[float, str]:
    """(seconds, stderr) of ``retrieval.cli.main(ARGS)`` in this process (its output discarded)."""
    import contextlib
    import io

    from retrieval.cli import main as cli_main

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code, seconds = timed(lambda: cli_main(list(args)))
    if code not in (0, 1):
        raise SystemExit(f"retrieval {' '.join(args)} failed:\n{err.getvalue()[-3000:]}")
    return seconds, err.getvalue()


def per_system(stderr: str) -> str:
    """The CLI's "seconds: bm25 1.2, ..." line, as "bm25 1.2, ..."."""
    lines = [line for line in stderr.splitlines() if line.startswith("seconds: ")]
    return lines[-1][len("seconds: "):] if lines else "?"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--docs", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default=None, help="encoder id or folder (default: a random one-layer BERT; "
                                                       "'default': all-MiniLM-L6-v2)")
    parser.add_argument("--work", default=None, help="folder for the corpus and stores (default: a temporary one)")
    parser.add_argument("--profile", default=None, help="write the fresh check's cProfile statistics here")
    parser.add_argument("--metrics-of", default=None, help=argparse.SUPPRESS)  # the metrics' own fresh process
    json_arg(parser)
    args = parser.parse_args(argv)
    if args.metrics_of:
        data = synthetic(Path(args.work), args.docs, args.queries, args.seed)
        print(json.dumps(metrics_in_process(data, Path(args.metrics_of), args.model)))
        return 0

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="rankscope-eval-speed-"))
    try:
        data = synthetic(work, args.docs, args.queries, args.seed)
        if args.model == "default":
            from retrieval.index.encoder import default_model_path
            model = str(default_model_path())
        else:
            model = args.model or str(model_folder(work))
        warmed = work / f"warm-{data.name}.sqlite3"
        if not warmed.exists():
            (_, warm_s) = timed(lambda: warm(data, warmed, model))
            print(f"warm-up (encoding {args.docs:,} documents, not timed): {warm_s:.1f} s", file=sys.stderr)
        trec = imported_run(data, warmed, model, data.parent / f"{IMPORTED}.trec")
        runs = ["--run", f"{trec}={IMPORTED}"]

        def store(name: str) -> list[str]:  # a copy of the store that holds the embeddings only
            shutil.copyfile(warmed, work / name)
            return [str(data), "--store", str(work / name), "--model", model, "--precision", "fp32"]

        # in a fresh process each, as a user runs them, numba's cache empty
        cold = store("fresh.sqlite3")
        evaluate_p, err = cli("evaluate", *cold, "--systems", ",".join(SYSTEMS), *runs)
        evaluate_p_systems = per_system(err)
        cli("snapshot", *cold, "--systems", ",".join(SYSTEMS), *runs, "--name", "base", "--baseline")
        check_p, _ = cli("check", *cold, *runs, profile=args.profile)
        _, out, _ = fresh([str(Path(__file__).resolve()), "--metrics-of", str(work / "fresh.sqlite3"),
                           "--work", str(work), "--model", model, "--docs", str(args.docs),
                           "--queries", str(args.queries), "--seed", str(args.seed)])
        metrics = json.loads(out.strip().splitlines()[-1])

        # in this process, after one untimed evaluate, snapshot and check (imports, the encoder
        # loaded, numba's kernels compiled): the work of the commands themselves
        warm_up = store("warm-up.sqlite3")
        in_process("evaluate", *warm_up, "--systems", ",".join(SYSTEMS), *runs)
        in_process("snapshot", *warm_up, "--systems", ",".join(SYSTEMS), *runs, "--name", "base", "--baseline")
        in_process("check", *warm_up, *runs)
        timed_store = store("timed.sqlite3")
        evaluate_s, err = in_process("evaluate", *timed_store, "--systems", ",".join(SYSTEMS), *runs)
        evaluate_systems = per_system(err)
        in_process("snapshot", *timed_store, "--systems", ",".join(SYSTEMS), *runs, "--name", "base", "--baseline")
        check_s, _ = in_process("check", *timed_store, *runs)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)

    print(f"{args.docs:,} documents, {args.queries} test queries, 6 systems ({', '.join(SYSTEMS)}, {IMPORTED} "
          f"(BM25's lists, scores rounded))")
    print(f"fresh process, numba's cache empty (embeddings in the store; imports and the encoder's load "
          f"included): evaluate {evaluate_p:.1f} s (the CLI's seconds per system, search included: "
          f"{evaluate_p_systems}), check against a snapshot of the six {check_p:.1f} s")
    print(f"after warm-up, in one process: evaluate {evaluate_s:.1f} s ({evaluate_systems}), check {check_s:.1f} s")
    print(f"ranked-list metrics of the 6 runs ({metrics['lists']} lists x {metrics['metrics']} metrics), in a fresh "
          f"process, numba's cache empty: rank_metrics {metrics['ours_s'] * 1000:.0f} ms; ranx "
          f"{metrics['ranx_first_s']:.1f} s on its first call ({metrics['ranx_first_s'] / metrics['ours_s']:.0f}x), "
          f"{metrics['ranx_s'] * 1000:.0f} ms on its second ({metrics['ranx_s'] / metrics['ours_s']:.1f}x); "
          f"values differing by more than 1e-9: {metrics['differing']} "
          f"({', '.join(metrics['differing_runs']) or 'none'}: equal scores ranked in list order, not "
          f"ranx's quicksort order)")
    # what a user waits for: the commands in a fresh process over a store that holds the embeddings
    print(f"evaluate_s={evaluate_p:.1f} check_s={check_p:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
