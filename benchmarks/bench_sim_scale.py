"""Simulated scale: 256 workers on 32 hosts (``--workers 1024``: 1,024 on 128), followed live.

SIMULATED: the roles are not processes. Each host's agent is the real agent (the same zipapp,
protocol and links) told by ``TOWERDECK_SIMULATE=1`` to simulate its roles: step lines at
``--rate-hz`` a second, host samples at the real period and 8 GPUs a host (core/agent, the
simulation harness; the cluster comes from ``scripts/sim_cluster.py``). What is measured is
TowerDeck's side: the controller, the run directory and the window, over real links.

For each size and each variant, in the same run on the same machine with the same cluster file:

- the baseline, commit ``BASELINE`` (today's code before the scale fixes) unpacked with
  benchmarks/baseline.py, with THIS checkout's ``core/agent/`` and
  ``resources/trainers/sim_trainer.py`` copied over it (the baseline has no simulator; the agent's
  protocol is unchanged);
- this checkout.

CLI (``python main.py launch``): launch-to-all-running, then over a steady window of
``--steady-s`` seconds (default 30; ``TOWERDECK_BENCH_SIM_S``) the controller's CPU (the launch
process and its link relays) as % of one core and per worker, the agents' CPU apart (the
simulator's cost, not TowerDeck's), and the bytes written per worker-hour: journal, metrics,
samples, scalars, and the roles' logs apart.

Window (``--no-window`` leaves it out): the real MainWindow, offscreen at 1600x1000, launching the
same cluster in its own process; once every role runs, each tab of the Run page (Training, GPUs,
Placement, Logs; the overview and the roles table are on screen above them all along) is on
screen for ``--dwell-s`` seconds (default 8): the frame's time (the frame handler, then the paints
it posted, until no posted event is left) p50/p95, the longest event-loop gap and the most
GUI-thread CPU between two turns (tests/helpers/heartbeat.py).

``--sizes 64,128,256,512,1024`` runs a sweep of this checkout only (the baseline with
``--baseline-sizes``, default 256 and 1024 where swept). ``--memory`` and ``--open-run`` add
benchmarks/bench_window_memory.py (``--memory-hours`` sped-up hours, 6 by default: 256 workers ran at 28x real time here, so a whole day takes ~50 min) and
benchmarks/bench_open_run.py at the size, as subprocesses, their figures taken from their output.
Prints a table and one JSON line per variant and size (``{"bench": "sim_scale", ...}``);
``--json-out FILE`` appends those lines to FILE too (scripts/plot_scaling.py draws them).
Exit status 1 when this checkout's run failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "d294eee"
SIM_FILES = ("core/agent", "resources/trainers/sim_trainer.py")
STEADY_S = float(os.environ.get("TOWERDECK_BENCH_SIM_S", "30"))
SETTLE_S = 5.0
UP_TIMEOUT_S = 600.0
TABS = ("Training", "GPUs", "Placement", "Logs")
SIZE = (1600, 1000)
GOALS_256 = {"controller_percent": 25.0, "frame_p95_ms": 16.0, "gap_ms": 200.0, "disk_bytes_per_worker_hour": 1e6}


# --------------------------------------------------------------------------- the variants


def baseline_tree(tmp: Path) -> Path | None:
    """The baseline's tree with this checkout's simulating agent and sim trainer over it."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from baseline import unpack

    base = unpack(BASELINE, tmp)
    if base is None:
        return None
    for rel in SIM_FILES:
        source, target = ROOT / rel, base / rel
        if source.is_dir():
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        elif source.is_file():
            shutil.copy2(source, target)
    return base


def write_cluster(out: Path, *, workers: int, hosts: int, rate_hz: float) -> None:
    """scripts/sim_cluster.py's cluster at this size."""
    argv = [sys.executable, str(ROOT / "scripts" / "sim_cluster.py"), "--workers", str(workers)]
    argv += ["--hosts", str(hosts), "--rate-hz", f"{rate_hz:g}", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/sim_cluster.py failed: {(done.stderr or done.stdout).strip()[-300:]}")


def count_roles(cluster: Path) -> int:
    with open(cluster, "rb") as f:
        spec = tomllib.load(f)
    roles = 0
    for job in spec.get("jobs", {}).values():
        tasks = job.get("tasks", [])
        roles += tasks if isinstance(tasks, int) else len(tasks)
    return roles


def sim_env(work: Path) -> dict[str, str]:
    env = {**os.environ, "TOWERDECK_DATA_DIR": str(work / "data"), "TOWERDECK_SIMULATE": "1"}
    env["TOWERDECK_SETTINGS_DIR"] = str(work / "settings")
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    return env


# --------------------------------------------------------------------------- processes and files


class JournalStates:
    """Role states read from a growing events.jsonl, from where the last read stopped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.state: dict[str, str] = {}

    def running(self) -> int:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return 0
        end = data.rfind(b"\n") + 1  # a line being written is read next time
        self.offset += end
        for line in data[:end].splitlines():
            if b'"role_state"' in line:
                with contextlib.suppress(ValueError):
                    record = json.loads(line)
                    self.state[record["role"]] = record["state"]
        return sum(1 for s in self.state.values() if s == "running")


def tree(parent: psutil.Process) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        return [parent, *parent.children(recursive=True)]
    return []


def agents(marker: str, exclude: set[int]) -> list[psutil.Process]:
    """The run's agents (and whatever they started): processes whose command line names the run."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        if p.pid not in exclude and marker in " ".join(p.info["cmdline"] or []):
            found.append(p)
    return found


def cpu_s(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            total += t.user + t.system
    return total


def kill_all(procs: list[psutil.Process]) -> None:
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.kill()


def sizes(run: Path) -> dict[str, int]:
    """Bytes of each kind of file in the run directory (any encoding of it: *.jsonl or not)."""

    def total(*patterns: str) -> int:
        return sum(p.stat().st_size for pattern in patterns for p in run.glob(pattern) if p.is_file())

    return {
        "journal": total("events.jsonl"),
        "metrics": total("roles/*/metrics*"),
        "samples": total("telemetry/samples-*"),
        "scalars": total("roles/*/scalars*"),
        "logs": total("roles/*/attempt-*.log"),
    }


# --------------------------------------------------------------------------- the CLI's figures


def measure_cli(root: Path, cluster: Path, work: Path, *, roles: int, workers: int, steady_s: float) -> dict[str, Any]:
    run = work / "run"
    marker = str(work)
    err = (work / "launch.err").open("wb")
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "main.py", "launch", str(cluster), "--run-dir", str(run), "--progress-every", "0"],
        cwd=root,
        env=sim_env(work),
        stdout=subprocess.DEVNULL,
        stderr=err,
    )
    err.close()
    result: dict[str, Any] = {}
    launcher = psutil.Process(proc.pid)
    journal = JournalStates(run / "events.jsonl")
    try:
        while journal.running() < roles:
            if proc.poll() is not None or time.monotonic() - started > UP_TIMEOUT_S:
                why = (work / "launch.err").read_text(errors="replace").strip().splitlines()
                raise RuntimeError(
                    f"the cluster did not come up ({journal.running()} of {roles} running, exit {proc.poll()}): "
                    f"{why[-1] if why else 'no error output'}"
                )
            time.sleep(0.2)
        result["launch_to_all_running_s"] = round(time.monotonic() - started, 2)
        time.sleep(SETTLE_S)
        mine = tree(launcher)
        sims = agents(marker, {p.pid for p in mine})
        c0, m0, a0, s0, t0 = cpu_s(mine), cpu_s([launcher]), cpu_s(sims), sizes(run), time.monotonic()
        time.sleep(steady_s)
        elapsed = time.monotonic() - t0
        c1, m1, a1, s1 = cpu_s(mine), cpu_s([launcher]), cpu_s(sims), sizes(run)
        result["steady_s"] = round(elapsed, 1)
        result["controller_percent"] = round(100 * (c1 - c0) / elapsed, 1)
        result["controller_main_percent"] = round(100 * (m1 - m0) / elapsed, 1)
        result["controller_percent_per_worker"] = round(result["controller_percent"] / workers, 4)
        result["controller_processes"] = len(mine)
        result["simulator_agents_percent"] = round(100 * (a1 - a0) / elapsed, 1)
        result["simulator_processes"] = len(sims)
        per = 3600 / elapsed / workers
        result["bytes_per_worker_hour"] = {k: int((s1[k] - s0[k]) * per) for k in s1}
        result["disk_bytes_per_worker_hour"] = sum(v for k, v in result["bytes_per_worker_hour"].items() if k != "logs")
        with contextlib.suppress(psutil.Error):
            result["controller_rss_mib"] = round(launcher.memory_info().rss / 2**20, 1)
    finally:
        left = tree(launcher) + agents(marker, set())
        proc.send_signal(signal.SIGINT)  # Ctrl-C, as a user stops a run
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        kill_all(left)
        kill_all(agents(marker, set()))  # no orphan, whatever happened
    return result


# --------------------------------------------------------------------------- the window's figures


def measure_window(root: Path, cluster: Path, work: Path, *, roles: int, dwell_s: float) -> dict[str, Any]:
    """The window child (this file, ``--window-child``) run on ``root``'s code; its JSON result."""
    out = work / "window.json"
    argv = [sys.executable, str(Path(__file__).resolve()), "--window-child", str(root), str(cluster), str(out)]
    argv += ["--roles", str(roles), "--dwell-s", f"{dwell_s:g}"]
    with open(work / "window.log", "wb") as log:
        proc = subprocess.Popen(argv, cwd=root, env=sim_env(work), stdout=log, stderr=subprocess.STDOUT)
        try:
            proc.wait(UP_TIMEOUT_S + SETTLE_S + dwell_s * len(TABS) + 120 + 120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        finally:
            kill_all(agents(str(work), set()))
    if not out.exists():
        tail = (work / "window.log").read_text(errors="replace").strip().splitlines()[-3:]
        raise RuntimeError(f"the window's run failed (exit {proc.returncode}): {' | '.join(tail)}")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def percentile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def window_child(root: Path, cluster: Path, out: Path, *, roles: int, dwell_s: float) -> int:
    """In its own process, on ``root``'s code: launch ``cluster`` in the window and measure each tab."""
    sys.path.insert(0, str(root))
    os.chdir(root)
    from PySide6 import QtCore, QtWidgets

    from core.cluster.spec import load
    from gui.window.main_window import MainWindow
    from tests.helpers.heartbeat import Heartbeat

    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication([])
    spec, problems = load(cluster)
    assert spec is not None, problems
    window = MainWindow(spec, runs_root=out.parent / "window-runs")
    window.resize(*SIZE)
    window.show()
    window.answer_close_question("stop")
    pump = window.frame
    frames: dict[str, list[tuple[float, float]]] = {tab: [] for tab in TABS}
    measuring: dict[str, Any] = {"tab": None}
    original = pump._on_frame

    def timed_frame() -> None:
        # The frame's handler, then the paints it posted (Qt paints on a posted UpdateRequest;
        # pyqtgraph's scenes post theirs on a queued call): what one frame costs the GUI thread.
        t0, cpu0 = time.perf_counter(), time.thread_time()
        original()
        for _ in range(3):
            app.sendPostedEvents()
        tab = measuring["tab"]
        if tab is not None:
            frames[tab].append((time.perf_counter() - t0, time.thread_time() - cpu0))

    pump.timer.timeout.disconnect()
    pump.timer.timeout.connect(timed_frame)
    result: dict[str, Any] = {"views": {}}
    beats: dict[str, Heartbeat] = {}
    started = time.monotonic()
    phase = {"name": "launching", "since": started, "index": 0}
    whole: dict[str, Heartbeat] = {}  # the whole of the measured time, every tab

    def running() -> int:
        status = pump.last_status
        return sum(1 for r in status.roles if r.state == "running") if status is not None else 0

    def finish() -> None:
        ticker.stop()
        window.stop_all()
        phase["name"], phase["since"] = "stopping", time.monotonic()
        ticker.start(200)

    def tick() -> None:
        now = time.monotonic()
        if phase["name"] == "launching":
            if running() >= roles:
                result["launch_to_all_running_s"] = round(now - started, 2)
                phase["name"], phase["since"] = "settling", now
            elif now - started > UP_TIMEOUT_S:
                result["error"] = f"{running()} of {roles} roles running after {UP_TIMEOUT_S:g} s"
                finish()
        elif phase["name"] == "settling" and now - phase["since"] > SETTLE_S:
            phase["name"], phase["since"], phase["index"] = "measuring", now, 0
            whole["beat"] = Heartbeat()
            show(TABS[0])
        elif phase["name"] == "measuring" and now - phase["since"] > dwell_s:
            tab = TABS[phase["index"]]
            beats[tab].stop()
            measuring["tab"] = None
            phase["index"] += 1
            phase["since"] = now
            if phase["index"] >= len(TABS):
                whole["beat"].stop()
                out.write_text(json.dumps(summary()))  # the figures, however long the stop takes
                finish()
            else:
                show(TABS[phase["index"]])
        elif phase["name"] == "stopping" and (window.source is None or window.source.done):
            result["stop_s"] = round(now - phase["since"], 1)
            ticker.stop()
            app.quit()
        elif phase["name"] == "stopping" and now - phase["since"] > 120:
            result["stop_s"] = None  # not stopped within 120 s
            ticker.stop()
            app.quit()

    def show(tab: str) -> None:
        window.tabs.setCurrentIndex([window.tabs.tabText(i) for i in range(window.tabs.count())].index(tab))
        measuring["tab"] = tab
        beats[tab] = Heartbeat()

    ticker = QtCore.QTimer()
    ticker.timeout.connect(tick)
    ticker.start(100)

    def views() -> dict[str, Any]:
        figures: dict[str, Any] = {}
        for tab in TABS:
            times, beat = frames[tab], beats.get(tab)
            if not times or beat is None:
                continue
            wall = [w * 1000 for w, _ in times]
            figures[tab] = {
                "frames": len(times),
                "frame_p50_ms": round(statistics.median(wall), 1),
                "frame_p95_ms": round(percentile(wall, 0.95), 1),
                "frame_cpu_p95_ms": round(percentile([c * 1000 for _, c in times], 0.95), 1),
                "longest_gap_ms": round(beat.longest_gap_s * 1000),
                "longest_gap_cpu_ms": round(beat.longest_gap_cpu_s * 1000),
                "most_gui_cpu_per_turn_ms": round(beat.longest_cpu_s * 1000),
            }
        return figures

    def summary() -> dict[str, Any]:
        result["views"] = views()
        if "beat" in whole:
            result["longest_gap_ms"] = round(whole["beat"].longest_gap_s * 1000)
        result["window_rss_mib"] = round(psutil.Process().memory_info().rss / 2**20, 1)
        return result

    window.launch()
    app.exec()
    out.write_text(json.dumps(summary()))
    window.close()
    app.processEvents()
    return 0


# --------------------------------------------------------------------------- the other benchmarks at a size


def memory_figures(workers: int, hosts: int, hours: float) -> dict[str, Any]:
    env = {**os.environ, "WORKERS": str(workers), "HOSTS": str(hosts), "HOURS": f"{hours:g}", "WARMUP_H": "3"}
    done = subprocess.run(
        [sys.executable, "benchmarks/bench_window_memory.py"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            record: dict[str, Any] = json.loads(line)
            return {k: record[k] for k in ("hours", "speedup", "max_mib", "slope_mib_per_h") if k in record}
    return {"error": (done.stderr or done.stdout).strip()[-300:]}


def open_run_figures(workers: int, hosts: int, seconds: int) -> dict[str, Any]:
    # COMPACT=1: the day-long run as this code writes it (key frames and deltas), not the old format.
    env = {**os.environ, "WORKERS": str(workers), "HOSTS": str(hosts), "SECONDS": str(seconds), "BASELINE_CAP_S": "1"}
    env["COMPACT"] = "1"
    done = subprocess.run(
        [sys.executable, "benchmarks/bench_open_run.py"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    for line in done.stdout.splitlines():
        found = re.search(r"TowerDeck \(skimmed.*?\)\s+([\d.]+) s\s+CPU\s+([\d.]+) s.*gap\s+(\d+) ms", line)
        if found:
            return {
                "seconds_of_run": seconds,
                "open_s": float(found.group(1)),
                "cpu_s": float(found.group(2)),
                "longest_gap_ms": int(found.group(3)),
            }
    return {"seconds_of_run": seconds, "error": (done.stderr or done.stdout).strip()[-300:]}


# --------------------------------------------------------------------------- reporting


def goals(result: dict[str, Any]) -> dict[str, bool]:
    """The issue's goals at 256 workers, met or not, for what was measured."""
    met: dict[str, bool] = {}
    cli = result.get("cli") or {}
    if "controller_percent" in cli:
        met["controller <= 25 % of a core"] = cli["controller_percent"] <= GOALS_256["controller_percent"]
        met["disk <= 1 MB per worker-hour"] = (
            cli["disk_bytes_per_worker_hour"] <= GOALS_256["disk_bytes_per_worker_hour"]
        )
    views = (result.get("window") or {}).get("views") or {}
    if views:
        met["frames <= 16 ms p95 in every view"] = all(
            v["frame_p95_ms"] <= GOALS_256["frame_p95_ms"] for v in views.values()
        )
        met["no event-loop gap over 200 ms"] = all(v["longest_gap_ms"] <= GOALS_256["gap_ms"] for v in views.values())
    return met


def show(result: dict[str, Any]) -> None:
    print(f"-- {result['variant']}, {result['workers']} workers on {result['hosts']} hosts (simulated)")
    cli = result.get("cli") or {}
    if "controller_percent" in cli:
        b = cli["bytes_per_worker_hour"]
        print(
            f"   launch to all running {cli['launch_to_all_running_s']} s; controller {cli['controller_percent']} % of a core "
            f"({cli['controller_main_percent']} % its main process, {cli['controller_percent_per_worker']} % per worker); "
            f"simulating agents {cli['simulator_agents_percent']} % (the simulator's cost)"
        )
        print(
            "   bytes per worker-hour: "
            + ", ".join(f"{k} {v / 1e3:.0f} kB" for k, v in b.items())
            + f"; derived total {cli['disk_bytes_per_worker_hour'] / 1e6:.2f} MB"
        )
    elif cli.get("error"):
        print(f"   CLI: {cli['error']}")
    window = result.get("window") or {}
    for tab, v in (window.get("views") or {}).items():
        print(
            f"   {tab:<10} frame p50 {v['frame_p50_ms']:6.1f} ms p95 {v['frame_p95_ms']:6.1f} ms ({v['frames']} frames); "
            f"longest gap {v['longest_gap_ms']} ms; most GUI CPU a turn {v['most_gui_cpu_per_turn_ms']} ms"
        )
    if "stop_s" in window:
        stop = window["stop_s"]
        print(
            f"   window: every role running after {window.get('launch_to_all_running_s')} s; stopped in {stop} s"
            if stop is not None
            else "   window: the stop had not ended after 120 s"
        )
    if window.get("error"):
        print(f"   window: {window['error']}")
    for key in ("memory", "open_run"):
        if key in result:
            print(f"   {key}: {result[key]}")
    if result.get("goals"):
        print(
            "   goals at 256: " + "; ".join(f"{k}: {'met' if ok else 'NOT met'}" for k, ok in result["goals"].items())
        )


def measure_size(
    name: str, root: Path, tmp: Path, *, workers: int, hosts: int, args: argparse.Namespace
) -> dict[str, Any]:
    work = tmp / f"{name.split()[0]}-{workers}"
    work.mkdir()
    cluster = args.cluster or tmp / f"sim-{workers}x{hosts}.toml"
    if not cluster.exists():  # one file for both variants: the same ports, hosts and GPUs
        write_cluster(cluster, workers=workers, hosts=hosts, rate_hz=args.rate_hz)
    roles = count_roles(cluster)
    result: dict[str, Any] = {"bench": "sim_scale", "simulated": True, "variant": name, "workers": workers}
    result |= {"hosts": hosts, "roles": roles, "rate_hz": args.rate_hz, "load_average": round(os.getloadavg()[0], 1)}
    try:
        cli_work = work / "cli"
        cli_work.mkdir()
        result["cli"] = measure_cli(root, cluster, cli_work, roles=roles, workers=workers, steady_s=args.steady_s)
    except RuntimeError as exc:
        result["cli"] = {"error": str(exc)}
    if not args.no_window:
        try:
            win_work = work / "window"
            win_work.mkdir()
            result["window"] = measure_window(root, cluster, win_work, roles=roles, dwell_s=args.dwell_s)
        except (RuntimeError, ValueError) as exc:
            result["window"] = {"error": str(exc)}
    if root == ROOT and args.memory:
        result["memory"] = memory_figures(workers, hosts, args.memory_hours)
    if root == ROOT and args.open_run:
        result["open_run"] = open_run_figures(workers, hosts, args.open_run_seconds)
    if workers == 256:
        result["goals"] = goals(result)
    result["load_average_end"] = round(os.getloadavg()[0], 1)
    return result


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    default_workers = int(os.environ.get("TOWERDECK_BENCH_SIM_WORKERS", "256"))
    parser.add_argument("--workers", type=int, default=default_workers, help="workers (TOWERDECK_BENCH_SIM_WORKERS)")
    parser.add_argument("--hosts", type=int, default=0, help="hosts (default: a host per 8 workers)")
    parser.add_argument("--sizes", default="", help="a sweep of this checkout, e.g. 64,128,256,512,1024")
    parser.add_argument("--baseline-sizes", default="256,1024", help="sizes of a sweep the baseline runs at too")
    parser.add_argument("--no-baseline", action="store_true", help="this checkout only")
    parser.add_argument("--no-window", action="store_true", help="the CLI's figures only")
    parser.add_argument("--steady-s", type=float, default=STEADY_S, help="the CLI's steady window")
    parser.add_argument("--dwell-s", type=float, default=8.0, help="seconds each tab is on screen")
    parser.add_argument("--rate-hz", type=float, default=10.0, help="step lines a second per worker")
    parser.add_argument("--memory", action="store_true", help="bench_window_memory.py at the size")
    parser.add_argument("--memory-hours", type=float, default=6.0, help="sped-up hours (256 workers: ~2 min each here)")
    parser.add_argument("--open-run", action="store_true", help="bench_open_run.py at the size")
    parser.add_argument("--open-run-seconds", type=int, default=86_400)
    parser.add_argument("--cluster", type=Path, default=None, help="measure this cluster file, not a generated one")
    parser.add_argument("--json-out", type=Path, default=None, help="append the JSON lines to this file")
    parser.add_argument("--window-child", nargs=3, metavar=("ROOT", "CLUSTER", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--roles", type=int, default=0, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.window_child:
        root, cluster, out = (Path(p) for p in args.window_child)
        return window_child(root, cluster, out, roles=args.roles, dwell_s=args.dwell_s)
    if args.cluster is None and not (ROOT / "scripts" / "sim_cluster.py").exists():
        print("bench_sim_scale: scripts/sim_cluster.py is missing: this checkout has no simulating agent yet")
        return 1
    sizes_run = [int(s) for s in args.sizes.split(",") if s.strip()] if args.sizes else [args.workers]
    with_baseline = (
        set()
        if args.no_baseline
        else ({int(s) for s in args.baseline_sizes.split(",") if s.strip()} if args.sizes else set(sizes_run))
    )
    print(
        f"SIMULATED roles (TOWERDECK_SIMULATE=1): sizes {sizes_run}, {args.rate_hz:g} step lines/s a worker, "
        f"{args.steady_s:g} s steady window, {args.dwell_s:g} s a tab; {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f} at start"
    )
    results: list[dict[str, Any]] = []
    failed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-sim-", ignore_cleanup_errors=True) as tmp_name:
        tmp = Path(tmp_name)
        base = baseline_tree(tmp) if with_baseline else None
        for workers in sizes_run:
            hosts = args.hosts or max(1, workers // 8)
            variants = [(f"baseline {BASELINE}", base)] if base is not None and workers in with_baseline else []
            variants.append(("this code", ROOT))
            for name, root in variants:
                assert root is not None
                try:
                    result = measure_size(name, root, tmp, workers=workers, hosts=hosts, args=args)
                except RuntimeError as exc:
                    result = {"bench": "sim_scale", "variant": name, "workers": workers, "error": str(exc)}
                results.append(result)
                if "error" in result:
                    print(f"-- {name} at {workers}: {result['error']}")
                else:
                    show(result)
                line = json.dumps(result)
                print(line, flush=True)
                if args.json_out is not None:
                    with open(args.json_out, "a", encoding="utf-8") as f:
                        f.write(line + "\n")
                problems = [result.get("error"), (result.get("cli") or {}).get("error")]
                problems.append((result.get("window") or {}).get("error"))
                if root == ROOT and any(problems):
                    failed.append(f"{workers}: {next(p for p in problems if p)}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    if failed:
        print(f"bench_sim_scale failed: {'; '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
