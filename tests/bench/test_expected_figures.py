"""The expected-figures file and its one writer (``bench/tools/expected_figures.py``): the checked-in
file is exactly what the writer writes, any figures round-trip through it, a damaged file is refused
in one line naming the file, the line and the problem, a miss names what was pinned and what was
measured, and ``--update`` on a real data set rewrites the values the command line measures."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import DEMO
from tests.regression.test_regression_figures import tools_module

ef = tools_module("expected_figures")

names = st.from_regex(r"[a-z0-9][a-z0-9@._-]{0,12}", fullmatch=True)
finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
figures = st.lists(st.builds(ef.Figure, names, names, names, names, finite,
                             st.floats(min_value=1e-9, max_value=1.0), st.none() | finite),
                   unique_by=lambda f: f.key, max_size=8)


def test_the_checked_in_file_is_what_its_writer_writes():
    pinned = ef.load()
    assert pinned and ef.render(pinned) == ef.FIGURES.read_text(encoding="utf-8"), \
        "bench/expected_figures.yaml was edited by hand: python bench/tools/expected_figures.py --update rewrites it"
    assert {f.system for f in pinned} >= {"bm25", "ql", "dense", "hybrid"}
    assert all(f.value > 0 for f in pinned), "a value was never measured"


@settings(max_examples=30, deadline=None)
@given(figures)
def test_any_figures_round_trip_through_the_writer(tmp_path_factory, written):
    path = tmp_path_factory.mktemp("figures") / "figures.yaml"
    ef.write(written, path)
    back = ef.load(path)
    assert [(f.key, f.tolerance, f.reference) for f in back] == [(f.key, f.tolerance, f.reference) for f in written]
    assert all(math.isclose(b.value, round(w.value, ef.DIGITS), abs_tol=1e-12) for b, w in zip(back, written))
    assert [f.line for f in back] == [ef.HEADER.count("\n") + 3 + i for i in range(len(written))]


ENTRY = "  - {dataset: scifact, split: test, system: bm25, metric: ndcg@10, value: 0.68, tolerance: 0.0001}"


@pytest.mark.parametrize(("entry", "problem"), [
    (ENTRY.replace(", tolerance: 0.0001", ""), "missing tolerance"),
    (ENTRY.replace("}", ", note: x}"), "unknown field(s) note"),
    (ENTRY.replace("0.68", ".nan"), "value must be a finite number"),
    (ENTRY.replace("0.68", "'0.68'"), "value must be a finite number"),
    (ENTRY.replace("0.0001", "-0.0001"), "tolerance must be above 0"),
    (ENTRY.replace("0.0001", "0"), "tolerance must be above 0"),
    (ENTRY.replace("bm25", "BM 25"), "system must be a lower-case name"),
    (ENTRY.replace("}", ", reference: .inf}"), "reference must be a finite number"),
    ("  - [scifact, bm25]", "an entry must be a mapping"),
    (f"{ENTRY}\n{ENTRY}", "scifact test bm25 ndcg@10 is pinned twice (first on line 3)"),
])
def test_a_damaged_entry_is_refused_in_one_line_naming_the_file_and_line(tmp_path, entry, problem):
    path = tmp_path / "figures.yaml"
    path.write_text(f"# a header\nfigures:\n{ENTRY}\n{entry}\n", encoding="utf-8")
    with pytest.raises(ef.FiguresError) as caught:
        ef.load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:4: ") and problem in message and "\n" not in message


@pytest.mark.parametrize("text", ["figures: [", "figures: 3\n", "- a\n- b\n", ""])
def test_a_file_that_is_not_a_figures_mapping_is_refused(tmp_path, text):
    path = tmp_path / "figures.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ef.FiguresError, match=rf"^{path}:\d+: "):
        ef.load(path)


def test_a_miss_names_the_data_set_system_metric_expected_and_got():
    figure = ef.Figure("scifact", "test", "bm25", "ndcg@10", 0.680446, 0.0001)
    assert figure.holds(0.680446 + 0.0001) and figure.holds(0.680446 - 0.0001) and ef.miss(figure, 0.6805) is None
    assert ef.miss(figure, 0.6790) == ("scifact (test) bm25 ndcg@10: expected 0.680446 ± 0.0001, got 0.679000 "
                                       "(Δ -0.001446)")
    assert not figure.holds(math.nan) and "got nan" in ef.miss(figure, math.nan)


@pytest.mark.slow
def test_update_rewrites_the_values_the_command_line_measures_and_the_check_then_holds(tmp_path, capsys):
    from retrieval.data.language import corpus_tokenizer
    from retrieval.data.readers import load_dataset
    from retrieval.workspace import Workspace

    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "demo").symlink_to(DEMO, target_is_directory=True)
    path = tmp_path / "figures.yaml"
    ef.write([ef.Figure("demo", "test", "bm25", m, 0.0, 0.0001) for m in ("ndcg@10", "recall@100")]
             + [ef.Figure("demo", "test", "ql", "map", 0.0, 0.0001, 0.5)], path)
    assert ef.main(["--file", str(path), "--shared", str(shared)]) == 1
    assert "demo (test) ql map: expected 0.000000 ± 0.0001, got 0." in capsys.readouterr().err

    assert ef.main(["--update", "--file", str(path), "--shared", str(shared)]) == 0
    rewritten = ef.load(path)
    ds = load_dataset(DEMO)  # the same figures in this process, through the workspace the command line opens
    ws = Workspace(ds, tokenizer=corpus_tokenizer([d.full_text for d in ds.docs.values()], "auto"))
    for f in rewritten:
        assert f.value == pytest.approx(ws.evaluate(f.system, "test").mean[f.metric], abs=1e-6)
    assert rewritten[-1].reference == 0.5 and rewritten[0].tolerance == 0.0001  # kept as written
    assert ef.main(["--file", str(path), "--shared", str(shared)]) == 0

    (shared / "demo").unlink()
    assert ef.main(["--file", str(path), "--shared", str(shared)]) == 2
    assert "lacks demo" in capsys.readouterr().err
