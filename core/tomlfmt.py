"""TOML text a person can read: short arrays on one line, tasks one per line, small tables inline.

``tomli_w`` writes every array one item a line, so ``gpus = [0, 1]`` takes four lines and a task
with GPUs becomes a broken-up inline table. Cluster files are written by hand too (see
resources/demo_cluster.toml); what TowerDeck saves should look like them. Only the types TOML
has for plain data are written (str, int, float, bool, list, dict); ``tomllib`` reads the text
back to an equal dict.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

LINE_WIDTH = 120  # as the project's own code; the demo's command line is 111
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def cluster_sections(path: tuple[str, ...]) -> bool:
    """Cluster files: top-level tables (env, jobs) and each job are sections; the rest is inline."""
    return len(path) == 1 or (len(path) == 2 and path[0] == "jobs")


def dumps(data: dict[str, Any], sections: Callable[[tuple[str, ...]], bool] = cluster_sections) -> str:
    """``data`` as TOML; ``sections(path)`` says which tables get a ``[header]`` (others are inline)."""
    out: list[str] = []
    _section(data, (), sections, out)
    return "\n".join(out).strip("\n") + "\n"


def _section(
    table: dict[str, Any], path: tuple[str, ...], sections: Callable[[tuple[str, ...]], bool], out: list[str]
) -> None:
    inline = {k: v for k, v in table.items() if not (isinstance(v, dict) and sections((*path, k)))}
    nested = {k: v for k, v in table.items() if k not in inline}
    if path and (inline or not nested):
        out.append("")
        out.append("[" + ".".join(_key(p) for p in path) + "]")
    for key, value in inline.items():
        out.append(f"{_key(key)} = {_value(value, len(_key(key)) + 3)}")
    for key, value in nested.items():
        _section(value, (*path, key), sections, out)


def _value(value: Any, indent_used: int = 0, single_line: bool = False) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, dict):
        if not value:
            return "{}"
        # An inline table is one line, as people write them: everything inside stays on it.
        return "{ " + ", ".join(f"{_key(k)} = {_value(v, single_line=True)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        items = [_value(v, single_line=True) for v in value]
        one_line = "[" + ", ".join(items) + "]"
        # Tables in an array (tasks with GPUs or env) read best one a line, as do long arrays.
        fits = not any(isinstance(v, dict) for v in value) and indent_used + len(one_line) <= LINE_WIDTH
        if single_line or fits:
            return one_line
        return "[\n" + "".join(f"    {item},\n" for item in items) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def _string(text: str) -> str:
    # Literal strings keep regexes and Windows paths as typed (the README asks for them).
    if "\\" in text and "'" not in text and not _CONTROL.search(text):
        return f"'{text}'"
    quoted = json.dumps(text, ensure_ascii=False)
    return quoted.replace("\x7f", "\\u007f")  # JSON leaves DEL alone; TOML does not allow it bare


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False).replace("\x7f", "\\u007f")
