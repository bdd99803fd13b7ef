"""Markdown and HTML pages: one document each, with the anchors that link it to other pages.

A folder or zip of pages (``.md``, ``.markdown``, ``.html``, ``.htm``, beside any ``.txt`` files) is a
corpus of one document per file, as a folder of ``.txt`` files is: its id is the file's path without
its extension. ``read_page`` turns a page into its title, its text and its anchors; ``PageIndex``
resolves an anchor to the page it names, once every page has loaded.

- Markdown: the title is a first line ``# Title`` (else the file's name). Links are inline,
  ``[text](target)`` (a title after the target is allowed), and wiki-style, ``[[Title]]`` or
  ``[[Title|text]]``; the text keeps what a reader sees (``text``), and the section headings
  (``## History``), which mark where the first section ends (``training.pairs.first_section``).
  Reference-style links (``[text][ref]``) are not read.
- HTML (``html.parser``, the standard library's): the title is ``<title>``, else the first ``<h1>``,
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
from html.parser import HTMLParser
from urllib.parse import unquote

from retrieval.data.dataset import Document
from retrieval.data.readers.links import RawLinks
from retrieval.safe_names import normal_id

PAGE_SUFFIXES = (".md", ".markdown", ".html", ".htm")
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
_HIDDEN = frozenset(("script", "style", "head", "template", "noscript"))


class _HtmlPage(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title_parts: list[str] | None = None
        self.title = ""
        self.h1: str | None = None
        self.anchors: list[tuple[str, int, bool]] = []
        self._hidden = 0
        self._heading: tuple[int, list[str]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title" and not self.title:
            self.title_parts = []
        elif tag in _HIDDEN:
            self._hidden += 1
        elif tag in _HEADINGS:
            self.parts.append("\n\n")
            self._heading = (_HEADINGS[tag], [])
        elif tag in _BLOCKS:
            self.parts.append("\n\n")
        if tag == "a":
            href = next((v for k, v in attrs if k == "href" and v is not None), None)
            if href is not None and not self._hidden:
                self.anchors.append((href.strip(), self.getpos()[0], False))

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self.title_parts is not None:
            self.title = " ".join("".join(self.title_parts).split())
            self.title_parts = None
        elif tag in _HIDDEN:
            self._hidden = max(0, self._hidden - 1)
        elif tag in _HEADINGS and self._heading is not None:
            level, words = self._heading
            self._heading = None
            heading = " ".join("".join(words).split())
            if level == 1 and self.h1 is None:
                self.h1 = heading
            if heading:
                self.parts.append(f"{'#' * level} {heading}\n\n")
        elif tag in _BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self.title_parts is not None:
            self.title_parts.append(data)
        elif self._hidden:
            return
        elif self._heading is not None:
            self._heading[1].append(data)
        else:
            self.parts.append(data)


_BLANK_LINES = re.compile(r"[ \t]*\n(?:[ \t]*\n)+")
_SPACES = re.compile(r"[ \t\r\f\v]+")


def read_html(source: str) -> Page:
    """An HTML page: its title, the text it shows (headings as Markdown heading lines), its ``<a href>``s."""
    parser = _HtmlPage()
    parser.feed(source)
    parser.close()
    body = _BLANK_LINES.sub("\n\n", _SPACES.sub(" ", "".join(parser.parts))).strip()
    title = parser.title or parser.h1 or ""
    if parser.h1 is not None and parser.h1 == title:  # a first heading that is the title: not the text's first line
        body = body.removeprefix(f"# {parser.h1}").lstrip()
    return Page(title, body, parser.anchors)


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
            found, why = self._path(raw.base, target)
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
        candidates = [stem] if ext.lower() in (*PAGE_SUFFIXES, ".txt") else [norm, f"{norm}/index", f"{norm}/README"]
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
