#!/usr/bin/env python
"""What a fresh process pays before it answers: the command line's help, a leaf of the library
imported, and the first reciprocal-rank fusion (and weighted sum) ranked and evaluated on the demo.

    python bench/cold_start.py [--repeat 3] [--work DIR] [--model ID_OR_FOLDER] [--skip-first-ever] [--json FILE]

Each figure is the wall clock of new interpreters (``sys.executable``, this checkout), the median of
``--repeat``, beside their CPU seconds (user + system: what a machine shared with other work inflates
less):

* ``cli_help_s``: ``python -m retrieval --help`` (the argparse parser: no index, model or numba);
* ``leaf_import_s``: ``import retrieval.evaluation.metrics``, and which of FAISS, torch, bm25s,
  sentence-transformers and numba it left loaded (none, by ``.importlinter``'s contracts);
* ``first_rrf_s``: in a fresh process that has opened the bundled demo (``data/demo``: the data
  set read, BM25 and the dense index of the bundled encoder loaded from a store of its own under
  ``--work``, which an untimed first process filled: the corpus's and the test queries' vectors,
  BM25's index), the RRF system's run of the test split searched (``Workspace.search``, not the
  store's cached run) and evaluated as the Evaluate view does: every metric ``Workspace.evaluate``
  computes, PNR, and each view metric's 95% interval (percentile bootstrap). numba's cache folder
  (``NUMBA_CACHE_DIR``) is one under ``--work`` that the first process filled. The weighted sum is
  timed after it in the same process, and the opening (imports, the encoder's load) on its own.

Then the first-ever costs, once each: the same process with an empty numba cache folder (the store
still warm), and with an empty store as well (the corpus and queries encoded, BM25 built);
``--skip-first-ever`` leaves them out. ``--model``: another encoder than the bundled all-MiniLM-L6-v2
(the tests pass a tiny one).

Last line: ``cli_help_s=<x> leaf_import_s=<y> first_rrf_s=<z>`` (targets: ≤ 0.8 s, ≤ 0.5 s, ≤ 5 s).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import DEMO, ROOT, json_arg, recorded, write_json  # first: it puts the checkout on sys.path

HEAVY = ("faiss", "torch", "bm25s", "sentence_transformers", "numba")
FUSIONS = ("rrf", "wsum")


def first_fusions(store: str, model: str | None = None) -> dict:
    """In this (fresh) process: open the demo over ``store``, then each of ``FUSIONS`` searched and
    evaluated with its intervals; seconds of each step."""
    started = time.perf_counter()
    from retrieval.data.readers import load_dataset
    from retrieval.evaluation.measures import evaluate_run, scores_from_run
    from retrieval.evaluation.metrics import EVALUATED, VIEW_METRICS
    from retrieval.store import Store
    from retrieval.workspace import EVAL_DEPTH, Workspace

    ds = load_dataset(DEMO)
    ws = Workspace(ds, Store(store), model=model)
    split = ds.default_split()
    ws.build_dense()
    ws.build_lexical()
    out = {"open_s": time.perf_counter() - started, "queries": len(ds.split_queries(split)),
           "documents": len(ds.docs), "split": split}
    for system in FUSIONS:
        t = time.perf_counter()
        run = ws.search(system, ds.split_queries(split), EVAL_DEPTH, split)
        qrels = ds.qrels[split]
        ev = evaluate_run(run, qrels, metrics=EVALUATED, pnr_scores=scores_from_run(run, qrels))
        intervals = {m: ev.interval(m) for m in VIEW_METRICS if m in ev.per_query}
        out[f"{system}_s"] = time.perf_counter() - t
        out[f"{system}_ndcg@10"] = ev.mean["ndcg@10"]
        out[f"{system}_interval"] = [intervals["ndcg@10"].low, intervals["ndcg@10"].high]
    out["loaded"] = [m for m in HEAVY if m in sys.modules]
    return out


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def fresh(args: list[str], env: dict | None = None) -> tuple[float, str, float]:
    """(wall seconds, what it printed, CPU seconds) of a new interpreter running ``args`` at the checkout's root."""
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **(env or {})}
    cpu, start = _children_cpu(), time.perf_counter()
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, env=environment)
    seconds, cpu = time.perf_counter() - start, _children_cpu() - cpu
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return seconds, done.stdout, cpu


def fusion_process(store: Path, numba: Path, model: str | None) -> tuple[float, dict]:
    seconds, out, _ = fresh([str(Path(__file__).resolve()), "--first-fusions", str(store),
                             *(["--model", model] if model else [])], {"NUMBA_CACHE_DIR": str(numba)})
    return seconds, json.loads(out.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=3, help="fresh processes per figure (the median is shown)")
    p.add_argument("--work", default=None, help="folder for the stores and numba caches (default: a temporary one)")
    p.add_argument("--model", default=None, help="encoder id or folder (default: the bundled all-MiniLM-L6-v2)")
    p.add_argument("--skip-first-ever", action="store_true", help="leave out the runs with empty caches")
    p.add_argument("--first-fusions", default=None, help=argparse.SUPPRESS)  # the child: one store, JSON out
    json_arg(p)
    args = p.parse_args()
    if args.first_fusions:
        print(json.dumps(first_fusions(args.first_fusions, args.model)))
        return 0

    leaf_code = f"import json, sys, retrieval.evaluation.metrics; print(json.dumps([m for m in {HEAVY!r} " \
                f"if m in sys.modules]))"
    helps = [fresh(["-m", "retrieval", "--help"]) for _ in range(args.repeat)]
    leaves = [fresh(["-c", leaf_code]) for _ in range(args.repeat)]
    leaf_loaded = json.loads(leaves[-1][1].strip().splitlines()[-1])

    work = Path(args.work or tempfile.mkdtemp(prefix="rankscope-cold-"))
    try:
        warm_store, warm_numba = work / "warm" / "rankscope.sqlite3", work / "warm-numba"
        shutil.rmtree(work / "warm", ignore_errors=True)
        filled_s, _ = fusion_process(warm_store, warm_numba, args.model)  # untimed in the figures: fills both
        warm = [fusion_process(warm_store, warm_numba, args.model) for _ in range(args.repeat)]
        no_numba_s, no_numba, ever_s, ever = None, {"rrf_s": None}, None, {"rrf_s": None, "open_s": None}
        if not args.skip_first_ever:
            empty_numba = work / "empty-numba"
            shutil.rmtree(empty_numba, ignore_errors=True)
            no_numba_s, no_numba = fusion_process(warm_store, empty_numba, args.model)
            shutil.rmtree(work / "ever", ignore_errors=True)
            shutil.rmtree(empty_numba, ignore_errors=True)
            ever_s, ever = fusion_process(work / "ever" / "rankscope.sqlite3", empty_numba, args.model)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)

    def median(values) -> float:
        return statistics.median(values)

    first = warm[-1][1]
    figures = {
        "cli_help_s": median(s for s, _, _ in helps), "cli_help_cpu_s": median(c for _, _, c in helps),
        "leaf_import_s": median(s for s, _, _ in leaves), "leaf_import_cpu_s": median(c for _, _, c in leaves),
        "leaf_loaded": leaf_loaded,
        "first_rrf_s": median(r["rrf_s"] for _, r in warm), "first_wsum_s": median(r["wsum_s"] for _, r in warm),
        "open_s": median(r["open_s"] for _, r in warm), "process_s": median(s for s, _ in warm),
        "empty_numba_rrf_s": no_numba["rrf_s"], "empty_numba_process_s": no_numba_s,
        "first_ever_rrf_s": ever["rrf_s"], "first_ever_open_s": ever["open_s"], "first_ever_process_s": ever_s,
        "filling_process_s": filled_s, "repeat": args.repeat, "documents": first["documents"],
        "queries": first["queries"], "rrf_ndcg@10": first["rrf_ndcg@10"], "rrf_interval": first["rrf_interval"],
        "loaded_after_fusions": first["loaded"]}
    write_json(args.json, figures)
    print(f"fresh interpreters ({sys.executable}), median of {args.repeat}:")
    print(f"  python -m retrieval --help: {figures['cli_help_s']:.2f} s ({figures['cli_help_cpu_s']:.2f} s CPU)")
    print(f"  import retrieval.evaluation.metrics: {figures['leaf_import_s']:.2f} s "
          f"({figures['leaf_import_cpu_s']:.2f} s CPU); heavy modules it loaded: "
          f"{', '.join(leaf_loaded) or 'none'} (of {', '.join(HEAVY)})")
    print(f"the demo ({first['documents']} documents, {first['queries']} {first['split']} "
          f"queries), store and numba cache folder warm:")
    print(f"  opening it (imports, data set, BM25, encoder, dense index from the store): {figures['open_s']:.1f} s")
    print(f"  then RRF searched and evaluated (every metric, PNR, the view's 95% intervals): "
          f"{figures['first_rrf_s']:.2f} s (nDCG@10 {first['rrf_ndcg@10']:.4f} "
          f"[{first['rrf_interval'][0]:.3f}, {first['rrf_interval'][1]:.3f}]); the weighted sum after it: "
          f"{figures['first_wsum_s']:.2f} s; the whole process {figures['process_s']:.1f} s")
    if not args.skip_first_ever:
        print(f"first-ever: numba's cache folder empty (store warm): RRF {figures['empty_numba_rrf_s']:.2f} s, the "
              f"process {figures['empty_numba_process_s']:.1f} s; the store empty too (corpus and queries encoded, "
              f"BM25 built): opening {figures['first_ever_open_s']:.1f} s, RRF {figures['first_ever_rrf_s']:.2f} s, "
              f"the process {figures['first_ever_process_s']:.1f} s")
    print(f"cli_help_s={figures['cli_help_s']:.2f} leaf_import_s={figures['leaf_import_s']:.2f} "
          f"first_rrf_s={figures['first_rrf_s']:.2f}")
    return 0


if __name__ == "__main__":
    if "--first-fusions" in sys.argv:  # the child: nothing recorded
        sys.exit(main())
    sys.exit(recorded(main, __file__))
