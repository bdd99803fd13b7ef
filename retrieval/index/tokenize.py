"""Tokenization shared by BM25 indexing, query parsing, term highlighting and explanations.

Lowercase → ``\\w+`` words → optional stopword removal → optional Snowball stemming (PyStemmer,
the C implementation of Snowball, in any of its languages). Stems are cached per distinct word.

An apostrophe splits a word into tokens ("can't" is "can" and "t"), as the index reads it; what a
person typed is read whole (``typed_words``: "can't", "O'Brien's"), for the lists of words shown.

Stopword lists: ``"en"`` is Lucene's 33-word English list (what Pyserini/Anserini BM25 uses),
``"en_plus"`` NLTK's 179 words, and the lists bm25s ships for other languages under their ISO 639-1
codes (``"fr"``, ``"de"``, …); ``None`` keeps every word. ``retrieval.data.language`` picks both for a
corpus's language.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import Stemmer

_BM25S_LISTS = (("da", "DANISH"), ("de", "GERMAN"), ("es", "SPANISH"), ("fr", "FRENCH"), ("it", "ITALIAN"),
                ("nl", "DUTCH"), ("no", "NORWEGIAN"), ("pt", "PORTUGUESE"), ("ru", "RUSSIAN"), ("sv", "SWEDISH"),
                ("tr", "TURKISH"))


@functools.cache
def stopword_lists() -> dict[str, tuple[str, ...]]:
    """Stopword lists by ISO 639-1 code (bm25s ships them); "en" is Lucene's 33 words, "en_plus"
    NLTK's 179. Read on first use: importing bm25s brings numba and scipy."""
    from bm25s import stopwords

    return {"en": tuple(stopwords.STOPWORDS_EN), "en_plus": tuple(stopwords.STOPWORDS_EN_PLUS),
            **{code: tuple(getattr(stopwords, f"STOPWORDS_{name}")) for code, name in _BM25S_LISTS}}


def __getattr__(name: str) -> dict[str, tuple[str, ...]]:
    """``STOPWORD_LISTS``, the lists of ``stopword_lists``, read on first use."""
    if name == "STOPWORD_LISTS":
        return stopword_lists()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

WORD = re.compile(r"\w+", re.UNICODE)
TYPED = re.compile(r"\w+(?:['’]\w+)*", re.UNICODE)  # a word as typed: an apostrophe between letters keeps it whole


@dataclass
class Tokenizer:
    lowercase: bool = True
    stopwords: str | None = "en"
    stemmer: str | None = "english"  # any PyStemmer algorithm name, or None
    _stem_cache: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._stemmer = Stemmer.Stemmer(self.stemmer) if self.stemmer else None
        lists = stopword_lists() if self.stopwords else {}
        if self.stopwords and self.stopwords not in lists:
            raise ValueError(f"unknown stopword list {self.stopwords!r}; choose from {sorted(lists)} or None")
        self._stop = frozenset(lists[self.stopwords]) if self.stopwords else frozenset()

    @property
    def config(self) -> dict[str, Any]:
        return {"lowercase": self.lowercase, "stopwords": self.stopwords, "stemmer": self.stemmer}

    def words(self, text: str) -> list[str]:
        """Surface words kept after lowercasing and stopword removal (before stemming)."""
        if self.lowercase:
            text = text.lower()
        return [w for w in WORD.findall(text) if w.lower() not in self._stop]

    def stem(self, word: str) -> str:
        if self._stemmer is None:
            return word
        s = self._stem_cache.get(word)
        if s is None:
            s = self._stem_cache[word] = self._stemmer.stemWord(word)
        return s

    def __call__(self, text: str) -> list[str]:
        return [self.stem(w) for w in self.words(text)]

    def typed_words(self, text: str) -> list[tuple[str, list[str]]]:
        """Each word of ``text`` as a person reads it, lowercased as the index reads it: a contraction, a
        possessive or a name with an apostrophe whole ("can't", "o'brien's"), with the tokens the index
        reads in it (``self(word)``: "can't" gives "can" and "t"); a word whose tokens are all stopwords
        is left out. Its tokens, word after word, are ``self(text)``'s."""
        if self.lowercase:
            text = text.lower()
        out = []
        for m in TYPED.finditer(text):
            tokens = self(m.group(0))
            if tokens:
                out.append((m.group(0), tokens))
        return out

    def tokenize_many(self, texts: Iterable[str]) -> list[list[str]]:
        return [self(t) for t in texts]

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, token) for each kept word of ``text``, for highlighting matches."""
        out = []
        for m in WORD.finditer(text):
            w = m.group(0).lower() if self.lowercase else m.group(0)
            if w.lower() in self._stop:
                continue
            out.append((m.start(), m.end(), self.stem(w)))
        return out
