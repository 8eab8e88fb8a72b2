"""Deleting a run left by its launcher whose role runs on a host reached over SSH (a real sshd on
127.0.0.2): that host cannot be checked from here, so the run goes only once the user says so, or
once its roles are stopped."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from core.run import index as runs_index
from tests.helpers.ports import free_ports
from tests.helpers.project import ROOT
from tests.helpers.ssh_server import SshServer, assert_nothing_left_under

pytestmark = pytest.mark.slow
TRAINERS = ROOT / "resources" / "trainers"

CLUSTER = """
name = "remote-left"
strategy = "multi_worker_mirrored"
launch_style = "tf_config"
workdir = "{trainers}"
command = ["{python}", "-u", "light_trainer.py", "--steps=0", "--rate_hz=20"]
stop_grace_s = 3
ssh_config = "{config}"

[hosts."127.0.0.2"]
ssh = "127.0.0.2"
python = "{python}"
run_root = "{root}"

[jobs.worker]
tasks = ["127.0.0.2:{port}"]
"""


def wait_for(condition: Callable[[], object], what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def records(run: Path) -> list[dict[str, object]]:
    path = run / "events.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


@pytest.mark.timeout(300)
def test_a_left_run_with_a_remote_role_is_deleted_only_when_the_user_says_so(
    qtbot, tmp_path: Path, sshd: SshServer
) -> None:
    """Before: it was deleted at once, its remote role running on with nobody to reach it."""
    from gui.runs.runs_page import RunsPage

    port = free_ports(1, "127.0.0.2")[0]
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(
        CLUSTER.format(trainers=TRAINERS, python=sys.executable, config=sshd.config, root=tmp_path / "host2", port=port)
    )
    root = tmp_path / "runs"
    run = root / "left"
    said = tmp_path / "launch.out"
    launcher = subprocess.Popen(
        # No pre-flight: its TensorFlow import check is of no use to a trainer without TensorFlow.
        [sys.executable, str(ROOT / "main.py"), "launch", str(cluster), "--run-dir", str(run), "--no-preflight"],
        stdout=said.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(
            lambda: any(r.get("kind") == "role_pid" for r in records(run)) or launcher.poll() is not None,
            "the remote worker started",
        )
        assert launcher.poll() is None, said.read_text()
        launcher.send_signal(signal.SIGKILL)  # its agent on 127.0.0.2 keeps the worker
        launcher.wait(30)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()

    with pytest.raises(runs_index.RunBusyError) as refused:
        runs_index.delete_run(run)
    message = str(refused.value)
    assert refused.value.forceable and "\n" not in message
    assert "worker:0 on 127.0.0.2 never ended in its journal" in message
    assert "127.0.0.2 cannot be checked from here" in message and f"`python main.py attach {run}`" in message
    assert run.is_dir()

    # The Runs page: Delete, yes; then it says why not and asks again; yes, and it goes.
    copy = root / "copy"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("controller.lock", "*.sock"))
    page = RunsPage(lambda: root)
    qtbot.addWidget(page)
    with qtbot.waitSignal(page.sig_loaded, timeout=30_000):
        page.refresh()
    asked: list[str] = []
    page.confirm = lambda title, text: asked.append(text) is None
    page.warn = lambda title, text: pytest.fail(f"warned: {text}")
    page.select_ids(["copy"])
    with qtbot.waitSignal(page.sig_loaded, timeout=60_000):
        page.buttons["Delete"].click()
    assert len(asked) == 2 and "Delete 1 run(s)?" in asked[0]
    assert "worker:0 on 127.0.0.2 never ended" in asked[1] and asked[1].endswith("Delete 1 run(s) anyway?")
    assert not copy.exists() and run.is_dir()

    # As the message says: attach, Ctrl-C; the role ends on its host, and the run goes without asking.
    attach = subprocess.Popen(
        [sys.executable, str(ROOT / "main.py"), "attach", str(run), "--progress-every", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(lambda: any(r.get("detail") == "reattached" for r in records(run)), "the attach took the run over")
        attach.send_signal(signal.SIGINT)
        out, _ = attach.communicate(timeout=120)
    finally:
        if attach.poll() is None:
            attach.kill()
            attach.communicate()
    assert attach.returncode == 130, out
    runs_index.delete_run(run)
    assert not run.exists()
    assert_nothing_left_under(tmp_path, [port], timeout_s=30)
