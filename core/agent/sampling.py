"""Host, role and GPU figures for the ``sample`` event.

Role figures come from /proc/PID/stat (parsed once, in :mod:`.processes`); host figures from
psutil when it is importable, else from /proc (memory from /proc/meminfo, CPU % from /proc/stat); GPU
figures from NVML (``pynvml``, or the module at $TOWERDECK_NVML_MODULE).
"""

from __future__ import annotations

import os
import time
from typing import Any, Protocol

from .gpuquery import call, decode, load_nvml, milli
from .processes import read_stat

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class GpuSource(Protocol):
    """What samples a host's GPUs: :class:`GpuSampler` (NVML), or a simulating agent's GPUs."""

    status: str
    count: int

    def sample(self, pid_roles: dict[int, str]) -> list[dict[str, Any]]: ...


class GpuSampler:
    """Per-GPU figures from NVML. Initialised once; a failing query empties one field, not the sample."""

    def __init__(self, host: str) -> None:
        self.nvml: Any = None
        self.count = 0
        self.handles: list[Any] = []
        self.static: list[dict[str, Any]] = []
        try:
            self.nvml = load_nvml()
        except Exception as exc:
            self.status = f"no NVIDIA GPU on {host} (NVML bindings not available: {exc})"
            return
        try:
            self.nvml.nvmlInit()
            self.count = int(self.nvml.nvmlDeviceGetCount())
            self.handles = [self.nvml.nvmlDeviceGetHandleByIndex(i) for i in range(self.count)]
        except Exception as exc:
            self.nvml = None
            self.status = f"no NVIDIA GPU on {host} ({exc or type(exc).__name__})"
            return
        self.status = f"{self.count} NVIDIA GPU{'s' if self.count != 1 else ''} on {host}"
        for index, handle in enumerate(self.handles):
            pci = call(self.nvml.nvmlDeviceGetPciInfo, handle)
            self.static.append(
                {
                    "index": index,
                    "name": decode(call(self.nvml.nvmlDeviceGetName, handle)),
                    "uuid": decode(call(self.nvml.nvmlDeviceGetUUID, handle)),
                    "pci_bus_id": decode(getattr(pci, "busId", None)) if pci is not None else None,
                    "memory_total_bytes": getattr(call(self.nvml.nvmlDeviceGetMemoryInfo, handle), "total", None),
                    "power_limit_w": milli(call(self.nvml.nvmlDeviceGetEnforcedPowerLimit, handle)),
                }
            )

    def sample(self, pid_roles: dict[int, str]) -> list[dict[str, Any]]:
        if self.nvml is None:
            return []
        nvml = self.nvml
        gpus = []
        for handle, static in zip(self.handles, self.static, strict=True):
            util = call(nvml.nvmlDeviceGetUtilizationRates, handle)
            memory = call(nvml.nvmlDeviceGetMemoryInfo, handle)
            temp = call(nvml.nvmlDeviceGetTemperature, handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0))
            clock = call(nvml.nvmlDeviceGetClockInfo, handle, getattr(nvml, "NVML_CLOCK_SM", 1))
            procs = call(nvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
            processes = []
            for proc in procs:
                pid = getattr(proc, "pid", None)
                used = getattr(proc, "usedGpuMemory", None)
                processes.append(
                    {
                        "pid": pid,
                        "used_memory_bytes": used if isinstance(used, int) and used >= 0 else None,
                        "role": pid_roles.get(pid) if isinstance(pid, int) else None,
                    }
                )
            gpus.append(
                {
                    **static,
                    "utilization_gpu_percent": getattr(util, "gpu", None),
                    "utilization_memory_percent": getattr(util, "memory", None),
                    "memory_used_bytes": getattr(memory, "used", None),
                    "memory_total_bytes": getattr(memory, "total", static["memory_total_bytes"]),
                    "temperature_c": temp,
                    "power_w": milli(call(nvml.nvmlDeviceGetPowerUsage, handle)),
                    "sm_clock_mhz": clock,
                    "processes": processes,
                }
            )
        return gpus


def meminfo(path: str = "/proc/meminfo") -> dict[str, int]:
    """/proc/meminfo in bytes (``MemTotal``, ``MemAvailable``, ...); {} when unreadable."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if parts and parts[0].isdigit():
                    out[key] = int(parts[0]) * 1024
    except OSError:
        pass
    return out


def cpu_times(path: str = "/proc/stat") -> tuple[int, int] | None:
    """(busy, total) CPU jiffies of the whole host from the ``cpu`` line of /proc/stat."""
    try:
        with open(path, "rb") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    if len(fields) < 4:
        return None
    total = sum(fields[:8])  # guest time is already counted in user and nice
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return total - idle, total


class HostSampler:
    """Host figures (psutil when importable, else /proc) and per-role figures (from /proc)."""

    def __init__(self) -> None:
        try:
            import psutil

            self.psutil: Any = psutil
            psutil.cpu_percent(None)
        except ImportError:
            self.psutil = None
        self.procs: dict[int, tuple[int, float]] = {}  # pid -> (CPU ticks, monotonic time)
        self._cpu_times: tuple[int, int] | None = cpu_times()  # without psutil: (busy, total) jiffies

    def host(self) -> dict[str, Any]:
        """Load, CPU count, CPU % (null in the first sample without psutil) and memory used/total in bytes."""
        load = os.getloadavg()
        out: dict[str, Any] = {"load1": load[0], "load5": load[1], "load15": load[2], "cpu_count": os.cpu_count()}
        if self.psutil is not None:
            vm = self.psutil.virtual_memory()
            out.update(
                cpu_percent=self.psutil.cpu_percent(None),
                memory_used_bytes=vm.total - vm.available,
                memory_total_bytes=vm.total,
            )
            return out
        info = meminfo()
        total = info.get("MemTotal")
        # MemAvailable is the kernel's estimate (3.14+); older kernels: free + page cache.
        available = info.get("MemAvailable", info.get("MemFree", 0) + info.get("Cached", 0) + info.get("Buffers", 0))
        times = cpu_times()
        cpu_percent = None
        if times is not None and self._cpu_times is not None and times[1] > self._cpu_times[1]:
            busy_jiffies, all_jiffies = times[0] - self._cpu_times[0], times[1] - self._cpu_times[1]
            cpu_percent = round(100.0 * busy_jiffies / all_jiffies, 1)
        self._cpu_times = times
        out.update(
            cpu_percent=cpu_percent,
            memory_used_bytes=total - available if total is not None else None,
            memory_total_bytes=total,
        )
        return out

    def role(self, pids: set[int]) -> dict[str, Any]:
        """CPU % (of one core), RSS and threads summed over ``pids``, from one read of
        /proc/PID/stat each; no psutil needed."""
        now = time.monotonic()
        cpu = 0.0
        rss = 0
        threads = 0
        for pid in pids:
            stat = read_stat(pid)
            if stat is None:
                continue
            threads += stat.threads
            rss += stat.rss_pages * PAGE_BYTES
            previous = self.procs.get(pid)
            self.procs[pid] = (stat.cpu_ticks, now)
            if previous is not None and now > previous[1]:
                cpu += 100.0 * (stat.cpu_ticks - previous[0]) / CLOCK_TICKS / (now - previous[1])
        return {"pids": len(pids), "cpu_percent": round(cpu, 1), "rss_bytes": rss, "threads": threads}

    def forget(self, alive: set[int]) -> None:
        """Drop the CPU history of processes that are gone."""
        for pid in list(self.procs):
            if pid not in alive:
                del self.procs[pid]
