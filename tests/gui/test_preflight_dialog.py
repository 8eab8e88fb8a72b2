"""The pre-flight table: a busy-GPU warning is its own kind of row (marked, coloured), and a host
with only warnings still counts as ready."""

from __future__ import annotations

from core.preflight.runner import HostCheck, HostPreflight
from gui.window.preflight import FAILED, WARNING, PreflightDialog


def test_warnings_are_marked_and_do_not_make_a_host_unready(qtbot):
    busy = HostCheck(
        "gpus", ok=None, detail="GPU 1 (for worker:0) is busy: pid 42 alice 3.0 GiB", fix="pick free GPUs", warning=True
    )
    results = [
        HostPreflight("node1", "node1", (HostCheck("reachable", ok=True, detail="ssh works"), busy), 0.1),
        HostPreflight(
            "node2", "node2", (HostCheck("reachable", ok=False, detail="cannot reach node2", fix="check it"),), 0.1
        ),
    ]
    dialog = PreflightDialog(None, results)
    qtbot.addWidget(dialog)
    rows = {
        dialog.table.item(r, 2).text(): (dialog.table.item(r, 3).text(), dialog.table.item(r, 4))
        for r in range(dialog.table.rowCount())
    }
    mark, detail = rows["gpus"]
    assert mark == "WARNING" and "pid 42 alice" in detail.text() and detail.background().color() == WARNING
    assert rows["reachable"][0] == "FAILED" and rows["reachable"][1].background().color() == FAILED
    assert dialog.summary.text().startswith("1 of 2 hosts ready")
