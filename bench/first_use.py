#!/usr/bin/env python
"""First use, in fresh processes: the demo's first UMAP projection and the smallest fine-tuning.

    python bench/first_use.py [--busy] [--model ID_OR_FOLDER] [--steps 5] [--skip-cold] [--skip-training]
        [--work DIR] [--numba-cache DIR] [--json FILE]

What the user waits for after a click, in a new interpreter (``sys.executable``, this checkout) that has
opened the bundled demo (``data/demo``) over a store where its corpus is already encoded (a first
process encodes it and builds BM25, as the app does when it starts, and with ``--skip-cold`` fills
numba's cache folder, as the app's first start has a process of its own do; every timed process gets
a copy of that store, so nothing it computes is found there):

* ``first_projection_s``: the Embeddings view's projection as ``ui.embeddings.project_view`` makes it,
  default settings (40 sampled queries of the default split, no fine-tuned encoder beside it): the
  sample (BM25, dense and hybrid runs at depth 1000), its embeddings, umap-learn imported and the UMAP
  fit; numba's cache folder (``NUMBA_CACHE_DIR``) filled by an earlier process, as on every start
  after an installation's first (``numba_guard.import_cached``);
* ``first_projection_cold_s``: the same with numba's cache folder empty (an installation's first
  projection: pynndescent's and UMAP's kernels compiled and written), run first: it fills the folder
  the warm figure reads;
* ``uncached_umap_projection_s``: the same, cache folder warm, umap-learn imported before RankScope
  (``import umap``: its decorators run as they come, as before ``import_cached``), so UMAP's own
  kernels compile again: what every new process paid before;
* ``smallest_training_s``: ``training.finetune.run_training`` as the app's job calls it, on the
  demo, 1 epoch of 5 steps (``--steps``), batch 8, inputs cut at 64 tokens, the default recipe
  otherwise (its held-out check included), the store's encodings at hand.

Each figure comes with the numba kernels its process compiled (``cache_misses``) and loaded
(``cache_hits``) in umap-learn and pynndescent, the process's wall clock and the load average before and
after. ``--busy``: one more process spinning (``while True: pass``) for the whole run, killed at the
end, as on a machine that does something else. ``--model``: another encoder than all-MiniLM-L6-v2
(the tests pass a tiny one); ``--skip-cold`` leaves out the empty-cache and the uncached runs, and then
``--numba-cache`` names a cache folder to use as it is (the tests pass the one their session fills).

Last line: ``first_projection_s=<x> first_projection_cold_s=<y> smallest_training_s=<z> busy=<0|1>``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import DEMO, ROOT, json_arg, machine, recorded, write_json  # first: it puts the checkout on sys.path
from retrieval.index import machine_load

NUMBA_PACKAGES = ("umap", "pynndescent")


def kernels() -> dict[str, int]:
    """numba kernels of umap-learn and pynndescent this process compiled (misses) and loaded from the cache (hits)."""
    from numba.core.registry import CPUDispatcher

    seen: dict[int, CPUDispatcher] = {}
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in NUMBA_PACKAGES:
            seen.update((id(v), v) for v in vars(module).values() if isinstance(v, CPUDispatcher))
    stats = [d.stats for d in seen.values()]
    return {"compiled": sum(sum(s.cache_misses.values()) for s in stats),
            "loaded": sum(sum(s.cache_hits.values()) for s in stats)}


def fill(store: str, model: str | None, warm: bool) -> dict:
    """In this process: the demo's corpus encoded and BM25 built into ``store`` (what the app's start does);
    ``warm``: numba's cache folder filled too (what the app's first start has a process of its own do)."""
    from retrieval.data.readers import load_dataset
    from retrieval.store import Store
    from retrieval.workspace import Workspace

    opened = Store(store)
    ws = Workspace(load_dataset(DEMO), opened, model=model)
    ws.build_dense()
    ws.build_lexical()
    out = {"documents": len(ws.dataset.docs)}
    opened.close()
    if warm:
        from retrieval.evaluation.projection import warm_up

        out["warm_up_s"] = warm_up()
    return out


def first_projection(store: str, model: str | None) -> dict:
    """In this (fresh) process: the demo opened over ``store``, then the Embeddings view's projection timed."""
    started = time.perf_counter()
    from retrieval.data.readers import load_dataset
    from retrieval.store import Store
    from retrieval.workspace import Workspace
    from ui.embeddings import project_view

    ds = load_dataset(DEMO)
    ws = Workspace(ds, Store(store), model=model)
    ws.build_dense()
    ws.build_lexical()
    opened = time.perf_counter()
    status, _, _, summary = project_view(ws, ds.default_split(), 40, "", "")
    done = time.perf_counter()
    return {"open_s": opened - started, "projection_s": done - opened, "fit_s": summary["seconds"][0],
            "points": summary["points"], "status": status, **kernels()}


def smallest_training(store: str, model: str | None, out_dir: str, steps: int) -> dict:
    """In this (fresh) process: the demo opened over ``store``, then the smallest fine-tuning timed."""
    started = time.perf_counter()
    from retrieval.data.readers import load_dataset
    from retrieval.store import Store
    from training.finetune import run_training
    from training.trainer import TrainConfig

    ds = load_dataset(DEMO)
    opened = Store(store)
    cfg = TrainConfig(epochs=1, max_steps_per_epoch=steps, batch_size=8, max_seq_length=64)
    ready = time.perf_counter()
    result = run_training(ds, cfg, out_dir, model, opened)
    done = time.perf_counter()
    return {"open_s": ready - started, "training_s": done - ready, "steps": len(result.losses),
            "device": result.device}


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def child(mode: str, numba: Path, *args: str, plain_umap: bool = False) -> dict:
    """A new interpreter running this script's ``mode`` with numba's cache in ``numba``: what it printed
    last (JSON), its wall clock and the load average before and after."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "NUMBA_CACHE_DIR": str(numba)}
    before_us = ("import os, runpy, sys, umap; sys.argv = sys.argv[1:]; "
                 "sys.path.insert(0, os.path.dirname(sys.argv[0])); runpy.run_path(sys.argv[0], run_name='__main__')")
    command = [sys.executable, *(["-c", before_us] if plain_umap else []),
               str(Path(__file__).resolve()), f"--{mode}", *args]
    before, start = _load(), time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{mode} failed:\n{done.stderr[-3000:]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "process_s": round(seconds, 2),
            "load_before": before, "load_after": _load()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--busy", action="store_true", help="one spinning process beside the run, killed at its end")
    p.add_argument("--model", default=None, help="encoder id or folder (default: the bundled all-MiniLM-L6-v2)")
    p.add_argument("--steps", type=int, default=5, help="optimizer steps of the smallest training")
    p.add_argument("--skip-cold", action="store_true", help="leave out the empty-cache and uncached-UMAP runs")
    p.add_argument("--skip-training", action="store_true", help="leave out the smallest training")
    p.add_argument("--work", default=None, help="folder for the stores and numba caches (default: a temporary one)")
    p.add_argument("--numba-cache", default=None,
                   help="with --skip-cold: numba's cache folder to use as it is (default: an empty one under --work)")
    p.add_argument("--fill", default=None, help=argparse.SUPPRESS)  # the children: one store, JSON out
    p.add_argument("--projection", default=None, help=argparse.SUPPRESS)
    p.add_argument("--training", nargs=2, default=None, help=argparse.SUPPRESS)
    json_arg(p)
    args = p.parse_args()
    if args.fill:
        print(json.dumps(fill(args.fill, args.model, args.skip_cold)))
        return 0
    if args.projection:
        print(json.dumps(first_projection(args.projection, args.model)))
        return 0
    if args.training:
        store, out_dir = args.training
        print(json.dumps(smallest_training(store, args.model, out_dir, args.steps)))
        return 0

    if args.numba_cache and not args.skip_cold:
        p.error("--numba-cache needs --skip-cold: the cold runs start from an empty folder")
    work = Path(args.work or tempfile.mkdtemp(prefix="rankscope-first-use-"))
    load_start = _load()
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.busy else None
    model = ["--model", args.model] if args.model else []
    runs: dict[str, dict] = {}
    try:
        filled, numba = work / "filled.sqlite3", Path(args.numba_cache or work / "numba")
        filled.unlink(missing_ok=True)
        if not args.numba_cache:
            shutil.rmtree(numba, ignore_errors=True)
        runs["fill"] = child("fill", numba, str(filled), *model, *(["--skip-cold"] if args.skip_cold else []))

        def copy(name: str) -> str:
            path = work / f"{name}.sqlite3"
            shutil.copyfile(filled, path)
            return str(path)

        if not args.skip_cold:
            shutil.rmtree(numba, ignore_errors=True)  # the filling process compiled no UMAP kernel: be sure
            runs["cold"] = child("projection", numba, copy("cold"), *model)
            runs["uncached"] = child("projection", numba, copy("uncached"), *model, plain_umap=True)
        runs["warm"] = child("projection", numba, copy("warm"), *model)
        if not args.skip_training:
            runs["training"] = child("training", numba, copy("training"), str(work / "model"), *model,
                                     "--steps", str(args.steps))
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)

    def figure(name: str, key: str) -> float | None:
        return round(runs[name][key], 2) if name in runs else None

    figures = {"first_projection_s": figure("warm", "projection_s"),
               "first_projection_cold_s": figure("cold", "projection_s"),
               "uncached_umap_projection_s": figure("uncached", "projection_s"),
               "smallest_training_s": figure("training", "training_s"), "busy": int(args.busy),
               "load_start": load_start, "load_end": _load(),
               "machine": machine(), "cores": machine_load.cores(), "runs": runs}
    write_json(args.json, figures)
    report(runs, figures)
    return 0


def report(runs: dict[str, dict], figures: dict) -> None:
    """The figures in words, then the summary line."""
    beside = "one spinning process beside the run" if figures["busy"] else "nothing of ours beside the run"
    print(f"{figures['machine']}; {beside}; load average {figures['load_start']} at the start, "
          f"{figures['load_end']} at the end")
    print(f"the demo ({runs['fill']['documents']} documents) encoded into a store by a first process "
          f"({runs['fill']['process_s']:.1f} s); each figure below a new interpreter over a copy of it:")
    for name, what in (("cold", "first projection, numba's cache folder empty"),
                       ("uncached", "first projection, cache warm, umap-learn imported as before (its kernels "
                                    "uncached)"),
                       ("warm", "first projection, cache warm")):
        if name in runs:
            r = runs[name]
            print(f"  {what}: {r['projection_s']:.1f} s (UMAP fit {r['fit_s']:.1f} s; kernels compiled "
                  f"{r['compiled']}, loaded {r['loaded']}; opening {r['open_s']:.1f} s, process {r['process_s']:.1f} "
                  f"s; load {r['load_before']} → {r['load_after']})")
    if "cold" in runs and "uncached" in runs:
        print(f"  cached ÷ uncached UMAP kernels, first projection: "
              f"{runs['warm']['projection_s'] / runs['uncached']['projection_s']:.2f}")
    if "training" in runs:
        r = runs["training"]
        print(f"  smallest fine-tuning ({r['steps']} steps of batch 8, 64 tokens, 1 epoch, {r['device']}): "
              f"{r['training_s']:.1f} s (opening {r['open_s']:.1f} s, process {r['process_s']:.1f} s; "
              f"load {r['load_before']} → {r['load_after']})")

    def shown(value: float | None) -> str:
        return "none" if value is None else f"{value:.2f}"

    print(f"first_projection_s={shown(figures['first_projection_s'])} "
          f"first_projection_cold_s={shown(figures['first_projection_cold_s'])} "
          f"smallest_training_s={shown(figures['smallest_training_s'])} busy={figures['busy']}")


if __name__ == "__main__":
    if any(flag in sys.argv for flag in ("--fill", "--projection", "--training")):  # a child: nothing recorded
        sys.exit(main())
    sys.exit(recorded(main, __file__))
