"""What each role gets: its environment and command line, in the launch style the trainer expects."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from core.cluster.spec import JOB_ORDER, ClusterSpec, Task, role_dir_name
from core.textsafe import shell_quote

# Jobs that are servers of the cluster. TensorFlow keeps the evaluator out of the cluster dict: it
# is a side task that reads checkpoints, and MultiWorkerMirroredStrategy would count it as a worker.
CLUSTER_JOBS = ("chief", "worker", "ps")

# Placeholders a command may contain; replaced per role.
PLACEHOLDERS = ("{python}", "{job_name}", "{task_index}", "{role}", "{address}", "{port}", "{tb_dir}", "{run_dir}")
PYTHON = "{python}"


def python_for(spec: ClusterSpec, host: str) -> str:
    """What ``{python}`` in a command means for a role on ``host``: on this machine, the python
    TowerDeck itself runs on (``sys.executable``: the environment that has TowerDeck, whichever
    ``python`` is first on PATH); on another machine, that host's python (``python`` under
    ``[hosts."H"]``, ``python3`` unless set), the one that runs the agent there."""
    config = spec.host_config(host)
    return config.python if config.remote else sys.executable


def command_of(spec: ClusterSpec, task: Task) -> tuple[str, ...]:
    """The command ``task`` runs with ``{python}`` filled in for its host (other placeholders kept)."""
    argv = spec.command_for(task)
    if not any(PYTHON in a for a in argv):
        return argv
    python = python_for(spec, task.host)
    return tuple(a.replace(PYTHON, python) for a in argv)


@dataclass(frozen=True)
class RoleLaunch:
    """Everything needed to start one role: argv, the environment it adds, and where."""

    role: str
    argv: tuple[str, ...]
    env: dict[str, str]
    cwd: Path
    host: str

    def shell_line(self) -> str:
        """A line a user can paste into a shell to start this role by hand. It is printed to a
        terminal first: a word with a control character is quoted as ``$'...'`` with escapes."""
        assignments = " ".join(f"{k}={shell_quote(v)}" for k, v in self.env.items())
        command = " ".join(shell_quote(a) for a in self.argv)
        return f"cd {shell_quote(str(self.cwd))} && env {assignments} {command}"


def cluster_dict(spec: ClusterSpec) -> dict[str, list[str]]:
    return {name: [t.address for t in spec.jobs[name].tasks] for name in CLUSTER_JOBS if name in spec.jobs}


def tf_config(spec: ClusterSpec, task: Task) -> str:
    return json.dumps(
        {"cluster": cluster_dict(spec), "task": {"type": task.job, "index": task.index}},
        separators=(",", ":"),
    )


def flags(spec: ClusterSpec, task: Task) -> list[str]:
    """The classic ``--ps_hosts/--worker_hosts/--job_name/--task_index`` flags."""
    out = []
    for name in JOB_ORDER:
        if name in spec.jobs and name != "evaluator":
            out.append(f"--{name}_hosts=" + ",".join(t.address for t in spec.jobs[name].tasks))
    out += [f"--job_name={task.job}", f"--task_index={task.index}"]
    return out


def role_dir(run_dir: Path, role: Task | str) -> Path:
    """``roles/<job>-<index>`` of a run directory, for a task or a role id (``worker:1``)."""
    return run_dir / "roles" / role_dir_name(role if isinstance(role, str) else role.role_id)


def render(spec: ClusterSpec, task: Task, run_dir: Path | None = None) -> RoleLaunch:
    """The launch of ``task``; with no run directory, paths in it show as ``<run-dir>``."""
    spec.require_placed()  # TF_CONFIG and the flags list every task's host:port: none may be missing
    run_text = str(run_dir) if run_dir is not None else "<run-dir>"
    tb_dir = str(role_dir(run_dir, task) / "tensorboard") if run_dir else f"<run-dir>/roles/{task.dir_name}/tensorboard"
    values = {
        "{job_name}": task.job,
        "{task_index}": str(task.index),
        "{role}": task.role_id,
        "{address}": task.address,
        "{port}": str(task.port),
        "{tb_dir}": tb_dir,
        "{run_dir}": run_text,
    }

    def fill(arg: str) -> str:
        for key, value in values.items():
            arg = arg.replace(key, value)
        return arg

    argv = [fill(a) for a in command_of(spec, task)]
    if spec.launch_style in ("flags", "both"):
        argv += flags(spec, task)
    env: dict[str, str] = {}
    env.update(spec.env)
    env.update(task.env)
    env = {k: fill(v) for k, v in env.items()}
    if spec.launch_style in ("tf_config", "both"):
        env["TF_CONFIG"] = tf_config(spec, task)
    if task.gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in task.gpus)
    env["PYTHONUNBUFFERED"] = "1"
    env["TOWERDECK_ROLE"] = task.role_id
    env["TOWERDECK_TB_DIR"] = tb_dir
    env["TOWERDECK_RUN_DIR"] = run_text
    return RoleLaunch(task.role_id, tuple(argv), env, spec.workdir, task.host)


def render_all(spec: ClusterSpec, run_dir: Path | None = None) -> list[RoleLaunch]:
    return [render(spec, t, run_dir) for t in spec.tasks()]
