"""The agent's ``profile`` and ``read_file`` ops: a TensorFlow profile of a role of this host, and
its files read back in chunks (docs/agent-protocol.md).

The agent has no TensorFlow; the role's own python has. ``profile`` runs the tracer
(:mod:`.tracer`, shipped in the zipapp) with that python, in its own session, with the role's
environment but not its token (the tracer is not part of the role), its output in files beside
the capture folder, under a hard time limit; the agent's loop never waits for it. Its end comes
as ``profiled``. Paths are relative to the agent's directory (the run directory in serve mode)
and must stay under ``profiles/``: written that way (no ``..``, not absolute) and really, once
symbolic links are followed. Whoever can write the run directory (a role, for one) could put
``profiles/etc -> /etc`` there, and the launcher would fetch any file the agent can read. So a
path is resolved (``realpath``) and checked to lie inside ``<agent dir>/profiles``, then opened
one component at a time with ``O_NOFOLLOW``: a link swapped in between the check and the open is
refused rather than followed. Only regular files are read (a FIFO would block the agent).
"""

from __future__ import annotations

import base64
import contextlib
import errno
import json
import os
import pkgutil
import posixpath
import signal
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from .protocol import now

PROFILES_ROOT = "profiles"
MAX_SECONDS = 30.0
MAX_TIMEOUT_S = 300.0
MAX_CHUNK_BYTES = 4 << 20
STDERR_TAIL_BYTES = 8192
LIGHT_LEVEL, FULL_LEVEL = 1, 2


@dataclass(frozen=True)
class ProfileRequest:
    """A checked ``profile`` command."""

    id: str
    role: str
    address: str
    seconds: float
    light: bool
    logdir: str  # relative, under profiles/
    timeout_s: float


@dataclass
class Trace:
    """One tracer process the agent waits for."""

    request: ProfileRequest
    proc: subprocess.Popen[bytes]
    out_path: str
    err_path: str
    started: float
    returncode: int | None = None
    files: list[dict[str, Any]] = field(default_factory=list)


def profile_path(path: Any, name: str = "logdir") -> str:
    """``path`` as a normalised relative path under ``profiles/``; TypeError/ValueError otherwise."""
    if not isinstance(path, str) or not path:
        raise TypeError(f"{name} must be a non-empty string")
    clean = posixpath.normpath(path)
    if (
        posixpath.isabs(clean)
        or clean.split("/")[0] != PROFILES_ROOT
        or ".." in clean.split("/")
        or clean == PROFILES_ROOT
    ):
        raise ValueError(f"{name} must be a relative path under {PROFILES_ROOT}/, not {path!r}")
    return clean


class OutsideProfiles(ValueError):
    """A path that leads out of ``profiles/`` through a symbolic link."""


def inside_profiles(path: str, name: str = "path") -> str:
    """``path`` (already through :func:`profile_path`) with every symbolic link resolved, relative
    to the agent's directory; :class:`OutsideProfiles` when that is not inside ``profiles/``."""
    base = os.path.realpath(os.curdir)
    root = os.path.join(base, PROFILES_ROOT)
    real = os.path.realpath(path)
    if real == root or os.path.commonpath([root, real]) != root:
        raise OutsideProfiles(f"{name} {path!r} leads outside {PROFILES_ROOT}/ (through a symbolic link)")
    return os.path.relpath(real, base)


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


def open_inside_profiles(path: str) -> int:
    """A read-only descriptor of the regular file ``path`` inside ``profiles/``, opened without
    following any symbolic link (see the module's docstring); OSError or OutsideProfiles."""
    parts = inside_profiles(path).split(os.sep)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(os.curdir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    part = parts[0]
    try:
        for part in parts[:-1]:
            inner = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        part = parts[-1]
        # O_NONBLOCK: a FIFO put there would otherwise block the agent's loop in open().
        file_fd = os.open(part, flags | os.O_NONBLOCK, dir_fd=fd)
    except OSError as exc:
        # A link where the check saw none (ELOOP for the file, ENOTDIR for a folder): swapped in.
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(part, fd):
            raise OutsideProfiles(f"{path!r} changed into a symbolic link while it was opened; refused") from None
        raise
    finally:
        os.close(fd)
    if not stat.S_ISREG(os.fstat(file_fd).st_mode):
        os.close(file_fd)
        raise OSError(errno.EINVAL, "not a regular file")
    return file_fd


def parse_profile(command: dict[str, Any]) -> ProfileRequest:
    """Check a ``profile`` command's fields (KeyError/TypeError/ValueError name the field)."""
    request_id, role, address = command["id"], command["role"], command["address"]
    if not isinstance(request_id, str) or not isinstance(role, str) or not isinstance(address, str):
        raise TypeError("id, role and address must be strings")
    if ":" not in address or not address.rsplit(":", 1)[1].isdigit():
        raise ValueError(f"address must be HOST:PORT, not {address!r}")
    seconds = float(command["seconds"])
    if not 0 < seconds <= MAX_SECONDS:
        raise ValueError(f"seconds must be from 0 to {MAX_SECONDS:g}, not {seconds:g}")
    timeout_s = float(command.get("timeout_s", seconds + 20.0))
    if not seconds < timeout_s <= MAX_TIMEOUT_S:
        raise ValueError(f"timeout_s must be more than seconds and at most {MAX_TIMEOUT_S:g}, not {timeout_s:g}")
    light = command.get("light", False)
    if not isinstance(light, bool):
        raise TypeError("light must be true or false")
    return ProfileRequest(request_id, role, address, seconds, light, profile_path(command["logdir"]), timeout_s)


def tracer_source() -> bytes:
    """The tracer's source, from the zipapp (or the checkout)."""
    data = pkgutil.get_data(__package__ or "core.agent", "tracer.py")
    if data is None:
        raise OSError("the tracer is missing from the agent")
    return data


def role_python(argv0: str) -> str:
    """The python that runs the role (its command's first word when that is a python), else the agent's."""
    return argv0 if os.path.basename(argv0).startswith("python") else sys.executable


def start_trace(request: ProfileRequest, *, python: str, env: dict[str, str], cwd: str | None) -> Trace:
    """Start the tracer; OSError when it cannot run (no such python, a full disk), OutsideProfiles
    when its folder leads out of ``profiles/`` (the tracer would write there)."""
    inside_profiles(request.logdir, "logdir")
    os.makedirs(request.logdir, exist_ok=True)
    inside_profiles(request.logdir, "logdir")  # no link made on the way while it was created
    base = os.path.abspath(request.logdir)
    out_path, err_path = base + ".trace.out", base + ".trace.err"
    level = LIGHT_LEVEL if request.light else FULL_LEVEL
    args = [request.address, base, str(int(request.seconds * 1000)), str(level)]
    tracer_env = {**env, "TF_CPP_MIN_LOG_LEVEL": "0", "CUDA_VISIBLE_DEVICES": ""}  # says why; no GPU for it
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [python, "-c", tracer_source().decode(), *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=cwd or None,
            env=tracer_env,
            start_new_session=True,
        )
    return Trace(request, proc, out_path, err_path, now())


class Traces:
    """The tracers running; the watch's reap hands their exits here (it reaps every child)."""

    def __init__(self) -> None:
        self.running: dict[int, Trace] = {}

    def exited(self, pid: int, status: int) -> bool:
        trace = self.running.get(pid)
        if trace is None:
            return False
        trace.returncode = os.waitstatus_to_exitcode(status)
        trace.proc.returncode = trace.returncode  # Popen must not wait for it again
        return True

    def poll(self) -> list[dict[str, Any]]:
        """The ``profiled`` events of the tracers that ended or ran out of time."""
        done = []
        for pid, trace in list(self.running.items()):
            late = now() - trace.started > trace.request.timeout_s
            if trace.returncode is None and not late:
                continue
            if trace.returncode is None:
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)  # the reap collects it as an unknown child
            del self.running[pid]
            done.append(self._outcome(trace))
        return done

    def stop_all(self) -> None:
        for pid in self.running:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)

    @staticmethod
    def _outcome(trace: Trace) -> dict[str, Any]:
        request = trace.request
        reply: Any = None
        with contextlib.suppress(OSError, ValueError):
            with open(trace.out_path, encoding="utf-8", errors="replace") as f:
                lines = [line for line in f.read().splitlines() if line.startswith("{")]
            reply = json.loads(lines[-1]) if lines else None
        stderr = ""
        with contextlib.suppress(OSError), open(trace.err_path, "rb") as f:
            f.seek(max(0, os.path.getsize(trace.err_path) - STDERR_TAIL_BYTES))
            stderr = f.read().decode("utf-8", "replace")
        files = []
        for folder, _, names in os.walk(request.logdir):
            for name in sorted(names):
                path = os.path.join(folder, name)
                with contextlib.suppress(OSError):
                    files.append({"path": path, "bytes": os.path.getsize(path)})
        ok = trace.returncode == 0 and isinstance(reply, dict) and reply.get("ok") is True
        return {
            "id": request.id,
            "role": request.role,
            "ok": ok,
            "returncode": trace.returncode,
            "reply": reply,
            "stderr": stderr,
            "files": files,
            "elapsed_s": round(now() - trace.started, 3),
        }


def read_chunk(command: dict[str, Any]) -> dict[str, Any]:
    """The ``file_chunk`` fields answering a ``read_file`` command."""
    request_id = command["id"]
    if not isinstance(request_id, str):
        raise TypeError("id must be a string")
    path = profile_path(command["path"], "path")
    offset, length = int(command.get("offset", 0)), int(command.get("length", MAX_CHUNK_BYTES))
    if offset < 0 or not 0 < length <= MAX_CHUNK_BYTES:
        raise ValueError(f"offset must be >= 0 and length from 1 to {MAX_CHUNK_BYTES}")
    try:
        with open(open_inside_profiles(path), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(offset)
            data = f.read(length)
    except OutsideProfiles as exc:
        return {"id": request_id, "path": path, "error": f"cannot read {path}: {exc}"}
    except OSError as exc:
        return {"id": request_id, "path": path, "error": f"cannot read {path}: {exc.strerror or exc}"}
    return {"id": request_id, "path": path, "offset": offset, "size": size, "data": base64.b64encode(data).decode()}
