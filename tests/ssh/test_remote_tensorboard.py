"""A TensorBoard-only trainer on an SSH host: the agent there tails its event files and sends
``scalars`` events; its step and loss reach the status (marked as from TensorBoard) and the local
run directory's scalars file."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from core.cluster.spec import parse_text
from core.controller.controller import Controller
from core.run import journal
from core.run.rundir import RunDir
from tests.helpers.ports import free_ports
from tests.helpers.project import ROOT
from tests.helpers.ssh_server import SshServer, assert_nothing_left_under

TRAINERS = ROOT / "resources" / "trainers"

pytestmark = pytest.mark.slow

CLUSTER = """
name = "remote-tb"
strategy = "multi_worker_mirrored"
launch_style = "tf_config"
workdir = "{trainers}"
command = ["{python}", "-u", "tb_only_trainer.py", "--logdir={{tb_dir}}", "--steps=300", "--step_sleep=0.05"]
stop_grace_s = 3
ssh_config = "{ssh_config}"

[hosts."127.0.0.2"]
ssh = "127.0.0.2"
python = "{python}"
run_root = "{root}"

[jobs.worker]
tasks = ["127.0.0.2:{port}"]
"""


def test_a_remote_tensorboard_only_trainer_shows_its_step_and_loss(tmp_path: Path, sshd: SshServer) -> None:
    port = free_ports(1, "127.0.0.2")[0]
    text = CLUSTER.format(
        trainers=TRAINERS, python=sys.executable, ssh_config=sshd.config, root=tmp_path / "host2", port=port
    )
    spec, problems = parse_text(text, tmp_path / "cluster.toml")
    assert spec is not None, problems
    run = RunDir.create(spec, path=tmp_path / "run")
    controller = Controller(spec, run)
    controller.start()
    try:
        deadline = time.monotonic() + 150
        worker = controller.status().role("worker:0")
        while time.monotonic() < deadline and not (worker.loss_source == "tb" and worker.step) and not worker.ended_at:
            time.sleep(0.2)
            worker = controller.status().role("worker:0")
        assert worker.loss_source == "tb" and worker.step and worker.loss is not None, worker
        assert str(worker.state) == "running"  # live, not only after the end
        assert controller.wait(180)
    finally:
        controller.close()
    assert controller.status().result == "succeeded"
    points = list(journal.iter_jsonl(run.path / "roles" / "worker-0" / "scalars.jsonl"))
    assert max(p["step"] for p in points if p["tag"] == "loss") == 300
    assert_nothing_left_under(tmp_path, [port])
