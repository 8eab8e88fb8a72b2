"""``ctl RUN status`` of a real launch (light trainers), read as a user reads it: each running role's
pid once, in the pid column, however the role came to run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.cli_launch import Launch
from tests.helpers.clusters import light_cluster
from tests.helpers.procs import assert_nothing_left
from tests.helpers.waits import wait_for

ROLES = ("ps:0", "worker:0", "worker:1")


def role_lines(status: str) -> dict[str, str]:
    """Each role's line of ``ctl status``, by role."""
    lines = {}
    for line in status.splitlines():
        words = line.split()
        if words and words[0] in ROLES:
            lines[words[0]] = line
    return lines


@pytest.mark.timeout(180)
def test_ctl_status_prints_each_running_roles_pid_once(tmp_path: Path, launches: list[Launch]) -> None:
    cluster = light_cluster(tmp_path, workers=2, steps=0, rate=10.0)
    ports = [int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", cluster.read_text())]
    launch = Launch(cluster, tmp_path / "run")
    launches.append(launch)

    def all_running() -> dict[str, str] | None:
        if not (launch.run_dir / "run.json").exists():
            return None
        status = launch.status()
        pids = {r["role"]: r["pid"] for r in status["roles"] if r["state"] == "running" and r["pid"]}
        return {role: str(pid) for role, pid in pids.items()} if set(pids) == set(ROLES) else None

    pids = wait_for(all_running, 90, "every role running with a pid")
    # A restarted role runs under a new pid: said once too.
    restarted = launch.ctl("restart", "worker:1")
    assert restarted.returncode == 0, restarted.stderr

    def restarted_running() -> dict[str, str] | None:
        now = all_running()
        return now if now is not None and now["worker:1"] != pids["worker:1"] else None

    pids = wait_for(restarted_running, 90, "worker:1 running again under a new pid")
    result = launch.ctl("status")
    assert result.returncode == 0, result.stderr
    lines = role_lines(result.stdout)
    assert set(lines) == set(ROLES), result.stdout
    for role, line in lines.items():
        assert re.search(rf"\brunning\s+pid {pids[role]}\b", line), line
        # The pid column and nowhere else on the line (it was also the detail: "pid 3486 ... pid 3486").
        assert len(re.findall(rf"\b{pids[role]}\b", line)) == 1, line
        assert line.count("pid") == 1, line
    launch.kill()
    assert launch.proc.returncode is not None
    assert_nothing_left(ports, f"127.0.0.1:{ports[0]}")  # every role's flags name the ps
