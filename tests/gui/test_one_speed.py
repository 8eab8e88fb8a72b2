"""One run, one number per figure wherever it is read (core.views.rates): its global steps/s, each
worker's own batches/s and its examples/s, in the CLI's lines, ``runs`` (table and JSON), ``runs
compare`` (text and CSV), and in the window: the overview's legend (the run's header) and tiles, the
roles table, the Training tab, the Runs page, the compare table and its plot.

Before: one between-graph run read 106 steps/s on the Runs page, "worker:0 steps/s 104" in ``runs
compare``, 34, 36 and 32/s on the tiles, about 35 a worker on the compare plot, "cluster 101.9
steps/s" in the header and "batches/s" in the CLI: each place its own figure."""

from __future__ import annotations

import csv
import json
import os
import re
import sys
from pathlib import Path

import pytest

from core.views.rates import BATCHES, EXAMPLES, GLOBAL, label, rate_text
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import TRAINERS, run_cli

pytestmark = pytest.mark.slow

# Two workers that count their own steps (custom), 10 and 5 a second for 35 s, batches of 32.
CLUSTER = """name = "speed"
strategy = "custom"
workdir = "{trainers}"
command = ["{python}", "-u", "light_trainer.py", "--batch_size=32", "--test_marker={marker}"]
stop_grace_s = 3

[jobs.ps]
tasks = ["127.0.0.1:{ports[0]}"]

[jobs.worker]
tasks = [
  {{ address = "127.0.0.1:{ports[1]}", command = ["{python}", "-u", "light_trainer.py", "--steps=350", "--rate_hz=10",
     "--batch_size=32", "--test_marker={marker}"] }},
  {{ address = "127.0.0.1:{ports[2]}", command = ["{python}", "-u", "light_trainer.py", "--steps=175", "--rate_hz=5",
     "--batch_size=32", "--test_marker={marker}"] }},
]
restart = "Never"
"""
WORKERS = ("worker:0", "worker:1")


def figure(text: str, name: str) -> str:
    """The number said before ``name`` in ``text`` (``15.0 global steps/s`` -> ``15.0``)."""
    match = re.search(r"([-\d.]+) " + re.escape(name), text)
    assert match, f"no {name!r} in {text!r}"
    return match.group(1)


def cell(window, role: str, column: str) -> str:  # type: ignore[no-untyped-def]
    """The roles table's cell, '' while the role has no row yet."""
    try:
        return str(window.roles.cell(role, column))
    except KeyError:
        return ""


@pytest.mark.timeout(420)
def test_one_run_gives_one_number_per_figure_everywhere(qtbot, tmp_path: Path) -> None:
    from gui.run.roles import BATCHES_COLUMN
    from gui.runs.compare import SPEED_PLOT, CompareView
    from gui.runs.runs_page import HEADERS
    from gui.window.main_window import MainWindow

    ports = free_ports(3)
    marker = tmp_path.name
    path = tmp_path / "speed.toml"
    path.write_text(CLUSTER.format(trainers=TRAINERS, python=sys.executable, ports=ports, marker=marker))
    launched = run_cli("launch", str(path), "--progress-every", "1")
    assert launched.returncode == 0, launched.stdout[-3000:] + launched.stderr[-2000:]
    assert_nothing_left(ports, f"--test_marker={marker}")
    root = Path(os.environ["TOWERDECK_DATA_DIR"]) / "runs"
    [run] = list(root.iterdir())

    # The CLI: the launch's last word on the run, and its progress lines while it ran.
    [summary] = [line for line in launched.stdout.splitlines() if "speed at the end:" in line]
    expected = {GLOBAL: figure(summary, GLOBAL), EXAMPLES: figure(summary, EXAMPLES)}
    for role in WORKERS:
        [line] = [line for line in launched.stdout.splitlines() if line.startswith(f"  {role} ")]
        expected[role] = figure(line, BATCHES)
    # What the trainers were asked for: 10 + 5 steps a second of their own, 32 examples each.
    assert 11.0 < float(expected[GLOBAL]) < 16.0
    assert 7.0 < float(expected["worker:0"]) < 10.6 and 3.5 < float(expected["worker:1"]) < 5.3
    assert float(expected[EXAMPLES]) == pytest.approx(32 * float(expected[GLOBAL]), rel=0.01)
    assert "mean over the last 30 s" in summary
    progress = [line for line in launched.stdout.splitlines() if "cluster " in line and GLOBAL in line]
    assert progress and all("(mean over the last 30 s)" in line for line in progress)
    assert not any("steps/s over" in line or "batches/s over" in line for line in launched.stdout.splitlines())

    # runs: the table's column and --json.
    listed = run_cli("runs")
    assert listed.returncode == 0 and "GLOBAL STEPS/S (30 s)" in listed.stdout
    [row] = [line for line in listed.stdout.splitlines() if line.startswith(run.name[:20])]
    assert f" {expected[GLOBAL]} " in f"{row} "
    as_json = json.loads(run_cli("runs", "--json").stdout.splitlines()[0])
    assert rate_text(as_json["rates"]["global_steps_per_s"]) == expected[GLOBAL]
    assert rate_text(as_json["rates"]["examples_per_s"]) == expected[EXAMPLES]
    assert {r: rate_text(v) for r, v in as_json["rates"]["batches_per_s"].items()} == {r: expected[r] for r in WORKERS}

    # runs compare (the run beside itself): the text and the CSV.
    out_csv = tmp_path / "compare.csv"
    compared = run_cli("runs", "compare", run.name, run.name, "--csv", str(out_csv))
    assert compared.returncode == 0, compared.stderr
    wanted_rows = {
        label(GLOBAL): expected[GLOBAL],
        label(EXAMPLES): expected[EXAMPLES],
        **{f"{r} {label(BATCHES)}": expected[r] for r in WORKERS},
    }
    text_rows = {line[2:].split("  ")[0].strip(): line for line in compared.stdout.splitlines()}
    for name, value in wanted_rows.items():
        assert text_rows[name].split()[-2:] == [value, value], text_rows[name]
    with open(out_csv, newline="") as f:
        csv_rows = {r[0]: r[2:] for r in csv.reader(f)}
    assert {name: csv_rows[name] for name in wanted_rows} == {n: [v, v] for n, v in wanted_rows.items()}

    # The window, on the same run read back.
    window = MainWindow(None, runs_root=root)
    qtbot.addWidget(window)
    window.resize(1600, 1000)
    window.show()
    assert window.open_run(run)
    overview = window.overview
    qtbot.waitUntil(lambda: GLOBAL in overview.legend_text() and "succeeded" in overview.legend_text(), timeout=30_000)
    # A cell without its figure yet says "-" (and why, on hover): wait for the figures.
    qtbot.waitUntil(lambda: all(cell(window, r, BATCHES_COLUMN) not in ("", "-") for r in WORKERS), timeout=10_000)
    legend = overview.legend_text()
    assert figure(legend, GLOBAL) == expected[GLOBAL] and figure(legend, EXAMPLES) == expected[EXAMPLES]
    assert "(mean over the last 30 s)" in legend
    for role in WORKERS:
        assert cell(window, role, BATCHES_COLUMN) == expected[role]
    # A tile says "10.0 batches/s" where it fits, else "10.0/s": painted at the next frame.
    qtbot.waitUntil(lambda: all("/s" in overview.painted_text.get(r, "") for r in WORKERS), timeout=10_000)
    for role in WORKERS:
        said = overview.painted_text[role]
        assert f"{expected[role]} {BATCHES}" in said or f"{expected[role]}/s" in said, said
    window.tabs.setCurrentWidget(window.training)
    qtbot.waitUntil(lambda: GLOBAL in window.training.rate_label.text(), timeout=10_000)
    training = window.training.rate_label.text()
    assert figure(training, GLOBAL) == expected[GLOBAL] and figure(training, EXAMPLES) == expected[EXAMPLES]

    page = window.runs_page
    with qtbot.waitSignal(page.sig_loaded, timeout=30_000):
        window.pages.setCurrentWidget(page)
    cells = {
        page.proxy.index(r, HEADERS.index("Run")).data(): page.proxy.index(r, HEADERS.index(label(GLOBAL))).data()
        for r in range(page.proxy.rowCount())
    }
    assert cells == {run.name: expected[GLOBAL]}

    view = CompareView([run, run])
    qtbot.addWidget(view)
    view.show()
    qtbot.waitUntil(lambda: bool(view.rows or view.error), timeout=60_000)
    assert not view.error
    shown = {r.label: list(r.values) for r in view.rows}
    assert {name: shown[name] for name in wanted_rows} == {n: [v, v] for n, v in wanted_rows.items()}
    assert view.drawn[SPEED_PLOT] == [(run.name, "global"), (run.name, "global")]
    last = view.speeds[0][-1].rates
    assert rate_text(last.global_steps_per_s) == expected[GLOBAL]
    assert rate_text(last.examples_per_s) == expected[EXAMPLES]
    assert {r: rate_text(last.of(r)) for r in WORKERS} == {r: expected[r] for r in WORKERS}
    view.close()
    window.close()
