"""Problems found in user input: where, what, and how to fix it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.textsafe import terminal

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class Problem:
    """One problem in a cluster file or a pasted command.

    ``field`` is the dotted path of the value (``jobs.worker.tasks[1]``), ``line`` the 1-based line
    in the file when it could be found, ``hint`` how to fix it.
    """

    field: str
    message: str
    hint: str = ""
    severity: str = ERROR
    line: int | None = None

    def format(self, source: str = "") -> str:
        """``SOURCE:LINE: error: FIELD: message`` and its fix on a second line. Each part is
        escaped for a terminal: a field names the user's key and a message quotes their value."""
        where = terminal(source)
        if self.line is not None:
            where = f"{where}:{self.line}" if where else f"line {self.line}"
        location = f"{where}: " if where else ""
        field = f"{terminal(self.field)}: " if self.field else ""
        text = f"{location}{self.severity}: {field}{terminal(self.message)}"
        if self.hint:
            text += f"\n    fix: {terminal(self.hint)}"
        return text


class SpecError(Exception):
    """Raised when input cannot be turned into a cluster; carries every problem found."""

    def __init__(self, problems: list[Problem], source: str = "") -> None:
        self.problems = problems
        self.source = source
        super().__init__("\n".join(p.format(source) for p in problems))


def errors(problems: list[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == ERROR]


def kind(value: Any) -> str:
    """What a TOML value is, in the words a problem uses ("a list", "true/false")."""
    return {
        bool: "true/false",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a table",
    }.get(type(value), type(value).__name__)
