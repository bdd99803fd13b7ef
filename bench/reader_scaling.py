#!/usr/bin/env python
"""Is every file reader linear in its input? Rows per second of the real readers at 10,000, 100,000 and
1,000,000 lines, each size's rate beside the smallest size's, measured in the same run.

    python bench/reader_scaling.py [--sizes 10000,100000,1000000] [--quick] [--rows-per-judge 100] [--seed 0]
        [--work FOLDER]

Writes seeded files of each kind and size into ``--work`` (kept there; default: a temporary folder,
removed at the end; nothing is committed) and reads each once through the reader the app and the command line
use, after an untimed read of a small file of the same kind (first calls' imports and tables, such as
the look-alike table judge names are checked against, out of the timings):

- ``run, a tag per line``: a TREC run (``qid Q0 docid rank score tag``, 100 documents a query, best
  first: a larger run has more queries, as a system's run on a larger query set) whose every line
  carries its own tag, through ``readers.read_run`` — the run once read in O(lines²);
- ``run, one tag``: the same run with one tag, as a system writes it;
- ``judgments, many judges``: a judgments CSV (``query_id, doc_id, grade, judge``) over 1,000 queries
  and 1,000 documents with a new judge's name every ``--rows-per-judge`` rows (100: 10,000 judges in
  the 1,000,000-row file), through ``judgment_files.read`` — each new name is checked against every
  earlier one for a look-alike;
- ``qrels (BEIR TSV)``: ``query-id, corpus-id, score`` lines with their header, through
  ``readers.read_qrels``.

Prints, per kind, the rows per second at each size and ``rate(largest) / rate(smallest)``: about 1
for a linear reader (a little less as the process grows: memory and the garbage collector), 0.1 or
less for a quadratic one over a 10× step. ``--quick`` reads 1,000 and 4,000 lines (the test's size).
Last line: ``reader_rate_ratio=<x>``, the smallest of the kinds' ratios.
"""
from __future__ import annotations

import argparse
import functools
import gc
import random
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from _common import json_arg, recorded, timed, write_json  # first: it puts the checkout on sys.path

SIZES = (10_000, 100_000, 1_000_000)
QUICK = (1_000, 4_000)
WARM = 500  # lines of the untimed first read of each kind
DEPTH = 100  # documents a query in a run
QUERIES = 1_000  # in the judgments and qrels, and the data set the judgments are matched to
DOCS = 1_000


def write_run(path: Path, lines: int, tag_per_line: bool, seed: int) -> Path:
    """A TREC run of ``lines`` lines, ``DEPTH`` documents a query, each query's best first."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as f:
        for i in range(lines):
            rank = i % DEPTH + 1
            score = DEPTH - rank + rng.random() / 2
            f.write(f"q{i // DEPTH} Q0 d{i} {rank} {score!r} {f'tag-{i}' if tag_per_line else 'bm25'}\n")
    return path


def write_judgments(path: Path, lines: int, rows_per_judge: int, seed: int) -> Path:
    """A judgments CSV of ``lines`` rows, a new judge every ``rows_per_judge`` rows, no pair of a
    judge twice (the judge's rows run over distinct queries)."""
    rng = random.Random(seed + 1)
    with path.open("w", encoding="utf-8") as f:
        f.write("query_id,doc_id,grade,judge\n")
        for i in range(lines):
            f.write(f"q{i % QUERIES},d{(i // QUERIES) % DOCS},{rng.choice((0, 0, 1, 2))},judge-{i // rows_per_judge}\n")
    return path


def write_qrels(path: Path, lines: int, seed: int) -> Path:
    """A BEIR qrels TSV of ``lines`` labels (no pair twice) under its header."""
    rng = random.Random(seed + 2)
    with path.open("w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for i in range(lines):
            f.write(f"q{i % QUERIES}\td{i}\t{rng.choice((0, 1, 2))}\n")
    return path


def kinds(rows_per_judge: int, seed: int) -> dict[str, tuple[Callable[[Path, int], Path], Callable[[Path], object]]]:
    """Each kind's name -> (write a file of n lines at a path, read it through the real reader)."""
    from retrieval.data.dataset import Dataset, Document
    from retrieval.data.readers import judgment_files, read_qrels, read_run

    dataset = Dataset("bench", {f"d{d}": Document(f"d{d}", "", f"passage {d}") for d in range(DOCS)},
                      {f"q{q}": f"query {q}" for q in range(QUERIES)})
    return {
        "run, a tag per line": (lambda p, n: write_run(p, n, True, seed), read_run),
        "run, one tag": (lambda p, n: write_run(p, n, False, seed), read_run),
        "judgments, many judges": (lambda p, n: write_judgments(p, n, rows_per_judge, seed),
                                   lambda p: judgment_files.read(p, dataset, display=p.name)),
        "qrels (BEIR TSV)": (lambda p, n: write_qrels(p, n, seed), read_qrels),
    }


def measure(work: Path, sizes: list[int], rows_per_judge: int, seed: int) -> dict[str, dict[int, float]]:
    """Rows per second of each kind at each size (one read each, after an untimed small one)."""
    rates: dict[str, dict[int, float]] = {}
    for n, (kind, (write, read)) in enumerate(kinds(rows_per_judge, seed).items()):
        read(write(work / f"warm-{n}.txt", WARM))
        rates[kind] = {}
        for size in sizes:
            path = write(work / f"{n}-{size}{'.csv' if 'judgments' in kind else '.txt'}", size)
            gc.collect()
            result, seconds = timed(functools.partial(read, path))
            del result
            rates[kind][size] = size / seconds
    return rates


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default=",".join(str(s) for s in SIZES), help="lines of each file, comma-separated")
    p.add_argument("--quick", action="store_true", help=f"read {QUICK[0]:,} and {QUICK[1]:,} lines (seconds)")
    p.add_argument("--rows-per-judge", type=int, default=100, help="rows between two new judges' names")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work", default=None, help="folder for the generated files (default: a temporary one)")
    json_arg(p)
    args = p.parse_args(argv)
    sizes = sorted(set(QUICK if args.quick else (int(s) for s in args.sizes.split(","))))
    if len(sizes) < 2 or sizes[0] < 1 or args.rows_per_judge < 1:
        p.error("--sizes needs two or more positive sizes, --rows-per-judge a positive number")
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="rankscope-reader-scaling-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        rates = measure(work, sizes, args.rows_per_judge, args.seed)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    ratios = {kind: by_size[sizes[-1]] / by_size[sizes[0]] for kind, by_size in rates.items()}
    print(f"rows/s of each reader at {', '.join(f'{s:,}' for s in sizes)} lines (seed {args.seed}; a new judge every "
          f"{args.rows_per_judge:,} rows: {-(-sizes[-1] // args.rows_per_judge):,} judges at {sizes[-1]:,})")
    print(f"  {'kind':<24}" + "".join(f"{s:>12,}" for s in sizes) + f"  {'largest/smallest':>16}")
    for kind, by_size in rates.items():
        print(f"  {kind:<24}" + "".join(f"{by_size[s]:>12,.0f}" for s in sizes) + f"  {ratios[kind]:>16.2f}")
    write_json(None, {"sizes": sizes, "rows_per_judge": args.rows_per_judge, "seed": args.seed,
                      "rows_per_s": {kind: {str(s): r for s, r in by_size.items()} for kind, by_size in rates.items()},
                      "ratio": ratios})
    print(f"reader_rate_ratio={min(ratios.values()):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
