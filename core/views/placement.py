"""The Placement tab's model, without the widgets: a role's placement summary
(:meth:`core.telemetry.placement.PlacementAggregator.summary`) as the tab shows it, a sentence,
the op table's rows with the misplaced ops marked, and the ops per device. Qt-free.

A compute op (MatMul, Conv2D, ...) that TensorFlow placed on a CPU of the role's own task while the
role has a GPU is marked: that is the classic performance mistake the placement log reveals.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["MAX_ROWS", "PlacementTable", "Row", "device_kind", "is_cpu_device", "misplaced", "on_own_task"]

MAX_ROWS = 20_000  # the table is for reading; `python main.py placement LOG --json` has them all
COMPUTE_OP = re.compile(
    r"MatMul|Conv|Pool|BiasAdd|Relu|Elu|Selu|Tanh|Sigmoid|Softmax|BatchNorm|Einsum|CrossEntropy|LRN"
)
_TASK = re.compile(r"/job:(?P<job>[^/]+)(?:/replica:\d+)?(?:/task:(?P<task>\d+))?")

Row = tuple[str, str, str, str, int, bool]  # name, type, device, kind, count, misplaced


def is_cpu_device(device: str) -> bool:
    return re.search(r"device:(XLA_)?CPU:\d+$", device) is not None


def on_own_task(device: str, role: str) -> bool:
    """Whether ``device`` belongs to the role's own process (``/job:worker/task:1`` for worker:1)."""
    m = _TASK.search(device)
    if m is None:
        return True  # an eager/local device name: the role's own process
    job, _, index = role.partition(":")
    return (m["job"] in (job, "localhost")) and (m["task"] is None or m["task"] == index or m["job"] == "localhost")


def misplaced(op: Mapping[str, Any], role: str, *, role_has_gpu: bool) -> bool:
    """A compute op on the role's own CPU while the role has a GPU."""
    device = str(op.get("device", ""))
    return (
        role_has_gpu
        and is_cpu_device(device)
        and on_own_task(device, role)
        and COMPUTE_OP.search(str(op.get("op_type", ""))) is not None
    )


def device_kind(device: str, role: str) -> Literal["gpu", "own cpu", "other task"]:
    """What a device is to ``role``: a GPU, its own CPU, or another task's device (a ps's CPU)."""
    if "GPU" in device:
        return "gpu"
    return "own cpu" if on_own_task(device, role) else "other task"


@dataclass(frozen=True)
class PlacementTable:
    """What the tab shows of one role's placement."""

    role: str
    text: str  # the sentence above the table
    rows: list[Row]  # at most MAX_ROWS
    counts: dict[str, int]  # ops per device
    misplaced_tip: str  # a marked row's tooltip

    @classmethod
    def of(cls, role: str, summary: Mapping[str, Any], *, role_has_gpu: bool) -> PlacementTable:
        """``role``'s placement ``summary`` as the tab shows it."""
        ops: list[dict[str, Any]] = summary.get("ops") or []
        counts: dict[str, int] = summary.get("counts_by_device") or {}
        bad = sum(1 for op in ops if misplaced(op, role, role_has_gpu=role_has_gpu))
        text = f"{role}: {len(ops)} ops on {len(counts)} devices from {summary.get('lines_matched', 0)} lines"
        if summary.get("overflow"):
            text += f"; {summary['overflow']} lines about further ops not kept"
        if len(ops) > MAX_ROWS:
            text += f"; the table shows the first {MAX_ROWS}"
        if bad:
            text += f". {bad} compute ops run on the CPU although {role} has a GPU (highlighted)."
        elif not ops:
            text = (
                f"{role}: no placement lines yet. Turn them on in the trainer: "
                "tf.debugging.set_log_device_placement(True) or ConfigProto(log_device_placement=True)."
            )
        rows = [
            (
                str(op.get("name", "")),
                str(op.get("op_type", "")),
                str(op.get("device", "")),
                str(op.get("kind", "")),
                int(op.get("count", 1)),
                misplaced(op, role, role_has_gpu=role_has_gpu),
            )
            for op in ops[:MAX_ROWS]
        ]
        return cls(role, text, rows, counts, f"compute op on the CPU while {role} has a GPU")
