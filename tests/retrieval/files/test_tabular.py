"""The one CSV/TSV writer (``retrieval.files.tabular``): whatever text a cell holds, it comes back exactly
(a CR, LF or tab inside it never ends the row; ``'`` added by the guard, and only that, is taken
off), plain numbers are written as they are, and no cell or piece of a cell a spreadsheet could
split off starts a formula (OWASP, "CSV Injection")."""
from __future__ import annotations

import csv
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.files import tabular

_HOSTILE = st.sampled_from(list("=+-@'\t\r\n;,\" ") + ["\x00", "\u200b", "\uff1d", "\u3000", "-5", "'=", ";="])
_TEXT = st.lists(st.one_of(_HOSTILE, st.text(st.characters(exclude_categories=("Cs",)), max_size=4)),
                 max_size=8).map("".join)
_NUMBER = st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False))
_FORMULA = tuple("=+-@\uff1d\uff0b\uff0d\uff20")


def _formula_risk(cell: str) -> bool:
    """Whether a spreadsheet could evaluate ``cell`` or a piece of it split off at , ; tab CR LF."""
    if cell[:1] in ("\t", "\r", "\n"):
        return True
    start = 0
    for i, c in enumerate(cell + ","):
        if c in tabular.SPLITS or i == len(cell):
            piece = cell[start:i]
            j = 0
            while j < len(piece) and tabular._blank(piece[j]):
                j += 1
            if piece[j:].startswith(_FORMULA):
                return True
            start = i + 1
    return False


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_the_guard_is_undone_exactly(cell):
    assert tabular.unguard(tabular.guard(cell)) == cell


@pytest.mark.parametrize("cell, written", [
    ("=1+2", "'=1+2"), ("-5", "'-5"), ("'-5", "''-5"), ("@SUM(A1)", "'@SUM(A1)"), ("  +1", "'  +1"),
    ("\tfoo", "'\tfoo"), ("\t=x", "'\t'=x"), ("a;=cmd|' /C calc'!A0", "a;'=cmd|' /C calc'!A0"),
    ("flu\r=2+5", "flu\r'=2+5"), ("cats, dogs", "cats, dogs"), ("it's", "it's"), ("x-y", "x-y"),
])
def test_the_guard_marks_each_piece_a_spreadsheet_could_run(cell, written):
    assert tabular.guard(cell) == written
    assert tabular.unguard(written) == cell


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.one_of(_TEXT, _NUMBER), min_size=1, max_size=5), min_size=1, max_size=5),
       st.sampled_from(tabular.FORMATS))
@pytest.mark.slow
def test_any_table_round_trips_and_no_cell_is_a_formula(rows, fmt):
    header = [f"c{i}" for i in range(max(len(r) for r in rows))]
    text = tabular.dumps(header, rows, fmt)
    back = tabular.loads(text, fmt)
    assert back[0] == header
    assert back[1:] == [[repr(c) if isinstance(c, float) else str(c) for c in row] for row in rows]
    raw = list(csv.reader(io.StringIO(text, newline=""), delimiter=tabular.DELIMITERS[fmt]))
    assert len(raw) == len(rows) + 1  # no cell ended its row early
    for row, written in zip(rows, raw[1:]):
        for value, cell in zip(row, written):
            if tabular.is_number(value):
                assert float(cell) == value  # a plain number, written as it is
            else:
                assert not _formula_risk(cell), (value, cell)


def test_numbers_are_bare_and_text_is_quoted():
    assert tabular.dumps(["query", "score"], [["-1.5", -1.5], ["a\tb", 2]], "tsv") == \
        '"query"\t"score"\n"\'-1.5"\t-1.5\n"a\tb"\t2\n'
    assert tabular.dumps(["a"], [[True], [None]]) == '"a"\n"True"\n""\n'  # a bool is not a number


def test_a_file_keeps_its_carriage_returns(tmp_path):
    path = tabular.write(tmp_path / "sub" / "t.csv", ["q"], [["a\rb"], ["\r"]])
    assert tabular.read(path) == [["q"], ["a\rb"], ["\r"]]
    with pytest.raises(ValueError, match="unknown table format 'xlsx'"):
        tabular.dumps(["q"], [], "xlsx")
