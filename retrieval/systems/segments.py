"""A document cut into the passages a dense explanation scores one by one (``retrieval.systems.dense_why``):
its sentences, a long sentence cut into windows of at most ``WINDOW_WORDS`` words, and a query cut into
the words a person typed.

A sentence ends after a run of ``.``, ``!`` or ``?`` (closing quotes and brackets kept with it) that is
followed by white space or by the end of the text; a line break ends one too. A segment is a span
``(start, end)`` of the text as given, never rewritten: ``text[start:end]`` is the segment, stripped of
white space at both ends and never empty; the segments come in the text's order, do not overlap, and
everything between and around them is white space. So a view can show any segment as it stands in the
document, and the spans are what the cache keeps.

Simple on purpose: an abbreviation ("e.g. the") ends a sentence early, which costs only a shorter
passage. ``SPLITTER_VERSION`` is part of every cached explanation's key: a change of the rules here
changes it.
"""
from __future__ import annotations

import re
from typing import NamedTuple

SPLITTER_VERSION = 1  # in the cache key of every explanation built on these spans: raise it when the rules change
WINDOW_WORDS = 40  # a longer sentence is cut into windows of at most this many words
_SENTENCE = re.compile(r"[^\n]*?(?:[.!?]+[\"'”’)\]]*(?=\s|$)|(?=\n)|$)")
_WORD = re.compile(r"\S+")


class Span(NamedTuple):
    """A stretch of a text: ``text[start:end]``."""

    start: int
    end: int


def words(text: str) -> list[Span]:
    """The white-space words of ``text`` (a query as typed), each by its span in ``text``."""
    return [Span(m.start(), m.end()) for m in _WORD.finditer(text)]


def segments(text: str, window: int = WINDOW_WORDS) -> list[Span]:
    """``text``'s sentences, each longer than ``window`` words cut into consecutive windows of at most
    ``window`` words (module docstring): spans in order, without overlap, each stripped and non-empty.

    Args:
        text: A document's text as the encoder reads it.
        window: The most words one segment holds (1 or more).

    Returns:
        The segments' spans.

    Raises:
        ValueError: ``window`` is below 1.
    """
    if window < 1:
        raise ValueError(f"a segment holds 1 word or more, not {window}")
    out: list[Span] = []
    pos = 0
    while pos < len(text):
        if text[pos].isspace():  # between sentences (a line break among them)
            pos += 1
            continue
        m = _SENTENCE.match(text, pos)
        end = m.end() if m is not None and m.end() > pos else len(text)
        found = words(text[pos:end])
        for i in range(0, len(found), window):
            part = found[i:i + window]
            out.append(Span(pos + part[0].start, pos + part[-1].end))
        pos = end
    return out
