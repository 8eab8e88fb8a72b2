"""Hostile input from issue 20: each case once hung, lied or printed a traceback.

Every case that once hung runs under a hard timeout that kills (``subprocess.run(timeout=...)``,
or pytest-timeout's ``thread`` method, which ends the whole run), so a regression fails instead
of stalling the suite.
"""

from __future__ import annotations

import io
import json
import shutil
import socket
from pathlib import Path

import pytest

from core.cli.launch import LaunchPrinter
from core.cli.main import main as cli_main
from core.run import control
from tests.helpers.agent_process import AgentProcess
from tests.helpers.cli_launch import Launch
from tests.helpers.events import make_event
from tests.helpers.ports import free_ports
from tests.helpers.project import run_cli


def cli(*args: str) -> tuple[int, str, str]:
    """``python main.py ARGS`` in this process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    code = cli_main(list(args), out, err)
    return code, out.getvalue(), err.getvalue()


def cluster(tmp_path: Path, body: str, name: str = "c.toml") -> Path:
    ps, worker = free_ports(2)
    path = tmp_path / name
    path.write_text(body.replace("PS", str(ps)).replace("WORKER", str(worker)))
    return path


TWO_ROLES = '\n[jobs.ps]\ntasks = ["127.0.0.1:PS"]\n[jobs.worker]\ntasks = ["127.0.0.1:WORKER"]\n'


# ------------------------------------------------------------------------------------------
# 1. A NUL in a command argument or an env value


def test_nul_in_command_or_env_is_refused_by_validate_with_field_and_line(tmp_path: Path) -> None:
    path = cluster(
        tmp_path,
        'command = ["python", "-c", "print(1)\\u0000"]\n[env]\nA = "x\\u0000y"\n'
        '[jobs.ps]\ntasks = ["127.0.0.1:PS"]\n[jobs.worker]\n'
        'tasks = [{ address = "127.0.0.1:WORKER", command = "python -c \'a\\u0000\'" }]\n',
    )
    code, _, err = cli("validate", str(path))
    assert code == 2, err
    assert f"{path}:1: error: command: argument 2" in err and "NUL" in err
    assert f"{path}:3: error: env.A: contains a NUL" in err
    assert "jobs.worker.tasks[0].command: argument 2" in err
    assert "Traceback" not in err


@pytest.mark.timeout(60, method="thread")
def test_agent_reports_a_start_it_cannot_make_as_start_failed(tmp_path: Path) -> None:
    """Not `bad start command` and nothing more: the role would stay `starting` for good."""
    agent = AgentProcess()
    try:
        for i, (argv, env) in enumerate(
            [(["python", "-c", "a\0b"], {}), (["python", "-c", "pass"], {"A": "x\0y"}), (["no\0such"], {})]
        ):
            role = f"worker:{i}"
            agent.send({"op": "start", "role": role, "argv": argv, "env": env, "log": str(tmp_path / f"{i}.log")})
            failed = agent.wait_for("start_failed", role=role, timeout_s=20)
            assert "null byte" in failed["error"], failed
        agent.send({"op": "ping", "id": 7})
        agent.wait_for("pong", id=7)
    finally:
        assert agent.close() == 0


# ------------------------------------------------------------------------------------------
# 2. A metric pattern with catastrophic backtracking

HOSTILE_PATTERNS = [r"^(?P<step>(a|aa)+)+$", r"(?P<step>(\d+,?)+)x", r"(?P<loss>.*.*.*)x", r"(?P<step>\d+)\s*\d+!"]


def test_validate_refuses_patterns_that_backtrack_for_ever(tmp_path: Path) -> None:
    listed = ", ".join(f"'{p}'" for p in HOSTILE_PATTERNS)
    path = cluster(tmp_path, f'command = ["python", "-c", "pass"]\nmetric_patterns = [{listed}]\n' + TWO_ROLES)
    code, _, err = cli("validate", str(path), "--no-ports")
    assert code == 2, err
    for i in range(len(HOSTILE_PATTERNS)):
        assert f"{path}:2: error: metric_patterns[{i}]: metric pattern" in err, err
    assert err.count("is refused") == len(HOSTILE_PATTERNS) and "possessive" in err and "Traceback" not in err
    safe = cluster(
        tmp_path,
        'command = ["python", "-c", "pass"]\nmetric_patterns = [\'step (?P<step>\\d+).*loss (?P<loss>[0-9.]+)\', '
        "'(?P<step>\\d+)\\D+(?P<loss>[0-9.e+-]+)', '(?P<step>(?>a|aa)+)!', '(?P<loss>\\d++,?)+']\n" + TWO_ROLES,
        "safe.toml",
    )
    code, _, err = cli("validate", str(safe), "--no-ports")
    assert code == 0, err


HOSTILE_TRAINER = "import sys; print('a' * 40 + '!', flush=True)"


def test_launch_with_a_hostile_pattern_ends_at_once(tmp_path: Path) -> None:
    """Before: validate said OK and the launcher froze for good on the trainer's line, Ctrl-C too."""
    path = cluster(
        tmp_path,
        f'command = ["python", "-c", "{HOSTILE_TRAINER}"]\nmetric_patterns = [\'^(?P<step>(a|aa)+)+$\']\n'
        'complete_when = ["worker"]\n' + TWO_ROLES,
    )
    result = run_cli("launch", str(path), "--run-dir", str(tmp_path / "run"), timeout=60)  # kills on a hang
    assert result.returncode == 2, result.stderr
    assert "metric_patterns[0]" in result.stderr and "Traceback" not in result.stderr


# ------------------------------------------------------------------------------------------
# 3. attach to a run left at `completing`, or with a `created` that is not a number


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run whose every role succeeded (a ps and a worker that print and exit)."""
    base = tmp_path_factory.mktemp("finished")
    path = cluster(base, 'command = ["python", "-c", "print(1)"]\ncomplete_when = ["worker"]\n' + TWO_ROLES)
    result = run_cli("launch", str(path), "--run-dir", str(base / "run"), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return base / "run"


def damaged_copy(run: Path, tmp_path: Path, **fields: object) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    info = json.loads((copy / "run.json").read_text())
    info.update(fields)
    (copy / "run.json").write_text(json.dumps(info))
    return copy


@pytest.mark.parametrize(
    "fields",
    [
        {"state": "completing", "result": None, "pid": 999999999},
        {"state": "completing", "result": None, "created": "soon"},
        {"state": "running", "result": None, "created": float("nan")},
    ],
)
def test_attach_to_a_run_whose_roles_all_ended_says_so_and_leaves_its_record(
    finished_run: Path, tmp_path: Path, fields: dict[str, object]
) -> None:
    """Before: `cluster running`, "agent lost", a hang that ignored Ctrl-C twice, and run.json
    rewritten to stopping/stopped."""
    run = damaged_copy(finished_run, tmp_path, **fields)
    before = (run / "run.json").read_bytes()
    result = run_cli("attach", str(run), timeout=30)  # kills on a hang
    assert result.returncode == 1, result.stdout + result.stderr
    assert "had ended when its launcher stopped (ps:0 succeeded, worker:0 succeeded)" in result.stderr
    assert (run / "run.json").read_bytes() == before


def test_runs_lists_a_run_with_a_damaged_created_time(finished_run: Path, tmp_path: Path) -> None:
    """Before: `created` NaN or 1e300 in one run.json lost the whole listing to a traceback."""
    root = tmp_path / "root"
    root.mkdir()
    for i, created in enumerate([float("nan"), 1e300, -5, "x", float("inf")]):
        damaged_copy(finished_run, tmp_path, id=f"bad{i}", created=created).rename(root / f"bad{i}")
    shutil.copytree(finished_run, root / "good")
    (root / "truncated").mkdir()
    (root / "truncated" / "run.json").write_text('{"id": "trunc')
    code, out, err = cli("runs", "--root", str(root))
    assert code == 0 and not err, err
    assert out.count(" ?  ") == 5 and "\n6 runs in" in out, out


# ------------------------------------------------------------------------------------------
# 4. export --tfjob: a huge tasks = N, names Kubernetes refuses

SLURM_CLUSTER = 'name = "big"\ncommand = "python -u train.py"\n[slurm]\npartition = "debug"\n'


@pytest.mark.timeout(60, method="thread")
def test_export_of_a_huge_counted_job_is_refused_at_once(tmp_path: Path) -> None:
    """Before: 2**63-1 tasks never ended (10M: 63 s and 1.3 GB)."""
    path = tmp_path / "big.toml"
    path.write_text(SLURM_CLUSTER + "[jobs.ps]\ntasks = 1\n[jobs.worker]\ntasks = 9223372036854775807\n")
    code, out, err = cli("export", "--tfjob", str(path), "--image", "tf:1")
    assert code == 2 and not out, out
    assert f"{path}:8: error: jobs.worker.tasks: 9223372036854775807 tasks is more than the 10000" in err, err
    code, _, err = cli("validate", str(path))
    assert code == 2 and "more than the 10000" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--name", ""], "'' is not a DNS-1035 label"),
        (["--name", "a" * 64], "is not a DNS-1035 label"),
        (["--name", "a" * 56], f"the service name '{'a' * 56}-worker-9' made from"),
        (["--namespace", "n" * 70], "is not a namespace name"),
    ],
)
def test_export_refuses_names_kubernetes_refuses(tmp_path: Path, args: list[str], message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(SLURM_CLUSTER + "[jobs.ps]\ntasks = 1\n[jobs.worker]\ntasks = 10\n")
    code, out, err = cli("export", "--tfjob", str(path), "--image", "tf:1", *args)
    assert code == 2 and not out, out
    assert message in err and "Traceback" not in err, err
    code, out, _ = cli("export", "--tfjob", str(path), "--image", "tf:1", "--name", "a" * 53, "--namespace", "n" * 63)
    assert code == 0 and json.loads(out)["metadata"]["namespace"] == "n" * 63


# ------------------------------------------------------------------------------------------
# 9. Roles get SIGINT and SIGHUP as defaults; ctl refuses what is not a signal

SIGNAL_ROLE = """
import signal, time
print("SIGINT", signal.getsignal(signal.SIGINT) is signal.default_int_handler, flush=True)
print("SIGHUP", signal.getsignal(signal.SIGHUP) == signal.SIG_DFL, flush=True)
try:
    while True:
        time.sleep(0.05)
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
"""


@pytest.mark.timeout(180, method="thread")
def test_roles_get_default_sigint_and_ctl_refuses_bad_signals(tmp_path: Path, launches: list[Launch]) -> None:
    """Before: every role inherited SIGINT/SIGHUP ignored (`sent SIGINT`, nothing happened), and
    `ctl ... signal worker:0 NOPE` answered `sent`, exit 0."""
    (tmp_path / "role.py").write_text(SIGNAL_ROLE)
    path = cluster(tmp_path, 'command = ["python", "-u", "role.py"]\ncomplete_when = ["worker"]\n' + TWO_ROLES)
    launch = Launch(path, tmp_path / "run")
    launches.append(launch)
    launch.wait_role("worker:0", "running")
    launch.wait_output("worker:0", "SIGHUP")
    log = (tmp_path / "run" / "roles" / "worker-0" / "attempt-1.log").read_text()
    assert "SIGINT True" in log and "SIGHUP True" in log, log
    for bad in ("NOPE", "0", "99", "-9", "SIG_IGN", ""):
        result = launch.ctl("signal", "worker:0", bad)
        assert result.returncode == 2, result.stdout + result.stderr
        assert f"signal: {bad!r} is not a signal; name one, e.g. INT" in result.stderr
    # The launch refuses it too (the window sends through the same controller).
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    reply = control.request(Path(info["control_socket"]), {"action": "signal", "role": "worker:0", "signal": "99"})
    assert reply == {"ok": False, "error": "'99' is not a signal: name one, e.g. INT, TERM, HUP, USR1, STOP or CONT"}
    result = launch.ctl("signal", "worker:0", "INT")
    assert result.returncode == 0 and "sent SIGINT to worker:0" in result.stdout, result.stderr
    launch.wait_output("worker:0", "KeyboardInterrupt")
    code, out = launch.finish()
    assert code == 0 and "worker:0     succeeded" in out, out


@pytest.mark.parametrize("text", ['{"id": "x", "control_', "[1, 2]", '"run"', "[" * 100000])
def test_ctl_on_a_damaged_run_json_is_one_line(finished_run: Path, tmp_path: Path, text: str) -> None:
    """Before: JSONDecodeError, AttributeError or RecursionError tracebacks."""
    run = damaged_copy(finished_run, tmp_path)
    (run / "run.json").write_text(text)
    code, out, err = cli("ctl", str(run), "status")
    assert code == 2 and not out and len(err.splitlines()) == 1, err
    assert str(run / "run.json") in err


# ------------------------------------------------------------------------------------------
# 10. A port held on another loopback address only


def test_validate_finds_a_port_held_on_another_loopback_address(tmp_path: Path) -> None:
    """Before: `validate` said OK, then TensorFlow (which binds every address) could not start."""
    path = cluster(tmp_path, 'command = ["python", "-c", "pass"]\n' + TWO_ROLES)
    port = int(path.read_text().split("127.0.0.1:")[2].split('"')[0])  # the worker's
    with socket.socket() as holder:
        holder.bind(("127.0.0.5", port))
        holder.listen()
        code, _, err = cli("validate", str(path))
        assert code == 2, err
        assert f"{path}:6: error: jobs.worker.tasks[0]: port {port} on 127.0.0.1 is already in use" in err, err
        assert "probe" not in err and "Traceback" not in err
        from core.agent.probe import _port_state

        assert _port_state("127.0.0.1", port) == "busy"  # validate --remote's check on a host
    code, _, err = cli("validate", str(path))
    assert code == 0, err


# ------------------------------------------------------------------------------------------
# 14. Tracebacks: deep nesting, -o where nothing can be written

TF_CONFIG = '{"cluster": {"worker": ["127.0.0.1:2222"]}}'


@pytest.mark.parametrize("command", ["validate", "render", "launch", "export"])
def test_deeply_nested_cluster_file_is_one_problem(tmp_path: Path, command: str) -> None:
    path = tmp_path / "deep.toml"
    path.write_text("name = " + "[" * 500 + "]" * 500 + "\n")
    args = ["export", "--tfjob", str(path), "--image", "tf:1"] if command == "export" else [command, str(path)]
    code, out, err = cli(*args)
    assert code == 2 and not out
    assert f"{path}: error: arrays or tables nested too deep" in err and "Traceback" not in err


def test_deeply_nested_tf_config_is_one_problem() -> None:
    code, out, err = cli("import", "--tf-config", "[" * 100000 + "]" * 100000)
    assert code == 2 and not out
    assert err.startswith("error: --tf-config: not a TF_CONFIG: nested too deep"), err


@pytest.mark.parametrize("where", ["directory", "missing folder", "file below a file"])
def test_output_that_cannot_be_written_is_one_line(tmp_path: Path, where: str) -> None:
    (tmp_path / "afile").write_text("")
    target = {
        "directory": tmp_path,
        "missing folder": tmp_path / "nope" / "x.toml",
        "file below a file": tmp_path / "afile" / "x.toml",
    }[where]
    cluster_file = cluster(tmp_path, 'command = "python -u t.py"\n' + TWO_ROLES)
    for args in (
        ["import", "--tf-config", TF_CONFIG, "--command", "python t.py", "-o", str(target)],
        ["export", "--tfjob", str(cluster_file), "--image", "tf:1", "-o", str(target)],
    ):
        code, out, err = cli(*args)
        assert code == 2 and not out, out
        assert err.startswith(f"-o {target}: cannot write: ") and len(err.splitlines()) == 1, err


# ------------------------------------------------------------------------------------------
# 15. Wrong or misleading messages


def test_validate_messages_say_what_is_wrong_where(tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()
    (tmp_path / "script.sh").write_text("#!/bin/sh\n")
    path = cluster(
        tmp_path,
        'command = ["python", "-c", "pass"]\nstop_grace_s = nan\nstart_s = inf\n'
        '[jobs.ps]\ntasks = ["127.0.0.1:PS", "127.0.0.1:0"]\ngpus = [0, "1"]\n'
        '[jobs.worker]\ntasks = [{ address = "127.0.0.1:WORKER", command = ["./adir"] },\n'
        '  { address = "127.0.0.1:1", command = ["./script.sh"] }]\nrestart = "Never"\n',
    )
    code, _, err = cli("validate", str(path), "--no-ports")
    assert code == 2
    assert f"{path}:2: error: stop_grace_s: must be a finite number, not nan" in err
    assert f"{path}:3: error: start_s: must be a finite number, not inf" in err
    assert f"{path}:5: error: jobs.ps.tasks[1]: " in err  # a one-line array: its own line, not the next
    assert f"{path}:6: error: jobs.ps.gpus: must be a list of GPU indices, not a list holding a string ('1')" in err
    (tmp_path / "fixed.toml").write_text(
        path.read_text().replace("nan", "1.0").replace("inf", "1.0").replace(', "127.0.0.1:0"', "")
        .replace(', "1"', "")
    )  # fmt: skip
    code, _, err = cli("validate", str(tmp_path / "fixed.toml"), "--no-ports")
    assert code == 2
    fixed = tmp_path / "fixed.toml"
    assert f"{fixed}:8: error: jobs.worker.tasks[0].command: command './adir' is a directory, not a program" in err
    assert f"{fixed}:9: error: jobs.worker.tasks[1].command: command './script.sh' is not executable" in err
    assert "chmod +x" in err and "give its full path" not in err, err


def test_follow_shows_crlf_lines_and_progress_redraws() -> None:
    out = io.StringIO()
    printer = LaunchPrinter(out, ["worker:0"], progress_s=0)
    printer(make_event("role_output", 1.0, "worker:0", {"text": "step 1\r\nstep 2\r\n10%\r50%\r100%\n"}))
    assert [line.split("| ", 1)[1] for line in out.getvalue().splitlines()] == ["step 1", "step 2", "100%"]


def test_launch_and_attach_refuse_unknown_follow_and_negative_tail(tmp_path: Path, data_dir: Path) -> None:
    """Before: `--tail -5` and `--follow worker:99` were accepted silently (and a launch made)."""
    path = cluster(tmp_path, 'command = ["python", "-c", "pass"]\n' + TWO_ROLES)
    code, out, err = cli("launch", str(path), "--follow", "worker:99")
    assert code == 2 and not out
    assert err == "--follow worker:99: no such role; the roles are ps:0, worker:0 (or 'all')\n"
    assert not (data_dir / "runs").exists()  # refused before anything was made
    result = run_cli("launch", str(path), "--tail", "-5", timeout=60)
    assert result.returncode == 2 and "argument --tail: invalid count of lines (0 or more) value: '-5'" in result.stderr


def test_an_unwritable_data_directory_is_named_not_run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("TOWERDECK_DATA_DIR", str(tmp_path / "afile"))
    path = cluster(tmp_path, 'command = ["python", "-c", "pass"]\n' + TWO_ROLES)
    code, out, err = cli("launch", str(path))
    assert code == 2 and not out
    assert (
        err.startswith(f"cannot create a run directory under {tmp_path / 'afile' / 'runs'}: ")
        and "--run-dir:" not in err
    )
    assert "TOWERDECK_DATA_DIR" in err
