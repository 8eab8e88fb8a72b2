"""A run directory's copy with its telemetry files in the compact format (core/run/compact.py), to
check that both formats of the same run read the same."""

from __future__ import annotations

import shutil
from pathlib import Path

from core.run import compact, journal


def telemetry_files(run: Path) -> list[Path]:
    """The run's metrics, scalars and samples files, in a stable order."""
    return sorted(
        [*run.glob("roles/*/metrics.jsonl"), *run.glob("roles/*/scalars.jsonl"), *run.glob("telemetry/samples-*.jsonl")]
    )


def compact_copy(src: Path, dst: Path) -> Path:
    """``src`` copied to ``dst`` with each telemetry file re-encoded compact from its records as
    read (the writer's own encoder, a key frame every ``key_every`` records); returns ``dst``."""
    shutil.copytree(src, dst)
    for path in telemetry_files(dst):
        codec = compact.codec_for(path.name)
        assert codec is not None, path
        compact.encode_file(list(journal.iter_jsonl(src / path.relative_to(dst))), path, codec)
    return dst
