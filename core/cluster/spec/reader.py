"""Reading one value of a cluster file: its type, range or choices, or a problem naming it.

Each problem carries the dotted field, the line (:func:`core.cluster.spec.locate.locate`) and the fix, as
``python main.py validate`` prints it.
"""

from __future__ import annotations

import difflib
import math
import re
from typing import Any

from core.cluster.problems import ERROR, Problem, kind
from core.cluster.spec.locate import locate, path_text
from core.cluster.spec.model import split_command

NUL_HINT = "remove the \\u0000: a program's arguments and environment cannot hold a NUL"
# Linux gives a program no argument and no NAME=value longer than this (MAX_ARG_STRLEN: 32 pages
# of 4 KiB, NUL included); exec fails with "Argument list too long", naming nothing. The total is
# checked per role by core.cluster.arglimits.
MAX_STRING_BYTES = 32 * 4096
LONG_HINT = "put the data in a file and pass the file's path (a program is given at most 128 KiB per value)"


def string_bytes(text: str) -> int:
    """What one argument or ``NAME=value`` costs a program: its bytes and the NUL after them."""
    return len(text.encode("utf-8", "surrogateescape")) + 1


def size_text(count: int) -> str:
    return f"{count / 1024:.0f} KiB" if count < 1024 * 1024 else f"{count / 2**20:.1f} MiB"


class Reader:
    """Collects the problems of one cluster file while its values are read; never raises."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.problems: list[Problem] = []

    def add(self, path: tuple[str | int, ...], message: str, hint: str = "", *, severity: str = ERROR) -> None:
        self.problems.append(Problem(path_text(path), message, hint, severity, locate(self.text, path)))

    def unknown_keys(self, table: dict[str, Any], allowed: Any, path: tuple[str | int, ...]) -> None:
        for key in table:
            if key not in allowed:
                close = difflib.get_close_matches(key, list(allowed), n=1)
                hint = f"did you mean {close[0]!r}?" if close else "allowed keys: " + ", ".join(allowed)
                self.add((*path, key), f"unknown key {key!r}", hint)

    def string(self, value: Any, path: tuple[str | int, ...], choices: tuple[str, ...] = ()) -> str | None:
        if not isinstance(value, str):
            self.add(
                path,
                f"must be a string, not {kind(value)}",
                f'write it in quotes, e.g. "{choices[0] if choices else "..."}"',
            )
            return None
        if choices and value not in choices:
            close = difflib.get_close_matches(value, choices, n=1) or [c for c in choices if c.lower() == value.lower()]
            hint = f"did you mean {close[0]!r}? " if close else ""
            self.add(
                path, f"{value!r} is not one of {', '.join(choices)}", hint + "choose one of " + ", ".join(choices)
            )
            return None
        return value

    def number(self, value: Any, path: tuple[str | int, ...], minimum: float, *, integer: bool = False) -> float | None:
        ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok_type:
            self.add(
                path,
                f"must be {'an integer' if integer else 'a number'}, not {kind(value)}",
                f"e.g. {path[-1]} = {int(minimum) if integer else minimum}",
            )
            return None
        if isinstance(value, float) and not math.isfinite(value):  # start_s = inf: never running
            self.add(path, f"must be a finite number, not {value}", f"e.g. {path[-1]} = {int(minimum) or 1}")
            return None
        if value < minimum:
            self.add(path, f"must be at least {minimum}, not {value}", f"use a value >= {minimum}")
            return None
        return float(value)

    def env(self, value: Any, path: tuple[str | int, ...]) -> dict[str, str]:
        if not isinstance(value, dict):
            self.add(
                path,
                f'must be a table of NAME = "value", not {kind(value)}',
                'e.g. env = { TF_CPP_MIN_LOG_LEVEL = "1" }',
            )
            return {}
        out: dict[str, str] = {}
        for key, item in value.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                self.add(
                    (*path, key),
                    f"{key!r} is not a valid environment variable name",
                    "use letters, digits and _; not starting with a digit",
                )
            elif isinstance(item, bool) or not isinstance(item, (str, int, float)):
                self.add((*path, key), f"must be a string, not {kind(item)}", f'e.g. {key} = "1"')
            elif isinstance(item, str) and "\0" in item:
                self.add((*path, key), "contains a NUL character (\\u0000)", NUL_HINT)
            elif (size := string_bytes(f"{key}={item}")) > MAX_STRING_BYTES:
                self.add(
                    (*path, key),
                    f"{key}=... is {size:,} bytes, more than the {MAX_STRING_BYTES:,} a program can be given",
                    LONG_HINT,
                )
            else:
                out[key] = str(item)
        return out

    def command(self, value: Any, path: tuple[str | int, ...]) -> tuple[str, ...] | None:
        if isinstance(value, str):
            try:
                parts = split_command(value)
            except ValueError as exc:
                self.add(path, f"cannot split the command: {exc}", "check the quotes, or give a list of arguments")
                return None
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            parts = tuple(value)
        else:
            self.add(
                path,
                f"must be a string or a list of strings, not {kind(value)}",
                'e.g. command = ["python", "-u", "train.py"]',
            )
            return None
        if not parts or not parts[0]:
            self.add(path, "is empty", 'e.g. command = ["python", "-u", "train.py"]')
            return None
        for i, part in enumerate(parts):
            if "\0" in part:
                # No program can receive it (exec takes C strings): refused here, not at launch.
                self.add(path, f"argument {i} ({part!r}) contains a NUL character (\\u0000)", NUL_HINT)
                return None
            if (size := string_bytes(part)) > MAX_STRING_BYTES:
                self.add(
                    path,
                    f"argument {i} is {size:,} bytes, more than the {MAX_STRING_BYTES:,} a program can be given",
                    LONG_HINT,
                )
                return None
        return parts

    def gpus(self, value: Any, path: tuple[str | int, ...]) -> tuple[int, ...] | None:
        if (
            isinstance(value, bool)
            or not isinstance(value, list)
            or not all(isinstance(g, int) and not isinstance(g, bool) for g in value)
        ):
            what = kind(value)
            if isinstance(value, list):
                bad = next(g for g in value if isinstance(g, bool) or not isinstance(g, int))
                what = f"a list holding {kind(bad)} ({bad!r})"
            self.add(path, f"must be a list of GPU indices, not {what}", "e.g. gpus = [0, 1], or gpus = [] for none")
            return None
        if any(g < 0 for g in value):
            self.add(path, "GPU indices cannot be negative", "use indices as nvidia-smi shows them: 0, 1, ...")
            return None
        if len(set(value)) != len(value):
            self.add(path, "lists a GPU twice", "list each GPU once")
            return None
        return tuple(value)
