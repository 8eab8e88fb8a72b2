"""The agent's ``profile`` and ``read_file`` ops: their checks, a role whose python has no
TensorFlow, and the controller's side of the replies (an agent too old, one that never answers).
The real capture over SSH is in tests/ssh/test_remote_profile.py."""

from __future__ import annotations

import base64
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from core.agent.profile import MAX_CHUNK_BYTES, parse_profile, profile_path, read_chunk
from core.remote.agent_requests import AgentRequestError, AgentRequests
from tests.helpers.agent_process import AgentProcess, start

GOOD = {"id": "p1", "role": "worker:1", "address": "10.0.0.2:2222", "seconds": 2, "logdir": "profiles/t/worker-1"}


def test_a_good_profile_command_is_read_with_its_defaults():
    request = parse_profile(GOOD)
    assert (request.role, request.address, request.seconds, request.light) == ("worker:1", "10.0.0.2:2222", 2.0, False)
    assert request.timeout_s == 22.0 and request.logdir == "profiles/t/worker-1"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"logdir": "/tmp/x"}, "under profiles/"),
        ({"logdir": "profiles/../agent.pyz"}, "under profiles/"),
        ({"logdir": "roles/worker-1"}, "under profiles/"),
        ({"logdir": "profiles"}, "under profiles/"),
        ({"logdir": ""}, "non-empty string"),
        ({"address": "no-port"}, "HOST:PORT"),
        ({"address": 5}, "must be strings"),
        ({"seconds": 0}, "seconds must be"),
        ({"seconds": 31}, "seconds must be"),
        ({"timeout_s": 1}, "timeout_s must be"),
        ({"timeout_s": 1000}, "timeout_s must be"),
        ({"light": "yes"}, "light must be"),
    ],
)
def test_a_bad_profile_command_names_its_field(change: dict[str, Any], words: str):
    with pytest.raises((TypeError, ValueError), match=words):
        parse_profile({**GOOD, **change})


def test_a_profile_command_without_a_role_is_refused():
    with pytest.raises(KeyError):
        parse_profile({k: v for k, v in GOOD.items() if k != "role"})


def test_read_file_reads_only_under_profiles_and_in_bounded_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "profiles" / "t").mkdir(parents=True)
    (tmp_path / "profiles" / "t" / "a.pb").write_bytes(b"0123456789")
    chunk = read_chunk({"id": "r", "path": "profiles/t/a.pb", "offset": 4, "length": 3})
    assert base64.b64decode(chunk["data"]) == b"456" and chunk["size"] == 10
    assert "error" in read_chunk({"id": "r", "path": "profiles/t/missing.pb"})
    for path in ("agent.pyz", "/etc/passwd", "profiles/../agent.sock"):
        with pytest.raises(ValueError, match="under profiles/"):
            profile_path(path, "path")
    with pytest.raises(ValueError, match="length"):
        read_chunk({"id": "r", "path": "profiles/t/a.pb", "length": MAX_CHUNK_BYTES + 1})


@pytest.fixture
def agent_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)  # the agent's directory: its profiles/ are here
    a = AgentProcess()
    yield a
    if a.proc.poll() is None:
        a.close()


def test_the_agent_refuses_a_role_it_does_not_run_and_a_bad_command_in_one_event(agent_here: AgentProcess):
    agent_here.send({"op": "profile", **GOOD})
    event = agent_here.wait_for("error", op="profile")
    assert event["message"] == "no running role 'worker:1'"
    agent_here.send({"op": "profile", **GOOD, "logdir": "/etc"})
    event = agent_here.wait_for("error", op="profile")
    assert event["message"].startswith("bad profile command: logdir must be a relative path under profiles/")
    agent_here.send({"op": "read_file", "id": "r", "path": "agent.pyz"})
    assert "under profiles/" in agent_here.wait_for("error", op="read_file")["message"]


def test_a_role_whose_python_has_no_tensorflow_is_said_so(agent_here: AgentProcess, tmp_path: Path):
    # This python without TensorFlow: the role's environment puts a ``tensorflow`` that cannot be
    # imported first on its path, and the tracer runs with the role's environment.
    python = sys.executable
    hidden = tmp_path / "no-tensorflow"
    hidden.mkdir()
    (hidden / "tensorflow.py").write_text('raise ImportError("no TensorFlow in this environment")\n')
    start(
        agent_here,
        "worker:0",
        [python, "-c", "import time; time.sleep(60)"],
        tmp_path / "w.log",
        env={"PYTHONPATH": str(hidden)},
    )
    agent_here.send({"op": "profile", **GOOD, "role": "worker:0", "timeout_s": 30})
    event = agent_here.wait_for("profiled", timeout_s=40, id="p1")
    assert event["ok"] is False and event["reply"]["no_tf"] is True, event
    assert event["reply"]["error"].startswith(f"no TensorFlow for {python}"), event
    agent_here.send({"op": "kill", "role": "worker:0"})
    agent_here.wait_for("exited", role="worker:0")


def test_an_agent_without_the_profile_op_is_called_too_old_and_silence_is_a_timeout():
    replies = AgentRequests()

    def old_agent(command: dict[str, Any]) -> bool:
        replies.offer("h", {"ev": "error", "message": f"unknown op {command['op']!r}", "op": command["op"]})
        return True

    with pytest.raises(AgentRequestError, match=r"^the agent on h is too old to profile \(no 'profile' op\)"):
        replies.ask("h", old_agent, {"op": "profile"}, wait_s=5)
    with pytest.raises(AgentRequestError, match=r"^no answer from the agent on h in 0.2 s$"):
        replies.ask("h", lambda command: True, {"op": "profile"}, wait_s=0.2)
    # A late answer is taken off the controller's queue and dropped.
    assert replies.offer("h", {"ev": "profiled", "id": "gone"}) is True
    assert replies.offer("h", {"ev": "sample"}) is False


def test_a_trace_killed_at_its_limit_says_whether_its_python_had_imported_tensorflow():
    from core.profiling.capture import Target, _failure
    from core.profiling.env import WorkerResult

    target = Target("worker:1", "worker", 1, "h2", 2222, None, "running", by_agent=True)
    assert _failure(target, WorkerResult(None, "", None, 81.0), 81.0) == (
        "worker:1: its python on h2 had not imported TensorFlow after 81 s, so nothing was traced "
        "(a busy host? give a longer --timeout)"
    )
    # The tracer's line once TensorFlow is imported (core/agent/tracer.py): the server did not answer.
    imported = WorkerResult({"ok": False, "imported": True}, "", None, 81.0)
    assert _failure(target, imported, 81.0) == (
        "no answer from worker:1 at h2:2222 in 81 s (paused, or busy in one long op?)"
    )


# ------------------------------------------------------------------------------------------
# Symbolic links: anyone who can write the run directory (a role, for one) can make them.


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The agent's directory with profiles/t/a.pb, a secret beside profiles/ and one outside."""
    run = tmp_path / "run"
    (run / "profiles" / "t").mkdir(parents=True)
    (run / "profiles" / "t" / "a.pb").write_bytes(b"profile")
    (run / "control.secret").write_bytes(b"run secret")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.pb").write_bytes(b"outside")
    monkeypatch.chdir(run)
    return run


def read(path: str) -> dict[str, Any]:
    return read_chunk({"id": "r", "path": path})


def test_read_file_refuses_every_symlink_out_of_profiles(run_dir: Path, tmp_path: Path):
    (run_dir / "profiles" / "etc").symlink_to("/etc")  # profiles/etc -> /etc
    (run_dir / "profiles" / "up").symlink_to("../control.secret")  # relative, still in the run dir
    (run_dir / "profiles" / "away").symlink_to(tmp_path / "elsewhere")  # a symlinked parent folder
    (run_dir / "profiles" / "t" / "dotdot").symlink_to("./../../control.secret")
    for path in (
        "profiles/etc/hostname",
        "profiles/./etc/passwd",
        "profiles/etc/../etc/hostname",
        "profiles/up",
        "profiles/./up",
        "profiles/away/x.pb",
        "profiles/t/dotdot",
    ):
        chunk = read(path)
        assert "data" not in chunk, path
        assert "leads outside profiles/" in chunk["error"], chunk
    assert base64.b64decode(read("profiles/t/a.pb")["data"]) == b"profile"


def test_read_file_refuses_profiles_itself_made_a_link(run_dir: Path, tmp_path: Path):
    shutil.rmtree(run_dir / "profiles")
    (run_dir / "profiles").symlink_to(tmp_path / "elsewhere")
    assert "leads outside profiles/" in read("profiles/x.pb")["error"]


def test_a_link_that_stays_inside_profiles_is_read(run_dir: Path):
    (run_dir / "profiles" / "latest").symlink_to("t")
    assert base64.b64decode(read("profiles/latest/a.pb")["data"]) == b"profile"


@pytest.mark.parametrize("swapped", ["file", "folder"])
def test_a_link_swapped_in_between_the_check_and_the_open_is_refused(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swapped: str
):
    """The check resolves the path; then, before the open, the file (or its folder) becomes a link
    to a file outside. The open follows no link, so it fails instead of reading that file."""
    import core.agent.profile as profile

    real_realpath = os.path.realpath

    def realpath_then_swap(path: Any, **kwargs: Any) -> str:
        result = real_realpath(path, **kwargs)
        if str(path).endswith("a.pb"):  # the check of the file has been made: swap now
            if swapped == "file":
                (run_dir / "profiles" / "t" / "a.pb").unlink()
                (run_dir / "profiles" / "t" / "a.pb").symlink_to(tmp_path / "elsewhere" / "x.pb")
            else:
                shutil.rmtree(run_dir / "profiles" / "t")
                (run_dir / "profiles" / "t").symlink_to(tmp_path / "elsewhere")
                (tmp_path / "elsewhere" / "a.pb").write_bytes(b"outside")
        return result

    monkeypatch.setattr(profile.os.path, "realpath", realpath_then_swap)
    chunk = read("profiles/t/a.pb")
    assert "data" not in chunk and "changed into a symbolic link" in chunk["error"], chunk


@pytest.mark.timeout(30, method="thread")
def test_a_fifo_under_profiles_is_refused_without_blocking(run_dir: Path):
    os.mkfifo(run_dir / "profiles" / "t" / "pipe")
    assert "not a regular file" in read("profiles/t/pipe")["error"]


def test_the_agent_answers_a_read_through_a_link_with_an_error_and_no_data(agent_here: AgentProcess, tmp_path: Path):
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "etc").symlink_to("/etc")
    agent_here.send({"op": "read_file", "id": "sym", "path": "profiles/etc/hostname"})
    chunk = agent_here.wait_for("file_chunk", id="sym")
    assert "data" not in chunk and "leads outside profiles/" in chunk["error"]


def test_a_profile_folder_through_a_link_is_refused(run_dir: Path, tmp_path: Path):
    from core.agent.profile import OutsideProfiles, ProfileRequest, start_trace

    (run_dir / "profiles" / "away").symlink_to(tmp_path / "elsewhere")
    request = ProfileRequest("p", "worker:0", "127.0.0.1:1", 1.0, True, "profiles/away/run-1", 5.0)
    with pytest.raises(OutsideProfiles, match="logdir 'profiles/away/run-1' leads outside profiles/"):
        start_trace(request, python=sys.executable, env={}, cwd=None)
    assert not (tmp_path / "elsewhere" / "run-1").exists()
