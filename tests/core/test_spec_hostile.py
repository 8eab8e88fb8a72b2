"""Cluster files that `validate` once let through and the launch then failed on (issue 34): one port
of this machine written through two local addresses, an env value or a whole environment too big
for exec, whitespace around a port, a NUL in an env key (no line) or in the cluster name."""

from __future__ import annotations

import io
import socket
import subprocess
from pathlib import Path

import pytest

from core.cli.main import main as cli_main
from core.cluster.arglimits import launch_size_problems
from core.cluster.spec import parse_text
from core.cluster.spec.reader import MAX_STRING_BYTES
from tests.helpers.ports import free_ports


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli_main(list(args), out, err)
    return code, out.getvalue(), err.getvalue()


def cluster(tmp_path: Path, tasks: str, top: str = "", name: str = "c.toml") -> Path:
    path = tmp_path / name
    path.write_text(f'strategy = "custom"\ncommand = ["python", "-c", "pass"]\n{top}[jobs.worker]\ntasks = [{tasks}]\n')
    return path


def errors_of(path: Path) -> list[str]:
    """validate's problem lines (not the fixes, not the count), checking the one-line contract."""
    code, _, err = cli("validate", str(path), "--no-ports")
    assert code == 2, err
    assert "Traceback" not in err
    return [line for line in err.splitlines() if ": error: " in line]


# ------------------------------------------------------------------------------------------
# One port of this machine through two addresses


def this_machines_names() -> list[str]:
    """The machine's own name and address (localhost is 127.0.0.1's spelling: "used twice")."""
    names = [socket.gethostname()]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))  # no packet is sent: asks which address would be used
            names.append(s.getsockname()[0])
        except OSError:
            pass
    return names


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("127.0.0.1", "127.0.0.2"),
        ("[::1]", "0.0.0.0"),
        ("127.0.0.1", "[::1]"),
        ("0.0.0.0", "127.0.0.5"),
        ("127.0.0.1", "[::]"),
        *[("127.0.0.1", name) for name in this_machines_names()],
    ],
)
def test_one_port_of_this_machine_through_two_addresses_is_an_error_naming_both(
    tmp_path: Path, first: str, second: str
):
    [port] = free_ports(1)
    path = cluster(tmp_path, f'"{first}:{port}",\n    "{second}:{port}"')
    [line] = errors_of(path)
    assert f"{path}:5: error: jobs.worker.tasks[1]: " in line, line  # the second task's own line
    assert f"worker:1 ({second}:{port}) and worker:0 ({first}:{port}, jobs.worker.tasks[0])" in line
    assert f"0.0.0.0:{port}" in line


def test_tensorflow_really_cannot_serve_the_second_address(tmp_path: Path):
    """The fact the rule rests on: a server bound to 0.0.0.0:P (as TensorFlow's gRPC server binds)
    takes P from 127.0.0.2 too."""
    [port] = free_ports(1)
    with socket.socket() as first:
        first.bind(("0.0.0.0", port))
        first.listen()
        with socket.socket() as second, pytest.raises(OSError):
            second.bind(("127.0.0.2", port))


def test_the_same_port_on_two_other_machines_is_fine():
    spec, problems = parse_text(
        'strategy = "custom"\ncommand = ["python", "-c", "pass"]\n'
        '[jobs.worker]\ntasks = ["10.0.0.2:2222", "10.0.0.3:2222", "gpu-node-1:2222"]\n'
    )
    assert spec is not None and problems == []


def test_the_same_address_twice_keeps_its_message(tmp_path: Path):
    [port] = free_ports(1)
    [line] = errors_of(cluster(tmp_path, f'"127.0.0.1:{port}", "localhost:{port}"'))
    assert f"localhost:{port} is used twice (also jobs.worker.tasks[0])" in line


# ------------------------------------------------------------------------------------------
# Sizes exec refuses


def test_the_limit_is_what_exec_really_refuses():
    """128 KiB per NAME=value, NUL included: the last size that runs and the first that fails."""
    fits = "x" * (MAX_STRING_BYTES - len("K=") - 1)
    assert subprocess.run(["true"], env={"K": fits}).returncode == 0
    with pytest.raises(OSError, match="Argument list too long"):
        subprocess.run(["true"], env={"K": fits + "x"})


def test_an_env_value_over_128_kib_is_an_error_naming_the_variable_and_its_line(tmp_path: Path):
    [port] = free_ports(1)
    big = "x" * MAX_STRING_BYTES
    path = cluster(
        tmp_path,
        f'{{ address = "127.0.0.1:{port}", env = {{ TASK_BIG = "{big}" }} }}',
        top=f'[env]\nSMALL = "1"\nBIG = "{big}"\n',
    )
    lines = errors_of(path)
    assert any(line.startswith(f"{path}:5: error: env.BIG: BIG=... is 131,077 bytes") for line in lines), lines
    assert any(f"{path}:7: error: jobs.worker.tasks[0].env.TASK_BIG: " in line for line in lines), lines
    fits = "x" * (MAX_STRING_BYTES - len("BIG=") - 1)
    assert cli("validate", str(cluster(tmp_path, f'"127.0.0.1:{port}"', f'[env]\nBIG = "{fits}"\n', "ok.toml")))[0] == 0


def test_a_command_argument_over_128_kib_is_an_error(tmp_path: Path):
    [port] = free_ports(1)
    path = tmp_path / "c.toml"
    path.write_text(
        f'strategy = "custom"\ncommand = ["python", "-c", "{"x" * MAX_STRING_BYTES}"]\n'
        f'[jobs.worker]\ntasks = ["127.0.0.1:{port}"]\n'
    )
    [line] = errors_of(path)
    assert f"{path}:2: error: command: argument 2 is 131,073 bytes" in line


def test_an_environment_too_big_in_all_is_an_error_naming_the_largest_variable(tmp_path: Path):
    """Each value fits, all of them together pass ARG_MAX: exec fails naming nothing."""
    [port] = free_ports(1)
    values = "".join(f'V{i} = "{"x" * 100_000}"\n' for i in range(21)) + f'LARGEST = "{"y" * 120_000}"\n'
    path = cluster(tmp_path, f'"127.0.0.1:{port}"', top=f"[env]\n{values}")
    [line] = errors_of(path)
    assert f"{path}:25: error: env.LARGEST: worker:0: its command line and environment come to 2." in line, line
    assert "the largest part is env.LARGEST (117 KiB)" in line and "Argument list too long" in line
    # ... and it really is too big: exec refuses that environment.
    spec, _ = parse_text(path.read_text(), path)
    assert spec is not None
    with pytest.raises(OSError, match="Argument list too long"):
        subprocess.run(["true"], env=dict(spec.env))


def test_an_inherited_variable_can_be_the_largest_part(tmp_path: Path):
    [port] = free_ports(1)
    spec, _ = parse_text(f'strategy = "custom"\ncommand = ["true"]\n[jobs.worker]\ntasks = ["127.0.0.1:{port}"]\n')
    assert spec is not None
    [problem] = launch_size_problems(spec, "", inherited={"HUGE": "z" * 100_000}, limit=64 * 1024)
    assert problem.field == "env.HUGE" and problem.line is None
    assert "env.HUGE (from the environment TowerDeck runs in)" in problem.message
    assert launch_size_problems(spec, "", inherited={"HUGE": "z" * 100_000}, limit=1 << 20) == []


# ------------------------------------------------------------------------------------------
# Small ones


@pytest.mark.parametrize("address", ["127.0.0.1:80 ", "127.0.0.1: 80", " 127.0.0.1:80", "127.0.0.1 :80", "a\t:80"])
def test_whitespace_around_a_port_is_refused_the_same_way_wherever_it_is(tmp_path: Path, address: str):
    path = tmp_path / "c.toml"
    path.write_text(f'strategy = "custom"\ncommand = ["python", "-c", "pass"]\n[jobs.worker]\ntasks = ["{address}"]\n')
    [line] = errors_of(path)
    assert f"{path}:4: error: jobs.worker.tasks[0]: " in line and "has whitespace in it" in line


def test_a_nul_in_an_env_key_names_its_line(tmp_path: Path):
    [port] = free_ports(1)
    path = cluster(tmp_path, f'"127.0.0.1:{port}"', top='[env]\nOK = "1"\n"A\\u0000B" = "x"\n')
    [line] = errors_of(path)
    assert line.startswith(f"{path}:5: error: env.A\\x00B: 'A\\x00B' is not a valid environment variable name")


def test_a_nul_in_the_cluster_name_is_refused_and_never_printed_raw(tmp_path: Path):
    [port] = free_ports(1)
    path = cluster(tmp_path, f'"127.0.0.1:{port}"', top='name = "a\\u0000b"\n')
    code, out, err = cli("validate", str(path), "--no-ports")
    assert code == 2 and "\0" not in out + err
    assert f"{path}:3: error: name: contains a NUL character (\\u0000)" in err
