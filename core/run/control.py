"""Controlling a running launch from another process, through a Unix socket in the run directory.

The socket is owner-only (0600 in a 0700 directory): TowerDeck opens no network listener. A
request is one JSON line ``{"action": "stop", "role": "worker:1"}``; the answer one JSON line
``{"ok": true, "message": "..."}`` or ``{"ok": false, "error": "..."}``. Actions: ``status``,
``stop``, ``kill``, ``restart``, ``signal`` (with ``signal``), ``stop_all``, ``kill_all``,
``restart_all``. This module is the protocol and the client; the server is
:mod:`core.controller.control_server`.

Limits, both ways. A request is at most :data:`REQUEST_LIMIT_BYTES` and must arrive whole within
the server's request deadline; anything else (too long, too slow, cut short, not UTF-8, not JSON,
nested too deep, not an object) is answered ``{"ok": false, "error": "bad request: ..."}`` and the
server goes on. Each connection is served on its own thread, so a slow or idle client delays no
other; past the server's connection cap the answer is ``{"ok": false, "error": "busy: ..."}`` at once.
The ``status`` reply is bounded by design, whatever the roles print: each role's ``last_lines`` is
at most :data:`STATUS_TAIL_LINES` lines in :data:`STATUS_TAIL_BYTES` (JSON-encoded; a long line
keeps its head and tail around a ``[... N characters cut ...]`` mark), less each where a run has so
many roles that together they would pass :data:`STATUS_LINES_BYTES`; a role's or host's free text
(``detail``, ``waiting_message``, ``waiting_fix``, ``reason``) is cut to :data:`STATUS_TEXT_BYTES`.
The rest of a role's record is ~0.8 KiB (at most ~4 KiB with its texts at their caps), so a status
is under 1 MiB up to ~500 roles, and under :data:`REPLY_LIMIT_BYTES`, the most the client reads, up
to ~15,000 roles even with every text at its cap.

:func:`request` raises :class:`NotRunning` (nothing listens: the launch is over or gone),
:class:`NoAnswer` (it listens but did not answer in time) or :class:`BadReply` (the reply is too
long, cut short or garbled): each an ``OSError`` whose text is one line for the user.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SOCKET_NAME = "control.sock"
MAX_SUN_PATH = 100
REQUEST_LIMIT_BYTES = 64 * 1024
# What the client reads of a reply: far above what a status can be (see the module's text), so a
# reply past it is broken, not big.
REPLY_LIMIT_BYTES = 64 * 1024 * 1024

STATUS_TAIL_LINES = 10
STATUS_TAIL_BYTES = 4 * 1024  # one role's last_lines, JSON-encoded
STATUS_LINES_BYTES = 512 * 1024  # every role's last_lines together: a run of many roles gets fewer each
STATUS_TEXT_BYTES = 1024  # a free-text field of a role or host (detail, waiting_message, reason)
_MIN_LINE_BYTES = 64  # a line cut shorter than this says nothing: the older lines are left out instead


class BadRequest(ValueError):
    """A request the server cannot take: its text says why, for ``{"ok": false, "error": "bad request: ..."}``."""


class ControlError(OSError):
    """A request to a run's control socket went wrong; its text is one line for the user."""


class NotRunning(ControlError):
    """Nothing listens on the control socket: the launch is over, or its process is gone."""


class NoAnswer(ControlError):
    """The launch took the connection (or not) but gave no whole answer in time."""


class BadReply(ControlError):
    """The launch answered something this client cannot read: too long, cut short, not JSON."""


class _LineTooLong(Exception):
    pass


class _LineCut(Exception):
    """The peer ended the connection before a whole line; ``args[0]`` is the bytes it sent."""


def socket_path_for(run_dir: Path) -> Path:
    """The control socket: always in the run directory (see :func:`reachable`)."""
    return run_dir / SOCKET_NAME


@contextlib.contextmanager
def reachable(path: Path) -> Iterator[str]:
    """A name for ``path`` that fits a Unix socket address (~108 bytes): the path itself, or for a
    deep run directory the same file through an open descriptor of its directory (Linux's
    ``/proc/self/fd/N/NAME``), rather than a temp folder that would outlive a killed launcher."""
    if len(str(path)) < MAX_SUN_PATH or not os.path.isdir("/proc/self/fd"):
        yield str(path)
        return
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def _read_line(conn: socket.socket, *, limit_bytes: int, deadline: float) -> bytes:
    """One line, without its newline, read whole before ``deadline`` (``time.monotonic``): the
    deadline is the whole line's, so a peer that sends a byte now and then cannot hold it longer.
    Raises TimeoutError, :class:`_LineTooLong`, :class:`_LineCut`, or the socket's OSError."""
    data = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        conn.settimeout(left)
        chunk = conn.recv(64 * 1024)
        if not chunk:
            raise _LineCut(len(data))
        end = chunk.find(b"\n")
        data += chunk if end < 0 else chunk[:end]
        if len(data) > limit_bytes:
            raise _LineTooLong
        if end >= 0:
            return bytes(data)


def _parse(line: bytes) -> Any:
    """A line's JSON value; ValueError with the reason (also for what would crash a plain
    ``json.loads``: nesting past the recursion limit, a line too big to parse)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 (byte {exc.start}: {line[exc.start : exc.start + 1]!r})") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deep") from None
    except MemoryError:
        raise ValueError("too large to parse") from None
    except ValueError as exc:  # JSONDecodeError, and an integer of too many digits
        raise ValueError(f"not JSON ({exc})") from None


def read_request(conn: socket.socket, *, deadline: float) -> dict[str, Any]:
    """The server's side: one request, whole before ``deadline``. Raises :class:`BadRequest` with
    the reason for anything but a JSON object line; OSError when the client's connection broke."""
    try:
        line = _read_line(conn, limit_bytes=REQUEST_LIMIT_BYTES, deadline=deadline)
    except TimeoutError:
        raise BadRequest("no whole request line in time; send one JSON line at once") from None
    except _LineTooLong:
        raise BadRequest(f"longer than {REQUEST_LIMIT_BYTES // 1024} KiB") from None
    except _LineCut as exc:
        sent = exc.args[0]
        raise BadRequest(
            f"the connection ended after {sent} bytes, before the end of the line" if sent else "empty"
        ) from None
    try:
        value = _parse(line)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    if not isinstance(value, dict):
        raise BadRequest(f'a request is one JSON object, e.g. {{"action": "status"}}, not {type(value).__name__}')
    return value


def request(socket_path: Path, payload: dict[str, Any], timeout_s: float = 15.0) -> dict[str, Any]:
    """Send one request to a running launch and return its answer, all within ``timeout_s``.
    Raises :class:`NotRunning`, :class:`NoAnswer`, :class:`BadReply` or :class:`ControlError`."""
    deadline = time.monotonic() + timeout_s
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        try:
            with reachable(socket_path) as name:
                sock.connect(name)
        except TimeoutError:
            raise NoAnswer(f"the launch did not take the connection within {timeout_s:g} s ({socket_path})") from None
        except BlockingIOError:  # with a timeout set, a full queue of connections is refused at once
            raise NoAnswer(f"the launch is not taking connections (its queue is full) ({socket_path})") from None
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError, ValueError) as exc:
            # ValueError: a hand-edited socket path with a NUL in it.
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise NotRunning(f"nothing listens on {socket_path}: {reason}") from None
        except OSError as exc:
            raise ControlError(f"cannot connect to {socket_path}: {exc.strerror or exc}") from None
        try:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            sock.sendall((json.dumps(payload) + "\n").encode())
        except TimeoutError:
            raise NoAnswer(f"the launch did not take the request within {timeout_s:g} s ({socket_path})") from None
        except OSError:
            pass  # it answered and closed before reading (busy): that answer is read below
        try:
            line = _read_line(sock, limit_bytes=REPLY_LIMIT_BYTES, deadline=deadline)
        except TimeoutError:
            raise NoAnswer(f"the launch did not answer within {timeout_s:g} s; it may be busy or stuck") from None
        except _LineTooLong:
            raise BadReply(f"the launch's reply is longer than {REPLY_LIMIT_BYTES >> 20} MiB; not read") from None
        except _LineCut as exc:
            sent = f"after {exc.args[0]} bytes of its reply" if exc.args[0] else "without answering"
            raise BadReply(f"the launch closed the connection {sent}") from None
        except OSError as exc:
            raise BadReply(f"the connection broke before the launch's reply: {exc.strerror or exc}") from None
    try:
        reply = _parse(line)
    except ValueError as exc:
        raise BadReply(f"the launch's reply is {exc}") from None
    if not isinstance(reply, dict):
        raise BadReply(f"the launch's reply is a JSON {type(reply).__name__}, not an object")
    return reply


def status_tail_budget(roles: int) -> int:
    """The bytes each role's ``last_lines`` may take in a status of ``roles`` roles."""
    return min(STATUS_TAIL_BYTES, STATUS_LINES_BYTES // max(1, roles))


def cut_text(text: str, max_bytes: int) -> str:
    """``text`` as it fits ``max_bytes`` once JSON-encoded (quotes included): a longer one keeps
    its head (what the line is) and its tail (the newest of a progress bar) around a mark that says
    how much was cut. Never returns less than the mark, however small ``max_bytes``."""
    if len(text) <= max_bytes and len(json.dumps(text)) <= max_bytes:
        return text
    keep = max(0, max_bytes - 40)  # characters kept; each takes at least a byte encoded
    while True:
        tail = keep // 2
        head = text[: keep - tail]
        end = text[len(text) - tail :] if tail else ""
        cut = f"{head}[... {len(text) - len(head) - len(end)} characters cut ...]{end}"
        over = len(json.dumps(cut)) - max_bytes
        if over <= 0 or keep == 0:
            return cut
        keep = max(0, keep - over)  # a character gone is a byte gone at least: fits, or nearly


def fit_lines(lines: list[str], max_bytes: int) -> list[str]:
    """The newest of ``lines`` whose JSON list (as ``json.dumps`` writes it) takes at most
    ``max_bytes``, each line cut to a quarter of that at most, so a huge last line leaves room for
    the few before it."""
    line_bytes = max(_MIN_LINE_BYTES, max_bytes // 4)
    kept: list[str] = []
    left = max_bytes - 2  # the brackets
    for line in reversed(lines):
        room = min(line_bytes, left - (2 if kept else 0))  # ", " before each line but the first
        if room < _MIN_LINE_BYTES and not (room > 0 and len(json.dumps(line)) <= room):
            break
        fitted = cut_text(line, room)
        kept.append(fitted)
        left -= len(json.dumps(fitted)) + (2 if len(kept) > 1 else 0)
    kept.reverse()
    return kept
