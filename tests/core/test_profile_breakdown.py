"""A capture's one breakdown (core/profiling/breakdown.py): computed by xprof from a recorded
capture of a worker slowed in its tf.data pipeline, with tf.data's time counted as input in a plain
*profile* too, kept in the capture's profile.json and read back, xprof's advice shown as xprof's
only where the breakdown agrees, op times labelled for what they are, and each capture saying why
and how it was taken. No TensorFlow: the recorded files (tests/helpers/captures.py) and xprof in
the profiler environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.profiling.breakdown import capture_breakdown
from core.profiling.capture import Target, capture
from core.profiling.files import read_record
from core.profiling.summary import OTHER_PART, RoleProfile, role_notes, xprof_advice
from tests.helpers.captures import recorded_capture
from tests.helpers.project import run_cli
from tests.helpers.tmpfs import make_read_only, mounted_tmpfs

POTENTIALLY = (
    "Your program is POTENTIALLY input-bound because 98.8% of the total step time sampled is spent on "
    "'All Others' time (which could be due to I/O or Python execution or both)."
)


def table(stdout: str) -> dict[str, list[str]]:
    """The CLI's side-by-side table: a row's label -> its cells, one per role."""
    rows: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        label, cells = line[:40].strip(), line[40:].split("<-")[0].split()
        if label and cells and not label.endswith(":"):
            rows[label] = cells
    return rows


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    """A plain *profile* of both workers (no verdict), as the CLI takes it."""
    return recorded_capture(
        tmp_path / "run" / "profiles" / "20261127-200405", ("worker:0", "worker:1"), purpose="profile"
    )


def test_a_plain_profile_counts_the_tf_data_wait_as_input_and_says_op_times_are_summed(plain: Path) -> None:
    result = run_cli("profile-summary", str(plain), timeout=180)
    assert result.returncode == 0 and result.stderr == "", result.stdout + result.stderr
    rows = table(result.stdout)
    assert rows["steps captured"] == ["24", "5"]
    # Was "input 0.00 / other 51.42" for the worker slowed by 50 ms a batch in tf.data.
    assert float(rows["input"][1]) > 50.0 and float(rows[OTHER_PART][1]) < 1.0, result.stdout
    assert float(rows["input"][0]) < 1.0  # the healthy worker waits little for its input
    # Dataset's self time per step is larger than worker:1's whole step: said so by the heading.
    assert float(rows["Dataset"][1]) > float(rows["step time, mean (ms)"][1])
    assert "top op types by self time (ms/step, summed over threads: can exceed the step):" in result.stdout


def test_xprofs_advice_is_shown_as_xprofs_and_only_where_the_breakdown_agrees(plain: Path) -> None:
    result = run_cli("profile-summary", str(plain), timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    # The adjustment is said where the figures are: xprof's own page counts no input for either.
    assert (
        "input of worker:0, worker:1: the time of tf.data's ops (Dataset, IteratorGetNext...), which xprof's step "
        "table counts as other on a CPU-only host"
    ) in lines
    notes = [line for line in lines if line.startswith(("worker:0: ", "worker:1: "))]
    # xprof calls both workers "POTENTIALLY input-bound"; the healthy one spends 4% of a step in input.
    assert notes == [
        "worker:0: 95% of a step is other: Python, I/O, waiting (17.06 ms)",
        "worker:1: 99% of a step is input (51.42 ms)",
        "worker:1: xprof says: Your program is POTENTIALLY input-bound because 99.1% of the total step time sampled "
        "is spent on 'All Others' time (which could be due to I/O or Python execution or both).",
    ]


@pytest.mark.parametrize(
    ("statement", "input_ms", "shown"),
    [
        (POTENTIALLY, 0.0, False),  # xprof's view of every CPU-only worker
        (POTENTIALLY, 9.0, False),  # 9%: below the 20% at which a step is input-bound
        (POTENTIALLY, 40.0, True),
        ("Your program is HIGHLY input-bound because 60.0% of the total step time ...", 60.0, True),
        ("Your program is NOT input-bound because only 0.0% of the total step time ...", 0.0, True),
        ("Your program is NOT input-bound because only 0.0% of the total step time ...", 60.0, False),
        ("The device is mostly idle.", 0.0, False),  # not about input: nothing to check it against
        ("", 0.0, False),
    ],
)
def test_xprofs_advice_agrees_with_the_breakdown_or_is_not_shown(statement: str, input_ms: float, shown: bool) -> None:
    profile = RoleProfile(
        "worker:0", (100.0,) * 4, {"input": input_ms, OTHER_PART: 100.0 - input_ms}, bottleneck=statement
    )
    assert (xprof_advice(profile) == statement) is shown and (xprof_advice(profile) is None) is not shown
    said = [line for line in role_notes(profile) if "xprof says: " in line]
    assert said == ([f"worker:0: xprof says: {statement}"] if shown else [])


def test_the_breakdown_is_kept_with_the_capture_and_read_back_as_it_was(plain: Path) -> None:
    computed = capture_breakdown(plain)
    assert computed.problem is None and [p.role for p in computed.profiles] == ["worker:0", "worker:1"]
    record = read_record(plain)
    assert record.breakdown == computed.profiles  # every figure, as computed
    assert record.breakdown[1].input_from_ops_ms == pytest.approx(record.breakdown[1].breakdown_ms["input"])
    # Read back, not computed again: xprof is not asked (its files are gone; the stored figures stay).
    for xplane in record.xplanes.values():
        xplane.unlink()
    assert capture_breakdown(plain).profiles == computed.profiles


def test_a_damaged_or_foreign_stored_breakdown_is_computed_again(plain: Path) -> None:
    computed = capture_breakdown(plain).profiles
    record_file = plain / "profile.json"
    for damage in ({"version": 1, "roles": [{"role": "worker:0"}]}, {"version": 0, "roles": []}, "half"):
        data = json.loads(record_file.read_text())
        data["breakdown"] = damage
        record_file.write_text(json.dumps(data))
        assert read_record(plain).breakdown is None
        assert capture_breakdown(plain).profiles == computed
        assert read_record(plain).breakdown == computed  # and kept again


def test_a_capture_that_cannot_keep_its_breakdown_still_shows_it_and_says_why(tmp_path: Path) -> None:
    with mounted_tmpfs(tmp_path / "run", size="4m") as run:
        folder = recorded_capture(run / "profiles" / "20261127-200405", ("worker:0", "worker:1"))
        make_read_only(run)
        found = capture_breakdown(folder)
        assert float(f"{found.profiles[1].breakdown_ms['input']:.2f}") > 50.0
        assert found.problem == (
            f"the breakdown was not kept with the capture: cannot write {folder / 'profile.json'}: the file system is "
            "read-only (Read-only file system); make it writable, then try again"
        )
        result = run_cli("profile-summary", str(folder), timeout=180)
        assert result.returncode == 0 and "Traceback" not in result.stderr
        assert result.stderr.strip() == f"profile-summary: {found.problem}"


def test_a_capture_keeps_why_and_from_where_it_was_taken(tmp_path: Path) -> None:
    # Refused before anything is traced (no launcher to ask): the record is still written.
    target = Target("worker:3", "worker", 3, "gpu-node-7.example", 2222, 4242, "running", by_agent=True)
    result = capture(tmp_path, [target], seconds=1.5, purpose="why", origin="window")
    record = read_record(result.path)
    assert (record.purpose, record.origin, record.seconds, record.asked) == ("why", "window", 1.5, ("worker:3",))
    assert record.describe() == "why, from the window, 1.5 s"


def test_profile_summary_names_the_capture_by_why_and_how(plain: Path) -> None:
    result = run_cli("profile-summary", str(plain), timeout=180)
    assert result.stdout.splitlines()[0] == f"profile {plain} (profile, from the CLI, 0.5 s): worker:0, worker:1"
