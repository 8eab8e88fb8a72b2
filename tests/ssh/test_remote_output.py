"""Issue 20 item 5 over a real sshd: a remote role's output that is not UTF-8 is mirrored here byte
for byte, and every step and whole line reaches the launcher."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import free_ports
from tests.faults.fault_role import badutf8_lines
from tests.faults.harness import FAULT_ROLE, Cli
from tests.ssh.conftest import SshServer, assert_nothing_left_under

pytestmark = pytest.mark.slow


def test_remote_output_that_is_not_utf8_is_mirrored_byte_for_byte(tmp_path: Path, sshd: SshServer):
    port = free_ports(1, "127.0.0.2")[0]
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(
        f'strategy = "custom"\nssh_config = "{sshd.config}"\n'
        f'[hosts."127.0.0.2"]\nssh = "127.0.0.2"\npython = "{sys.executable}"\nrun_root = "{tmp_path / "host2"}"\n'
        f'[jobs.worker]\ntasks = [{{ address = "127.0.0.2:{port}", '
        f'command = ["{sys.executable}", "-u", "{FAULT_ROLE}", "badutf8", "40", "0.02"] }}]\n'
    )
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
    metrics = (tmp_path / "run" / "roles" / "worker-0" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in metrics] == list(range(40))
    assert_nothing_left_under(tmp_path, [port])
