"""Profile captures on disk, as ``ctl RUN profile`` writes them, from recorded files.

``slow_input/worker-{0,1}.xplane.pb.gz`` were captured together (full host tracer, 0.5 s, TF 2.21
CPU, xprof 2.24.2) from a between-graph run of ``between_graph.py --input=dataset`` (1 ps, 2
workers) whose worker:1 sleeps 50 ms per batch in its tf.data pipeline (``--input_sleep_s=0.05``):
a worker slowed on purpose. xprof's step table counts no input time in either (a
CPU-only host), its "Dataset" op type takes more self time per step than worker:1's step (threads),
and xprof calls both workers "POTENTIALLY input-bound". ``worker_light.xplane.pb`` is one worker
traced with the light host tracer (no op statistics).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.profiling.summary import RoleProfile
from tests.helpers.project import ROOT

FIXTURES = ROOT / "tests" / "core" / "fixtures" / "profile"
SLOW_INPUT = {
    "worker:0": FIXTURES / "slow_input" / "worker-0.xplane.pb.gz",
    "worker:1": FIXTURES / "slow_input" / "worker-1.xplane.pb.gz",
}
LIGHT = FIXTURES / "worker_light.xplane.pb"


def write_record(
    folder: Path,
    roles: list[dict[str, Any]],
    *,
    requested: dict[str, Any] | None = None,
    breakdown: Sequence[RoleProfile] | None = None,
) -> Path:
    """A capture folder with its ``profile.json`` (and, when given, a stored breakdown)."""
    folder.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"requested": requested or {}, "roles": roles}
    if breakdown is not None:
        from core.profiling.files import BREAKDOWN_VERSION

        record["breakdown"] = {"version": BREAKDOWN_VERSION, "roles": [p.to_json() for p in breakdown]}
    (folder / "profile.json").write_text(json.dumps(record, indent=2), encoding="utf-8")
    return folder


def recorded_capture(
    folder: Path,
    roles: Sequence[str] = ("worker:1", "worker:0"),
    *,
    purpose: str = "why",
    origin: str = "cli",
    seconds: float = 0.5,
) -> Path:
    """The recorded slow-input capture of ``roles`` (in that order: a *why* lists the straggler
    first) in ``folder``, laid out as a capture writes it (TensorBoard's layout beside
    ``profile.json``), nothing computed yet."""
    entries = []
    for i, role in enumerate(roles):
        address = f"127.0.0.1:{2222 + i}"
        relative = f"{role.replace(':', '-')}/plugins/profile/2026_11_27_20_04_05/{address.replace(':', '_')}.xplane.pb"
        path = folder / relative
        path.parent.mkdir(parents=True)
        path.write_bytes(gzip.decompress(SLOW_INPUT[role].read_bytes()))
        entries.append({"role": role, "address": address, "ok": True, "error": None, "xplane": relative})
    requested = {
        "t": 1795809845.3,
        "roles": list(roles),
        "seconds": seconds,
        "light": False,
        "purpose": purpose,
        "origin": origin,
    }
    return write_record(folder, entries, requested=requested)
