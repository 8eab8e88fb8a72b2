"""The tabs' models are their own, without Qt: the Training and GPUs tabs' figures, the output the
Logs tab keeps, the Placement tab's table, fed and read in a process that never imports PySide6 or
pyqtgraph, through a narrow interface (add, read, and for the figures a version the tab compares
once a frame). The tabs draw them (tests/gui)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

from core.run.status import RoleState, RoleStatus
from core.views.gpu_figures import GpuFigures
from core.views.training import LOSS, MAX_TAGS, TrainingFigures
from tests.helpers.project import ROOT


def _metrics(steps: range, loss: float = 1.0) -> list[dict[str, Any]]:
    return [
        {"t": 0.1 * s, "step": s, "loss": loss, "step_time_s": 0.1, "steps_per_sec": 10.0, "extra": {}, "source": "x"}
        for s in steps
    ]


def _role(name: str, *, straggler: bool) -> RoleStatus:
    job, _, index = name.partition(":")
    return RoleStatus(
        role=name, job=job, index=int(index), host="127.0.0.1", address="127.0.0.1:1", state=RoleState.RUNNING,
        state_since=0.0, pid=1, attempt=1, restarts=0, returncode=None, signal=None, started_at=0.0,
        ended_at=None, detail="", log_path=None, straggler=straggler,
    )  # fmt: skip


def test_the_tabs_models_are_fed_and_read_in_a_process_without_qt() -> None:
    """On the old code the training figures were a mixin of the tab's widget (a TensorBoard tag
    went straight into its combo box), and the GPUs', Logs' and Placement tabs' models lived in
    their widgets: none could be fed without Qt."""
    script = textwrap.dedent(
        r"""
        import sys
        from core.views.gpu_figures import GpuFigures
        from core.views.logs import ROLE_TEXT_MIN, RoleOutput
        from core.views.placement import PlacementTable
        from core.views.training import TrainingFigures

        training = TrainingFigures()
        record = {"t": 1.0, "step": 1, "loss": 0.5, "step_time_s": 0.1, "steps_per_sec": 10.0, "extra": {},
                  "source": "x"}
        training.add_samples("worker:0", [record])
        training.add_scalars("worker:1", [{"tag": "accuracy", "step": 1, "wall_time": 1.0, "value": 0.9}])
        series, what = training.shown_series("worker:1", "tb: accuracy")
        assert what == "accuracy" and series is not None and series.points()[0] == [1.0], series
        assert training.plot_choices() == ["loss", "tb: accuracy"], training.plot_choices()
        gpus = GpuFigures()
        gpus.add_samples([{"host": "a", "t": 1.0, "gpus": [{"index": 0, "utilization_gpu_percent": 50}]}])
        assert gpus.gpu_count == 1 and gpus.card_text(("a", 0))[1].startswith("utilization 50 %")
        output = RoleOutput()
        output.set_role_count(65)
        for i in range(3000):
            output.add("worker:0", f"Step: {i}\n" + "x" * 40 + "\r 50%\r100%\n")
        assert ROLE_TEXT_MIN - 64 < output.role_chars["worker:0"] <= ROLE_TEXT_MIN
        assert output.last_lines("worker:0", 2) == ["Step: 2999", "100%"], output.last_lines("worker:0", 2)
        matmul = {"name": "MatMul", "op_type": "MatMul", "device": "/job:worker/task:1/device:CPU:0", "count": 2}
        table = PlacementTable.of("worker:1", {"ops": [matmul], "lines_matched": 1}, role_has_gpu=True)
        assert table.rows == [("MatMul", "MatMul", matmul["device"], "", 2, True)] and "1 compute ops" in table.text
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("PySide6", "pyqtgraph", "shiboken6"))
        assert not loaded, loaded
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_the_version_moves_only_on_what_a_drawing_could_show() -> None:
    figures = TrainingFigures()
    seen = figures.version
    figures.add_samples("worker:0", [{"not": "a metrics record"}])
    figures.add_samples("worker:0", [{**_metrics(range(1))[0], "step": None}])  # a figure, but no step to plot
    assert figures.version == seen and figures.workers == []
    figures.add_samples("worker:0", _metrics(range(3)))
    assert figures.version > seen and figures.workers == ["worker:0"]
    seen = figures.version
    figures.apply_status([_role("worker:0", straggler=False)])
    assert figures.version > seen  # the run's trainers known: the spread's key counts them
    seen = figures.version
    figures.apply_status([_role("worker:0", straggler=False)])
    assert figures.version == seen  # no straggler before, none now, the same trainers
    figures.apply_status([_role("worker:0", straggler=True)])
    assert figures.version > seen and figures.stragglers == {"worker:0"}
    assert "straggler: worker:0" in figures.rate_text()
    figures.clear()
    assert figures.workers == [] and figures.plot_choices() == [LOSS] and not figures.stragglers


def test_plot_choices_are_the_loss_then_the_tags_as_they_came_at_most_max_tags() -> None:
    figures = TrainingFigures()
    tags = [f"tag{i}" for i in range(MAX_TAGS + 5)]
    figures.add_scalars("worker:2", [{"tag": t, "step": 1, "value": 1.0} for t in tags])
    figures.add_scalars("worker:10", [{"tag": "tag0", "step": 1, "value": float("nan")}])  # no point: no series
    choices = figures.plot_choices()
    assert choices == [LOSS, *(f"tb: {t}" for t in tags[:MAX_TAGS])]
    assert figures.workers == ["worker:2"] and figures.plotted_roles() == ["worker:2"]
    # A worker with its own loss shows it; without one, TensorBoard's loss tag stands in.
    figures.add_samples("worker:10", _metrics(range(2), loss=3.0))
    figures.add_scalars("worker:2", [{"tag": "loss", "step": 1, "value": 2.0}])  # past MAX_TAGS: not kept
    assert figures.shown_series("worker:10", LOSS)[1] == LOSS
    assert figures.shown_series("worker:2", LOSS) == (None, LOSS)
    assert figures.plotted_roles() == ["worker:2", "worker:10"]


def test_the_gpu_figures_pick_the_card_to_show_past_grid_from_gpus() -> None:
    figures = GpuFigures()
    figures.grid_from = 2
    sample = {"host": "h", "t": 1.0, "gpus": [{"index": i, "utilization_gpu_percent": 10 * i} for i in (2, 0, 1)]}
    figures.add_samples([sample])
    assert figures.grid_mode and figures.focus == ("h", 0)  # the lowest GPU until one is picked
    assert figures.pending(made=()) == [("h", 0), ("h", -1)]  # the focused card first, then the host's
    seen = figures.version
    figures.select(("h", 2))
    assert figures.version > seen and figures.pending(made={("h", -1)}) == [("h", 2)]
    assert figures.card_text(("h", 2))[0] == "GPU 2: unknown" and figures.card_text(("h", -1))[0] == "CPU and memory"
    figures.set_tf_devices({"0000:1a:00.0": ["worker:0 /device:GPU:0"]})
    assert figures.card_text(("h", 1))[2] == "used by: no process"  # no bus id on that GPU
    figures.clear()
    assert figures.hosts == [] and figures.gpu_count == 0 and len(figures.board) == 0
