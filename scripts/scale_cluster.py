"""Writes the cluster of the scale screenshots and tests: 1 ps + 64 light workers on 8 loopback
"hosts" (127.0.0.1-8, each its own agent), each worker on its own GPU of its host (0-7).

Usage: python scripts/scale_cluster.py OUT.toml. Then, with the NVML double for 8 GPUs a host
(this machine has no NVIDIA GPU), e.g.:

    TOWERDECK_NVML_MODULE=$PWD/tests/helpers/fake_nvml.py FAKE_NVML_GPUS=8 PATH=$PWD/.venv/bin:$PATH \\
    xvfb-run -a -s "-screen 0 1920x1200x24" .venv/bin/python main.py OUT.toml --launch --tab training --size 1920x1200 \\
        --screenshot docs/scale-training.png --after 60
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: its own folder is on the path, not the checkout

from scripts.sim_cluster import free_ports  # noqa: E402 - after the path is set

WORKERS, HOSTS = 64, 8


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):  # `--help` is a question, not a file to write
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        print("usage: python scripts/scale_cluster.py OUT.toml", file=sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    ports = free_ports(WORKERS + 1)
    tasks = ",\n  ".join(
        f'{{ address = "127.0.0.{i % HOSTS + 1}:{ports[i + 1]}", gpus = [{i // HOSTS}] }}' for i in range(WORKERS)
    )
    Path(argv[0]).write_text(
        f"""name = "scale-64"
strategy = "between_graph"
workdir = "{ROOT / "resources" / "trainers"}"
command = ["{{python}}", "-u", "light_trainer.py", "--steps=0", "--rate_hz=2"]
stop_grace_s = 3

[jobs.ps]
tasks = ["127.0.0.1:{ports[0]}"]

[jobs.worker]
tasks = [
  {tasks},
]
"""
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
