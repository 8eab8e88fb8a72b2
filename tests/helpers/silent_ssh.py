"""An "SSH server" that never answers: a TCP listener on 127.0.0.1 that accepts every connection,
sends OpenSSH's greeting and then nothing, holding the connection open. A real ``ssh`` to it
waits in its key exchange (until its keepalives give up, 15 s with TowerDeck's options), as it
does for a host that hangs; no sshd, key or account is needed.

    with SilentSshHost() as host:
        cluster_file_text = host.cluster(tmp_path)      # [hosts.silent] ssh = "127.0.0.1:PORT"
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from pathlib import Path
from types import TracebackType

import psutil

BANNER = b"SSH-2.0-OpenSSH_9.2p1 silent\r\n"


class SilentSshHost:
    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, name="silent-ssh", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            with contextlib.suppress(OSError):
                conn.sendall(BANNER)
            self._conns.append(conn)

    def ssh_config(self, directory: Path) -> Path:
        """A client config of its own (the user's ~/.ssh/config plays no part), unique to the
        test: ssh processes are found by its path on their command line."""
        path = directory / "silent_ssh_config"
        path.write_text("Host *\n  UserKnownHostsFile /dev/null\n  GlobalKnownHostsFile /dev/null\n  LogLevel ERROR\n")
        return path

    def cluster(self, directory: Path) -> Path:
        """A one-worker cluster file on this host."""
        path = directory / "silent.toml"
        path.write_text(
            'strategy = "custom"\ncommand = ["python3", "-c", "import time; time.sleep(60)"]\n'
            f'ssh_config = "{self.ssh_config(directory)}"\n'
            f'[hosts.silent]\nssh = "127.0.0.1:{self.port}"\nrun_root = "{directory / "remote"}"\n'
            '[jobs.worker]\ntasks = ["silent:2222"]\n'
        )
        return path

    def clients(self, directory: Path) -> list[psutil.Process]:
        """Live ssh clients started with this test's config (whoever their parent is now)."""
        marker = str(directory / "silent_ssh_config")
        found = []
        for p in psutil.process_iter(["cmdline", "status"]):
            with contextlib.suppress(psutil.Error):
                cmdline = p.info["cmdline"] or []
                if p.info["status"] != psutil.STATUS_ZOMBIE and cmdline[:1] == ["ssh"] and marker in cmdline:
                    found.append(p)
        return found

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for conn in self._conns:
            conn.close()
        self._thread.join(5)

    def __enter__(self) -> SilentSshHost:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def kill_clients(host: SilentSshHost, directory: Path) -> None:
    """After a test, the ssh clients it failed to end."""
    for p in host.clients(directory):
        with contextlib.suppress(psutil.Error):
            os.kill(p.pid, 9)
