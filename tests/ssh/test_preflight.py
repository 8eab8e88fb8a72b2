"""Pre-flight over a real sshd: a good host, a missing script, a busy port, a bad key, an unknown host key."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from core.cluster.spec import parse_text
from core.preflight.runner import preflight
from tests.helpers.ports import free_ports
from tests.helpers.project import ROOT, run_cli
from tests.helpers.ssh_server import SshServer

pytestmark = pytest.mark.slow
TRAINERS = ROOT / "resources" / "trainers"


def cluster_text(sshd_config: Path, script2: str = "between_graph.py", ports: list[int] | None = None) -> str:
    p = ports or [free_ports(1, "127.0.0.2")[0], free_ports(1, "127.0.0.3")[0]]
    return f"""
name = "pf"
strategy = "custom"
workdir = "{TRAINERS}"
command = ["{sys.executable}", "-u", "between_graph.py"]
ssh_config = "{sshd_config}"
[hosts."127.0.0.2"]
ssh = "127.0.0.2"
python = "{sys.executable}"
[hosts."127.0.0.3"]
ssh = "node3"
python = "{sys.executable}"
[jobs.worker]
tasks = ["127.0.0.2:{p[0]}", {{ address = "127.0.0.3:{p[1]}", command = ["{sys.executable}", "-u", "{script2}"] }}]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cluster.toml"
    path.write_text(text)
    return path


def by_name(result, name: str):
    return [c for c in result.checks if c.name == name]


def test_preflight_good_hosts_report_python_tensorflow_and_nvml(tmp_path: Path, sshd: SshServer):
    spec, problems = parse_text(cluster_text(sshd.config), tmp_path / "c.toml")
    assert spec is not None, problems
    results = preflight(spec, timeout_s=90)
    assert [r.host for r in results] == ["127.0.0.2", "127.0.0.3"]
    for r in results:
        assert r.ok, r
        import tensorflow  # noqa: F401 - only to know which version the probe must find

        tf = by_name(r, "tensorflow")
        assert tf and tf[0].ok and sys.modules["tensorflow"].__version__ in tf[0].detail
        assert by_name(r, "nvml")[0].ok is None  # information, not a failure
        assert by_name(r, "python")[0].detail.endswith(sys.version.split()[0])


def test_preflight_names_missing_script_and_busy_port_with_fixes(tmp_path: Path, sshd: SshServer):
    busy = socket.socket()
    busy.bind(("127.0.0.3", 0))
    busy.listen(1)
    try:
        ports = [free_ports(1, "127.0.0.2")[0], busy.getsockname()[1]]
        text = cluster_text(sshd.config, script2="no_such_trainer.py", ports=ports)
        spec, problems = parse_text(text, tmp_path / "c.toml")
        assert spec is not None, problems
        results = preflight(spec, timeout_s=90)
        good, bad = results
        assert good.ok
        assert not bad.ok
        failures = {c.name: c for c in bad.failures}
        assert "no_such_trainer.py" in failures["script"].detail and failures["script"].fix
        assert f"port {ports[1]}" in failures and "in use" in failures[f"port {ports[1]}"].detail
        # The same through the command line, as a table, exit 2.
        result = run_cli("validate", "--remote", str(write(tmp_path, text)), timeout=120)
        assert result.returncode == 2, result.stdout + result.stderr
        assert "FAIL" in result.stdout and "no_such_trainer.py" in result.stdout and "fix:" in result.stdout
        assert "1 of 2 hosts ready" in result.stdout
    finally:
        busy.close()


def test_preflight_bad_key_and_unknown_host_key_name_the_host_and_a_fix(tmp_path: Path, sshd: SshServer):
    wrong_key = sshd.client_config("wrong_key_config", identity=sshd.dir / "other_key")
    empty_known = tmp_path / "empty_known_hosts"
    empty_known.write_text("")
    unknown_host = sshd.client_config("unknown_host_config", known_hosts=empty_known)
    for config, cause, fix in (
        (wrong_key, "refused the login", "IdentityFile"),
        (unknown_host, "host key", "accept"),
    ):
        spec, problems = parse_text(cluster_text(config), tmp_path / "c.toml")
        assert spec is not None, problems
        results = preflight(spec, timeout_s=30)
        for r in results:
            assert not r.ok
            (reach,) = r.failures
            assert reach.name == "reachable" and cause in reach.detail and fix in reach.fix, reach
            assert r.destination in reach.detail
    # The unknown host key was not accepted behind the user's back.
    assert empty_known.read_text() == ""


def test_launch_with_unknown_host_key_fails_clearly_and_leaves_nothing(tmp_path: Path, sshd: SshServer):
    empty_known = tmp_path / "empty_known_hosts"
    empty_known.write_text("")
    config = sshd.client_config("unknown_host_config2", known_hosts=empty_known)
    cluster = write(tmp_path, cluster_text(config))
    # The pre-flight refuses before anything starts...
    result = run_cli("launch", str(cluster), "--run-dir", str(tmp_path / "run"), timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "host key of 127.0.0.2" in result.stderr and "fix:" in result.stderr
    assert not (tmp_path / "run").exists()
    # ...and without it the connection itself fails the roles with the same explanation.
    result = run_cli("launch", str(cluster), "--no-preflight", "--run-dir", str(tmp_path / "run"), timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "host key of 127.0.0.2" in result.stdout and "Traceback" not in result.stdout + result.stderr
    assert empty_known.read_text() == ""
