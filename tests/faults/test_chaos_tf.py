"""Chaos with real TensorFlow (CPU, 127.0.0.1): ``ctl RUN chaos`` kills a role of each strategy's
example, and the cluster's recovery brings it back the way TensorFlow expects, from a checkpoint:

- MultiWorkerMirroredStrategy: worker:1 killed, every worker restarted together, both resume from the
  chief's last epoch backup;
- between-graph: ps:0 killed, every role restarted, the chief's MonitoredTrainingSession restores.

(ParameterServerStrategy's ps kill is tests/core/test_checkpoint_examples.py; its worker kill,
restarted alone, tests/faults/test_restarts.py.) Each run succeeds and reaches its last step, training
resumed from a checkpoint (not step 0), the loss carries on from the checkpoint's value instead of
jumping back to the untrained model's, and nothing is left behind."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers.cli_launch import Launch, journal
from tests.helpers.clusters import PSS_CHECKPOINTED
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import TRAINERS, run_cli
from tests.helpers.waits import wait_for

pytestmark = pytest.mark.slow

# MultiWorkerMirrored's recovery stops worker:0, which sits in a collective with the killed worker
# and outlasts its SIGTERM grace (SIGKILLed after the whole 5 s, 5.3 s lost, at load ~9): a grace of 1 s
# spares the wait; nothing is saved on SIGTERM (the trainer backs up at each epoch's end only).
CASES = {
    "multi_worker_mirrored": (
        """
strategy = "multi_worker_mirrored"
launch_style = "tf_config"
workdir = "{trainers}"
command = ["python", "-u", "multi_worker_mirrored.py", "--train_steps=400", "--log_every=20", "--step_sleep=0.03",
           "--checkpoint_dir={{run_dir}}/checkpoints"]
stop_grace_s = 1
[env]
TF_CPP_MIN_LOG_LEVEL = "2"
[jobs.worker]
tasks = ["127.0.0.1:{p[0]}", "127.0.0.1:{p[1]}"]
[recovery]
backoff_s = 1
""",
        "worker:1",
        {"worker:0", "worker:1"},
        re.compile(r"loss: ([0-9.]+)"),
        "worker 0 done: 400 steps",
    ),
    "between_graph": (
        """
strategy = "between_graph"
launch_style = "flags"
workdir = "{trainers}"
command = ["python", "-u", "between_graph.py", "--train_steps=1500", "--log_every=10", "--step_sleep=0.02",
           "--checkpoint_dir={{run_dir}}/checkpoints", "--checkpoint_every=50"]
stop_grace_s = 5
[env]
TF_CPP_MIN_LOG_LEVEL = "2"
[jobs.ps]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[1]}", "127.0.0.1:{p[2]}"]
[recovery]
backoff_s = 1
""",
        "ps:0",
        {"ps:0", "worker:0", "worker:1"},
        re.compile(r"Cost: ([0-9.]+)"),
        "",
    ),
}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("strategy", sorted(CASES))
def test_chaos_kills_a_role_and_training_resumes_from_a_checkpoint(
    tmp_path: Path, launches: list[Launch], strategy: str
) -> None:
    template, victim, group, loss_line, last_words = CASES[strategy]
    ports = free_ports(3)
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(template.format(trainers=TRAINERS, p=ports))
    run = Launch(cluster, tmp_path / "run")
    launches.append(run)

    def checkpoints() -> list[dict[str, object]]:
        listed = run.ctl("checkpoints", "--json")
        return json.loads(listed.stdout)["checkpoints"] if listed.returncode == 0 else []

    # Waited for in the journal (a file read), then asked of ``ctl`` once: a ``ctl`` process every
    # 50 ms took most of a core from the TensorFlow roles it waited for (the kill came ~14 s late).
    wait_for(lambda: sum(len(r["added"]) for r in journal(run.run_dir, "checkpoints")) >= 2, 300, "two checkpoints")
    assert len(checkpoints()) >= 2
    chaos = run_cli(
        "ctl", str(run.run_dir), "chaos", "--roles", victim, "--every", "0", "--recover-within", "300", timeout=400
    )
    assert chaos.returncode == 0, chaos.stdout + chaos.stderr
    assert f"chaos 1/1: SIGKILL {victim}" in chaos.stdout and "chaos 1/1: recovered in" in chaos.stdout

    code, out = run.finish(timeout_s=400)
    assert code == 0, out[-3000:]
    started = next(r for r in journal(run.run_dir, "recovery") if r["phase"] == "started")
    assert set(started["roles"]) == group and started["cause"] == f"{victim} killed by SIGKILL", started
    recovered = next(r for r in journal(run.run_dir, "recovery") if r["phase"] == "recovered")
    first = (run.run_dir / "roles" / "worker-0" / "attempt-1.log").read_text(errors="replace")
    second = (run.run_dir / "roles" / "worker-0" / "attempt-2.log").read_text(errors="replace")
    said = re.search(r"resumed from checkpoint ((?:model\.)?ckpt-(\d+)) at step (\d+)", second)
    assert said is not None and int(said.group(3)) > 0, second[-2000:]
    assert recovered["checkpoint"] == said.group(1), recovered
    # The loss carries on from the checkpoint: the restarted chief's first loss is well below the
    # untrained model's first loss, not back at it.
    before, after = [float(x) for x in loss_line.findall(first)], [float(x) for x in loss_line.findall(second)]
    assert before and after and after[0] < 0.8 * before[0], (before[:3], after[:3])
    if last_words:
        assert last_words in second, second[-2000:]
    assert "training finished" in out or "succeeded" in out, out[-2000:]
    assert_nothing_left(ports, marker=str(tmp_path))


@pytest.mark.timeout(600)
def test_chaos_kills_a_parameter_server_worker_and_only_that_worker_restarts(
    tmp_path: Path, launches: list[Launch]
) -> None:
    """ParameterServerStrategy's coordinator re-dispatches a lost worker's closures and waits for it:
    the recovery restarts that worker alone, and the chief trains on in its first attempt."""
    ports = free_ports(4)
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(PSS_CHECKPOINTED.format(trainers=TRAINERS, p=ports, steps=400))
    run = Launch(cluster, tmp_path / "run")
    launches.append(run)
    run.wait_role("chief:0", "running", timeout_s=300)
    chief_log = run.run_dir / "roles" / "chief-0" / "attempt-1.log"

    def chief_printed_step() -> int:
        """The chief's newest ``step = N`` in its log: a file read where ``ctl status`` is a process."""
        steps = re.findall(r"step = (\d+)\b", chief_log.read_text(errors="replace")) if chief_log.is_file() else []
        return int(steps[-1]) if steps else 0

    # ``ctl`` asked only once the log says so (``and`` short-circuits), as the wait above.
    wait_for(
        lambda: chief_printed_step() >= 60 and (run.role("chief:0")["step"] or 0) >= 60, 300, "the chief past step 60"
    )
    chaos = run_cli(
        "ctl", str(run.run_dir), "chaos", "--roles", "worker:1", "--every", "0", "--recover-within", "300", timeout=400
    )
    assert chaos.returncode == 0, chaos.stdout + chaos.stderr
    code, out = run.finish(timeout_s=400)
    assert code == 0, out[-3000:]
    started = next(r for r in journal(run.run_dir, "recovery") if r["phase"] == "started")
    assert started["roles"] == ["worker:1"] and started["action"] == "restarting worker:1", started
    assert not (run.run_dir / "roles" / "chief-0" / "attempt-2.log").exists()  # the chief never stopped
    chief = (run.run_dir / "roles" / "chief-0" / "attempt-1.log").read_text(errors="replace")
    assert re.search(r"step = 400\b", chief), chief[-2000:]
    assert_nothing_left(ports, marker=str(tmp_path))
