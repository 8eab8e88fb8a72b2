"""The 1 ps + 64 worker cluster of the scale benchmark and screenshots loads clean: every task on its
own port (choosing them one at a time once gave a full make bench the same port twice)."""

from __future__ import annotations

from pathlib import Path

from core.cluster.spec import load
from scripts.scale_cluster import main as write_cluster


def test_the_scale_cluster_loads_with_65_distinct_ports(tmp_path: Path) -> None:
    for attempt in range(20):
        path = tmp_path / f"scale-{attempt}.toml"
        assert write_cluster([str(path)]) == 0
        spec, problems = load(path)
        assert spec is not None, problems
        tasks = list(spec.tasks())
        assert len(tasks) == 65 and len({t.port for t in tasks}) == 65
