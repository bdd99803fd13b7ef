"""A corpus's language: detected on a seeded sample of its documents, turned into BM25's stemmer and
stopwords, and held against what the dense encoder was trained on.

Detection is py3langid (Lui and Baldwin, "langid.py: An Off-the-shelf Language Identification
Tool", ACL 2012 demos; the maintained numpy port), offline and deterministic: each sampled document
(its first ``chars`` characters) gets one language, and the corpus's language is the most common one
with its share of the sample.
"""
from __future__ import annotations

import hashlib
import random
from collections import Counter
from dataclasses import dataclass

import Stemmer

from retrieval.index.tokenize import Tokenizer, stopword_lists

# ISO 639-1 code -> Snowball (PyStemmer) algorithm
SNOWBALL = {"ar": "arabic", "ca": "catalan", "cs": "czech", "da": "danish", "de": "german", "el": "greek",
            "en": "english", "es": "spanish", "et": "estonian", "eu": "basque", "fi": "finnish", "fr": "french",
            "ga": "irish", "hi": "hindi", "hu": "hungarian", "hy": "armenian", "id": "indonesian", "it": "italian",
            "lt": "lithuanian", "ne": "nepali", "nl": "dutch", "no": "norwegian", "fa": "persian", "pl": "polish",
            "pt": "portuguese", "ro": "romanian", "ru": "russian", "sr": "serbian", "sv": "swedish", "ta": "tamil",
            "tr": "turkish", "yi": "yiddish"}
# encoders trained on English text only (the default among them)
_guesses: dict[str, LanguageGuess] = {}  # sample hash -> guess (detection is deterministic)
ENGLISH_ONLY = {"all-MiniLM-L6-v2", "all-MiniLM-L12-v2", "all-mpnet-base-v2", "multi-qa-MiniLM-L6-cos-v1"}


@dataclass(frozen=True)
class LanguageGuess:
    code: str  # ISO 639-1, e.g. "en"
    share: float  # of the sampled documents detected as ``code``
    sampled: int
    counts: dict[str, int]


def detect_language(texts: list[str], sample: int = 200, chars: int = 500, seed: int = 0) -> LanguageGuess:
    """The most common language of a seeded sample of ``texts`` (each cut to ``chars`` characters)."""
    import py3langid

    rows = [t for t in texts if t.strip()]
    if not rows:
        return LanguageGuess("en", 0.0, 0, {})
    picked = [t[:chars] for t in random.Random(seed).sample(rows, min(sample, len(rows)))]
    key = hashlib.sha256("\x00".join(picked).encode("utf-8")).hexdigest()
    if key not in _guesses:  # opening a corpus and warning about it both ask: classify the sample once
        counts = Counter(py3langid.classify(t)[0] for t in picked)
        code, n = counts.most_common(1)[0]
        _guesses[key] = LanguageGuess(code, n / len(picked), len(picked), dict(counts))
    return _guesses[key]


def corpus_tokenizer(texts: list[str], setting: str = "auto") -> Tokenizer:
    """BM25's tokenizer for a corpus: ``setting`` "auto" detects the language on a sample
    (``detect_language``), any other value is an ISO 639-1 code (``"en"``, ``"fr"``, …)."""
    return tokenizer_for(detect_language(texts).code if setting == "auto" else setting)


def tokenizer_for(code: str) -> Tokenizer:
    """BM25's tokenizer for a language: its Snowball stemmer and stopword list where they exist
    (English: Lucene's list and the English stemmer, as before); no stemming where Snowball has no
    algorithm, so words still match exactly."""
    stemmer = SNOWBALL.get(code)
    if stemmer not in Stemmer.algorithms():
        stemmer = None
    return Tokenizer(stopwords=code if code in stopword_lists() else None, stemmer=stemmer)


def encoder_mismatch(guess: LanguageGuess, encoder_name: str, min_share: float = 0.5) -> bool:
    """True when most of the corpus is in a language an English-only encoder was not trained on."""
    return guess.code != "en" and guess.share >= min_share and encoder_name in ENGLISH_ONLY
