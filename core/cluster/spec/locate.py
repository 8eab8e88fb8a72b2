"""Where a key path is in a cluster file's text, so a problem can name its line.

Best effort on purpose: TOML has many spellings of one table (headers, dotted keys, inline
tables), and a wrong line number is worse than none, so anything unclear answers None.
"""

from __future__ import annotations

import re
import tomllib


def _header_of(line: str) -> tuple[str, ...] | None:
    m = re.match(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$", line)
    if not m:
        return None
    # Quoted keys may hold dots ([hosts."10.0.0.2"]): split on the dots between keys only.
    parts = re.findall(r"\"[^\"]*\"|'[^']*'|[^.\s]+", m.group(1))
    return tuple(part.strip().strip("\"'") for part in parts)


_QUOTED_KEY = re.compile(r"""^\s*("(?:[^"\\]|\\.)*"|'[^']*')\s*(=|\.)""")


def _quoted_key(line: str) -> str | None:
    """The quoted key a line starts with, as TOML reads it: ``"A\\u0000B" = 1`` -> ``A\\0B``, so a
    key written with escapes (a NUL, a control character) is found by the key it means."""
    m = _QUOTED_KEY.match(line)
    if m is None:
        return None
    try:
        return next(iter(tomllib.loads(f"{m.group(1)} = 0")))
    except (tomllib.TOMLDecodeError, StopIteration):
        return None


def locate(text: str, path: tuple[str | int, ...]) -> int | None:
    """Best-effort 1-based line of ``path`` (e.g. ``("jobs", "worker", "tasks", 1)``) in ``text``."""
    keys = [p for p in path if isinstance(p, str)]
    index = next((p for p in path if isinstance(p, int)), None)
    lines = text.splitlines()
    sections: list[tuple[tuple[str, ...], int, int]] = []  # header, first line, end line
    current: tuple[str, ...] = ()
    start = 0
    for i, line in enumerate(lines):
        header = _header_of(line)
        if header is not None:
            sections.append((current, start, i))
            current, start = header, i
    sections.append((current, start, len(lines)))
    for split in range(len(keys), -1, -1):
        head, rest = tuple(keys[:split]), keys[split:]
        for header, first, end in sections:
            if header != head:
                continue
            if not rest:
                return first + 1 if head else None
            pattern = re.compile(r"^\s*[\"']?" + re.escape(rest[0]) + r"[\"']?\s*(=|\.)")
            for j in range(first, end):
                if pattern.match(lines[j]) or _quoted_key(lines[j]) == rest[0]:
                    return _element_line(lines, j, index) if index is not None else j + 1
    return None


def _element_line(lines: list[str], key_line: int, index: int) -> int:
    """The line of element ``index`` of a multi-line array starting at ``key_line``."""
    value = lines[key_line].split("=", 1)[-1].split("#", 1)[0]
    if value.count("[") <= value.count("]"):
        return key_line + 1  # the whole array is on the key's line
    count = -1
    for j in range(key_line, min(len(lines), key_line + 200)):
        body = lines[j] if j > key_line else lines[j].split("=", 1)[-1]
        body = body.split("#", 1)[0].strip().lstrip("[").strip()
        if j > key_line and (body.startswith("]") or _header_of(lines[j])):
            break
        if body and not body.startswith("]"):  # an element starts here (the key's line too: tasks = ["a",)
            count += 1
            if count == index:
                return j + 1
    return key_line + 1


def path_text(path: tuple[str | int, ...]) -> str:
    """``("jobs", "worker", "tasks", 1)`` -> ``jobs.worker.tasks[1]``, as problems name fields."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def path_parts(field: str) -> list[str | int]:
    """``jobs.worker.tasks[1].gpus`` -> ``["jobs", "worker", "tasks", 1, "gpus"]`` (path_text's inverse)."""
    parts: list[str | int] = []
    for index, key in re.findall(r"\[(\d+)\]|\.?([^.\[]+)", field):
        parts.append(int(index) if index else key)
    return parts
