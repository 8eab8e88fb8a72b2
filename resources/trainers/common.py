"""Shared by the example trainers: arguments, the data set, and where TensorBoard files go.

The data set is scikit-learn's digits (1797 8x8 images, shipped inside the package: no download),
so the examples train in seconds on a CPU and the loss visibly goes down.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Callable
from typing import TypeVar

import numpy as np

T = TypeVar("T")


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--train_steps", type=int, default=300, help="global steps to train")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=0.3)
    parser.add_argument("--log_every", type=int, default=20, help="print and record every N steps")
    parser.add_argument("--log_device_placement", action="store_true", help="log where TensorFlow places each op")
    parser.add_argument("--step_sleep", type=float, default=0.0, help="seconds to sleep per step (slows a demo down)")
    parser.add_argument("--hidden", type=int, default=32, help="hidden units")
    parser.add_argument(
        "--checkpoint_dir",
        default="",
        help="save checkpoints here and resume from the newest one at start (TowerDeck lists them); empty: none",
    )
    parser.add_argument("--checkpoint_every", type=int, default=50, help="steps between checkpoints")


def resumed(name: str, step: int) -> None:
    """Say which checkpoint training resumed from, in the words TowerDeck reads
    (core/telemetry/checkpoints.py): the step a recovery resumed at, and the steps it lost."""
    print(f"resumed from checkpoint {os.path.basename(name)} at step {step}", flush=True)


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits as sklearn_digits

    x, y = sklearn_digits(return_X_y=True)
    return (x / 16.0).astype(np.float32), y.astype(np.int64)


def tensorboard_dir() -> str | None:
    """The directory TowerDeck gives this role for TensorBoard event files (None: don't write)."""
    path = os.environ.get("TOWERDECK_TB_DIR")
    if path and not path.startswith("<"):
        os.makedirs(path, exist_ok=True)
        return path
    return None


def summaries_failed(writer: object, exc: BaseException) -> None:
    """A TensorBoard write failed (a full disk, say): the example trains on without summaries, as a
    trainer should rather than die for its logging. Says so once and closes the writer quietly."""
    print(f"tensorboard: cannot write summaries ({exc}); training goes on without them", flush=True)
    close = getattr(writer, "close", None)
    if close is not None:
        with contextlib.suppress(Exception):  # the same failure again: already said
            close()


def open_summaries(make: Callable[[], T], errors: tuple[type[BaseException], ...]) -> T | None:
    """``make()`` (TensorFlow's summary writer for TOWERDECK_TB_DIR), or None when it cannot even
    be created: TF 2's writer writes its file header at once, so a full disk fails here already.
    ``errors``: what a failed write raises (``tf.errors.OpError`` and the OS's errors)."""
    try:
        return make()
    except errors as exc:
        summaries_failed(None, exc)
        return None
