"""Which thread ran each of Python's garbage collections (through ``gc.callbacks``)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def collection_threads(while_: Callable[[], bool] | None = None) -> Iterator[list[str]]:
    """Yields a list that gets the name of the thread of every collection that starts meanwhile
    (and while ``while_()`` is true, when given)."""
    threads: list[str] = []

    def record(phase: str, _info: dict[str, Any]) -> None:
        if phase == "start" and (while_ is None or while_()):
            threads.append(threading.current_thread().name)

    gc.callbacks.append(record)
    try:
        yield threads
    finally:
        gc.callbacks.remove(record)
