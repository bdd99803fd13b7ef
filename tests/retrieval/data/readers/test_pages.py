"""Markdown and HTML pages (``retrieval.data.readers.pages``): a folder or zip of them is one document per page,
its anchors resolved to pages by relative path or by title, and every anchor that resolves to nothing reported
with its file and line, never guessed; hostile pages (links to themselves, cycles, a million anchors, brackets
that would make a backtracking pattern quadratic) included."""
from __future__ import annotations

import zipfile

import pytest

from retrieval.data.readers import load_dataset
from retrieval.data.readers.pages import read_html, read_markdown
from retrieval.errors import DataError


def write(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_a_markdown_page_gives_its_title_the_text_a_reader_sees_and_its_anchors_with_their_lines():
    page = read_markdown("\n\n# The River\n\nThe river runs [to the sea](sea.md \"The sea\") and "
                         "[[Mountain Lake|a lake]].\n\n## Course\n\n"
                         "It passes [the mill](<mills/old mill.md>) and [[Forest]].\n")
    assert page.title == "The River"
    assert page.text == "The river runs to the sea and a lake.\n\n## Course\n\nIt passes the mill and Forest."
    assert page.anchors == [("sea.md", 5, False), ("Mountain Lake", 5, True), ("mills/old mill.md", 9, False),
                            ("Forest", 9, True)]
    untitled = read_markdown("No title here, just [a link](x.md).")
    assert untitled.title == "" and untitled.text == "No title here, just a link." and untitled.anchors == \
        [("x.md", 1, False)]


def test_an_html_page_gives_its_title_visible_text_with_headings_and_its_hrefs():
    page = read_html("<html><head><title>The  River</title><style>p {}</style></head>\n<body>\n"
                     "<h1>The River</h1>\n<p>The river runs <a href='sea.html'>to the sea</a> &amp; on.</p>\n"
                     "<script>document.write('<a href=\"x.html\">x</a>')</script>\n"
                     "<h2>Course</h2><p>It passes <a href=\"mill.html#wheel\">the mill</a>.</p></body></html>")
    assert page.title == "The River"
    assert page.text == "The river runs to the sea & on.\n\n## Course\n\nIt passes the mill."
    assert page.anchors == [("sea.html", 4, False), ("mill.html#wheel", 6, False)]  # none from the script
    assert read_html("<h1>Only a heading</h1><p>Text.</p>").title == "Only a heading"


def test_a_folder_of_pages_links_by_relative_path_and_title_and_reports_the_rest_with_file_and_line(tmp_path):
    root = tmp_path / "wiki"
    write(root / "index.md", "# Home\n\nSee [rivers](topics/river.md), [[Mountain]] and [the guide](guide/).\n"
                             "Also [nowhere](topics/nothing.md) and [up](../outside.md), [[Twin]],\n"
                             "[web](https://example.com/x.md), [mail](mailto:a@b.c), [top](#top) and [me](index.md).\n")
    write(root / "topics" / "river.md", "# River\n\nFlows to [[home]] and [the mountain](/topics/mountain.md#peak).\n")
    write(root / "topics" / "mountain.html", "<title>Mountain</title><p>Back to <a href='river.md'>the river</a>, "
                                             "<a href='../index.md?x=1'>home</a>, <a href='%72iver.md'>again</a>.</p>")
    write(root / "guide" / "index.md", "# Guide\n\nA guide. [[River]]\n")
    write(root / "twin-1.md", "# Twin\n\nOne.\n")
    write(root / "twin-2.md", "# Twin\n\nTwo.\n")
    write(root / "notes.txt", "Plain text, no links.")
    ds = load_dataset(root)
    assert {d.id: d.links for d in ds.docs.values()} == {
        "guide/index": ("topics/river",), "index": ("topics/river", "topics/mountain", "guide/index"),
        "notes": (), "topics/mountain": ("topics/river", "index"), "topics/river": ("index", "topics/mountain"),
        "twin-1": (), "twin-2": ()}
    assert ds.docs["topics/mountain"].title == "Mountain" and ds.docs["notes"].title == "notes"
    index = root / "index.md"
    assert ds.report.warnings == [
        f"{index}:4: link 'topics/nothing.md' of document 'index' names no document that loaded and was dropped "
        "(no page at this path)",
        f"{index}:4: link '../outside.md' of document 'index' names no document that loaded and was dropped "
        "(a path outside the folder loaded)",
        f"{index}:4: link 'Twin' of document 'index' names no document that loaded and was dropped (several pages "
        "have this title)",
        f"{index}:5: link 'index.md' of document 'index' is to the document itself and was dropped"]
    assert ds.link_count == 8


def test_a_zip_of_pages_links_as_the_folder_does(tmp_path):
    z = tmp_path / "site.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("site/a.md", "# A\n\nTo [b](b.html).\n")
        zf.writestr("site/b.html", "<title>B</title><p>To <a href='a.md'>a</a> and <a href='c.md'>c</a>.</p>")
    ds = load_dataset(z)
    assert {d.id: d.links for d in ds.docs.values()} == {"site/a": ("site/b",), "site/b": ("site/a",)}
    assert ds.report.warnings == [f"{z}!site/b.html:1: link 'c.md' of document 'site/b' names no document that "
                                  "loaded and was dropped (no page at this path)"]


def test_a_page_with_more_anchors_than_a_document_may_hold_is_refused_naming_the_file(tmp_path):
    root = tmp_path / "p"
    write(root / "a.md", "# A\n\n" + "[x](b.md) " * 10_001)
    write(root / "b.md", "# B\n\nText.")
    with pytest.raises(DataError) as err:
        load_dataset(root)
    assert str(err.value) == f"{root / 'a.md'}:3: document 'a' has 10,001 links; at most 10,000 are read per document"


def test_a_million_anchors_over_many_pages_and_a_cycle_load_in_one_pass(tmp_path):
    """200 pages, each linking to every page 5,000 times over (itself too): a million anchors, a cycle through
    every page; each page keeps one link to each other page, and the self-links are counted."""
    root = tmp_path / "p"
    n = 200
    for i in range(n):
        anchors = "".join(f"[[Page {j}]] " for j in range(n)) * 25
        write(root / f"p{i}.md", f"# Page {i}\n\nText of page {i}.\n{anchors}")
    ds = load_dataset(root)
    assert all(len(d.links) == n - 1 and d.id not in d.links for d in ds.docs.values())
    assert ds.report.warnings[0].startswith("5,000 links were dropped, each a link to the document itself")


@pytest.mark.parametrize("hostile", ["[" * 200_000, "](" * 200_000, "[[" * 200_000, "[a](" * 100_000,
                                     "[x]([" * 100_000, "[[a|" * 100_000 + "]]", "[a](<" * 100_000],
                         ids=["brackets", "closing", "wiki", "opened", "nested", "wiki-bars", "angled"])
def test_brackets_that_would_make_a_backtracking_pattern_quadratic_read_in_linear_time(hostile):
    """Each pattern stops at the next bracket or parenthesis: 200,000 of them read at once (quadratic
    would be 10^10 steps)."""
    page = read_markdown(f"# T\n\n{hostile} [ok](end.md)")
    assert page.anchors[-1] == ("end.md", 3, False)


def test_a_script_or_a_scheme_is_never_a_link_or_text(tmp_path):
    """``javascript:``, ``data:``, ``https:`` and ``//host`` anchors are not links (nothing is fetched or kept);
    a script's or a style's text is not the page's; markup written as text stays text (escaped when shown)."""
    root = tmp_path / "p"
    write(root / "a.html", "<title>A</title><script>alert('x')</script><style>body{}</style>"
                           "<p>Safe &lt;script&gt; text <a href='javascript:alert(1)'>js</a> "
                           "<a href='data:text/html,hi'>data</a> <a href='//evil.example/b.html'>far</a> "
                           "<a href='HTTPS://x.example'>web</a> <a href='b.md'>b</a></p>")
    write(root / "b.md", "# B\n\n[x](javascript:alert(1)) and [y](a.html).")
    ds = load_dataset(root)
    assert ds.docs["a"].text == "Safe <script> text js data far web b" and ds.docs["a"].links == ("b",)
    assert ds.docs["b"].links == ("a",) and ds.report.warnings == []


@pytest.mark.parametrize("hostile", ["<a " * 200_000, "<!--" * 200_000, "<![" * 200_000, "<!" * 200_000,
                                     "</" * 200_000, "<div>" * 200_000, "<a " + "x=1 " * 200_000 + ">",
                                     "<a href='" + "x" * 400_000],
                         ids=["unclosed-tags", "comments", "marked-sections", "declarations", "end-tags", "nesting",
                              "attributes", "open-attribute"])
def test_markup_that_stalls_or_breaks_the_standard_librarys_parser_reads_in_linear_time(tmp_path, hostile):
    """Python's ``html.parser`` takes minutes over 50,000 unclosed ``<a`` and raises an AssertionError on
    ``<![``; libxml2's parser reads 200,000 of each at once, and the page around them loads as any page."""
    root = tmp_path / "p"
    write(root / "a.html", f"<title>A</title><p>Before <a href='b.html'>b</a>.</p>{hostile}")
    write(root / "b.html", "<title>B</title><p>Text.</p>")
    ds = load_dataset(root)
    assert ds.docs["a"].title == "A" and ds.docs["a"].text.startswith("Before b.") and ds.docs["a"].links == ("b",)


def test_one_page_given_alone_says_to_load_a_folder_or_zip_of_pages(tmp_path):
    page = write(tmp_path / "a.md", "# A\n\nText.")
    with pytest.raises(DataError) as err:
        load_dataset(page)
    assert str(err.value) == (f"{page}: a .md page is one document: load a folder or a .zip of pages (their links "
                              "to each other are read), or a .jsonl, .csv or .tsv file of documents")


def test_pages_uploaded_together_are_one_folder_of_pages_by_their_names(tmp_path):
    """An upload stores each file in a folder of its own; the pages still link to each other by name."""
    from retrieval.data.readers import load_uploads

    a = write(tmp_path / "u1" / "a.md", "# A\n\nTo [b](b.html) and [c](c.md).")
    b = write(tmp_path / "u2" / "b.html", "<title>B</title><p>To <a href='a.md'>a</a>.</p>")
    ds = load_uploads([str(a), str(b)])
    assert ds.name == "pages" and {d.id: d.links for d in ds.docs.values()} == {"a": ("b",), "b": ("a",)}
    assert ds.report.warnings == ["a.md:3: link 'c.md' of document 'a' names no document that loaded and was "
                                  "dropped (no page at this path)"]  # named as uploaded, not where it was stored
    twin = write(tmp_path / "u3" / "a.md", "# Another A\n\nText.")
    with pytest.raises(DataError, match=r"^a\.md: two uploaded pages are named 'a\.md'"):
        load_uploads([str(a), str(b), str(twin)])
