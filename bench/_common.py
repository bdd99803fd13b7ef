"""What the benchmark scripts share: the checkout on ``sys.path`` (importing this module puts it
there), where the shared data sets are, timing (one call, or the best of several), percentiles in
milliseconds, JSON output, and the data set and store arguments.

A script in ``bench/`` imports it as ``_common`` (Python puts the script's folder first on
``sys.path``); the tests load the scripts with ``bench/`` on the path too (``tests.conftest.bench_module``).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SHARED = ROOT.parent / "shared" / "datasets"  # the BEIR sets the benchmarks read, where present
DEMO = ROOT / "data" / "demo"

T = TypeVar("T")


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """(what ``fn()`` returned, the seconds it took)."""
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def best_of(fn: Callable[[], T], repeat: int, warm_up: bool = False) -> tuple[float, T]:
    """(the best seconds of ``repeat`` timed calls, the last call's result); ``warm_up``: one
    untimed call first."""
    result = fn() if warm_up else None
    best = float("inf")
    for _ in range(repeat):
        result, seconds = timed(fn)
        best = min(best, seconds)
    return best, result


def percentile_ms(seconds, q: float) -> float:
    """The ``q``-th percentile of durations given in seconds, in milliseconds."""
    import numpy as np

    return float(np.percentile(np.asarray(seconds, dtype=float) * 1000, q))


def write_json(path: str | Path | None, obj, indent: int | None = 2) -> None:
    """Write ``obj`` as JSON to ``path`` (its folder made first); nothing when ``path`` is None."""
    if not path:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=indent, default=str))


def dataset_arg(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    """The positional data set (a BEIR folder or zip); optional when ``default`` is given."""
    if default is None:
        parser.add_argument("dataset", help="BEIR folder or zip (e.g. ../shared/datasets/scifact)")
    else:
        parser.add_argument("dataset", nargs="?", default=default, help=f"BEIR folder or zip (default: {default})")


def store_arg(parser: argparse.ArgumentParser, default: str = "the usual store") -> None:
    """``--store FILE``: the cache the benchmark reads and fills."""
    parser.add_argument("--store", default=None, help=f"cache file (default: {default})")
