"""Every ssh that `launch`, its pre-flight and `gpus` start ends with them, whatever ends them.

The host is a real TCP listener that sends ssh's greeting and then nothing (tests/helpers/silent_ssh.py),
reached by the real OpenSSH client. Before: Ctrl-C in `launch --no-preflight` waited for ssh to give up
(the issue saw 68 s), and SIGHUP in the pre-flight, SIGTERM, SIGHUP or SIGKILL of `gpus` left the ssh
running after TowerDeck had gone."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from core.cli.exits import EXIT_INTERRUPTED
from tests.helpers.cli_process import Cli
from tests.helpers.silent_ssh import SilentSshHost, kill_clients
from tests.helpers.waits import wait_for

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="needs the OpenSSH client")

# ssh gives up on this host by itself after 15 s (ServerAliveInterval 5 x 3): a launcher that waits
# for that takes over 10 s after the signal; one that gives the ssh up takes well under this.
PROMPT_EXIT_S = 8.0


@pytest.fixture
def host(tmp_path: Path) -> Iterator[SilentSshHost]:
    with SilentSshHost() as silent:
        yield silent
        kill_clients(silent, tmp_path)


def _started(cli: Cli, host: SilentSshHost, tmp_path: Path) -> list[psutil.Process]:
    """The ssh clients once one runs (and has had a moment to be blocked on the silent host)."""
    clients = wait_for(lambda: host.clients(tmp_path), 60, "an ssh to the silent host")
    assert cli.proc.poll() is None
    return list(clients)


def _gone(clients: list[psutil.Process], timeout_s: float = 5.0) -> None:
    def all_gone() -> bool:
        return not [p for p in clients if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]

    wait_for(all_gone, timeout_s, f"the ssh clients {[p.pid for p in clients]} to end")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_while_connecting_gives_up_the_ssh_at_once(
    tmp_path: Path, host: SilentSshHost, clis: list[Cli], signum: int
) -> None:
    cluster = host.cluster(tmp_path)
    cli = Cli("launch", str(cluster), "--no-preflight", "--run-dir", str(tmp_path / "run"))
    clis.append(cli)
    clients = _started(cli, host, tmp_path)
    wait_for(lambda: (tmp_path / "run" / "agent-silent.log").exists(), 30, "the agent log")
    signalled = time.monotonic()
    cli.signal(signum)
    code, out = cli.finish(60)
    elapsed_s = time.monotonic() - signalled
    assert code == EXIT_INTERRUPTED, out
    assert elapsed_s < PROMPT_EXIT_S, f"exited {elapsed_s:.1f} s after {signal.Signals(signum).name}:\n{out}"
    assert "stopped after" in out and "Traceback" not in out, out
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["state"] == "done" and info["result"] == "stopped", info
    _gone(clients)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGKILL], ids=["SIGHUP", "SIGKILL"])
def test_a_launcher_that_dies_while_connecting_takes_its_ssh_with_it(
    tmp_path: Path, host: SilentSshHost, clis: list[Cli], signum: int
) -> None:
    """SIGHUP (a closed terminal) ends `launch` as before; the ssh it was connecting with goes too."""
    cli = Cli("launch", str(host.cluster(tmp_path)), "--no-preflight", "--run-dir", str(tmp_path / "run"))
    clis.append(cli)
    clients = _started(cli, host, tmp_path)
    cli.signal(signum)
    cli.finish(60)
    _gone(clients)


@pytest.mark.timeout(120)
def test_sighup_during_the_preflight_ends_it_and_its_ssh(tmp_path: Path, host: SilentSshHost, clis: list[Cli]) -> None:
    cli = Cli("launch", str(host.cluster(tmp_path)), "--run-dir", str(tmp_path / "run"))
    clis.append(cli)
    clients = _started(cli, host, tmp_path)
    cli.signal(signal.SIGHUP)
    code, out = cli.finish(30)
    assert code == EXIT_INTERRUPTED, out
    assert "interrupted during the pre-flight: nothing was launched" in out, out
    assert not (tmp_path / "run").exists()
    _gone(clients)


@pytest.mark.timeout(120)
def test_a_cancelled_preflight_ends_its_look_at_the_gpus_at_once(tmp_path: Path, host: SilentSshHost) -> None:
    """The pre-flight's look at a host's GPUs (snapshot_all) ends with the pre-flight's cancel,
    not when its own time limit runs out (it kept the process and its ssh going that long)."""
    import threading

    from core.cluster.spec import load
    from core.preflight.gpus import GpuTarget, snapshot_all

    spec, _ = load(host.cluster(tmp_path))
    assert spec is not None
    stop = threading.Event()
    looked: list[object] = []
    target = GpuTarget("silent", spec.host_config("silent"))
    looking = threading.Thread(
        target=lambda: looked.append(snapshot_all([target], 60.0, spec.ssh_config, stop=stop)), daemon=True
    )
    looking.start()
    clients = wait_for(lambda: host.clients(tmp_path), 60, "the GPU look's ssh")
    stop.set()
    looking.join(10)
    assert not looking.is_alive(), "the look went on after its stop"
    (result,) = looked[0]  # type: ignore[misc]
    assert result.snapshot is None
    _gone(clients)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP], ids=["SIGINT", "SIGHUP"])
def test_validate_remote_stopped_while_an_ssh_hangs_ends_at_once(
    tmp_path: Path, host: SilentSshHost, clis: list[Cli], signum: int
) -> None:
    """Before: it printed `interrupted` and then waited for the checks' own time limit."""
    cli = Cli("validate", str(host.cluster(tmp_path)), "--remote", "--no-ports", "--timeout", "60")
    clis.append(cli)
    clients = _started(cli, host, tmp_path)
    signalled = time.monotonic()
    cli.signal(signum)
    code, out = cli.finish(60)
    elapsed_s = time.monotonic() - signalled
    assert code == EXIT_INTERRUPTED, out
    assert out.strip().splitlines()[-1] == "interrupted during the remote checks", out
    assert elapsed_s < PROMPT_EXIT_S, f"exited {elapsed_s:.1f} s after {signal.Signals(signum).name}:\n{out}"
    _gone(clients)


def _gpus(host: SilentSshHost, tmp_path: Path) -> Cli:
    return Cli("gpus", str(host.cluster(tmp_path)), "--timeout", "60")


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL], ids=["SIGTERM", "SIGHUP", "SIGKILL"]
)
def test_gpus_ended_by_a_signal_takes_its_ssh_with_it(
    tmp_path: Path, host: SilentSshHost, clis: list[Cli], signum: int
) -> None:
    cli = _gpus(host, tmp_path)
    clis.append(cli)
    clients = _started(cli, host, tmp_path)
    cli.signal(signum)
    code, out = cli.finish(30)
    assert "Traceback" not in out, out
    if signum != signal.SIGKILL:
        assert code == EXIT_INTERRUPTED, out
        assert out.strip() == f"gpus: interrupted ({signal.Signals(signum).name}) before every host answered", out
    _gone(clients)


@pytest.mark.timeout(120)
def test_a_one_shot_gpus_stopped_by_ctrl_c_says_so_and_exits_130(
    tmp_path: Path, host: SilentSshHost, clis: list[Cli]
) -> None:
    """Before: exit 0 and nothing printed, as if every host had answered."""
    cli = _gpus(host, tmp_path)
    clis.append(cli)
    clients = _started(cli, host, tmp_path)
    cli.signal(signal.SIGINT)
    code, out = cli.finish(30)
    assert code == EXIT_INTERRUPTED, out
    assert out.strip() == "gpus: interrupted (SIGINT) before every host answered", out
    _gone(clients)


@pytest.mark.timeout(60)
def test_a_child_started_from_a_thread_that_ended_lives_on_until_this_process_dies(tmp_path: Path) -> None:
    """PR_SET_PDEATHSIG follows the thread that forked: children are forked by one long-lived
    thread, so a child a short-lived thread asked for is not killed when that thread ends."""
    import subprocess
    import sys
    import threading

    from core.run import children

    started: list[subprocess.Popen[bytes]] = []
    thread = threading.Thread(
        target=lambda: started.append(children.popen([sys.executable, "-c", "import time; time.sleep(60)"]))
    )
    thread.start()
    thread.join()
    (proc,) = started
    try:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(0.5)  # a child killed with its thread would be dead by now
        assert proc.poll() is None, "the child died with the thread that asked for it"
        assert os.getsid(proc.pid) == proc.pid  # a session of its own
    finally:
        children.kill_group(proc)
        proc.wait(10)


class _Interrupt(Exception):
    pass


@pytest.mark.timeout(60)
def test_a_signal_while_a_child_is_being_started_ends_that_child() -> None:
    """CI caught ``gpus`` interrupted while the spawner thread was starting its ssh: the
    caller's wait raised, the started ssh was nobody's (alive until the process died), and
    the command said only "interrupted". The wait now ends a child it will never return."""
    import subprocess
    import sys
    import threading

    from core.run import children

    started: list[subprocess.Popen[bytes]] = []
    release = threading.Event()

    def slow_start() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
        started.append(proc)
        release.wait(30)  # the signal below arrives while this start is still under way
        return proc

    def interrupt(signum: int, frame: object) -> None:
        release.set()
        raise _Interrupt

    def signal_once_started() -> None:
        wait_for(lambda: bool(started), 30, "the child to be started")
        os.kill(os.getpid(), signal.SIGALRM)  # handled in the main thread, which waits in _on_spawner

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        threading.Thread(target=signal_once_started, daemon=True).start()
        with pytest.raises(_Interrupt):
            children._on_spawner(slow_start)
    finally:
        signal.signal(signal.SIGALRM, previous)
    (proc,) = started
    try:
        assert proc.poll() is not None, "the child whose start was interrupted is still running"
    finally:
        children.kill_group(proc)
        proc.wait(10)
