"""The GPUs in *why is this worker slow?* (core/profiling/why_gpus.py): a throttled or shared GPU
named as the cause by the rules, and the figures gathered through the agent's real NVML query with
the NVML double (tests/helpers/fake_nvml.py) making one GPU hot, throttled and shared."""

from __future__ import annotations

import getpass
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.profiling.why import RoleFacts, explain
from core.profiling.why_gpus import GpuFacts, look_at_gpus
from tests.helpers.project import ROOT
from tests.helpers.role_profiles import profile
from tests.helpers.statuses import role_status

FAKE_NVML = str(ROOT / "tests" / "helpers" / "fake_nvml.py")
POWER_CAP = ("sw_power_cap",)


def facts(role: str, *gpus: GpuFacts) -> RoleFacts:
    return RoleFacts(role, host="127.0.0.1", gpus=tuple(g.index for g in gpus), gpu_facts=gpus)


CALM = GpuFacts(0, 97.0, 61.0, 1980.0, POWER_CAP)
HOT = GpuFacts(1, 97.0, 91.0, 1095.0, ("sw_power_cap", "hw_thermal"))


def test_a_hot_throttled_gpu_under_grown_device_compute_is_named() -> None:
    slow = profile("worker:1", 50.0, device=40.0, input=10.0)
    median = profile("worker:0", 20.0, device=10.0, input=10.0)
    verdict = explain(slow, median, slow_facts=facts("worker:1", HOT), median_facts=facts("worker:0", CALM))
    assert verdict.cause == "gpu"
    assert verdict.sentence == (
        "worker:1 spends 80% of each step in device compute (median worker worker:0: 50%); its GPU 1 is hot "
        "and throttled (hw_thermal, 91 °C, SM clock 1095 MHz) (median worker worker:0's GPU 0: 61 °C, "
        "SM clock 1980 MHz, throttled (sw_power_cap), not shared)"
    )
    assert (
        "worker:1's GPU 1: 97% busy, 91 °C, SM clock 1095 MHz, clock reasons: sw_power_cap, hw_thermal, "
        "no other processes"
    ) in verdict.evidence
    # Both at their power cap, or the same GPU trouble on both: nothing to tell them apart.
    capped = GpuFacts(1, 97.0, 61.0, 1980.0, POWER_CAP)
    assert (
        explain(slow, median, slow_facts=facts("worker:1", capped), median_facts=facts("worker:0", CALM)).cause
        == "device compute"
    )
    assert (
        explain(slow, median, slow_facts=facts("worker:1", HOT), median_facts=facts("worker:0", HOT)).cause
        == "device compute"
    )
    # Input that grew is input, whatever the GPU does.
    slow_input = profile("worker:1", 50.0, device=10.0, input=40.0)
    assert (
        explain(slow_input, median, slow_facts=facts("worker:1", HOT), median_facts=facts("worker:0", CALM)).cause
        == "input"
    )


def test_a_shared_gpu_is_the_likely_cause_when_no_part_of_the_step_explains_it() -> None:
    slow = profile("worker:1", 60.0, input=15.0, host=15.0, device=15.0, comm=15.0)
    median = profile("worker:0", 20.0, input=5.0, host=5.0, device=5.0, comm=5.0)
    shared = GpuFacts(1, 100.0, 70.0, 1980.0, POWER_CAP, ("pid 4242 alice, python other.py",))
    verdict = explain(slow, median, slow_facts=facts("worker:1", shared), median_facts=facts("worker:0", CALM))
    assert verdict.cause == "gpu"
    assert verdict.sentence.startswith(
        "worker:1 takes 60.0 ms a step (worker:0: 20.0 ms) and its GPU 1 is shared with 1 other process "
        "(pid 4242 alice, python other.py) (median worker worker:0's GPU 0:"
    )
    assert verdict.sentence.endswith("the likely cause, though no part of its step grew by half the difference")
    # Without GPUs the rule stays quiet.
    assert explain(slow, median, slow_facts=RoleFacts("worker:1"), median_facts=RoleFacts("worker:0")).cause == "none"


def sleeper(env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A real process that NVML (the double) lists on the GPUs of its CUDA_VISIBLE_DEVICES."""
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], env={**os.environ, **env}, start_new_session=True
    )


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOWERDECK_NVML_MODULE", FAKE_NVML)
    monkeypatch.setenv("FAKE_NVML_GPUS", "8")
    monkeypatch.setenv("FAKE_NVML_HOT", "7")
    monkeypatch.delenv("FAKE_NVML_FAIL", raising=False)


def test_a_hot_gpu_shared_with_another_run_is_named_from_the_agent_s_look(tmp_path: Path, nvml: None) -> None:
    run = tmp_path / "run"
    run.mkdir()
    mine = {"TOWERDECK_RUN_DIR": str(run)}
    procs = [
        sleeper({**mine, "TOWERDECK_ROLE": "worker:0", "CUDA_VISIBLE_DEVICES": "6"}),
        sleeper({**mine, "TOWERDECK_ROLE": "worker:1", "CUDA_VISIBLE_DEVICES": "7"}),
        # Another run's trainer on worker:1's GPU. GPUs 6 and 7 of 8: tests running beside this one
        # put their roles on the low ones, and the double lists every such process of the machine.
        sleeper(
            {
                "TOWERDECK_RUN_DIR": str(tmp_path / "other-run"),
                "TOWERDECK_ROLE": "worker:3",
                "CUDA_VISIBLE_DEVICES": "7",
            }
        ),
    ]
    try:
        roles = [
            role_status("worker:1", host="127.0.0.1", gpus=[7]),
            role_status("worker:0", host="localhost", gpus=[6]),
        ]
        deadline = time.monotonic() + 30
        while True:  # the processes' environments are readable once they have started
            looked = look_at_gpus(roles, run)
            if (len(looked["worker:1"][0]) == 1 and looked["worker:1"][0][0].others) or time.monotonic() > deadline:
                break
        (hot,), problem = looked["worker:1"]
        assert problem is None
        assert (hot.index, hot.temperature_c, hot.sm_clock_mhz) == (7, 92.0, 1095.0)
        assert hot.throttle_reasons == ("sw_power_cap", "sw_thermal", "hw_thermal")
        assert hot.others == (f"pid {procs[2].pid} {getpass.getuser()}, worker:3 of run other-run",)
        (calm,), _ = looked["worker:0"]
        assert (calm.index, calm.temperature_c, calm.throttle_reasons, calm.others) == (6, 46.0, POWER_CAP, ())

        slow = profile("worker:1", 50.0, device=40.0, input=10.0)
        median = profile("worker:0", 20.0, device=10.0, input=10.0)
        slow_facts = RoleFacts("worker:1", "127.0.0.1", gpus=(7,), gpu_facts=looked["worker:1"][0])
        median_facts = RoleFacts("worker:0", "localhost", gpus=(6,), gpu_facts=looked["worker:0"][0])
        verdict = explain(slow, median, slow_facts=slow_facts, median_facts=median_facts)
        assert verdict.cause == "gpu"
        assert verdict.sentence == (
            "worker:1 spends 80% of each step in device compute (median worker worker:0: 50%); its GPU 7 is hot "
            "and throttled (sw_thermal, hw_thermal, 92 °C, SM clock 1095 MHz); GPU 7 is shared with 1 other "
            f"process (pid {procs[2].pid} {getpass.getuser()}, worker:3 of run other-run) (median worker "
            "worker:0's GPU 6: 46 °C, SM clock 1980 MHz, throttled (sw_power_cap), not shared)"
        )
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_a_cpu_only_host_gives_no_gpu_figures_and_says_why_only_for_a_role_that_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOWERDECK_NVML_MODULE", FAKE_NVML)
    monkeypatch.setenv("FAKE_NVML_FAIL", "init")  # no driver
    roles = [
        role_status("worker:1", host="127.0.0.1", gpus=[1]),
        role_status("worker:0", host="127.0.0.1", gpus=[]),
        role_status("worker:2", host="gpu-box-7", gpus=[0]),
    ]
    looked = look_at_gpus(roles, tmp_path)
    assert looked["worker:0"] == ((), None)
    assert looked["worker:1"][0] == () and "no NVML" in str(looked["worker:1"][1])
    assert looked["worker:2"] == ((), "not looked at: gpu-box-7 is another host")
