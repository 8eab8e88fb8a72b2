"""The panels on their own: log line handling, placement highlighting, and the GPU panel fed by a
real cluster whose agent reads GPUs through the NVML double (this machine has no GPU)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from core.cluster.spec import parse_text
from core.views.rates import StepRates
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import ROOT

FAKE_NVML = str(ROOT / "tests" / "helpers" / "fake_nvml.py")


def test_carriage_return_progress_keeps_the_last_state_across_chunks():
    from core.views.logs import LineAssembler

    lines = LineAssembler()
    assert lines.feed("epoch 1\n 10%\r 20%") == ["epoch 1"]
    assert lines.partial == " 20%"
    assert lines.feed("\r 30%\r100%\nnext") == ["100%"]
    assert lines.feed(" line\r\n") == ["next line"]  # a CRLF ending is a plain line end
    blob = "x" * 10_000
    assert lines.feed(blob) == [blob]  # a line without an end is shown, not held forever


def test_levels_from_absl_prefixes_logging_and_tracebacks():
    from core.views.logs import line_level

    assert line_level("Step: 10,  Cost: 0.5") == 0
    assert line_level("W0000 00:00:1.2 123 local_rendezvous.cc:412] aborting") == 1
    assert line_level("WARNING:tensorflow:From x.py") == 1
    assert line_level("E0000 00:00:1.2 123 x.cc:1] failed") == 2
    assert line_level("Traceback (most recent call last):") == 2
    assert line_level("ModuleNotFoundError: No module named 'tensorflow'") == 2


def test_log_panel_filters_follows_and_shows_the_progress_line(qtbot):
    from gui.run.tabs.logs import LogPanel

    panel = LogPanel()
    qtbot.addWidget(panel)
    panel.show()
    panel.set_roles(["worker:0", "worker:1"])
    panel.show_role("worker:0")
    panel.add_output("worker:0", "".join(f"Step: {i}\n" for i in range(300)))
    panel.add_output("worker:0", "W0000 00:00:1.0 1 x.cc:1] slow\nE0000 00:00:1.0 1 x.cc:2] broken\n 40%\r 70%")
    panel.add_output("worker:1", "other role\n")
    text = panel.view.toPlainText()
    assert "Step: 299" in text and "other role" not in text
    assert panel.progress.text() == " 70%"
    bar = panel.view.verticalScrollBar()
    assert bar.value() == bar.maximum()  # following
    panel.follow.setChecked(False)
    bar.setValue(0)
    panel.add_output("worker:0", "\rdone\nStep: 300\n")
    assert bar.value() == 0  # not following: the view stays where the user put it
    assert panel.view.toPlainText().splitlines()[-2:] == ["done", "Step: 300"]
    panel.level.setCurrentIndex(1)
    assert panel.view.toPlainText().splitlines() == [
        "W0000 00:00:1.0 1 x.cc:1] slow",
        "E0000 00:00:1.0 1 x.cc:2] broken",
    ]
    panel.level.setCurrentIndex(2)
    assert panel.view.toPlainText().splitlines() == ["E0000 00:00:1.0 1 x.cc:2] broken"]
    assert panel.last_lines("worker:0", 2) == ["done", "Step: 300"]


def test_the_output_kept_per_role_shares_one_budget_and_the_newest_lines_stay(qtbot):
    """Issue 25: 65 roles keep 64 KiB of output each (4 MiB in all, 33 MiB before), a small run
    512 KiB a role; what is kept is each role's newest text, shown when the view switches to it."""
    from core.views import logs
    from gui.run.tabs.logs import LogPanel

    panel = LogPanel()
    qtbot.addWidget(panel)
    chunk = "".join(f"line {i:05d} {'x' * 50}\n" for i in range(160))  # ~10 KiB
    for roles, per_role in ((65, logs.ROLE_TEXT_MIN), (4, logs.ROLE_TEXT_CHARS)):
        panel.clear()
        names = [f"worker:{i}" for i in range(roles)]
        panel.set_roles(names)
        for n in range(per_role // len(chunk) + 8):  # past the cap
            for role in names:
                panel.add_output(role, chunk.replace("line ", f"{n:03d} "))
        kept = [panel.output.role_chars[r] for r in names]
        assert max(kept) <= per_role and min(kept) > per_role - len(chunk)
        assert sum(kept) <= max(logs.LOG_TEXT_BUDGET, roles * logs.ROLE_TEXT_MIN)
        panel.show_role(names[-1])
        assert panel.view.toPlainText().splitlines()[-1].startswith(f"{n:03d} 00159")


def test_compute_ops_on_the_cpu_of_a_role_with_a_gpu_are_highlighted(qtbot):
    from PySide6 import QtCore

    from core.views.placement import misplaced
    from gui.run.tabs.placement import HIGHLIGHT, PlacementPanel

    worker_cpu = "/job:worker/replica:0/task:1/device:CPU:0"
    matmul = {"name": "dense/MatMul", "op_type": "MatMul", "device": worker_cpu, "kind": "graph", "count": 1}
    assert misplaced(matmul, "worker:1", role_has_gpu=True)
    assert not misplaced(matmul, "worker:1", role_has_gpu=False)
    assert not misplaced({**matmul, "device": "/job:ps/replica:0/task:0/device:CPU:0"}, "worker:1", role_has_gpu=True)
    assert not misplaced({**matmul, "op_type": "VarHandleOp"}, "worker:1", role_has_gpu=True)
    assert misplaced(
        {**matmul, "device": "/job:localhost/replica:0/task:0/device:CPU:0"}, "worker:1", role_has_gpu=True
    )

    panel = PlacementPanel()
    qtbot.addWidget(panel)
    panel.set_roles(["worker:1"])
    ops = [
        matmul,
        {**matmul, "name": "dense/MatMul_1", "device": worker_cpu.replace("CPU", "GPU")},
        {**matmul, "name": "w", "op_type": "VarHandleOp", "device": "/job:ps/replica:0/task:0/device:CPU:0"},
    ]
    summary = {"ops": ops, "counts_by_device": {worker_cpu: 1, worker_cpu.replace("CPU", "GPU"): 1}, "lines_matched": 3}
    panel.show_summary("worker:1", summary, role_has_gpu=True)
    assert "1 compute ops run on the CPU" in panel.summary_label.text()
    model = panel.model
    highlighted = [
        model.index(r, 0).data()
        for r in range(model.rowCount())
        if model.index(r, 0).data(QtCore.Qt.ItemDataRole.BackgroundRole) == HIGHLIGHT
    ]
    assert highlighted == ["dense/MatMul"]
    panel.filter.setText("GPU")
    assert panel.proxy.rowCount() == 1


@pytest.mark.slow
def test_gpu_panel_shows_each_gpu_with_the_role_on_it(qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Two GPUs through the NVML double; worker:0 gets GPU 0 and worker:1 GPU 1 by CUDA_VISIBLE_DEVICES."""
    from gui.window.main_window import MainWindow

    monkeypatch.setenv("TOWERDECK_NVML_MODULE", FAKE_NVML)
    monkeypatch.setenv("FAKE_NVML_GPUS", "2")
    ports = free_ports(2)
    (tmp_path / "idle.py").write_text("import time\nwhile True:\n    time.sleep(0.1)\n")
    spec, problems = parse_text(
        'strategy = "custom"\ncommand = ["python", "idle.py"]\nstop_grace_s = 2\n[jobs.worker]\n'
        f'tasks = [{{ address = "127.0.0.1:{ports[0]}", gpus = [0] }}, {{ address = "127.0.0.1:{ports[1]}", gpus = [1] }}]\n',
        tmp_path / "c.toml",
    )
    assert spec is not None, problems
    window = MainWindow(spec, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.show()
    window.tabs.setCurrentWidget(window.gpus)
    window.launch()
    gpus = window.gpus
    qtbot.waitUntil(lambda: ("127.0.0.1", 1) in gpus.cards, timeout=30_000)
    qtbot.waitUntil(lambda: "used by: worker:1" in gpus.cards[("127.0.0.1", 1)].users.text(), timeout=30_000)
    assert "used by: worker:0" in gpus.cards[("127.0.0.1", 0)].users.text()
    assert "2 NVIDIA GPUs" in gpus.host_status["127.0.0.1"].text()
    card = gpus.cards[("127.0.0.1", 0)]
    assert card.box.title() == "GPU 0: NVIDIA H100 80GB HBM3"
    assert "utilization" in card.values.text() and "°C" in card.values.text() and " W of " in card.values.text()
    qtbot.waitUntil(lambda: card.curves[0].getData()[0] is not None and len(card.curves[0].getData()[0]) >= 2)
    qtbot.waitUntil(lambda: "0" in set(window.roles.cell(window.roles.shown_roles()[0], "GPUs")), timeout=10_000)
    window.controls.stop_all.trigger()
    qtbot.waitUntil(lambda: window.controller.done, timeout=30_000)
    deadline = time.time() + 5
    while time.time() < deadline and window.session is not None and window.session.server.path.exists():
        qtbot.wait(100)
    assert_nothing_left(ports, marker=str(tmp_path))


def test_a_restarted_worker_draws_a_new_segment_not_a_zigzag(qtbot):
    import math

    from gui.run.tabs.training import TrainingPanel

    panel = TrainingPanel()
    qtbot.addWidget(panel)

    def samples(steps: range, t0: float) -> list[dict[str, object]]:
        return [
            {
                "t": t0 + s,
                "step": s,
                "loss": 1.0 / (1 + s),
                "step_time_s": 0.01,
                "steps_per_sec": None,
                "extra": {},
                "source": "x",
            }
            for s in steps
        ]

    panel.add_samples("worker:0", samples(range(0, 100, 10), 0.0))
    panel.add_samples("worker:0", samples(range(0, 50, 10), 1000.0))  # restarted: the step goes back
    panel.smoothing.setValue(0)
    panel.refresh(force=True)
    x, y = panel.loss_curves["worker:0"][1].getData()
    breaks = [i for i, v in enumerate(y) if math.isnan(v)]
    assert len(breaks) == 1  # one gap between the two attempts
    before, after = list(x[: breaks[0]]), list(x[breaks[0] + 1 :])
    assert before == [float(s) for s in range(0, 100, 10)] and after == [float(s) for s in range(0, 50, 10)]
    panel.smoothing.setValue(90)
    panel.refresh(force=True)
    _x, smooth = panel.loss_curves["worker:0"][1].getData()
    assert smooth[breaks[0] + 1] == y[breaks[0] + 1]  # the EMA starts afresh after the gap
    # The run's rates come with the roles' status (core.views.rates), one text for every view.
    assert panel.rate_label.text() == "no steps yet"
    panel.set_status((), rates=StepRates(global_steps_per_s=12.5))
    panel.refresh(force=True)
    assert panel.rate_label.text() == "12.5 global steps/s (mean over the last 30 s)"


def test_gpu_card_names_the_tensorflow_devices_on_it_by_pci_bus_id(qtbot):
    """NVML says 00000000:1A:00.0, TensorFlow's 'Created device' line says 0000:1a:00.0."""
    from core.telemetry.pci import normalize_bus_id
    from gui.run.tabs.gpus import GpuPanel

    assert normalize_bus_id("00000000:1A:00.0") == normalize_bus_id("0000:1a:00.0") == "0000:1a:00.0"
    assert normalize_bus_id(None) is None
    panel = GpuPanel()
    qtbot.addWidget(panel)
    gpu = {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "pci_bus_id": "00000000:1A:00.0",
        "utilization_gpu_percent": 87,
        "memory_used_bytes": 40 << 30,
        "memory_total_bytes": 80 << 30,
        "temperature_c": 61,
        "power_w": 512.0,
        "power_limit_w": 700.0,
        "processes": [{"pid": 4242, "used_memory_bytes": 39 << 30, "role": "worker:0"}, {"pid": 7, "role": None}],
    }
    panel.add_sample({"host": "node1", "t": 100.0, "figures": {"cpu_percent": 10.0}, "roles": {}, "gpus": [gpu]})
    panel.set_tf_devices({"0000:1a:00.0": ["worker:0 /job:worker/replica:0/task:0/device:GPU:0"]})
    for _frame in range(4):  # a frame makes one card (the host's first, then GPU 0)
        panel.refresh()
    card = panel.cards[("node1", 0)]
    assert "utilization 87 %" in card.values.text() and "61 °C" in card.values.text()
    assert "power 512 W of 700 W" in card.values.text() and "40.0 GiB of 80.0 GiB" in card.values.text()
    users = card.users.text()
    assert "worker:0 39.0 GiB" in users and "pid 7 (not a role of this run)" in users
    assert "TensorFlow devices: worker:0 /job:worker/replica:0/task:0/device:GPU:0" in users


def test_tensorboard_scalars_plot_any_tag_and_stand_in_for_a_missing_loss(qtbot):
    from gui.run.tabs.training import TrainingPanel

    panel = TrainingPanel()
    qtbot.addWidget(panel)
    panel.smoothing.setValue(0)
    points = [{"tag": "loss", "step": s, "wall_time": 100.0 + s, "value": 2.0 / s} for s in range(1, 6)]
    points += [{"tag": "learning_rate", "step": s, "wall_time": 100.0 + s, "value": 0.1 * s} for s in range(1, 6)]
    panel.add_scalars("worker:0", points)
    panel.refresh(force=True)
    # No loss in its output: the TensorBoard loss is drawn, and said to be one.
    series, what = panel.shown_series("worker:0")
    assert what == "loss (tb)" and series is not None
    x, y = panel.loss_curves["worker:0"][1].getData()
    assert list(x) == [1.0, 2.0, 3.0, 4.0, 5.0] and y[0] == 2.0
    tags = [panel.plot_choice.itemText(i) for i in range(panel.plot_choice.count())]
    assert tags == ["loss", "tb: loss", "tb: learning_rate"]
    panel.plot_choice.setCurrentText("tb: learning_rate")
    panel.refresh(force=True)
    x, y = panel.loss_curves["worker:0"][1].getData()
    assert [round(v, 3) for v in y] == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert panel.loss_plot.getPlotItem().titleLabel.text == "tb: learning_rate by step"
