"""``tasks = N`` (issue 12): a count of tasks whose hosts come from a Slurm allocation."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.cluster.spec import UnplacedTasksError, dumps, parse_text
from core.cluster.tfjob import to_tfjob
from tests.helpers.project import run_cli
from tests.helpers.tfjob_rules import check

COUNTED = """\
name = "counted"
command = ["python", "-u", "train.py"]
[jobs.ps]
tasks = 1
[jobs.chief]
tasks = ["127.0.0.1:2222"]
[jobs.worker]
tasks = 3
gpus = [0]
command = ["python", "-u", "train.py", "--worker"]
env = { A = "1" }
[slurm]
partition = "debug"
"""


def _parse(text: str):  # type: ignore[no-untyped-def]
    spec, problems = parse_text(text)
    assert spec is not None, problems
    return spec


def test_a_count_is_a_counted_job_whose_roles_are_known_before_its_hosts() -> None:
    spec = _parse(COUNTED)
    assert spec.counted_jobs() == ["ps", "worker"] and spec.has_counted()
    worker = spec.jobs["worker"]
    assert (worker.count, worker.size, worker.tasks) == (3, 3, ())
    assert (worker.gpus, worker.command, worker.env) == ((0,), ("python", "-u", "train.py", "--worker"), {"A": "1"})
    assert spec.jobs["ps"].gpus == ()  # ps gets no GPU unless given, as with listed tasks
    assert spec.role_ids() == ["ps:0", "chief:0", "worker:0", "worker:1", "worker:2"]
    assert [t.role_id for t in spec.explicit_tasks()] == ["chief:0"]
    # Nothing sees a counted job as one with no tasks: asking for them says why there are none.
    with pytest.raises(UnplacedTasksError, match=r"jobs\.ps\.tasks, jobs\.worker\.tasks are counts of tasks"):
        spec.tasks()
    with pytest.raises(UnplacedTasksError, match=r"worker:1 is one of jobs\.worker\.tasks = 3"):
        spec.task("worker:1")
    with pytest.raises(KeyError, match="roles are ps:0, chief:0, worker:0, worker:1, worker:2"):
        spec.task("worker:3")


def test_explicit_tasks_with_slurm_are_not_counted() -> None:
    spec = _parse(COUNTED.replace("tasks = 1", 'tasks = ["127.0.0.1:2221"]').replace("tasks = 3", 'tasks = ["h:1"]'))
    assert not spec.has_counted() and [t.role_id for t in spec.tasks()] == ["ps:0", "chief:0", "worker:0"]


def test_write_round_trips_counts_and_job_wide_settings() -> None:
    spec = _parse(COUNTED)
    text = dumps(spec)
    assert "tasks = 3" in text and "tasks = 1" in text
    again, problems = parse_text(text)
    assert problems == [] and again == spec


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "must be at least 1, not 0"),
        ("-2", "must be at least 1, not -2"),
        ("true", "must be a non-empty list of host:port"),
        ("2.5", "must be a non-empty list of host:port"),
    ],
)
def test_a_bad_count_names_the_key(value: str, message: str) -> None:
    spec, problems = parse_text(COUNTED.replace("tasks = 3", f"tasks = {value}"))
    assert spec is None
    [problem] = [p for p in problems if p.field == "jobs.worker.tasks"]
    assert problem.message == message and problem.line == 8


def test_a_count_without_slurm_is_an_error_naming_the_key_and_the_fix(tmp_path: Path) -> None:
    cluster = tmp_path / "c.toml"
    cluster.write_text(COUNTED.split("[slurm]")[0])
    spec, problems = parse_text(cluster.read_text())
    assert spec is None
    fields = {p.field: p for p in problems}
    assert "needs a [slurm] table" in fields["jobs.worker.tasks"].message
    assert "add [slurm]" in fields["jobs.worker.tasks"].hint and "list the tasks" in fields["jobs.worker.tasks"].hint
    result = run_cli("validate", str(cluster), "--no-ports")
    assert result.returncode != 0 and "Traceback" not in result.stderr + result.stdout
    assert f"{cluster}:8: error: jobs.worker.tasks: a count of tasks (3) needs a [slurm] table" in result.stderr


def test_validate_describes_a_counted_cluster_by_its_counts(tmp_path: Path) -> None:
    cluster = tmp_path / "c.toml"
    cluster.write_text(COUNTED)
    (tmp_path / "train.py").write_text("")
    result = run_cli("validate", str(cluster), "--no-ports")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 ps, 1 chief, 3 worker" in result.stdout


def test_a_counted_job_without_any_command_is_named() -> None:
    text = COUNTED.replace('command = ["python", "-u", "train.py"]\n', "", 1)
    text = text.replace('command = ["python", "-u", "train.py", "--worker"]\n', "")
    text = text.replace('["127.0.0.1:2222"]', '[{ address = "127.0.0.1:2222", command = ["x"] }]')
    spec, problems = parse_text(text)
    assert spec is None and [p.field for p in problems] == ["command"]


def test_export_tfjob_uses_the_count_as_replicas() -> None:
    spec = _parse(COUNTED)
    manifest, problems = to_tfjob(spec, "registry.example.com/ml/trainer:1.0")
    assert manifest is not None, problems
    assert check(manifest) == []
    replicas = manifest["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in replicas.items()} == {"PS": 1, "Chief": 1, "Worker": 3}
    container = replicas["Worker"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert {"name": "A", "value": "1"} in container["env"]
    assert container["command"][:4] == ["python", "-u", "train.py", "--worker"]


def test_a_command_that_needs_hosts_says_so_for_a_counted_cluster(tmp_path: Path) -> None:
    cluster = tmp_path / "c.toml"
    cluster.write_text(COUNTED)
    result = run_cli("render", str(cluster))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "error: jobs.ps.tasks, jobs.worker.tasks are counts of tasks" in result.stderr
    assert "fix: launch it on Slurm, or list the tasks as host:port" in result.stderr


def test_render_refuses_a_listed_task_while_another_job_is_counted() -> None:
    """The chief's flags and TF_CONFIG would list the workers: with no hosts yet they cannot."""
    from core.cluster.render import render

    spec = _parse(COUNTED)
    with pytest.raises(UnplacedTasksError):
        render(spec, spec.jobs["chief"].tasks[0])
