"""The bundled demo cluster: classic between-graph replication, 1 ps + 2 workers on this machine."""

from __future__ import annotations

from pathlib import Path

DEMO_CLUSTER = Path(__file__).resolve().parents[2] / "resources" / "demo_cluster.toml"
