"""A real small file system for disk faults: a tmpfs mounted over a folder (the tests run as
root, as CI does), which can be filled to the last byte or made read-only."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def mounted_tmpfs(mount: Path, size: str = "16m") -> Iterator[Path]:
    """A tmpfs of ``size`` over ``mount`` (created if missing), unmounted afterwards; the test is
    skipped where mounting is not allowed."""
    mount.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {result.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        deadline = time.monotonic() + 10
        while subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            if time.monotonic() > deadline:  # a process of the test still holds a file
                subprocess.run(["umount", "-l", str(mount)], check=False)
                break
            time.sleep(0.2)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 MiB tmpfs with 4096 inodes, unmounted afterwards (the tests run as root, as CI does)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m,nr_inodes=4096", "tmpfs", str(mount)], capture_output=True
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {result.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        for _ in range(20):  # a process of the test may still hold a file for a moment
            if subprocess.run(["umount", str(mount)], capture_output=True).returncode == 0:
                break
            time.sleep(0.5)
        else:
            subprocess.run(["umount", "-l", str(mount)], check=False)


def make_read_only(mount: Path) -> None:
    """Remount the tmpfs at ``mount`` read-only (as a file system remounted after errors is)."""
    subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True, capture_output=True)


def fill(disk: Path) -> Path:
    """Fill ``disk`` to the last byte; returns the filler file (delete it to free the space)."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        for chunk in (b"\0" * (1 << 20), b"\0" * 4096, b"\0"):
            with contextlib.suppress(OSError):
                while True:
                    f.write(chunk)
    return filler
