"""Checks of a cluster against this machine: commands, working directory, free ports.

Which tasks are this machine's is :mod:`core.cluster.locality`'s answer (through ``spec.host_config``);
the others are checked on their machine by the pre-flight (:mod:`core.preflight.runner`).
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
from pathlib import Path

from core.agent.freeports import ALL_ADDRESSES
from core.agent.probe import missing_imports
from core.cluster.arglimits import launch_size_problems
from core.cluster.problems import ERROR, WARNING, Problem
from core.cluster.render import command_of
from core.cluster.spec import ClusterSpec, Task, locate
from core.cluster.spec.locate import path_text


def port_holder(host: str, port: int) -> str | None:
    """Who listens on ``port`` (as 'pid N (name)'), or None if nobody or unknown."""
    try:
        import psutil

        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
                if conn.pid:
                    try:
                        return f"pid {conn.pid} ({psutil.Process(conn.pid).name()})"
                    except psutil.Error:
                        return f"pid {conn.pid}"
                return "another process"
    except Exception:  # no psutil, or not allowed to see other users' sockets
        return None
    return None


def port_in_use(host: str, port: int) -> bool:
    """True when a TCP server could not bind ``host:port`` now, as TensorFlow binds it.

    SO_REUSEADDR as TensorFlow's gRPC server sets it: connections of an earlier run lingering in
    TIME_WAIT do not block a new server, a listener does. TensorFlow binds every address, so a
    port held on another one only (127.0.0.5:P for a task on 127.0.0.1) is in use too.
    """
    here = _bind_fails(host, port)
    if here is None:
        return False  # not an address of this machine: its own checks say so
    return here or bool(_bind_fails("::" if ":" in host else ALL_ADDRESSES, port))


def _bind_fails(host: str, port: int) -> bool | None:
    """True: in use; False: free; None: ``host`` is not an address here."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
                return None
            raise
    return False


def find_executable(name: str, cwd: Path, env_path: str | None) -> str | None:
    if "/" in name:
        candidate = Path(name) if Path(name).is_absolute() else cwd / name
        return str(candidate) if candidate.is_file() and os.access(candidate, os.X_OK) else None
    return shutil.which(name, path=env_path)


def script_of(argv: tuple[str, ...]) -> str | None:
    """The script a ``python [opts] script.py`` command runs, or None (``-m``, ``-c``, not python)."""
    if not argv or not (Path(argv[0]).name.startswith("python") or argv[0] == "{python}"):
        return None
    for arg in argv[1:]:
        if arg in ("-m", "-c"):
            return None
        if not arg.startswith("-"):
            return arg
    return None


def check_local(spec: ClusterSpec, text: str = "", *, check_ports: bool = True, partial: bool = False) -> list[Problem]:
    """Problems launching ``spec`` on this machine; empty when it can start.

    ``partial``: ``spec`` was read from a file with errors (``parse_data(partial=True)``), so these
    problems are listed with the file's own; the size of each role's whole command line is left
    for when the cluster is whole (rendering it needs every job the strategy asks for)."""
    problems: list[Problem] = []
    if not spec.workdir.is_dir():
        problems.append(
            Problem(
                "workdir",
                f"{spec.workdir} is not a directory",
                "create it, or fix workdir (relative to the cluster file)",
                ERROR,
                locate(text, ("workdir",)),
            )
        )
        return problems
    checked: set[tuple[str, ...]] = set()
    # Counted tasks (tasks = N, on Slurm) have no host yet: their nodes are checked when placed.
    for task in spec.explicit_tasks():
        if spec.host_config(task.host).remote:
            continue  # checked on its machine by the pre-flight (core.preflight.runner), over SSH
        argv = command_of(spec, task)
        path = _command_path(spec, task, text)
        if argv and argv not in checked:  # no command: the file's own problem already says so
            checked.add(argv)
            problems += _check_command(spec, task, argv, path=path, text=text)
        if check_ports:
            problems += _check_port(task, text)
    # Each role's whole command line and environment (this one's, inherited here) against ARG_MAX.
    if not partial:
        problems += launch_size_problems(spec, text, inherited=os.environ)
    return problems + _check_notify(spec, text)


def _check_notify(spec: ClusterSpec, text: str) -> list[Problem]:
    """[notify]'s program exists (a warning: a notification that cannot run is reported, not fatal)."""
    if spec.notify is None or find_executable(spec.notify.command[0], spec.workdir, os.environ.get("PATH")):
        return []
    return [
        Problem(
            "notify.command",
            f"{spec.notify.command[0]!r} was not found{' in ' + str(spec.workdir) if '/' in spec.notify.command[0] else ' on PATH'}; "
            "notifications would fail (the run would not)",
            "install it, or give its full path",
            WARNING,
            locate(text, ("notify", "command")),
        )
    ]


def _command_path(spec: ClusterSpec, task: Task, text: str) -> tuple[str | int, ...]:
    """Where ``task``'s command is written: the top, its job, or the task itself."""
    if not task.command:
        return ("command",)
    job_path: tuple[str | int, ...] = ("jobs", task.job, "command")
    if all(t.command == task.command for t in spec.jobs[task.job].tasks) and locate(text, job_path) is not None:
        return job_path
    return ("jobs", task.job, "tasks", task.index, "command")


def _check_command(
    spec: ClusterSpec, task: Task, argv: tuple[str, ...], *, path: tuple[str | int, ...], text: str
) -> list[Problem]:
    env_path = {**os.environ, **spec.env, **task.env}.get("PATH")
    field = path_text(path)
    if find_executable(argv[0], spec.workdir, env_path) is None:
        given = Path(argv[0]) if Path(argv[0]).is_absolute() else spec.workdir / argv[0]
        if "/" in argv[0] and given.is_dir():
            message, hint = f"command {argv[0]!r} is a directory, not a program", "name the program in it"
        elif "/" in argv[0] and given.exists():
            message = f"command {argv[0]!r} is not executable"
            hint = f'chmod +x {given}, or start it with its interpreter (a Python script: ["python", "{argv[0]}"])'
        else:
            where = " in " + str(spec.workdir) if "/" in argv[0] else " on PATH"
            message, hint = f"command {argv[0]!r} was not found{where}", "install it, or give its full path"
        return [Problem(field, message, hint, ERROR, locate(text, path))]
    script = script_of(argv)
    if script is not None and "{" not in script:
        script_path = Path(script) if Path(script).is_absolute() else spec.workdir / script
        if not script_path.is_file():
            return [
                Problem(
                    field,
                    f"script {script!r} does not exist in {spec.workdir}",
                    "fix the path (relative to workdir) or workdir",
                    ERROR,
                    locate(text, path),
                )
            ]
        python = find_executable(argv[0], spec.workdir, env_path)
        missing, _why = missing_imports(str(python), str(script_path), timeout_s=20.0)
        if missing:
            return [
                Problem(
                    field,
                    f"{argv[0]} cannot import {', '.join(missing)}, which {script} imports: the role would fail at start",
                    f"start the command with {{python}} (the python TowerDeck runs on), or pip install them for {python}",
                    WARNING,
                    locate(text, path),
                )
            ]
    return []


def _check_port(task: Task, text: str) -> list[Problem]:
    try:
        busy = port_in_use(task.host, task.port)
    except OSError as exc:
        return [
            Problem(
                f"jobs.{task.job}.tasks[{task.index}]",
                f"cannot check port {task.port} on {task.host}: {exc}",
                "check the host name",
                ERROR,
                locate(text, ("jobs", task.job, "tasks", task.index)),
            )
        ]
    if not busy:
        return []
    holder = port_holder(task.host, task.port)
    by = f" by {holder}" if holder else ""
    return [
        Problem(
            f"jobs.{task.job}.tasks[{task.index}]",
            f"port {task.port} on {task.host} is already in use{by}",
            "stop what holds it, or pick a free port",
            ERROR,
            locate(text, ("jobs", task.job, "tasks", task.index)),
        )
    ]
