"""Markdown source that reads as plain text and renders as exactly the text it was given: for the
reports the library writes as Markdown (``check_report.markdown_summary``: a CI job summary, which
people read as source too).

``text`` escapes only what CommonMark, GitHub Flavored Markdown (tables, strikethrough, math) or
HTML would interpret — with a backslash where CommonMark allows one (§2.4, "Backslash escapes":
any ASCII punctuation), as a character reference where it must be one: ``&`` and ``<`` (so that no
entity or HTML tag can form), a line break (a table cell cannot hold one; ``&#10;`` is the character
back) and the white space at either end (a paragraph or a cell would drop it, four leading spaces
would make code). ``# > + -`` and a number followed by ``.`` or ``)`` are escaped only at the
start (a heading, a block quote, a list, a rule). Letters, digits, parentheses, λ and every other
character stay as they are, so "Hybrid (CLEAR λ)" is written "Hybrid (CLEAR λ)". Control
characters, which no renderer shows, become U+FFFD. ``code`` writes inline code. The HTML the app
renders has its own helper (``ui.present.escape``).

Automatic links are neutralised as that helper does, in the form GitHub's renderer needs (the
job summary ``check --summary`` writes is GitHub Flavored Markdown, rendered by cmark-gfm, whose
``extensions/autolink.c`` makes GFM's "extended autolinks"): a URL is recognised while the line's
source is read, at a ``:`` followed by ``//`` after ``http``, ``https`` or ``ftp``, and ``www.``
after a blank or the start — so that ``:`` (and the ``:`` of ``mailto:`` and ``xmpp:``, GFM's
protocol autolinks) and that ``.`` are written backslash-escaped, which renders the same
character and starts no link. An e-mail address is recognised later, in the text once parsed,
with escapes and references already decoded and neighbouring text joined, so no escape can hide
its ``@``: an empty HTML comment (``<!-- -->``) is written just before an ``@`` that has a local
part before it and a dotted domain after it. A comment is no text (the address's two halves stay
apart) and shows as nothing: the browser, and GitHub's sanitizer before it, drop it.
"""
from __future__ import annotations

import re

# anywhere: CommonMark's escapes, emphasis, code, links; GFM's table pipe and strikethrough; math's dollar
_BACKSLASHED = set("\\`*_[]|~$")
_AT_START = set("#>+-")  # a heading, a block quote, a list item or a rule: only at the start of a line
_ENTITY = {"&": "&amp;", "<": "&lt;", "\n": "&#10;", "\r": "&#13;"}
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_ORDERED = re.compile(r"^(\d{1,9})([.)])")  # an ordered list item
# what starts an automatic link in GFM (cmark-gfm's autolink extension), in the escaped source
_SCHEME_COLON = re.compile(r"(?i)(?::(?=//)|(?<=mailto):|(?<=xmpp):)")  # http://, https://, ftp://, mailto:, xmpp:
_WWW_DOT = re.compile(r"(?i)(?<=www)\.")
_EMAIL_AT = re.compile(r"(?<=[A-Za-z0-9.+_-])@(?=[A-Za-z0-9._\\-]*\.[A-Za-z0-9])")  # local@domain.tld
SEPARATOR = "<!-- -->"  # an empty HTML comment: no text, shows as nothing


def text(value: object) -> str:
    """``value`` as Markdown that renders as exactly its characters (a paragraph, a table cell or
    inline after other text); see the module docstring."""
    s = _CONTROL.sub("\ufffd", str(value))
    out = "".join(_ENTITY.get(ch) or ("\\" + ch if ch in _BACKSLASHED else ch) for ch in s)
    out = _unlinked(out)
    out = _ORDERED.sub(r"\1\\\2", out)
    if out[:1] in _AT_START:
        out = "\\" + out
    lead = len(out) - len(out.lstrip())
    trail = len(out.rstrip())  # where the white space at the end begins
    if lead == len(out):
        return _refs(out)
    return _refs(out[:lead]) + out[lead:trail] + _refs(out[trail:])


def _unlinked(out: str) -> str:
    """The escaped source ``out`` with no automatic link left to form (module docstring)."""
    if ":" in out:
        out = _SCHEME_COLON.sub(r"\\:", out)
    if "." in out:
        out = _WWW_DOT.sub(r"\\.", out)
    if "@" in out:
        out = _EMAIL_AT.sub(SEPARATOR + "@", out)
    return out


def _refs(s: str) -> str:
    return "".join(f"&#{ord(c)};" for c in s)


def code(value: object) -> str:
    """``value`` as inline code: a code span (backticks, as many as the text's longest run of them
    plus one) when the text fits in one — no line break, control character or table pipe, and not
    only spaces — else as ``text``."""
    s = str(value)
    if not s.strip(" ") or _CONTROL.search(s) or any(c in s for c in "\n\r|"):
        return text(s)
    fence = "`" * (max((len(m) for m in re.findall("`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or (s.startswith(" ") and s.endswith(" ")) else ""
    return f"{fence}{pad}{s}{pad}{fence}"
