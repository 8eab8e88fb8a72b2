"""Incremental reading of TensorBoard event files that trainers are still writing (agent side).

A :class:`ScalarTailer` follows one role's TensorBoard directory. Each ``poll()`` returns the scalar
points written since the previous poll, from every ``events.out.tfevents.*`` file in the directory,
including files that appear later (a restarted trainer opens a new file).

Records are framed here (TFRecord: an 8-byte length, the masked CRC-32C of those 8 bytes, the data,
the masked CRC-32C of the data), over reads of up to :data:`READ_BYTES`: TensorBoard's loader reads
each record with a few small reads in pure Python and computes each CRC-32C in pure Python, which
was ~76 % of the tailer's time (profiled, 2026-11-25). A half-written last record is kept and
completed by the next poll, as TensorBoard's loader does. Both CRCs are checked, with the native
``google_crc32c`` when it can be imported and with TensorBoard's pure-Python ``crc32c`` otherwise;
a record that fails a check stops the file there (TensorBoard's loader stopped there too, retrying
the same record on every poll). Only the serialized Event protos are TensorBoard's: they are parsed
with its ``event_pb2``.

The ``tensorboard`` package is optional on a host: it is imported on first use (the first
:class:`ScalarTailer`), so the agent runs without it; :func:`tensorboard_available` says whether
it can be imported. TensorFlow is never imported here. TensorBoard's ``tensorboard.compat.tf`` resolves, on first use,
to the real ``tensorflow`` whenever it is installed (an import of several seconds and hundreds of
MB); the first tailer pins it to TensorBoard's pure-Python ``tensorflow_stub`` instead, unless
the process has already imported TensorFlow or TensorBoard has already resolved it.
"""

from __future__ import annotations

import logging
import os
import struct
import sys
import types
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["READ_BYTES", "ScalarPoint", "ScalarTailer", "tensorboard_available"]

READ_BYTES = 4 * 2**20
"""How much of an event file one read takes (a longer record is read whole, up to
``_MAX_READ_BYTES`` a read)."""

# One read's ceiling: a length field that passed its CRC yet says terabytes (damage, or a hostile
# file) must not become one allocation of that size.
_MAX_READ_BYTES = 64 * 2**20

_log = logging.getLogger(__name__)

_NO_TF_MARKER = "tensorboard.compat.notf"


def _pin_tensorboard_to_stub() -> None:
    """Make TensorBoard use its TensorFlow stub rather than importing TensorFlow.

    ``tensorboard.compat.tf`` looks for the (normally absent) module ``tensorboard.compat.notf``
    and, when it exists, uses the stub unconditionally: that is TensorBoard's own switch
    (``//tensorboard/compat:no_tensorflow``). Left alone when TensorFlow is already imported (the
    real reader is then free, and faster) or when the lazy module was already resolved.
    """
    if "tensorflow" in sys.modules or _NO_TF_MARKER in sys.modules:
        return
    import tensorboard.compat as tb_compat

    if "__version__" in vars(tb_compat.tf):  # resolved already: vars() does not trigger the load
        return
    sys.modules[_NO_TF_MARKER] = types.ModuleType(_NO_TF_MARKER)


class _TensorBoard:
    """The TensorBoard modules the tailer uses, imported once, after the pin."""

    def __init__(self) -> None:
        _pin_tensorboard_to_stub()
        # Imported after the pin on purpose: these modules resolve `tensorboard.compat.tf` when used.
        from tensorboard.backend.event_processing import io_wrapper
        from tensorboard.compat.proto import event_pb2, types_pb2
        from tensorboard.plugins.scalar import metadata as scalar_metadata

        self.crc32c, self.crc32c_native = _crc32c()
        self.io_wrapper: Any = io_wrapper
        self.event_pb2: Any = event_pb2
        self.event_from_string: Callable[[bytes], Any] = event_pb2.Event.FromString
        self.types_pb2: Any = types_pb2
        self.scalars_plugin: str = scalar_metadata.PLUGIN_NAME  # "scalars"


def _crc32c() -> tuple[Callable[[bytes], int], bool]:
    """CRC-32C of bytes: ``google_crc32c``'s C extension when installed, else TensorBoard's
    pure-Python one (what its loader used); and whether it is the native one."""
    try:
        import google_crc32c

        if google_crc32c.implementation == "c":
            return google_crc32c.value, True
    except ImportError:
        pass
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import crc32c

    return crc32c, False


_tb: _TensorBoard | None = None


def _tensorboard() -> _TensorBoard:
    """The TensorBoard modules (ImportError when the package is not installed here)."""
    global _tb
    if _tb is None:
        _tb = _TensorBoard()
    return _tb


def tensorboard_available() -> bool:
    """Whether ``tensorboard`` (and the protobuf it needs) can be found here, without importing it
    (an import costs about a second; it happens with the first tailer)."""
    import importlib.util

    try:
        return all(importlib.util.find_spec(name) is not None for name in ("tensorboard", "google.protobuf"))
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class ScalarPoint:
    """One scalar sample from an event file: ``tag`` at global ``step``, written at ``wall_time`` (s)."""

    tag: str
    step: int
    wall_time: float
    value: float


def _tensor_scalar(tensor: Any) -> float | None:
    """The value of a floating-point scalar tensor, or None when it is anything else."""
    if tensor.tensor_shape.dim:
        return None
    dtype = tensor.dtype
    types_pb2 = _tensorboard().types_pb2
    if dtype == types_pb2.DT_FLOAT:
        if tensor.float_val:
            return float(tensor.float_val[0])
        if len(tensor.tensor_content) == 4:
            return float(struct.unpack("<f", tensor.tensor_content)[0])
    elif dtype == types_pb2.DT_DOUBLE:
        if tensor.double_val:
            return float(tensor.double_val[0])
        if len(tensor.tensor_content) == 8:
            return float(struct.unpack("<d", tensor.tensor_content)[0])
    elif dtype == types_pb2.DT_HALF:
        if tensor.half_val:
            return float(struct.unpack("<e", struct.pack("<H", tensor.half_val[0] & 0xFFFF))[0])
        if len(tensor.tensor_content) == 2:
            return float(struct.unpack("<e", tensor.tensor_content)[0])
    return None


_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_MASK_DELTA = 0xA282EAD8  # TFRecord stores a CRC rotated right by 15 bits, plus this


class _EventFile:
    """One event file, read incrementally: ``_buf[_pos:]`` holds the bytes read past the last
    record returned, the start of the next one."""

    def __init__(self, path: str, crc32c: Callable[[bytes], int]) -> None:
        self.path = path
        # Held open while the file is followed, as TensorBoard's loader held it.
        self._file = open(path, "rb")  # noqa: SIM115
        self._crc32c = crc32c
        self._buf = b""
        self._pos = 0
        self.corrupt = False  # a record failed a CRC check: the file is read no further
        self.bad_records = 0

    def records(self) -> Iterator[bytes]:
        """New serialized Event records since the last call. Stops at a half-written record (its
        bytes are kept and a later call completes it) and for good at a record that fails a CRC
        check. A record counts as read once it has been yielded."""
        crc32c = self._crc32c
        unpack_length, unpack_crc = _LENGTH.unpack_from, _CRC.unpack_from
        while not self.corrupt:
            buf, pos = self._buf, self._pos
            size = len(buf)
            while size - pos >= 12:
                header = buf[pos : pos + 8]
                crc = crc32c(header)  # masked inline (rotated, plus the delta): no call for it
                if ((crc >> 15 | crc << 17) + _MASK_DELTA) & 0xFFFFFFFF != unpack_crc(buf, pos + 8)[0]:
                    self._stop("length")
                    return
                start = pos + 12
                end = start + unpack_length(header)[0]
                if end + 4 > size:
                    break
                record = buf[start:end]
                crc = crc32c(record)
                if ((crc >> 15 | crc << 17) + _MASK_DELTA) & 0xFFFFFFFF != unpack_crc(buf, end)[0]:
                    self._stop("data")
                    return
                pos = self._pos = end + 4
                yield record
            # What is left is the start of a record: read on, at least to its end when its length
            # is known (its header passed its check above).
            rest = size - pos
            wanted = 12 if rest < 12 else 16 + unpack_length(buf, pos)[0]
            chunk = self._file.read(max(READ_BYTES, min(wanted - rest, _MAX_READ_BYTES)))
            if not chunk:
                return
            self._buf, self._pos = (buf[pos:] + chunk if rest else chunk), 0

    def _stop(self, what: str) -> None:
        self.corrupt = True
        self._buf, self._pos = b"", 0
        _log.warning("%s: a record's %s fails its CRC-32C check; the file is read no further", self.path, what)

    def close(self) -> None:
        self._file.close()


class ScalarTailer:
    """Follows one directory (a role's TensorBoard dir): every events.out.tfevents.* file in it,
    including files that appear later (a restarted trainer writes a new file), read incrementally.

    Scalars come from ``simple_value`` (TF1 ``Summary`` protos, ``tf.compat.v1.summary.FileWriter``)
    and from tensor summaries whose plugin is ``scalars`` (TF2 ``tf.summary.scalar``) holding a
    float, double or half scalar. A tag's plugin is named only in its first event, so the metadata
    is remembered per directory, as TensorBoard does per run.

    Not thread-safe: one thread polls.
    """

    def __init__(self, directory: Path | str) -> None:
        self._tb = _tensorboard()  # ImportError here when this host has no tensorboard
        self.directory = Path(directory)
        self._files: dict[str, _EventFile] = {}
        self._failed: set[str] = set()
        self._tag_plugin: dict[str, str] = {}
        self._pending: deque[ScalarPoint] = deque()

    @property
    def files(self) -> list[Path]:
        """The event files followed so far, in reading order."""
        return [Path(p) for p in sorted(self._files)]

    def poll(self, max_points: int | None = None) -> list[ScalarPoint]:
        """New scalar points since the last poll, from all files, in file order.

        With ``max_points`` at most that many are returned; the rest wait for the next poll (none
        is lost). Never raises for a missing directory or a truncated, corrupt or vanished file:
        such a file is logged and skipped, the others are still read.
        """
        limit = max_points if max_points is not None else sys.maxsize
        points: list[ScalarPoint] = []
        while self._pending and len(points) < limit:
            points.append(self._pending.popleft())
        if len(points) >= limit:
            return points
        self._discover()
        parse = self._parse
        for path in sorted(self._files):
            event_file = self._files[path]
            try:
                for record in event_file.records():
                    parse(event_file, record, points)
                    if len(points) >= limit:  # the record's points past the limit wait
                        self._pending.extend(points[limit:])
                        del points[limit:]
                        return points
            except Exception:
                # Truncation and CRC errors end records() quietly; anything else (an I/O error, a
                # file gone from under us) drops this file only.
                _log.warning("stopped reading %s", path, exc_info=True)
                self._drop(path)
        return points

    def unread(self, points: Iterable[ScalarPoint]) -> None:
        """Put back points a poll returned but could not deliver: the next poll returns them first."""
        self._pending.extendleft(reversed(list(points)))

    def _discover(self) -> None:
        """Open loaders for event files that appeared since the last poll."""
        try:
            names = os.listdir(self.directory)
        except OSError:  # not created yet (the trainer has not started), or not a directory
            return
        for name in names:
            path = os.path.join(self.directory, name)
            if path in self._files or path in self._failed:
                continue
            if not self._tb.io_wrapper.IsSummaryEventsFile(path) or not os.path.isfile(path):
                continue
            try:
                self._files[path] = _EventFile(path, self._tb.crc32c)
            except Exception:
                _log.warning("cannot open event file %s", path, exc_info=True)
                self._failed.add(path)

    def _drop(self, path: str) -> None:
        """Stop following a file that failed; it is not reopened (its handle goes with the loader)."""
        event_file = self._files.pop(path, None)
        self._failed.add(path)
        if event_file is not None:
            event_file.close()

    def _parse(self, event_file: _EventFile, record: bytes, points: list[ScalarPoint]) -> None:
        """Append the scalar points in one serialized Event (none for other events or a bad record)."""
        try:
            event = self._tb.event_from_string(record)
        except Exception:
            event_file.bad_records += 1
            if event_file.bad_records == 1:
                _log.warning("skipping an unparsable record in %s", event_file.path)
            return
        # An event without a summary reads as an empty one: no HasField call for most records.
        values = event.summary.value
        if not values:
            return
        step = int(event.step)
        wall_time = float(event.wall_time)
        append = points.append
        for value in values:
            tag = value.tag
            if value.HasField("metadata") and value.metadata.plugin_data.plugin_name:
                self._tag_plugin.setdefault(tag, value.metadata.plugin_data.plugin_name)
            kind = value.WhichOneof("value")
            if kind == "simple_value":
                append(ScalarPoint(tag, step, wall_time, float(value.simple_value)))
            elif kind == "tensor" and self._tag_plugin.get(tag) == self._tb.scalars_plugin:
                number = _tensor_scalar(value.tensor)
                if number is not None:
                    append(ScalarPoint(tag, step, wall_time, number))
