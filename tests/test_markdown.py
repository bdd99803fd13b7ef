"""The Markdown writer (``retrieval.files.markdown``): whatever the text, CommonMark with GFM's tables and
strikethrough (markdown-it-py, what Gradio installs) renders it back as one text node, in a
paragraph and in a table cell, never as markup or raw HTML; and the source stays readable."""
from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from retrieval.files.markdown import code, text

markdown_it = pytest.importorskip("markdown_it")


def _parser():
    return markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"])


def _expected(s: str) -> str:
    return re.sub("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", "\ufffd", s)


def _only_text(inline) -> str:
    assert all(t.type == "text" for t in inline.children), [(t.type, t.content) for t in inline.children]
    return "".join(t.content for t in inline.children)


MARKUP = ["Hybrid (CLEAR λ)", "# heading", "- item", "+ item", "1. first", "12) twelfth", "> quote", "---", "***",
          "    indented", "<b>bold</b>", "<img src=x onerror=alert(1)>", "&amp; &#40;", "*em* _em_ **strong**",
          "`code`", "[link](http://x)", "![img](x.png)", "a | b", "~~gone~~", "$x^2$", "back\\slash\\", "line\nbreak",
          "ends with two spaces  ", "\ttab", "[ref]: /url", "<http://auto.link>", "x\r\ny", "a\x00b"]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.text(alphabet="\\`*_[]|~$#>+-!<&():= \t\n\r1.aλ\u00a0\u3000", max_size=12)))
@example("")
@example(" ")
def test_any_text_renders_back_as_one_text_node_in_a_paragraph_and_a_table_cell(s):
    expected = _expected(s)
    tokens = _parser().parse(text(s))
    if not expected:
        assert tokens == []
    else:
        assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"], text(s)
        assert _only_text(tokens[1]) == expected
    table = _parser().parse(f"| a |\n|---|\n| {text(s)} |\n")
    cells = [t for t in table if t.type == "inline"]
    assert [t.type for t in table if t.type in ("th_open", "th_close", "td_open", "td_close")] == \
        ["th_open", "th_close", "td_open", "td_close"]
    assert _only_text(cells[1]) == expected
    assert not any(t.type.startswith("html") for t in [*tokens, *table])


@pytest.mark.parametrize("s", MARKUP)
def test_markup_is_shown_as_typed_and_plain_text_stays_readable(s):
    tokens = _parser().parse(text(s))
    assert _only_text(tokens[1]) == _expected(s)
    assert "<" not in _parser().render(text(s)).removeprefix("<p>").removesuffix("</p>\n")
    if s == "Hybrid (CLEAR λ)":
        assert text(s) == s  # nothing to escape: the source reads as the text
    code_tokens = _parser().parse(f"| a |\n|---|\n| {code(s)} |\n")
    cell = [t for t in code_tokens if t.type == "inline"][1]
    assert "".join(t.content for t in cell.children) == _expected(s)
    assert not any(t.type.startswith("html") for t in [*code_tokens, *cell.children])


def test_readable_source():
    assert text("ndcg@10 (BM25, k1 0.9) → 0.71") == "ndcg@10 (BM25, k1 0.9) → 0.71"
    assert text("snake_case [x] a<b & c") == "snake\\_case \\[x\\] a&lt;b &amp; c"
    assert code("q-12") == "`q-12`" and code("a`b") == "``a`b``"
