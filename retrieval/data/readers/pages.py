"""Markdown and HTML pages: one document each, with the anchors that link it to other pages.

A folder or zip of pages (``.md``, ``.markdown``, ``.html``, ``.htm``, beside any ``.txt`` files) is a
corpus of one document per file, as a folder of ``.txt`` files is: its id is the file's path without
its extension. ``read_page`` turns a page into its title, its text and its anchors; ``PageIndex``
resolves an anchor to the page it names, once every page has loaded.

- Markdown: the title is a first line ``# Title`` (else the file's name). Links are inline,
  ``[text](target)`` (a title after the target is allowed), and wiki-style, ``[[Title]]`` or
  ``[[Title|text]]``; the text keeps what a reader sees (``text``), and the section headings
  (``## History``), which mark where the first section ends (``training.pairs.first_section``).
  Reference-style links (``[text][ref]``) are not read; a link inside a code block is read as any link.
- HTML (lxml: libxml2's parser, linear whatever the page holds): the title is ``<title>``, else the first ``<h1>``,
  else the file's name; the text is what the page shows (no ``<script>``, ``<style>`` or head),
  a blank line between blocks, each heading ``<h2>``–``<h6>`` as a Markdown heading line; links are
  ``<a href>``.

An anchor resolves (``PageIndex.lookup``) by its path, relative to the page's folder (``/`` starts at
the top of the folder loaded; ``#fragment`` and ``?query`` aside, percent-escapes decoded), to the page
with that path (with any page suffix, or a folder's ``index`` or ``README``); a wiki link by the title
of exactly one page (letter case and runs of white space aside), else by path. A target with a
scheme (``https:``, ``mailto:``) or ``//`` leaves the corpus and is not a link; ``#fragment`` alone
stays in the page. Everything else is dropped and counted with its file and line (``links.resolve``):
never guessed.

Both scans are linear in the page: the link patterns cannot backtrack past the next bracket or
parenthesis.
"""
from __future__ import annotations

import posixpath
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from retrieval.data.dataset import Document
from retrieval.data.readers.links import RawLinks
from retrieval.safe_names import normal_id

PAGE_SUFFIXES = (".md", ".markdown", ".html", ".htm")
TREE_SUFFIXES = (".txt", *PAGE_SUFFIXES)  # a folder of these is one document per file
MAX_TARGET_CHARS = 2_000  # an anchor's target; a longer one is no page's path


@dataclass
class Page:
    """A page read: its title ("" where it names none), its text, and its anchors: (target, line,
    whether it names a title (a wiki link) rather than a path)."""

    title: str
    text: str
    anchors: list[tuple[str, int, bool]] = field(default_factory=list)


_MD_TITLE = re.compile(r"#[ \t]+(.+?)[ \t]*#*[ \t]*")
_MD_LINK = re.compile(r"\[\[([^\[\]|\n]+)(?:\|([^\[\]\n]*))?\]\]"  # [[Title]] or [[Title|text]]
                      r"|\[([^\[\]\n]*)\]\([ \t]*(?:<([^<>\n]*)>|([^()\s<>]*))"  # [text](<target>) or (target
                      r"(?:[ \t]+\"[^\"\n]*\")?[ \t]*\)")  # and an optional "title")


def read_markdown(source: str) -> Page:
    """A Markdown page: its ``# Title`` line, the text a reader sees, its inline and wiki links (each
    with its line in the file)."""
    text = source.removeprefix("\ufeff")
    stripped = text.lstrip()
    line = text.count("\n", 0, len(text) - len(stripped)) + 1  # the line ``stripped`` starts on
    head, _, rest = stripped.partition("\n")
    title_line = _MD_TITLE.fullmatch(head.strip())
    title, body = ("", stripped) if title_line is None else (title_line.group(1).strip(), rest)
    line += title_line is not None
    anchors: list[tuple[str, int, bool]] = []
    pieces: list[str] = []
    at = 0
    for match in _MD_LINK.finditer(body):
        line += body.count("\n", at, match.start())
        pieces.append(body[at:match.start()])
        at = match.start()
        wiki, wiki_text, shown, angled, target = match.groups()
        if wiki is not None:
            anchors.append((wiki.strip(), line, True))
            pieces.append(wiki if wiki_text is None else wiki_text)
        else:
            anchors.append((angled if angled is not None else target, line, False))
            pieces.append(shown)
        line += body.count("\n", at, match.end())
        at = match.end()
    pieces.append(body[at:])
    return Page(title, "".join(pieces).strip(), anchors)


_BLOCKS = frozenset("address article aside blockquote br dd div dl dt figcaption figure footer form header hr li "
                    "main nav ol p pre section table td th tr ul".split())
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_HIDDEN = frozenset(("script", "style", "head", "template", "noscript", "title"))
_BLANK_LINES = re.compile(r"[ \t]*\n(?:[ \t]*\n)+")
_SPACES = re.compile(r"[ \t\r\f\v]+")


def _words(text: str) -> str:
    return " ".join(text.split())


class _Shown:
    """What a page shows, gathered along a walk of its tree: the text, headings as Markdown heading
    lines, its first ``<h1>``, and its ``<a href>``s with their lines."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.anchors: list[tuple[str, int, bool]] = []
        self.h1: str | None = None
        self.hidden = 0  # how many hidden elements (a script, the head) the walk is inside
        self.heading: list[str] | None = None  # the words of the heading it is inside

    def _out(self) -> list[str]:
        return self.heading if self.heading is not None else self.parts

    def start(self, tag: str, el: Any) -> None:
        if tag in _HIDDEN:
            self.hidden += 1
        elif tag in _HEADINGS and not self.hidden:
            self.parts.append("\n\n")
            self.heading = []
        elif tag in _BLOCKS:
            self._out().append("\n\n")
        if self.hidden:
            return
        if tag == "a" and el.get("href") is not None:
            self.anchors.append((el.get("href", "").strip(), el.sourceline or 1, False))
        if el.text:
            self._out().append(el.text)

    def end(self, tag: str, el: Any) -> None:
        if tag in _HIDDEN:
            self.hidden -= 1
        elif tag in _HEADINGS and self.heading is not None and not self.hidden:
            text = _words("".join(self.heading))
            self.heading = None
            if _HEADINGS[tag] == 1 and self.h1 is None:
                self.h1 = text
            if text:
                self.parts.append(f"{'#' * _HEADINGS[tag]} {text}\n\n")
        elif tag in _BLOCKS:
            self._out().append("\n\n")
        if not self.hidden and el.tail:
            self._out().append(el.tail)


def read_html(source: str) -> Page:
    """An HTML page: its title, the text it shows (headings as Markdown heading lines), its ``<a href>``s.

    Parsed by lxml (libxml2's HTML parser, in recovery mode, never reaching the network): linear in the
    page, whatever it holds. The standard library's ``html.parser`` is not: on the Python this runs,
    50,000 unclosed ``<a`` take minutes, and ``<![`` raises an AssertionError."""
    from lxml import etree
    from lxml import html as lxml_html

    parser = lxml_html.HTMLParser(encoding="utf-8", recover=True, no_network=True, remove_comments=True,
                                  remove_pis=True)
    try:
        root = lxml_html.document_fromstring(source.encode("utf-8"), parser=parser)
    except etree.ParserError:  # nothing a document could be made of: comments or declarations alone
        return Page("", "", [])
    shown = _Shown()
    for event, el in etree.iterwalk(root, events=("start", "end")):
        tag = el.tag.lower() if isinstance(el.tag, str) else ""
        (shown.start if event == "start" else shown.end)(tag, el)
    body = _BLANK_LINES.sub("\n\n", _SPACES.sub(" ", "".join(shown.parts))).strip()
    title = _words(root.findtext(".//title") or "") or shown.h1 or ""
    if shown.h1 is not None and shown.h1 == title:  # a first heading that is the title: not the text's first line
        body = body.removeprefix(f"# {shown.h1}").lstrip()
    return Page(title, body, shown.anchors)


def read_page(source: str, kind: str) -> Page:
    return read_html(source) if kind in (".html", ".htm") else read_markdown(source)


def _title_key(title: str) -> str:
    return " ".join(unicodedata.normalize("NFC", title).casefold().split())


class PageIndex:
    """Resolves anchors to the pages of one tree, once every page has loaded (``links.Lookup``)."""

    def __init__(self, docs: dict[str, Document]):
        self.docs = docs
        self.by_title: dict[str, list[str]] = {}
        for doc in docs.values():
            ids = self.by_title.setdefault(_title_key(doc.title), [])
            if len(ids) < 2:  # one is the page; two say the title is ambiguous
                ids.append(doc.id)

    def lookup(self, raw: RawLinks, i: int) -> tuple[str | None, str]:
        target = raw.targets[i]
        if len(target) > MAX_TARGET_CHARS:
            return None, f"a target of {len(target):,} characters"
        if raw.titles is not None and raw.titles[i]:
            ids = self.by_title.get(_title_key(target), [])
            if len(ids) == 1:
                return ids[0], ""
            found = self._path(raw.base, target)[0]
            if found is not None:
                return found, ""
            return None, "several pages have this title" if ids else "no page has this title or path"
        return self._path(raw.base, target)

    def _path(self, base: str, target: str) -> tuple[str | None, str]:
        path = unquote(target.split("#", 1)[0].split("?", 1)[0])
        if not path:
            return None, "no path"
        joined = path.lstrip("/") if path.startswith("/") else posixpath.join(base, path)
        norm = posixpath.normpath(joined)
        if norm == ".." or norm.startswith("../"):
            return None, "a path outside the folder loaded"
        stem, ext = posixpath.splitext(norm)
        candidates = [stem] if ext.lower() in TREE_SUFFIXES else [norm, f"{norm}/index", f"{norm}/README"]
        for candidate in candidates:
            ident = normal_id(candidate.removeprefix("./")) if candidate != "." else ""
            if ident in self.docs:
                return ident, ""
        return None, "no page at this path"


def external(target: str) -> bool:
    """Whether an anchor's target leaves the corpus (a scheme such as ``https:``, or ``//host``) or stays
    in its page (``#fragment``, or nothing): not a link to another page."""
    t = target.strip()
    return not t or t.startswith(("#", "//")) or re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", t) is not None
