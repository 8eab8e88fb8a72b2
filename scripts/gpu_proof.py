#!/usr/bin/env python3
"""The GPU proof kit (``make gpu-proof``): TowerDeck's headless core, straight from this checkout,
launches one role per GPU (``gpus = [i]``, a PyTorch matmul loop printing step lines), and this
script checks what TowerDeck recorded against nvidia-smi. It writes report.md and report.json:

- each GPU figure TowerDeck sampled (utilisation, memory, temperature, power) against
  ``nvidia-smi --query-gpu`` read right after that sample: the differences, max and median;
- GPU -> role as TowerDeck saw it, as ``nvidia-smi --query-compute-apps`` and the roles' process
  trees say, and as the cluster asked;
- the loop's steps/s with TowerDeck's sampling on and off, alternated (A/B/A/B), as a ratio;
- the agent's own CPU per phase, and the sampling period achieved.

Needs Python 3.11+, nvidia-smi, NVML (nvidia-ml-py) and PyTorch with CUDA; nothing else is
installed or downloaded (the core needs only the standard library for this). Without a GPU it runs
against the NVML double: TOWERDECK_NVML_MODULE=tests/helpers/fake_nvml.py, --nvidia-smi
tests/helpers/fake_nvidia_smi.py and a CPU stand-in load; the report then says so at the top.

    python3 scripts/gpu_proof.py [--out DIR] [--phase-s 15] [--phases 4] [--sample-period 1]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import gpu_proof_report as rep  # noqa: E402 - after the checkout is on the path

EXIT_MISSING = 2
SETTLE_S = 1.0  # the start of each phase is not counted (the switch takes a sample period to act)


class Missing(Exception):
    """A prerequisite that is not there: one line saying what and how to get it."""


def prerequisites(args: argparse.Namespace) -> dict[str, Any]:
    if sys.version_info < (3, 11):  # noqa: UP036 - the machine's python is not ours to choose
        raise Missing(f"Python 3.11 or newer is needed (tomllib); this is {platform.python_version()}")
    from core.agent.gpuquery import GpuQuery

    query = GpuQuery()
    snapshot = query.snapshot()
    if not snapshot["nvml"] or not snapshot["gpus"]:
        status = snapshot["status"].removesuffix("; CPU only")
        raise Missing(f"{status}: the proof needs NVML (nvidia-ml-py, `import pynvml`, and the driver) and a GPU")
    smi = args.nvidia_smi or shutil.which("nvidia-smi")
    if not smi:
        raise Missing("nvidia-smi was not found on PATH: it comes with the NVIDIA driver (or give --nvidia-smi PATH)")
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Missing(f"{smi} -L did not run: {exc}") from None
    if listed.returncode != 0:
        said = (listed.stderr or listed.stdout).strip().splitlines() or [f"exit code {listed.returncode}"]
        raise Missing(f"{smi} -L failed: {said[-1][:200]}")
    double = bool(os.environ.get("TOWERDECK_NVML_MODULE"))
    load = args.load or ("torch" if _torch_gpus(args.python) else None)
    if load is None:
        if not double:
            raise Missing(f"PyTorch with CUDA is needed for the load ({args.python} cannot use a GPU through torch)")
        load = "cpu"
    try:
        import psutil  # noqa: F401 - only to say whether the agent's host figures come from it

        has_psutil = True
    except ImportError:
        has_psutil = False
    return {"nvidia_smi": smi, "double": double, "load": load, "snapshot": snapshot, "psutil": has_psutil}


def _torch_gpus(python: str) -> bool:
    """Whether ``python`` imports torch and sees a GPU (asked in a child: no CUDA in this process)."""
    code = "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    try:
        return subprocess.run([python, "-c", code], capture_output=True, timeout=300).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def cluster_text(gpus: list[int], load: str, python: str, args: argparse.Namespace) -> str:
    from core.agent.freeports import free_ports

    ports = free_ports(len(gpus), "127.0.0.1")  # the roles do not listen: TowerDeck wants addresses
    command = [python, "-u", "gpu_proof_load.py", "--load", load, "--size", str(args.size)]
    tasks = ", ".join(f'{{ address = "127.0.0.1:{p}", gpus = [{g}] }}' for p, g in zip(ports, gpus, strict=True))
    return (
        'name = "gpu-proof"\nstrategy = "custom"\nlaunch_style = "tf_config"\n'
        f"workdir = {json.dumps(str(ROOT / 'scripts'))}\ncommand = {json.dumps(command)}\n"
        f"[jobs.worker]\ntasks = [{tasks}]\n"
    )


class Collector:
    """What the run tells: samples (each paired at once with an nvidia-smi reading), step lines,
    role pids. Controller events arrive on its thread and are only queued there."""

    def __init__(self, smi: str) -> None:
        self.smi = smi
        self.inbox: queue.Queue[Any] = queue.Queue()
        self.pairs: list[dict[str, Any]] = []
        self.sample_times: list[float] = []  # every GPU sample TowerDeck took
        self.skipped = 0  # samples that came while nvidia-smi was still busy with an earlier one
        self.pairing = True  # read nvidia-smi after each sample (off for the A/B phases)
        self.smi_errors: list[str] = []
        self.steps: dict[str, list[tuple[float, int]]] = {}
        self.pids: dict[str, int] = {}
        self.last_apps: list[dict[str, str]] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._work, name="gpu-proof-smi", daemon=True)
        self.thread.start()

    def on_event(self, event: Any) -> None:
        from core.run.events import Metrics, RolePid, Sample

        payload = event.payload
        if isinstance(payload, Sample) and payload.gpus:
            with self.lock:
                self.sample_times.append(float(event.t))
            if self.pairing:
                self.inbox.put(event.to_record())
        elif isinstance(payload, Metrics) and event.role:
            with self.lock:
                for record in payload.samples:
                    if record.get("step") is not None:
                        self.steps.setdefault(event.role, []).append((float(record["t"]), int(record["step"])))
        elif isinstance(payload, RolePid) and event.role and payload.pid is not None:
            with self.lock:
                self.pids[event.role] = payload.pid

    def smi_query(self, kind: str, fields: tuple[str, ...]) -> list[dict[str, str]]:
        argv = [self.smi, f"--query-{kind}={','.join(fields)}", "--format=csv,noheader,nounits"]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        return rep.parse_csv(out.stdout, fields)

    def _work(self) -> None:
        while True:
            sample = self.inbox.get()
            while sample is not None and not self.inbox.empty():  # only the newest is "the same moment"
                self.skipped += 1
                sample = self.inbox.get()
            if sample is None:
                return
            try:
                gpus = self.smi_query("gpu", rep.SMI_GPU_FIELDS)
                smi_t = time.time()
                apps = self.smi_query("compute-apps", rep.SMI_APP_FIELDS)
            except (OSError, subprocess.SubprocessError) as exc:
                self.smi_errors.append(str(exc))  # in the report; the next sample tries again
                continue
            with self.lock:
                self.last_apps = apps
                self.pairs.append(
                    {"sample_t": float(sample["t"]), "smi_t": smi_t, "gpus": sample["gpus"], "smi_gpus": gpus}
                )

    def close(self) -> None:
        self.inbox.put(None)
        self.thread.join(60)


def _proc_rows() -> dict[int, tuple[int, int, str]]:
    """pid -> (ppid, utime+stime ticks, command line) for every process."""
    rows = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except (OSError, IndexError):
            continue
        rows[int(name)] = (int(fields[1]), int(fields[11]) + int(fields[12]), cmd)
    return rows


def process_trees(pids: dict[str, int]) -> dict[str, list[int]]:
    """Each role's leader and its descendants, from /proc."""
    rows = _proc_rows()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in rows.items():
        children.setdefault(ppid, []).append(pid)
    trees = {}
    for role, leader in pids.items():
        tree, stack = [], [leader]
        while stack:
            pid = stack.pop()
            if pid in rows:
                tree.append(pid)
                stack += children.get(pid, [])
        trees[role] = sorted(tree)
    return trees


def agent_ticks(run_dir: Path) -> int:
    """CPU ticks used so far by this run's agent (``agent.pyz --serve`` in the run directory)."""
    return sum(
        t for _, t, cmd in _proc_rows().values() if "agent.pyz" in cmd and "--serve" in cmd and str(run_dir) in cmd
    )


def steps_per_s(steps: dict[str, list[tuple[float, int]]], start: float, end: float) -> float | None:
    """Mean over roles of (steps done in [start, end]) / time, from the parsed step lines."""
    rates = []
    for points in steps.values():
        inside = [(t, s) for t, s in points if start <= t <= end]
        if len(inside) >= 2 and inside[-1][0] > inside[0][0]:
            rates.append((inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0]))
    return round(sum(rates) / len(rates), 3) if rates else None


def wait_for(condition: Any, timeout_s: float, what: str, controller: Any = None) -> None:
    """Wait for ``condition``; a cluster that ended meanwhile (a role failed) is said in one line."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if controller is not None and controller.done:
            status = controller.status()
            lines = [
                f"{r}: {(controller.last_lines(r, 1) or ['(no output)'])[-1].strip()}"
                for r in [t.role_id for t in controller.spec.tasks()]
            ]
            raise Missing(f"the cluster ended before {what} ({status.reason}); last lines: {'; '.join(lines)}")
        if time.monotonic() > deadline:
            raise Missing(f"gave up waiting for {what} after {timeout_s:g} s")
        time.sleep(0.1)


def say(text: str) -> None:
    print(f"gpu-proof: {text}", file=sys.stderr, flush=True)


def run_proof(args: argparse.Namespace, pre: dict[str, Any]) -> dict[str, Any]:
    from core.cluster.spec import parse_text
    from core.controller.session import LaunchSession

    started = time.time()
    gpus = [g["index"] for g in pre["snapshot"]["gpus"]][: args.max_gpus]
    out: Path = args.out
    text = cluster_text(gpus, pre["load"], args.python, args)
    (out / "cluster.toml").write_text(text)
    spec, problems = parse_text(text, out / "cluster.toml")
    if spec is None:
        raise Missing(f"the proof's own cluster does not load: {problems[0].format()}")
    session = LaunchSession.launch(spec, path=out / "run", on_disconnect="stop")
    collector = Collector(pre["nvidia_smi"])
    session.controller.subscribe(collector.on_event)
    session.start()
    phases: list[dict[str, Any]] = []
    gaps: list[float] = []  # between consecutive samples within an on-phase
    trees: dict[str, list[int]] = {}
    try:
        roles = [t.role_id for t in spec.tasks()]
        say(f"launched {len(roles)} roles ({pre['load']} load) in {session.run.path}; waiting for their step lines")
        ready = lambda: all(len(collector.steps.get(r, [])) >= 3 for r in roles)  # noqa: E731
        wait_for(ready, args.start_timeout, "every role printed step lines", session.controller)
        # First TowerDeck against nvidia-smi, then the A/B phases without nvidia-smi running: its
        # own cost (a process per reading) must not be counted as TowerDeck's.
        session.controller.set_sampling(on=True, period_s=args.sample_period).result(30)
        say(f"comparing with nvidia-smi for {args.phase_s:g} s")
        paired = len(collector.pairs)
        time.sleep(args.phase_s)
        wait_for(lambda: len(collector.pairs) > paired, 60, "a sample paired with nvidia-smi", session.controller)
        collector.pairing = False
        with collector.lock:
            last_sample = collector.pairs[-1]
            apps = list(collector.last_apps)
            pids = dict(collector.pids)
        trees = process_trees(pids)
        hz = os.sysconf("SC_CLK_TCK")
        for k in range(args.phases):
            sampling = k % 2 == 0  # A (on), B (off), A, B ...
            say(f"phase {k + 1} of {args.phases}: sampling {'on' if sampling else 'off'} for {args.phase_s:g} s")
            session.controller.set_sampling(on=sampling).result(30)
            t0, ticks0 = time.time(), agent_ticks(session.run.path)
            time.sleep(args.phase_s)
            t1, ticks1 = time.time(), agent_ticks(session.run.path)
            with collector.lock:
                rate = steps_per_s(collector.steps, t0 + SETTLE_S, t1)
                times = [t for t in collector.sample_times if t0 + SETTLE_S <= t <= t1]
            if sampling:
                gaps += [b - a for a, b in itertools.pairwise(times)]
            cpu = round(100.0 * (ticks1 - ticks0) / hz / (t1 - t0), 2)
            phases.append(
                {
                    "sampling": sampling,
                    "seconds": round(t1 - t0, 2),
                    "steps_per_s": rate,
                    "agent_cpu_percent": cpu,
                    "samples": len(times),
                }
            )
    finally:
        session.controller.stop_all()
        session.controller.wait(120)
        session.controller.close()
        session.close()
        collector.close()
    left = [pid for tree in trees.values() for pid in tree if os.path.exists(f"/proc/{pid}")]
    expected = {t.role_id: list(t.gpus or ()) for t in spec.tasks()}
    snapshot = pre["snapshot"]
    return {
        "environment": {
            "nvml_double": pre["double"],
            "load": pre["load"],
            "gpu_names": [g["name"] for g in snapshot["gpus"]],
            "driver": snapshot.get("driver"),
            "python": platform.python_version(),
            "psutil": pre["psutil"],
            "host": platform.node(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started)),
            "duration_s": round(time.time() - started, 1),
            "run_dir": str(out / "run"),
        },
        "cluster": {role: gpus[0] if gpus else None for role, gpus in expected.items()},
        "figures": {
            **rep.compare_figures(collector.pairs),
            "skipped_samples": collector.skipped,
            "nvidia_smi_errors": collector.smi_errors[:10],
        },
        "mapping": rep.compare_mapping(last_sample["gpus"], last_sample["smi_gpus"], apps, trees, expected),
        "phases": phases,
        "overhead": rep.overhead(phases),
        "period": rep.period(gaps, args.sample_period),
        "left_behind": left,
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Prove TowerDeck's GPU figures against nvidia-smi on this machine.")
    parser.add_argument("--out", type=Path, help="where to write (default: build/gpu-proof/<time>)")
    parser.add_argument("--phases", type=int, default=4, help="sampling on/off phases, alternated (default 4: A/B/A/B)")
    parser.add_argument("--phase-s", type=float, default=15.0, help="seconds per phase (default 15)")
    parser.add_argument("--sample-period", type=float, default=1.0, help="TowerDeck's sampling period (0.2 to 10 s)")
    parser.add_argument("--max-gpus", type=int, default=8, help="load at most this many GPUs (default 8)")
    parser.add_argument("--size", type=int, default=4096, help="the matmul's side (default 4096)")
    parser.add_argument("--load", choices=("torch", "cpu"), help="the role's load (default: torch when it sees a GPU)")
    parser.add_argument("--nvidia-smi", help="the nvidia-smi to compare against (default: from PATH)")
    parser.add_argument("--python", default=sys.executable, help="the roles' python (default: this one)")
    parser.add_argument("--start-timeout", type=float, default=300.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.phases < 2 or args.phase_s <= SETTLE_S or not 0.2 <= args.sample_period <= 10:
        parser.error(f"--phases needs 2 or more, --phase-s more than {SETTLE_S} s, --sample-period 0.2 to 10 s")
    args.out = (args.out or ROOT / "build" / "gpu-proof" / time.strftime("%Y%m%d-%H%M%S")).resolve()
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        pre = prerequisites(args)
        args.out.mkdir(parents=True, exist_ok=True)
        report = run_proof(args, pre)
    except Missing as exc:
        print(f"gpu-proof: {exc}", file=sys.stderr)
        return EXIT_MISSING
    (args.out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out / "report.md").write_text(rep.markdown(report))
    print(rep.markdown(report))
    print(f"gpu-proof: wrote {args.out / 'report.md'} and report.json")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        print("gpu-proof: interrupted", file=sys.stderr)
        sys.exit(130)
