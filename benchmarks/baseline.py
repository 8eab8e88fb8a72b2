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
    if importlib.util.find_spec("tomli_w") is None and (target / "core" / "tomlfmt.py").is_file():
        # Baselines from before 96a1f7d write a run's cluster.toml with tomli_w, since dropped from
        # the lock; the baseline's own TOML writer for cluster files (core/tomlfmt.py) stands in.
        (target / "tomli_w.py").write_text(TOMLI_W_SHIM)
    return target


TOMLI_W_SHIM = """from core.tomlfmt import dumps as _dumps


def dumps(data, multiline_strings=False):
    return _dumps(data)
"""
