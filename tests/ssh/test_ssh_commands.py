"""The ssh command lines and the remote shell words TowerDeck builds (no server needed)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from core.cluster.spec import HostConfig
from core.remote.ssh import explain_failure, remote_python, ssh_argv


def test_ssh_always_batch_mode_with_host_key_checking_and_the_host_after_double_dash():
    argv = ssh_argv(HostConfig("10.0.0.2", ssh="me@gpu-node-2:2200"), Path("/tmp/cfg"))
    assert argv[:3] == ["ssh", "-F", "/tmp/cfg"]
    assert "BatchMode=yes" in argv and "StrictHostKeyChecking=yes" in argv
    assert argv[argv.index("-p") + 1] == "2200" and argv[argv.index("-l") + 1] == "me"
    assert argv[-2:] == ["--", "gpu-node-2"]


def test_remote_words_survive_the_shell_unchanged_and_run_nothing(tmp_path: Path):
    marker = tmp_path / "pwned"
    hostile = [f"; touch {marker}", f"$(touch {marker})", f"`touch {marker}`", "'\"\\", f"a b\n touch {marker}"]
    line = remote_python(HostConfig("h", ssh="h", python=sys.executable), "import sys; print(sys.argv[1:])", *hostile)
    assert shlex.split(line)[3:] == hostile
    out = subprocess.run(["sh", "-c", line], capture_output=True, text=True, check=True).stdout
    assert out.strip() == repr(hostile)
    assert not marker.exists()


def test_ssh_failures_name_the_host_and_a_fix():
    host = HostConfig("127.0.0.2", ssh="me@lab-2")
    unknown = explain_failure(host, "Host key verification failed.\n", 255)
    assert "me@lab-2" in unknown.cause and "known_hosts" in unknown.cause and "ssh me@lab-2" in unknown.fix
    changed = explain_failure(host, "@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@\n", 255)
    assert "CHANGED" in changed.cause and "ssh-keygen -R" in changed.fix
    denied = explain_failure(host, "me@lab-2: Permission denied (publickey).\n", 255)
    assert "refused the login" in denied.cause and "ssh-add" in denied.fix
    refused = explain_failure(host, "ssh: connect to host lab-2 port 22: Connection refused\n", 255)
    assert "cannot reach me@lab-2" in refused.cause
