#!/usr/bin/env python3
"""A stand-in for ``nvidia-smi`` that reads the NVML double's state (tests/helpers/fake_nvml.py,
or the module at $TOWERDECK_NVML_MODULE), for running the GPU proof kit where there is no GPU.

Only what scripts/gpu_proof.py asks: ``-L``, ``--query-gpu=...`` and ``--query-compute-apps=...``
with ``--format=csv,noheader,nounits``, in nvidia-smi's units (MiB, W, %, C).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Any

MIB = 1 << 20


def _nvml() -> Any:
    path = os.environ.get("TOWERDECK_NVML_MODULE") or str(Path(__file__).with_name("fake_nvml.py"))
    spec = importlib.util.spec_from_file_location("fake_nvml", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def gpu_field(nvml: Any, h: int, field: str) -> str:
    memory = nvml.nvmlDeviceGetMemoryInfo(h)
    values = {
        "index": lambda: str(h),
        "name": lambda: _text(nvml.nvmlDeviceGetName(h)),
        "uuid": lambda: _text(nvml.nvmlDeviceGetUUID(h)),
        "pci.bus_id": lambda: _text(nvml.nvmlDeviceGetPciInfo(h).busId),
        "driver_version": lambda: _text(nvml.nvmlSystemGetDriverVersion()),
        "utilization.gpu": lambda: str(nvml.nvmlDeviceGetUtilizationRates(h).gpu),
        "memory.used": lambda: str(memory.used // MIB),
        "memory.total": lambda: str(memory.total // MIB),
        "temperature.gpu": lambda: str(nvml.nvmlDeviceGetTemperature(h, 0)),
        "power.draw": lambda: f"{nvml.nvmlDeviceGetPowerUsage(h) / 1000:.2f}",
        "power.limit": lambda: f"{nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000:.2f}",
        "timestamp": lambda: time.strftime("%Y/%m/%d %H:%M:%S.000"),
    }
    if field not in values:
        raise SystemExit(f'Field "{field}" is not a valid field to query.')
    try:
        return values[field]()
    except Exception:
        return "[N/A]"


def main(argv: list[str]) -> int:
    nvml = _nvml()
    nvml.nvmlInit()
    count = nvml.nvmlDeviceGetCount()
    query = next((a.split("=", 1) for a in argv if a.startswith("--query-")), None)
    if "-L" in argv:
        for h in range(count):
            print(f"GPU {h}: {_text(nvml.nvmlDeviceGetName(h))} (UUID: {_text(nvml.nvmlDeviceGetUUID(h))})")
        return 0
    if query is None or "--format=csv,noheader,nounits" not in argv:
        print(
            "fake nvidia-smi: only -L and --query-gpu/--query-compute-apps with csv,noheader,nounits", file=sys.stderr
        )
        return 2
    kind, fields = query[0], query[1].split(",")
    if kind == "--query-gpu":
        for h in range(count):
            print(", ".join(gpu_field(nvml, h, f) for f in fields))
    elif kind == "--query-compute-apps":
        for h in range(count):
            bus = _text(nvml.nvmlDeviceGetPciInfo(h).busId)
            for proc in nvml.nvmlDeviceGetComputeRunningProcesses(h):
                row = {"pid": str(proc.pid), "used_memory": str(proc.usedGpuMemory // MIB), "gpu_bus_id": bus}
                print(", ".join(row.get(f, "[N/A]") for f in fields))
    else:
        print(f"fake nvidia-smi: {kind} is not supported", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
