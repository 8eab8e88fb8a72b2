"""A real Slurm on this machine: munged, slurmctld and slurmd of Debian's packages, by hand.

Everything lives in a temporary directory: slurm.conf, the munge key, munged's socket (the
system's munged, if any, is never used or touched), state, spool and logs. The node is
``localhost`` with 8 declared CPUs (``SlurmdParameters=config_overrides`` lets a 2-core machine
say so). Ports are chosen free, so several checkouts can run their Slurm at once. At the end every
job is cancelled and every daemon stopped by pid; the fixture asserts that nothing is left.

Without the binaries the tests skip, except in CI (env CI set), where a missing Slurm fails them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.helpers.ports import free_ports
from tests.helpers.slurm_cluster import SlurmCluster

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "scontrol", "scancel", "sinfo")
PARTITION = "debug"
NODE = "localhost"
NODE_CPUS = 8
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0


def _which(name: str) -> str | None:
    return shutil.which(name) or next(
        (p for d in ("/usr/sbin", "/usr/bin") if os.path.exists(p := os.path.join(d, name))), None
    )


def _slurm_conf(base: Path, munge_socket: Path, ctld_port: int, slurmd_port: int) -> str:
    # The settings DESIGN.md lists as the ones that mattered on this kind of machine.
    return f"""\
ClusterName=towerdeck-test
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
StateSaveLocation={base / "state"}
SlurmdSpoolDir={base / "spool"}
SlurmctldPidFile={base / "slurmctld.pid"}
SlurmdPidFile={base / "slurmd.pid"}
SlurmctldLogFile={base / "log" / "slurmctld.log"}
SlurmdLogFile={base / "log" / "slurmd.log"}
MinJobAge=300
NodeName={NODE} NodeAddr=127.0.0.1 CPUs={NODE_CPUS} State=UNKNOWN
PartitionName={PARTITION} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
"""


def _start_munged(base: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """munged as the munge user, with its own key, socket, pid and log paths under ``base``."""
    # munged refuses a key or state dir others can read, and a socket dir others cannot enter.
    state, run = base / "munge", base / "munge-run"
    for d, mode in ((state, 0o700), (run, 0o755)):
        d.mkdir()
        shutil.chown(d, "munge", "munge")
        os.chmod(d, mode)
    key = state / "munge.key"
    key.write_bytes(os.urandom(128))
    shutil.chown(key, "munge", "munge")
    os.chmod(key, 0o600)
    socket_path = run / "munge.socket"
    proc = subprocess.Popen(
        [
            _which("munged") or "munged",
            "--foreground",
            f"--socket={socket_path}",
            f"--key-file={key}",
            f"--pid-file={run / 'munged.pid'}",
            f"--log-file={state / 'munged.log'}",
            f"--seed-file={state / 'munged.seed'}",
        ],
        user="munge",
        group="munge",
        extra_groups=[],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=open(base / "log" / "munged.out", "ab"),  # noqa: SIM115 - the child holds it
        cwd=run,
    )
    return proc, socket_path


def _wait_for(what: str, ready: object, procs: list[subprocess.Popen[bytes]], base: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():  # type: ignore[operator]
        dead = [p.args for p in procs if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            logs = "\n".join(f"--- {f.name}\n{f.read_text()[-2000:]}" for f in sorted((base / "log").glob("*")))
            raise RuntimeError(f"test Slurm: {what} not reached (exited: {dead})\n{logs}")
        time.sleep(0.05)


def _node_idle(env: dict[str, str]) -> bool:
    result = subprocess.run(
        ["sinfo", "-h", "-n", NODE, "-o", "%T"], env=env, capture_output=True, text=True, timeout=10, check=False
    )
    return result.returncode == 0 and result.stdout.strip() == "idle"


def _stepds(base: Path) -> list[psutil.Process]:
    """This cluster's slurmstepd processes: they leave slurmd's process tree (double fork) and
    clear their environment, but keep slurmd's log file (under ``base``) open."""
    found = []
    for p in psutil.process_iter(["name", "status"]):
        try:
            if p.info["name"] != "slurmstepd" or p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if any(f.path.startswith(str(base)) for f in p.open_files()):
                found.append(p)
        except psutil.Error:
            continue
    return found


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_TIMEOUT_S)


def cancel_all(cluster: SlurmCluster, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Cancel every job of the test cluster and wait until squeue shows none."""
    env = {**os.environ, **cluster.env}
    subprocess.run(["scancel", "--full", f"--partition={cluster.partition}"], env=env, check=False, timeout=10)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, timeout=10)
        if left.returncode == 0 and not left.stdout.strip():
            return
        time.sleep(0.1)
    raise AssertionError(f"jobs still in squeue after scancel: {left.stdout!r}")


@pytest.fixture(scope="session")
def slurm() -> Iterator[SlurmCluster]:
    """A running Slurm (munged, slurmctld, slurmd) for the session; stopped by pid at the end."""
    missing = [b for b in BINARIES if _which(b) is None]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI needs Slurm for tests/slurm, missing {missing}: run scripts/sysdeps.sh as root")
        pytest.skip(f"Slurm not installed (missing {', '.join(missing)}): run scripts/sysdeps.sh as root")
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("tests/slurm start slurmd and munged (as the munge user): CI must run them as root")
        pytest.skip("tests/slurm need root to start slurmd and munged as the munge user")
    # Not pytest's tmp dir: its parents are 0700 root, and munged (as munge) must reach its socket dir.
    base = Path(tempfile.mkdtemp(prefix="towerdeck-slurm-"))
    os.chmod(base, 0o755)
    for sub in ("state", "spool", "log"):
        (base / sub).mkdir()
    procs: list[subprocess.Popen[bytes]] = []
    cluster: SlurmCluster | None = None
    try:
        munged, munge_socket = _start_munged(base)
        procs.append(munged)
        _wait_for("munged's socket", munge_socket.exists, procs, base)
        ctld_port, slurmd_port = free_ports(2)
        conf = base / "slurm.conf"
        conf.write_text(_slurm_conf(base, munge_socket, ctld_port, slurmd_port))
        env = {**os.environ, "SLURM_CONF": str(conf)}
        for argv in (
            [_which("slurmctld") or "slurmctld", "-D", "-f", str(conf)],
            [_which("slurmd") or "slurmd", "-D", "-f", str(conf), "-N", NODE],
        ):
            log = open(base / "log" / f"{Path(argv[0]).name}.out", "ab")  # noqa: SIM115 - the child holds it
            procs.append(subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=base))
            log.close()
        _wait_for("an idle node", lambda: _node_idle(env), procs, base)
        cluster = SlurmCluster(conf, base, PARTITION, NODE, NODE_CPUS)
        yield cluster
    finally:
        if cluster is not None:
            with contextlib.suppress(Exception):
                cancel_all(cluster)
        # Order matters: slurmd before slurmctld (it reports to it), munged last (both use it).
        for proc in reversed(procs):
            _stop(proc)
        leftovers = _stepds(base)
        for p in leftovers:
            with contextlib.suppress(psutil.Error):
                p.kill()
        still = [p.args for p in procs if p.poll() is None]
        shutil.rmtree(base, ignore_errors=True)
        assert not still and not leftovers, f"test Slurm left running: daemons {still}, steps {leftovers}"


@pytest.fixture
def slurm_env(slurm: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """SLURM_CONF set for this test, as a user's shell would have it."""
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    return slurm.env
