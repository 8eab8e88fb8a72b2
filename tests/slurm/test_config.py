"""The [slurm] table: what it accepts, and each mistake named with its key and a fix."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from core.cluster.slurm_table import SlurmConfig, parse_slurm, slurm_to_data
from core.slurm.client import SlurmClient, sbatch_argv


def _parse(value: Any) -> tuple[SlurmConfig | None, list[tuple[str, str, str]]]:
    problems: list[tuple[str, str, str]] = []
    config = parse_slurm(value, lambda path, message, hint: problems.append((".".join(map(str, path)), message, hint)))
    return config, problems


def test_a_full_table_round_trips() -> None:
    table = {
        "partition": "gpu",
        "time": "2-00:00:00",
        "nodes": 2,
        "account": "ml-team",
        "extra_args": ["--gres=gpu:4", "--qos", "high"],
        "login": "me@login-1",
    }
    config, problems = _parse(table)
    assert problems == []
    assert config == SlurmConfig("gpu", "2-00:00:00", 2, "ml-team", ("--gres=gpu:4", "--qos", "high"), "me@login-1")
    assert slurm_to_data(config) == table
    assert _parse({}) == (SlurmConfig(), [])
    assert _parse({"time": 90})[0] == SlurmConfig(time="90")


@pytest.mark.parametrize(
    ("table", "field", "message", "hint"),
    [
        ("gpu", "slurm", "must be a table, not a string", "[slurm]"),
        ({"partiton": "gpu"}, "slurm.partiton", "unknown key 'partiton'", "did you mean 'partition'?"),
        ({"partition": "-x"}, "slurm.partition", "'-x' is not a Slurm partition name", "sinfo"),
        ({"partition": 3}, "slurm.partition", "must be a string, not a number", 'partition = "gpu"'),
        ({"account": "a b"}, "slurm.account", "'a b' is not a Slurm account name", "sacctmgr"),
        ({"time": "two hours"}, "slurm.time", "'two hours' is not a Slurm time limit", "D-HH:MM:SS"),
        ({"time": 0}, "slurm.time", "0 is not a Slurm time limit", "minutes as a number"),
        ({"nodes": 0}, "slurm.nodes", "must be a whole number of nodes >= 1, not 0", "nodes = 2"),
        ({"nodes": True}, "slurm.nodes", "must be a whole number of nodes >= 1, not True", "nodes = 2"),
        ({"extra_args": "--qos high"}, "slurm.extra_args", "must be a list of strings, not a string", "one sbatch"),
        ({"extra_args": ["high", "--qos"]}, "slurm.extra_args.0", "'high' is not an sbatch option", "start with"),
        ({"extra_args": ["--qos", "a\nb"]}, "slurm.extra_args.1", "holds a newline or NUL", "one sbatch"),
        ({"extra_args": ["--wrap=rm -rf /"]}, "slurm.extra_args.0", "--wrap is set by TowerDeck", "remove"),
        ({"extra_args": ["-ofile"]}, "slurm.extra_args.0", "-o is set by TowerDeck", "remove"),
        ({"login": "-oProxyCommand=x"}, "slurm.login", "is not an SSH destination", "me@login-1"),
        ({"login": "me@login;reboot"}, "slurm.login", "is not an SSH destination", "me@login-1"),
    ],
)
def test_each_mistake_names_its_key_and_fix(table: Any, field: str, message: str, hint: str) -> None:
    _, problems = _parse(table)
    assert len(problems) == 1, problems
    got_field, got_message, got_hint = problems[0]
    assert got_field == field
    assert message in got_message
    assert hint in got_hint


def test_sbatch_gets_the_table_as_argv_with_the_users_options_last() -> None:
    argv = sbatch_argv(SlurmConfig("gpu", "90", 2, "ml", ("--qos", "high")), "towerdeck-x")
    assert argv[:2] == ["sbatch", "--parsable"]
    assert "--partition=gpu" in argv and "--time=90" in argv and "--account=ml" in argv
    assert "--nodes=2" in argv and "--ntasks-per-node=1" in argv
    assert argv[-2:] == ["--qos", "high"]


def test_a_login_node_gets_every_word_quoted() -> None:
    client = SlurmClient(ssh_prefix=["ssh", "-T", "--", "login-1"])
    argv = client.argv(["sbatch", "--comment=a b; rm -rf ~", "--qos=$(id)"])
    assert argv[:4] == ["ssh", "-T", "--", "login-1"]
    assert shlex.split(argv[4]) == ["sbatch", "--comment=a b; rm -rf ~", "--qos=$(id)"]
    assert len(argv) == 5


def test_a_cluster_file_with_slurm_loads_reports_and_saves_it() -> None:
    from core.cluster.spec import dumps, parse_text

    text = (
        'name = "s"\ncommand = ["python", "t.py"]\n[jobs.ps]\ntasks = ["127.0.0.1:2222"]\n[jobs.worker]\ntasks = ["127.0.0.1:2223"]\n'
        '[slurm]\npartition = "debug"\nnodes = 1\nextra_args = ["--qos", "high"]\n'
    )
    spec, problems = parse_text(text)
    assert problems == [] and spec is not None
    assert spec.slurm == SlurmConfig(partition="debug", nodes=1, extra_args=("--qos", "high"))
    again, _ = parse_text(dumps(spec))
    assert again is not None and again.slurm == spec.slurm
    _, problems = parse_text(text.replace("nodes = 1", "nodes = -1"))
    assert [(p.field, p.line) for p in problems] == [("slurm.nodes", 9)]


def test_core_slurm_and_tfjob_import_neither_qt_nor_tensorflow() -> None:
    import subprocess
    import sys

    from tests.helpers.project import ROOT

    code = (
        "import sys; import core.slurm.client, core.cluster.slurm_table, core.slurm.transport, core.cluster.tfjob; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'pyqtgraph', 'tensorflow')); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
