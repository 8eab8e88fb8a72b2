"""The CLI run under a hard limit (:class:`Cli`), and clusters of fault roles launched with it
(tests/helpers/fault_role.py): every command starts in its own session and a run past its limit
has its whole process group killed, so a hang fails the test instead of stalling the suite."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers.ports import free_ports
from tests.helpers.project import ROOT

FAULT_ROLE = ROOT / "tests" / "helpers" / "fault_role.py"


def cli_argv(*args: str) -> list[str]:
    return [sys.executable, str(ROOT / "main.py"), *args]


class Cli:
    """``python main.py ARGS`` in the background, in its own session (killed whole on timeout)."""

    def __init__(self, *args: str, stdin: Any = subprocess.DEVNULL, env: dict[str, str] | None = None) -> None:
        self.args = args
        self.proc = subprocess.Popen(
            cli_argv(*args),
            cwd=ROOT,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )

    def finish(self, timeout_s: float) -> tuple[int, str]:
        """Its exit code and output; past ``timeout_s`` its process group is killed and the test fails."""
        try:
            out, _ = self.proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill_group()
            out, _ = self.proc.communicate()
            raise AssertionError(f"`main.py {' '.join(self.args)}` hung past {timeout_s:g} s:\n{out[-4000:]}") from None
        return self.proc.returncode, out

    def signal(self, number: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(number)

    def kill_group(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def end(self) -> None:
        """After a test: whatever still runs of it goes."""
        if self.proc.poll() is None:
            self.kill_group()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.communicate(timeout=10)


def role_cluster(tmp_path: Path, *commands: list[str], extra: str = "", host: str = "127.0.0.1") -> Path:
    """A custom-strategy cluster of one worker per command (each ``python fault_role.py ...``)."""
    ports = free_ports(len(commands), host)
    tasks = ", ".join(
        f'{{ address = "{host}:{port}", command = {_toml_list([sys.executable, "-u", str(FAULT_ROLE), *command])} }}'
        for port, command in zip(ports, commands, strict=True)
    )
    path = tmp_path / "cluster.toml"
    path.write_text(f'strategy = "custom"\nstop_grace_s = 3\n{extra}\n[jobs.worker]\ntasks = [{tasks}]\n')
    return path


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join('"' + i.replace("\\", "\\\\").replace('"', '\\"') + '"' for i in items) + "]"


def launch_roles(tmp_path: Path, clis: list[Cli], *commands: list[str], extra: str = "") -> tuple[Cli, Path]:
    """``launch`` of a :func:`role_cluster` into ``tmp_path/run``, ended after the test (``clis``)."""
    run = tmp_path / "run"
    cli = Cli("launch", str(role_cluster(tmp_path, *commands, extra=extra)), "--run-dir", str(run))
    clis.append(cli)
    return cli, run
