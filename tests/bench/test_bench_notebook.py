"""The lab notebook's generated tables (``bench/tools/notebook.py``): every table between markers in
``bench/README.md`` is exactly what its results JSON renders, so a figure pasted into one, or a bench
run again without regenerating, fails here; the generator changes nothing outside its markers and
refuses a marker it cannot honour in one line naming the file and line."""
from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import ROOT
from tests.regression.test_regression_figures import tools_module

nb = tools_module("notebook")


def test_every_generated_table_in_the_notebook_is_what_its_json_renders():
    text = nb.NOTEBOOK.read_text(encoding="utf-8")
    assert nb.stale(text) == [], "run python bench/tools/notebook.py and commit bench/README.md"
    assert {name for name, _, _ in nb.blocks(text)} == set(nb.VIEWS)  # every view is used, none twice
    assert len(nb.blocks(text)) == len(nb.VIEWS)


def test_a_figure_pasted_into_a_generated_table_is_caught_and_named():
    text = nb.NOTEBOOK.read_text(encoding="utf-8")
    name, start, end = next(b for b in nb.blocks(text) if b[0] == "reader_scaling")
    lines = text.split("\n")
    row = next(i for i in range(start, end) if lines[i].startswith("| qrels"))
    lines[row] = lines[row].replace("0.89", "0.91")
    assert nb.stale("\n".join(lines), path="README.md") == [
        f"README.md:{start + 1}: the table 'reader_scaling' is not what bench/results renders "
        "(python bench/tools/notebook.py rewrites it)"]
    assert nb.generate("\n".join(lines)) == text  # regenerating puts the recorded figure back


def test_a_new_run_of_a_bench_changes_its_table_and_nothing_outside_the_markers(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(ROOT / "bench" / "results", results)
    record = json.loads((results / "reader_scaling.json").read_text(encoding="utf-8"))
    run = record["runs"][""]["data"]
    run["rows_per_s"]["qrels (BEIR TSV)"]["1000000"] = 123456.4
    run["ratio"]["qrels (BEIR TSV)"] = 0.187
    (results / "reader_scaling.json").write_text(json.dumps(record), encoding="utf-8")
    text = nb.NOTEBOOK.read_text(encoding="utf-8")
    assert nb.stale(text, results) and len(nb.stale(text, results)) == 1
    new = nb.generate(text, results)
    assert "| qrels (BEIR TSV) | 658,224 / 641,075 / 123,456 | 0.19 |" in new
    old_lines, new_lines = text.split("\n"), new.split("\n")
    assert len(old_lines) == len(new_lines)
    assert [i for i, (a, b) in enumerate(zip(old_lines, new_lines)) if a != b] == [
        next(i for i, line in enumerate(new_lines) if "123,456" in line)]


def test_the_check_and_the_rewrite_as_commands(tmp_path, capsys):
    notebook = tmp_path / "README.md"
    notebook.write_text("# notes\n\n<!-- generated: reader_scaling -->\n| pasted |\n<!-- end generated -->\n"
                        "\nprose 0.54\n", encoding="utf-8")
    assert nb.main(["--check", "--notebook", str(notebook)]) == 1
    assert f"{notebook}:3: the table 'reader_scaling'" in capsys.readouterr().err
    assert nb.main(["--notebook", str(notebook)]) == 0
    text = notebook.read_text(encoding="utf-8")
    assert "| pasted |" not in text and text.startswith("# notes\n\n<!-- generated: reader_scaling -->\n| kind |")
    assert text.endswith("<!-- end generated -->\n\nprose 0.54\n")
    assert nb.main(["--check", "--notebook", str(notebook)]) == 0


@pytest.mark.parametrize(("text", "problem"), [
    ("a\n<!-- generated: no_such_view -->\n<!-- end generated -->\n", "README.md:2: no view named 'no_such_view'"),
    ("a\n<!-- generated: reader_scaling -->\nb\n", "README.md:2: the block 'reader_scaling' is never ended"),
    ("a\n<!-- end generated -->\n", "README.md:2: '<!-- end generated -->' without a block to end"),
    ("<!-- generated: reader_scaling -->\n<!-- generated: reader_scaling -->\n", "README.md:2: a generated block "
                                                                               "starts inside the one of line 1"),
])
def test_a_marker_it_cannot_honour_is_refused_naming_the_line(text, problem):
    with pytest.raises(nb.NotebookError) as caught:
        nb.generate(text, path="README.md")
    assert str(caught.value).startswith(problem)


def test_a_view_whose_run_was_never_recorded_is_refused_naming_the_file(tmp_path, capsys):
    notebook = tmp_path / "README.md"
    notebook.write_text("<!-- generated: reader_scaling -->\n<!-- end generated -->\n", encoding="utf-8")
    (tmp_path / "results").mkdir()
    assert nb.main(["--notebook", str(notebook), "--results", str(tmp_path / "results")]) == 2
    assert "reader_scaling.json: no recorded runs of bench/reader_scaling.py" in capsys.readouterr().err
    assert notebook.read_text(encoding="utf-8") == "<!-- generated: reader_scaling -->\n<!-- end generated -->\n"
