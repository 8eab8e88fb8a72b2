"""Mapping a cluster's tasks onto an allocation's nodes, and how Slurm's ends are worded (pure)."""

from __future__ import annotations

import pytest

from core.cluster.slurm_table import SlurmConfig
from core.cluster.spec import ClusterSpec
from core.cluster.spec.parse import parse_text
from core.slurm.allocation import PlacementError, describe_end, nodes_for_hosts, placed_for_allocation

BASE = """
name = "c"
command = ["python", "train.py"]
[jobs.ps]
tasks = ["{ps}:2222"]
[jobs.worker]
tasks = ["{w0}:2223", "{w1}:2224"]
[slurm]
partition = "debug"
"""


def spec(ps: str, w0: str, w1: str, hosts: str = "") -> ClusterSpec:
    parsed, problems = parse_text(BASE.format(ps=ps, w0=w0, w1=w1) + hosts)
    assert parsed is not None, problems
    return parsed


def local(host: str) -> bool:
    return host in ("127.0.0.1", "localhost")


def test_loopback_tasks_go_to_the_only_node() -> None:
    assert nodes_for_hosts(spec("127.0.0.1", "127.0.0.1", "localhost"), "7", ["n01"], is_local=local) == {
        "127.0.0.1": "n01",
        "localhost": "n01",
    }


def test_node_names_map_to_themselves() -> None:
    placed = nodes_for_hosts(spec("n01", "n01", "n02"), "7", ["n01", "n02"], is_local=local)
    assert placed == {"n01": "n01", "n02": "n02"}


def test_loopback_tasks_with_two_nodes_are_refused_naming_the_task_and_the_fix() -> None:
    with pytest.raises(PlacementError) as caught:
        nodes_for_hosts(spec("127.0.0.1", "127.0.0.1", "127.0.0.1"), "7", ["n01", "n02"], is_local=local)
    text = str(caught.value)
    assert "task ps:0 is on '127.0.0.1', which is not a node of Slurm job 7 (its nodes: n01, n02)" in text
    assert "fix: write each task's host as one of the allocation's nodes" in text


def test_a_host_outside_the_allocation_is_named_even_beside_local_ones() -> None:
    with pytest.raises(PlacementError, match=r"task worker:1 is on 'gpu09', which is not a node of Slurm job 7"):
        nodes_for_hosts(spec("127.0.0.1", "127.0.0.1", "gpu09"), "7", ["n01"], is_local=local)


def test_placed_hosts_are_reached_through_their_step_never_over_ssh() -> None:
    original = spec("n01", "n01", "n02", '[hosts.n02]\nssh = "me@n02"\nworkdir = "/scratch"\n')
    assert original.host_config("n01", local).remote and original.host_config("n02", local).remote
    placed = placed_for_allocation(original, {"n01": "n01", "n02": "n02"})
    assert not placed.host_config("n01", local).remote and not placed.host_config("n02", local).remote
    assert placed.host_config("n02", local).workdir == "/scratch"  # the rest of the entry is kept
    assert placed.tasks() == original.tasks()


def test_slurm_ends_in_words() -> None:
    config = SlurmConfig(time="1")
    assert describe_end("12", "CANCELLED", config) == "cancelled by Slurm (job 12)"
    assert describe_end("12", "TIMEOUT", config) == "timed out by Slurm (time limit 1 min, job 12)"
    assert describe_end("12", "TIMEOUT", SlurmConfig(time="4:00:00")).startswith(
        "timed out by Slurm (time limit 4:00:00"
    )
    assert describe_end("12", "NODE_FAIL", config) == "ended by Slurm: job 12 is NODE_FAIL"
