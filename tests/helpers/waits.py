"""Waiting for a condition with a deadline, never for a fixed time (the suite runs on loaded machines)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(
    condition: Callable[[], Any],
    timeout_s: float = 60.0,
    what: str = "condition",
    context: Callable[[], object] | None = None,
) -> Any:
    """``condition()``'s value once it is truthy; past ``timeout_s`` fails naming ``what``, with
    ``context()`` (what the roles said, say) so a failure in CI can be read without rerunning it."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout_s:g} s waiting for {what}"
                + (f"\n{context()}" if context is not None else "")
            )
        time.sleep(0.05)
