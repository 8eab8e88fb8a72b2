"""Bad input, property-based: random and mutated cluster files, importer input, log text and agent
commands give a result or a clear error (Problems, error events), never an uncaught exception."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from core.cluster.pasted import from_flags, from_tf_config
from core.cluster.problems import ERROR, Problem, SpecError
from core.cluster.spec import JOB_KEYS, JOB_ORDER, RESTART_KEYS, TASK_KEYS, TOP_KEYS, dumps, parse_data, parse_text
from core.telemetry.metrics import MetricParser, MetricPattern
from core.telemetry.placement import PlacementAggregator
from core.telemetry.worker_stats import WorkerStats
from tests.helpers.agent_process import AgentProcess
from tests.helpers.bad_input import FLAG_WORDS, JSONISH, SCALARS, SEED_TEXTS, mutated

# TOWERDECK_FUZZ_SCALE=20 runs twenty times the examples (a longer hunt than `make test` affords).
SCALE = int(os.environ.get("TOWERDECK_FUZZ_SCALE", "1"))


@pytest.fixture(scope="module")
def empty_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cluster files' folder (workdir "."): it exists, and holds no script."""
    return tmp_path_factory.mktemp("empty")


def check_result(result: tuple[Any, list[Problem]]) -> None:
    spec, problems = result
    assert all(isinstance(p, Problem) and isinstance(p.field, str) and p.message for p in problems)
    if spec is None:
        assert any(p.severity == ERROR for p in problems), problems
        assert all(p.hint for p in problems if p.severity == ERROR), problems  # every error says how to fix it
    else:
        assert not any(p.severity == ERROR for p in problems)


@given(st.text(max_size=400))
@settings(max_examples=300 * SCALE, deadline=None)
def test_random_text_is_a_spec_or_problems(text: str) -> None:
    check_result(parse_text(text))


@given(mutated(SEED_TEXTS))
@settings(max_examples=600 * SCALE, deadline=None)
def test_mutated_cluster_files_are_a_spec_or_problems(text: str) -> None:
    result = parse_text(text, source=Path("/tmp/cluster.toml"))
    check_result(result)
    spec = result[0]
    if spec is not None:  # what parses, saves and parses back the same
        again, problems = parse_text(dumps(spec), source=Path("/tmp/cluster.toml"))
        assert again is not None, problems
        assert again.tasks() == spec.tasks() and again.command == spec.command


VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def keyed(keys: Any, values: Any) -> Any:
    return st.dictionaries(st.sampled_from(sorted(keys)) | st.text(max_size=5), values, max_size=6)


TASKS = st.lists(st.sampled_from(["127.0.0.1:2222", "h:3"]) | keyed(TASK_KEYS, VALUES) | VALUES, max_size=3)
JOBS = st.dictionaries(
    st.sampled_from(JOB_ORDER) | st.text(max_size=4),
    keyed(JOB_KEYS, VALUES | TASKS | keyed(RESTART_KEYS, VALUES)) | VALUES,
    max_size=4,
)


@given(keyed(TOP_KEYS, VALUES), JOBS)
@settings(max_examples=500 * SCALE, deadline=None)
def test_random_cluster_data_is_a_spec_or_problems(top: dict[str, Any], jobs: dict[str, Any]) -> None:
    check_result(parse_data({**top, "jobs": jobs}))


@given(keyed(TOP_KEYS, VALUES), JOBS)
@settings(max_examples=300 * SCALE, deadline=None)
def test_random_cluster_data_is_checked_whole_without_a_crash(
    empty_dir: Path, top: dict[str, Any], jobs: dict[str, Any]
) -> None:
    """What validate does with a file with errors: a partial spec, and this machine's checks on it
    (no port checks: they would only measure this machine)."""
    from core.preflight.checks import check_local

    data = {**top, "jobs": jobs}
    spec, problems = parse_data(data, base=empty_dir, partial=True)
    full, _ = parse_data(data, base=empty_dir)
    assert (full is None) == any(p.severity == ERROR for p in problems)
    if spec is not None:
        local = check_local(spec, "", check_ports=False, partial=any(p.severity == ERROR for p in problems))
        assert all(isinstance(p, Problem) and p.message and p.hint for p in local), local


def spec_or_error(fn: Any, *args: Any) -> None:
    try:
        spec = fn(*args)
    except SpecError as exc:
        assert exc.problems and all(p.message and p.hint for p in exc.problems), exc.problems
        return
    assert spec.tasks()


@given(st.lists(FLAG_WORDS | st.text(max_size=10), max_size=10).map(" ".join) | st.text(max_size=200))
@settings(max_examples=400 * SCALE, deadline=None)
def test_flags_importer_gives_a_spec_or_problems(line: str) -> None:
    spec_or_error(from_flags, line, Path("/tmp"))


@given(JSONISH.map(lambda v: json.dumps(v, allow_nan=True)) | st.text(max_size=200), st.none() | st.text(max_size=20))
@settings(max_examples=400 * SCALE, deadline=None)
def test_tf_config_importer_gives_a_spec_or_problems(text: str, command: str | None) -> None:
    spec_or_error(from_tf_config, text, command, Path("/tmp"))


PLACEMENT_LINES = [
    "MatMul: (MatMul): /job:worker/replica:0/task:0/device:GPU:0\n",
    "I0000 00:00:1700000000.1 123 placer.cc:162] MatMul: (MatMul): /job:worker/replica:0/task:0/device:GPU:0\n",
    "Executing op MatMul in device /job:localhost/replica:0/task:0/device:CPU:0\n",
    "Const_3: /job:localhost/replica:0/task:0/device:GPU:3\n",
    "Created device /job:localhost/replica:0/task:0/device:GPU:0 with 79078 MB memory: -> device: 0, name: "
    "NVIDIA H100 80GB HBM3, pci bus id: 0000:1a:00.0, compute capability: 9.0\n",
]


@given(
    st.lists(
        st.sampled_from(PLACEMENT_LINES)
        | mutated(PLACEMENT_LINES)
        | st.binary(max_size=60).map(lambda b: b.decode("utf-8", "replace"))
        | st.sampled_from(["\r", "\n", "x" * 70000, "\x1b[31m", "/job:", "device:GPU:", "-> device: "]),
        max_size=12,
    )
)
@settings(max_examples=300 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_placement_and_metric_parsers_take_any_stream(chunks: list[str]) -> None:
    placement = PlacementAggregator()
    parser = MetricParser((MetricPattern(r"(?P<step>\d+)\D+(?P<loss>[0-9.e+-]+)"),))
    stats = WorkerStats()
    for chunk in chunks:
        placement.feed_stream(chunk)
        for sample in parser.feed(chunk, 1.0):
            stats.add(sample)
    placement.flush()
    json.dumps(placement.summary())  # the summary is plain data the window and the CLI can show


# ------------------------------------------------------------------------------------------
# The agent protocol: random and mutated lines into one real agent process


@pytest.fixture(scope="module")
def live_agent() -> Any:
    agent = AgentProcess()
    yield agent
    assert agent.proc.poll() is None, "the agent died on bad input"
    errors = [e for e in agent.events if e["ev"] == "error"]
    assert len(errors) > 50 and all(e["message"] for e in errors)  # bad input was answered, not ignored
    assert agent.close() == 0


VALID_LINES = [
    '{"op":"stop","role":"worker:0","grace_s":1}',
    '{"op":"kill","role":"ps:0"}',
    '{"op":"signal","role":"worker:0","signal":"STOP"}',
    '{"op":"configure","sample_period_s":0.5}',
    '{"op":"ping","id":1}',
]
OPS = ["start", "stop", "kill", "signal", "configure", "ping", "nope", "", "START", "__init__", "run", "emit", "feed"]
FIELDS = ["role", "attempt", "argv", "env", "cwd", "log", "grace_s", "signal", "sample_period_s", "id", "op"]


@st.composite
def commands(draw: st.DrawFn, log_dir: str) -> bytes:
    """A command line: valid-looking JSON with wrong types and values, or not JSON at all."""
    kind = draw(st.sampled_from(["object", "json", "bytes", "mutated"]))
    if kind == "mutated":  # a valid line, cut and spliced (no start: it could name any program or path)
        return draw(mutated(VALID_LINES)).replace("\n", " ").encode("utf-8", "surrogatepass")
    if kind == "bytes":
        return draw(st.binary(max_size=200)).replace(b"\n", b" ")
    if kind == "json":
        return json.dumps(draw(JSONISH)).encode()
    command: dict[str, Any] = {"op": draw(st.sampled_from(OPS) | st.text(max_size=6) | SCALARS)}
    for field in draw(st.lists(st.sampled_from(FIELDS), max_size=6)):
        command[field] = draw(
            SCALARS | st.lists(SCALARS, max_size=3) | st.dictionaries(st.text(max_size=4), SCALARS, max_size=2)
        )
    if command["op"] == "start" and draw(st.booleans()):
        # A start that could run: only harmless programs, logs only under the test's directory.
        command["argv"] = draw(st.sampled_from([[sys.executable, "-c", "pass"], ["/nonexistent/trainer"], []]))
        command["log"] = f"{log_dir}/{draw(st.sampled_from(['a.log', 'd/b.log', 'nodir/../c.log']))}"
        command["role"] = draw(st.sampled_from(["worker:0", "ps:0", 7]))
    elif command["op"] == "start":
        command.pop("argv", None)  # never a random program
    if command["op"] == "start" and not (isinstance(command.get("log"), str) and command["log"].startswith(log_dir)):
        command.pop("log", None)  # never a random path
    return json.dumps(command, allow_nan=True).encode()


@given(data=st.data())
@settings(max_examples=300 * SCALE, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_agent_answers_bad_commands_with_errors_and_stays_alive(
    live_agent: AgentProcess, data: Any, tmp_path_factory: Any
) -> None:
    log_dir = str(tmp_path_factory.getbasetemp() / "agent-fuzz")
    lines = data.draw(st.lists(commands(log_dir), min_size=1, max_size=5))
    for line in lines:
        assume(b"\n" not in line)
    marker = data.draw(st.integers(0, 2**31))
    assert live_agent.proc.stdin is not None
    live_agent.proc.stdin.flush()
    live_agent.proc.stdin.buffer.write(b"\n".join(lines) + b"\n")  # raw bytes: invalid UTF-8 too
    live_agent.proc.stdin.buffer.flush()
    live_agent.send({"op": "ping", "id": marker})
    live_agent.wait_for("pong", id=marker, timeout_s=20)  # it read every line and still answers
    assert live_agent.proc.poll() is None
