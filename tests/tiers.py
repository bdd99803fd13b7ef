"""The fast tier, from measured durations: which tests are ``slow`` beyond those marked by hand.

``tests/tiers.json`` lists, by test function (parameters left out: a function is slow when one of
its cases is), the tests whose setup, call and teardown together took longer than its threshold in
a run of the whole suite on a 2-core machine; ``conftest.pytest_collection_modifyitems`` marks them
``slow``, so ``python -m pytest -m "not slow"`` (the edit-test loop) leaves them out. A test marked
``slow`` by hand stays so whatever it measured. Written anew from a run's durations log:

    python -m pytest -p tests.tiers --durations-log /tmp/durations.jsonl      # the whole suite, recorded
    python -m tests.tiers /tmp/durations.jsonl --threshold 3 --machine "AMD EPYC (Zen 5), 2 cores, busy"

The log holds one JSON line per test phase (``nodeid``, ``when``, ``seconds``), written as each
phase ends (xdist's workers report to the controller, which writes).

The same file keeps each test file's measured seconds (``files``): the run hands the files to xdist's
workers longest first (``in_order``, with pyproject's ``--no-loadscope-reorder``), so no long file starts
last while the other worker has nothing left to do. A file not measured yet goes first.
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

TIERS = Path(__file__).resolve().parent / "tiers.json"


def function_id(nodeid: str) -> str:
    """A test's id without its parameters: ``tests/x.py::test_y[a-b]`` → ``tests/x.py::test_y``."""
    return nodeid.split("[", 1)[0]


def slow_functions(path: Path = TIERS) -> frozenset[str]:
    """The test functions measured slow (``tiers.json``), none where the file is absent."""
    if not path.is_file():
        return frozenset()
    return frozenset(json.loads(path.read_text(encoding="utf-8"))["slow"])


def file_seconds(path: Path = TIERS) -> dict[str, float]:
    """Each test file's measured seconds (``tiers.json``'s ``files``), none where absent."""
    if not path.is_file():
        return {}
    files = json.loads(path.read_text(encoding="utf-8")).get("files", {})
    return {str(k): float(v) for k, v in files.items()} if isinstance(files, dict) else {}


def in_order(items: list, seconds: dict[str, float]) -> list:
    """``items`` grouped by file, the files longest first by ``seconds`` (a file not there first of all),
    each file's tests in their own order."""
    first_seen = {}
    for i, item in enumerate(items):
        first_seen.setdefault(item.nodeid.split("::", 1)[0], i)

    def key(item) -> tuple[float, int]:
        path = item.nodeid.split("::", 1)[0]
        return -seconds.get(path, float("inf")), first_seen[path]

    return sorted(items, key=key)  # stable: a file's tests keep their order


def pytest_addoption(parser) -> None:
    parser.addoption("--durations-log", default=None, help="append each test phase's duration here (JSON lines)")


def pytest_runtest_logreport(report) -> None:
    path = _LOG["path"]
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"nodeid": report.nodeid, "when": report.when, "seconds": report.duration}) + "\n")


_LOG: dict[str, str | None] = {"path": None}


def pytest_configure(config) -> None:
    # written by the process that sees every report once: the controller under xdist, not its workers
    _LOG["path"] = None if hasattr(config, "workerinput") else config.getoption("--durations-log")


def measured(log: Path) -> dict[str, float]:
    """Each test function's longest case, its phases summed, from a durations log."""
    per_case: dict[str, float] = defaultdict(float)
    for line in log.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            per_case[row["nodeid"]] += float(row["seconds"])
    out: dict[str, float] = defaultdict(float)
    for nodeid, seconds in per_case.items():
        out[function_id(nodeid)] = max(out[function_id(nodeid)], seconds)
    return dict(out)


def per_file(log: Path) -> dict[str, float]:
    """Each test file's phases summed, from a durations log."""
    out: dict[str, float] = defaultdict(float)
    for line in log.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            out[row["nodeid"].split("::", 1)[0]] += float(row["seconds"])
    return dict(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="write tests/tiers.json from a durations log")
    p.add_argument("log", type=Path)
    p.add_argument("--threshold", type=float, default=3.0, help="seconds over which a test is slow")
    p.add_argument("--machine", required=True, help="the machine and its load, in words")
    args = p.parse_args(argv)
    seconds = measured(args.log)
    slow = sorted(f for f, s in seconds.items() if s > args.threshold)
    files = {f: round(s, 1) for f, s in sorted(per_file(args.log).items())}
    TIERS.write_text(json.dumps({"machine": args.machine, "threshold_s": args.threshold, "slow": slow,
                                 "files": files}, indent=1) + "\n", encoding="utf-8")
    print(f"{len(slow)} of {len(seconds)} test functions over {args.threshold:g} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
