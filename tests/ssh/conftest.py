"""A real OpenSSH server on 127.0.0.2 and 127.0.0.3, with a throwaway host key and user key.

The client side is a config file written here (identity, known_hosts, port, an alias), which
TowerDeck is pointed at through ``ssh_config`` in the cluster file or $TOWERDECK_SSH_CONFIG;
~/.ssh is never read or written. Without sshd the tests skip, except in CI (env CI set), where
a missing sshd fails them.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.ports import free_ports
from tests.helpers.ssh_server import SshServer, client_config_text, kill_strays

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
HOSTS = ("127.0.0.2", "127.0.0.3")


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    if not os.path.exists(SSHD) or shutil.which("ssh") is None:
        if os.environ.get("CI"):
            pytest.fail("CI needs OpenSSH (sshd and ssh) for tests/ssh: apt-get install openssh-server")
        pytest.skip("OpenSSH server not installed (apt-get install openssh-server)")
    base = tmp_path_factory.mktemp("sshd")
    os.chmod(base, 0o700)
    _keygen(base / "host_key")
    _keygen(base / "user_key")
    _keygen(base / "other_key")
    (base / "authorized_keys").write_text((base / "user_key.pub").read_text())
    port = free_ports(1, HOSTS[0])[0]
    host_pub = (base / "host_key.pub").read_text().split()
    known = base / "known_hosts"
    known.write_text("".join(f"[{h}]:{port} {host_pub[0]} {host_pub[1]}\n" for h in HOSTS))
    (base / "sshd_config").write_text(
        f"Port {port}\n"
        + "".join(f"ListenAddress {h}\n" for h in HOSTS)
        + f"HostKey {base / 'host_key'}\nPidFile {base / 'sshd.pid'}\nAuthorizedKeysFile {base / 'authorized_keys'}\n"
        "UsePAM no\nStrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PermitRootLogin prohibit-password\nPubkeyAuthentication yes\nMaxStartups 100:30:200\nMaxSessions 50\n"
        "LogLevel VERBOSE\n"
    )
    os.makedirs("/run/sshd", exist_ok=True)
    log = base / "sshd.log"
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(base / "sshd_config")], stderr=open(log, "ab"))  # noqa: SIM115
    deadline = time.time() + 10
    while True:
        try:
            with socket.create_connection((HOSTS[1], port), timeout=1):
                break
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"sshd did not start: {log.read_text()}") from None
            time.sleep(0.05)
    config = base / "ssh_config"
    config.write_text(client_config_text(port, base / "user_key", known))
    try:
        yield SshServer(port, base, config, base / "user_key", known, log)
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(autouse=True)
def no_strays(tmp_path: Path) -> Iterator[None]:
    yield
    kill_strays(tmp_path)
