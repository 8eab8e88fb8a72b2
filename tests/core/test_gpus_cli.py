"""``python main.py gpus`` on this machine, through the NVML double (tests/helpers/fake_nvml.py):
figures per GPU, real processes on them with their user and TowerDeck run and role, a host
without NVML or without GPUs in one line, --watch ending cleanly on Ctrl-C, bad input."""

from __future__ import annotations

import getpass
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.agent.gpuquery import towerdeck_role
from tests.helpers.project import ROOT, run_cli
from tests.helpers.textcheck import raw_controls

FAKE_NVML = str(ROOT / "tests" / "helpers" / "fake_nvml.py")
SLEEPER = "import time; time.sleep(120)"


@pytest.fixture
def fake_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOWERDECK_NVML_MODULE", FAKE_NVML)
    monkeypatch.setenv("FAKE_NVML_GPUS", "2")
    monkeypatch.delenv("FAKE_NVML_FAIL", raising=False)


@pytest.fixture
def tagged_process(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A real process that TowerDeck would have started as worker:3 of run ``run-abc`` on GPU 1."""
    env = {
        **os.environ,
        "TOWERDECK_ROLE": "worker:3",
        "TOWERDECK_RUN_DIR": str(tmp_path / "runs" / "run-abc"),
        "CUDA_VISIBLE_DEVICES": "1",
    }
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER], env=env)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def gpus_json(*args: str) -> dict:
    p = run_cli("gpus", "--json", *args, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_every_gpu_with_its_figures_and_our_role_on_it(fake_gpus: None, tagged_process: subprocess.Popen[bytes]):
    [host] = gpus_json()["hosts"]
    assert host["destination"] == "this machine" and host["error"] is None
    gpus = host["snapshot"]["gpus"]
    assert [g["index"] for g in gpus] == [0, 1]
    # Each GPU's own figures from the double (they differ by index: a mix-up would show).
    assert [g["pci_bus_id"] for g in gpus] == ["00000000:1A:00.0", "00000000:1B:00.0"]
    assert [g["temperature_c"] for g in gpus] == [40, 41]
    assert [g["memory_used_bytes"] for g in gpus] == [1 << 30, 2 << 30]
    assert [g["power_w"] for g in gpus] == [100.0, 101.0] and gpus[0]["power_limit_w"] == 700.0
    assert gpus[0]["throttle_reasons"] == ["gpu_idle"] and gpus[1]["throttle_reasons"] == ["sw_power_cap"]
    assert not [p for p in gpus[0]["processes"] if p["pid"] == tagged_process.pid]
    [proc] = [p for p in gpus[1]["processes"] if p["pid"] == tagged_process.pid]
    assert proc["role"] == "worker:3" and proc["run"] == "run-abc"
    assert proc["user"] == getpass.getuser() and proc["used_memory_bytes"] == 512 << 20
    assert "time.sleep(120)" in proc["command"]

    text = run_cli("gpus", timeout=60)
    assert text.returncode == 0, text.stderr
    line = next(x for x in text.stdout.splitlines() if f"pid {tagged_process.pid} " in x)
    assert "run run-abc role worker:3" in line and getpass.getuser() in line


def test_role_found_through_a_parent_when_the_child_cleared_its_environment(tmp_path: Path):
    env = {**os.environ, "TOWERDECK_ROLE": "ps:0", "TOWERDECK_RUN_DIR": "/somewhere/runs/r1"}
    code = "import subprocess,sys; p=subprocess.Popen(['sleep','60'],env={}); print(p.pid,flush=True); p.wait()"
    parent = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        with open(f"/proc/{child}/environ", "rb") as f:
            assert b"TOWERDECK_ROLE" not in f.read()
        assert towerdeck_role(child) == ("/somewhere/runs/r1", "ps:0")
        os.kill(child, signal.SIGKILL)
    finally:
        parent.kill()
        parent.wait()


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"FAKE_NVML_FAIL": "init"}, "no NVML on"),
        ({"FAKE_NVML_GPUS": "0"}, "no NVIDIA GPU on"),
        ({"TOWERDECK_NVML_MODULE": "/nonexistent/nvml.py"}, "NVML bindings not available"),
    ],
)
def test_a_host_without_nvml_or_gpus_says_so_in_one_line(fake_gpus: None, env: dict[str, str], said: str):
    p = run_cli("gpus", env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    assert len(p.stdout.strip().splitlines()) == 1 and said in p.stdout, p.stdout
    assert "Traceback" not in p.stderr


def test_watch_refreshes_and_ctrl_c_exits_0(fake_gpus: None):
    counted = run_cli("gpus", "--watch", "--interval", "0.2", "--count", "3", "--json", timeout=60)
    assert counted.returncode == 0, counted.stderr
    frames = [json.loads(line) for line in counted.stdout.splitlines()]
    assert len(frames) == 3
    times = [f["hosts"][0]["snapshot"]["t"] for f in frames]
    assert times[0] <= times[1] <= times[2] and times[0] < times[2]  # new snapshots, not one repeated

    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "main.py"), "gpus", "--watch", "--interval", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    seen = 0
    deadline = time.monotonic() + 60
    while seen < 2 and time.monotonic() < deadline:
        seen += "Ctrl-C to stop" in proc.stdout.readline()
    assert seen == 2
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path):
    p = run_cli("gpus", "--hosts", "-oProxyCommand=x", timeout=60)
    assert p.returncode == 2 and "--hosts" in p.stderr and "Traceback" not in p.stderr
    bad = tmp_path / "c.toml"
    bad.write_text('[jobs.worker]\ntasks = ["nohost"]\n')
    p = run_cli("gpus", str(bad), timeout=60)
    assert p.returncode == 2 and "c.toml" in p.stderr and "Traceback" not in p.stderr


def test_preflight_warns_when_a_tasks_gpu_is_busy_without_failing(
    fake_gpus: None, tagged_process: subprocess.Popen[bytes], tmp_path: Path
):
    from core.cluster.spec import parse_text
    from core.preflight.runner import format_table, preflight
    from tests.helpers.ports import free_ports

    p = free_ports(3)
    text = f"""
name = "busy"
strategy = "custom"
command = ["sleep", "60"]
[jobs.worker]
tasks = [{{ address = "127.0.0.1:{p[0]}", gpus = [0] }}, {{ address = "127.0.0.1:{p[1]}", gpus = [1] }},
         {{ address = "127.0.0.1:{p[2]}", gpus = [5] }}]
"""
    spec, problems = parse_text(text, tmp_path / "c.toml")
    assert spec is not None, problems
    [result] = preflight(spec, timeout_s=60)
    assert result.ok, format_table([result])  # warnings do not stop a launch
    warnings = [c.detail for c in result.warnings]
    assert len(warnings) == 2, warnings  # GPU 0 is free: no warning for worker:0
    assert warnings[0].startswith("GPU 1 (for worker:1) is busy: ")
    assert f"pid {tagged_process.pid} {getpass.getuser()} 0.5 GiB (run run-abc worker:3)" in warnings[0]
    assert warnings[1] == "GPU 5 (for worker:2) does not exist there: it has 2"
    assert "WARN" in format_table([result])


def sleeper_on_gpu1(env: dict[str, str], argv0: str | None = None) -> subprocess.Popen[bytes]:
    """A process tagged as TowerDeck's worker:3 on GPU 1, with ``env`` over this one's (an empty
    value removes the variable), its command line starting with ``argv0`` when given."""
    tagged = {**os.environ, "TOWERDECK_ROLE": "worker:3", "CUDA_VISIBLE_DEVICES": "1", **env}
    argv = [sys.executable, "-c", SLEEPER]
    if argv0 is not None:
        argv = ["bash", "-c", f'exec -a "$0" {sys.executable} -c "{SLEEPER}"', argv0]
    return subprocess.Popen(argv, env={k: v for k, v in tagged.items() if v})


def listed_on_gpu1(**env: str) -> set[int]:
    p = run_cli("gpus", "--json", env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    [host] = json.loads(p.stdout)["hosts"]
    return {proc["pid"] for proc in host["snapshot"]["gpus"][1]["processes"]}


def test_the_double_sees_only_this_sessions_roles_not_another_suites_or_a_real_runs(fake_gpus: None):
    """Two suites on one machine (or a suite beside a real run) must not see each other's roles on
    their GPUs: the double lists a process only with this session's FAKE_NVML_SCOPE."""
    ours = sleeper_on_gpu1({})
    other_suite = sleeper_on_gpu1({"FAKE_NVML_SCOPE": "pytest-1-another-suite"})
    real_run = sleeper_on_gpu1({"FAKE_NVML_SCOPE": ""})  # a real launch carries no scope
    try:
        deadline = time.monotonic() + 30
        while ours.pid not in (seen := listed_on_gpu1()) and time.monotonic() < deadline:
            pass  # its environment is readable once it has started
        assert ours.pid in seen
        assert other_suite.pid not in seen and real_run.pid not in seen
    finally:
        for proc in (ours, other_suite, real_run):
            proc.kill()
            proc.wait()


def test_a_session_without_a_scope_sees_only_processes_without_one(fake_gpus: None):
    """The GPU proof kit run by hand sets no scope: it sees unscoped roles (its own), never a test
    session's."""
    ours = sleeper_on_gpu1({})
    unscoped = sleeper_on_gpu1({"FAKE_NVML_SCOPE": ""})
    try:
        deadline = time.monotonic() + 30
        while unscoped.pid not in (seen := listed_on_gpu1(FAKE_NVML_SCOPE="")) and time.monotonic() < deadline:
            pass
        assert unscoped.pid in seen and ours.pid not in seen
    finally:
        for proc in (ours, unscoped):
            proc.kill()
            proc.wait()


def test_gpu_names_roles_and_command_lines_are_shown_escaped(fake_gpus: None):
    """NVML's GPU name, a process's TOWERDECK_ROLE and its command line reach the terminal."""
    title = "\x1b]0;PWNED\x07\x1b[2J"
    proc = sleeper_on_gpu1({"TOWERDECK_ROLE": f"worker:3{title}"}, argv0=f"arg{title}\tz")
    try:
        deadline = time.monotonic() + 30
        while proc.pid not in listed_on_gpu1() and time.monotonic() < deadline:
            pass
        p = run_cli("gpus", env={"FAKE_NVML_NAME": f"H100{title}\u202e"}, timeout=60)
        assert p.returncode == 0, p.stderr
        assert raw_controls(p.stdout) == [], p.stdout
        assert "H100\\x1b]0;PWNED\\x07\\x1b[2J\\u202e"[:24] in p.stdout
        line = next(x for x in p.stdout.splitlines() if f"pid {proc.pid} " in x)
        assert "role worker:3\\x1b]0;PWNED\\x07\\x1b[2J" in line and "arg\\x1b]0;PWNED\\x07\\x1b[2J\\x09z " in line
    finally:
        proc.kill()
        proc.wait()


def test_a_role_name_that_is_not_utf8_does_not_fail_the_hosts_query(fake_gpus: None):
    """Any process may set TOWERDECK_ROLE to any bytes; the old query failed for the whole host."""
    env = {k.encode(): v.encode() for k, v in os.environ.items()}
    env.update({b"TOWERDECK_ROLE": b"worker:\xff\x1b[2J", b"CUDA_VISIBLE_DEVICES": b"1"})
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER], env=env)
    try:
        deadline = time.monotonic() + 30
        while proc.pid not in listed_on_gpu1() and time.monotonic() < deadline:
            pass
        p = run_cli("gpus", timeout=60)
        assert p.returncode == 0, p.stdout + p.stderr
        line = next(x for x in p.stdout.splitlines() if f"pid {proc.pid} " in x)
        assert "role worker:\ufffd\\x1b[2J" in line and raw_controls(p.stdout) == []
    finally:
        proc.kill()
        proc.wait()


def test_a_signal_while_a_feed_s_reader_starts_leaves_a_feed_that_closes(monkeypatch) -> None:
    """`gpus` ended by SIGTERM printed a traceback beside its message once (the full suite beside
    stress-ng): the signal's Interrupted came out of the reader thread's start(), and close()
    joined a thread that had not started ("cannot join thread before it is started")."""
    import threading

    from core.cli.interrupts import Interrupted
    from core.preflight.gpus import GpuTarget, HostFeed

    feed = HostFeed(GpuTarget("here"))
    real_start = threading.Thread.start

    def interrupted_start(self: threading.Thread) -> None:
        if self.name.startswith("gpus-"):
            raise Interrupted(15)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", interrupted_start)
    try:
        feed.start()
    except Interrupted:
        pass
    else:
        raise AssertionError("the signal did not reach start()")
    feed.close()  # no RuntimeError, and the query's process is ended
    assert feed._proc is not None and feed._proc.poll() is not None
