"""Shell metacharacters in every field that reaches a command line are passed literally.

Two paths reach a command line: the launch itself (argv lists, no shell: command arguments,
environment values, workdir, run directory, cluster name through {run_dir}/{tb_dir}) and
``render``'s shell lines that users paste (shlex-quoted). Each is run for real; a marker file that
an injected command would create must never appear, and the role must receive exactly the text.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.cluster.render import RoleLaunch
from tests.helpers.ports import free_ports
from tests.helpers.project import run_cli

DUMPER = """
import json, os, sys
with open(os.environ["DUMP_TO"], "w") as f:
    json.dump({"argv": sys.argv[1:], "env": {k: v for k, v in os.environ.items() if k.startswith("EVIL")},
               "cwd": os.getcwd()}, f)
"""


def payloads(marker: Path) -> list[str]:
    m = str(marker)
    return [
        f"$(touch {m})", f"`touch {m}`", f"; touch {m}", f"| touch {m}", f"&& touch {m}", f"' ; touch {m} '",
        f'" ; touch {m} "', f"\n touch {m}", f"$(touch {m}'", "${IFS}", "$HOME", "*", "~", "!!", "\\", "#", "a b",
        f">{m}", f"<{m}", "%s%n", "{role}x",
    ]  # fmt: skip


def test_launch_passes_metacharacters_literally_to_a_real_role(tmp_path: Path):
    marker = tmp_path / "INJECTED"
    evil = payloads(marker)
    dumper = tmp_path / "dumper.py"
    dumper.write_text(DUMPER)
    workdir = tmp_path / "work $(touch INJECTED) ;'`"
    workdir.mkdir()
    run_dir = tmp_path / "run `touch INJECTED`; $x"
    dump = tmp_path / "dump.json"
    ports = free_ports(1)
    env = {f"EVIL{i}": value for i, value in enumerate(evil)}
    env["DUMP_TO"] = str(dump)
    args = [a for a in evil if "{" not in a]
    text = (
        f"name = {json.dumps('evil $(touch ' + str(marker) + ')')}\n"
        'strategy = "custom"\nlaunch_style = "tf_config"\n'
        f"workdir = {json.dumps(str(workdir))}\n"
        f"command = {json.dumps(['python', str(dumper), *args, '{role}', '{run_dir}'])}\n"
        "[env]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in env.items()) + "[jobs.worker]\n"
        f'tasks = ["127.0.0.1:{ports[0]}"]\n'
    )
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(text)
    result = run_cli("launch", str(cluster), "--run-dir", str(run_dir))
    assert result.returncode == 0, result.stdout + result.stderr
    got = json.loads(dump.read_text())
    assert got["argv"] == [*args, "worker:0", str(run_dir)]
    # Placeholders expand in the environment too (by design); everything else is literal.
    assert got["env"] == {k: v.replace("{role}", "worker:0") for k, v in env.items() if k.startswith("EVIL")}
    assert got["cwd"] == str(workdir)
    assert not marker.exists() and not (workdir / "INJECTED").exists() and not (tmp_path / "INJECTED").exists()

    # The same cluster through `render`: its shell lines, run by bash, give the role the same.
    dump.unlink()
    rendered = run_cli("render", str(cluster))
    assert rendered.returncode == 0, rendered.stderr
    # All of it, comments included, as a user pasting it into a terminal would run it.
    subprocess.run(["bash", "-c", rendered.stdout], check=True, timeout=60)
    again = json.loads(dump.read_text())
    assert again["argv"][: len(args)] == args and again["env"] == got["env"] and again["cwd"] == str(workdir)
    assert not marker.exists() and not (workdir / "INJECTED").exists()


TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\0"), max_size=16)


@given(data=st.data())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_shell_lines_quote_any_text(tmp_path: Path, data: st.DataObject) -> None:
    marker = tmp_path / "INJECTED"
    pieces = st.sampled_from(payloads(marker)) | TEXT
    args = data.draw(st.lists(pieces, max_size=5))
    env = {f"EVIL{i}": v for i, v in enumerate(data.draw(st.lists(pieces, max_size=3)))}
    dumper = tmp_path / "dumper.py"
    dumper.write_text(DUMPER)
    dump = tmp_path / "dump.json"
    launch = RoleLaunch(
        role="worker:0",
        argv=(sys.executable, str(dumper), *args),
        env={**env, "DUMP_TO": str(dump)},
        cwd=tmp_path,
        host="127.0.0.1",
    )
    subprocess.run(["bash", "-c", launch.shell_line()], check=True, timeout=60)
    got = json.loads(dump.read_text())
    assert got["argv"] == args and got["env"] == env
    assert not marker.exists()
