"""Exit codes of the command line, how it prints a cluster file's problems, and its small refusals."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from core.cluster.problems import Problem
from core.textsafe import terminal

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def print_problems(problems: list[Problem], source: str, err: TextIO) -> None:
    """Each problem as ``SOURCE:LINE: error: FIELD: message`` with its fix."""
    for problem in problems:
        print(problem.format(source), file=err)


def resolve_run(arg: str, root: Path | None, err: TextIO) -> Path | None:
    """The run directory ``arg`` names (a path, a run id, ``latest``), or None after saying why."""
    from core.run import rundir

    try:
        return rundir.resolve(arg, root)
    except FileNotFoundError as exc:
        print(terminal(f"run: {exc}"), file=err)
        return None


def line_count(text: str) -> int:
    """``--tail``: a count of lines, 0 or more (argparse prints the refusal)."""
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


line_count.__name__ = "count of lines (0 or more)"  # argparse's message: invalid <this> value: '-5'


def write_output(path: Path, text: str, err: TextIO) -> bool:
    """Write ``-o`` output; False after one line saying why not (a directory, read-only, no such folder)."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        why = "it is a directory" if path.is_dir() else (exc.strerror or str(exc))
        print(terminal(f"-o {path}: cannot write: {why}; give a file path in a folder you can write"), file=err)
        return False
    return True
