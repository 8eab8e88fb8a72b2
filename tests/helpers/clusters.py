"""Cluster files the tests write: the example trainers' between-graph cluster, the checkpointing
ParameterServerStrategy cluster, light-trainer clusters, the "why is this worker slow" cluster, and
TOML text for a command list."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tests.helpers.ports import free_ports
from tests.helpers.project import ROOT, TRAINERS

STUBBORN = ROOT / "tests" / "helpers" / "stubborn.py"


def write_cluster(tmp_path: Path, body: str, ports: list[int], **values: Any) -> Path:
    """Write a cluster file from ``body`` (str.format: {trainers}, {p[0]}, literal braces doubled)."""
    text = body.format(trainers=TRAINERS, stubborn=STUBBORN, marker=tmp_path, p=ports, **values)
    path = tmp_path / "cluster.toml"
    path.write_text(text)
    return path


BETWEEN_GRAPH = """
name = "bg"
strategy = "between_graph"
launch_style = "flags"
workdir = "{trainers}"
command = ["python", "-u", "between_graph.py", "--train_steps={steps}", "--step_sleep={sleep}", "--log_every=10"]
stop_grace_s = 3
[jobs.ps]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[1]}", "127.0.0.1:{p[2]}"]
restart = {{ policy = "{policy}", max_restarts = 2, backoff_s = 0.5 }}
[recovery]
mode = "{recovery}"
"""


def between_graph(
    tmp_path: Path, steps: int = 200, sleep: float = 0.0, policy: str = "Never", recovery: str = "role"
) -> tuple[Path, list[int]]:
    """The between-graph example; recovery ``role`` by default (each job's own restart policy, what
    these tests are about), ``auto`` for the cluster's recovery by strategy."""
    ports = free_ports(3)
    values = {"steps": steps, "sleep": sleep, "policy": policy, "recovery": recovery}
    return write_cluster(tmp_path, BETWEEN_GRAPH, ports, **values), ports


# The between-graph example's cluster with the light trainer as every role (workers step forever at
# 20 Hz, printing the example's ``Step: N,  Cost: X``; the ps serves until stopped): for tests of
# what TowerDeck does with roles' output and ends, where three TensorFlow starts were most of the
# time and TensorFlow's part is covered by a test that runs the example itself.
LIGHT_BETWEEN_GRAPH = BETWEEN_GRAPH.replace(
    '"between_graph.py", "--train_steps={steps}", "--step_sleep={sleep}", "--log_every=10"',
    '"light_trainer.py", "--steps=0", "--rate_hz=20"',
)


def light_between_graph(tmp_path: Path, policy: str = "Never", recovery: str = "role") -> tuple[Path, list[int]]:
    """:func:`between_graph`'s cluster, its roles the light trainer (:data:`LIGHT_BETWEEN_GRAPH`)."""
    ports = free_ports(3)
    return write_cluster(tmp_path, LIGHT_BETWEEN_GRAPH, ports, policy=policy, recovery=recovery), ports


# A light-trainer cluster of 1 ps and ``workers`` workers.
LIGHT = """
name = "light"
strategy = "between_graph"
launch_style = "flags"
workdir = "{trainers}"
command = ["python", "-u", "light_trainer.py", "--steps={steps}", "--rate_hz={rate}"]
stop_grace_s = 3
[jobs.ps]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.worker]
tasks = [{workers}]
"""


def light_cluster(tmp_path: Path, workers: int = 2, steps: int = 60, rate: float = 30.0) -> Path:
    ports = free_ports(workers + 1)
    listed = ", ".join(f'"127.0.0.1:{p}"' for p in ports[1:])
    path = tmp_path / "light.toml"
    path.write_text(LIGHT.format(trainers=TRAINERS, steps=steps, rate=rate, p=ports, workers=listed))
    return path


# A named light-trainer cluster (the runs list tells runs apart by name).
NAMED_LIGHT = """
name = "{name}"
workdir = "{trainers}"
command = ["python", "-u", "light_trainer.py", "--steps={steps}", "--rate_hz=40"]
stop_grace_s = 3
{env}
[jobs.ps]
tasks = ["127.0.0.1:{ps}"]
[jobs.worker]
tasks = [{workers}]
restart = "Never"
{worker_command}
"""


def cluster_file(
    tmp_path: Path, name: str, workers: int, steps: int = 30, env: str = "", worker_command: str = ""
) -> Path:
    ports = free_ports(workers + 1)
    path = tmp_path / f"{name}.toml"
    path.write_text(
        NAMED_LIGHT.format(
            name=name,
            trainers=TRAINERS,
            steps=steps,
            env=env,
            ps=ports[0],
            workers=", ".join(f'"127.0.0.1:{p}"' for p in ports[1:]),
            worker_command=worker_command,
        )
    )
    return path


# worker:1 of WHY_CLUSTER adds its own input flags to these.
WHY_TRAINER = ["python", "-u", "between_graph.py", "--train_steps=100000000", "--log_every=50", "--step_sleep=0.005"]


WHY_CLUSTER = """
name = "why"
strategy = "between_graph"
launch_style = "flags"
workdir = "{trainers}"
command = {command}
stop_grace_s = 3
[jobs.ps]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[1]}", {{ address = "127.0.0.1:{p[2]}", command = {slow} }}]
"""


def toml_list(items: list[str]) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


# Two workers writing only TensorBoard files, and a host no one can reach.
TENSORBOARD_CLUSTER = """
name = "tb"
strategy = "multi_worker_mirrored"
launch_style = "tf_config"
workdir = "{trainers}"
command = ["python", "-u", "tb_only_trainer.py", "--logdir={{tb_dir}}", "--steps=40", "--step_sleep=0.01"]
stop_grace_s = 3
[jobs.worker]
tasks = ["127.0.0.1:{p[0]}", "127.0.0.1:{p[1]}"]
[hosts."10.254.0.9"]
ssh = "nobody@10.254.0.9"
"""


# The TF2 ParameterServerStrategy example checkpointing into its run, recovered by strategy:
# format with trainers, p (4 ports: chief, ps, two workers) and steps.
PSS_CHECKPOINTED = """
name = "pss-ckpt"
strategy = "parameter_server"
launch_style = "tf_config"
workdir = "{trainers}"
command = ["python", "-u", "parameter_server.py", "--train_steps={steps}", "--log_every=10", "--step_sleep=0.05",
           "--checkpoint_dir={{run_dir}}/checkpoints", "--checkpoint_every=20"]
stop_grace_s = 5
[env]
TF_CPP_MIN_LOG_LEVEL = "2"
[jobs.chief]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.ps]
tasks = ["127.0.0.1:{p[1]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[2]}", "127.0.0.1:{p[3]}"]
[recovery]
backoff_s = 1
"""


# 1 ps + 2 light workers; worker:1 runs tests/helpers/crasher.py, which raises ZeroDivisionError on
# its first ``crashes`` starts (counted in ``counter``), under OnFailure with a fixed ``backoff`` s.
CRASH_LOOP = """
name = "crash"
strategy = "between_graph"
launch_style = "flags"
workdir = "{trainers}"
command = ["python", "-u", "light_trainer.py", "--steps=0", "--rate_hz=10"]
stop_grace_s = 3
[jobs.ps]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[1]}", {{ address = "127.0.0.1:{p[2]}", command = ["python", "-u", "{crasher}", "{counter}", "{crashes}"] }}]
restart = {{ policy = "OnFailure", max_restarts = 4, backoff_s = {backoff}, backoff_max_s = {backoff}, reset_after_s = 600 }}
"""


# Two runs of one cluster file that differ in one flag of the command, as a user edits a file and
# launches it again: the same name, ports, env and trainer, only --learning_rate changed.
FLAG_NOTE = "=SUM(1) a note on what this sweep tried, long enough to be elided in a column of the runs list"


def one_flag_apart(tmp_path: Path, rates: tuple[str, ...] = ("0.1", "0.3")) -> Path:
    """Launch the light-trainer cluster ``lr`` once per ``--learning_rate`` in ``rates``, in order;
    each launch must succeed. Its ``[env] NOTE`` (:data:`FLAG_NOTE`) starts as a CSV formula would.
    Returns the cluster file."""
    from tests.helpers.project import run_cli

    path = cluster_file(tmp_path, "lr", 2, env=f'[env]\nNOTE = "{FLAG_NOTE}"')
    text = path.read_text()
    for rate in rates:
        path.write_text(text.replace('"--rate_hz=40"]', f'"--rate_hz=40", "--learning_rate={rate}"]'))
        launched = run_cli("launch", str(path), "--progress-every", "0")
        assert launched.returncode == 0, launched.stdout[-2000:] + launched.stderr[-2000:]
    return path


def launch_tensorboard_run(run: Path) -> Path:
    """A finished run at ``run`` (a folder named ``tb`` under a runs folder, as a launch names it)
    of TENSORBOARD_CLUSTER with real TensorFlow: its two workers' TensorBoard event files. Tests that
    only read it share one (a module-scoped fixture) instead of each launching its own."""
    from tests.helpers.project import run_cli

    run.parent.mkdir(parents=True, exist_ok=True)
    cluster = run.parent / "tb.toml"
    cluster.write_text(TENSORBOARD_CLUSTER.format(trainers=TRAINERS, p=free_ports(2)))
    launched = run_cli("launch", str(cluster), "--run-dir", str(run), "--progress-every", "0")
    assert launched.returncode == 0, launched.stdout[-2000:] + launched.stderr[-2000:]
    return run


def tensorboard_runs(tmp_path: Path, finished: Path | None = None) -> tuple[Path, Path]:
    """Two finished runs with TensorBoard event files under ``tmp_path/runs``: ``tb`` launched
    with real TensorFlow (TENSORBOARD_CLUSTER), or a copy of ``finished`` (launch_tensorboard_run's),
    and ``tb-b`` a copy of its folder under another name, as a second run of the same trainer would be."""
    import json
    import shutil

    first = tmp_path / "runs" / "tb"
    leave_out = shutil.ignore_patterns("summary.json", "*.sock", "*.lock")
    if finished is None:
        launch_tensorboard_run(first)
    else:
        shutil.copytree(finished, first, ignore=leave_out)
    second = tmp_path / "runs" / "tb-b"
    shutil.copytree(first, second, ignore=leave_out)
    spec = second / "cluster.toml"
    spec.write_text(spec.read_text().replace('name = "tb"', 'name = "tb-b"', 1))
    info = json.loads((second / "run.json").read_text())
    (second / "run.json").write_text(json.dumps({**info, "id": "tb-b", "name": "tb-b"}))
    return first, second


def spread_light_cluster(
    tmp_path: Path, *, workers: int, hosts: int, name: str, gpus: list[int] | None = None
) -> tuple[Path, list[int]]:
    """1 ps + ``workers`` light trainers (2 steps a second, for ever) spread over loopback "hosts"
    127.0.0.1..``hosts`` (each its own agent), marked with ``tmp_path``'s name so that what a test
    left running is found; ``gpus`` for every worker. Returns the file and its ports (the ps first)."""
    ports = free_ports(workers + 1)
    listed = ", ".join(f'"127.0.0.{i % hosts + 1}:{ports[i + 1]}"' for i in range(workers))
    gpu_line = f"gpus = {gpus}\n" if gpus is not None else ""
    path = tmp_path / f"{name}.toml"
    # custom: each light trainer counts its own steps, so its tile shows its own batches/s
    # (between-graph workers print the shared global step: their own share is unknown).
    path.write_text(
        f"""name = "{name}"
strategy = "custom"
workdir = "{TRAINERS}"
command = ["{sys.executable}", "-u", "light_trainer.py", "--steps=0", "--rate_hz=2", "--test_marker={tmp_path.name}"]
stop_grace_s = 3

[jobs.ps]
tasks = ["127.0.0.1:{ports[0]}"]

[jobs.worker]
tasks = [{listed}]
{gpu_line}"""
    )
    return path, ports
