"""`gpus --hosts` with no host in it is refused: before, `--hosts ''` and `--hosts ,,,` quietly
looked at this machine instead, as if --hosts had not been given."""

from __future__ import annotations

import io

import pytest

from core.cli.exits import EXIT_USAGE
from core.cli.main import main as cli_main


@pytest.mark.timeout(60)
@pytest.mark.parametrize("hosts", ["", ",,,", " , "])
def test_gpus_hosts_naming_no_host_is_one_line(hosts: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = cli_main(["gpus", "--hosts", hosts], out, err)
    assert code == EXIT_USAGE
    assert out.getvalue() == ""
    lines = err.getvalue().splitlines()
    assert lines == [
        f"error: --hosts {hosts!r} names no host; give host names of the cluster file, user@host[:port], "
        "an ssh alias or local, separated by commas (or leave --hosts out)"
    ]
