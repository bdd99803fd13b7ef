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

    def extend(self, other: "LoadReport") -> None:
        self.warnings.extend(other.warnings)

    def __bool__(self) -> bool:  # a report is "truthy" when it holds warnings
        return bool(self.warnings)
