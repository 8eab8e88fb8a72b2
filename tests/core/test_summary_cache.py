"""The runs list's summary cache (summary.json) when it is damaged, and runs copied or renamed.

One real finished run (light trainers, no TensorFlow) is the template; each case copies it and
damages the copy's summary.json while keeping its key (run.json's mtime and size), so the cache
still claims to describe the run. ``runs`` and ``runs --json`` must list every run, the damaged
one with the figures its files give, and never print a traceback.
"""

from __future__ import annotations

import io
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.cli.main import main as cli_main
from core.run import index as runs_index
from core.views.rates import summary_rates
from tests.helpers.ports import free_ports
from tests.helpers.project import run_cli

TRAINERS = Path(__file__).resolve().parent.parent.parent / "resources" / "trainers"
CLUSTER = """
name = "cached"
workdir = "{trainers}"
command = ["python", "-u", "light_trainer.py", "--steps=20", "--rate_hz=50"]
[jobs.ps]
tasks = ["127.0.0.1:{ps}"]
[jobs.worker]
tasks = ["127.0.0.1:{worker}"]
"""


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real finished run, its summary cached by the launch."""
    base = tmp_path_factory.mktemp("template")
    ps, worker = free_ports(2)
    cluster = base / "cached.toml"
    cluster.write_text(CLUSTER.format(trainers=TRAINERS, ps=ps, worker=worker))
    run = base / "run"
    result = run_cli("launch", str(cluster), "--run-dir", str(run), "--progress-every", "0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (run / runs_index.SUMMARY_FILE).is_file()
    return run


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli_main(list(args), out, err)
    return code, out.getvalue(), err.getvalue()


def copy_run(template: Path, target: Path) -> Path:
    shutil.copytree(template, target, ignore=shutil.ignore_patterns("*.sock", "*.pid", "controller.lock"))
    return target


DELETE = object()  # a change that removes the field


def damage(run: Path, change: dict[str, Any] | Any) -> Any:
    """Write ``change`` over the run's summary.json and return what was written: a dict is merged
    into the cached summary (``role:NAME`` into worker:0's figures) with its key kept current, so
    the cache still matches run.json; anything else replaces the whole file."""
    path = run / runs_index.SUMMARY_FILE
    if not isinstance(change, dict):
        path.write_text(json.dumps(change))
        return change
    data = json.loads(path.read_text())
    stat = (run / "run.json").stat()
    data["key"] = [stat.st_mtime_ns, stat.st_size]
    for name, value in sorted(change.items(), key=lambda item: not item[0].startswith("role:")):
        target, field = (data["role_figures"]["worker:0"], name[5:]) if name.startswith("role:") else (data, name)
        if value is DELETE:
            target.pop(field, None)
        else:
            target[field] = value
    path.write_text(json.dumps(data))
    return data


def listing(root: Path) -> tuple[str, list[dict[str, Any]]]:
    code, table, err = cli("runs", "--root", str(root))
    assert code == 0 and "Traceback" not in table + err and not err, err
    code, out, err = cli("runs", "--json", "--root", str(root))
    assert code == 0 and not err, err
    return table, [json.loads(line) for line in out.splitlines()]


def same_figures(row: dict[str, Any], truth: dict[str, Any]) -> None:
    for name in ("name", "outcome", "roles", "backend", "last_loss", "best_loss", "restarts", "role_figures"):
        assert row[name] == truth[name], name
    assert row["strategy"] == truth["strategy"]
    assert row["rates"]["global_steps_per_s"] == pytest.approx(truth_rates(truth))


def truth_rates(truth: dict[str, Any]) -> float | None:
    """The global steps/s the truth's summary gives (core.views.rates)."""
    summary = runs_index.summarize(Path(truth["path"]), use_cache=False)
    assert summary is not None
    return summary_rates(summary).global_steps_per_s


def truth_of(template: Path) -> dict[str, Any]:
    summary = runs_index.summarize(template, use_cache=False)
    assert summary is not None and summary.outcome == "succeeded"
    return summary.to_json()


def test_damaged_summaries_are_rebuilt_and_every_run_listed(template: Path, tmp_path: Path) -> None:
    """Before: each of these printed a traceback from `runs` and `runs --json`, and listed nothing."""
    truth = truth_of(template)
    root = tmp_path / "runs"
    copy_run(template, root / "intact")
    cases = {
        "restarts": {"restarts": "abc"},
        "roles": {"roles": 5},
        "unknown-figure": {"role:gpu_hours": 3},
        "loss": {"last_loss": "x"},
    }
    for name, change in cases.items():
        damage(copy_run(template, root / name), change)
    table, rows = listing(root)
    assert sorted(r["id"] for r in rows) == sorted(["intact", *cases])
    for row in rows:
        same_figures(row, truth)
        assert row["recorded_id"] == "run"  # each is a copy of the template's folder "run"
    for name in cases:
        assert f"\n{name} " in table
        # Rebuilt from the run's files and cached again, now whole.
        data = json.loads((root / name / runs_index.SUMMARY_FILE).read_text())
        assert runs_index.summary_problem(data) is None
    # Through the real command line too: no traceback, every run.
    result = run_cli("runs", "--root", str(root))
    assert result.returncode == 0 and "Traceback" not in result.stderr and "5 runs in" in result.stdout


def test_copied_and_renamed_runs_are_labelled_by_their_folder(template: Path, tmp_path: Path) -> None:
    """Before: every copy was listed (and compared) under run.json's id, "run", so they looked alike."""
    root = tmp_path / "runs"
    copy_run(template, root / "first-copy")
    copy_run(template, root / "second-copy")
    table, rows = listing(root)
    assert sorted(r["id"] for r in rows) == ["first-copy", "second-copy"]
    assert {r["recorded_id"] for r in rows} == {"run"}
    assert "\nfirst-copy " in table and "\nsecond-copy " in table
    # What is listed is what the commands take: a folder name, or the start of one.
    code, out, err = cli("runs", "compare", "first", "second", "--root", str(root))
    assert code == 0, err
    run_row = next(line for line in out.splitlines() if line[2:].startswith("run "))
    assert "first-copy" in run_row and "second-copy" in run_row
    # A folder whose name is run.json's id has no recorded id of its own.
    same = runs_index.summarize(copy_run(template, tmp_path / "run"))
    assert same is not None and same.id == "run" and same.recorded_id == ""


# ---------------------------------------------------------------------------- properties

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()  # NaN and the infinities too: Python's json reads them back
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
# summary.json as the launch writes it (core.run.index.build).
TOP_FIELDS = [
    "version", "id", "name", "cluster_file", "created", "ended", "state", "result", "reason", "first_failure",
    "roles", "backend", "last_loss", "best_loss", "restarts", "role_figures", "strategy", "hyperparams",
]  # fmt: skip
ROLE_FIELDS = ["state", "exit", "restarts", "last_loss", "best_loss", "steps", "window", "batch_size"]
CHANGES = st.dictionaries(
    st.sampled_from([*TOP_FIELDS, *(f"role:{f}" for f in ROLE_FIELDS), "extra", "role:extra"]),
    JSON_VALUES | st.just(DELETE),
    min_size=1,
    max_size=4,
).map(lambda change: {k: v for k, v in change.items() if k != "key"})  # a stale key is simply not used
DAMAGE = CHANGES | JSON_VALUES  # a changed field or several, or a file that is not a summary at all


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(change=DAMAGE)
def test_property_no_damaged_summary_breaks_the_list(template: Path, tmp_path_factory, change) -> None:  # type: ignore[no-untyped-def]
    truth = truth_of(template)
    root = tmp_path_factory.mktemp("runs")
    copy_run(template, root / "intact")
    damaged = copy_run(template, root / "damaged")
    written = damage(damaged, change)
    _table, rows = listing(root)
    assert sorted(r["id"] for r in rows) == ["damaged", "intact"]
    for row in rows:
        # Whatever the cache said, a damaged field never reaches the list: the figures are the run's.
        assert isinstance(row["restarts"], int) and all(isinstance(r, str) for r in row["roles"])
        for name in ("last_loss", "best_loss"):
            assert row[name] is None or (isinstance(row[name], float) and math.isfinite(row[name]))
        rate = row["rates"]["global_steps_per_s"]
        assert rate is None or (isinstance(rate, float) and math.isfinite(rate))
        if row["id"] == "intact" or runs_index.summary_problem(written) is not None:
            same_figures(row, truth)  # a damaged cache is rebuilt from the run's files
    shutil.rmtree(root)
