"""Which thread ran each of Python's garbage collections (through ``gc.callbacks``)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def collection_threads() -> Iterator[list[str]]:
    """Yields a list that gets the name of the thread of every collection that starts meanwhile."""
    threads: list[str] = []

    def record(phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            threads.append(threading.current_thread().name)

    gc.callbacks.append(record)
    try:
        yield threads
    finally:
        gc.callbacks.remove(record)
