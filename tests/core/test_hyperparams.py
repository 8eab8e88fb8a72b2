"""A run's hyperparameters from its command and env (core.cluster.hyperparams): the flags a
trainer's command passes, each its own column of the runs list and row of compare."""

from __future__ import annotations

import string

from hypothesis import given
from hypothesis import strategies as st

from core.cluster.hyperparams import command_flags, hyperparameters, program
from core.cluster.spec.parse import parse_text

TRAINER = ["{python}", "-u", "train.py"]


def test_every_form_of_flag_is_read() -> None:
    command = [
        *TRAINER,
        "--learning_rate=0.3",
        "--batch_size",
        "64",
        "--shuffle",
        "--momentum",
        "-0.5",
        "--logdir={tb_dir}",  # TowerDeck's wiring: the same in every run
        "--",
        "--not_a_flag=1",
    ]
    assert command_flags(command) == {
        "--learning_rate": "0.3",
        "--batch_size": "64",
        "--shuffle": "true",
        "--momentum": "-0.5",
    }
    assert program(command) == "{python} -u train.py -- --not_a_flag=1"
    assert command_flags([*TRAINER, "--lr=1", "--lr=2"]) == {"--lr": "2"}  # argparse: the last wins


def test_env_and_job_commands_are_labelled() -> None:
    spec, problems = parse_text(
        """
name = "hp"
command = ["python", "train.py", "--learning_rate=0.1", "--batch_size", "32"]
[env]
SEED = "7"
[jobs.ps]
tasks = ["127.0.0.1:2222"]
[jobs.worker]
tasks = ["127.0.0.1:2223", { address = "127.0.0.1:2224", env = { SEED = "8" } }]
command = ["python", "train.py", "--learning_rate=0.2"]
"""
    )
    assert spec is not None, problems
    assert hyperparameters(spec) == {
        "--learning_rate": "0.1",
        "--batch_size": "32",
        "[env] SEED": "7",
        "worker: --learning_rate": "0.2",
        "worker:1: [env] SEED": "8",
    }


NAMES = st.text(string.ascii_lowercase + "_", min_size=1, max_size=12).map(lambda s: "--" + s)
VALUES = st.text(string.ascii_letters + string.digits + "._/", min_size=1, max_size=12)


@given(flags=st.dictionaries(NAMES, VALUES, max_size=6), spaced=st.booleans())
def test_property_flags_written_are_flags_read(flags: dict[str, str], spaced: bool) -> None:
    command = list(TRAINER)
    for name, value in flags.items():
        command += [name, value] if spaced else [f"{name}={value}"]
    assert command_flags(command) == flags
    assert program(command) == " ".join(TRAINER)


@given(st.lists(st.text(max_size=10), max_size=12))
def test_property_any_command_reads_without_error(command: list[str]) -> None:
    flags = command_flags(command)
    assert all(name.startswith("--") for name in flags)
    assert isinstance(program(command), str)
