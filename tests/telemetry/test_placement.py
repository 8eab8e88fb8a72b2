"""The device-placement parser: recorded lines, random text, and logs of real TensorFlow runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.telemetry.placement import (
    LogicalDevice,
    OpPlacement,
    PlacementAggregator,
    format_summary,
    short_device,
)
from tests.helpers.ports import free_ports
from tests.helpers.project import ROOT, run_cli

WORKER0_CPU = "/job:worker/replica:0/task:0/device:CPU:0"
PS0_CPU = "/job:ps/replica:0/task:0/device:CPU:0"
LOCAL_GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
LOCAL_CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"

# Recorded from TensorFlow 2.21 (tests below regenerate such logs for real; these pin exact bytes).
PLACER_STDOUT = "MatMul: (MatMul): /job:worker/replica:0/task:0/device:CPU:0"
PLACER_ABSL = (
    "I0000 00:00:1795306005.520405   17868 placer.cc:162] MatMul: (MatMul): /job:worker/replica:0/task:0/device:CPU:0"
)
EAGER_ABSL = (
    "I0000 00:00:1795306016.660629   18049 execute.cc:1775] "
    "Executing op _MklMatMul in device /job:localhost/replica:0/task:0/device:CPU:0"
)
CREATED_ABSL = (
    "I0000 00:00:1795305212.417898    3241 gpu_device.cc:2020] Created device "
    "/job:localhost/replica:0/task:0/device:GPU:0 with 79078 MB memory:  -> device: 0, "
    "name: NVIDIA H100 80GB HBM3, pci bus id: 0000:1a:00.0, compute capability: 9.0"
)
# TF 1.x / early 2.x wording of the same fact.
CREATED_OLD = (
    "2019-03-01 10:00:00.000000: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1115] Created TensorFlow "
    "device (/job:localhost/replica:0/task:0/device:GPU:1 with 10794 MB memory) -> physical GPU "
    "(device: 3, name: Tesla K80, pci bus id: 0000:00:1e.0, compute capability: 3.7)"
)
NOISE = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795306005.221341   17667 grpc_server_lib.cc:467] Started server with target: grpc://127.0.0.1:42319",
    "I0000 00:00:1795306005.520094   17868 colocation_graph.cc:308] Ignoring device specification "
    "/job:worker/task:0 for node 'global_step/IsInitialized/VarIsInitializedOp' because the input edge from "
    "'global_step' is a reference connection and already has a device field set to /job:ps/task:0",
    "Step: 19,  Epoch:  1,  Batch: 20 of 23,  Cost: 1.3725,  AvgTime: 4.51ms",
    "Executing op MatMul in device gpu please",
    "Executing op  in device /job:localhost/replica:0/task:0/device:CPU:0",
    "Created device somewhere with lots of memory",
    "this line mentions /job:worker but is not a placement: /job:",
    "",
    "   ",
]


def by_key(agg: PlacementAggregator) -> dict[tuple[str, str, str, str], OpPlacement]:
    return {(p.kind, p.name, p.op_type, p.device): p for p in agg.ops()}


# -- recorded lines -------------------------------------------------------------------------------


def test_graph_placer_line_and_its_absl_duplicate_count_once() -> None:
    agg = PlacementAggregator()
    assert agg.feed_line(PLACER_STDOUT, t=10.0)
    assert agg.feed_line(PLACER_ABSL, t=11.0)
    ops = agg.ops()
    assert ops == [OpPlacement("MatMul", "MatMul", WORKER0_CPU, "graph", 1, 10.0, 11.0)]
    assert agg.counts_by_device() == {WORKER0_CPU: 1}
    assert agg.graph_repeats == 1
    assert agg.lines_matched == 2


def test_same_name_on_two_devices_or_types_are_two_placements() -> None:
    agg = PlacementAggregator()
    agg.feed_line("MatMul: (MatMul): /job:worker/replica:0/task:0/device:CPU:0")
    agg.feed_line("MatMul: (MatMul): /job:worker/replica:0/task:1/device:CPU:0")
    agg.feed_line("MatMul: (_MklMatMul): /job:worker/replica:0/task:0/device:CPU:0")
    assert len(agg.ops()) == 3
    assert agg.counts_by_device() == {WORKER0_CPU: 2, "/job:worker/replica:0/task:1/device:CPU:0": 1}


def test_older_form_without_op_type() -> None:
    agg = PlacementAggregator()
    assert agg.feed_line("Const_3: /job:localhost/replica:0/task:0/device:GPU:3\r\n", t=1.0)
    assert agg.feed_line(
        "I0000 00:00:1.5 1 placer.cc:1] gradients/Mean_grad/Shape: /job:localhost/replica:0/task:0/device:GPU:3"
    )
    (const, shape) = agg.ops()
    assert (const.name, const.op_type, const.device, const.kind) == (
        "Const_3",
        "",
        "/job:localhost/replica:0/task:0/device:GPU:3",
        "graph",
    )
    assert (shape.name, shape.op_type) == ("gradients/Mean_grad/Shape", "")


def test_classic_absl_prefix_with_date_and_time() -> None:
    agg = PlacementAggregator()
    assert agg.feed_line("I1121 23:53:47.123456 4242 placer.cc:125] add: (AddV2): " + LOCAL_GPU0)
    assert by_key(agg)[("graph", "add", "AddV2", LOCAL_GPU0)].count == 1


def test_eager_executions_are_counted_per_type_and_device() -> None:
    agg = PlacementAggregator()
    for i in range(1000):
        assert agg.feed_line(f"Executing op MatMul in device {LOCAL_GPU0}", t=float(i))
    assert agg.feed_line(EAGER_ABSL, t=5.0)
    assert agg.feed_line(EAGER_ABSL + "   \r", t=6.0)  # same op, trailing junk: same entry
    ops = by_key(agg)
    assert ops[("eager", "MatMul", "MatMul", LOCAL_GPU0)] == OpPlacement(
        "MatMul", "MatMul", LOCAL_GPU0, "eager", 1000, 0.0, 999.0
    )
    assert ops[("eager", "_MklMatMul", "_MklMatMul", LOCAL_CPU0)].count == 2
    assert agg.counts_by_device() == {LOCAL_CPU0: 2, LOCAL_GPU0: 1000}


def test_eager_and_graph_of_the_same_op_are_kept_apart() -> None:
    agg = PlacementAggregator()
    agg.feed_line(f"MatMul: (MatMul): {LOCAL_GPU0}")
    agg.feed_line(f"Executing op MatMul in device {LOCAL_GPU0}")
    agg.feed_line(f"Executing op MatMul in device {LOCAL_GPU0}")
    assert {(p.kind, p.count) for p in agg.ops()} == {("graph", 1), ("eager", 2)}
    assert agg.counts_by_device() == {LOCAL_GPU0: 3}


def test_created_device_lines() -> None:
    agg = PlacementAggregator()
    assert agg.feed_line(CREATED_ABSL + "\r")
    assert agg.feed_line(CREATED_OLD)
    # Spacing variants: one space after "memory:", no absl prefix.
    assert agg.feed_line(
        "Created device /job:worker/replica:0/task:1/device:GPU:0 with 40000 MB memory: -> device: 1, "
        "name: NVIDIA A100-SXM4-40GB, pci bus id: 0000:07:00.0, compute capability: 8.0"
    )
    assert agg.devices() == [
        LogicalDevice(LOCAL_GPU0, 79078, 0, "NVIDIA H100 80GB HBM3", "0000:1a:00.0", "9.0"),
        LogicalDevice("/job:localhost/replica:0/task:0/device:GPU:1", 10794, 3, "Tesla K80", "0000:00:1e.0", "3.7"),
        LogicalDevice(
            "/job:worker/replica:0/task:1/device:GPU:0", 40000, 1, "NVIDIA A100-SXM4-40GB", "0000:07:00.0", "8.0"
        ),
    ]
    assert agg.ops() == []  # device lines are not ops
    assert agg.counts_by_device() == {}


def test_created_device_again_replaces_the_old_entry() -> None:
    agg = PlacementAggregator()
    agg.feed_line(CREATED_ABSL)
    agg.feed_line(CREATED_ABSL.replace("79078 MB", "70000 MB"))
    (dev,) = agg.devices()
    assert dev.memory_mb == 70000


def test_ansi_colour_codes_are_ignored() -> None:
    agg = PlacementAggregator()
    assert agg.feed_line(f"\x1b[32mMatMul: (MatMul): {WORKER0_CPU}\x1b[0m")
    assert agg.feed_line(f"\x1b[1;34mI0000 00:00:1.0 1 execute.cc:1] Executing op Add in device {LOCAL_CPU0}\x1b[0m")
    assert set(by_key(agg)) == {("graph", "MatMul", "MatMul", WORKER0_CPU), ("eager", "Add", "Add", LOCAL_CPU0)}


@pytest.mark.parametrize("line", NOISE)
def test_noise_lines_are_ignored(line: str) -> None:
    agg = PlacementAggregator()
    assert not agg.feed_line(line)
    assert agg.summary()["ops"] == [] and agg.devices() == []
    assert agg.lines_matched == 0


def test_feed_text_splits_on_any_line_ending_and_counts_matches() -> None:
    text = "\r\n".join([PLACER_STDOUT, NOISE[0], PLACER_ABSL]) + "\n" + EAGER_ABSL + "\r" + CREATED_ABSL + "\n"
    agg = PlacementAggregator()
    assert agg.feed_text(text, t=3.0) == 4
    assert agg.feed_text("just noise\nand more\n") == 0
    assert len(agg.ops()) == 2 and len(agg.devices()) == 1
    assert all(p.first_seen == 3.0 for p in agg.ops())


def test_max_ops_bounds_the_table_and_counts_the_overflow() -> None:
    agg = PlacementAggregator(max_ops=3)
    for i in range(10):
        agg.feed_line(f"op_{i}: (Const): {WORKER0_CPU}")
    for _ in range(5):
        agg.feed_line(f"Executing op Add in device {LOCAL_CPU0}")
    agg.feed_line(f"op_0: (Const): {WORKER0_CPU}")  # a known op still updates
    assert [p.name for p in agg.ops()] == ["op_0", "op_1", "op_2"]
    assert agg.overflow == 7 + 5
    assert agg.summary()["overflow"] == 12
    assert "12 more placement lines" in format_summary(agg.summary())


def test_eager_cache_entry_survives_overflow() -> None:
    agg = PlacementAggregator(max_ops=1)
    agg.feed_line(f"Executing op Add in device {LOCAL_CPU0}")
    agg.feed_line(f"Executing op Mul in device {LOCAL_CPU0}")
    agg.feed_line(f"Executing op Add in device {LOCAL_CPU0}")
    assert [(p.name, p.count) for p in agg.ops()] == [("Add", 2)]
    assert agg.overflow == 1


@pytest.mark.parametrize(
    ("device", "short"),
    [
        (WORKER0_CPU, "worker/0 CPU:0"),
        ("/job:worker/replica:0/task:0/device:GPU:0", "worker/0 GPU:0"),
        ("/job:ps/replica:0/task:3/device:CPU:0", "ps/3 CPU:0"),
        ("/job:worker/replica:2/task:1/device:GPU:7", "worker/1 r2 GPU:7"),
        ("/job:worker/task:1", "worker/1"),
        ("not a device", "not a device"),
    ],
)
def test_short_device(device: str, short: str) -> None:
    assert short_device(device) == short


def test_summary_is_json_ready_and_format_summary_sorts_by_device_then_name() -> None:
    agg = PlacementAggregator()
    agg.feed_text(
        "\n".join(
            [
                f"zeta: (Const): {WORKER0_CPU}",
                f"hidden/weights: (VarHandleOp): {PS0_CPU}",
                f"alpha: (Const): {WORKER0_CPU}",
                f"Executing op MatMul in device {WORKER0_CPU}",
                CREATED_ABSL,
            ]
        ),
        t=1.0,
    )
    summary = json.loads(json.dumps(agg.summary()))
    assert summary["counts_by_device"] == {PS0_CPU: 1, WORKER0_CPU: 3}
    text = format_summary(summary)
    assert "NVIDIA H100 80GB HBM3" in text and "0000:1a:00.0" in text
    table = text[text.index("Ops (4):") :].splitlines()[2:]
    assert [row.split()[0] for row in table] == ["hidden/weights", "MatMul", "alpha", "zeta"]
    assert "ps/0 CPU:0" in table[0] and "worker/0 CPU:0" in table[1]
    per_device = text[: text.index("Logical devices:")]
    assert "ps/0 CPU:0" in per_device and "3" in per_device.split("worker/0 CPU:0")[1].split()[0]


def test_format_summary_of_nothing_says_so() -> None:
    assert "no device placement lines" in format_summary(PlacementAggregator().summary())


# -- never crashes --------------------------------------------------------------------------------

_TEMPLATES = [PLACER_STDOUT, PLACER_ABSL, EAGER_ABSL, CREATED_ABSL, CREATED_OLD, "Const_3: " + LOCAL_GPU0]
_PIECES = st.sampled_from(
    ["/job:", ": (", "): ", "Executing op ", " in device ", "Created device ", " -> device: ", "\x1b[", "\r", "\n"]
)


@st.composite
def mutated_lines(draw: st.DrawFn) -> str:
    line = draw(st.sampled_from(_TEMPLATES))
    for _ in range(draw(st.integers(0, 4))):
        i = draw(st.integers(0, len(line)))
        j = draw(st.integers(i, min(len(line), i + 8)))
        insert = draw(st.one_of(st.text(max_size=6), _PIECES))
        line = line[:i] + insert + line[j:]
    return line


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(mutated_lines(), st.text(max_size=80)), max_size=8), st.integers(0, 4))
def test_random_and_mutated_lines_never_raise(lines: list[str], max_ops: int) -> None:
    agg = PlacementAggregator(max_ops=max_ops)
    matched = sum(agg.feed_line(line, t=1.0) for line in lines)
    matched += agg.feed_text("\n".join(lines), t=2.0)
    summary = agg.summary()
    json.dumps(summary)
    format_summary(summary)
    assert len(agg.ops()) <= max_ops
    assert agg.lines_matched == matched
    for p in agg.ops():
        short_device(p.device)
        assert p.device.startswith("/job:") and p.count >= 1


# -- real TensorFlow ------------------------------------------------------------------------------


@pytest.mark.slow
def test_between_graph_run_log(tmp_path: Path) -> None:
    ps_port, worker_port = free_ports(2)
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(
        f"""
name = "placement"
strategy = "between_graph"
launch_style = "flags"
workdir = "{ROOT / "resources" / "trainers"}"
command = ["python", "-u", "between_graph.py", "--train_steps=20", "--log_every=10", "--log_device_placement"]
[env]
TF_CPP_MIN_LOG_LEVEL = "0"   # the absl copy of each placer line is an INFO message
[jobs.ps]
tasks = ["127.0.0.1:{ps_port}"]
[jobs.worker]
tasks = ["127.0.0.1:{worker_port}"]
"""
    )
    run_dir = tmp_path / "run"
    proc = run_cli("launch", str(cluster), "--run-dir", str(run_dir), env={"TF_CPP_MIN_LOG_LEVEL": "0"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log = (run_dir / "roles" / "worker-0" / "attempt-1.log").read_text(errors="replace")
    plain = [ln for ln in log.splitlines() if ln.startswith("MatMul: (MatMul): ")]
    absl = [ln for ln in log.splitlines() if "placer.cc:" in ln and "] MatMul: (MatMul): " in ln]
    assert plain and absl, "the log should hold both copies of the placer line"

    agg = PlacementAggregator()
    matched = agg.feed_text(log, t=1.0)
    ops = agg.ops()
    graph = {(p.name, p.op_type): p for p in ops if p.kind == "graph"}
    assert len(graph) == len(ops), "a classic graph run logs no eager executions"
    # Every placement is printed twice (stdout and absl on stderr) and kept once.
    assert matched == 2 * len(ops)
    assert agg.graph_repeats == len(ops)

    for var in ("hidden/weights", "hidden/biases", "softmax/weights", "softmax/biases", "global_step"):
        placement = graph[(var, "VarHandleOp")]
        assert placement.device.startswith("/job:ps/"), placement
        assert placement.count == 1
    matmuls = [p for p in ops if p.op_type == "MatMul"]
    # Two in the forward pass, two gradients for each of them.
    assert {p.name for p in matmuls} >= {"MatMul", "MatMul_1", "gradients/MatMul_grad/MatMul"}
    assert len(matmuls) == 6
    assert all(p.device.startswith("/job:worker/replica:0/task:0/") for p in matmuls)
    assert any(p.op_type == "ResourceApplyGradientDescent" and p.device.startswith("/job:ps/") for p in ops)

    counts = agg.counts_by_device()
    assert set(counts) == {p.device for p in ops}
    assert sum(counts.values()) == len(ops)
    assert any(d.startswith("/job:ps/") for d in counts) and any(d.startswith("/job:worker/") for d in counts)
    assert agg.devices() == []  # CPU only: no "Created device" lines
    text = format_summary(agg.summary())
    assert "ps/0 CPU:0" in text and "worker/0 CPU:0" in text and "hidden/weights" in text


def _eager_matmul_log(extra_env: dict[str, str]) -> str:
    code = "import tensorflow as tf; tf.debugging.set_log_device_placement(True); a=tf.constant([[1.0]]); print(tf.matmul(a,a))"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        # Eager "Executing op" lines are absl INFO messages: level 1 (conftest's default) hides them.
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0", "CUDA_VISIBLE_DEVICES": "", **extra_env},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout + proc.stderr


@pytest.mark.slow
def test_tf2_eager_log_finds_matmul_executed_on_cpu() -> None:
    # oneDNN (on by default on x86) rewrites MatMul to _MklMatMul; without it the op keeps its name.
    log = _eager_matmul_log({"TF_ENABLE_ONEDNN_OPTS": "0"})
    agg = PlacementAggregator()
    assert agg.feed_text(log) > 0
    eager = {(p.op_type, p.device): p for p in agg.ops() if p.kind == "eager"}
    matmul = [p for (op_type, device), p in eager.items() if op_type == "MatMul" and "/device:CPU:" in device]
    assert len(matmul) == 1 and matmul[0].count == 1
    assert matmul[0].device.startswith("/job:localhost/")
    # The function wrapping the op is placed too (graph placer lines, printed twice, kept once).
    graph = [p for p in agg.ops() if p.kind == "graph" and p.op_type == "MatMul"]
    assert len(graph) == 1 and "/device:CPU:" in graph[0].device
    assert agg.graph_repeats > 0


def test_feed_stream_does_not_depend_on_where_chunks_split() -> None:
    text = (
        "I0000 00:00:1795305212.417898    3241 placer.cc:162] MatMul: (MatMul): /job:worker/replica:0/task:0/device:CPU:0\n"
        "MatMul: (MatMul): /job:worker/replica:0/task:0/device:CPU:0\r\n"
        "noise\n"
        "Executing op Add in device /job:localhost/replica:0/task:0/device:CPU:0\n"
        "w: (VarHandleOp): /job:ps/replica:0/task:0/device:CPU:0"  # unfinished last line
    )
    whole = PlacementAggregator()
    whole.feed_text(text, t=1.0)
    for cut in range(len(text) + 1):
        streamed = PlacementAggregator()
        streamed.feed_stream(text[:cut], t=1.0)
        streamed.feed_stream(text[cut:], t=1.0)
        streamed.flush(t=1.0)
        assert streamed.counts_by_device() == whole.counts_by_device(), cut
    assert whole.counts_by_device()["/job:ps/replica:0/task:0/device:CPU:0"] == 1
