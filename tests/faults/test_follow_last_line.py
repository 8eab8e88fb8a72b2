"""``launch --follow``: a role's last line without a newline, and a UTF-8 sequence cut short at the
end of its output, are shown when the role ends, for a role that fails and one that succeeds."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from core.cli.launch import LaunchPrinter, PrinterThread
from tests.helpers.events import make_event
from tests.helpers.ports import free_ports
from tests.helpers.project import run_cli

# Each writes a last line with no newline, then a UTF-8 sequence cut short (the first two bytes
# of the three of "€"), and exits.
FAILING = "import sys; sys.stdout.write('step 1\\nFATAL: no newline'); sys.stdout.flush(); sys.stdout.buffer.write(bytes([0xE2, 0x82])); sys.exit(3)"
SUCCEEDING = (
    "import sys; sys.stdout.write('done: no newline'); sys.stdout.flush(); sys.stdout.buffer.write(bytes([0xE2, 0x82]))"
)


def launch_one(tmp_path: Path, name: str, code: str) -> tuple[Path, str, int]:
    """Launch one worker running ``code``, following it; its run directory, stdout and exit."""
    cluster = tmp_path / f"{name}.toml"
    cluster.write_text(
        f'name = "{name}"\nstrategy = "multi_worker_mirrored"\nlaunch_style = "tf_config"\n'
        f'workdir = "{tmp_path}"\ncommand = ["python", "-c", {json.dumps(code)}]\n'
        f'[jobs.worker]\ntasks = ["127.0.0.1:{free_ports(1)[0]}"]\nrestart = "Never"\n'
    )
    run = tmp_path / name
    result = run_cli("launch", str(cluster), "--run-dir", str(run), "--follow", "all", "--progress-every", "0")
    assert "Traceback" not in result.stdout + result.stderr
    return run, result.stdout, result.returncode


@pytest.mark.timeout(240)
def test_follow_prints_the_last_line_without_newline_when_a_role_ends(tmp_path: Path) -> None:
    """Before: neither worker's last line was printed (only the failure tail showed the failed one's)."""
    run, out, code = launch_one(tmp_path, "failing", FAILING)
    assert code == 1, out
    followed = [line for line in out.splitlines() if " | " in line]
    assert followed == ["    worker:0 | step 1", "    worker:0 | FATAL: no newline\ufffd"], out
    run_ok, out_ok, code_ok = launch_one(tmp_path, "succeeding", SUCCEEDING)
    assert code_ok == 0 and "worker:0     succeeded" in out_ok, out_ok
    assert [line for line in out_ok.splitlines() if " | " in line] == ["    worker:0 | done: no newline\ufffd"], out_ok
    # What was shown changed nothing on disk: the logs hold the bytes as the roles wrote them.
    assert (run / "roles" / "worker-0" / "attempt-1.log").read_bytes() == b"step 1\nFATAL: no newline\xe2\x82"
    assert (run_ok / "roles" / "worker-0" / "attempt-1.log").read_bytes() == b"done: no newline\xe2\x82"


def test_a_last_line_is_printed_once_whole_after_the_output_of_its_batch() -> None:
    """The exit reaches the printer in the same batch as the output before it, and state events
    come first in a batch: the line is printed after that output, whole, and only once; a role
    that goes on (a restart) starts a new line."""
    out = io.StringIO()
    printer = LaunchPrinter(out, ["worker:0"], progress_s=0)
    thread = PrinterThread(printer, interval_s=3600)  # drained by close() only: one batch
    thread.inbox.put(make_event("role_output", 1.0, "worker:0", {"text": "a\nFATAL"}))
    thread.inbox.put(make_event("role_output", 1.1, "worker:0", {"text": ": cut"}))
    thread.inbox.put(
        make_event("role_state", 1.2, "worker:0", {"state": "backoff", "detail": "exit code 3", "old": "running"})
    )
    thread.inbox.put(make_event("role_output", 1.3, "worker:1", {"text": "not followed"}))
    thread.close()
    printer(make_event("role_output", 2.0, "worker:0", {"text": "attempt 2\n"}))
    printer.end_batch()
    lines = [line for line in out.getvalue().splitlines() if " | " in line]
    assert lines == ["    worker:0 | a", "    worker:0 | FATAL: cut", "    worker:0 | attempt 2"]


def test_the_printer_keeps_nothing_it_would_not_print() -> None:
    """At 256 workers the controller published ~2,500 metrics and output events a second into
    the printer's inbox, which merged them and passed them to a printer that printed none of
    them: metrics, scalars and the output of a role not followed are not kept; followed output,
    states and samples (the progress lines) are, and print as before."""
    out = io.StringIO()
    printer = LaunchPrinter(out, ["worker:0"], progress_s=0)
    thread = PrinterThread(printer, interval_s=3600)  # drained by close() only: one batch
    kept: list[str] = []
    put = thread.inbox.put
    thread.inbox.put = lambda event: (kept.append(event.kind), put(event))[1]  # type: ignore[method-assign]
    for n in range(100):
        role = f"worker:{n % 4}"
        thread.put(make_event("role_output", 1.0 + n, role, {"text": f"step {n}\n"}))
        thread.put(make_event("metrics", 1.0 + n, role, {"samples": [{"t": 1.0 + n, "step": n}]}))
        thread.put(make_event("scalars", 1.0 + n, role, {"points": [{"tag": "loss", "step": n, "value": 1.0}]}))
    thread.put(
        make_event("role_state", 200.0, "worker:2", {"state": "failed", "detail": "exit code 3", "old": "running"})
    )
    thread.close()
    assert kept == ["role_output"] * 25 + ["role_state"], kept
    lines = out.getvalue().splitlines()
    assert [line for line in lines if " | " in line] == [f"    worker:0 | step {n}" for n in range(0, 100, 4)]
    assert any("worker:2" in line and "FAILED" in line for line in lines), lines
