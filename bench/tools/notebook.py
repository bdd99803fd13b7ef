"""The lab notebook's tables (``bench/README.md``), generated from the benches' recorded runs
(``bench/results/*.json``) instead of pasted.

    python bench/tools/notebook.py           # rewrite every generated table in bench/README.md
    python bench/tools/notebook.py --check   # exit 1, naming each table, where the notebook differs

A generated table sits between two marker comments, and everything between them is this script's::

    <!-- generated: reader_scaling -->
    | kind | ... |
    <!-- end generated -->

The name after ``generated:`` is one of :data:`VIEWS`: which results file it reads, which recorded
run(s) of it, and how they are drawn as a Markdown table. Every number in a table is one of that
run's, rounded for reading (``tests/bench/test_bench_notebook.py`` holds the notebook to what its JSON
renders, so a figure cannot be pasted into a generated table, nor a table go stale when its bench is
run again). The notebook's prose, and the tables of runs recorded before the benches kept their runs
(no JSON to draw them from), stay written by hand.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "bench" / "README.md"
RESULTS = ROOT / "bench" / "results"
START = re.compile(r"^<!-- generated: ([a-z0-9_]+) -->$")
END = "<!-- end generated -->"


class NotebookError(ValueError):
    """A marker the notebook cannot be generated from: the message names the file, the line and the problem."""


def runs(results: Path, script: str) -> dict[str, dict]:
    """The recorded runs of ``bench/<script>.py`` by their key (``bench/_common.run_key``).

    Raises:
        NotebookError: There is no results file for the script.
    """
    path = results / f"{script}.json"
    if not path.is_file():
        raise NotebookError(f"{path}: no recorded runs of bench/{script}.py")
    return json.loads(path.read_text(encoding="utf-8"))["runs"]


def _run(results: Path, script: str, key: str) -> dict:
    recorded = runs(results, script)
    if key not in recorded:
        raise NotebookError(f"{results / (script + '.json')}: no run with the arguments {key!r}")
    return recorded[key]


def fixed(value: float, digits: int = 4) -> str:
    """``value`` to ``digits`` decimals, a minus sign as the notebook writes it (−)."""
    return f"{value:.{digits}f}".replace("-", "−")


def signed(value: float, digits: int = 4) -> str:
    """``value`` with its sign always written (+0.0068, −0.0118)."""
    return ("+" if value >= 0 else "") + fixed(value, digits)


def interval(bounds: list[float]) -> str:
    """A 95% interval as the notebook writes it: ``[0.692, 0.775]``."""
    return f"[{fixed(bounds[0], 3)}, {fixed(bounds[1], 3)}]"


def p_value(p: float) -> str:
    """A p-value to two significant places, or ``< 0.001``."""
    return "p < 0.001" if round(p, 3) < 0.001 else f"p {p:.2g}" if p < 0.1 else f"p {p:.2f}"


def grouped(value: float) -> str:
    """A whole number with thousands separators: ``239,560``."""
    return f"{round(value):,}"


def table(header: list[str], rows: list[list[str]], align: str) -> list[str]:
    """A Markdown table; ``align`` one letter a column: ``l`` left, ``r`` right."""
    rule = "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"
    head = ("| " + " | ".join(header) + " |").replace("|  |", "| |")
    return [head, rule, *("| " + " | ".join(row) + " |" for row in rows)]


# --------------------------------------------------------------------------------------------------
# the views


THREE_WAY = (("SciFact", "../shared/datasets/scifact"), ("NFCorpus", "../shared/datasets/nfcorpus"),
             ("Cranfield", "../shared/datasets/cranfield"), ("demo", "data/demo"))  # the runs' keys, in order
SINGLE = ("bm25", "dense", "splade")
SINGLE_NAMES = {"bm25": "BM25", "dense": "dense", "splade": "SPLADE"}


def quality_three_way(results: Path) -> list[str]:
    """``quality.py --systems hybrid,hybrid3,bm25,dense,splade`` on each data set: the CLEAR hybrid and
    the three-way fusion with their intervals, the fusion's paired difference, how μ was chosen, and
    the best single system."""
    rows = []
    for name, path in THREE_WAY:
        data = _run(results, "quality", f"{path} --systems hybrid,hybrid3,bm25,dense,splade")["data"]
        metrics, bounds = data["metrics"], data["intervals"]
        diff = data["against_first"]["hybrid3"]
        (mu,) = [w for w in data["weights"]["hybrid3"] if w["name"] == "μ"]
        best = max(SINGLE, key=lambda s: metrics[s]["ndcg@10"])
        rows.append([name, f"{fixed(metrics['hybrid']['ndcg@10'])} {interval(bounds['hybrid']['ndcg@10'])}",
                     f"{fixed(metrics['hybrid3']['ndcg@10'])} {interval(bounds['hybrid3']['ndcg@10'])}",
                     f"{signed(diff['delta'])} {interval(diff['interval'])}, {p_value(diff['p'])}",
                     f"{mu['value']:g}: {mu['how']}", f"{SINGLE_NAMES[best]} {fixed(metrics[best]['ndcg@10'])}"])
    return table(["", "CLEAR hybrid", "three-way (BM25 + dense + SPLADE)", "Δ", "μ", "best single system"],
                 rows, "lrrrlr")


def sparse_training_first(results: Path) -> list[str]:
    """``sparse_training.py`` on SciFact, 3 epochs: SPLADE-tiny and the three-way fusion, base against
    fine-tuned, nDCG@10 with intervals, and the paired difference with its p-value."""
    data = _run(results, "sparse_training", "../shared/datasets/scifact --epochs 3")["data"]["result"]
    metrics, p, diff = data["metrics"], data["significance"], data["differences"]
    rows = []
    for system, name in (("splade", "SPLADE-tiny"), ("hybrid3", "three-way fusion")):
        base, tuned = metrics["base"][system], metrics["fine-tuned"][system]
        rows.append([name, f"{fixed(base['ndcg@10'])} {interval(base['intervals']['ndcg@10'])}",
                     f"{fixed(tuned['ndcg@10'])} {interval(tuned['intervals']['ndcg@10'])}",
                     f"{signed(diff[system]['ndcg@10']['delta'])} {interval(diff[system]['ndcg@10']['interval'])}, "
                     f"{p_value(p[system]['ndcg@10'])}"])
    return table(["", "base", "fine-tuned", "fine-tuned − base"], rows, "lrrr")


READER_KINDS = {"run, a tag per line": "run, a tag per line", "run, one tag": "run, one tag",
                "judgments, many judges": "judgments, a new judge every 100 rows",
                "qrels (BEIR TSV)": "qrels (BEIR TSV)"}


def reader_scaling(results: Path) -> list[str]:
    """``reader_scaling.py`` at its default sizes: each reader's rows per second at every size and the
    largest size's rate against the smallest's."""
    data = _run(results, "reader_scaling", "")["data"]
    sizes = [str(s) for s in data["sizes"]]
    label = " / ".join(f"{int(s) // 1000:,}k" if int(s) < 1_000_000 else f"{int(s) // 1_000_000}M" for s in sizes)
    rows = [[READER_KINDS.get(kind, kind), " / ".join(grouped(rates[s]) for s in sizes),
             f"{data['ratio'][kind]:.2f}"] for kind, rates in data["rows_per_s"].items()]
    return table(["kind", f"rows/s at {label}", f"{label.split(' / ')[-1]} / {label.split(' / ')[0]}"], rows, "lrr")


EXPANSION_SETS = (("SciFact", "scifact"), ("NFCorpus", "nfcorpus"))
EXPANSION_METRICS = (("nDCG@10", "ndcg@10"), ("Recall@100", "recall@100"), ("Recall@1000", "recall@1000"))


def query_expansion(results: Path) -> list[str]:
    """``query_expansion.py`` on SciFact and NFCorpus: BM25 and RM3 with their intervals, and RM3 − BM25
    with the paired test's interval and p, for each metric."""
    data = _run(results, "query_expansion", "")["data"]
    rows = []
    for name, key in EXPANSION_SETS:
        for metric_name, metric in EXPANSION_METRICS:
            m = data[key][metric]
            rows.append([f"{name} ({data[key]['queries']} queries)", metric_name,
                         f"{fixed(m['bm25'][0])} {interval(m['bm25'][1:])}",
                         f"{fixed(m['rm3'][0])} {interval(m['rm3'][1:])}",
                         f"{signed(m['delta'][0])} {interval(m['delta'][1:])}, {p_value(m['p'])}"])
    return table(["", "metric", "BM25", "RM3", "RM3 − BM25"], rows, "llrrr")


QPP_SETS = (("demo", "demo"), ("SciFact", "scifact"), ("NFCorpus", "nfcorpus"), ("Cranfield", "cranfield"))
QPP_COLUMNS = ("NQC", "WIG", "clarity", "disagreement", "combined (label-free)", "combined (fitted, cross-fitted)")


def qpp(results: Path) -> list[str]:
    """``qpp.py`` on the four labelled corpora: per corpus and system, its mean nDCG@10 and Kendall's τ with
    nDCG@10 per query of NQC, WIG, clarity, the disagreement and both combinations, each with its bootstrap
    interval."""
    data = _run(results, "qpp", "")["data"]["sets"]
    rows = []
    for name, key in QPP_SETS:
        if key not in data:
            continue
        for system, r in data[key]["systems"].items():
            cells = []
            for column in QPP_COLUMNS:
                tau = r["predictors"].get(column, {}).get("tau")
                cells.append("—" if tau is None else f"{signed(tau[0], 3)} {interval([tau[1], tau[2]])}")
            rows.append([f"{name} ({data[key]['queries']})", system, fixed(r["mean_ndcg10"], 3), *cells])
    return table(["corpus (queries)", "system", "nDCG@10", "τ NQC", "τ WIG", "τ clarity", "τ disagreement",
                  "τ label-free", "τ fitted"], rows, "llrrrrrrr")


VIEWS: dict[str, Callable[[Path], list[str]]] = {
    "quality_three_way": quality_three_way,
    "sparse_training_first": sparse_training_first,
    "reader_scaling": reader_scaling,
    "query_expansion": query_expansion,
    "qpp": qpp,
}


# --------------------------------------------------------------------------------------------------
# the notebook


def blocks(text: str, path: Path | str = NOTEBOOK) -> list[tuple[str, int, int]]:
    """Each generated block as (its view's name, the line of its start marker, the line of its end
    marker), 0-based.

    Raises:
        NotebookError: A view that does not exist, a block that is not closed, an end without a start.
    """
    out, open_ = [], None
    for i, line in enumerate(text.split("\n")):
        start = START.match(line.strip())
        if start:
            if open_ is not None:
                raise NotebookError(f"{path}:{i + 1}: a generated block starts inside the one of line {open_[1] + 1}")
            if start[1] not in VIEWS:
                raise NotebookError(f"{path}:{i + 1}: no view named {start[1]!r} (known: {', '.join(VIEWS)})")
            open_ = (start[1], i)
        elif line.strip() == END:
            if open_ is None:
                raise NotebookError(f"{path}:{i + 1}: '{END}' without a block to end")
            out.append((open_[0], open_[1], i))
            open_ = None
    if open_ is not None:
        raise NotebookError(f"{path}:{open_[1] + 1}: the block '{open_[0]}' is never ended ('{END}')")
    return out


def generate(text: str, results: Path = RESULTS, path: Path | str = NOTEBOOK) -> str:
    """``text`` with every generated block's lines replaced by its view of ``results``; nothing outside
    the markers changes."""
    lines = text.split("\n")
    for name, start, end in reversed(blocks(text, path)):
        lines[start + 1:end] = VIEWS[name](results)
    return "\n".join(lines)


def stale(text: str, results: Path = RESULTS, path: Path | str = NOTEBOOK) -> list[str]:
    """One line per generated block whose text is not what its view renders: where it is and its name."""
    fresh = generate(text, results, path).split("\n")
    lines, out = text.split("\n"), []
    for (name, start, end), (_, new_start, new_end) in zip(blocks(text, path), blocks("\n".join(fresh), path)):
        if lines[start:end + 1] != fresh[new_start:new_end + 1]:
            out.append(f"{path}:{start + 1}: the table '{name}' is not what bench/results renders "
                       "(python bench/tools/notebook.py rewrites it)")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate bench/README.md's tables from bench/results/*.json.")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 where a table differs")
    parser.add_argument("--notebook", type=Path, default=NOTEBOOK, help="the notebook (default: %(default)s)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the results folder (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        text = args.notebook.read_text(encoding="utf-8")
        if args.check:
            differ = stale(text, args.results, args.notebook)
            for line in differ:
                print(line, file=sys.stderr)
            return 1 if differ else 0
        new = generate(text, args.results, args.notebook)
    except (OSError, NotebookError, KeyError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if new != text:
        part = args.notebook.with_name(args.notebook.name + ".part")
        part.write_text(new, encoding="utf-8")
        part.replace(args.notebook)
    print(f"{args.notebook}: {len(blocks(new))} generated tables, {'rewritten' if new != text else 'unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
