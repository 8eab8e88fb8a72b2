"""Clients of a run's control socket that misbehave on purpose (raw bytes, slow, idle, half-open),
and a listener that answers ``core.run.control.request`` badly: what the control tests throw at
each side of the protocol."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from core.run.control import reachable


def connect(path: Path, timeout_s: float = 10.0) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    with reachable(path) as name:
        sock.connect(name)
    return sock


def read_reply(sock: socket.socket, timeout_s: float = 10.0) -> bytes:
    """Everything the server sends until it closes (one line, if it keeps to its protocol)."""
    sock.settimeout(timeout_s)
    data = b""
    with contextlib.suppress(ConnectionResetError):  # it closed with our unread bytes queued
        while chunk := sock.recv(65536):
            data += chunk
    return data


def exchange(path: Path, data: bytes, timeout_s: float = 10.0) -> bytes:
    """Send ``data``, say no more (half-close), and read the reply whole."""
    with connect(path, timeout_s) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # it answered a too long line early
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        return read_reply(sock, timeout_s)


class Dripper:
    """A client that sends a request a byte at a time, ``every_s`` apart, and never ends its line;
    ``reply`` is what the server sent once it gave up on it, ``done`` is set then."""

    def __init__(self, path: Path, every_s: float) -> None:
        self.sock = connect(path)
        self.reply = b""
        self.done = threading.Event()
        self._every_s = every_s
        self._thread = threading.Thread(target=self._drip, name="dripper", daemon=True)
        self._thread.start()

    def _drip(self) -> None:
        text = b'{"action": "status"' + b" " * 1_000_000
        try:
            for byte in text:
                self.sock.sendall(bytes([byte]))
                self.sock.settimeout(self._every_s)
                try:
                    self.reply = self.sock.recv(65536)
                except TimeoutError:
                    continue
                if self.reply:
                    self.reply += read_reply(self.sock)
                return
        except OSError:
            pass
        finally:
            self.done.set()

    def close(self) -> None:
        self.sock.close()
        self._thread.join(5)


class BadListener:
    """A Unix socket that answers each connection with ``answer(conn)``: a launch gone wrong,
    for the client's side of the protocol."""

    def __init__(self, path: Path, answer: Callable[[socket.socket], None]) -> None:
        self.path = path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(path))
        self._sock.listen(8)
        self._answer = answer
        self._thread = threading.Thread(target=self._serve, name="bad-listener", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with conn, contextlib.suppress(OSError):
                self._answer(conn)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._thread.join(5)


@contextlib.contextmanager
def bad_listener(path: Path, answer: Callable[[socket.socket], None]) -> Iterator[BadListener]:
    listener = BadListener(path, answer)
    try:
        yield listener
    finally:
        listener.close()


def wait_for(condition: Callable[[], object], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
