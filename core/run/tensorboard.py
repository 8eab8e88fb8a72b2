"""Open runs in TensorBoard: the pinned ``tensorboard`` on every local role's event files, named by
role (``worker-0``; with several runs ``<run name>/worker-0``, all runs overlaid in one TensorBoard),
bound to 127.0.0.1 on a free port, stopped (its whole process group) with :meth:`stop`.

The names are a folder of symbolic links in the server's private folder, one per role, given to
TensorBoard as its ``--logdir``: TensorBoard names a run by its path under the logdir, so a role
whose files lie in its folder itself is ``worker-0`` (``--logdir_spec`` made that ``worker-0/.``),
and a run name may hold any character a folder name can (``--logdir_spec`` splits on ``,`` and
``:``). Removing the private folder removes the links, never what they point to.

TensorBoard is started with ``--port 0``: it binds a free port itself and writes it, with its pid,
to ``<tempdir>/.tensorboard-info/pid-<PID>.info``. The temporary directory is a private one made
for this server (``TMPDIR``), so the file read is this server's; :meth:`TensorBoardServer.stop`
removes it. TensorBoard dies with the process that started it, whatever ends that process
(:mod:`core.run.children`); a folder left by one that was killed (SIGKILL: no handler runs) is
removed at the next start, once neither its owner nor its TensorBoard is alive
(:func:`clean_stale_homes`).

A remote role writes its event files on its own machine: they are not in this run directory
(its scalars are, in ``scalars.jsonl``). :func:`event_dirs` says which roles those are.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.cluster.render import role_dir
from core.cluster.spec import ClusterSpec, UnplacedTasksError
from core.run import children, pids

READY_TIMEOUT_S = 90.0
STOP_GRACE_S = 5.0
HOME_PREFIX = "towerdeck-tensorboard-"
OWNER_FILE = "owner.json"  # {"pid", "started"}: the TowerDeck process that made the folder


class TensorBoardError(Exception):
    """TensorBoard cannot be started; the message says why and what to do."""


@dataclass(frozen=True)
class EventDirs:
    """The roles' TensorBoard directories here (name -> path), and the roles whose are not."""

    local: dict[str, Path]
    missing: dict[str, str]  # role -> why its event files are not here


def event_dirs(run_path: Path, spec: ClusterSpec) -> EventDirs:
    """Every role's ``tensorboard/`` directory in the run, named ``worker-0`` (TensorBoard's run
    names cannot hold ':'), and why the others have none here."""
    local: dict[str, Path] = {}
    missing: dict[str, str] = {}
    try:
        tasks = spec.tasks()
    except UnplacedTasksError:
        tasks = spec.planned_tasks()
    for task in tasks:
        directory = role_dir(run_path, task) / "tensorboard"
        has_files = directory.is_dir() and any(p.is_file() for p in directory.rglob("*"))
        if has_files:
            local[task.dir_name] = directory
        elif task.host and spec.host_config(task.host).remote:
            missing[task.role_id] = (
                f"on {task.host}: its event files are on that machine (its scalars are in this run's scalars.jsonl)"
            )
        elif spec.slurm is not None:
            missing[task.role_id] = "on a Slurm node: no event files in this run directory"
        else:
            missing[task.role_id] = "wrote no TensorBoard event files"
    return EventDirs(local, missing)


def tensorboard_program() -> Path | None:
    """The pinned ``tensorboard`` beside this Python (the venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / "tensorboard"
    if beside.is_file():
        return beside
    found = shutil.which("tensorboard")
    return Path(found) if found else None


class TensorBoardServer:
    """A running TensorBoard on a run's event files; :meth:`stop` ends it (idempotent)."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, home: Path, dirs: EventDirs) -> None:
        self.proc = proc
        self.port = port
        self.home = home
        self.dirs = dirs

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def terminate(self) -> None:
        """Ask it to stop (SIGTERM to its process group); returns at once."""
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGTERM)

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM its process group, SIGKILL after ``grace_s``; remove its private temp dir."""
        self.terminate()
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(grace_s)
        shutil.rmtree(self.home, ignore_errors=True)

    def log_tail(self, n: int = 5) -> list[str]:
        try:
            return (self.home / "tensorboard.log").read_text(errors="replace").splitlines()[-n:]
        except OSError:
            return []


def start(run_path: Path, spec: ClusterSpec, timeout_s: float = READY_TIMEOUT_S) -> TensorBoardServer:
    """Start TensorBoard on the run's local event files; waits until it answers on its port.
    Raises TensorBoardError (no event files, no tensorboard, it did not come up)."""
    return start_runs([(run_path, spec)], timeout_s=timeout_s)


def _folder_name(text: str) -> str:
    """``text`` as one folder name: no separator, no NUL, not hidden, not empty."""
    name = "".join("_" if c in "/\\\0" or not c.isprintable() else c for c in text).lstrip(".").strip()
    return name[:100] or "run"


def run_labels(runs: Sequence[tuple[Path, ClusterSpec]]) -> list[str]:
    """What each run's roles are named under: nothing for one run; else its name (the cluster's
    ``name``), or its id (its folder's name) where two of the runs share a name."""
    if len(runs) == 1:
        return [""]
    names = [_folder_name(spec.name) for _, spec in runs]
    labels = [
        name if names.count(name) == 1 else _folder_name(path.name) for (path, _), name in zip(runs, names, strict=True)
    ]
    # Two run folders of one name (copies under different roots): numbered, never merged.
    return [label if labels.count(label) == 1 else f"{label}-{i + 1}" for i, label in enumerate(labels)]


def start_runs(runs: Sequence[tuple[Path, ClusterSpec]], *, timeout_s: float = READY_TIMEOUT_S) -> TensorBoardServer:
    """One TensorBoard on the local event files of every run of ``runs`` (run directory, its
    spec), overlaid: each role named ``<run name>/<role>`` (``<role>`` for one run). Waits until it
    answers; raises TensorBoardError (no event files, no tensorboard, it did not come up)."""
    local: dict[str, Path] = {}
    missing: dict[str, str] = {}
    for (run_path, spec), label in zip(runs, run_labels(runs), strict=True):
        dirs = event_dirs(run_path, spec)
        prefix = f"{label}/" if label else ""
        local.update({prefix + name: path for name, path in dirs.local.items()})
        missing.update({prefix + role: why for role, why in dirs.missing.items()})
    if not local:
        which = ", ".join(path.name for path, _ in runs)
        raise TensorBoardError(
            f"no role of {which} has TensorBoard event files here "
            "(trainers write them to TOWERDECK_TB_DIR, e.g. --logdir={tb_dir})"
        )
    program = tensorboard_program()
    if program is None:
        raise TensorBoardError("tensorboard is not installed: pip install -r requirements.lock")
    return serve(program, [], EventDirs(local, missing), timeout_s=timeout_s, links=local)


def _link_logdir(home: Path, links: Mapping[str, Path]) -> list[str]:
    """``links`` (name -> folder) as symbolic links under ``home``; the ``--logdir`` arguments."""
    logdir = home / "logdir"
    for name, target in links.items():
        link = logdir / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target.resolve(), target_is_directory=True)
    return ["--logdir", str(logdir)]


def serve(
    program: Path,
    where: list[str],
    dirs: EventDirs,
    *,
    timeout_s: float = READY_TIMEOUT_S,
    ready_path: str = "",
    links: Mapping[str, Path] | None = None,
) -> TensorBoardServer:
    """Start ``program`` (a tensorboard) on ``where`` (its --logdir arguments), or on ``links``
    (run name -> folder, linked under its private folder), bound to 127.0.0.1 on a free port;
    returns once it answers (on ``ready_path`` with HTTP 200, when given)."""
    clean_stale_homes()
    home = Path(tempfile.mkdtemp(prefix=HOME_PREFIX))
    me = os.getpid()
    try:
        (home / OWNER_FILE).write_text(json.dumps({"pid": me, "started": pids.start_time(me)}), encoding="utf-8")
        if links is not None:
            where = _link_logdir(home, links)
    except OSError as exc:
        shutil.rmtree(home, ignore_errors=True)
        raise TensorBoardError(f"cannot prepare TensorBoard's folder {home}: {exc.strerror or exc}") from exc
    log = open(home / "tensorboard.log", "wb")  # noqa: SIM115 - the child holds it; closed below
    try:
        # Its own process group (stopping it stops all of it), and it dies with this process.
        proc = children.popen(
            [str(program), *where, "--host", "127.0.0.1", "--port", "0", "--reload_interval", "5"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "TMPDIR": str(home)},
        )
    except OSError as exc:
        shutil.rmtree(home, ignore_errors=True)
        raise TensorBoardError(f"cannot start {program}: {exc.strerror or exc}") from exc
    finally:
        log.close()
    server = TensorBoardServer(proc, 0, home, dirs)
    info = home / ".tensorboard-info" / f"pid-{proc.pid}.info"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and server.alive():
        port = _port_from(info)
        if port is not None and _answers(port) and (not ready_path or _http_ok(port, ready_path)):
            server.port = port
            return server
        time.sleep(0.2)
    why = "exited" if not server.alive() else f"did not answer within {timeout_s:g} s"
    tail = " | ".join(server.log_tail(3))
    server.stop()
    raise TensorBoardError(f"tensorboard {why}" + (f": {tail}" if tail else ""))


def clean_stale_homes(root: Path | None = None) -> list[Path]:
    """Remove the private folders (under ``root``, default the temporary directory) of
    TensorBoards whose owner and server are both gone; the folders removed. One that may still be
    in use (either process alive, or made moments ago and not yet filled in) is left alone."""
    removed: list[Path] = []
    try:
        homes = [p for p in (root or Path(tempfile.gettempdir())).iterdir() if p.name.startswith(HOME_PREFIX)]
    except OSError:
        return removed
    for home in homes:
        try:
            if home.is_symlink() or not home.is_dir() or home.stat().st_uid != os.getuid():
                continue
            if _in_use(home):
                continue
        except OSError:
            continue
        shutil.rmtree(home, ignore_errors=True)
        if not home.exists():
            removed.append(home)
    return removed


def _in_use(home: Path) -> bool:
    """Whether ``home``'s owner or its TensorBoard may still be running (True when unsure)."""
    try:
        owner = json.loads((home / OWNER_FILE).read_text(encoding="utf-8"))
        owner_pid, started = int(owner["pid"]), owner.get("started")
    except FileNotFoundError:
        # No owner yet (being made now), or left by an older TowerDeck: judged by age alone.
        owner_pid, started = None, None
        if time.time() - home.stat().st_mtime < READY_TIMEOUT_S:
            return True
    except (OSError, ValueError, TypeError, KeyError):
        return True
    if owner_pid is not None and _running(owner_pid):
        now = pids.start_time(owner_pid)
        if now is not None and (started is None or now == started):
            return True
    servers = [p.name.removeprefix("pid-").removesuffix(".info") for p in home.glob(".tensorboard-info/pid-*.info")]
    return any(pid.isdigit() and _running(int(pid)) for pid in servers)


def _running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended: a zombie has (a TensorBoard killed with its
    starter stays one until whoever inherited it reaps it, which may be never in a container)."""
    if not os.path.isdir("/proc/self"):
        return pids.start_time(pid) is not None  # no /proc: only whether it exists
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2 :].split()[0] != b"Z"
    except FileNotFoundError:
        return False
    except (OSError, ValueError, IndexError):
        return True  # unsure: keep its folder


def _port_from(info: Path) -> int | None:
    try:
        port = json.loads(info.read_text(encoding="utf-8")).get("port")
    except (OSError, ValueError, AttributeError):
        return None
    return port if isinstance(port, int) and port > 0 else None


def _http_ok(port: int, path: str) -> bool:
    import urllib.request

    with contextlib.suppress(OSError), urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
        return bool(reply.status == 200)
    return False


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1.0):
        return True
    return False
