"""What a retrieval system declares about itself: its typed parameters, the paper it follows, the
systems it is built on, and what it can give (exact scores of any document, the kinds of terms its
explanations name).

Plain data and one parser, no retrieval: this module imports nothing of the library but the number
grammar (``retrieval.numbers``), so that anything may read a declaration — the registry, the
workspace that holds each system's parameter values, the command line's ``--param SYSTEM.NAME=VALUE``,
the views' knobs, the contract tests and the documentation's systems table all derive from it.

A value reaches a system only through ``parse``: the number grammar reads it (a command line's text,
a form's number, an API's JSON) and the declared range holds it, and anything else is a ValueError in
one line naming the system, the parameter, the value and the range ("QL's mu is a number above 0, not
'-5'"). ``written`` writes a value so that ``parse`` reads the same value back.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from retrieval import numbers

# the kinds of terms an explanation names (``Capabilities.explanation``): the explanation record's own
from retrieval.index.terms import DOCUMENT_EXPANSION as DOCUMENT_EXPANSION  # named by the systems' declarations
from retrieval.index.terms import QUERY_EXPANSION as QUERY_EXPANSION
from retrieval.index.terms import QUERY_TERM as QUERY_TERM
from retrieval.index.terms import TERM_KINDS as TERM_KINDS

INT, FLOAT, STR, BOOL, CHOICE = "int", "float", "str", "bool", "choice"
DENSE_WHY, SPLIT_WHY = "dense", "split"  # what a system's ``explain_score`` gives (``Capabilities.explains_score``)
SCORE_EXPLANATIONS = (DENSE_WHY, SPLIT_WHY)
KINDS = (INT, FLOAT, STR, BOOL, CHOICE)
TRUE, FALSE = ("true", "yes", "1"), ("false", "no", "0")

Value = int | float | str | bool
Settings = Mapping[str, Value]  # one system's parameter values by name, read-only (``settings``)


@dataclass(frozen=True)
class Parameter:
    """One setting of a system that its results depend on.

    Attributes:
        name: What the command line (``--param SYSTEM.NAME=VALUE``), the API and the cache key call it.
        kind: ``int``, ``float``, ``str``, ``bool`` or ``choice`` (one of ``choices``).
        default: The value a workspace uses unless given another; within the range.
        doc: What it does, in a few words ("term-frequency saturation").
        low: The smallest value allowed (None: no bound below); numbers only.
        high: The largest value allowed (None: no bound above); numbers only.
        low_open: Whether ``low`` itself is refused (the range is above it, not from it).
        high_open: Whether ``high`` itself is refused.
        choices: The values a ``choice`` takes.
    """

    name: str
    kind: str
    default: Value
    doc: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"a parameter's kind is one of {', '.join(KINDS)}, not {self.kind!r}")
        if (self.kind == CHOICE) != bool(self.choices):
            raise ValueError(f"the parameter {self.name!r}: choices are given for a choice, and only for one")
        if (self.low is not None or self.high is not None) and self.kind not in (INT, FLOAT):
            raise ValueError(f"the parameter {self.name!r}: a range bounds a number only")

    @property
    def range_text(self) -> str:
        """The values allowed, as the refusals and the help write them: "a number from 0 to 1", "an
        integer of 1 or more", "a number above 0", "one of lucene, robertson"."""
        if self.kind == CHOICE:
            return "one of " + ", ".join(self.choices)
        if self.kind == BOOL:
            return "true or false"
        if self.kind == STR:
            return "a text"
        kind = "an integer" if self.kind == INT else "a number"
        low, high = self.low, self.high
        if low is not None and high is not None:
            if not (self.low_open or self.high_open):
                return f"{kind} from {low:g} to {high:g}"
            return (f"{kind} {'above' if self.low_open else 'from'} {low:g} and "
                    f"{'below' if self.high_open else 'at most'} {high:g}")
        if low is not None:
            return f"{kind} above {low:g}" if self.low_open else f"{kind} of {low:g} or more"
        if high is not None:
            return f"{kind} below {high:g}" if self.high_open else f"{kind} of {high:g} or less"
        return kind

    def holds(self, value: float) -> bool:
        """Whether the number ``value`` lies in the declared range."""
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return not (self.high is not None and (value > self.high or (self.high_open and value == self.high)))


@dataclass(frozen=True)
class Citation:
    """The work a system follows: whom to cite, and where in it the method is written.

    Attributes:
        authors: "ChengXiang Zhai, John Lafferty".
        title: The paper's title.
        venue: Where it appeared ("SIGIR 2001", "ECIR 2021, arXiv:2004.13969").
        year: The year it appeared.
        section: The section (or equation) that gives the method.
        url: Where to read it, if anywhere ("" when not given).
    """

    authors: str
    title: str
    venue: str
    year: int
    section: str
    url: str = ""

    @property
    def text(self) -> str:
        """The citation in one line: authors, "title", venue, section."""
        return f'{self.authors}, "{self.title}", {self.venue}, {self.section}'


@dataclass(frozen=True)
class Relations:
    """What a system is built on, in its registry's keys, and how, in one line ("BM25 with query
    expansion"); a system built on none has neither."""

    based_on: tuple[str, ...] = ()
    relation: str = ""


@dataclass(frozen=True)
class Capabilities:
    """What a system can give beyond a ranked list.

    Attributes:
        exact_scores: Whether ``exact_scores`` scores any chosen document, retrieved or not (a fused
            rank or a run file scores a list, not a document: None).
        explanation: The kinds of terms ``explain`` names (``TERM_KINDS``), or None where it explains
            nothing of its own (BM25's per-term contributions, which every hit carries, are all).
        explains_score: What ``explain_score`` gives (``SCORE_EXPLANATIONS``): ``"dense"``, the query words
            and passages that carry a dense score (``dense_why.DenseWhy``); ``"split"``, a fused score split
            into its λ-weighted lexical part and its dense part, each explained (``hybrid_why.HybridWhy``);
            None where it gives none.
    """

    exact_scores: bool
    explanation: frozenset[str] | None = None
    explains_score: str | None = None

    def __post_init__(self) -> None:
        unknown = set(self.explanation or ()) - set(TERM_KINDS)
        if unknown:
            raise ValueError(f"an explanation names terms of the kinds {', '.join(TERM_KINDS)}, not {sorted(unknown)}")
        if self.explains_score is not None and self.explains_score not in SCORE_EXPLANATIONS:
            raise ValueError(f"a score's explanation is one of {', '.join(SCORE_EXPLANATIONS)}, "
                             f"not {self.explains_score!r}")


def parse(parameter: Parameter, value: object, system: str) -> Value:
    """``value`` as ``system``'s ``parameter`` takes it: the one way a parameter's value is read.

    Args:
        parameter: The declaration.
        value: Text (a command line, a form) or a value (an API's JSON, a library call).
        system: The system's name in the message ("BM25", "QL").

    Returns:
        The value, of the parameter's kind.

    Raises:
        ValueError: In one line naming the system, the parameter, the value and the range.
    """
    what = f"{system}'s {parameter.name}"
    if parameter.kind in (INT, FLOAT):
        x: int | float = numbers.integer(value, what) if parameter.kind == INT else numbers.number(value, what)
        if not parameter.holds(x):
            raise ValueError(f"{what} is {parameter.range_text}, not {numbers.shown(value)}")
        return x
    if parameter.kind == BOOL:
        if isinstance(value, bool):
            return value
        text = value.strip().lower() if isinstance(value, str) else None
        if text in TRUE or text in FALSE:
            return text in TRUE
        raise ValueError(f"{what} is true or false, not {numbers.shown(value)}")
    if not isinstance(value, str):
        raise ValueError(f"{what} is {parameter.range_text}, not {type(value).__name__} {numbers.shown(value)}")
    if parameter.kind == CHOICE and value not in parameter.choices:
        raise ValueError(f"{what} is {parameter.range_text}, not {numbers.shown(value)}")
    if parameter.kind == STR and (not value or not value.isprintable()):
        raise ValueError(f"{what} is a text of printable characters, not {numbers.shown(value)}")
    return value


def written(parameter: Parameter, value: Value) -> str:
    """``value`` written as text that ``parse`` reads back as the same value (a float by its
    ``repr``, which the number grammar reads; a bool as "true" or "false")."""
    if parameter.kind == BOOL:
        return "true" if value else "false"
    if parameter.kind == FLOAT:
        x = float(value)
        if not math.isfinite(x):
            raise ValueError(f"{parameter.name} {x!r} is not a finite number")
        return repr(x)
    return str(value)


def settings(declared: Iterable[Parameter], given: Mapping[str, object], system: str) -> Settings:
    """Every declared parameter's value (``given``, else its default), each read by ``parse``, as
    a read-only mapping in declaration order.

    Raises:
        ValueError: A name ``given`` that is not declared, or a value ``parse`` refuses.
    """
    by_name = {p.name: p for p in declared}
    unknown = [n for n in given if n not in by_name]
    if unknown:
        known = ", ".join(by_name) or "none"
        raise ValueError(f"{system} has no parameter {unknown[0]!r} (its parameters: {known})")
    return MappingProxyType({n: parse(p, given[n], system) if n in given else p.default for n, p in by_name.items()})


def keyed(section: str, params: dict[str, Any], values: Settings) -> dict[str, Any]:
    """A system's cache key ``params`` with every declared parameter's value in it, under
    ``section`` (the system's key), so that no parameter can be left out of the key: a value the
    system already writes there is checked to be the same, never written twice.

    Raises:
        ValueError: The system writes a declared parameter into its key with another value.
    """
    if not values:
        return params
    part = params.get(section)
    part = dict(part) if isinstance(part, dict) else {}
    for name, value in values.items():
        if name in part and part[name] != value:
            raise ValueError(f"the cache key of {section!r} holds {name} {part[name]!r}, not its value {value!r}")
        part[name] = value
    return {**params, section: part}
