"""The expected figures: data set × system × metric → value ± tolerance, checked in as
``bench/expected_figures.yaml`` and measured the way a user measures them.

    python bench/tools/expected_figures.py            # measure every entry and hold it against its pin
    python bench/tools/expected_figures.py --update   # measure and rewrite the values: then review the diff

As Pyserini's two-click reproductions (Lin et al., "Pyserini: A Python Toolkit for Reproducible
Information Retrieval Research with Sparse and Dense Representations", SIGIR 2021, §3: each
condition's figures pinned in a YAML file the regressions are checked against), the file pins what
RankScope gives on the shared BEIR sets (``../shared/datasets``, their test split), so a change to an
index, a tokenizer or a metric that moves a figure fails a test (``tests/regression/test_regression_figures.py``,
marker ``regression``) instead of passing unnoticed. A deliberate change is this script's
``--update`` (one writer, :func:`render`, rewrites the whole file: values, never tolerances) and a
reviewed diff.

Each data set is measured by one ``python -m retrieval evaluate`` process (:func:`command`): the
command line's own path, with no store (nothing cached from a run before), the encoder on the CPU in
fp32 (the automatic precision picks bf16 where a quick timing favours it, which would make the figure
depend on the machine's load). An entry may carry Pyserini's published figure for the same condition
beside ours (``reference``): ours is not expected to equal it (the tokenizers differ), so it is shown,
never checked.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ROOT / "bench" / "expected_figures.yaml"
SHARED = ROOT.parent / "shared" / "datasets"  # the BEIR sets, where present
DIGITS = 6  # a value is written to 6 decimals: the smallest tolerance (1e-4) stays 100× its rounding
_NAME = re.compile(r"[a-z0-9][a-z0-9@._-]*")  # data set, split, system and metric names as written
_FIELDS = ("dataset", "split", "system", "metric", "value", "tolerance", "reference")
_REQUIRED = _FIELDS[:-1]

HEADER = """\
# Expected figures: what RankScope gives on the shared BEIR sets (../shared/datasets), data set ×
# system × metric → value ± tolerance, as Pyserini pins its two-click reproductions. Checked by
# tests/regression/test_regression_figures.py (pytest marker "regression", part of the default run; skipped
# where ../shared/datasets is absent), each data set measured by one
#     python -m retrieval evaluate DATASET --no-store --device cpu --precision fp32 --split SPLIT --systems ...
# Written by one writer: a deliberate change is
#     python bench/tools/expected_figures.py --update
# and a reviewed diff; do not edit the values by hand (the tolerances and references are kept as written).
#
# Tolerances:
# - bm25, ql: 0.0001. Integer term counts and float32 sums in a fixed order, the same on every CPU;
#   a tie at the cut is broken by one rule. The tolerance absorbs rounding, nothing else: any change
#   to tokenizing, scoring, ranking or a metric shows.
# - dense, hybrid: 0.001. The encoder in fp32 on the CPU and FAISS's flat inner products sum in the
#   order the CPU's kernels choose (AVX2, AVX-512), which can swap two documents whose scores differ in
#   the seventh digit. Measured for scale: bf16 against fp32, a far larger perturbation, moved SciFact's
#   dense nDCG@10 by 0.0007 (bench/README.md, "Quality").
# Dense and hybrid are pinned on Cranfield (1,398 documents) only: encoding it takes about a minute
# on 2 CPU cores; NFCorpus (3,633) and SciFact (5,183) each take over two and would make the tier slow.
#
# reference: Pyserini's published BM25 flat figure for the same data set and metric (its 2CR BEIR
# condition beir-flat: Lucene's analyzer, k1 0.9, b 0.4, title and text as one field). Shown for
# context, never checked: our tokenizer (Lucene stopwords, Snowball stemmer) is not Lucene's analyzer.
"""


class FiguresError(ValueError):
    """The expected-figures file cannot be read: the message names the file, the line and the problem."""


@dataclass(frozen=True)
class Figure:
    """One pinned figure.

    Attributes:
        dataset: The shared data set's folder name (``scifact``).
        split: The labelled split evaluated (``test``).
        system: The system as the command line names it (``bm25``).
        metric: The metric as ``retrieval.evaluation.metrics`` names it (``ndcg@10``).
        value: What the system gave when the file was last written.
        tolerance: How far a measurement may be from ``value`` and still pass.
        reference: A published figure for the same condition, shown beside ours; None where there is none.
        line: The line of the entry in the file it was read from (0: not read from a file).
    """

    dataset: str
    split: str
    system: str
    metric: str
    value: float
    tolerance: float
    reference: float | None = None
    line: int = 0

    @property
    def key(self) -> tuple[str, str, str, str]:
        return self.dataset, self.split, self.system, self.metric

    def holds(self, got: float) -> bool:
        """Whether ``got`` is within the tolerance of the pinned value (a NaN never is)."""
        return math.isfinite(got) and abs(got - self.value) <= self.tolerance * (1 + 1e-9)


def _number(value, name: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise FiguresError(f"{where}: {name} must be a finite number, not {value!r}")
    return float(value)


def parse(text: str, path: Path | str = FIGURES) -> list[Figure]:
    """The figures a file's text holds, each checked.

    Args:
        text: The file's text (YAML: a mapping with a ``figures`` list of mappings).
        path: The file's name, for the messages.

    Returns:
        The figures in the file's order.

    Raises:
        FiguresError: The text is not such YAML, an entry lacks a field or has an unknown one, a name
            is not a plain lower-case name, a number is not finite, a tolerance is not positive, or two
            entries pin the same figure; one line naming the file, the line and the problem.
    """
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise FiguresError(f"{path}{line}: not YAML ({getattr(exc, 'problem', None) or exc})") from None
    data = yaml.safe_load(text)
    if not isinstance(data, dict) or not isinstance(data.get("figures"), list) or root is None:
        raise FiguresError(f"{path}:1: expected a mapping with a 'figures' list")
    nodes = next(v for k, v in root.value if k.value == "figures").value
    out: list[Figure] = []
    seen: dict[tuple, int] = {}
    for node, entry in zip(nodes, data["figures"]):
        line = node.start_mark.line + 1
        where = f"{path}:{line}"
        if not isinstance(entry, dict):
            raise FiguresError(f"{where}: an entry must be a mapping of {', '.join(_FIELDS)}")
        unknown = sorted(set(map(str, entry)) - set(_FIELDS))
        missing = [f for f in _REQUIRED if f not in entry]
        if unknown or missing:
            raise FiguresError(f"{where}: " + "; ".join(
                ([f"unknown field(s) {', '.join(unknown)}"] if unknown else [])
                + ([f"missing {', '.join(missing)}"] if missing else [])))
        for name in ("dataset", "split", "system", "metric"):
            if not isinstance(entry[name], str) or not _NAME.fullmatch(entry[name]):
                raise FiguresError(f"{where}: {name} must be a lower-case name such as 'ndcg@10', "
                                   f"not {entry[name]!r}")
        tolerance = _number(entry["tolerance"], "tolerance", where)
        if tolerance <= 0:
            raise FiguresError(f"{where}: tolerance must be above 0, not {entry['tolerance']!r}")
        reference = entry.get("reference")
        figure = Figure(entry["dataset"], entry["split"], entry["system"], entry["metric"],
                        _number(entry["value"], "value", where), tolerance,
                        None if reference is None else _number(reference, "reference", where), line)
        if figure.key in seen:
            raise FiguresError(f"{where}: {' '.join(figure.key)} is pinned twice (first on line {seen[figure.key]})")
        seen[figure.key] = line
        out.append(figure)
    return out


def load(path: Path = FIGURES) -> list[Figure]:
    """The figures of the file at ``path`` (:func:`parse`)."""
    return parse(path.read_text(encoding="utf-8"), path)


def _float(value: float) -> str:
    """A float as YAML 1.1 reads it back as the same float (``1e-09`` would read as a string)."""
    text = repr(float(value))
    mantissa, e, exponent = text.partition("e")
    if e and "." not in mantissa:
        text = f"{mantissa}.0e{exponent if exponent[0] in '+-' else '+' + exponent}"
    return text


def _name(value: str) -> str:
    """A name plain where YAML reads it back as that string, else quoted (``'0'``, ``'null'``, ``'yes'``)."""
    import yaml

    return value if yaml.safe_load(value) == value else f"'{value}'"


def render(figures: Iterable[Figure]) -> str:
    """The file's whole text: the header, then one entry a line in the given order. The one writer of
    the file (``--update`` goes through it), so a rewrite changes only the values that moved."""
    lines = [HEADER, "figures:"]
    for f in figures:
        fields = [f"dataset: {_name(f.dataset)}", f"split: {_name(f.split)}", f"system: {_name(f.system)}",
                  f"metric: {_name(f.metric)}", f"value: {_float(round(f.value, DIGITS))}",
                  f"tolerance: {_float(f.tolerance)}"]
        if f.reference is not None:
            fields.append(f"reference: {_float(f.reference)}")
        lines.append("  - {" + ", ".join(fields) + "}")
    if len(lines) == 2:
        lines[1] = "figures: []"
    return "\n".join(lines) + "\n"


def write(figures: Iterable[Figure], path: Path = FIGURES) -> None:
    """Write ``figures`` to ``path`` whole (a part file renamed over it), or leave it as it was."""
    part = path.with_name(path.name + ".part")
    part.write_text(render(figures), encoding="utf-8")
    os.replace(part, path)


def command(dataset: Path, split: str, systems: Iterable[str], out: Path) -> list[str]:
    """The evaluation of one data set: the command line's ``evaluate``, nothing cached, fp32 on the CPU,
    every system's metrics written to ``out`` as JSON."""
    return [sys.executable, "-m", "retrieval", "evaluate", str(dataset), "--no-store", "--device", "cpu",
            "--precision", "fp32", "--split", split, "--systems", ",".join(dict.fromkeys(systems)),
            "--json", str(out), "--no-ci"]


def measure(dataset: Path, split: str, systems: Iterable[str], timeout: float = 3600) -> dict[str, dict[str, float]]:
    """Each system's mean metrics on ``dataset``'s ``split``, from one ``python -m retrieval evaluate`` process.

    Raises:
        RuntimeError: The command failed: its exit status and the end of what it wrote on stderr.
    """
    with tempfile.TemporaryDirectory(prefix="rankscope-figures-") as work:
        out = Path(work) / "evaluation.json"
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
               "RANKSCOPE_HOME": work}  # nothing the user's home keeps (a store, a precision choice) is read
        proc = subprocess.run(command(dataset, split, systems, out), cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=timeout)
        if proc.returncode != 0 or not out.is_file():
            raise RuntimeError(f"{' '.join(command(dataset, split, systems, out))} exited {proc.returncode}: "
                               f"{proc.stderr.strip()[-1500:]}")
        report = json.loads(out.read_text(encoding="utf-8"))
    return {system: {m: float(v) for m, v in row["metrics"].items()} for system, row in report["systems"].items()}


def measure_all(figures: Iterable[Figure], shared: Path = SHARED) -> dict[tuple[str, str], dict[str, dict[str, float]]]:
    """:func:`measure` once per (data set, split) of ``figures``, with every system they name."""
    wanted: dict[tuple[str, str], list[str]] = {}
    for f in figures:
        wanted.setdefault((f.dataset, f.split), []).append(f.system)
    return {(d, s): measure(shared / d, s, systems) for (d, s), systems in wanted.items()}


def got(figure: Figure, measured: dict[tuple[str, str], dict[str, dict[str, float]]]) -> float:
    """The measured value of ``figure`` (NaN where the evaluation did not report it)."""
    return measured.get((figure.dataset, figure.split), {}).get(figure.system, {}).get(figure.metric, math.nan)


def miss(figure: Figure, value: float) -> str | None:
    """None where ``value`` holds the pin, else one line naming the data set, system, metric, expected and got."""
    if figure.holds(value):
        return None
    return (f"{figure.dataset} ({figure.split}) {figure.system} {figure.metric}: expected {figure.value:.6f} "
            f"± {figure.tolerance:g}, got {value:.6f} (Δ {value - figure.value:+.6f})")


def updated(figures: Iterable[Figure], measured: dict[tuple[str, str], dict[str, dict[str, float]]]) -> list[Figure]:
    """``figures`` with their measured values (tolerances and references as they were).

    Raises:
        ValueError: An entry's figure was not measured (an unknown metric or system): nothing is written.
    """
    out = []
    for f in figures:
        value = got(f, measured)
        if not math.isfinite(value):
            raise ValueError(f"{FIGURES.name}:{f.line}: {' '.join(f.key)} was not measured")
        out.append(replace(f, value=value))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Measure the expected figures (bench/expected_figures.yaml).")
    parser.add_argument("--update", action="store_true", help="rewrite the file's values with what was measured")
    parser.add_argument("--file", type=Path, default=FIGURES, help="the figures file (default: %(default)s)")
    parser.add_argument("--shared", type=Path, default=SHARED, help="where the data sets are (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        figures = load(args.file)
    except (OSError, FiguresError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    absent = sorted({f.dataset for f in figures if not (args.shared / f.dataset / "corpus.jsonl").is_file()})
    if absent:
        print(f"error: {args.shared} lacks {', '.join(absent)}", file=sys.stderr)
        return 2
    measured = measure_all(figures, args.shared)
    misses = [m for f in figures if (m := miss(f, got(f, measured)))]
    for f in figures:
        ref = f"  (reference {f.reference:.4f})" if f.reference is not None else ""
        print(f"{f.dataset:<10} {f.system:<7} {f.metric:<11} {got(f, measured):.6f}  pinned {f.value:.6f} "
              f"± {f.tolerance:g}{ref}")
    if args.update:
        write(updated(figures, measured), args.file)
        print(f"{args.file}: {len(misses)} of {len(figures)} values changed beyond their tolerance; review the diff")
        return 0
    for line in misses:
        print(line, file=sys.stderr)
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
