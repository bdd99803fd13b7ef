"""MkDocs hooks: the pages written from the code and the benchmarks when the site is built.

A page holds a marker where generated Markdown goes:

- ``<!-- rankscope:cli -->``: the command-line reference, each command's and subcommand's ``--help``
  from its own argparse parser (``retrieval.cli.build_parser``, ``training.cli.build_parser``,
  ``app.build_parser``);
- ``<!-- rankscope:results -->``: the measured results, rendered from ``bench/results/*.json`` (what
  ``bench/_common.recorded`` keeps of each run) and nothing else; a bench with no file yet is listed
  with the command its docstring gives;
- ``<!-- rankscope:layout -->``: every module of the library with the first line of its docstring;
- ``<!-- rankscope:systems -->``: every registered system (``retrieval.systems``) as it declares
  itself (``retrieval.systems.declared``): its key, label, what it is built on, its parameters with
  their ranges and defaults, what it gives beyond a list, and the paper it follows — so a system
  registered tomorrow is in the table without an edit here.

The repository's ``assets/`` (the screenshots) are served under ``assets/`` too. The renderers are
plain functions of their inputs, so ``tests/flows/test_docs.py`` calls them on small inputs.
"""
from __future__ import annotations

import ast
import html
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIDTH = "100"  # the terminal width argparse formats the help for: the same text on every machine


# --------------------------------------------------------------------------------------------------
# the command-line reference


def parsers() -> list[tuple[str, object]]:
    """(the command, its argparse parser) for each program RankScope ships."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import app
    from retrieval import cli as retrieval_cli
    from training import cli as training_cli

    return [("python -m retrieval", retrieval_cli.build_parser()), ("python -m training", training_cli.build_parser()),
            ("python app.py", app.build_parser())]


def subcommands(parser) -> dict[str, object]:
    """A parser's subcommands by name, in the order they were added ({} for a parser without)."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _help(parser) -> str:
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        return parser.format_help().rstrip()
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def render_cli(programs: list[tuple[str, object]]) -> str:
    """Markdown: for each program a section with its ``--help``, then one per subcommand."""
    out: list[str] = []
    for command, parser in programs:
        out += [f"## `{command}`", "", "```text", _help(parser), "```", ""]
        for name, sub in subcommands(parser).items():
            out += [f"### `{command} {name}`", "", "```text", _help(sub), "```", ""]
    return "\n".join(out)


# --------------------------------------------------------------------------------------------------
# the systems table


def registered_systems() -> list:
    """Every registered system, in the order the views list them."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from retrieval import systems

    return [systems.builtin(key) for key in systems.keys()]


SCORE_WHY = {"dense": "the query words and passages that carry its score",
             "split": "its score split into λ-weighted BM25 and dense parts"}  # ``Capabilities.explains_score``


def render_systems(systems: list) -> str:
    """Markdown: one row per system, from its declarations alone."""
    rows = []
    for s in systems:
        params = "; ".join(f"`{s.key}.{p.name}`: {p.doc}, {p.range_text} (default {p.default})"
                           for p in s.parameters) or "—"
        built = (", ".join(f"`{k}`" for k in s.relations.based_on) + f": {s.relations.relation}"
                 if s.relations.based_on else "—")
        gives = ["exact scores of any document"] if s.capabilities.exact_scores else []
        if s.capabilities.explanation:
            gives.append("explains " + ", ".join(sorted(s.capabilities.explanation)) + " terms")
        if s.capabilities.explains_score:  # what ``explain_score`` gives (``declared.SCORE_EXPLANATIONS``)
            gives.append(SCORE_WHY[s.capabilities.explains_score])
        cited = s.citation.text if s.citation is not None else "—"
        shown = "" if s.shown_by_default else " (on request)"
        rows.append([f"`{s.key}`", s.label + shown, built, params, "; ".join(gives) or "—", cited])
    header = ["key", "system", "built on", "parameters (`--param`)", "gives", "follows"]
    return "\n".join(_table(header, rows))


# --------------------------------------------------------------------------------------------------
# the measured results


def number(value: float | int) -> str:
    """A JSON number as the results pages print it: integers whole, others to at most 4 decimals."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        return str(int(value))
    if value != value or value in (float("inf"), float("-inf")):
        return str(value)
    if abs(value) >= 1e-4:
        return f"{value:.4f}".rstrip("0").rstrip(".")
    return f"{value:.3g}"


def _cell(value) -> str:
    if isinstance(value, (int, float)):  # bool included: number() writes true / false
        text = number(value)
    elif value is None:
        text = "—"
    elif isinstance(value, str):
        text = value
    elif isinstance(value, list) and all(isinstance(v, (int, float)) for v in value):
        text = "[" + ", ".join(number(v) for v in value) + "]"
    else:
        text = json.dumps(_rounded(value), ensure_ascii=False)
    return text.replace("|", "\\|").replace("\n", " ")


def _rounded(value):
    if isinstance(value, float):
        return float(number(value)) if number(value) not in ("nan", "inf", "-inf") else number(value)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _scalar(value) -> bool:
    return value is None or isinstance(value, (str, int, float, bool)) or (
        isinstance(value, list) and all(isinstance(v, (int, float)) for v in value) and len(value) <= 4)


def _table(header: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out + [""]


def render_data(data, depth: int = 0, limit: int = 60) -> list[str]:
    """Markdown lines for any JSON value: scalars in a key/value table, a list of records or a
    mapping of records as a table, deeper values under their key; nothing that is not in ``data``."""
    if _scalar(data):
        return [_cell(data), ""]
    if isinstance(data, list):
        if data and all(isinstance(r, dict) for r in data):
            columns = list(dict.fromkeys(k for r in data for k in r if _scalar(r[k])))
            lines = _table(columns, [[r.get(c) for c in columns] for r in data[:limit]]) if columns else []
            deeper = [(i, r) for i, r in enumerate(data[:limit]) if any(not _scalar(v) for v in r.values())]
            if deeper and depth < 2:
                for i, r in deeper:
                    sub = render_data({k: v for k, v in r.items() if not _scalar(v)}, depth + 1, limit)
                    lines += [f"*item {i + 1}:*", "", *sub] if any(line.strip() for line in sub) else []
            return lines
        return ["`" + _cell(data[:limit]) + "`", ""]
    scalars = {k: v for k, v in data.items() if _scalar(v)}
    nested = {k: v for k, v in data.items() if not _scalar(v)}
    lines: list[str] = []
    if scalars:
        lines += _table(["", "value"], [[k, v] for k, v in scalars.items()])
    records = {k: v for k, v in nested.items() if isinstance(v, dict) and v and all(_scalar(x) for x in v.values())}
    if len(records) >= 2:
        columns = list(dict.fromkeys(c for v in records.values() for c in v))
        lines += _table(["", *columns], [[k, *(v.get(c) for c in columns)] for k, v in list(records.items())[:limit]])
        nested = {k: v for k, v in nested.items() if k not in records}
    for key, value in nested.items():
        if not value:
            continue
        if depth >= 3:
            lines += [f"**{_cell(key)}**: `{_cell(value)}`", ""]
        else:
            sub = render_data(value, depth + 1, limit)
            lines += [f"**{_cell(key)}**", "", *sub] if any(line.strip() for line in sub) else []
    return lines


def documented_command(script: Path) -> str:
    """The command a bench script's docstring gives (its indented ``python bench/...`` lines)."""
    doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith(f"python bench/{script.name}"):
            cont = [line.strip()]
            for nxt in lines[i + 1:]:
                if not nxt.startswith("    ") or not nxt.strip() or nxt.strip().startswith("python "):
                    break
                cont.append(nxt.strip())
            return " ".join(cont)
    return f"python bench/{script.name}"


def summary_line(script: Path) -> str:
    doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    first = doc.split("\n\n")[0]
    return " ".join(first.split())


_NOISE = re.compile(r"it/s\]|s/it\]|^\s*$")


def render_run(run: dict) -> list[str]:
    """One recorded run: its command, when and where, its key figures, its data, what it printed."""
    lines = [f"### `{run['command']}`", "",
             f"Run on {run.get('date', '?')}, {run.get('machine', 'an unrecorded machine')}"
             + (f", {number(run['seconds'])} s." if isinstance(run.get("seconds"), (int, float)) else "."), ""]
    if run.get("figures"):
        lines += ["Summary figures:", ""] + _table(["", "value"], list(map(list, run["figures"].items())))
    if run.get("data") is not None:
        lines += ["<details><summary>Everything it wrote</summary>", "", *render_data(run["data"]), "</details>", ""]
    output = [line for line in run.get("output", []) if not _NOISE.search(line)]
    if output:
        lines += ["<details><summary>What it printed</summary>", "",
                  "<pre>" + html.escape("\n".join(output)) + "</pre>", "", "</details>", ""]
    return lines


def render_results(results: Path, bench: Path) -> str:
    """Markdown for every bench script in ``bench``: its recorded runs from ``results/<script>.json``
    (newest first), or, where none is recorded, the command that records one."""
    scripts = sorted(p for p in bench.glob("*.py") if not p.name.startswith("_"))
    done, missing = [], []
    for script in scripts:
        record = results / f"{script.stem}.json"
        if not record.is_file():
            missing.append(script)
            continue
        runs = sorted(json.loads(record.read_text(encoding="utf-8")).get("runs", {}).values(),
                      key=lambda r: r.get("date", ""), reverse=True)
        done += [f"## `{script.name}`", "", summary_line(script), ""]
        for run in runs:
            done += render_run(run)
    out = done
    if missing:
        out += ["## Benches with no recorded results yet", "",
                "Each writes its results to `bench/results/<script>.json` when run as below; the page then shows them.",
                ""]
        out += [f"- `{s.name}`: {summary_line(s)}  \n  `{documented_command(s)}`" for s in missing] + [""]
    return "\n".join(out)


# --------------------------------------------------------------------------------------------------
# the package layout


def render_layout(package: Path) -> str:
    """A table per package folder: each module and the first line of its docstring."""
    out: list[str] = []
    folders = sorted({p.parent for p in package.rglob("*.py") if "__pycache__" not in p.parts})
    for folder in folders:
        rel = folder.relative_to(package.parent).as_posix()
        rows = []
        for module in sorted(folder.glob("*.py")):
            doc = ast.get_docstring(ast.parse(module.read_text(encoding="utf-8"))) or ""
            rows.append([f"`{module.name}`", " ".join(doc.split("\n\n")[0].split())])
        out += [f"**`{rel}/`**", "", "| module | what it holds |", "|---|---|"]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows] + [""]
    return "\n".join(out)


# --------------------------------------------------------------------------------------------------
# the MkDocs events


def on_files(files, config):
    """Serve the repository's screenshots under ``assets/``."""
    from mkdocs.structure.files import File

    for image in sorted((ROOT / "assets").glob("*.png")):
        files.append(File.generated(config, f"assets/{image.name}", abs_src_path=str(image)))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    if "<!-- rankscope:cli -->" in markdown:
        markdown = markdown.replace("<!-- rankscope:cli -->", render_cli(parsers()))
    if "<!-- rankscope:results -->" in markdown:
        markdown = markdown.replace("<!-- rankscope:results -->",
                                    render_results(ROOT / "bench" / "results", ROOT / "bench"))
    if "<!-- rankscope:systems -->" in markdown:
        markdown = markdown.replace("<!-- rankscope:systems -->", render_systems(registered_systems()))
    if "<!-- rankscope:layout -->" in markdown:
        markdown = markdown.replace("<!-- rankscope:layout -->", render_layout(ROOT / "retrieval"))
    return markdown


def on_serve(server, config, builder):
    """``mkdocs serve`` rebuilds when a bench records a run."""
    server.watch(str(ROOT / "bench" / "results"))
    return server
