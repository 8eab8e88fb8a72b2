"""The test OpenSSH server as tests see it (:class:`SshServer`, its client config), and what a test
left behind under its folder: processes (by cwd or run directory) and held ports."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from tests.helpers.procs import listening


@dataclass(frozen=True)
class SshServer:
    """The running test sshd (tests/ssh/conftest.py starts it): its port, folder and client files."""

    port: int
    dir: Path
    config: Path  # the client config: Host * with IdentityFile, UserKnownHostsFile, Port; alias node3
    user_key: Path
    known_hosts: Path
    log: Path

    def client_config(self, name: str, identity: Path | None = None, known_hosts: Path | None = None) -> Path:
        """Another client config (a wrong key, an empty known_hosts)."""
        path = self.dir / name
        path.write_text(client_config_text(self.port, identity or self.user_key, known_hosts or self.known_hosts))
        return path


def client_config_text(port: int, identity: Path, known_hosts: Path) -> str:
    """An OpenSSH client config for the test server: its port, this user, ``identity`` and ``known_hosts``."""
    return (
        "Host node3\n  HostName 127.0.0.3\n\n"
        f"Host *\n  Port {port}\n  User {os.environ.get('USER', 'root') or 'root'}\n"
        f"  IdentityFile {identity}\n  IdentitiesOnly yes\n  IdentityAgent none\n"
        f"  UserKnownHostsFile {known_hosts}\n  GlobalKnownHostsFile /dev/null\n"
        "  LogLevel ERROR\n"
    )


def processes_under(path: Path) -> list[psutil.Process]:
    """Live processes started for a test: cwd or TOWERDECK_RUN_DIR under ``path``."""
    found = []
    text = str(path)
    for p in psutil.process_iter(["status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE or p.pid == os.getpid():
                continue
            if p.cwd().startswith(text) or p.environ().get("TOWERDECK_RUN_DIR", "").startswith(text):
                found.append(p)
        except psutil.Error:
            continue
    return found


def assert_nothing_left_under(path: Path, ports: list[int], timeout_s: float = 10.0) -> None:
    """Within ``timeout_s``: no process of the test under ``path`` and none of ``ports`` held."""
    deadline = time.time() + timeout_s
    while True:
        procs, held = processes_under(path), listening(ports)
        if not procs and not held:
            return
        if time.time() > deadline:
            raise AssertionError(f"left behind: {[(p.pid, p.cmdline()) for p in procs]}, ports {held}")
        time.sleep(0.1)


def kill_strays(path: Path) -> None:
    """After a test, whatever it failed to end: keep-mode agents and roles outlive a failed test."""
    for p in processes_under(path):
        with contextlib.suppress(psutil.Error):
            p.kill()
