"""What the benchmark scripts share: the checkout on ``sys.path`` (importing this module puts it
there), where the shared data sets are, timing (one call, or the best of several), percentiles in
milliseconds, JSON output, the data set and store arguments, and the record of a run.

A run of a script as a program (``python bench/x.py ...``, through :func:`recorded`) is kept in
``bench/results/x.json``: the command, the date, the machine, what it printed, the ``key=value``
figures of its summary lines and what it passed to :func:`write_json`, one entry per command line
(a run of the same command replaces its entry). ``--json FILE`` writes that run to FILE instead.
The documentation's results pages are rendered from these files alone.

A script in ``bench/`` imports it as ``_common`` (Python puts the script's folder first on
``sys.path``); the tests load the scripts with ``bench/`` on the path too (``tests.conftest.bench_module``).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import platform
import re
import shlex
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
RESULTS = ROOT / "bench" / "results"  # one JSON file per script: its recorded runs
_RECORDING = "RANKSCOPE_BENCH_RECORDING"  # set while a run is recorded: a script's child processes record nothing
_run: dict | None = None  # the run being recorded in this process

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
    """Write ``obj`` as JSON to ``path`` (its folder made first); nothing when ``path`` is None.

    While a run is recorded, ``obj`` is also its structured figures (the record's ``data``)."""
    if _run is not None:
        _run["data"] = obj
    if not path:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=indent, default=str))


def chosen_sets(parser: argparse.ArgumentParser, listed: str, known: dict[str, Path]) -> list[str] | None:
    """The names of ``--sets`` (comma-separated) among ``known`` (name -> folder): an unknown name, or none,
    ends the run with the parser's error naming them; a folder that is absent here (the shared data sets
    beside the checkout) is said on stderr and gives None, the run recording nothing."""
    sets = [s.strip() for s in listed.split(",") if s.strip()]
    unknown = [s for s in sets if s not in known]
    if unknown or not sets:
        parser.error(f"choose sets from {', '.join(known)}, not {', '.join(unknown) or 'none'}")
    missing = [s for s in sets if not known[s].is_dir()]
    if missing:
        print(f"the shared data sets are absent here ({', '.join(str(known[s]) for s in missing)})", file=sys.stderr)
        return None
    return sets


def dataset_arg(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    """The positional data set (a BEIR folder or zip); optional when ``default`` is given."""
    if default is None:
        parser.add_argument("dataset", help="BEIR folder or zip (e.g. ../shared/datasets/scifact)")
    else:
        parser.add_argument("dataset", nargs="?", default=default, help=f"BEIR folder or zip (default: {default})")


def store_arg(parser: argparse.ArgumentParser, default: str = "the usual store") -> None:
    """``--store FILE``: the cache the benchmark reads and fills."""
    parser.add_argument("--store", default=None, help=f"cache file (default: {default})")


def json_arg(parser: argparse.ArgumentParser) -> None:
    """``--json FILE``: where this run is written (default: its entry in ``bench/results/<script>.json``)."""
    parser.add_argument("--json", default=None,
                        help="write this run's figures here (default: its entry in bench/results/<script>.json)")


def machine() -> str:
    """The CPU the figures were measured on, in words, with its class (``cpu_choice.cpu_class``: the
    name, family, model and the instruction flags that change kernels): "2 cores, AMD EPYC (family 25,
    model 1; avx2 fma) (Linux x86_64)"."""
    from retrieval.index.cpu_choice import cpu_class
    from retrieval.index.machine_load import cores

    return f"{cores()} cores, {cpu_class().label} ({platform.system()} {platform.machine()})"


def load() -> str:
    """The machine's load now, in words: "1-minute load average 0.42 on 2 cores (5 and 15 minutes: 0.61,
    0.80)"; a figure measured beside other work is not this code's alone."""
    from retrieval.index.machine_load import cores

    try:
        one, five, fifteen = os.getloadavg()
    except (AttributeError, OSError):
        return f"unknown (no load average on {platform.system()}), {cores()} cores"
    return f"1-minute load average {one:.2f} on {cores()} cores (5 and 15 minutes: {five:.2f}, {fifteen:.2f})"


def command_line(script: str, argv: list[str]) -> str:
    """``python bench/<script>.py ARGS`` with paths in the checkout or beside it written relative to it."""
    def short(arg: str) -> str:
        for base, name in ((ROOT, ""), (ROOT.parent, "..")):
            try:
                rel = Path(arg).resolve().relative_to(base)
            except (ValueError, OSError):
                continue
            return str(Path(name) / rel) if name else str(rel)
        return arg
    return shlex.join(["python", f"bench/{script}.py", *(short(a) if os.sep in a else a for a in argv)])


_WHERE = {"--json", "--store", "--work", "--out-dir"}  # where a run writes, not what it measures


def run_key(argv: list[str]) -> str:
    """A run's arguments without those that only say where it writes: two runs of one key replace each other."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _WHERE:
            skip = True
        elif arg.split("=", 1)[0] not in _WHERE:
            kept.append(arg)
    return shlex.join(kept)


_FIGURE = re.compile(r"^[A-Za-z_][\w@.]*=\S+(?:\s+[A-Za-z_][\w@.]*=\S+)*$")


def figures(lines: list[str]) -> dict[str, float | str]:
    """The ``key=value`` pairs of the summary lines a script prints last (numbers as numbers)."""
    out: dict[str, float | str] = {}
    for line in lines:
        if _FIGURE.match(line.strip()):
            for pair in line.split():
                key, value = pair.split("=", 1)
                try:
                    out[key] = float(value)
                except ValueError:
                    out[key] = value
    return out


class _Tee(io.TextIOBase):
    def __init__(self, stream):
        self.stream, self.text = stream, io.StringIO()

    def write(self, s):
        self.text.write(s)
        return self.stream.write(s)

    def flush(self):
        self.stream.flush()

    def isatty(self):
        return self.stream.isatty()


def recorded(main: Callable[[], int | None], script_file: str, argv: list[str] | None = None,
             keep_lines: int = 400) -> int:
    """Run ``main()`` as the script's program and keep the run (see the module's docstring); its exit status.

    Nothing is recorded when ``main`` fails (an exception or a non-zero status), nor in a process a
    recorded run started (the script's own workers)."""
    global _run
    script = Path(script_file).stem
    argv = sys.argv[1:] if argv is None else argv
    if os.environ.get(_RECORDING):
        return main() or 0
    path = next((a.split("=", 1)[1] for a in argv if a.startswith("--json=")), None)
    if path is None and "--json" in argv[:-1]:
        path = argv[argv.index("--json") + 1]
    _run = {"data": None}
    os.environ[_RECORDING] = "1"
    tee, real = _Tee(sys.stdout), sys.stdout
    sys.stdout = tee
    started = time.time()
    load_before = load()
    print(f"load at start: {load_before}", file=sys.stderr)  # every figure with the load it was measured at
    try:
        status = main() or 0
        load_after = load()
        print(f"load at end: {load_after}", file=sys.stderr)  # stdout's last line stays the figures
    finally:
        sys.stdout = real
        del os.environ[_RECORDING]
    if status:
        return status
    home = str(Path.home())  # the output names paths on this machine: the checkout as ., the home folder as ~
    lines = [line.rsplit("\r", 1)[-1].replace(str(ROOT), ".").replace(home, "~")
             for line in tee.text.getvalue().splitlines()]
    run = {"script": script, "command": command_line(script, argv), "key": run_key(argv),
           "date": time.strftime("%Y-%m-%d", time.localtime(started)), "seconds": round(time.time() - started, 1),
           "machine": machine(), "load": {"start": load_before, "end": load_after},
           "figures": figures(lines), "output": lines[-keep_lines:]}
    data = _run["data"]
    _run = None
    if path:  # the run alone, the script's own figures at the top level as before
        write_json(path, {**data, "run": run} if isinstance(data, dict) else {"data": data, "run": run})
        return 0
    record = RESULTS / f"{script}.json"
    kept = json.loads(record.read_text()) if record.is_file() else {"script": script, "runs": {}}
    kept["runs"][run["key"]] = {**run, "data": data}
    write_json(record, kept)
    return 0
