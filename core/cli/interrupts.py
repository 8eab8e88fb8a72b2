"""What the command line does on Ctrl-C, SIGTERM and SIGHUP (a closed terminal) while it waits.

Python's default for SIGTERM and SIGHUP is to die on the spot, without ``finally`` blocks: the
children a command started in sessions of their own (ssh, GPU queries, TensorBoard) were left
running. These handlers turn the three signals into the command's own way to end."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """One of :data:`ENDING_SIGNALS` arrived (``signum`` says which): unwinds like Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def on_signals(action: Callable[[int], None]) -> Iterator[None]:
    """Run ``action(signum)`` on each of :data:`ENDING_SIGNALS` while the block runs (main thread
    only; elsewhere Python cannot take signals and the block runs as it is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, lambda signum, frame: action(signum)) for sig in ENDING_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _raise(signum: int) -> None:
    raise Interrupted(signum)


def raising_on_signals() -> contextlib.AbstractContextManager[None]:
    """Raise :class:`Interrupted` in the main thread on each of :data:`ENDING_SIGNALS`, so the
    block's ``finally`` ends what it started."""
    return on_signals(_raise)
