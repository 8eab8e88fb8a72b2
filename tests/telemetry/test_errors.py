"""The line that says why a trainer died: a traceback's exception line, else its last line."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from core.telemetry.errors import MAX_ERROR_CHARS, error_line


def output_of(code: str) -> list[str]:
    """What a real Python process printed (stdout and stderr together, as a role's log has it)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    return (done.stdout + done.stderr).splitlines()


def test_a_real_traceback_gives_its_exception_line() -> None:
    lines = output_of("print('step 1 loss 0.5')\n1 / 0")
    assert error_line(lines) == "ZeroDivisionError: division by zero"


def test_a_chained_traceback_gives_the_exception_that_ended_it() -> None:
    code = "try:\n    {}['k']\nexcept KeyError:\n    raise RuntimeError('no checkpoint in /ckpt')"
    assert error_line(output_of(code)) == "RuntimeError: no checkpoint in /ckpt"


def test_a_dotted_tensorflow_error_and_lines_after_the_traceback() -> None:
    lines = [
        "Step: 40",
        "Traceback (most recent call last):",
        '  File "trainer.py", line 229, in <module>',
        "    session.run(train_op)",
        "tensorflow.python.framework.errors_impl.UnavailableError: failed to connect to all addresses",
        "I0000 00:00:1795.1 123 server.cc:10] shutting down",
    ]
    assert error_line(lines) == (
        "tensorflow.python.framework.errors_impl.UnavailableError: failed to connect to all addresses"
    )


def test_without_a_traceback_the_last_line_stands_in_without_its_absl_prefix() -> None:
    lines = ["step 3", "F0000 00:00:1795.123456  4242 check.cc:12] Check failed: ok", "", "[towerdeck] note"]
    assert error_line(lines) == "Check failed: ok"
    assert error_line(output_of("import sys; sys.stderr.write('fatal: no data\\n'); sys.exit(3)")) == "fatal: no data"
    assert error_line([]) == "" and error_line(["", "  "]) == ""


@given(st.lists(st.text(max_size=400), max_size=30))
def test_any_output_gives_one_short_line(lines: list[str]) -> None:
    line = error_line(lines)
    assert len(line) <= MAX_ERROR_CHARS and "\n" not in line.strip("\n")


def test_a_process_killed_by_a_signal_has_no_error_line_but_a_traceback_or_a_fatal_one() -> None:
    assert error_line(["Step: 40", "Step: 41"], last_line=False) == ""
    assert error_line(["Step: 40", "F0000 00:00:1795.1 7 check.cc:1] Check failed: x"], last_line=False) == (
        "Check failed: x"
    )
    assert (
        error_line(["Traceback (most recent call last):", "KeyboardInterrupt"], last_line=False) == "KeyboardInterrupt"
    )
