"""The Markdown writer (``retrieval.files.markdown``): whatever the text, CommonMark with GFM's tables and
strikethrough (markdown-it-py, what Gradio installs) renders it back as one text node, in a
paragraph and in a table cell, never as markup or raw HTML; and the source stays readable."""
from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from retrieval.files.markdown import SEPARATOR, code, text

markdown_it = pytest.importorskip("markdown_it")


def _parser():
    return markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"])


def _expected(s: str) -> str:
    return re.sub("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", "\ufffd", s)


def _only_text(inline) -> str:
    """The text an inline token renders: its children are text, and the writer's empty comments
    (``markdown.SEPARATOR``, which keep an e-mail address from joining into a link) and nothing else."""
    assert all(t.type == "text" or _separator(t) for t in inline.children), \
        [(t.type, t.content) for t in inline.children]
    return "".join(t.content for t in inline.children if t.type == "text")


def _separator(token) -> bool:
    return token.type == "html_inline" and token.content == SEPARATOR


def _no_markup(tokens) -> bool:
    return not any(t.type.startswith("html") and not _separator(t) for t in tokens)


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
    assert _no_markup([*tokens, *table]) and _no_markup(t for i in [*tokens, *table] for t in i.children or [])


@pytest.mark.parametrize("s", MARKUP)
def test_markup_is_shown_as_typed_and_plain_text_stays_readable(s):
    tokens = _parser().parse(text(s))
    assert _only_text(tokens[1]) == _expected(s)
    assert "<" not in _parser().render(text(s)).removeprefix("<p>").removesuffix("</p>\n").replace(SEPARATOR, "")
    if s == "Hybrid (CLEAR λ)":
        assert text(s) == s  # nothing to escape: the source reads as the text
    code_tokens = _parser().parse(f"| a |\n|---|\n| {code(s)} |\n")
    cell = [t for t in code_tokens if t.type == "inline"][1]
    assert "".join(t.content for t in cell.children) == _expected(s)
    assert _no_markup([*code_tokens, *cell.children])


def test_readable_source():
    assert text("ndcg@10 (BM25, k1 0.9) → 0.71") == "ndcg@10 (BM25, k1 0.9) → 0.71"
    assert text("snake_case [x] a<b & c") == "snake\\_case \\[x\\] a&lt;b &amp; c"
    assert code("q-12") == "`q-12`" and code("a`b") == "``a`b``"


# ---- GFM's extended autolinks: what GitHub's renderer (cmark-gfm, extensions/autolink.c) links ----------
def _host_char(c: str) -> bool:
    """cmark-gfm's ``is_valid_hostchar``: not white space, not punctuation (Unicode's P* categories)."""
    return not c.isspace() and not unicodedata.category(c).startswith("P")


def _domain(data: str, allow_short: bool) -> int:
    """cmark-gfm's ``check_domain``: the length of the domain at the start of ``data`` (0: none)."""
    i, dots, under1, under2 = 1, 0, 0, 0
    while i < len(data) - 1:
        if data[i] == "_":
            under2 += 1
        elif data[i] == ".":
            under1, under2, dots = under2, 0, dots + 1
        elif not _host_char(data[i]) and data[i] != "-":
            break
        i += 1
    if under1 or under2:
        return 0
    return i if allow_short or dots else 0


def _escaped(raw: str, at: int) -> bool:
    """Whether the character at ``at`` of an inline source is backslash-escaped (an odd run before it)."""
    run = len(raw[:at]) - len(raw[:at].rstrip("\\"))
    return run % 2 == 1


def _source_links(raw: str) -> list[str]:
    """URLs and www. links cmark-gfm makes while it reads an inline source (``url_match``, ``www_match``)."""
    found = []
    for at, c in enumerate(raw):
        if c == ":" and not _escaped(raw, at) and raw[at + 1:at + 3] == "//":
            start = at
            while start > 0 and raw[start - 1].isascii() and raw[start - 1].isalpha():
                start -= 1
            link = raw[start:]
            if any(link.lower().startswith(s) and len(link) > len(s) and _host_char(link[len(s)])
                   for s in ("http://", "https://", "ftp://")) and _domain(raw[at + 3:], True):
                found.append(link)
        if c == "w" and raw[at:at + 4] == "www." and (at == 0 or raw[at - 1] in "*_~(" or raw[at - 1].isspace()) \
                and _domain(raw[at:], False):
            found.append(raw[at:])
    return found


def _email_links(text_: str) -> list[str]:
    """E-mail links cmark-gfm makes in one text node once parsed (``postprocess_text``)."""
    found = []
    for at, c in enumerate(text_):
        if c != "@":
            continue
        rewind = 0
        while rewind < at and (text_[at - rewind - 1].isascii() and text_[at - rewind - 1].isalnum()
                               or text_[at - rewind - 1] in ".+-_"):
            rewind += 1
        if rewind == 0 or text_[at - rewind - 1:at - rewind] == "/":
            continue
        end, ats, dots = 0, 0, 0
        data = text_[at:]
        while end < len(data):
            d = data[end]
            if d.isascii() and d.isalnum():
                pass
            elif d == "@":
                ats += 1
            elif d == "." and end < len(data) - 1 and data[end + 1].isascii() and data[end + 1].isalnum():
                dots += 1
            elif d not in "-_":
                break
            end += 1
        if end >= 2 and ats == 1 and dots and (data[end - 1].isascii() and data[end - 1].isalpha() or
                                                data[end - 1] == "."):
            found.append(text_[at - rewind:at + end])
    return found


def gfm_autolinks(markdown: str) -> list[str]:
    """Every extended autolink GitHub's renderer would make in ``markdown`` (a paragraph or a table):
    URLs and ``www.`` links in each inline source, e-mail addresses in each run of joined text."""
    found = []
    for block in _parser().parse(markdown):
        if block.type != "inline":
            continue
        found += _source_links(block.content)
        joined = ""
        for child in [*(block.children or []), None]:
            if child is not None and child.type == "text":
                joined += child.content
                continue
            found += _email_links(joined)
            joined = ""
    return found


LINKS = ["see https://evil.invalid/x", "HTTPS://EVIL.INVALID", "ftp://files.invalid/a", "www.evil.invalid",
         "(www.evil.invalid)", "*www.evil.invalid*", "mail ann@evil.invalid now", "a.b-c_d@a.b", "x+y@sub.evil.io.",
         "mailto:ann@evil.invalid", "xmpp:ann@evil.invalid", "a@b.c@d.ef", "q1 ann@evil.invalid, bob@evil.invalid"]


@pytest.mark.parametrize("s", LINKS)
def test_gfm_would_link_each_of_these_as_written(s):
    """The reference above is not vacuous: written as they are, GitHub links each."""
    assert gfm_autolinks(s) and gfm_autolinks(f"| a |\n|---|\n| {s} |\n")


@pytest.mark.parametrize("s", LINKS)
def test_the_writer_leaves_no_autolink_and_renders_the_same_text(s):
    for markdown in (text(s), f"| a |\n|---|\n| {text(s)} |\n"):
        assert gfm_autolinks(markdown) == [], markdown
    tokens = _parser().parse(text(s))
    assert _only_text(tokens[1]) == s


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="htpsfwxmailo:/.@_+-*(~ab1\\\u00e9 \n", max_size=30))
@example("http://a.b")
@example("www.a.b")
@example("a@b.c")
@example("\\http://a.b")
def test_no_text_leaves_an_autolink_and_every_text_renders_back(s):
    markdown = text(s)
    assert gfm_autolinks(markdown) == [], markdown
    assert gfm_autolinks(f"| a |\n|---|\n| {markdown} |\n") == [], markdown
    tokens = _parser().parse(markdown)
    if _expected(s):
        assert _only_text(tokens[1]) == _expected(s)


def test_plain_text_that_links_nothing_stays_as_it_was():
    for s in ("ndcg@10 (BM25, k1: 0.9) → 0.71", "release-1 of 2.0", "x@y", "a @ b.c"):
        assert SEPARATOR not in text(s) and "\\:" not in text(s)
