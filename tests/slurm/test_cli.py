"""``python main.py launch`` / ``attach`` / ``ctl`` with a ``[slurm]`` table, against the real
Slurm of tests/slurm/conftest.py: one allocation per run, what the CLI says while it waits and
runs, what Slurm ending the job looks like, and nothing left in squeue, no process, no port."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from core.slurm.client import SlurmClient
from tests.helpers.ports import free_ports
from tests.helpers.project import ROOT, run_cli
from tests.helpers.slurm_cluster import SlurmCluster, left_in_squeue, slurm_record, write_slurm_cluster
from tests.helpers.ssh_server import assert_nothing_left_under, kill_strays

pytestmark = pytest.mark.slow


class Launcher:
    """``python main.py launch`` in the background, its output read as it comes."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "main.py"), *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            env=env,
        )
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self.lines.append(line)

    @property
    def text(self) -> str:
        with self._lock:
            return "".join(self.lines)

    def wait_for(self, what: Callable[[], bool], timeout_s: float, label: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not what():
            assert self.proc.poll() is None or what(), f"launcher ended before {label}:\n{self.text}"
            assert time.monotonic() < deadline, f"no {label} in {timeout_s:.0f} s:\n{self.text}"
            time.sleep(0.1)

    def finish(self, timeout_s: float) -> int:
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"launch did not end in {timeout_s:.0f} s; it said:\n{self.text}") from None
        self._reader.join(10)
        return code


@pytest.fixture
def launched() -> Iterator[list[Launcher]]:
    started: list[Launcher] = []
    yield started
    for launcher in started:
        if launcher.proc.poll() is None:
            launcher.proc.kill()
            launcher.proc.wait()


@dataclass(frozen=True)
class PastItsLimit:
    """The time-limit test's launch: its launcher, run directory and ports, and where it ran."""

    launcher: Launcher
    run_dir: Path
    ports: list[int]
    tmp_path: Path


@pytest.fixture(scope="module", autouse=True)
def past_its_limit(slurm: SlurmCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PastItsLimit]:
    """A launch with Slurm's smallest time limit (one minute), started as this module's first test
    starts and judged by test_a_run_past_its_slurm_time_limit_says_timed_out_by_slurm: slurmctld
    checks limits about every 30 s, so the run ends 60-90 s after it starts, and the module's tests
    before that one run meanwhile instead of the suite waiting for it alone (the partition
    oversubscribes its CPUs, and every other test watches its own job, ports and folder). Run alone,
    that test waits for it as it always did. Whatever is left at the module's end is stopped."""
    tmp_path = tmp_path_factory.mktemp("past-its-limit")
    # The light trainer: what is tested is Slurm's end and its words, not TensorFlow's.
    path, ports = write_slurm_cluster(tmp_path, slurm, steps=0, trainer="light")
    path.write_text(path.read_text().replace('time = "10"', 'time = "1"'))
    run_dir = tmp_path / "run"
    # The environment the autouse data_dir fixture and slurm_env give a test, for a launch that
    # outlives the first test: its own runs root and settings, never the user's, and SLURM_CONF.
    env = {
        **os.environ,
        **slurm.env,
        "TOWERDECK_DATA_DIR": str(tmp_path / "towerdeck-data"),
        "TOWERDECK_SETTINGS_DIR": str(tmp_path / "towerdeck-settings"),
    }
    launcher = Launcher("launch", str(path), "--run-dir", str(run_dir), env=env)
    try:
        yield PastItsLimit(launcher, run_dir, ports, tmp_path)
    finally:
        if launcher.proc.poll() is None:  # its test did not run, or failed before the end
            os.killpg(launcher.proc.pid, signal.SIGINT)  # as Ctrl-C: the launch cancels its job
            try:
                launcher.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(launcher.proc.pid, signal.SIGKILL)
                launcher.proc.wait()
        kill_strays(tmp_path)


def training(run_dir: Path) -> bool:
    log = run_dir / "roles" / "worker-1" / "attempt-1.log"
    return log.is_file() and "Step" in log.read_text()


def test_launch_through_slurm_trains_to_success_and_cancels_the_allocation(
    slurm: SlurmCluster, slurm_env: dict[str, str], tmp_path: Path
) -> None:
    path, ports = write_slurm_cluster(tmp_path, slurm, steps=200)
    run_dir = tmp_path / "run"
    result = run_cli("launch", str(path), "--run-dir", str(run_dir), timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    record = slurm_record(run_dir)
    job_id = record["job_id"]
    assert record["nodes"] == [slurm.node] and record["nodelist"] == slurm.node
    assert record["partition"] == slurm.partition
    assert record["hosts"] == {"127.0.0.1": slurm.node}
    assert record["steps"]["127.0.0.1"].startswith(f"{job_id}.")
    assert f"Slurm job {job_id} on {slurm.node} (partition {slurm.partition})" in result.stdout
    assert "succeeded" in result.stdout
    journal = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert any(r.get("kind") == "slurm" and r.get("state") == "running" for r in journal)
    client = SlurmClient(env=slurm.env)
    assert left_in_squeue(client, job_id).strip() == ""
    end = client.job_end(job_id)
    assert end is not None and end.state == "CANCELLED"  # cancelled by the run's end, not left to its time limit
    assert_nothing_left_under(tmp_path, ports)


def test_scancel_from_outside_mid_run_says_cancelled_by_slurm_and_leaves_nothing(
    slurm: SlurmCluster, slurm_env: dict[str, str], tmp_path: Path, launched: list[Launcher]
) -> None:
    """The light trainer exits 0 on SIGTERM (it saves first, as PreemptionCheckpointHandler does):
    before, such a run read as succeeded about half the time (2 of 4 runs), as only Slurm can
    tell that a clean exit nobody asked for was its doing."""
    path, ports = write_slurm_cluster(tmp_path, slurm, steps=0, trainer="light")
    run_dir = tmp_path / "run"
    launcher = Launcher("launch", str(path), "--run-dir", str(run_dir))
    launched.append(launcher)
    launcher.wait_for(lambda: training(run_dir), 180, "training")
    job_id = slurm_record(run_dir)["job_id"]
    client = SlurmClient(env=slurm.env)
    client.run(["scancel", job_id])  # someone else's scancel (an admin, a preemption script)
    code = launcher.finish(90)
    assert code != 0, launcher.text
    info = json.loads((run_dir / "run.json").read_text())
    assert info["reason"] == f"cancelled by Slurm (job {job_id})", info
    assert info["result"] != "succeeded", info
    assert info["slurm"]["state"] == "ended", info["slurm"]
    assert f"cancelled by Slurm (job {job_id})" in launcher.text
    # Each role's end says whose doing it was, not a bare SIGTERM failure.
    ends = [line for line in launcher.text.splitlines() if line.startswith(("  ps:0", "  worker:"))]
    assert len(ends) == 3 and all("cancelled by Slurm" in line for line in ends), launcher.text
    assert "FAILED" not in launcher.text
    assert left_in_squeue(client, job_id).strip() == ""
    assert_nothing_left_under(tmp_path, ports)
    kill_strays(tmp_path)


def test_a_held_job_shows_its_pending_reason_and_ctrl_c_cancels_it(
    slurm: SlurmCluster, slurm_env: dict[str, str], tmp_path: Path, launched: list[Launcher]
) -> None:
    path, ports = write_slurm_cluster(tmp_path, slurm, steps=200, extra='extra_args = ["--hold"]')
    run_dir = tmp_path / "run"
    launcher = Launcher("launch", str(path), "--run-dir", str(run_dir))
    launched.append(launcher)
    # Submitted, it pends first with no reason yet; squeue's reason follows on its own line.
    launcher.wait_for(lambda: ": pending (JobHeldUser)" in launcher.text, 60, "pending reason")
    job_id = slurm_record(run_dir)["job_id"]
    assert f"waiting for Slurm job {job_id}: pending (JobHeldUser)" in launcher.text
    status = run_cli("ctl", str(run_dir), "status", "--json", timeout=30)
    assert status.returncode == 0, status.stderr
    reply = json.loads(status.stdout)
    assert reply["slurm"]["state"] == "pending" and reply["slurm"]["reason"] == "JobHeldUser", reply
    assert reply["slurm"]["job_id"] == job_id
    text = run_cli("ctl", str(run_dir), "status", timeout=30)
    assert f"waiting for Slurm job {job_id}: pending (JobHeldUser)" in text.stdout
    os.kill(launcher.proc.pid, signal.SIGINT)  # Ctrl-C while pending
    code = launcher.finish(60)
    assert code == 130, launcher.text  # EXIT_INTERRUPTED
    assert "Traceback" not in launcher.text
    client = SlurmClient(env=slurm.env)
    assert left_in_squeue(client, job_id).strip() == ""
    end = client.job_end(job_id)
    assert end is not None and end.state == "CANCELLED"
    assert not (run_dir / "roles" / "worker-0" / "attempt-1.log").exists()  # nothing started
    assert_nothing_left_under(tmp_path, ports)


def sruns_of(job_id: str) -> list[psutil.Process]:
    """srun processes of the job on this machine (they run in the launcher's cwd, not the run's)."""
    found = []
    for p in psutil.process_iter(["name", "cmdline", "status"]):
        alive = p.info["name"] == "srun" and p.info["status"] != psutil.STATUS_ZOMBIE
        if alive and f"--jobid={job_id}" in (p.info["cmdline"] or []):
            found.append(p)
    return found


def test_attach_after_the_launcher_is_sigkilled_takes_the_roles_over_and_stop_leaves_nothing(
    slurm: SlurmCluster, slurm_env: dict[str, str], tmp_path: Path, launched: list[Launcher]
) -> None:
    path, ports = write_slurm_cluster(tmp_path, slurm, steps=0, trainer="light")
    run_dir = tmp_path / "run"
    launcher = Launcher("launch", str(path), "--run-dir", str(run_dir))
    launched.append(launcher)
    launcher.wait_for(lambda: training(run_dir), 180, "training")
    job_id = slurm_record(run_dir)["job_id"]
    launcher.proc.send_signal(signal.SIGKILL)
    launcher.finish(30)
    client = SlurmClient(env=slurm.env)
    log = run_dir / "roles" / "worker-1" / "attempt-1.log"
    size = log.stat().st_size
    deadline = time.monotonic() + 60
    while log.stat().st_size == size:  # the roles train on with nobody watching
        assert time.monotonic() < deadline, "the roles did not keep running after the launcher was killed"
        time.sleep(0.2)
    assert "RUNNING" in client.run(["squeue", "-h", f"--jobs={job_id}", "-o", "%T"])

    attach = Launcher("attach", str(run_dir))
    launched.append(attach)
    attach.wait_for(lambda: attach.text.count("reattached") >= 3, 60, "three reattached roles")
    assert f"Slurm job {job_id} on {slurm.node}: reattaching" in attach.text
    status = run_cli("ctl", str(run_dir), "status", "--json", timeout=30)
    reply = json.loads(status.stdout)
    assert {r["role"]: r["state"] for r in reply["roles"]} == {
        "ps:0": "running",
        "worker:0": "running",
        "worker:1": "running",
    }, reply
    assert reply["slurm"]["job_id"] == job_id and reply["slurm"]["state"] == "running"
    stop = run_cli("ctl", str(run_dir), "stop-all", timeout=30)
    assert stop.returncode == 0, stop.stderr
    code = attach.finish(120)
    assert code != 0 or "stopped" in attach.text, attach.text
    assert "Traceback" not in attach.text
    info = json.loads((run_dir / "run.json").read_text())
    assert info["state"] == "done" and info["result"] == "stopped", info
    assert left_in_squeue(client, job_id).strip() == ""
    end = client.job_end(job_id)
    assert end is not None and end.state == "CANCELLED"
    assert_nothing_left_under(tmp_path, ports)
    deadline = time.monotonic() + 20
    while sruns_of(job_id):  # the killed launcher's srun ends with its step
        assert time.monotonic() < deadline, [p.cmdline() for p in sruns_of(job_id)]
        time.sleep(0.1)


def test_validate_remote_checks_slurm_and_names_a_wrong_partition(
    slurm: SlurmCluster, slurm_env: dict[str, str], tmp_path: Path
) -> None:
    path, _ = write_slurm_cluster(tmp_path, slurm, steps=200)
    good = run_cli("validate", "--remote", str(path), timeout=60)
    assert good.returncode == 0, good.stdout + good.stderr
    for check in ("sbatch", "srun", "squeue", "controller", "partition"):
        assert any(line.split()[3:5] == [check, "ok"] for line in good.stdout.splitlines()), good.stdout
    assert f"{slurm.partition} is up" in good.stdout
    path.write_text(path.read_text().replace(f'partition = "{slurm.partition}"', 'partition = "nope"'))
    bad = run_cli("validate", "--remote", str(path), timeout=60)
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert f"partition   FAIL no partition 'nope' (there are: {slurm.partition})" in bad.stdout
    assert "fix: set [slurm] partition to one of them" in bad.stdout
    assert "Traceback" not in bad.stderr


def test_a_run_past_its_slurm_time_limit_says_timed_out_by_slurm(
    slurm: SlurmCluster, past_its_limit: PastItsLimit
) -> None:
    """One minute is Slurm's smallest limit (and slurmctld checks limits about every 30 s): this
    test also covers the client's reading of a timed-out job (it had a 90 s test of its own). The
    launch started with the module (:func:`past_its_limit`)."""
    run_dir, launcher = past_its_limit.run_dir, past_its_limit.launcher
    assert launcher.finish(400) == 1, launcher.text
    info = json.loads((run_dir / "run.json").read_text())
    job_id = info["slurm"]["job_id"]
    said = f"timed out by Slurm (time limit 1 min, job {job_id})"
    assert info["result"] == "failed" and info["reason"] == said, info
    ends = [line for line in launcher.text.splitlines() if line.startswith(("  ps:0", "  worker:"))]
    assert len(ends) == 3 and all(said in line for line in ends), launcher.text
    client = SlurmClient(env=slurm.env)
    assert left_in_squeue(client, job_id).strip() == ""
    end = client.job_end(job_id)
    assert end is not None and end.state == "TIMEOUT"
    assert "timed out: the allocation's time limit was reached" in end.describe()
    assert_nothing_left_under(past_its_limit.tmp_path, past_its_limit.ports)


def test_a_task_on_a_host_outside_the_allocation_is_refused_and_the_allocation_cancelled(
    slurm: SlurmCluster, slurm_env: dict[str, str], tmp_path: Path
) -> None:
    path, ports = write_slurm_cluster(tmp_path, slurm, steps=200)
    path.write_text(path.read_text().replace(f'"127.0.0.1:{ports[2]}"', f'"gpu09:{ports[2]}"'))
    run_dir = tmp_path / "run"
    result = run_cli("launch", str(path), "--run-dir", str(run_dir), timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    job_id = slurm_record(run_dir)["job_id"]
    said = f"task worker:1 is on 'gpu09', which is not a node of Slurm job {job_id} (its nodes: {slurm.node})"
    assert said in result.stdout and "fix: " in result.stdout, result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    client = SlurmClient(env=slurm.env)
    assert left_in_squeue(client, job_id).strip() == ""
    assert not (run_dir / "roles" / "ps-0" / "attempt-1.log").exists()  # nothing started
    assert_nothing_left_under(tmp_path, ports)


def test_an_sbatch_refusal_is_a_clear_error_not_a_traceback(
    slurm: SlurmCluster, slurm_env: dict[str, str], tmp_path: Path
) -> None:
    path, _ = write_slurm_cluster(tmp_path, slurm, steps=200)
    path.write_text(path.read_text().replace(f'partition = "{slurm.partition}"', 'partition = "nope"'))
    result = run_cli("launch", str(path), "--run-dir", str(tmp_path / "run"), timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "`sbatch` failed: sbatch: error: Batch job submission failed: Invalid partition name" in result.stdout
    assert "fix: set [slurm] partition to one that `sinfo -s` lists" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


PS_CLUSTER = """
name = "ps-slurm-cli"
strategy = "parameter_server"
launch_style = "tf_config"
workdir = "{trainers}"
command = ["python", "-u", "parameter_server.py", "--train_steps=1500", "--log_every=20", "--step_sleep=0.01"]
stop_grace_s = 3
[jobs.chief]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.ps]
tasks = ["127.0.0.1:{p[1]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[2]}", "127.0.0.1:{p[3]}"]
restart = {{ policy = "OnFailure", max_restarts = 2, backoff_s = 0.5 }}
[slurm]
partition = "{partition}"
"""


def test_tf2_parameter_server_through_launch_restarts_a_killed_worker_and_succeeds(
    slurm: SlurmCluster, slurm_env: dict[str, str], tmp_path: Path, launched: list[Launcher]
) -> None:
    ports = free_ports(4)
    path = tmp_path / "cluster.toml"
    path.write_text(PS_CLUSTER.format(trainers=ROOT / "resources" / "trainers", p=ports, partition=slurm.partition))
    run_dir = tmp_path / "run"
    launcher = Launcher("launch", str(path), "--run-dir", str(run_dir))
    launched.append(launcher)
    chief_log = run_dir / "roles" / "chief-0" / "attempt-1.log"
    launcher.wait_for(lambda: chief_log.is_file() and "step" in chief_log.read_text().lower(), 180, "chief steps")
    reply = json.loads(run_cli("ctl", str(run_dir), "status", "--json", timeout=30).stdout)
    pid = next(r["pid"] for r in reply["roles"] if r["role"] == "worker:1")
    assert isinstance(pid, int)
    # A worker lost mid-training, as a node's OOM killer would. Training lasts at least 15 s from
    # here (1,500 steps of 10 ms sleep): with 400 unpaced steps a loaded machine's chief finished
    # before the 0.5 s backoff ran out, and worker:1 was "stopped before it started".
    os.kill(pid, signal.SIGKILL)
    code = launcher.finish(300)
    assert code == 0, launcher.text
    assert "succeeded" in launcher.text
    assert (run_dir / "roles" / "worker-1" / "attempt-2.log").exists(), launcher.text
    job_id = slurm_record(run_dir)["job_id"]
    assert left_in_squeue(SlurmClient(env=slurm.env), job_id).strip() == ""
    assert_nothing_left_under(tmp_path, ports)


COUNTED = """
name = "bg-slurm-counted"
strategy = "between_graph"
launch_style = "both"
workdir = "{trainers}"
command = ["python", "-u", "between_graph.py", "--train_steps=200", "--log_every=10"]
stop_grace_s = 3
[jobs.ps]
tasks = 1
[jobs.worker]
tasks = 2
[slurm]
partition = "{partition}"
time = "10"
nodes = 1
"""


def test_launch_of_counted_tasks_places_them_on_the_allocation_and_trains_to_success(
    slurm: SlurmCluster, slurm_env: dict[str, str], tmp_path: Path
) -> None:
    """`tasks = N` through `python main.py launch`: the roles get the allocation's node and ports
    its agent step chose, the run directory keeps the placed cluster, and nothing is left."""
    path = tmp_path / "cluster.toml"
    path.write_text(COUNTED.format(trainers=ROOT / "resources" / "trainers", partition=slurm.partition))
    run_dir = tmp_path / "run"
    result = run_cli("launch", str(path), "--run-dir", str(run_dir), timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "succeeded" in result.stdout and "Traceback" not in result.stdout + result.stderr
    placed = (run_dir / "cluster.toml").read_text()
    from core.cluster.spec import load

    spec, problems = load(run_dir / "cluster.toml")
    assert spec is not None and not spec.has_counted(), (problems, placed)
    tasks = spec.tasks()
    assert [t.role_id for t in tasks] == ["ps:0", "worker:0", "worker:1"]
    assert {t.host for t in tasks} == {slurm.node}
    ports = [t.port for t in tasks]
    assert len(set(ports)) == 3
    # The ps served on the port its node chose; the workers were told that address.
    ps_log = (run_dir / "roles" / "ps-0" / "attempt-1.log").read_text()
    assert f"{slurm.node}:{ports[0]}" in ps_log, ps_log[-2000:]
    record = slurm_record(run_dir)
    assert record["hosts"] == {slurm.node: slurm.node}
    client = SlurmClient(env=slurm.env)
    assert left_in_squeue(client, record["job_id"]).strip() == ""
    assert_nothing_left_under(tmp_path, ports)


LIGHT_32 = """
name = "light-slurm-32"
strategy = "between_graph"
launch_style = "both"
workdir = "{trainers}"
command = ["python", "-u", "light_trainer.py", "--steps=40", "--rate_hz=4"]
stop_grace_s = 3
[jobs.ps]
tasks = 1
[jobs.worker]
tasks = 32
[slurm]
partition = "{partition}"
time = "10"
nodes = 1
"""


def test_launch_of_32_counted_light_workers_on_slurm_succeeds_and_leaves_nothing(
    slurm: SlurmCluster, slurm_env: dict[str, str], tmp_path: Path
) -> None:
    """At the size users run: 1 ps + 32 counted workers (the light trainer) through one allocation:
    33 distinct ports chosen on the node in one step, every worker trains to the end, and the
    allocation, processes and ports are gone afterwards."""
    path = tmp_path / "cluster.toml"
    path.write_text(LIGHT_32.format(trainers=ROOT / "resources" / "trainers", partition=slurm.partition))
    run_dir = tmp_path / "run"
    result = run_cli("launch", str(path), "--run-dir", str(run_dir), timeout=400)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    from core.cluster.spec import load

    spec, problems = load(run_dir / "cluster.toml")
    assert spec is not None and not spec.has_counted(), problems
    tasks = spec.tasks()
    assert len(tasks) == 33 and len({t.port for t in tasks}) == 33
    ends = [line.split() for line in result.stdout.splitlines() if line.startswith("  worker:")]
    assert len(ends) == 32 and all(end[1] == "succeeded" for end in ends), result.stdout[-4000:]
    for i in range(32):
        log = (run_dir / "roles" / f"worker-{i}" / "attempt-1.log").read_text()
        assert "Step: 39," in log, (i, log[-500:])
    record = slurm_record(run_dir)
    client = SlurmClient(env=slurm.env)
    assert left_in_squeue(client, record["job_id"]).strip() == ""
    assert_nothing_left_under(tmp_path, [t.port for t in tasks])
