"""A run's checkpoints: where they are (the [recovery] key, a role's --checkpoint_dir-style flag, a
state file that appeared under the workdir or the run directory), what the controller's book
publishes as they come and go, which one a restart at a given time restores, and the one warning
when recovery is on and training goes on without any."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from core.cluster.spec import ClusterSpec, parse_text
from core.controller import checkpoints as watch
from core.controller.checkpoints import CheckpointBook, CheckpointPoller, CheckpointReport, recovery_on
from core.run.checkpoints import CheckpointSource, declared_source, run_checkpoints, search_state_file, searched_source
from core.run.events import CheckpointsChanged, Event, WarningMessage
from core.run.publish import Publisher
from core.telemetry.checkpoints import Checkpoint, CheckpointListing

CLUSTER = """
strategy = "{strategy}"
workdir = "{workdir}"
command = ["python", "train.py"{flags}]
[jobs.ps]
tasks = ["127.0.0.1:2221"]
[jobs.worker]
tasks = ["127.0.0.1:2222", {{ address = "127.0.0.1:2223", command = ["python", "other.py", "--model_dir", "m1"] }}]
{extra}
"""


def spec_of(tmp_path: Path, *, flags: str = "", extra: str = "", strategy: str = "between_graph") -> ClusterSpec:
    text = CLUSTER.format(strategy=strategy, workdir=tmp_path / "work", flags=flags, extra=extra)
    spec, problems = parse_text(text, tmp_path / "c.toml")
    assert spec is not None, problems
    return spec


def test_the_recovery_key_comes_first_relative_to_the_workdir_with_the_run_directory_filled_in(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, flags=', "--checkpoint_dir=/abs/ckpt"', extra='[recovery]\ncheckpoint_dir = "ckpt"')
    assert declared_source(spec, tmp_path / "run") == CheckpointSource(
        tmp_path / "work" / "ckpt", "[recovery] checkpoint_dir"
    )
    spec = spec_of(tmp_path, extra='[recovery]\ncheckpoint_dir = "{run_dir}/saves"')
    assert declared_source(spec, tmp_path / "run") == CheckpointSource(
        tmp_path / "run" / "saves", "[recovery] checkpoint_dir"
    )


def test_the_chiefs_flag_is_taken_before_another_roles_in_either_form(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, flags=', "--checkpoint_dir={run_dir}/ckpt"')
    assert declared_source(spec, tmp_path / "run") == CheckpointSource(
        tmp_path / "run" / "ckpt", "worker:0's --checkpoint_dir"
    )
    # The chief (worker:0) says nothing: worker:1's own command does, relative to the workdir.
    spec = spec_of(tmp_path)
    assert declared_source(spec, tmp_path / "run") == CheckpointSource(
        tmp_path / "work" / "m1", "worker:1's --model_dir"
    )
    spec = spec_of(tmp_path, flags=', "--backup-dir", "~/bk"')
    assert declared_source(spec, None) == CheckpointSource(Path(os.path.expanduser("~/bk")), "worker:0's --backup-dir")


def test_a_state_file_is_found_under_the_workdir_or_the_run_directory_only_if_it_appeared_since_the_run_began(
    tmp_path: Path,
) -> None:
    spec = spec_of(tmp_path)
    work = tmp_path / "work"
    (work / "old" / "ckpt").mkdir(parents=True)
    (work / "old" / "ckpt" / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
    os.utime(work / "old" / "ckpt" / "checkpoint", (1_000_000.0, 1_000_000.0))
    assert search_state_file([work], since=2_000_000.0) is None  # another run's, from before
    assert search_state_file([work], since=None) == work / "old" / "ckpt" / "checkpoint"
    run = tmp_path / "run"
    (run / "train" / "ckpt").mkdir(parents=True)
    (run / "train" / "ckpt" / "checkpoint").write_text('model_checkpoint_path: "ckpt-2"\n')
    found = searched_source(spec, run, since=2_000_000.0)
    assert found == CheckpointSource(run / "train" / "ckpt", "a checkpoint file under the run directory")
    # A symlinked folder is not entered (it may lead anywhere, or round in a loop).
    (tmp_path / "loop").mkdir()
    (tmp_path / "loop" / "back").symlink_to(tmp_path / "loop")
    (tmp_path / "loop" / "inner").symlink_to(run / "train")
    assert search_state_file([tmp_path / "loop"], since=None) is None


def test_a_roles_flag_on_an_ssh_host_is_not_listed_from_here_and_says_so(tmp_path: Path) -> None:
    text = (
        f'strategy = "between_graph"\nworkdir = "{tmp_path}"\ncommand = ["python", "t.py", "--checkpoint_dir=ck"]\n'
        '[hosts."gpu-box"]\nssh = "me@gpu-box"\nworkdir = "/srv/train"\n'
        '[jobs.ps]\ntasks = ["gpu-box:2221"]\n[jobs.worker]\ntasks = ["gpu-box:2222"]\n'
    )
    spec, problems = parse_text(text)
    assert spec is not None, problems
    found = run_checkpoints(spec, tmp_path / "run", since=None)
    assert found.source == CheckpointSource(Path("/srv/train/ck"), "worker:0's --checkpoint_dir", "gpu-box")
    assert found.listing is not None and "on gpu-box; they are not listed from this machine" in found.listing.problem


def test_without_a_key_a_flag_or_a_state_file_it_says_where_it_looked(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, extra="")
    spec = replace(spec, jobs={"ps": spec.jobs["ps"]})  # no worker: no flag anywhere
    found = run_checkpoints(spec, tmp_path / "run", since=None)
    assert found.source is None and found.listing is None
    assert found.looked.startswith("no checkpoint_dir key nor --checkpoint_dir-style flag; no checkpoint file under")
    assert found.to_json()["checkpoints"] == [] and found.to_json()["directory"] is None


def checkpoint(step: int, saved_at: float | None) -> Checkpoint:
    return Checkpoint(f"ckpt-{step}", step, saved_at, 100)


def report(*checkpoints: Checkpoint, latest: str | None = None, problem: str = "") -> CheckpointReport:
    source = CheckpointSource(Path("/runs/r/ckpt"), "worker:0's --checkpoint_dir")
    listing = CheckpointListing("/runs/r/ckpt", checkpoints, latest or checkpoints[-1].name, problem)
    return CheckpointReport(source, listing)


def book(tmp_path: Path, extra: str = "") -> tuple[CheckpointBook, list[Event]]:
    spec = spec_of(tmp_path, flags=', "--checkpoint_dir={run_dir}/ckpt"', extra=extra)
    publisher = Publisher()
    events: list[Event] = []
    publisher.subscribe(events.append)
    return CheckpointBook(lambda: spec, tmp_path / "run", publisher), events


def test_the_book_publishes_only_what_changed_and_knows_what_a_restart_at_a_time_restores(tmp_path: Path) -> None:
    checkpoints, events = book(tmp_path)
    checkpoints.on_report(report(checkpoint(10, 100.0), checkpoint(20, 200.0)))
    checkpoints.on_report(report(checkpoint(10, 100.0), checkpoint(20, 200.0)))  # the same: nothing said
    checkpoints.on_report(report(checkpoint(20, 200.0), checkpoint(30, 300.0)))  # ckpt-10 deleted by TensorFlow
    said = [e.payload for e in events]
    assert all(isinstance(p, CheckpointsChanged) for p in said) and len(said) == 2
    first, second = said
    assert isinstance(first, CheckpointsChanged) and isinstance(second, CheckpointsChanged)
    assert [c.name for c in first.added] == ["ckpt-10", "ckpt-20"] and first.removed == ()
    assert first.found_from == "worker:0's --checkpoint_dir" and first.latest == "ckpt-20"
    assert [c.name for c in second.added] == ["ckpt-30"] and second.removed == ("ckpt-10",)
    assert checkpoints.saved_by(250.0) == checkpoint(20, 200.0)
    assert checkpoints.saved_by(300.0) == checkpoint(30, 300.0)
    assert checkpoints.saved_by(150.0) is None  # ckpt-10 is gone: nothing a restart then could restore
    # A problem with the state file is told once, and its end too.
    checkpoints.on_report(report(checkpoint(20, 200.0), checkpoint(30, 300.0), problem="line 3: damaged"))
    checkpoints.on_report(report(checkpoint(20, 200.0), checkpoint(30, 300.0), problem="line 3: damaged"))
    checkpoints.on_report(report(checkpoint(20, 200.0), checkpoint(30, 300.0)))
    assert [getattr(e.payload, "problem", None) for e in events[2:]] == ["line 3: damaged", ""]


def test_undated_checkpoints_restore_the_one_the_state_file_names(tmp_path: Path) -> None:
    checkpoints, _ = book(tmp_path)
    checkpoints.on_report(report(checkpoint(10, None), checkpoint(20, None), latest="ckpt-10"))
    assert checkpoints.saved_by(1.0) == checkpoint(10, None)


def test_training_without_a_checkpoint_with_recovery_on_is_warned_once(tmp_path: Path) -> None:
    checkpoints, events = book(tmp_path)
    checkpoints.tick(10_000.0)  # no training yet: nothing to say
    checkpoints.on_step(1_000.0)
    checkpoints.tick(1_000.0 + watch.NO_CHECKPOINT_AFTER_S - 1)
    assert events == []
    checkpoints.tick(1_000.0 + watch.NO_CHECKPOINT_AFTER_S + 1)
    checkpoints.tick(1_000.0 + watch.NO_CHECKPOINT_AFTER_S + 60)
    (warned,) = [e.payload for e in events]
    assert isinstance(warned, WarningMessage)
    assert warned.message.startswith(
        f"recovery is on, but no checkpoint has appeared after {watch.NO_CHECKPOINT_AFTER_S + 1:.0f} s of training "
        f"(looked in: {tmp_path / 'run' / 'ckpt'} (from worker:0's --checkpoint_dir)): a recovery would restart "
        "training from step 0. Fix:"
    )
    assert "\n" not in warned.message


@pytest.mark.parametrize(
    ("extra", "strategy", "on"),
    [
        ("", "between_graph", True),
        ('[recovery]\nmode = "role"', "between_graph", False),
        ("[recovery]\nmax_recoveries = 0", "between_graph", False),
        ("", "custom", False),
        ('[recovery]\nmode = "cluster"', "custom", True),
    ],
)
def test_recovery_is_on_unless_the_cluster_file_turns_it_off(
    tmp_path: Path, extra: str, strategy: str, on: bool
) -> None:
    assert recovery_on(spec_of(tmp_path, extra=extra, strategy=strategy)) is on


def test_no_warning_once_a_checkpoint_exists_or_with_recovery_off(tmp_path: Path) -> None:
    checkpoints, events = book(tmp_path)
    checkpoints.on_step(0.0)
    checkpoints.on_report(report(checkpoint(10, 5.0)))
    checkpoints.tick(10_000.0)
    assert [type(e.payload) for e in events] == [CheckpointsChanged]
    quiet, events = book(tmp_path, extra='[recovery]\nmode = "role"')
    quiet.on_step(0.0)
    quiet.tick(10_000.0)
    assert events == []


def test_the_poller_reads_the_listing_only_when_the_state_file_changed(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, flags=', "--checkpoint_dir={run_dir}/ckpt"')
    reports: list[CheckpointReport] = []
    poller = CheckpointPoller(lambda: spec, tmp_path / "run", reports.append, since=0.0)
    poller.poll(0.0)
    assert reports == []  # no directory yet
    directory = tmp_path / "run" / "ckpt"
    directory.mkdir(parents=True)
    (directory / "checkpoint").write_text('model_checkpoint_path: "ckpt-10"\n')
    poller.poll(1.0)
    poller.poll(2.0)
    assert [r.listing.latest for r in reports] == ["ckpt-10"]
    (directory / "checkpoint").write_text('model_checkpoint_path: "ckpt-20"\nall_model_checkpoint_paths: "ckpt-20"\n')
    poller.poll(3.0)
    assert [r.listing.latest for r in reports] == ["ckpt-10", "ckpt-20"]
    assert reports[-1].source.how == "worker:0's --checkpoint_dir"
