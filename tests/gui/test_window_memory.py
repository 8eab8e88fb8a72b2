"""The window's memory stays flat over a sped-up stretch of a long run (issue 11): the memory
benchmark (benchmarks/bench_window_memory.py) run small, in its own process so that RSS is the
window's alone: 4 simulated hours of 1 ps + 32 workers on 4 hosts with 32 GPUs, fed through the
real bridge into the real window as fast as it takes them.

The size: half the benchmark's 64 workers on 8 hosts, which halves the feed and the window's
intake (nearly all of the test's time) and takes the window down the same paths: past 8 workers
the Training tab draws the spread, past 8 GPUs the GPU tab a tile each (a card a frame), and below
16 hosts / 128 GPUs no host tiles, at 64 as at 32.

The bound: every buffer the window keeps is bounded (Series of 2,048 points per GPU and 4,096 per
worker curve, each filled within the first 70 simulated minutes at these rates; BinnedWorkers of
1,024 bins; log views of a fixed block count), so once warm (2 h) RSS should only move by
allocator noise and the one slow filler: each role's text for the Logs tab, 64 KiB a role at 33
roles (~2 MiB), which the simulated 6 lines a minute take ~4 h to fill (about 0.5 MiB/h). 8 MiB
over the next 2 h (4 MiB/h) is about 4 % of the ~200 MiB the window holds; a leak of one GPU
sample dict per sample kept (~3 KiB x 4 hosts x 3600 s/h ~ 42 MiB/h) or of the series growing
without a cap (32 workers x 2 curves x 3,600 points x ~50 B ~ 11 MiB/h) would still exceed it
(84 and 22 MiB over the 2 h)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers.project import ROOT

pytestmark = pytest.mark.slow

BOUND_MIB = 8.0


# The benchmark's own 840 s bound, not the suite's default 300 s: on a loaded machine four
# simulated hours took over 300 s, and pytest's timeout then killed the test mid-run.
@pytest.mark.timeout(900)
def test_rss_is_flat_after_warm_up_over_sped_up_hours():
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "offscreen",
        "HOURS": "4",
        "WARMUP_H": "2",
        "FRAME_S": "60",
        "WORKERS": "32",
        "HOSTS": "4",
    }
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_window_memory.py")],
        capture_output=True,
        text=True,
        timeout=840,
        env=env,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    rss = report["rss_mib"]
    assert len(rss) == 5 and rss[-1] > 100  # the window was built and fed: it holds something
    assert report["thinned_points"] == 0  # the window kept up with the feed: nothing was thinned
    assert report["growth_after_warmup_mib"] < BOUND_MIB, report
