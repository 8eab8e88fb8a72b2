"""Fault 5: the run directory's disk becomes full (a real tmpfs filled up): a clear error naming
the path and the fix, the roles keep training, and the output comes back when space does."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.agent_process import AgentProcess, start
from tests.helpers.cli_launch import Launch
from tests.helpers.clusters import light_between_graph
from tests.helpers.project import ROOT
from tests.helpers.tmpfs import fill

pytestmark = pytest.mark.slow


def fill_inodes(disk: Path) -> Path:
    """Use up every inode of ``disk`` too: then not even a directory can be created."""
    folder = disk / "inode-filler"
    folder.mkdir()
    with contextlib.suppress(OSError):
        for i in range(1_000_000):
            (folder / str(i)).touch()
    return folder


def test_role_printing_on_a_full_disk_keeps_running_and_the_loss_is_counted(tmp_path: Path, small_disk: Path):
    """The agent alone: a role writes 20 MB while the disk is full. Its print() never raises,
    8 MiB wait in memory, the rest is counted and noted in the log once space is back."""
    agent = AgentProcess()
    try:
        log = small_disk / "roles" / "worker-0" / "attempt-1.log"
        go = tmp_path / "go"
        code = (
            "import os, sys, time\n"
            f"while not os.path.exists({str(go)!r}): time.sleep(0.05)\n"
            "for i in range(200000): print(f'line {i:06d} ' + 'x' * 90)\n"
            "sys.stdout.flush()\n"
            f"while not os.path.exists({str(go)!r} + '2'): time.sleep(0.05)\n"
            "print('done', flush=True)\n"
        )
        start(agent, "worker:0", [sys.executable, "-c", code], log)
        filler = fill(small_disk)
        go.touch()
        failed = agent.wait_for("log_write_failed", role="worker:0", timeout_s=30)
        assert (
            failed["log"] == str(log) and "No space left on device" in failed["error"] and str(log) in failed["error"]
        )
        time.sleep(2)  # the role goes on printing into the full disk
        filler.unlink()
        recovered = agent.wait_for("log_write_recovered", role="worker:0", timeout_s=30)
        Path(str(go) + "2").touch()  # output after the disk has room again is written as usual
        exited = agent.wait_for("exited", role="worker:0", timeout_s=60)
        assert exited["returncode"] == 0, agent.output("worker:0")[-2000:]  # print() never raised
        written = 200000 * len("line 000000 " + "x" * 90 + "\n") + len("done\n")
        text = log.read_text()
        m = re.search(r"\[towerdeck\] (\d+) bytes of output lost here: cannot write .*No space left on device", text)
        assert m, text[-500:]
        lost = int(m.group(1))
        assert lost == recovered["lost_bytes"] and lost > 0
        # Every byte is either in the log or counted as lost: nothing vanishes silently.
        assert len(text.encode()) - len(m.group(0)) - 2 + lost == written
        assert text.rstrip().endswith("done")
    finally:
        agent.close()


def test_full_disk_under_a_real_cluster_is_named_with_a_fix_and_training_goes_on(tmp_path: Path, small_disk: Path):
    # The light trainer: its output goes through a pipe to the agent, which writes the logs; the
    # trainer never touches the full disk, so what is under test (the agent's writes, the warning,
    # nothing lost) is TowerDeck's whatever trains, and three TensorFlow starts were most of the time.
    cluster, _ports = light_between_graph(tmp_path)
    # Steps cannot be seen while the log cannot be written: that must not read as a stall.
    cluster.write_text(cluster.read_text().replace("stop_grace_s = 3", "stop_grace_s = 3\nstall_after_s = 3"))
    run = small_disk / "run"
    launch = Launch(cluster, run)
    try:
        before = launch.wait_role("worker:0", "running")
        launch.wait_output("worker:0", r"Step: \d+")
        launch.wait_output("worker:1", r"Step: \d+")
        filler = fill(small_disk)
        # Full for a while: the workers must train on, not crash on print(). A log write fails only
        # once the rest of the file's last page is used (tmpfs), which at this output rate can take
        # many seconds: wait until worker:0's log has stopped growing for 3 s, not a fixed time.
        log0 = run / "roles" / "worker-0" / "attempt-1.log"
        size, since, deadline = -1, time.time(), time.time() + 120
        while time.time() < deadline:
            if log0.stat().st_size != size:
                size, since = log0.stat().st_size, time.time()
            elif time.time() - since > 3:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("worker:0's log kept growing on a full disk")
        during = {r["role"]: r for r in launch.status()["roles"]}
        assert during["worker:0"]["pid"] == before["pid"] and during["worker:0"]["attempt"] == 1
        assert all(r["state"] == "running" for r in during.values()), during
        last_step = int(re.findall(r"Step: (\d+)", (run / "roles" / "worker-0" / "attempt-1.log").read_text())[-1])
        filler.unlink()
        # The output of the full period arrives: steps far beyond the last one written before.
        deadline = time.time() + 30
        while time.time() < deadline:
            steps = [
                int(s) for s in re.findall(r"Step: (\d+)", (run / "roles" / "worker-0" / "attempt-1.log").read_text())
            ]
            if steps[-1] > last_step + 100:
                break
            time.sleep(0.5)
        assert steps[-1] > last_step + 100, (last_step, steps[-5:])
        assert steps == sorted(steps)  # nothing reordered
        assert launch.ctl("stop-all").returncode == 0
        code, out = launch.finish()
    finally:
        launch.kill()
    assert code == 1, out  # stopped by the user, not failed
    assert "stopped by the user" in out and "FAILED" not in out and "STALLED" not in out, out
    warning = re.search(r"warning: cannot write (\S+worker-\d/attempt-1\.log): No space left on device.*", out)
    assert warning, out
    assert "keeps training" in warning.group(0) and f"df -h {run}/roles/worker-" in warning.group(0)
    assert "--run-dir on a disk with room" in warning.group(0)
    assert re.search(r"warning: worker:\d's output log \S+: writing again; 0 bytes lost", out), out


def test_a_role_restarted_while_the_disk_is_full_starts_and_its_log_appears_later(tmp_path: Path, small_disk: Path):
    """A restart during a full disk: the role's directory cannot even be created. It must start
    anyway (not start_failed), and its output reaches the log once there is room."""
    agent = AgentProcess()
    try:
        filler = fill(small_disk)
        inodes = fill_inodes(small_disk)
        log = small_disk / "roles" / "worker-0" / "attempt-2.log"
        go = tmp_path / "go"
        code = (
            "import os, time\n"
            "print('first words', flush=True)\n"
            f"while not os.path.exists({str(go)!r}): time.sleep(0.05)\n"
            "print('last words', flush=True)\n"
        )
        start(agent, "worker:0", [sys.executable, "-c", code], log)
        failed = agent.wait_for("log_write_failed", role="worker:0", timeout_s=30)
        assert "No space left on device" in failed["error"] and not log.parent.exists()
        filler.unlink()
        shutil.rmtree(inodes)
        agent.wait_for("log_write_recovered", role="worker:0", timeout_s=30)
        go.touch()
        exited = agent.wait_for("exited", role="worker:0", timeout_s=30)
        assert exited["returncode"] == 0
        assert log.read_text() == "first words\nlast words\n"
        assert agent.output("worker:0") == "first words\nlast words\n"  # streamed too
    finally:
        agent.close()


def test_an_example_trainer_whose_summaries_meet_a_full_disk_trains_on(tmp_path: Path, small_disk: Path):
    """The bundled trainers write TensorBoard summaries where TowerDeck says (TOWERDECK_TB_DIR, in
    the run directory). On a full disk TensorFlow's writer raises at its next flush: the example
    says so once and trains to the end, rather than die for its logging (seen: a full-disk test
    failing with worker:0 "exit code 1" from EventFileWriter.flush)."""
    fill(small_disk)
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}  # one worker, on its own
    env["TOWERDECK_TB_DIR"] = str(small_disk / "tensorboard")
    result = subprocess.run(
        [sys.executable, "-u", "multi_worker_mirrored.py", "--train_steps=30", "--log_every=10"],
        cwd=ROOT / "resources" / "trainers",
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.count("tensorboard: cannot write summaries") == 1, result.stdout[-3000:]
    assert "done: 30 steps" in result.stdout, result.stdout[-3000:]
