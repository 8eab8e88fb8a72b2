"""A double of the NVML call layer (the functions of nvidia-ml-py's ``pynvml`` that the agent
calls), for machines without an NVIDIA GPU. Loaded by the agent through $TOWERDECK_NVML_MODULE.

Configured by environment: FAKE_NVML_GPUS (count, default 1; 0: NVML answers and sees none), FAKE_NVML_FAIL (comma-separated:
``init`` makes nvmlInit fail like a missing driver, ``power`` makes power queries unsupported),
FAKE_NVML_HOT (comma-separated GPU indices: each is hot and thermally throttled, at 92 °C with its SM
clock down to 1095 MHz and the sw_thermal and hw_thermal reasons set), FAKE_NVML_NAME (every GPU's
name, as NVML's bytes; default ``NVIDIA H100 80GB HBM3``).
Like the real driver, a GPU lists as its compute processes the processes that can see it: here,
processes of this user with TOWERDECK_ROLE set and this GPU in their CUDA_VISIBLE_DEVICES, and
only those of the same test session. The double reads every process of the machine, so two test
suites (or a suite and a real run) would see each other's roles on their "GPUs": a process counts
only when it carries the same FAKE_NVML_SCOPE as the process that loaded the double (unset and
empty are the same scope). tests/conftest.py gives each test session its own, inherited by every
agent and role it starts; a host's wrapper passes it on over SSH. Process trees would not do:
a serving agent is detached (its parent is init), and nvidia-smi's stand-in is not its child.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
GIB = 1 << 30
_fail = set(filter(None, os.environ.get("FAKE_NVML_FAIL", "").split(",")))
_hot = {int(i) for i in os.environ.get("FAKE_NVML_HOT", "").split(",") if i.strip()}
SW_THERMAL, HW_THERMAL = 0x20, 0x40


class NVMLError(Exception):
    pass


def nvmlInit() -> None:
    if "init" in _fail:
        raise NVMLError("Driver Not Loaded")


def nvmlDeviceGetCount() -> int:
    return int(os.environ.get("FAKE_NVML_GPUS", "1"))


def nvmlDeviceGetHandleByIndex(i: int) -> int:
    return i


def nvmlDeviceGetName(h: int) -> bytes:
    return os.environ.get("FAKE_NVML_NAME", "NVIDIA H100 80GB HBM3").encode("utf-8", "surrogateescape")


def nvmlDeviceGetUUID(h: int) -> str:
    return f"GPU-0000000{h}-fake-4000-8000-00000000000{h}"


def nvmlDeviceGetPciInfo(h: int) -> SimpleNamespace:
    return SimpleNamespace(busId=f"00000000:{0x1A + h:02X}:00.0".encode())


def nvmlDeviceGetMemoryInfo(h: int) -> SimpleNamespace:
    return SimpleNamespace(total=80 * GIB, used=(h + 1) * GIB, free=(79 - h) * GIB)


def nvmlDeviceGetUtilizationRates(h: int) -> SimpleNamespace:
    return SimpleNamespace(gpu=10 * h % 100, memory=5 * h % 100)


def nvmlDeviceGetTemperature(h: int, sensor: int) -> int:
    return 92 if h in _hot else 40 + h


def nvmlDeviceGetPowerUsage(h: int) -> int:
    if "power" in _fail:
        raise NVMLError("Not Supported")
    return 100_000 + 1000 * h  # milliwatts


def nvmlDeviceGetEnforcedPowerLimit(h: int) -> int:
    if "power" in _fail:
        raise NVMLError("Not Supported")
    return 700_000


def nvmlDeviceGetClockInfo(h: int, clock: int) -> int:
    return 1095 if h in _hot else 1980


def nvmlSystemGetDriverVersion() -> str:
    return "550.0-fake"


def nvmlDeviceGetCurrentClocksEventReasons(h: int) -> int:
    """An idle GPU (nothing of ours on it) says so (bit 0x1); a busy one is at its power cap (0x4);
    a hot one is throttled for heat too."""
    mask = 0x4 if nvmlDeviceGetComputeRunningProcesses(h) else 0x1
    return mask | SW_THERMAL | HW_THERMAL if h in _hot else mask


SCOPE_VAR = "FAKE_NVML_SCOPE"


def _in_scope(env: dict[bytes, bytes]) -> bool:
    """Whether a process belongs to the test session that loaded the double."""
    return env.get(SCOPE_VAR.encode(), b"") == os.environ.get(SCOPE_VAR, "").encode()


def nvmlDeviceGetComputeRunningProcesses(h: int) -> list[SimpleNamespace]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
        except OSError:
            continue
        visible = env.get(b"CUDA_VISIBLE_DEVICES")
        on_it = b"TOWERDECK_ROLE" in env and visible and str(h).encode() in visible.split(b",")
        if on_it and _in_scope(env):
            found.append(SimpleNamespace(pid=int(name), usedGpuMemory=512 << 20))
    return found
