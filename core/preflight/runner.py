"""Pre-flight: can each host of a cluster launch its roles? Checked on the host, in parallel.

For every host (this machine included) the agent's probe (``core/agent/probe.py``, from the same
zipapp that is launched) runs there, with the python that will run the agent (over SSH for remote
hosts, with the same options as the launch): it reports the python version, whether each
training command is found, whether TensorFlow imports with that command's python (and its
version) and whether that python finds what the script imports, whether the working directory and training scripts exist, whether each task's port is
free, and whether NVML is there. Results are immutable and
structured, for the window's table and ``validate --remote``.

    results = preflight(spec, timeout_s=60)   # list[HostPreflight], one per host, in spec order
    for host in results: host.ok, host.checks -> (HostCheck(name, ok, detail, fix), ...)
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any

from core.agent import artifact_file
from core.cluster.render import command_of
from core.cluster.spec import ClusterSpec, HostConfig
from core.preflight.gpus import GpuTarget, HostGpus, busy_gpu_warnings, snapshot_all, wanted_gpus
from core.remote.ssh import PROBE_BOOTSTRAP, agent_payload, explain_failure, remote_python, ssh_argv, ssh_config_path
from core.run import children
from core.run.children import kill_group


@dataclass(frozen=True)
class HostCheck:
    """One row of a host's pre-flight: ``ok`` is None for information (NVML absent is fine), and
    for a ``warning`` (a task's GPU already busy), which does not stop a launch."""

    name: str
    _: KW_ONLY
    ok: bool | None
    detail: str
    fix: str = ""
    warning: bool = False


@dataclass(frozen=True)
class HostPreflight:
    """Everything checked on one host."""

    host: str
    destination: str  # "this machine" or the SSH destination
    checks: tuple[HostCheck, ...]
    elapsed_s: float

    @property
    def ok(self) -> bool:
        return all(c.ok is not False for c in self.checks)

    @property
    def failures(self) -> tuple[HostCheck, ...]:
        return tuple(c for c in self.checks if c.ok is False)

    @property
    def warnings(self) -> tuple[HostCheck, ...]:
        return tuple(c for c in self.checks if c.warning)


def _script_of(argv: tuple[str, ...]) -> str | None:
    from core.preflight.checks import script_of

    script = script_of(argv)
    return script if script is not None and "{" not in script else None


def _request(spec: ClusterSpec, host: str, *, check_ports: bool, tf_timeout_s: float) -> dict[str, Any]:
    config = spec.host_config(host)
    tasks = [t for t in spec.tasks() if t.host == host]
    commands = []
    for argv in dict.fromkeys(command_of(spec, t) for t in tasks):
        commands.append({"argv": list(argv), "script": _script_of(argv)})
    workdir = config.workdir if config.remote and config.workdir else str(spec.workdir)
    ports = [[t.host, t.port] for t in tasks] if check_ports else []
    return {"workdir": workdir, "commands": commands, "ports": ports, "tf_timeout_s": tf_timeout_s}


class PreflightRun:
    """Lets a running pre-flight be cancelled from any thread (a signal handler, a window's Quit).

    Every probe runs in its own process group (dying with this process: core/run/children.py);
    :meth:`cancel` kills those groups at once (an ``ssh`` that hangs included), and ends the look
    at the hosts' GPUs, so the checks end now and leave no process behind."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[bytes]] = set()
        self.cancelled = False
        self.stopped = threading.Event()  # set with cancelled, for what waits rather than runs a probe

    def cancel(self) -> None:
        """End every probe now; the ones not started yet do not start."""
        with self._lock:
            self.cancelled = True
            procs = list(self._procs)
        self.stopped.set()
        for proc in procs:
            kill_group(proc)

    def run(self, argv: list[str], payload: bytes, timeout_s: float) -> subprocess.CompletedProcess[bytes]:
        """Like ``subprocess.run(argv, input=payload, capture_output=True, timeout=timeout_s)``, in a
        new process group that a timeout or :meth:`cancel` kills whole."""
        with self._lock:
            if self.cancelled:
                raise PreflightCancelled
            proc = children.popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            self._procs.add(proc)
        try:
            stdout, stderr = proc.communicate(payload, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            proc.communicate()
            raise
        finally:
            with self._lock:
                self._procs.discard(proc)
        if self.cancelled:
            raise PreflightCancelled
        return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


class PreflightCancelled(Exception):
    """The pre-flight was cancelled (:meth:`PreflightRun.cancel`)."""


def check_host(
    spec: ClusterSpec, host: str, timeout_s: float = 60.0, *, check_ports: bool = True, run: PreflightRun | None = None
) -> HostPreflight:
    """Run the probe on ``host`` and turn its answer into checks; never raises (a cancelled run
    gives a ``reachable`` check that says so)."""
    started = time.monotonic()
    config = spec.host_config(host)
    request = json.dumps(_request(spec, host, check_ports=check_ports, tf_timeout_s=max(5.0, timeout_s - 10.0)))
    if config.remote:
        # The agent's zipapp goes on stdin; its probe runs there from memory (core.remote.ssh.PROBE_BOOTSTRAP).
        argv = [*ssh_argv(config, ssh_config_path(spec), connect_timeout_s=min(10, int(timeout_s))), ""]
        argv[-1] = remote_python(config, PROBE_BOOTSTRAP, request)
        destination = str(config.ssh)
        payload = agent_payload()
    else:
        argv = [sys.executable, str(artifact_file()), "--probe", request]
        destination = "this machine"
        payload = b""
    try:
        raw = (run or PreflightRun()).run(argv, payload, timeout_s)
        proc = subprocess.CompletedProcess(
            raw.args,
            raw.returncode,
            raw.stdout.decode("utf-8", "replace"),
            raw.stderr.decode("utf-8", "replace"),
        )
    except PreflightCancelled:
        check = HostCheck(
            "reachable", ok=False, detail=f"cancelled while checking {destination}", fix="check the hosts again"
        )
        return HostPreflight(host, destination, (check,), time.monotonic() - started)
    except subprocess.TimeoutExpired:
        check = HostCheck(
            "reachable",
            ok=False,
            detail=f"no answer from {destination} within {timeout_s:g} s",
            fix="check that the machine is up, or raise --timeout",
        )
        return HostPreflight(host, destination, (check,), time.monotonic() - started)
    except OSError as exc:
        check = HostCheck(
            "reachable", ok=False, detail=f"cannot run {argv[0]}: {exc.strerror or exc}", fix="install OpenSSH's client"
        )
        return HostPreflight(host, destination, (check,), time.monotonic() - started)
    elapsed = time.monotonic() - started
    try:
        answer = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None
    except (ValueError, IndexError):
        answer = None
    if answer is None:
        return HostPreflight(host, destination, _failed(config, proc), elapsed)
    return HostPreflight(host, destination, _checks(config, answer), elapsed)


def _failed(config: HostConfig, proc: subprocess.CompletedProcess[str]) -> tuple[HostCheck, ...]:
    if config.remote and proc.returncode == 255:
        failure = explain_failure(config, proc.stderr, proc.returncode)
        return (HostCheck("reachable", ok=False, detail=failure.cause, fix=failure.fix),)
    reachable = HostCheck("reachable", ok=True, detail="ssh works" if config.remote else "this machine")
    last = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
    if proc.returncode == 127 or "not found" in last:
        return (
            reachable,
            HostCheck(
                "python",
                ok=False,
                detail=f"{config.python!r} was not found: {last}",
                fix=f'install python 3, or set python = "/full/path" under [hosts."{config.address}"]',
            ),
        )
    return (
        reachable,
        HostCheck("python", ok=False, detail=f"the probe failed: {last}", fix="run it by hand to see why"),
    )


def _checks(config: HostConfig, answer: dict[str, Any]) -> tuple[HostCheck, ...]:
    where = f' under [hosts."{config.address}"]' if config.remote else ""
    checks = [
        HostCheck("reachable", ok=True, detail="ssh works" if config.remote else "this machine"),
        HostCheck("python", ok=True, detail=f"{config.python if config.remote else 'python'} {answer.get('python')}"),
    ]
    workdir = answer.get("workdir") or {}
    checks.append(
        HostCheck(
            "workdir",
            ok=bool(workdir.get("ok")),
            detail=str(workdir.get("path")) + ("" if workdir.get("ok") else " is not a directory"),
            fix=""
            if workdir.get("ok")
            else f"create it there, or set workdir{where or ' (relative to the cluster file)'}",
        )
    )
    for item in answer.get("commands", []):
        argv0 = item.get("argv0")
        if not item.get("found"):
            checks.append(
                HostCheck(
                    "command",
                    ok=False,
                    detail=f"{argv0!r} was not found",
                    fix="install it there, or give its full path in command",
                )
            )
            continue
        checks.append(HostCheck("command", ok=True, detail=str(item["found"])))
        if item.get("script") is not None:
            ok = bool(item.get("script_ok"))
            checks.append(
                HostCheck(
                    "script",
                    ok=ok,
                    detail=f"{item['script']}" + ("" if ok else f" does not exist in {workdir.get('path')}"),
                    fix="" if ok else "copy the training script there, or fix the path (relative to workdir)",
                )
            )
        if item.get("missing_imports"):
            fix = f"pip install them for {item['found']}" + (
                ", or start the command with {python} (the python TowerDeck runs on)" if not config.remote else " there"
            )
            missing = ", ".join(item["missing_imports"])
            checks.append(
                HostCheck(
                    "imports", ok=False, detail=f"{argv0} cannot import {missing} ({item['script']} does)", fix=fix
                )
            )
        if item.get("tf"):
            checks.append(HostCheck("tensorflow", ok=True, detail=f"TensorFlow {item['tf']} ({argv0})"))
        elif Path(str(argv0)).name.startswith("python"):
            checks.append(
                HostCheck(
                    "tensorflow",
                    ok=False,
                    detail=f"{argv0} cannot import tensorflow: {item.get('tf_error')}",
                    fix=f"pip install tensorflow for {item['found']}, or point command at a python that has it",
                )
            )
    for host, port, state in answer.get("ports", []):
        if state == "free":
            checks.append(HostCheck(f"port {port}", ok=True, detail=f"{host}:{port} is free"))
        elif state == "busy":
            checks.append(
                HostCheck(
                    f"port {port}",
                    ok=False,
                    detail=f"{host}:{port} is already in use",
                    fix="stop what holds it there, or pick another port",
                )
            )
        else:
            checks.append(
                HostCheck(
                    f"port {port}",
                    ok=False,
                    detail=f"cannot listen on {host}:{port}: {state}",
                    fix="the task address must be an address of that machine",
                )
            )
    nvml = answer.get("nvml")
    checks.append(
        HostCheck("nvml", ok=None, detail=nvml if nvml else f"no NVML ({answer.get('nvml_error')}); CPU only")
    )
    return tuple(checks)


def preflight(
    spec: ClusterSpec,
    timeout_s: float = 60.0,
    *,
    check_ports: bool = True,
    max_parallel: int = 16,
    run: PreflightRun | None = None,
) -> list[HostPreflight]:
    """Check every host of ``spec`` in parallel; one result per host, in launch order.
    ``run.cancel()`` (any thread) ends it at once (``run.cancelled`` then says so)."""
    hosts = list(dict.fromkeys(t.host for t in spec.tasks()))
    wanted = wanted_gpus(spec)
    pool = ThreadPoolExecutor(max_workers=max(1, min(max_parallel, len(hosts))))
    try:
        futures = [pool.submit(check_host, spec, host, timeout_s, check_ports=check_ports, run=run) for host in hosts]
        # The GPUs the tasks ask for, looked at on their hosts meanwhile (the `gpus` command's query).
        gpus = (
            pool.submit(_gpu_looks, spec, [h for h in hosts if h in wanted], timeout_s=timeout_s, run=run)
            if wanted
            else None
        )
        results = [f.result() for f in futures]
        if run is not None and run.cancelled:
            return results  # cancelled: the GPU look is not waited for
        looks = gpus.result() if gpus is not None else {}
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return [_with_gpu_warnings(r, wanted.get(r.host, {}), looks.get(r.host)) for r in results]


def _gpu_looks(
    spec: ClusterSpec, hosts: list[str], *, timeout_s: float, run: PreflightRun | None
) -> dict[str, HostGpus]:
    targets = [GpuTarget(h, spec.host_config(h) if spec.host_config(h).remote else None) for h in hosts]
    stop = run.stopped if run is not None else None
    results = snapshot_all(targets, min(timeout_s, 30.0), ssh_config_path(spec), stop=stop)
    return {r.host: r for r in results}


def _with_gpu_warnings(result: HostPreflight, wanted: dict[int, list[str]], look: HostGpus | None) -> HostPreflight:
    if look is None:
        return result
    extra = tuple(
        HostCheck(
            "gpus",
            ok=None,
            detail=text,
            fix="pick free GPUs (`python main.py gpus FILE` shows them), or launch anyway",
            warning=True,
        )
        for text in busy_gpu_warnings(wanted, look)
    )
    return dataclasses.replace(result, checks=result.checks + extra) if extra else result


def slurm_preflight(spec: ClusterSpec) -> HostPreflight:
    """For a ``[slurm]`` cluster: Slurm's commands are found (here, or on the login node), the
    controller answers and the partition exists and is up. Its hosts are the allocation's nodes,
    reached by srun steps, so they are not probed over SSH."""
    from core.slurm.client import check_slurm, slurm_client

    assert spec.slurm is not None
    started = time.monotonic()
    checks = check_slurm(slurm_client(spec), spec.slurm)
    where = f"login {spec.slurm.login}" if spec.slurm.login else "this machine"
    return HostPreflight(
        "slurm",
        where,
        tuple(HostCheck(c.name, ok=c.ok, detail=c.detail, fix=c.fix) for c in checks),
        time.monotonic() - started,
    )


def format_table(results: list[HostPreflight]) -> str:
    """A plain-text table: one line per check, failures with their fix."""
    lines = [f"{'HOST':<16} {'VIA':<22} {'CHECK':<11} {'':<4} DETAIL"]
    for result in results:
        for check in result.checks:
            mark = "ok" if check.ok else ("FAIL" if check.ok is False else ("WARN" if check.warning else "-"))
            lines.append(f"{result.host:<16} {result.destination[:22]:<22} {check.name:<11} {mark:<4} {check.detail}")
            if check.fix:
                lines.append(f"{'':<16} {'':<22} {'':<11} {'':<4} fix: {check.fix}")
    good = sum(r.ok for r in results)
    lines.append(f"{good} of {len(results)} hosts ready")
    return "\n".join(lines)
