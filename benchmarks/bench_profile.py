"""Capture and summary time of a live profile (``ctl RUN profile``) of a busy TensorFlow worker.

A real ParameterServerStrategy cluster (chief, ps, 2 workers) from the bundled example trainer;
worker:0 is traced at full detail for TRACE_S seconds through the profiler environment, then
summarised (overview and op statistics). Baseline: TensorFlow's own client,
``tf.profiler.experimental.client.trace`` from a fresh python (what a user types by hand), on
the same role, for the same time. Reports each file's size: the issue asks for a ~5 MB profile.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.profiling.capture import Target, capture  # noqa: E402
from core.profiling.summary import summarize  # noqa: E402
from core.run import control  # noqa: E402

TRACE_S = 3.0
CLUSTER = """
name = "bench-profile"
strategy = "parameter_server"
launch_style = "tf_config"
workdir = "{trainers}"
command = ["python", "-u", "parameter_server.py", "--train_steps=100000000", "--log_every=200"]
stop_grace_s = 3
[jobs.chief]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.ps]
tasks = ["127.0.0.1:{p[1]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[2]}", "127.0.0.1:{p[3]}"]
"""


def free_ports(n: int) -> list[int]:
    import socket

    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def wait_running(run: Path, role: str, timeout_s: float = 180) -> dict[str, object]:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        info = run / "run.json"
        if info.exists() and "control_socket" in info.read_text():
            sock = Path(json.loads(info.read_text())["control_socket"])
            roles = control.request(sock, {"action": "status"}).get("roles") or []
            found = next((r for r in roles if r["role"] == role), None)
            log = run / "roles" / "chief-0" / "attempt-1.log"
            if found and found["state"] == "running" and log.exists() and "loss =" in log.read_text():
                return dict(found)
        time.sleep(0.5)
    raise SystemExit(f"{role} never ran")


def tf_client_trace(address: str, logdir: Path) -> float:
    code = (
        "import time, sys\nt = time.monotonic()\nimport tensorflow as tf\n"
        f"tf.profiler.experimental.client.trace('grpc://{address}', {str(logdir)!r}, {int(TRACE_S * 1000)})\n"
        "print(time.monotonic() - t)"
    )
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return time.monotonic() - started


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cluster = folder / "cluster.toml"
        cluster.write_text(CLUSTER.format(trainers=ROOT / "resources" / "trainers", p=free_ports(4)))
        run = folder / "run"
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        launch = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "main.py"),
                "launch",
                str(cluster),
                "--run-dir",
                str(run),
                "--progress-every",
                "0",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        try:
            worker = Target.from_status(wait_running(run, "worker:0"))
            started = time.monotonic()
            result = capture(run, [worker], TRACE_S)
            capture_s = time.monotonic() - started
            role = result.roles[0]
            if not role.ok:
                raise SystemExit(f"capture failed: {role.error}")
            xplanes = result.xplanes()
            summary_s = min(_timed(lambda: summarize(xplanes)) for _ in range(3))
            baseline_s = tf_client_trace(worker.address, folder / "tf-client")
            baseline_file = max((folder / "tf-client").rglob("*.xplane.pb"), key=lambda p: p.stat().st_size)
            print(f"  profile of worker:0 (full detail, {TRACE_S:g} s trace): {role.xplane_bytes / 1e6:.1f} MB")
            print(f"  capture, TowerDeck (xprof subprocess, checks included) : {capture_s:6.2f} s")
            print(
                f"  capture, baseline (tf.profiler client, fresh python)    : {baseline_s:6.2f} s "
                f"({baseline_file.stat().st_size / 1e6:.1f} MB)"
            )
            print(f"  summary (overview + op stats, profiler env subprocess)  : {summary_s:6.2f} s (best of 3)")
        finally:
            control.request(Path(json.loads((run / "run.json").read_text())["control_socket"]), {"action": "stop_all"})
            launch.wait(120)
    return 0


def _timed(fn: object) -> float:
    started = time.monotonic()
    fn()  # type: ignore[operator]
    return time.monotonic() - started


if __name__ == "__main__":
    sys.exit(main())
