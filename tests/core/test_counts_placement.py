"""Placing counted tasks (``tasks = N``) on an allocation's nodes, and the agent's ``--free-ports``."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.agent import artifact_file
from core.cluster.spec import ClusterSpec, parse_text
from core.cluster.spec.addresses import canonical_host
from core.cluster.spec.write import dumps
from core.slurm.counts import PlacementError, deal, free_ports_argv, parse_free_ports_answer, place_counted

BASE = """\
name = "counted"
strategy = "custom"
command = ["python", "-u", "train.py"]
{jobs}
[slurm]
partition = "debug"
"""


def _spec(**jobs: int | list[str]) -> ClusterSpec:
    text = "".join(f"[jobs.{name}]\ntasks = {json.dumps(value)}\n" for name, value in jobs.items())
    spec, problems = parse_text(BASE.format(jobs=text))
    assert spec is not None, problems
    return spec


class Nodes:
    """A ``free_ports_on`` that hands out ports from 40000 up per node and records each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.next: dict[str, int] = {}

    def __call__(self, node: str, count: int) -> list[int]:
        self.calls.append((node, count))
        start = self.next.get(node, 40000)
        self.next[node] = start + count
        return list(range(start, start + count))


def test_ps_spread_first_then_chief_workers_evaluator_dealt_in_turn() -> None:
    spec = _spec(ps=2, chief=1, worker=4, evaluator=1)
    nodes = Nodes()
    placed = place_counted(spec, ["n0", "n1", "n2"], nodes)
    assert not placed.has_counted()
    assert [t.address for t in placed.tasks()] == [
        "n0:40000",  # ps 0
        "n1:40000",  # ps 1
        "n2:40000",  # chief 0
        "n0:40001",  # worker 0
        "n1:40001",
        "n2:40001",
        "n0:40002",  # worker 3
        "n1:40002",  # evaluator 0
    ]
    # One call per node, for every port it needs, in the order nodes are first used.
    assert nodes.calls == [("n0", 3), ("n1", 3), ("n2", 2)]
    assert placed.role_ids() == spec.role_ids()


def test_explicit_tasks_stay_and_a_spec_without_counts_is_unchanged() -> None:
    spec = _spec(ps=["10.0.0.9:2222"], worker=2)
    placed = place_counted(spec, ["n0"], Nodes())
    assert placed.jobs["ps"] == spec.jobs["ps"]
    assert [t.address for t in placed.jobs["worker"].tasks] == ["n0:40000", "n0:40001"]
    plain = _spec(ps=["h:1"], worker=["h:2"])
    assert place_counted(plain, [], Nodes()) is plain


def test_counted_tasks_get_the_jobs_settings_and_the_placed_spec_writes_and_reads_back() -> None:
    text = BASE.format(jobs='[jobs.ps]\ntasks = 1\n[jobs.worker]\ntasks = 2\ngpus = [1]\nenv = { A = "x" }\n')
    spec, _ = parse_text(text)
    assert spec is not None
    placed = place_counted(spec, ["n0", "n1"], Nodes())
    worker = placed.jobs["worker"].tasks[1]
    assert (worker.host, worker.gpus, worker.env, worker.command) == ("n0", (1,), {"A": "x"}, None)
    assert placed.jobs["ps"].tasks[0].gpus == ()
    again, problems = parse_text(dumps(placed))
    assert problems == [] and again == placed


def test_a_port_that_cannot_be_had_is_a_clear_error() -> None:
    spec = _spec(ps=1, worker=2)

    def refusing(node: str, count: int) -> list[int]:
        raise ValueError("srun: error: Unable to create step")

    with pytest.raises(PlacementError, match=r"cannot get 3 free port\(s\) on node n0: srun: error"):
        place_counted(spec, ["n0"], refusing)
    with pytest.raises(PlacementError, match="node n0 gave 1 distinct port"):
        place_counted(spec, ["n0"], lambda node, count: [5000] * count)
    with pytest.raises(PlacementError, match="node n0 gave 0, which is not a TCP port"):
        place_counted(spec, ["n0"], lambda node, count: list(range(count)))
    with pytest.raises(PlacementError, match="has no nodes"):
        place_counted(spec, [], Nodes())
    # A port the file gives to a listed task on the same machine is not handed out again.
    mixed = _spec(ps=["localhost:40001"], worker=2)
    with pytest.raises(PlacementError, match="port 40001, which the cluster file gives to ps:0"):
        place_counted(mixed, ["localhost"], Nodes())


@settings(max_examples=200, deadline=None)
@given(
    counts=st.fixed_dictionaries(
        {"worker": st.integers(1, 9)},
        optional={"ps": st.integers(1, 5), "chief": st.just(1), "evaluator": st.integers(1, 2)},
    ),
    node_count=st.integers(1, 6),
)
def test_placement_is_even_distinct_and_deterministic(counts: dict[str, int], node_count: int) -> None:
    spec = _spec(**counts)
    node_names = [f"node-{i}" for i in range(node_count)]
    nodes = Nodes()
    placed = place_counted(spec, node_names, nodes)
    tasks = placed.tasks()
    assert len(tasks) == sum(counts.values()) and placed.role_ids() == spec.role_ids()
    per_node = [sum(t.host == n for t in tasks) for n in node_names]
    assert max(per_node) - min(per_node) <= 1  # even, give or take one
    assert len({(canonical_host(t.host), t.port) for t in tasks}) == len(tasks)
    assert len(nodes.calls) == len({n for n, _ in nodes.calls})  # one call per node
    ps = counts.get("ps", 0)
    assert len({t.host for t in tasks if t.job == "ps"}) == min(ps, node_count)  # ps spread first
    assert place_counted(spec, node_names, Nodes()) == placed
    assert deal(spec, node_names) == {j: [t.host for t in placed.jobs[j].tasks] for j in counts}


def test_free_ports_argv_is_one_srun_step_on_the_node() -> None:
    argv = free_ports_argv("42", "node-1", 3, python="/usr/bin/python3", agent_path=Path("/home/me/agent.pyz"))
    assert argv[:2] == ["srun", "--job-name=towerdeck-free-ports"]
    assert {"--jobid=42", "--nodes=1", "--ntasks=1", "--nodelist=node-1", "--overlap"} <= set(argv)
    assert argv[argv.index("--") + 1 :] == ["/usr/bin/python3", "/home/me/agent.pyz", "--free-ports", "3"]


def test_the_agents_answer_is_read_or_its_error_named() -> None:
    assert parse_free_ports_answer("n0", 'noise\n{"ports": [1, 2]}\n') == [1, 2]
    with pytest.raises(ValueError, match="cannot choose free ports: boom"):
        parse_free_ports_answer("n0", '{"error": "cannot choose free ports: boom"}\n')
    with pytest.raises(ValueError, match="the agent on n0 printed no answer"):
        parse_free_ports_answer("n0", "Traceback ...\n")
    with pytest.raises(ValueError, match="not a list of ports"):
        parse_free_ports_answer("n0", '{"ports": "1"}')


def _agent(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(artifact_file()), *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_the_agent_zipapp_chooses_distinct_ports_that_are_free_on_every_address() -> None:
    done = _agent("--free-ports", "5")
    assert done.returncode == 0, done.stderr
    ports = json.loads(done.stdout)["ports"]
    assert len(set(ports)) == 5 and all(1024 <= p <= 65535 for p in ports)
    # Released before the answer: each can be bound again at once on every address, as TF does.
    for port in ports:
        with socket.socket() as s:
            s.bind(("0.0.0.0", port))


@pytest.mark.parametrize(("value", "message"), [("0", "from 1 to 1024, not 0"), ("two", "whole number")])
def test_the_agent_says_why_it_cannot_choose_ports(value: str, message: str) -> None:
    done = _agent("--free-ports", value)
    assert done.returncode == 2
    assert message in json.loads(done.stdout)["error"] and message in done.stderr


def test_through_a_login_node_the_step_is_one_quoted_remote_command() -> None:
    from core.slurm.client import SlurmClient

    client = SlurmClient(ssh_prefix=["ssh", "-oBatchMode=yes", "--", "me@login-1"])
    argv = client.argv(
        free_ports_argv("42", "node-1", 2, python="python3", agent_path=Path("/home/me/my runs/agent.pyz"))
    )
    assert argv[:4] == ["ssh", "-oBatchMode=yes", "--", "me@login-1"] and len(argv) == 5
    assert "'/home/me/my runs/agent.pyz' --free-ports 2" in argv[4]
