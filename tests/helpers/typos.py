"""A cluster file with six mistakes of six kinds, a missing script among them: what a user's
first draft looks like, and what ``validate``, ``python main.py FILE`` and the editor must all
report in one pass."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.ports import free_ports

TYPOS = """\
name = "typos"
stratgy = "between_graph"
launch_style = "flag"
workdir = "."
command = ["{{python}}", "-u", "trian.py", "--steps=10"]
stop_grace_s = "five"
[jobs.ps]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[1]}", "127.0.0.1:99999"]
restart = {{ policy = "OnFaliure" }}
"""

# Each mistake: the field the problem names, and words of its message.
EXPECTED = {
    "stratgy": "unknown key 'stratgy'",
    "launch_style": "'flag' is not one of",
    "stop_grace_s": "must be a number, not a string",
    "jobs.worker.tasks[1]": "99999",
    "jobs.worker.restart.policy": "'OnFaliure' is not one of",
    "command": "script 'trian.py' does not exist",
}


def write_typos(folder: Path) -> Path:
    """``typos.toml`` in ``folder`` (also the roles' workdir, which has no ``trian.py``)."""
    path = folder / "typos.toml"
    path.write_text(TYPOS.format(p=free_ports(2)), encoding="utf-8")
    return path
