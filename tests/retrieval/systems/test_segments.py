"""The splitter dense explanations score passages by (``retrieval.systems.segments``): a document's
segments cover its text in order, without overlap, each span indexing the original text exactly, a
long sentence cut into windows of at most ``window`` words; a query's words are its white-space words
with their spans as typed."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.systems.segments import segments, words

TEXTS = st.text(alphabet=st.sampled_from(list("ab .!?\n\t\"')é") + ["\u2028", "。"]), max_size=200)


@settings(max_examples=400, deadline=None)
@given(TEXTS, st.integers(1, 6))
def test_segments_cover_the_text_in_order_without_overlap(text, window):
    spans = segments(text, window)
    pos = 0
    for start, end in spans:
        assert pos <= start < end <= len(text)
        assert text[pos:start].strip() == ""  # only white space between segments
        part = text[start:end]
        assert part == part.strip() and part
        assert len(part.split()) <= window
        pos = end
    assert text[pos:].strip() == ""
    assert [w for s, e in spans for w in text[s:e].split()] == text.split()  # every word in one segment


@settings(max_examples=200, deadline=None)
@given(TEXTS)
def test_words_are_the_white_space_words_with_their_spans(text):
    assert [text[s:e] for s, e in words(text)] == text.split()


def test_sentences_end_at_their_stops_and_long_ones_are_windowed():
    text = 'Cats sleep. Do "dogs bark?" Yes!\nA line without a stop\none two three four five six seven'
    assert [text[s:e] for s, e in segments(text, 3)] == [
        "Cats sleep.", 'Do "dogs bark?"', "Yes!", "A line without", "a stop", "one two three", "four five six",
        "seven"]
    assert segments("") == [] and segments("  \n ") == []
    with pytest.raises(ValueError, match="1 word or more, not 0"):
        segments("a", 0)
