"""Exit codes of the command line, and how it prints a cluster file's problems."""

from __future__ import annotations

from typing import TextIO

from core.problems import Problem

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def print_problems(problems: list[Problem], source: str, err: TextIO) -> None:
    """Each problem as ``SOURCE:LINE: error: FIELD: message`` with its fix."""
    for problem in problems:
        print(problem.format(source), file=err)
