"""Errors and warnings raised while reading user data.

Every problem names the file, the line (when there is one) and what is wrong, so that a
user can fix the input without reading a traceback.
"""
from __future__ import annotations

from dataclasses import dataclass, field


class DataError(ValueError):
    """Input that cannot be loaded. ``str(err)`` reads ``file:line: problem``."""

    def __init__(self, problem: str, file: str | None = None, line: int | None = None):
        self.problem = problem
        self.file = file
        self.line = line
        super().__init__(self.location() + problem)

    def location(self) -> str:
        if self.file and self.line:
            return f"{self.file}:{self.line}: "
        if self.file:
            return f"{self.file}: "
        return ""


@dataclass
class LoadReport:
    """What a reader skipped or repaired: warnings the user should see, never silent losses."""

    warnings: list[str] = field(default_factory=list)

    def warn(self, problem: str, file: str | None = None, line: int | None = None) -> None:
        self.warnings.append(DataError(problem, file, line).args[0])

    def extend(self, other: LoadReport) -> None:
        self.warnings.extend(other.warnings)

    def __bool__(self) -> bool:  # a report is "truthy" when it holds warnings
        return bool(self.warnings)


class UnknownSplit(ValueError):
    """A split the data set has no relevance labels for."""

    def __init__(self, dataset: str, split: str | None, splits: list[str]):
        self.dataset, self.split, self.splits = dataset, split, list(splits)
        super().__init__(f"data set {dataset!r} has no labels for split {split!r} "
                         f"(it has: {', '.join(self.splits) or 'none'})")


class EngineError(ValueError):
    """An index engine cannot do what was asked: a bad spec, unreachable, not installed, a foreign
    collection (``retrieval.index.engines``)."""


class EncoderLoadError(ValueError):
    """A sentence-transformers model (by id or folder) that could not be loaded."""

    def __init__(self, name: str, where: str, cause: Exception):
        self.name, self.where, self.cause = name, where, cause
        first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
        super().__init__(f"could not load encoder {name!r} as a {where}: {first}")


class UnknownRun(KeyError):
    """A run key the store does not hold (for this data set)."""

    def __init__(self, key: str):
        self.key = key
        super().__init__(f"unknown run {key[:12]!r}: refresh the list of runs")

    def __str__(self) -> str:
        return str(self.args[0])
