"""Exit codes of the command line, and how it prints a cluster file's problems."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from core.problems import Problem

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def print_problems(problems: list[Problem], source: str, err: TextIO) -> None:
    """Each problem as ``SOURCE:LINE: error: FIELD: message`` with its fix."""
    for problem in problems:
        print(problem.format(source), file=err)


def resolve_run(arg: str, root: Path | None, err: TextIO) -> Path | None:
    """The run directory ``arg`` names (a path, a run id, ``latest``), or None after saying why."""
    from core import rundir

    try:
        return rundir.resolve(arg, root)
    except FileNotFoundError as exc:
        print(f"run: {exc}", file=err)
        return None
