"""Scale: 1 ps + 64 light workers printing 10 step lines a second each, this code against c23e87e.

For each variant (the baseline, commit c23e87e unpacked with ``git archive`` into a temp dir, then
this checkout), in the same run, on the same machine: launch the cluster with ``python main.py
launch``, wait until every role runs (launch-to-all-running), let it settle, then for
``TOWERDECK_BENCH_SCALE_S`` seconds (default 60) measure

- CPU, as a share of one core: the controller (the launch process and its link), the agent, the
  output pumps (all, and per role), from the processes' CPU times (psutil);
- memory: USS of the controller, the agent and the pumps (Linux ``memory_full_info``);
- bytes written per hour: the journal (``events.jsonl``), host samples, metrics, roles' logs.

Then Ctrl-C stops the run (as a user would), and a fresh process replays a copy of the run
directory taken half-way and the finished one with that variant's ``RunReader`` (peak RSS: replay
memory must stay flat with run length). ``TOWERDECK_BENCH_SCALE_WORKERS`` changes the worker count.
The whole default run takes about 4 minutes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from baseline import unpack

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "c23e87e"
WORKERS = int(os.environ.get("TOWERDECK_BENCH_SCALE_WORKERS", "64"))
STEADY_S = float(os.environ.get("TOWERDECK_BENCH_SCALE_S", "60"))
SETTLE_S = 5.0
RATE_HZ = 10.0

CLUSTER = """
name = "scale"
strategy = "between_graph"
launch_style = "flags"
workdir = "{trainers}"
command = ["python", "-u", "light_trainer.py", "--steps=0", "--rate_hz={rate}"]
stop_grace_s = 5
[jobs.ps]
tasks = ["127.0.0.1:{ps}"]
[jobs.worker]
tasks = [{workers}]
"""

REPLAY = """
import json, resource, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
try:
    from core.run.reader import RunReader
except ImportError:  # the baseline, from before core/ was split into packages
    from core.replay import RunReader
reader = RunReader(Path(sys.argv[2]))
count, last = [0], [time.monotonic()]
def seen(event):
    count[0] += 1
    last[0] = time.monotonic()
reader.subscribe(seen)
start = time.monotonic()
reader.start()
while time.monotonic() - last[0] < 3.0 and time.monotonic() - start < 300:
    time.sleep(0.2)
reader.close()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"peak_rss_kib": rss, "events": count[0], "seconds": round(last[0] - start, 2)}))
"""


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def write_cluster(folder: Path) -> Path:
    ports = free_ports(WORKERS + 1)
    workers = ", ".join(f'"127.0.0.1:{p}"' for p in ports[1:])
    path = folder / "scale.toml"
    path.write_text(
        CLUSTER.format(trainers=ROOT / "resources" / "trainers", rate=RATE_HZ, ps=ports[0], workers=workers)
    )
    return path


def running_roles(run: Path) -> int:
    state: dict[str, str] = {}
    try:
        with open(run / "events.jsonl", encoding="utf-8") as f:
            for line in f:  # line by line: never the whole file at once
                if '"role_state"' in line:
                    with_state = json.loads(line)
                    state[with_state["role"]] = with_state["state"]
    except (OSError, ValueError):
        return 0
    return sum(1 for s in state.values() if s == "running")


def children(parent: psutil.Process, recursive: bool = False) -> list[psutil.Process]:
    """A process's children, or none once it has gone: a child exiting while psutil walks the
    tree raises ``NoSuchProcess`` (a pump or role that ends between two reads of /proc)."""
    for _ in range(3):
        try:
            return parent.children(recursive=recursive)
        except psutil.NoSuchProcess:
            if not parent.is_running():
                return []
        except psutil.Error:
            return []
    return []


def groups(launcher: psutil.Process, run: Path) -> dict[str, list[psutil.Process]]:
    """The run's processes: controller (the launcher and its link), agent, pumps, roles.

    Processes come and go while this reads them (roles exit, pumps follow): one that vanished is
    left out rather than failing the benchmark."""
    found: dict[str, list[psutil.Process]] = {"controller": [], "agent": [], "pumps": [], "roles": []}
    marker = str(run / "agents")
    agents = []
    for p in psutil.process_iter(["pid", "ppid", "cmdline"]):  # info is read safely, gone or not
        cmd = " ".join(p.info["cmdline"] or [])
        if marker in cmd and "--serve" in cmd:
            agents.append(p)
    agent_pids = {p.pid for p in agents}
    mine = {launcher.pid} | {c.pid for c in children(launcher, recursive=True)}
    for p in agents:
        if p.pid in mine:
            found["controller"].append(p)  # the link's client process
        elif p.info["ppid"] in agent_pids:
            found["pumps"].append(p)
        else:
            found["agent"].append(p)
    found["controller"].append(launcher)
    for agent in found["agent"]:
        found["roles"] += [c for c in children(agent) if c.pid not in agent_pids]
    return found


def cpu_s(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            continue
    return total


def uss_bytes(procs: list[psutil.Process]) -> int:
    total = 0
    for p in procs:
        try:
            total += p.memory_full_info().uss
        except psutil.Error:
            continue
    return total


def sizes(run: Path) -> dict[str, int]:
    def total(pattern: str) -> int:
        return sum(p.stat().st_size for p in run.glob(pattern) if p.is_file())

    return {
        "journal": total("events.jsonl"),
        "samples": total("telemetry/samples-*.jsonl"),
        "metrics": total("roles/*/metrics.jsonl"),
        "scalars": total("roles/*/scalars.jsonl"),
        "logs": total("roles/*/attempt-*.log"),
    }


def replay(root: Path, run: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", REPLAY, str(root), str(run)], capture_output=True, text=True, timeout=400
    )
    try:
        result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
        return result
    except (ValueError, IndexError):
        return {"error": (out.stderr or out.stdout)[-300:]}


def measure(name: str, root: Path, work: Path) -> dict[str, Any]:
    cluster = write_cluster(work)
    run = work / "run"
    env = {**os.environ, "TOWERDECK_DATA_DIR": str(work / "data")}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    started = time.monotonic()
    err = (work / "launch.err").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "main.py", "launch", str(cluster), "--run-dir", str(run), "--progress-every", "0"],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=err,  # why it failed, if it does
    )
    err.close()  # the launcher has its own copy
    result: dict[str, Any] = {"variant": name}
    launcher = psutil.Process(proc.pid)
    try:
        while running_roles(run) < WORKERS + 1:
            if proc.poll() is not None or time.monotonic() - started > 300:
                why = (work / "launch.err").read_text(errors="replace").strip().splitlines()
                raise RuntimeError(
                    f"the cluster did not come up (exit {proc.poll()}): {why[-1] if why else 'no error output'}"
                )
            time.sleep(0.1)
        result["launch_to_all_running_s"] = round(time.monotonic() - started, 2)
        time.sleep(SETTLE_S)
        procs = groups(launcher, run)
        cpu0 = {k: cpu_s(v) for k, v in procs.items()}
        size0, t0 = sizes(run), time.monotonic()
        time.sleep(STEADY_S / 2)
        half = work / "run-half"
        shutil.copytree(run, half, ignore=shutil.ignore_patterns("*.sock"))
        time.sleep(STEADY_S / 2)
        elapsed = time.monotonic() - t0
        procs = groups(launcher, run)  # a pump or role that died would have been replaced
        cpu1 = {k: cpu_s(v) for k, v in procs.items()}
        size1 = sizes(run)
        roles = max(1, len(procs["roles"]))
        result["cpu_percent_of_a_core"] = {
            k: round(100 * (cpu1[k] - cpu0[k]) / elapsed, 1) for k in ("controller", "agent", "pumps")
        }
        result["cpu_percent_pump_per_role"] = round(100 * (cpu1["pumps"] - cpu0["pumps"]) / elapsed / roles, 2)
        result["uss_mib"] = {k: round(uss_bytes(procs[k]) / 2**20, 1) for k in ("controller", "agent", "pumps")}
        result["uss_mib_per_pump"] = round(uss_bytes(procs["pumps"]) / 2**20 / max(1, len(procs["pumps"])), 2)
        result["processes"] = {k: len(v) for k, v in procs.items()}
        result["bytes_per_hour"] = {k: int((size1[k] - size0[k]) * 3600 / elapsed) for k in size1}
    finally:
        left = groups(launcher, run)
        proc.send_signal(signal.SIGINT)  # Ctrl-C: stop every role, as a user would
        try:
            proc.wait(90)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for p in [p for group in left.values() for p in group]:  # no orphans, whatever happened
            with contextlib.suppress(psutil.Error):
                p.kill()
    result["replay_half"] = replay(root, work / "run-half") if (work / "run-half").exists() else None
    result["replay_full"] = replay(root, run)
    result["run_dir_bytes"] = sum(p.stat().st_size for p in run.rglob("*") if p.is_file())
    return result


def show(r: dict[str, Any]) -> None:
    print(f"-- {r['variant']}")
    for key, value in r.items():
        if key != "variant":
            print(f"   {key}: {value}")


def main() -> int:
    print(f"1 ps + {WORKERS} light workers at {RATE_HZ:g} lines/s each; {STEADY_S:g} s steady window")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    results = []
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp_name:
        tmp = Path(tmp_name)
        base = unpack(BASELINE, tmp)
        variants = ([("baseline " + BASELINE, base)] if base else []) + [("this code", ROOT)]
        for name, root in variants:
            work = tmp / name.replace(" ", "-")
            work.mkdir()
            try:
                results.append(measure(name, root, work))
            except RuntimeError as exc:
                print(f"{name}: {exc}")
                if root == ROOT:  # this code failing fails the benchmark; an old baseline that no
                    failures.append(f"{name}: {exc}")  # longer runs here (a dropped package) is said
                continue
            show(results[-1])
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    if len(results) == 2:
        before, after = results
        for key in ("journal", "samples", "metrics"):
            b, a = before["bytes_per_hour"][key], after["bytes_per_hour"][key]
            print(f"{key}: {b / 1e6:.1f} MB/h -> {a / 1e6:.2f} MB/h")
    if failures:  # last, so that run_all's summary names it
        print(f"bench_scale failed: {'; '.join(failures)}")
        return 1
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
