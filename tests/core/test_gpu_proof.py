"""The GPU proof kit (scripts/gpu_proof.py, ``make gpu-proof``) run here against the NVML double and
a stand-in nvidia-smi reading the same double, with the CPU stand-in load: a real launch of one
role per (fake) GPU through the headless core, with the kit's python started without
site-packages (-S) to show the core needs nothing a bare GPU machine lacks. And each missing
prerequisite gives one line and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.project import ROOT

pytestmark = pytest.mark.slow
KIT = ROOT / "scripts" / "gpu_proof.py"
FAKE_NVML = str(ROOT / "tests" / "helpers" / "fake_nvml.py")
FAKE_SMI = str(ROOT / "tests" / "helpers" / "fake_nvidia_smi.py")


def kit(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, site: bool = True
) -> subprocess.CompletedProcess[str]:
    # The double's settings are the test's; its scope (this session's, tests/conftest.py) is kept.
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TOWERDECK_NVML", "FAKE_NVML")) or k == "FAKE_NVML_SCOPE"
    }
    python = [sys.executable] if site else [sys.executable, "-S"]
    return subprocess.run(
        [*python, str(KIT), "--out", str(tmp_path / "proof"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**base, **(env or {})},
    )


def test_the_kit_runs_against_the_double_and_writes_its_report(tmp_path: Path):
    env = {"TOWERDECK_NVML_MODULE": FAKE_NVML, "FAKE_NVML_GPUS": "2"}
    p = kit(tmp_path, "--nvidia-smi", FAKE_SMI, "--phase-s", "2", "--sample-period", "0.2", env=env, site=False)
    assert p.returncode == 0, p.stderr[-3000:]
    report = json.loads((tmp_path / "proof" / "report.json").read_text())
    markdown = (tmp_path / "proof" / "report.md").read_text()
    assert report["environment"]["nvml_double"] is True and report["environment"]["load"] == "cpu"
    assert "This run used the NVML double" in markdown and "NOT any figure of a real GPU" in markdown
    assert report["cluster"] == {"worker:0": 0, "worker:1": 1}
    # The double's figures differ by GPU, so a GPU joined to the wrong nvidia-smi row would differ.
    for name in ("utilization_gpu_percent", "memory_used_bytes", "temperature_c", "power_w"):
        figure = report["figures"][name]
        assert figure["n"] >= 2 and figure["max"] == 0.0, (name, figure)
    # ... and TowerDeck saw both GPUs' own values (40 C and 41 C), not one of them twice.
    assert (
        report["figures"]["temperature_c"]["towerdeck_min"],
        report["figures"]["temperature_c"]["towerdeck_max"],
    ) == (40, 41)
    mapping = report["mapping"]
    assert [(m["index"], m["towerdeck_roles"], m["nvidia_smi_roles"]) for m in mapping] == [
        (0, ["worker:0"], ["worker:0"]),
        (1, ["worker:1"], ["worker:1"]),
    ]
    assert all(m["agree"] for m in mapping) and all(m["nvidia_smi_memory_mib"] == ["512"] for m in mapping)
    phases = report["phases"]
    assert [ph["sampling"] for ph in phases] == [True, False, True, False]
    assert all(ph["samples"] > 0 for ph in phases if ph["sampling"])
    assert all(ph["samples"] == 0 for ph in phases if not ph["sampling"])  # the switch works end to end
    assert all(ph["steps_per_s"] and ph["steps_per_s"] > 0 for ph in phases)
    assert report["overhead"]["ratio_on_over_off"] > 0
    assert report["period"]["n"] > 0 and report["period"]["configured_s"] == 0.2
    assert report["left_behind"] == []
    assert "| 1 | 00000000:1B:00.0 | worker:1 |" in markdown


def test_missing_prerequisites_are_one_line(tmp_path: Path):
    bare_path = {"PATH": str(Path(sys.executable).parent) + ":/bin"}  # python, and no nvidia-smi
    cases = [
        ({**bare_path, "TOWERDECK_NVML_MODULE": FAKE_NVML}, [], "nvidia-smi was not found on PATH"),
        ({"TOWERDECK_NVML_MODULE": "/nonexistent/nvml.py"}, ["--nvidia-smi", FAKE_SMI], "NVML"),
        ({"TOWERDECK_NVML_MODULE": FAKE_NVML, "FAKE_NVML_FAIL": "init"}, ["--nvidia-smi", FAKE_SMI], "no NVML"),
    ]
    for env, args, said in cases:
        p = kit(tmp_path, *args, env=env)
        assert p.returncode == 2, (said, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gpu-proof: ") and said in lines[0], p.stderr


def test_a_load_that_cannot_start_is_one_line_naming_the_role(tmp_path: Path):
    if subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0:
        pytest.skip("torch is installed here: the torch load would start")
    env = {"TOWERDECK_NVML_MODULE": FAKE_NVML, "FAKE_NVML_GPUS": "1"}
    p = kit(tmp_path, "--nvidia-smi", FAKE_SMI, "--load", "torch", "--phase-s", "2", env=env)
    assert p.returncode == 2, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("gpu-proof: the cluster ended before every role printed step lines"), p.stderr
    assert "worker:0" in last and "torch" in last and "Traceback" not in p.stderr
