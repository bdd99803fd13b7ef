"""What a query and an explanation are made of, term by term: a weighted query of analyzed terms (what an
expanded query, RM3's, sends through the lexical seam) and a term's share of a score with its kind (whose
term it is: the query's, one a feedback model added to the query, or one a learned model added to the
document). A leaf: it imports nothing of RankScope's, so every index, system and view can name it.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, NamedTuple, get_args

TermKind = Literal["query term", "query expansion", "document expansion"]
TERM_KINDS: tuple[TermKind, ...] = get_args(TermKind)
QUERY_TERM: TermKind = "query term"  # a term of the query as typed (after the tokenizer)
QUERY_EXPANSION: TermKind = "query expansion"  # a term a feedback model (RM3) added to the query
DOCUMENT_EXPANSION: TermKind = "document expansion"  # a term a learned model (SPLADE) added to the document


class TermScore(NamedTuple):
    """One term's share of a system's score of a document, and its kind (``TermKind``): a query
    term, a query expansion (added to the query by pseudo-relevance feedback) or a document expansion
    (the document's own text lacks it: a learned sparse model added it)."""

    term: str
    score: float
    kind: TermKind


@dataclass(frozen=True)
class WeightedQuery:
    """A query of analyzed terms (the tokenizer's output: stemmed, stopwords out), each with a weight:
    what a lexical index scores as Σ_t w_t · bm25(t, d), the term's count in a text query replaced by
    its weight. This is how Anserini/Lucene score a ``BooleanQuery`` of ``SHOULD`` clauses, each a
    ``BoostQuery(TermQuery(t), w_t)`` (the expanded query of Anserini's ``Rm3Reranker``): a boost
    multiplies the clause's BM25 score, and the clauses' scores add up.

    Terms are sent as they are (never analyzed again), in the order given (the order scores are
    summed in); a term may appear once. A weight is a finite number of 0 or more (a Lucene boost
    cannot be negative). A ValueError in one line names what is wrong.

    Attributes:
        terms: ``((term, weight), …)``.
    """

    terms: tuple[tuple[str, float], ...]

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for pair in self.terms:
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise ValueError(f"a weighted query's term is a (term, weight) pair, not {pair!r}")
            term, weight = pair
            if not isinstance(term, str) or not term or any(c.isspace() for c in term):
                raise ValueError(f"a weighted query's term is one analyzed term without spaces, not {term!r}")
            if term in seen:
                raise ValueError(f"the term {term!r} appears twice in a weighted query: give it one weight")
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) \
                    or weight < 0:
                raise ValueError(f"the weight of {term!r} is a finite number of 0 or more, not {weight!r}")
            seen.add(term)

    @classmethod
    def of(cls, weights: Iterable[tuple[str, float]]) -> WeightedQuery:
        """A weighted query of ``(term, weight)`` pairs, each weight a float."""
        return cls(tuple((t, float(w)) for t, w in weights))

    @classmethod
    def counted(cls, tokens: Iterable[str]) -> WeightedQuery:
        """The weighted query a text query's tokens are: each distinct term weighted by its count,
        in the order the terms first appear."""
        return cls.of(Counter(tokens).items())

    @property
    def names(self) -> list[str]:
        """The terms, in order."""
        return [t for t, _ in self.terms]
