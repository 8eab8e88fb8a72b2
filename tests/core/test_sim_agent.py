"""The simulating host agent (core/agent/simulate.py): the real agent over its JSON protocol, with
roles simulated instead of forked; a real CLI launch of a generated cluster with
TOWERDECK_SIMULATE=1; the cluster generator (scripts/sim_cluster.py)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from core.agent.protocol import parse_start
from core.agent.simlines import cost, step_text
from core.agent.simulate import PID_BASE, SimRole, Simulator
from core.run.journal import iter_jsonl
from core.telemetry.metrics import MetricParser
from core.telemetry.pci import normalize_bus_id
from core.telemetry.placement import PlacementAggregator
from tests.helpers.agent_process import AgentProcess, start
from tests.helpers.cli_launch import Launch
from tests.helpers.procs import with_marker
from tests.helpers.project import ROOT, TRAINERS, run_cli
from tests.helpers.waits import wait_for

SIM = ["python3", "-u", "sim_trainer.py"]


def pid_max() -> int:
    return int(Path("/proc/sys/kernel/pid_max").read_text())


def next_sample(agent: AgentProcess, timeout_s: float = 20.0, **alive: bool) -> dict[str, Any]:
    """The next ``sample`` whose roles are alive or not as ``alive`` says (role name -> alive)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        event = agent.wait_for("sample", timeout_s=deadline - time.time())
        roles = event["roles"]
        if all(name in roles and roles[name]["alive"] == want for name, want in alive.items()):
            return event
    raise AssertionError(f"no sample with {alive}")


@pytest.fixture
def agent() -> Any:
    proc = AgentProcess(args=("--simulate", "--sample-period", "0.3"))
    yield proc
    if proc.proc.poll() is None:
        proc.proc.kill()
    proc.proc.wait(10)


@pytest.mark.timeout(90)
def test_simulated_roles_stream_the_lines_of_their_logs_and_samples_show_8_gpus_holding_them(
    agent: AgentProcess, tmp_path: Path
) -> None:
    logs = {name: tmp_path / f"{name.replace(':', '-')}.log" for name in ("worker:0", "worker:1")}
    first = start(
        agent,
        "worker:0",
        [*SIM, "--rate_hz=20", "--placement", "--job_name=worker", "--task_index=0"],
        logs["worker:0"],
        env={"CUDA_VISIBLE_DEVICES": "3"},
    )
    second = start(
        agent, "worker:1", [*SIM, "--rate_hz=20", "--format=keras"], logs["worker:1"], env={"CUDA_VISIBLE_DEVICES": "5"}
    )
    pids = {"worker:0": first["pid"], "worker:1": second["pid"]}
    # Synthetic pids: above any pid the kernel can give, so no real process is ever signalled by one.
    assert all(pid >= PID_BASE > pid_max() for pid in pids.values()), pids
    assert pids["worker:0"] != pids["worker:1"]

    sample = next_sample(agent, **{"worker:0": True, "worker:1": True})
    gpus = sample["gpus"]
    assert [g["index"] for g in gpus] == list(range(8))
    assert set(gpus[0]) >= {"name", "uuid", "pci_bus_id", "utilization_gpu_percent", "memory_used_bytes", "power_w"}
    assert gpus[3]["processes"] == [
        {"pid": pids["worker:0"], "used_memory_bytes": gpus[3]["processes"][0]["used_memory_bytes"], "role": "worker:0"}
    ]
    assert [p["role"] for p in gpus[5]["processes"]] == ["worker:1"]
    assert gpus[3]["utilization_gpu_percent"] > 50 and gpus[0]["utilization_gpu_percent"] == 0
    assert all(not g["processes"] for k, g in enumerate(gpus) if k not in (3, 5))
    assert "simulated" in gpus[0]["name"]
    for name in pids:
        role = sample["roles"][name]
        assert role["pid"] == pids[name] and role["cpu_percent"] > 50 and role["rss_bytes"] > 1 << 30

    agent.wait_for("output", role="worker:1")
    agent.send({"op": "stop", "role": "worker:0", "grace_s": 5})
    assert agent.wait_for("exited", role="worker:0")["returncode"] == 0
    agent.send({"op": "kill", "role": "worker:1"})
    killed = agent.wait_for("exited", role="worker:1")
    assert killed["signal"] == signal.SIGKILL and killed["returncode"] is None

    # What was streamed is what is on disk, byte for byte, and the controller's parsers read it.
    text = {name: log.read_bytes().decode() for name, log in logs.items()}  # \r kept: Keras redraws its bar
    for name in logs:
        assert agent.output(name) == text[name], name
    steps = [s.step for s in MetricParser().feed(text["worker:0"]) if s.step is not None]
    assert steps == list(range(1, len(steps) + 1)) and len(steps) >= 5
    keras = [s for s in MetricParser().feed(text["worker:1"]) if s.step is not None]
    assert keras and keras[0].source == "keras" and all(s.loss is not None for s in keras)
    placement = PlacementAggregator()
    placement.feed_text(text["worker:0"])
    devices = placement.summary()["devices"]
    assert [normalize_bus_id(d["pci_bus_id"]) for d in devices] == [normalize_bus_id(gpus[3]["pci_bus_id"])]


@pytest.mark.timeout(60)
def test_simulated_faults_crash_with_a_traceback_stall_and_ignore_sigterm_until_killed(
    agent: AgentProcess, tmp_path: Path
) -> None:
    crash, stall, stubborn = (tmp_path / f"{n}.log" for n in ("crash", "stall", "stubborn"))
    start(agent, "worker:0", [*SIM, "--rate_hz=50", "--crash_at_step=10"], crash, env={"CUDA_VISIBLE_DEVICES": "0"})
    start(agent, "worker:1", [*SIM, "--rate_hz=50", "--stall_at_step=5"], stall, env={"CUDA_VISIBLE_DEVICES": "1"})
    start(agent, "worker:2", [*SIM, "--rate_hz=50", "--ignore_sigterm"], stubborn, env={"CUDA_VISIBLE_DEVICES": "2"})

    crashed = agent.wait_for("exited", role="worker:0")
    assert crashed["returncode"] == 1 and crashed["signal"] is None
    text = crash.read_text()
    assert "Traceback (most recent call last):" in text and "RuntimeError: simulated crash at step 10" in text
    assert "Step: 9," in text and "Step: 10," not in text

    # Stalled: alive in every sample, no line after step 5, its GPU idle.
    wait_for(lambda: "Step: 5," in stall.read_text(), timeout_s=20)
    size = stall.stat().st_size
    for _ in range(3):
        sample = next_sample(agent, **{"worker:1": True})
    assert stall.stat().st_size == size and "Step: 6," not in stall.read_text()
    assert sample["gpus"][1]["utilization_gpu_percent"] < 5
    assert [p["role"] for p in sample["gpus"][1]["processes"]] == ["worker:1"]

    # SIGTERM ignored: the stop's kill escalation ends it with signal 9 after the grace.
    agent.send({"op": "stop", "role": "worker:2", "grace_s": 0.5})
    ended = agent.wait_for("exited", role="worker:2")
    assert ended["signal"] == signal.SIGKILL and ended["stopped"] is True

    # Signals by name go to the simulation: STOP pauses its lines, CONT resumes, TERM ends it with 0.
    agent.send({"op": "signal", "role": "worker:1", "signal": "TERM"})
    assert agent.wait_for("exited", role="worker:1")["returncode"] == 0


@pytest.mark.timeout(60)
def test_a_simulated_lost_host_kills_its_whole_agent(tmp_path: Path) -> None:
    agent = AgentProcess(args=("--simulate",))
    try:
        start(agent, "worker:0", [*SIM, "--lose_host_at_s=0.5"], tmp_path / "w0.log")
        assert agent.proc.wait(30) == -signal.SIGKILL
    finally:
        if agent.proc.poll() is None:
            agent.proc.kill()
            agent.proc.wait(10)


@pytest.mark.timeout(60)
def test_a_bad_simulation_flag_is_one_start_failed_line_naming_it_and_the_agent_goes_on(
    agent: AgentProcess, tmp_path: Path
) -> None:
    log = tmp_path / "w0.log"
    agent.send(
        {"op": "start", "role": "worker:0", "attempt": 1, "argv": [*SIM, "--rate_hz=fast"], "env": {}, "log": str(log)}
    )
    failed = agent.wait_for("start_failed", role="worker:0")
    assert "--rate_hz='fast' is not a number" in failed["error"] and "\n" not in failed["error"]
    assert failed["error"] in log.read_text()
    agent.send({"op": "ping", "id": 7})
    assert agent.wait_for("pong")["id"] == 7

    # A simulated role has no TensorFlow to profile: said at once, nothing started.
    start(agent, "worker:1", SIM, tmp_path / "w1.log")
    profile = {"id": "p1", "role": "worker:1", "address": "127.0.0.1:2222", "seconds": 2, "logdir": "profiles/t/w1"}
    agent.send({"op": "profile", **profile})
    profiled = agent.wait_for("profiled", id="p1")
    assert profiled["ok"] is False and "simulated" in profiled["reply"]["error"]


def test_a_stop_read_late_keeps_the_steps_a_trainer_printed_meanwhile(tmp_path: Path) -> None:
    """An agent held up (its controller lags, so its writes block) reads a stop late: the steps
    a real trainer printed meanwhile are in its log first, then it ends."""
    log = tmp_path / "w0.log"
    log.touch()
    simulator = Simulator("host")
    request = parse_start({"op": "start", "role": "worker:0", "argv": [*SIM, "--rate_hz=100"], "log": str(log)})
    role = simulator.start(request, "token")
    sim = role.sim
    assert isinstance(sim, SimRole)
    sim.started_at -= 1.0  # the agent was busy for a second: a hundred steps are due
    sim.next_step_at -= 1.0
    sim.signal(signal.SIGTERM)
    simulator.tick()
    steps = [s.step for s in MetricParser().feed(log.read_text()) if s.step is not None]
    assert len(steps) >= 100 and steps == list(range(1, len(steps) + 1))

    def ended() -> bool:
        simulator.tick()
        return role.leader_done

    wait_for(ended, timeout_s=10)
    assert role.returncode == 0 and role.signal is None


@pytest.mark.parametrize(("fmt", "source"), [("step", "classic"), ("keras", "keras"), ("tf1", "tf1_hooks")])
def test_every_simulated_line_format_reads_back_as_each_step_and_its_loss(fmt: str, source: str) -> None:
    """250 steps (Keras: two and a half epochs of bars) give the controller's parser every step once."""
    text = "".join(step_text(fmt, s, index=1, period_s=0.1, total_steps=250) for s in range(1, 251)) + "\n"
    samples = [x for x in MetricParser().feed(text) if x.step is not None]
    assert [x.step for x in samples] == list(range(1, 251))
    assert {x.source for x in samples} == {source}
    assert [x.loss for x in samples] == [pytest.approx(cost(s, 1), abs=1e-4) for s in range(1, 251)]


def test_sim_trainer_run_for_real_refuses_and_says_where_it_runs() -> None:
    result = subprocess.run(
        [sys.executable, str(TRAINERS / "sim_trainer.py"), "--rate_hz=10"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and "TOWERDECK_SIMULATE=1" in result.stderr and not result.stdout


def generate(out: Path, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "sim_cluster.py"), *args, str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return out.read_text()


@pytest.mark.timeout(240)
def test_the_generator_spreads_1024_workers_over_128_loopback_hosts_and_the_file_validates(tmp_path: Path) -> None:
    text = generate(tmp_path / "sim1024.toml", "--workers", "1024")
    tasks = re.findall(r'\{ address = "(127\.0\.0\.\d+):(\d+)", gpus = \[(\d+)\]', text)
    assert len(tasks) == 1024
    assert {host for host, _, _ in tasks} == {f"127.0.0.{h}" for h in range(1, 129)}
    assert all(
        host == f"127.0.0.{i % 128 + 1}" and int(gpu) == (i // 128) % 8 for i, (host, _, gpu) in enumerate(tasks)
    )
    result = run_cli("validate", str(tmp_path / "sim1024.toml"))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "1024 worker" in result.stdout

    faults = generate(tmp_path / "faults.toml", "--workers", "16", "--hosts", "4", "--faults")
    assert "--crash_at_step=" in faults and "--stall_at_step=" in faults and "--slow=3" in faults
    assert 'policy = "OnFailure"' in faults


def test_the_generator_answers_help_and_refuses_bad_sizes_in_one_line(tmp_path: Path) -> None:
    script = str(ROOT / "scripts" / "sim_cluster.py")
    helped = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "--workers" in helped.stdout and "--faults" in helped.stdout
    bad = subprocess.run(
        [sys.executable, script, "--workers", "0", str(tmp_path / "x.toml")], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "--workers must be 1 or more" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "x.toml").exists()


@pytest.mark.timeout(300)
def test_a_simulated_16_worker_launch_on_4_hosts_runs_shows_steps_and_stops_leaving_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launches: list[Launch]
) -> None:
    cluster = tmp_path / "sim16.toml"
    generate(cluster, "--workers", "16", "--hosts", "4", "--rate-hz", "5")
    monkeypatch.setenv("TOWERDECK_SIMULATE", "1")  # the launcher's environment, inherited by its agents
    run_dir = tmp_path / "runs" / "sim16"
    launch = Launch(cluster, run_dir)
    launches.append(launch)
    launch.wait_role("ps:0", "running", timeout_s=120)  # the control socket answers from here on
    workers = [f"worker:{i}" for i in range(16)]

    def stepping() -> dict[str, Any] | None:
        status = launch.status()
        roles = {r["role"]: r for r in status["roles"]}
        ok = all(
            roles[w]["state"] == "running" and (roles[w].get("step") or 0) > 0 and roles[w].get("loss") is not None
            for w in workers
        )
        return status if ok else None

    status = wait_for(stepping, timeout_s=90, what="every worker running, with steps and loss")
    assert {r["host"] for r in status["roles"]} == {f"127.0.0.{h}" for h in range(1, 5)}
    assert all(r["pid"] >= PID_BASE for r in status["roles"])
    agents = with_marker(str(run_dir))
    assert len(agents) >= 4  # one agent per loopback host, each running the run's agent.pyz

    launch.proc.send_signal(signal.SIGINT)  # Ctrl-C
    code, out = launch.finish(timeout_s=120)
    assert code in (0, 130), out[-3000:]
    assert "stopped" in out
    wait_for(lambda: not with_marker(str(run_dir)), timeout_s=30)

    # The run directory holds every worker's steps and losses, as `runs` reads them back.
    listed = run_cli("runs", "--root", str(tmp_path / "runs"), "--json", timeout=60)
    assert listed.returncode == 0, listed.stderr
    summary = json.loads(listed.stdout.splitlines()[0])
    figures = summary["role_figures"]
    assert all((figures[f"worker:{i}"]["steps"] or 0) > 0 for i in range(16)), figures
    assert all(figures[f"worker:{i}"]["last_loss"] is not None for i in range(16))
    assert os.path.isdir(run_dir / "roles" / "worker-15")


def worker_steps(run_dir: Path, worker: str) -> list[int]:
    """The steps recorded in a worker's metrics.jsonl (compact: decoded as every reader decodes it)."""
    path = run_dir / "roles" / worker.replace(":", "-") / "metrics.jsonl"
    return [r["step"] for r in iter_jsonl(path) if isinstance(r.get("step"), int)]


def launch_8_stepping(
    cluster: Path, run_dir: Path, monkeypatch: pytest.MonkeyPatch, launches: list[Launch]
) -> tuple[Launch, list[str]]:
    """``main.py launch`` of an 8-worker simulated cluster, once every worker has recorded 5 steps."""
    monkeypatch.setenv("TOWERDECK_SIMULATE", "1")  # the launcher's environment, inherited by its agents
    launch = Launch(cluster, run_dir)
    launches.append(launch)
    launch.wait_role("ps:0", "running", timeout_s=120)
    workers = [f"worker:{i}" for i in range(8)]
    wait_for(lambda: all(len(worker_steps(run_dir, w)) >= 5 for w in workers), timeout_s=90, what="steps recorded")
    return launch, workers


@pytest.mark.timeout(300)
def test_a_sigkilled_launcher_s_simulated_run_is_reattached_and_every_step_is_recorded_without_a_gap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launches: list[Launch]
) -> None:
    """Reattach against simulating agents: the agents outlive the SIGKILLed launcher, the roles print
    on, and `attach` records every step from where the launcher's parsing stopped: none missing (the
    compact metrics go on with a key frame written by the new process)."""
    cluster = tmp_path / "sim8.toml"
    generate(cluster, "--workers", "8", "--hosts", "2", "--rate-hz", "5")
    launch, workers = launch_8_stepping(cluster, tmp_path / "runs" / "sim8", monkeypatch, launches)
    run_dir = launch.run_dir

    launch.proc.send_signal(signal.SIGKILL)
    launch.proc.communicate(timeout=30)
    agents = with_marker(str(run_dir))
    assert len(agents) >= 2, "the agents did not outlive the launcher"
    log = run_dir / "roles" / "worker-0" / "attempt-1.log"
    size = log.stat().st_size
    wait_for(lambda: log.stat().st_size > size + 200, timeout_s=30, what="worker:0 printing on, unwatched")
    at_kill = {w: max(worker_steps(run_dir, w)) for w in workers}

    attach = subprocess.Popen(
        [sys.executable, str(ROOT / "main.py"), "attach", str(run_dir), "--progress-every", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(
            lambda: all(max(worker_steps(run_dir, w)) >= at_kill[w] + 20 for w in workers),
            timeout_s=120,
            what="every worker's steps recorded again after the attach",
        )
        attach.send_signal(signal.SIGINT)  # Ctrl-C: the attached run is stopped
        out, _ = attach.communicate(timeout=120)
    finally:
        if attach.poll() is None:
            attach.kill()
            attach.communicate()
    assert attach.returncode in (0, 130), out[-3000:]
    assert "Traceback" not in out
    wait_for(lambda: not with_marker(str(run_dir)), timeout_s=30, what="no agent left")
    for worker in workers:
        steps = worker_steps(run_dir, worker)
        # Every step once and in order, across the kill. (A kill between a chunk's metrics and its
        # parsed offset could record that chunk twice; the set check below would still pass then,
        # so the count is checked too, with that one chunk's slack.)
        assert sorted(set(steps)) == list(range(1, max(steps) + 1)), (worker, steps[:5], at_kill[worker])
        assert len(steps) - len(set(steps)) <= 5, (worker, len(steps), len(set(steps)))


@pytest.mark.timeout(300)
def test_a_stop_that_coalesces_every_role_s_output_says_so_once_for_the_run_not_once_a_role(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launches: list[Launch]
) -> None:
    """Workers printing 4,000 lines a second each, and on through the stop's grace (they ignore
    SIGTERM): the controller coalesces every worker's output (behind, then stopping), and one
    warning for the run says so (a warning per role was 1,024 identical lines at 1,024 workers,
    each blaming a role for the controller's state).

    The rate makes every read of a worker's output longer than what a coalesced chunk keeps
    (COALESCE_KEEP_CHARS, 4,096): 4,000 lines of 28 characters a second is ~11 KB a 0.1 s tick. At
    1,000 a second a tick's read was ~2.8 KB, so on a machine fast enough to keep up nothing was
    coalesced and no warning was due (1 run in 7 here)."""
    cluster = tmp_path / "sim8.toml"
    text = generate(cluster, "--workers", "8", "--hosts", "2", "--rate-hz", "4000")
    cluster.write_text(text.replace('"--steps=0"]', '"--steps=0", "--ignore_sigterm"]'))
    assert "--ignore_sigterm" in cluster.read_text()
    launch, _workers = launch_8_stepping(cluster, tmp_path / "runs" / "sim8", monkeypatch, launches)
    run_dir = launch.run_dir
    launch.proc.send_signal(signal.SIGINT)
    code, out = launch.finish(timeout_s=120)
    assert code in (0, 130), out[-3000:]
    warnings = [
        json.loads(line)
        for line in (run_dir / "events.jsonl").read_text().splitlines()
        if '"warning"' in line and "newest lines" in line
    ]
    assert len(warnings) == 1, [w["message"] for w in warnings]
    assert warnings[0]["role"] is None, warnings[0]
    assert warnings[0]["message"].startswith(("the run is stopping", "the controller is more than")), warnings[0]
    wait_for(lambda: not with_marker(str(run_dir)), timeout_s=30, what="no agent left")
