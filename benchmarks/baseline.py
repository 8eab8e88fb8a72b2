"""A named commit of this repository unpacked beside the working tree, for a benchmark's baseline.

``git archive COMMIT | tar -x`` into a temporary folder: the baseline is the code as it was,
measured in the same run on the same machine as this checkout (ratios, not absolute times, are
what a shared machine lets us compare).
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def unpack(commit: str, tmp: Path) -> Path | None:
    """``commit``'s tree under ``tmp``; None (and a line saying why) when git cannot give it."""
    target = tmp / f"towerdeck-{commit}"
    target.mkdir()
    try:
        archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"baseline {commit} unavailable ({exc}); measuring this code only")
        return None
    if importlib.util.find_spec("tomli_w") is None:
        # Baselines from before 96a1f7d write a run's cluster.toml with tomli_w, since dropped from
        # the lock: a small writer of the same TOML stands in (the file is written once a launch).
        (target / "tomli_w.py").write_text(TOMLI_W_SHIM)
    return target


TOMLI_W_SHIM = """\"\"\"tomli_w.dumps for a baseline: tables, arrays of tables, scalars, arrays.\"\"\"
import json
import re


def _key(k):
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def _value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _table(data, path, out):
    tables = []
    for k, v in data.items():
        if isinstance(v, dict):
            tables.append((k, v, False))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            tables.append((k, v, True))
        else:
            out.append(f"{_key(k)} = {_value(v)}")
    for k, v, many in tables:
        name = ".".join(_key(p) for p in (*path, k))
        for item in v if many else [v]:
            out.append("")
            out.append(f"[[{name}]]" if many else f"[{name}]")
            _table(item, (*path, k), out)


def dumps(data, multiline_strings=False):
    out = []
    _table(data, (), out)
    return "\\n".join(out).lstrip("\\n") + "\\n"
"""
