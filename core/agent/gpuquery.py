"""One look at this machine's GPUs, as ``python main.py gpus`` shows them: every GPU's figures
(utilisation, memory, temperature, power and its limit, clock throttle reasons) and the processes
on it, with their user and, when one of ours, the TowerDeck run and role they belong to.

The NVML layer of the agent: :class:`core.agent.sampling.GpuSampler` loads NVML through
:func:`load_nvml` here too. Standard library only, and no import from the rest of the agent
package: over SSH this module's source is read from the agent's zipapp and run as is (see
``core.remote.ssh.member_bootstrap``), like the pre-flight probe.

    python3 agent.pyz --gpus [--every SECONDS] [--count N]   # one JSON snapshot per line
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from typing import Any

# nvmlClocksEventReasons (named "ClocksThrottleReasons" before driver 535): bit -> our name.
THROTTLE_REASONS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal"),
    (0x40, "hw_thermal"),
    (0x80, "hw_power_brake"),
    (0x100, "display_clocks"),
)
ANCESTORS_SEARCHED = 32  # how far up the parents a process's TowerDeck role is looked for


def load_nvml() -> Any:
    """The NVML bindings: ``pynvml`` (nvidia-ml-py), or the module at $TOWERDECK_NVML_MODULE.

    The override exists so that machines without an NVIDIA GPU can test everything above the
    NVML calls with a double of that one layer.
    """
    override = os.environ.get("TOWERDECK_NVML_MODULE")
    if override:
        import importlib.util

        spec = importlib.util.spec_from_file_location("towerdeck_nvml", override)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {override}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    import pynvml  # type: ignore[import-not-found,unused-ignore]

    return pynvml


def decode(value: Any) -> Any:
    """NVML strings are bytes in older bindings, str in newer ones."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def milli(value: Any) -> float | None:
    """Milliwatts (NVML's unit) as watts; None when NVML gave no number."""
    return round(value / 1000.0, 3) if isinstance(value, (int, float)) else None


def call(fn: Any, *args: Any) -> Any:
    """``fn(*args)``, or None when NVML does not support it here (one field, not the snapshot)."""
    try:
        return fn(*args)
    except Exception:
        return None


def throttle_names(mask: Any) -> list[str] | None:
    """The names of the set bits of a clock throttle (event) reasons mask; None: unknown."""
    if not isinstance(mask, int):
        return None
    return [name for bit, name in THROTTLE_REASONS if mask & bit]


def _environ(pid: int) -> dict[bytes, bytes] | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
    except OSError:
        return None


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return int(data[data.rfind(b")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _user(pid: int) -> str | None:
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)


def _command(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            words = f.read().split(b"\0")
    except OSError:
        return None
    return " ".join(w.decode("utf-8", "replace") for w in words if w)[:200] or None


def towerdeck_role(pid: int) -> tuple[str | None, str | None]:
    """(run directory, role) of a process TowerDeck started, from the variables every role gets
    (``TOWERDECK_RUN_DIR``, ``TOWERDECK_ROLE``, see core/cluster/render.py), looked for in the process
    and then its parents (a trainer's helper may have cleared its environment); (None, None) when
    it is not one of ours or its environment cannot be read (another user's process)."""
    current: int | None = pid
    for _ in range(ANCESTORS_SEARCHED):
        if current is None or current <= 1:
            break
        env = _environ(current)
        if env is not None and b"TOWERDECK_ROLE" in env:
            run_dir = env.get(b"TOWERDECK_RUN_DIR")
            # Any process can set these to any bytes: one that is not UTF-8 must not fail the host's query.
            role = env[b"TOWERDECK_ROLE"].decode("utf-8", "replace")
            return (run_dir.decode("utf-8", "replace") if run_dir else None), role
        current = _ppid(current)
    return None, None


def process_info(pid: int, used_memory: Any) -> dict[str, Any]:
    """One process on a GPU: pid, user, command, GPU memory, and TowerDeck run and role."""
    run_dir, role = towerdeck_role(pid)
    return {
        "pid": pid,
        "user": _user(pid),
        "command": _command(pid),
        "used_memory_bytes": used_memory if isinstance(used_memory, int) and used_memory >= 0 else None,
        "run_dir": run_dir,
        "run": os.path.basename(run_dir.rstrip("/")) if run_dir else None,
        "role": role,
    }


class GpuQuery:
    """NVML, initialised once; :meth:`snapshot` reads every GPU. Never raises: no bindings, no
    driver or no GPU is said in ``status`` and an empty list."""

    def __init__(self) -> None:
        self.nvml: Any = None
        self.handles: list[Any] = []
        self.host = socket.gethostname()
        self.driver: str | None = None
        try:
            nvml = load_nvml()
        except Exception as exc:
            self.status = f"no NVML on {self.host} (NVML bindings not available: {exc}); CPU only"
            return
        try:
            nvml.nvmlInit()
            count = int(nvml.nvmlDeviceGetCount())
            self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception as exc:
            self.status = f"no NVML on {self.host} ({exc or type(exc).__name__}); CPU only"
            return
        self.nvml = nvml
        self.driver = decode(call(getattr(nvml, "nvmlSystemGetDriverVersion", None) or (lambda: None)))
        if not self.handles:
            self.status = f"no NVIDIA GPU on {self.host} (NVML answers, and sees none)"
        else:
            self.status = f"{len(self.handles)} NVIDIA GPU{'s' if len(self.handles) != 1 else ''} on {self.host}"

    def _throttle(self, handle: Any) -> list[str] | None:
        nvml = self.nvml
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            fn = getattr(nvml, name, None)
            if fn is not None:
                return throttle_names(call(fn, handle))
        return None

    def _processes(self, handle: Any) -> list[dict[str, Any]]:
        nvml = self.nvml
        seen: dict[int, Any] = {}
        for name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
            fn = getattr(nvml, name, None)
            for proc in (call(fn, handle) if fn is not None else None) or []:
                pid = getattr(proc, "pid", None)
                if isinstance(pid, int) and pid not in seen:
                    seen[pid] = getattr(proc, "usedGpuMemory", None)
        return [process_info(pid, used) for pid, used in sorted(seen.items())]

    def gpu(self, index: int, handle: Any) -> dict[str, Any]:
        """Every figure of one GPU (None where NVML does not say)."""
        nvml = self.nvml
        pci = call(nvml.nvmlDeviceGetPciInfo, handle)
        util = call(nvml.nvmlDeviceGetUtilizationRates, handle)
        memory = call(nvml.nvmlDeviceGetMemoryInfo, handle)
        return {
            "index": index,
            "name": decode(call(nvml.nvmlDeviceGetName, handle)),
            "uuid": decode(call(nvml.nvmlDeviceGetUUID, handle)),
            "pci_bus_id": decode(getattr(pci, "busId", None)) if pci is not None else None,
            "utilization_gpu_percent": getattr(util, "gpu", None),
            "utilization_memory_percent": getattr(util, "memory", None),
            "memory_used_bytes": getattr(memory, "used", None),
            "memory_total_bytes": getattr(memory, "total", None),
            "temperature_c": call(nvml.nvmlDeviceGetTemperature, handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0)),
            "power_w": milli(call(nvml.nvmlDeviceGetPowerUsage, handle)),
            "power_limit_w": milli(call(nvml.nvmlDeviceGetEnforcedPowerLimit, handle)),
            "sm_clock_mhz": call(nvml.nvmlDeviceGetClockInfo, handle, getattr(nvml, "NVML_CLOCK_SM", 1)),
            "throttle_reasons": self._throttle(handle),
            "processes": self._processes(handle),
        }

    def snapshot(self) -> dict[str, Any]:
        """This machine's GPUs now: {host, t, nvml, status, driver, gpus: [...]}."""
        gpus = [self.gpu(i, h) for i, h in enumerate(self.handles)] if self.nvml is not None else []
        return {
            "host": self.host,
            "t": round(time.time(), 3),
            "nvml": self.nvml is not None,
            "status": self.status,
            "driver": self.driver,
            "gpus": gpus,
        }


def main(argv: list[str]) -> int:
    """Print a snapshot per line: once, ``--count`` times, or every ``--every`` seconds until the
    reader goes away."""
    parser = argparse.ArgumentParser(prog="agent.pyz --gpus", description="this machine's GPUs as JSON lines")
    parser.add_argument("--every", type=float, default=0.0, metavar="SECONDS", help="repeat this often (0: once)")
    parser.add_argument("--count", type=int, default=0, help="stop after this many snapshots (0: no limit)")
    args = parser.parse_args(argv)
    query = GpuQuery()
    printed = 0
    try:
        while True:
            started = time.monotonic()
            sys.stdout.write(json.dumps(query.snapshot(), separators=(",", ":")) + "\n")
            sys.stdout.flush()
            printed += 1
            if args.every <= 0 or (args.count and printed >= args.count):
                return 0
            time.sleep(max(0.0, args.every - (time.monotonic() - started)))
    except (BrokenPipeError, KeyboardInterrupt):
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
