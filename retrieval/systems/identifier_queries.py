"""Queries that look up an identifier — a part number, a code, a model or version number — and
that the hybrid ranks by BM25 alone.

A dense encoder reads text through a subword vocabulary: an identifier such as "QX-4471" becomes
a few word pieces that carry no identity of their own, so the cosine of such a query with a
document says how alike their pieces look, not whether the document holds the identifier. BM25
matches the exact token. Fused with equal weight, the cosine then reorders what BM25 found
exactly. (Dense retrievers miss rare entities that BM25 finds by their exact name: Sciavolino,
Zhong, Lee, Chen, "Simple Entity-Centric Questions Challenge Dense Retrievers", EMNLP 2021,
arXiv:2109.08535; an identifier is the extreme case, a name in no training text.) For a query that
is mostly identifiers the hybrid therefore follows BM25 (λ → ∞, the cosine only breaking ties),
and says so where λ is shown.

The rule looks at the query's text alone (no labels, nothing tuned): at most ``MAX_WORDS``
whitespace-separated words, at least half of them containing a digit ("QX-4471", "LX318 baggage",
"Polysorbate 80"); a longer query that merely mentions a number ("effects of omega-3 in 2020
trials") is left to the fusion.
"""
from __future__ import annotations

import re

MAX_WORDS = 3
RULE = f"at most {MAX_WORDS} words, at least half with a digit: BM25 alone"  # what a cache key records
_DIGIT = re.compile(r"\d")


def is_identifier_lookup(text: str) -> bool:
    """Whether the query ``text`` looks up an identifier (module docstring)."""
    words = text.split()
    if not words or len(words) > MAX_WORDS:
        return False
    return 2 * sum(bool(_DIGIT.search(w)) for w in words) >= len(words)


def identifier_lookups(queries: dict[str, str]) -> list[str]:
    """The ids of the queries that look up an identifier, in order."""
    return [qid for qid, text in queries.items() if is_identifier_lookup(text)]
