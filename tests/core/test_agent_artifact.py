"""The agent as shipped: one deterministic zipapp, the same bytes here and on remote hosts."""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

from core.agent import artifact, artifact_file, probe_source
from tests.helpers.project import ROOT

PACKAGE = ROOT / "core" / "agent"


def test_built_the_same_in_two_processes_from_the_package_files():
    code = "import hashlib, sys; from core.agent import artifact; print(hashlib.sha256(artifact()).hexdigest())"
    digests = {
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        for _ in range(2)
    }
    assert len(digests) == 1
    data = artifact()
    assert data.startswith(b"#!/usr/bin/env python3\n")
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        names = zf.namelist()
        assert names == sorted(names)
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}
        package = {n.removeprefix("core/agent/") for n in names if n.startswith("core/agent/")}
        sources = {p.name for p in PACKAGE.glob("*.py")}
        assert package == sources | {f"{Path(n).stem}.pyc" for n in sources - {"__main__.py"}}
        for name in sources:
            assert zf.read(f"core/agent/{name}") == (PACKAGE / name).read_bytes()
            if name != "__main__.py":  # compiled by this python: same magic number, hash of that source
                pyc = zf.read(f"core/agent/{Path(name).stem}.pyc")
                assert pyc[:4] == importlib.util.MAGIC_NUMBER
                assert pyc[8:16] == importlib.util.source_hash((PACKAGE / name).read_bytes())
    assert probe_source() == (PACKAGE / "probe.py").read_bytes()


def test_written_once_and_atomically_where_asked(tmp_path: Path):
    path = artifact_file(tmp_path / "run")
    assert path == tmp_path / "run" / "agent.pyz" and path.read_bytes() == artifact()
    assert (path.stat().st_mode & 0o777) == 0o600
    mtime = path.stat().st_mtime_ns
    assert artifact_file(tmp_path / "run") == path and path.stat().st_mtime_ns == mtime  # unchanged: not rewritten
    path.write_bytes(b"stale")
    assert artifact_file(tmp_path / "run").read_bytes() == artifact()
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["agent.pyz"]  # no temporary file left


def test_probe_runs_from_the_zipapp(tmp_path: Path):
    request = {"workdir": str(tmp_path), "commands": [{"argv": ["no-such-cmd"], "script": None}], "ports": [],
               "tf_timeout_s": 5}  # fmt: skip
    result = subprocess.run(
        [sys.executable, str(artifact_file()), "--probe", json.dumps(request)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["python"] == sys.version.split()[0]
    assert answer["workdir"] == {"path": str(tmp_path), "ok": True}
    assert answer["commands"][0]["found"] is None


def test_a_python_with_another_magic_number_runs_the_sources(tmp_path: Path):
    # A remote host's python may differ from this one: its zipimport must skip our .pyc files.
    source = zipfile.ZipFile(io.BytesIO(artifact()))
    foreign = tmp_path / "agent.pyz"
    with zipfile.ZipFile(foreign, "w") as zf:
        for info in source.infolist():
            data = source.read(info)
            zf.writestr(info, b"\x00\x00\r\n" + data[4:] if info.filename.endswith(".pyc") else data)
    agent = subprocess.Popen([sys.executable, "-u", str(foreign)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert agent.stdout is not None and agent.stdin is not None
    hello = json.loads(agent.stdout.readline())
    agent.stdin.close()
    assert agent.wait(20) == 0
    assert hello["ev"] == "hello" and hello["protocol"] == 1


def test_the_artifact_is_the_same_in_a_fresh_process_and_in_a_busy_one() -> None:
    """A launcher builds the agent in its own process and a test (or another launcher) in one that
    has loaded much more: the bytes must still match (marshal's back-references of format 3 follow
    reference counts, which differ between such processes; the remote launch test caught it)."""
    script = "import sys; from core.agent.artifact import artifact; sys.stdout.buffer.write(artifact())"
    fresh = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, check=True, timeout=120)
    assert fresh.stdout == artifact()
