"""core.atomic.replace_file: whole or nothing, permissions as asked or as they were."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from core.atomic import replace_file


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_is_owner_only_unless_a_mode_is_given(tmp_path: Path):
    replace_file(tmp_path / "a", b"one")
    replace_file(tmp_path / "b", b"two", mode=0o644)
    assert (tmp_path / "a").read_bytes() == b"one" and _mode(tmp_path / "a") == 0o600
    assert (tmp_path / "b").read_bytes() == b"two" and _mode(tmp_path / "b") == 0o644


def test_an_existing_file_keeps_its_permissions(tmp_path: Path):
    target = tmp_path / "cluster.toml"
    target.write_text("old")
    os.chmod(target, 0o640)
    replace_file(target, b"new")
    assert target.read_text() == "new" and _mode(target) == 0o640


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path):
    target = tmp_path / "cluster.toml"
    target.write_text("old")
    with pytest.raises(TypeError):
        replace_file(target, "not bytes")  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster.toml"]
