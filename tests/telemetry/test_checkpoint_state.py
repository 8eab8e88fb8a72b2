"""TensorFlow's ``checkpoint`` state file read without TensorFlow: the files real TensorFlow wrote
(recorded, and made afresh by a slow test with TF 1's and TF 2's savers, names with escapes
included), each checkpoint's step, time and size; hostile state files (a FIFO, a symlink, a huge
file, damaged lines, paths outside the directory) end in one line, never a traceback or a hang;
and the lines in which a trainer says which checkpoint it restored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.telemetry.checkpoints import (
    MAX_STATE_BYTES,
    Checkpoint,
    find_state_file,
    parse_state,
    read_listing,
    restored_from,
    step_of,
)
from tests.helpers.project import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "checkpoints"


def copy_state(name: str, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "checkpoint").write_bytes((FIXTURES / name / "checkpoint").read_bytes())
    return directory


def write_checkpoint_files(directory: Path, name: str, data_bytes: int, index_bytes: int) -> None:
    (directory / f"{name}.data-00000-of-00001").write_bytes(b"d" * data_bytes)
    (directory / f"{name}.index").write_bytes(b"i" * index_bytes)


def test_the_state_file_tensorflow_2s_checkpoint_manager_wrote_lists_steps_times_and_sizes(tmp_path: Path) -> None:
    directory = copy_state("tf2_manager", tmp_path / "ckpt")
    for step in (20, 30, 40):
        write_checkpoint_files(directory, f"ckpt-{step}", 400 + step, 37)
    listing = read_listing(directory)
    assert listing.problem == ""
    assert listing.latest == "ckpt-40" and listing.newest() == listing.checkpoints[-1]
    assert [(c.name, c.step, c.size_bytes) for c in listing.checkpoints] == [
        ("ckpt-20", 20, 457),
        ("ckpt-30", 30, 467),
        ("ckpt-40", 40, 477),
    ]
    # The times are the state file's own (TF 2 writes them), not the files'.
    assert [c.saved_at for c in listing.checkpoints] == [1795815284.3456907, 1795815284.3579924, 1795815284.3673072]


def test_tensorflow_1s_absolute_paths_inside_the_directory_are_its_checkpoints_timed_by_their_index(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "tf1"
    directory.mkdir()
    recorded = (FIXTURES / "tf1_monitored" / "checkpoint").read_text()
    (directory / "checkpoint").write_text(recorded.replace("/tmp/ck36/tf1", str(directory)))
    for step in (0, 10, 20, 30, 35):
        write_checkpoint_files(directory, f"model.ckpt-{step}", 100, 68)
        (directory / f"model.ckpt-{step}.meta").write_bytes(b"m" * 999)  # the graph: not the checkpoint's size
    os.utime(directory / "model.ckpt-35.index", (1795000000.0, 1795000000.0))
    listing = read_listing(directory)
    assert listing.problem == ""
    assert [c.name for c in listing.checkpoints] == [f"model.ckpt-{s}" for s in (0, 10, 20, 30, 35)]
    assert listing.latest == "model.ckpt-35" and listing.checkpoints[-1].saved_at == 1795000000.0
    assert {c.size_bytes for c in listing.checkpoints} == {168}


def test_a_moved_directory_whose_state_file_names_another_place_lists_them_and_says_so_in_one_line(
    tmp_path: Path,
) -> None:
    directory = copy_state("tf1_monitored", tmp_path / "moved")
    listing = read_listing(directory)
    assert [c.step for c in listing.checkpoints] == [0, 10, 20, 30, 35]
    assert all(c.size_bytes is None for c in listing.checkpoints)  # not looked at: outside
    assert "\n" not in listing.problem
    assert "5 checkpoint path(s) lead outside" in listing.problem and "/tmp/ck36/tf1/model.ckpt-0" in listing.problem


def test_a_path_that_climbs_out_of_the_directory_is_not_looked_at(tmp_path: Path) -> None:
    secret = tmp_path / "elsewhere"
    secret.mkdir()
    write_checkpoint_files(secret, "ckpt-7", 10, 10)
    directory = tmp_path / "ckpt"
    directory.mkdir()
    (directory / "checkpoint").write_text('model_checkpoint_path: "../elsewhere/ckpt-7"\n')
    listing = read_listing(directory)
    assert [(c.name, c.step, c.size_bytes) for c in listing.checkpoints] == [("ckpt-7", 7, None)]
    assert "lead outside" in listing.problem and "../elsewhere/ckpt-7" in listing.problem


def test_names_with_escapes_and_unknown_fields_are_read_as_tensorflow_writes_them() -> None:
    text = (
        'model_checkpoint_path: "mod\\303\\250le \\"q\\"-12"\n'
        'all_model_checkpoint_paths: "mod\\303\\250le \\"q\\"-12"\n'
        "all_model_checkpoint_timestamps: 1795815284.5\n"
        "last_preserved_timestamp: 1795815283.2\n"
        "a_field_of_a_newer_tensorflow: 3\n"
    )
    state = parse_state(text)
    assert state.latest == 'modèle "q"-12' and state.paths == ['modèle "q"-12']
    assert state.timestamps == [1795815284.5] and state.problems == []
    assert step_of(state.latest) == 12


@pytest.mark.timeout(30)
def test_a_fifo_a_symlink_and_a_huge_state_file_are_not_read_and_say_so_in_one_line(tmp_path: Path) -> None:
    fifo_dir = tmp_path / "fifo"
    fifo_dir.mkdir()
    os.mkfifo(fifo_dir / "checkpoint")  # opening it for reading would wait for a writer forever
    listing = read_listing(fifo_dir)
    assert listing.checkpoints == () and listing.problem.endswith("checkpoint is not a regular file")

    link_dir = tmp_path / "link"
    link_dir.mkdir()
    (tmp_path / "real-state").write_text('model_checkpoint_path: "ckpt-1"\n')
    (link_dir / "checkpoint").symlink_to(tmp_path / "real-state")
    listing = read_listing(link_dir)
    assert listing.checkpoints == () and "is a symbolic link; not followed" in listing.problem

    huge_dir = tmp_path / "huge"
    huge_dir.mkdir()
    with open(huge_dir / "checkpoint", "wb") as out:
        out.truncate(MAX_STATE_BYTES + 1)  # sparse: the size is what counts
    listing = read_listing(huge_dir)
    assert listing.checkpoints == () and f"is {MAX_STATE_BYTES + 1:,} bytes" in listing.problem
    for problem in (read_listing(d).problem for d in (fifo_dir, link_dir, huge_dir)):
        assert "\n" not in problem and "Traceback" not in problem


def test_damaged_lines_are_skipped_and_named_once_with_their_line(tmp_path: Path) -> None:
    directory = tmp_path / "ckpt"
    directory.mkdir()
    (directory / "checkpoint").write_bytes(
        b'model_checkpoint_path: "ckpt-3"\n'
        b"all_model_checkpoint_paths: ckpt-2\n"  # not quoted
        b'all_model_checkpoint_paths: "ckpt-3"\n'
        b"\xff\xfe garbage\n"
        b"all_model_checkpoint_timestamps: soon\n"
    )
    listing = read_listing(directory)
    assert [c.name for c in listing.checkpoints] == ["ckpt-3"]
    assert "line 2: all_model_checkpoint_paths is not a quoted string" in listing.problem
    assert "(and 2 more)" in listing.problem and "\n" not in listing.problem


def test_no_state_file_yet_is_an_empty_listing_and_a_file_where_the_directory_should_be_is_a_problem(
    tmp_path: Path,
) -> None:
    assert read_listing(tmp_path / "not-yet") == read_listing(tmp_path / "not-yet")
    assert read_listing(tmp_path / "not-yet").problem == ""
    (tmp_path / "a-file").write_text("x")
    assert read_listing(tmp_path / "a-file").problem.endswith("is not a directory")
    assert read_listing(tmp_path).checkpoints == () and read_listing(tmp_path).problem == ""


def test_tf_keras_backup_and_restore_keeps_its_state_file_one_folder_down(tmp_path: Path) -> None:
    backup = tmp_path / "backup"
    (backup / "chief").mkdir(parents=True)
    (backup / "chief" / "checkpoint").write_text('model_checkpoint_path: "ckpt-4"\n')
    write_checkpoint_files(backup / "chief", "ckpt-4", 5, 5)
    assert find_state_file(backup) == backup / "chief" / "checkpoint"
    listing = read_listing(backup)
    assert [(c.name, c.step, c.size_bytes) for c in listing.checkpoints] == [("ckpt-4", 4, 10)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=3000))
def test_any_bytes_in_a_state_file_list_something_or_say_why_and_never_raise(tmp_path: Path, data: bytes) -> None:
    (tmp_path / "checkpoint").write_bytes(data)
    listing = read_listing(tmp_path)
    assert isinstance(listing.problem, str) and "\n" not in listing.problem
    assert all(isinstance(c, Checkpoint) for c in listing.checkpoints)
    json.dumps(listing.to_json())


state_lines = st.lists(
    st.one_of(
        st.builds(lambda s: f'model_checkpoint_path: "{s}"', st.text(max_size=30)),
        st.builds(lambda s: f'all_model_checkpoint_paths: "{s}"', st.text(max_size=30)),
        st.builds(lambda s: f"all_model_checkpoint_timestamps: {s}", st.text(max_size=12)),
        st.text(max_size=40),
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(state_lines)
def test_any_text_parses_without_raising_and_timestamps_go_with_paths_one_for_one(lines: list[str]) -> None:
    state = parse_state("\n".join(lines))
    assert len(state.timestamps) == len(state.paths)
    assert state.latest is None or state.latest in state.paths


def test_a_long_hostile_line_is_parsed_in_linear_time() -> None:
    for text in ("a:" + " " * 200_000 + "x", 'model_checkpoint_path: "' + "\\" * 200_001, "x" * 500_000):
        started = time.monotonic()
        parse_state(text)
        assert time.monotonic() - started < 2.0


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("INFO:tensorflow:Restoring parameters from /runs/r1/checkpoints/model.ckpt-1200", ("model.ckpt-1200", 1200)),
        ("resumed from checkpoint ckpt-6 at step 60", ("ckpt-6", 60)),
        ("Restored from '/data/ckpt/ckpt-12.index'", ("ckpt-12", 12)),
        ("Step: 201,  Epoch:  1,  Batch: 100 of 550,  Cost: 8.2541", None),
        ("resumed training", None),
        ("Restoring the optimizer state", None),
    ],
)
def test_a_trainers_line_that_says_which_checkpoint_it_restored(line: str, found: tuple[str, int] | None) -> None:
    assert restored_from(line) == found


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_line_is_read_for_a_restore_without_raising(line: str) -> None:
    found = restored_from("Restoring " + line)
    assert found is None or (isinstance(found[0], str) and (found[1] is None or found[1] >= 0))


def test_a_long_hostile_restore_line_is_read_in_linear_time() -> None:
    for rest in ("a" * 1980, "a-" * 990, "-1a" * 600, " at step" * 240, "/a" * 990 + "-x"):
        started = time.monotonic()
        restored_from("restore ckpt " + rest)
        assert time.monotonic() - started < 0.5


TF_SAVERS = r"""
import json, sys
import tensorflow as tf
out = sys.argv[1]
v = tf.Variable(tf.zeros([50]))
manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), out + "/tf2", max_to_keep=3, checkpoint_name='mod\u00e8le "q"')
for step in (10, 20, 30, 40):
    manager.save(checkpoint_number=step)
tf.compat.v1.disable_eager_execution()
with tf.Graph().as_default():
    step = tf.compat.v1.train.get_or_create_global_step()
    tf.compat.v1.get_variable("w", [200])
    bump = tf.compat.v1.assign_add(step, 5)
    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=30)]
    with tf.compat.v1.train.MonitoredTrainingSession(
        checkpoint_dir=out + "/tf1", save_checkpoint_steps=10, save_checkpoint_secs=None,
        save_summaries_steps=None, save_summaries_secs=None, log_step_count_steps=None, hooks=hooks,
    ) as session:
        while not session.should_stop():
            session.run(bump)
said = {}
for name in ("tf1", "tf2"):
    state = tf.train.get_checkpoint_state(out + "/" + name)
    said[name] = {"latest": state.model_checkpoint_path, "all": list(state.all_model_checkpoint_paths)}
print(json.dumps(said))
"""


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_listing_agrees_with_tensorflows_own_reading_of_the_directories_its_savers_wrote(tmp_path: Path) -> None:
    script = tmp_path / "savers.py"
    script.write_text(TF_SAVERS)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=280, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    said = json.loads(result.stdout.strip().splitlines()[-1])
    for name in ("tf1", "tf2"):
        listing = read_listing(tmp_path / name)
        assert listing.problem == "", listing.problem
        assert [c.name for c in listing.checkpoints] == [os.path.basename(p) for p in said[name]["all"]]
        assert listing.latest == os.path.basename(said[name]["latest"])
        assert all(c.size_bytes and c.saved_at for c in listing.checkpoints), listing
    assert [c.step for c in read_listing(tmp_path / "tf2").checkpoints] == [20, 30, 40]
    assert read_listing(tmp_path / "tf2").latest == 'modèle "q"-40'
    raw = (tmp_path / "tf2" / "checkpoint").read_text()
    assert 'model_checkpoint_path: "modèle \\"q\\"-40"' in raw, raw  # escaped by TensorFlow, undone here
