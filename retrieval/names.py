"""What a user-supplied id or name may hold, and the file names RankScope makes from them.

Ids (documents, queries, labels, runs) and names (runs, judges, splits, data sets) come from files
and forms a stranger may have written. They are shown in tables, exported to TREC files and used
to name files, so:

* ``id_problem`` — an id may not hold whitespace (TREC run and qrels files separate their columns
  by it), control characters (C0, DEL, C1: a NUL, a terminal escape), or characters that are
  invisible or reorder the text around them (Unicode's format characters: bidi overrides and
  isolates, zero-width spaces and joiners, the byte-order mark, soft hyphens; line and paragraph
  separators), which would make two different ids look alike or an id look like another;
* ``check_name`` — a name follows the same rules (whitespace allowed where ``spaces``), is not
  empty and has at most ``limit`` characters (``NAME_LIMIT``); ``display_name`` makes one from a
  file name instead of refusing it;
* ``file_name`` — a file name that cannot escape its folder whatever the name: a slug of ASCII
  letters, digits, ``-``, ``_`` and ``.`` (never leading, never ``..``), at most ``SLUG_CHARS``
  long, then ``-`` and the first 8 hex digits of the name's sha256, so names that slug alike
  (``a/b`` and ``a?b``, or two long names with one prefix) still get different files.
"""
from __future__ import annotations

import hashlib
import re
import unicodedata

NAME_LIMIT = 100  # characters in a run, judge, split or data set name
SLUG_CHARS = 60
_HIDDEN = {"Cc", "Cf", "Zl", "Zp"}  # controls, format (bidi, zero-width, BOM, soft hyphen), separators


def hidden_char(value: str) -> str | None:
    """The first control, invisible or text-reordering character of ``value`` (None if none)."""
    for c in value:
        if unicodedata.category(c) in _HIDDEN:
            return c
    return None


def describe_char(c: str) -> str:
    """"U+202E (RIGHT-TO-LEFT OVERRIDE)": a character named so that it can be seen."""
    return f"U+{ord(c):04X} ({unicodedata.name(c, 'a control character')})"


_PLAIN_ID = re.compile(r"[!-~]+")  # visible ASCII only: nothing to check character by character


def id_problem(ident: str) -> str | None:
    """Why ``ident`` cannot be an id (whitespace, a control or invisible character), or None."""
    if _PLAIN_ID.fullmatch(ident):
        return None
    if any(c.isspace() for c in ident):
        return "contains whitespace, which TREC run and qrels files cannot hold"
    c = hidden_char(ident)
    if c is not None:
        return f"contains {describe_char(c)}, a control or invisible character ids cannot hold"
    return None


def check_name(name: str, what: str, limit: int = NAME_LIMIT, spaces: bool = True) -> str:
    """``name`` stripped, or a ValueError in one line: empty, too long (over ``limit``
    characters), with whitespace (unless ``spaces``), a control or an invisible character."""
    if not isinstance(name, str):
        raise ValueError(f"a {what} must be text, not {type(name).__name__}")
    stripped = name.strip()
    if not stripped:
        raise ValueError(f"a {what} cannot be empty")
    if len(stripped) > limit:
        raise ValueError(f"a {what} has at most {limit} characters, not {len(stripped):,}")
    if not spaces and any(c.isspace() for c in stripped):
        raise ValueError(f"a {what} must be one word (it is a TREC tag), not {_shown(stripped)}")
    c = hidden_char(stripped)
    if c is not None:
        raise ValueError(f"a {what} cannot hold {describe_char(c)}: {_shown(stripped)}")
    return stripped


def display_name(raw: str, fallback: str = "dataset", limit: int = NAME_LIMIT) -> str:
    """A name made from something the user did not choose as a name (a file or folder name): its
    control and invisible characters dropped, whitespace runs made one space, cut to ``limit``
    characters (with "…"); ``fallback`` when nothing is left."""
    kept = "".join(c for c in raw if unicodedata.category(c) not in _HIDDEN)
    name = " ".join(kept.split())
    if len(name) > limit:
        name = name[:limit - 1].rstrip() + "…"
    return name or fallback


def _shown(value: str, limit: int = 80) -> str:
    """``value`` quoted for a message, cut at ``limit`` characters, hidden characters escaped."""
    cut = value if len(value) <= limit else value[:limit] + "…"
    return repr(cut)


def file_name(*parts: str, suffix: str = "") -> str:
    """A file name for ``parts`` (e.g. data set, split and run name) that stays inside whatever
    folder it is joined to: their slug, ``-``, a short hash of the parts, then ``suffix``
    (e.g. ".trec"). Two different part lists never share a name (up to the hash)."""
    joined = "\x00".join(parts)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", ".".join(p.strip() for p in parts))
    slug = re.sub(r"[.-]{2,}", "-", slug).strip(".-")[:SLUG_CHARS].rstrip(".-") or "file"
    digest = hashlib.sha256(joined.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{slug}-{digest}{suffix}"
