"""Real clusters through the CLI: real TensorFlow, real processes, real ports on 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from core.run.journal import iter_jsonl
from tests.helpers.cli_launch import Launch, run_dir_of, states
from tests.helpers.clusters import between_graph, write_cluster
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import ROOT, run_cli

pytestmark = pytest.mark.slow
TRAINERS = ROOT / "resources" / "trainers"


def losses(log: Path, pattern: str) -> list[float]:
    return [float(m) for m in re.findall(pattern, log.read_text())]


def assert_ports_free(ports: list[int]) -> None:
    assert_nothing_left(ports, marker="\0never-matches\0")


# ------------------------------------------------------------------------------------------
# Each example trainer to success


def test_between_graph_example_trains_to_success(tmp_path: Path):
    cluster, ports = between_graph(tmp_path)
    result = run_cli("launch", str(cluster), "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stdout + result.stderr
    run = tmp_path / "run"
    assert "succeeded" in result.stdout and "training finished" in result.stdout
    # Both workers share one global step: a worker that joins late may print few lines or none
    # in a 200-step run, and only once the loss is already low (seen under load: 0.17, 0.22, 0.17).
    # So the loss is judged on the cluster: every printed line of both, in global-step order.
    lines = [
        (int(step), float(cost))
        for worker in ("worker-0", "worker-1")
        for step, cost in re.findall(
            r"Step: (\d+),.*Cost: ([0-9.]+)", (run / "roles" / worker / "attempt-1.log").read_text()
        )
    ]
    costs = [cost for _step, cost in sorted(lines)]
    assert len(costs) >= 3, costs
    assert costs[-1] < costs[0] * 0.7, costs  # the loss goes down
    # The ps never exits by itself: the launcher stopped it once both workers succeeded.
    assert states(run, "ps:0")[-2:] == ["stopping", "stopped"]
    assert states(run, "worker:0")[-1] == "succeeded"
    info = json.loads((run / "run.json").read_text())
    assert info["state"] == "done" and info["result"] == "succeeded"
    assert (run / "cluster.toml").is_file()
    assert list((run / "roles" / "worker-0" / "tensorboard").glob("events.out.tfevents.*"))
    assert "serving on" in (run / "roles" / "ps-0" / "attempt-1.log").read_text()
    assert_ports_free(ports)


def test_parameter_server_strategy_example_trains_to_success(tmp_path: Path):
    ports = free_ports(4)
    cluster = write_cluster(
        tmp_path,
        """
strategy = "parameter_server"
launch_style = "tf_config"
workdir = "{trainers}"
command = ["python", "-u", "parameter_server.py", "--train_steps=200", "--log_every=20"]
[jobs.chief]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.ps]
tasks = ["127.0.0.1:{p[1]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[2]}", "127.0.0.1:{p[3]}"]
""",
        ports,
    )
    result = run_cli("launch", str(cluster))
    assert result.returncode == 0, result.stdout + result.stderr
    run = run_dir_of(result)
    values = losses(run / "roles" / "chief-0" / "attempt-1.log", r"loss = ([0-9.]+), step = \d+")
    assert len(values) >= 5 and values[-1] < values[0] * 0.7, values
    # Workers and ps only join(): stopped by the launcher after the chief succeeded.
    for role in ("ps:0", "worker:0", "worker:1"):
        assert states(run, role)[-1] == "stopped"
    assert states(run, "chief:0")[-1] == "succeeded"
    assert list((run / "roles" / "chief-0" / "tensorboard").glob("events.out.tfevents.*"))
    assert_ports_free(ports)


def test_multi_worker_mirrored_example_trains_to_success(tmp_path: Path):
    ports = free_ports(2)
    cluster = write_cluster(
        tmp_path,
        """
strategy = "multi_worker_mirrored"
launch_style = "tf_config"
workdir = "{trainers}"
command = ["python", "-u", "multi_worker_mirrored.py", "--train_steps=200", "--log_every=20"]
[jobs.worker]
tasks = ["127.0.0.1:{p[0]}", "127.0.0.1:{p[1]}"]
""",
        ports,
    )
    result = run_cli("launch", str(cluster))
    assert result.returncode == 0, result.stdout + result.stderr
    run = run_dir_of(result)
    for worker in ("worker-0", "worker-1"):
        values = losses(run / "roles" / worker / "attempt-1.log", r"ms/step - loss: ([0-9.]+)")
        assert len(values) >= 5 and values[-1] < values[0] * 0.7, values
    assert_ports_free(ports)


# ------------------------------------------------------------------------------------------
# A live cluster: faults and control


def test_sigkilled_worker_is_restarted_with_on_failure_and_the_run_succeeds(tmp_path: Path, launches: list[Launch]):
    cluster, ports = between_graph(tmp_path, steps=1500, sleep=0.01, policy="OnFailure")
    launch = Launch(cluster, tmp_path / "run")
    launches.append(launch)
    worker = launch.wait_role("worker:1", "running")
    launch.wait_output("worker:1", r"Step: \d+")
    os.kill(worker["pid"], signal.SIGKILL)
    launch.wait_role("worker:1", "running", attempt=2)
    code, out = launch.finish()
    assert code == 0, out
    history = states(launch.run_dir, "worker:1")
    assert "backoff" in history and history[-1] == "succeeded"
    assert "killed by SIGKILL; restart 1 of 2" in out
    # The compact progress lines: step, loss, step time and figures per worker.
    assert re.search(
        r"worker:1\s+step \d+  loss [0-9.]+  [0-9.]+ ms/step  ([0-9.]+|-) batches/s  cpu \d+%  rss \d+ MiB", out
    ), out
    assert re.search(r"cluster\s+[0-9.]+ global steps/s \(mean over the last 30 s\)", out), out
    metrics = list(iter_jsonl(launch.run_dir / "roles" / "worker-1" / "metrics.jsonl"))
    assert len(metrics) >= 5 and metrics[-1]["loss"] < metrics[0]["loss"]
    assert (launch.run_dir / "roles" / "worker-1" / "attempt-2.log").is_file()
    assert_ports_free(ports)


def test_sigkilled_worker_with_never_fails_the_run_and_names_it(tmp_path: Path, launches: list[Launch]):
    # The classic example's cluster with the light trainer (the same step lines, no TensorFlow):
    # failing the run on a role's death under Never is the launcher's doing, whatever the trainer
    # (a TensorFlow worker killed and restarted is the OnFailure test above).
    cluster, ports = between_graph(tmp_path, steps=100000, sleep=0.01, policy="Never")
    text = cluster.read_text()
    trainer = '"between_graph.py", "--train_steps=100000", "--step_sleep=0.01", "--log_every=10"'
    assert trainer in text
    cluster.write_text(text.replace(trainer, '"light_trainer.py", "--steps=0", "--rate_hz=30"'))
    launch = Launch(cluster, tmp_path / "run")
    launches.append(launch)
    worker = launch.wait_role("worker:1", "running")
    launch.wait_output("worker:1", r"Step: \d+")
    os.kill(worker["pid"], signal.SIGKILL)
    code, out = launch.finish()
    assert code == 1, out
    assert "failed after" in out and "worker:1 failed: killed by SIGKILL" in out
    assert "last output of worker:1" in out and "Step:" in out.split("last output of worker:1")[1]
    assert_ports_free(ports)


def test_stop_restart_kill_one_role_while_the_others_run_then_stop_all(tmp_path: Path, launches: list[Launch]):
    cluster, ports = between_graph(tmp_path, steps=100000, sleep=0.01, policy="Never")
    launch = Launch(cluster, tmp_path / "run")
    launches.append(launch)
    launch.wait_role("worker:1", "running")
    launch.wait_output("worker:1", r"Step: \d+")

    deadline = time.time() + 30
    while (figures := launch.role("worker:0"))["step"] is None or figures["rss_bytes"] is None:
        assert time.time() < deadline, figures
        time.sleep(0.5)
    assert figures["rss_bytes"] > 50 << 20 and figures["cpu_percent"] is not None and figures["loss"] > 0

    result = launch.ctl("stop", "worker:1")
    assert result.returncode == 0 and "stopping worker:1" in result.stdout
    launch.wait_role("worker:1", "stopped")
    status = launch.status()
    assert status["phase"] == "running"
    assert {r["role"]: r["state"] for r in status["roles"]} == {
        "ps:0": "running",
        "worker:0": "running",
        "worker:1": "stopped",
    }
    size = (launch.run_dir / "roles" / "worker-0" / "attempt-1.log").stat().st_size
    time.sleep(1.5)
    assert (launch.run_dir / "roles" / "worker-0" / "attempt-1.log").stat().st_size > size  # still training

    assert launch.ctl("restart", "worker:1").returncode == 0
    launch.wait_role("worker:1", "running", attempt=2)
    launch.wait_output("worker:1", r"Step: \d+", attempt=2)

    old_pid = launch.role("worker:0")["pid"]
    assert launch.ctl("restart", "worker:0").returncode == 0
    restarted = launch.wait_role("worker:0", "running", attempt=2)
    assert restarted["pid"] != old_pid and restarted["restarts"] == 1

    assert launch.ctl("kill", "worker:1").returncode == 0
    killed = launch.wait_role("worker:1", "stopped")
    assert killed["signal"] == signal.SIGKILL

    refused = launch.ctl("stop", "chief:0")
    assert refused.returncode == 1 and "no role 'chief:0'" in refused.stderr

    assert launch.ctl("stop-all").returncode == 0
    code, out = launch.finish()
    assert code == 1 and "stopped by the user" in out
    assert_ports_free(ports)
    info = json.loads((launch.run_dir / "run.json").read_text())
    assert info["result"] == "stopped"
    # The control socket is gone with the launch: ctl says so instead of hanging.
    gone = launch.ctl("status")
    assert gone.returncode == 1 and "not running" in gone.stderr


def test_ctrl_c_leaves_no_process_or_port_even_with_stubborn_forking_roles(tmp_path: Path):
    ports = free_ports(3)
    cluster = write_cluster(
        tmp_path,
        """
strategy = "custom"
command = ["python", "{stubborn}", "{{port}}", "{marker}/stubborn-role"]
stop_grace_s = 1
[jobs.ps]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[1]}", "127.0.0.1:{p[2]}"]
""",
        ports,
    )
    assert "{port}" in cluster.read_text()
    launch = Launch(cluster, tmp_path / "run")
    try:
        for role in ("ps:0", "worker:0", "worker:1"):
            launch.wait_output(role, "listening on")
            launch.wait_output(role, "detached=True")
        procs_before = subprocess.run(
            ["pgrep", "-f", f"{tmp_path}/stubborn-role"], capture_output=True, text=True
        ).stdout.split()
        assert len(procs_before) == 9  # each role: itself, a child, a setsid()'d grandchild
        launch.proc.send_signal(signal.SIGINT)
        code, out = launch.finish(timeout_s=60)
    finally:
        launch.kill()
    assert code == 130, out
    assert "stopping every role" in out
    assert_nothing_left(ports, f"{tmp_path}/stubborn-role", timeout_s=1.0)


def test_runs_lists_past_runs(tmp_path: Path, data_dir: Path):
    ports = free_ports(1)
    cluster = write_cluster(
        tmp_path,
        'strategy = "custom"\ncommand = ["python", "-c", "print(1)"]\n[jobs.worker]\ntasks = ["127.0.0.1:{p[0]}"]\n',
        ports,
    )
    assert run_cli("launch", str(cluster)).returncode == 0
    result = run_cli("runs")
    assert result.returncode == 0 and "1 run in" in result.stdout and "succeeded" in result.stdout


def test_crash_looping_role_stops_at_the_maximum(tmp_path: Path):
    ports = free_ports(1)
    cluster = write_cluster(
        tmp_path,
        'strategy = "custom"\ncommand = ["python", "-c", "import sys; print(\'boom\'); sys.exit(2)"]\n'
        '[jobs.worker]\ntasks = ["127.0.0.1:{p[0]}"]\nrestart = {{ policy = "OnFailure", max_restarts = 2, backoff_s = 0.1 }}\n',
        ports,
    )
    result = run_cli("launch", str(cluster))
    assert result.returncode == 1
    assert "gave up after 2 restarts" in result.stdout and "boom" in result.stdout
    run = run_dir_of(result)
    assert sorted(p.name for p in (run / "roles" / "worker-0").glob("attempt-*")) == [
        "attempt-1.log",
        "attempt-2.log",
        "attempt-3.log",
    ]


def test_samples_of_every_role_are_kept_in_the_run_directory(tmp_path: Path):
    ports = free_ports(2)
    code = "import time\\nfor i in range(30):\\n    print(i, flush=True); time.sleep(0.1)"
    cluster = write_cluster(
        tmp_path,
        'strategy = "custom"\ncommand = ["python", "-c", "{code}"]\n[jobs.worker]\ntasks = ["127.0.0.1:{p[0]}", "127.0.0.1:{p[1]}"]\n',
        ports,
        code=code.replace('"', '\\\\"'),
    )
    result = run_cli("launch", str(cluster), "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stdout + result.stderr
    files = list((tmp_path / "run" / "telemetry").glob("samples-*.jsonl"))
    assert len(files) == 1
    samples = list(iter_jsonl(files[0]))
    assert len(samples) >= 2  # 3 s of running at 1 s
    alive = [s for s in samples if s["roles"].get("worker:1", {}).get("alive")]
    assert alive and alive[0]["roles"]["worker:1"]["rss_bytes"] > 1 << 20
    assert samples[0]["figures"]["memory_total_bytes"] > 0
    events = (tmp_path / "run" / "events.jsonl").read_text()
    assert '"kind":"gpu_status"' in events


def test_user_metric_patterns_from_the_cluster_file_parse_a_custom_format(tmp_path: Path):
    ports = free_ports(1)
    trainer = tmp_path / "custom_trainer.py"
    trainer.write_text(
        "import time\nfor i in range(1, 16):\n    print(f'iter {i} loss={2.0 / i:.4f} lr=0.1', flush=True)\n    time.sleep(0.1)\n"
    )
    cluster = write_cluster(
        tmp_path,
        'strategy = "custom"\ncommand = ["python", "{trainer}"]\n'
        "metric_patterns = ['iter (?P<step>\\d+) loss=(?P<loss>[0-9.]+) lr=(?P<lr>[0-9.]+)']\n"
        '[jobs.worker]\ntasks = ["127.0.0.1:{p[0]}"]\n',
        ports,
        trainer=trainer,
    )
    result = run_cli("launch", str(cluster), "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stdout + result.stderr
    metrics = list(iter_jsonl(tmp_path / "run" / "roles" / "worker-0" / "metrics.jsonl"))
    assert [m["step"] for m in metrics] == list(range(1, 16))
    assert metrics[-1]["loss"] == 0.1333 and metrics[0]["extra"] == {"lr": 0.1} and metrics[0]["source"] == "user"


def test_controller_publishes_tensorboard_scalars_and_placement(tmp_path: Path):
    """Through the core API, as the window uses it: scalars from the roles' event files as they
    are written, and the placement table from the output."""
    from core.cluster.spec import load
    from core.controller.controller import Controller
    from core.run.rundir import RunDir

    cluster, ports = between_graph(tmp_path, steps=200)
    text = cluster.read_text().replace('"--log_every=10"', '"--log_every=10", "--log_device_placement"')
    cluster.write_text(text + '\n[env]\nTF_CPP_MIN_LOG_LEVEL = "0"\n')
    spec, problems = load(cluster)
    assert spec is not None, problems
    controller = Controller(spec, RunDir.create(spec, path=tmp_path / "run"))
    scalars: list[dict[str, Any]] = []
    controller.subscribe(
        lambda e: scalars.extend(e.payload.points) if e.kind == "scalars" and e.role == "worker:0" else None
    )
    controller.start()
    assert controller.wait(120)
    controller.close()
    assert controller.status().result == "succeeded"
    losses = [p for p in scalars if p["tag"] == "loss"]
    assert len(losses) >= 5 and losses[-1]["value"] < losses[0]["value"]
    assert [p["step"] for p in losses] == sorted(p["step"] for p in losses)
    placement = controller.placement("worker:0")
    devices = placement["counts_by_device"]
    assert any(d.startswith("/job:ps/") for d in devices) and any(
        d.startswith("/job:worker/replica:0/task:0/") for d in devices
    )
    assert_ports_free(ports)
