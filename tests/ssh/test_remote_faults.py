"""Issue 20 over a real sshd: a remote role's output that is not UTF-8 is mirrored here byte for byte
(item 5); an ssh that hangs (the host's python never answers) is ended at once by Ctrl-C, during
the pre-flight and during the connection of a ``--no-preflight`` launch, leaving no ssh (item 11)."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from core.run.journal import iter_jsonl
from tests.helpers.cli_process import FAULT_ROLE, Cli
from tests.helpers.fault_role import badutf8_lines
from tests.helpers.ports import free_ports
from tests.helpers.ssh_server import SshServer, assert_nothing_left_under
from tests.helpers.waits import wait_for

pytestmark = pytest.mark.slow


def remote_cluster(tmp_path: Path, sshd: SshServer, python: str = sys.executable) -> tuple[Path, int]:
    """One worker on 127.0.0.2 over ssh, printing 40 lines that are not UTF-8; ``python`` runs the agent."""
    port = free_ports(1, "127.0.0.2")[0]
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(
        f'strategy = "custom"\nssh_config = "{sshd.config}"\n'
        f'[hosts."127.0.0.2"]\nssh = "127.0.0.2"\npython = "{python}"\nrun_root = "{tmp_path / "host2"}"\n'
        f'[jobs.worker]\ntasks = [{{ address = "127.0.0.2:{port}", '
        f'command = ["{sys.executable}", "-u", "{FAULT_ROLE}", "badutf8", "40", "0.02"] }}]\n'
    )
    return cluster, port


def test_remote_output_that_is_not_utf8_is_mirrored_byte_for_byte(tmp_path: Path, sshd: SshServer):
    cluster, port = remote_cluster(tmp_path, sshd)
    cli = Cli("launch", str(cluster), "--run-dir", str(tmp_path / "run"), "--follow", "all")
    try:
        code, out = cli.finish(180)
    finally:
        cli.end()
    assert code == 0, out
    expected = b"".join(badutf8_lines(40))
    remote = tmp_path / "host2" / "run" / "roles" / "worker-0" / "attempt-1.log"
    assert remote.read_bytes() == expected
    assert (tmp_path / "run" / "roles" / "worker-0" / "attempt-1.log").read_bytes() == expected
    shown = [line.split(" | ", 1)[1] for line in out.splitlines() if line.startswith("    worker:0 | ")]
    assert shown == [line[:-1].decode("utf-8", "replace") for line in badutf8_lines(40)], out
    metrics = iter_jsonl(tmp_path / "run" / "roles" / "worker-0" / "metrics.jsonl")
    assert [r["step"] for r in metrics] == list(range(40))
    assert_nothing_left_under(tmp_path, [port])


def ssh_processes(sshd: SshServer) -> list[psutil.Process]:
    """Live ssh clients using this test server's config, whoever their parent is now."""
    found = []
    for p in psutil.process_iter(["name", "cmdline", "status"]):
        with contextlib.suppress(psutil.Error):
            if p.info["status"] != psutil.STATUS_ZOMBIE and str(sshd.config) in " ".join(p.info["cmdline"] or []):
                found.append(p)
    return found


def hanging_python(tmp_path: Path) -> str:
    """A host "python" that never answers (it prints blank lines until ssh goes away)."""
    script = tmp_path / "hang.sh"
    script.write_text("#!/bin/sh\nwhile :; do echo || exit; sleep 0.2; done\n")
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize("preflight", [True, False], ids=["preflight", "no-preflight"])
def test_ctrl_c_during_a_hung_ssh_exits_at_once_and_leaves_no_ssh(tmp_path: Path, sshd: SshServer, preflight: bool):
    cluster, _port = remote_cluster(tmp_path, sshd, python=hanging_python(tmp_path))
    extra = [] if preflight else ["--no-preflight"]
    cli = Cli("launch", str(cluster), "--run-dir", str(tmp_path / "run"), *extra)
    try:
        wait_for(lambda: ssh_processes(sshd), 30, "the ssh to 127.0.0.2")
        time.sleep(0.5)  # it hangs: the host's python never answers
        interrupted = time.monotonic()
        cli.signal(signal.SIGINT)
        code, out = cli.finish(20)
        elapsed_s = time.monotonic() - interrupted
    finally:
        cli.end()
    print(f"{'pre-flight' if preflight else '--no-preflight'}: exited {elapsed_s:.1f} s after Ctrl-C")
    assert code == 130, out
    wait_for(lambda: not ssh_processes(sshd), 10, "no ssh left")
    if preflight:
        assert "interrupted during the pre-flight: nothing was launched" in out, out
        assert not (tmp_path / "run").exists()
    else:
        assert "stopped after" in out and "failed" not in out.lower(), out
        assert "starting" not in out.split("cluster      done", 1)[-1], out
        info = json.loads((tmp_path / "run" / "run.json").read_text())
        assert info["state"] == "done" and info["result"] == "stopped", info
