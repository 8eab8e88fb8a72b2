"""The run directory's hot files stay open (core/run/openfiles.py): a metrics append and a parse
offset cost a write, not an open and a close each, and nothing written is lost or left open."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from core.cluster.spec.model import Task
from core.run.journal import iter_jsonl
from core.run.openfiles import OpenFiles
from core.run.rundir import RunDir, read_parsed

TASK = Task("worker", 0, "127.0.0.1", 2222)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_role_s_metrics_and_offsets_open_their_files_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At 256 workers the controller wrote ~2,500 times a second, each write an open and a close."""
    opened: list[str] = []
    real_open = os.open

    def counting_open(path: object, *args: object, **kwargs: object) -> int:
        opened.append(str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", counting_open)
    run = RunDir(tmp_path)
    for step in range(1, 301):
        run.append_metrics(TASK, [{"t": 1000.0 + step / 10, "step": step, "loss": 1.0 / step}])
        run.note_parsed(TASK, 1, step * 40)
    run.close_files()
    assert run.write_error is None
    assert len(opened) <= 4, opened  # the metrics file and parsed.json, once each (before: 600)
    steps = [r["step"] for r in iter_jsonl(run.role_dir(TASK) / "metrics.jsonl")]
    assert steps == list(range(1, 301))
    assert read_parsed(run.role_dir(TASK)) == (1, 300 * 40)


def test_past_the_limit_the_least_recently_used_file_is_closed_and_nothing_is_lost(tmp_path: Path) -> None:
    before = _open_fds()
    files = OpenFiles(max_open=4)
    paths = [tmp_path / "roles" / f"w{i}" / "metrics.jsonl" for i in range(10)]
    for round_ in range(3):
        for path in paths:
            files.append(path, f"{round_}\n".encode())
            assert files.held() <= 4
    assert _open_fds() <= before + 4
    files.close()
    assert files.held() == 0 and _open_fds() == before
    for path in paths:
        assert path.read_text() == "0\n1\n2\n"


def test_an_overwrite_cuts_a_longer_older_record_and_survives_the_file_being_rewritten(tmp_path: Path) -> None:
    files = OpenFiles()
    path = tmp_path / "parsed.json"
    files.overwrite(path, b"a much longer first record")
    files.overwrite(path, b"short")
    assert path.read_bytes() == b"short"
    path.write_bytes(b"written by someone else, longer")  # same file, truncated and rewritten
    files.overwrite(path, b"mine")
    assert path.read_bytes() == b"mine"
    files.close()


def test_a_failed_write_closes_the_file_and_the_next_write_opens_it_again(tmp_path: Path) -> None:
    files = OpenFiles()
    path = tmp_path / "metrics.jsonl"
    files.append(path, b"one\n")
    with pytest.raises(TypeError):
        files.append(path, "not bytes")  # type: ignore[arg-type]
    files.append(path, b"two\n")
    assert path.read_bytes() == b"one\ntwo\n"
    files.close()


def test_a_file_removed_while_open_is_made_again_by_the_next_write(tmp_path: Path) -> None:
    """Kept open, a removed file would swallow every later write; the path is opened again."""
    files = OpenFiles()
    path = tmp_path / "role" / "metrics.jsonl"
    files.append(path, b"one\n")
    path.unlink()
    path.parent.rmdir()
    files.append(path, b"two\n")
    assert path.read_bytes() == b"two\n"
    files.close()


def test_a_parse_offset_note_is_two_system_calls_and_json_s_own_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A note is made with every chunk that gave metrics (~1,300 a second at 256 workers): it was an
    fstat (still linked?), the pwrite and a second fstat (a longer, older record?); one fstat
    answers both."""
    run = RunDir(tmp_path)
    run.note_parsed(TASK, 1, 10)  # opens the file
    calls: list[str] = []
    for name in ("fstat", "pwrite", "ftruncate", "write", "stat"):
        real = getattr(os, name)

        def counted(*args: object, _name: str = name, _real: object = real) -> object:
            calls.append(_name)
            return _real(*args)  # type: ignore[operator]

        monkeypatch.setattr(os, name, counted)
    for end in range(20, 1020, 10):
        run.note_parsed(TASK, 2, end)
    monkeypatch.undo()
    assert len(calls) == 2 * 100, sorted(set(calls))
    assert read_parsed(run.role_dir(TASK)) == (2, 1010)
    expected = json.dumps({"attempt": 2, "end": 1010})
    assert (run.role_dir(TASK) / "parsed.json").read_text().rstrip() == expected
    run.close_files()
