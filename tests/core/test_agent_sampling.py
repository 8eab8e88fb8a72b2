"""The agent's samples: host, per-role process trees, and GPUs through the NVML call layer.

This machine has no NVIDIA GPU: the GPU tests replace only the NVML calls (tests/helpers/
fake_nvml.py, through $TOWERDECK_NVML_MODULE); the real pynvml path is exercised here as the
"no GPU" case and on a GPU machine when one is lent.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.agent_process import AgentProcess
from tests.helpers.project import ROOT

FAKE_NVML = str(ROOT / "tests" / "helpers" / "fake_nvml.py")


@pytest.fixture
def nvml_env(monkeypatch: pytest.MonkeyPatch):
    def set_gpus(count: int, fail: str = "") -> None:
        monkeypatch.setenv("TOWERDECK_NVML_MODULE", FAKE_NVML)
        monkeypatch.setenv("FAKE_NVML_GPUS", str(count))
        monkeypatch.setenv("FAKE_NVML_FAIL", fail)

    return set_gpus


def first_sample(agent: AgentProcess, **match: object) -> dict:
    return agent.wait_for("sample", timeout_s=10, **match)


def test_without_nvml_says_so_once_and_samples_the_rest(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("TOWERDECK_NVML_MODULE", raising=False)
    agent = AgentProcess()  # the real pynvml import: no driver on this machine
    try:
        status = agent.wait_for("gpu_status")
        try:
            import pynvml

            pynvml.nvmlInit()
            pytest.skip("this machine has an NVIDIA driver; the no-GPU case cannot be shown here")
        except Exception:  # what we expect here: no driver
            pass
        assert status["count"] == 0 and status["status"].startswith("no NVIDIA GPU on ")
        sample = first_sample(agent)
        assert sample["gpus"] == []
        host = sample["host"]
        assert host["memory_total_bytes"] > 0 and 0 <= host["cpu_percent"] <= 100 and host["load1"] >= 0
    finally:
        agent.close()


@pytest.mark.parametrize("count", [0, 1, 8])
def test_gpu_figures_for_0_1_and_8_gpus(nvml_env, count: int):
    nvml_env(count)
    agent = AgentProcess()
    try:
        status = agent.wait_for("gpu_status")
        assert status["count"] == count
        gpus = first_sample(agent)["gpus"]
        assert [g["index"] for g in gpus] == list(range(count))
        for g in gpus:
            assert g["name"] == "NVIDIA H100 80GB HBM3"
            assert g["pci_bus_id"] == f"00000000:{0x1A + g['index']:02X}:00.0"
            assert g["memory_total_bytes"] == 80 << 30 and g["memory_used_bytes"] == (g["index"] + 1) << 30
            assert g["power_w"] == 100.0 + g["index"] and g["power_limit_w"] == 700.0
            assert g["temperature_c"] == 40 + g["index"] and g["sm_clock_mhz"] == 1980
    finally:
        agent.close()


def test_a_failing_query_empties_one_field_not_the_sample(nvml_env):
    nvml_env(2, fail="power")
    agent = AgentProcess()
    try:
        gpus = first_sample(agent)["gpus"]
        assert len(gpus) == 2
        assert all(g["power_w"] is None and g["power_limit_w"] is None for g in gpus)
        assert all(g["temperature_c"] is not None and g["memory_used_bytes"] is not None for g in gpus)
    finally:
        agent.close()


def test_driver_missing_is_one_clear_message(nvml_env):
    nvml_env(1, fail="init")
    agent = AgentProcess()
    try:
        status = agent.wait_for("gpu_status")
        assert (
            status["count"] == 0 and "no NVIDIA GPU on" in status["status"] and "Driver Not Loaded" in status["status"]
        )
        assert first_sample(agent)["gpus"] == []
    finally:
        agent.close()


def test_role_figures_cover_the_whole_tree_and_gpu_processes_map_to_roles(nvml_env, tmp_path: Path):
    nvml_env(2)
    agent = AgentProcess()
    # A role that forks 3 busy children: the role's CPU is the sum over its tree.
    code = "import os, time\nfor _ in range(3):\n    if os.fork() == 0:\n        while True: pass\nprint('ready', flush=True)\ntime.sleep(60)"
    try:
        agent.send({"op": "configure", "sample_period_s": 0.5})
        agent.wait_for("configured")
        agent.send(
            {
                "op": "start",
                "role": "worker:1",
                "argv": [sys.executable, "-c", code],
                "env": {"TOWERDECK_ROLE": "worker:1", "CUDA_VISIBLE_DEVICES": "1"},
                "log": str(tmp_path / "w.log"),
            }
        )
        started = agent.wait_for("started")
        deadline = time.time() + 15
        while True:
            sample = agent.wait_for("sample")
            role = sample["roles"].get("worker:1")
            if (
                role and role["pids"] == 4 and role["cpu_percent"] > 30
            ):  # the leader sleeps: only the summed tree gets here
                break
            assert time.time() < deadline, sample
        assert role["alive"] and role["pid"] == started["pid"] and role["rss_bytes"] > 4 << 20 and role["threads"] >= 4
        gpu0, gpu1 = sample["gpus"]
        assert gpu0["processes"] == []
        assert {p["role"] for p in gpu1["processes"]} == {"worker:1"} and len(gpu1["processes"]) == 4
        agent.send({"op": "kill", "role": "worker:1"})
        agent.wait_for("exited")
        ended = agent.wait_for("sample")["roles"]["worker:1"]
        assert ended["alive"] is False and ended["signal"] == 9
    finally:
        agent.close()


def test_sample_period_bounds(nvml_env):
    nvml_env(0)
    agent = AgentProcess()
    try:
        agent.send({"op": "configure", "sample_period_s": 0.05})
        assert "from 0.2 to 10.0" in agent.wait_for("error")["message"]
        agent.send({"op": "configure", "sample_period_s": 0.2})
        agent.wait_for("configured")
        agent.wait_for("sample")
        t0 = time.time()
        for _ in range(5):
            agent.wait_for("sample")
        assert 0.7 <= time.time() - t0 <= 2.5  # about 5 x 0.2 s
    finally:
        agent.close()


def test_sampling_off_stops_the_samples_and_on_brings_them_back(nvml_env, tmp_path: Path):
    """The GPU proof's A/B switch: no sample while off, however long a role runs meanwhile."""
    nvml_env(1)
    agent = AgentProcess()
    try:
        agent.send({"op": "configure", "sample_period_s": 0.2, "sampling": False})
        assert agent.wait_for("configured")["sampling"] is False
        off_from = len(agent.events)
        role = {"op": "start", "role": "worker:0", "argv": [sys.executable, "-c", "import time; time.sleep(1.5)"]}
        agent.send({**role, "env": {}, "log": str(tmp_path / "w.log")})
        agent.wait_for("exited", timeout_s=30)
        assert not [e for e in agent.events[off_from:] if e["ev"] == "sample"]
        agent.send({"op": "configure", "sampling": True})
        assert agent.wait_for("configured")["sampling"] is True
        assert agent.wait_for("sample")["roles"]["worker:0"]["alive"] is False  # the exit, held till then
        agent.send({"op": "configure", "sampling": "no"})
        assert "sampling must be true or false" in agent.wait_for("error")["message"]
    finally:
        agent.close()


assert os.path.exists(FAKE_NVML)


def test_without_psutil_host_memory_comes_from_proc_meminfo():
    # `python -S`: no site-packages, so neither psutil nor tensorboard can be imported by the agent.
    agent = AgentProcess(python_flags=("-S",), args=("--sample-period", "0.2"))
    try:
        assert agent.events[0]["tensorboard"] is False
        meminfo = {}
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, _, rest = line.partition(":")
            meminfo[key] = int(rest.split()[0]) * 1024
        first = first_sample(agent)["host"]
        assert first["memory_total_bytes"] == meminfo["MemTotal"]
        assert 0 < first["memory_used_bytes"] < first["memory_total_bytes"]
        second = first_sample(agent)["host"]  # CPU % needs two readings of /proc/stat
        assert isinstance(second["cpu_percent"], float) and 0.0 <= second["cpu_percent"] <= 100.0
    finally:
        agent.close()
