"""The CLI's input commands as a user runs them: validate, render, import, runs."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from core.cluster.spec import load
from tests.helpers.project import ROOT, run_cli

DEMO = ROOT / "resources" / "demo_cluster.toml"
EXAMPLES = [
    DEMO,
    ROOT / "resources" / "parameter_server_cluster.toml",
    ROOT / "resources" / "multi_worker_mirrored_cluster.toml",
]


def test_validate_ok_for_every_bundled_cluster():
    for path in EXAMPLES:
        result = run_cli("validate", str(path))
        assert result.returncode == 0, result.stderr
        assert "OK" in result.stdout


def test_validate_bad_file_lists_every_problem_without_traceback(tmp_path: Path):
    bad = tmp_path / "bad.toml"
    bad.write_text(
        'name = "x"\nlaunch_stlye = "flags"\ncommand = "python t.py"\n[jobs.ps]\ntasks = ["127.0.0.1:99999", "127.0.0.1:2222", "127.0.0.1:2222"]\n'
    )
    result = run_cli("validate", "--no-ports", str(bad))  # port 2222 may be busy on a shared machine
    assert result.returncode == 2
    err = result.stderr
    assert "Traceback" not in err
    assert f"{bad}:2: error: launch_stlye: unknown key" in err and "did you mean 'launch_style'" in err
    assert "out of range 1-65535" in err
    assert "used twice" in err
    assert "there is no worker job" in err
    assert f"{bad}:3: error: command: script 't.py' does not exist" in err  # in the same pass
    assert "fix:" in err
    assert err.strip().endswith("5 errors")


def test_validate_unparsable_and_missing_files(tmp_path: Path):
    broken = tmp_path / "broken.toml"
    broken.write_text("[jobs.worker\ntasks = 1\n")
    result = run_cli("validate", str(broken))
    assert (
        result.returncode == 2
        and f"{broken}:1: error: not valid TOML" in result.stderr
        and "Traceback" not in result.stderr
    )
    result = run_cli("validate", str(tmp_path / "nope.toml"))
    assert result.returncode == 2 and "no such file" in result.stderr
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    result = run_cli("validate", str(binary))
    assert result.returncode == 2 and "UTF-8" in result.stderr and "Traceback" not in result.stderr


def test_validate_port_in_use_and_missing_command(tmp_path: Path):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        cluster = tmp_path / "c.toml"
        cluster.write_text(
            f'command = ["no-such-trainer-binary"]\nstrategy = "custom"\n[jobs.worker]\ntasks = ["127.0.0.1:{port}"]\n'
        )
        result = run_cli("validate", str(cluster))
    assert result.returncode == 2
    assert f"port {port} on 127.0.0.1 is already in use by pid" in result.stderr
    assert "command 'no-such-trainer-binary' was not found on PATH" in result.stderr


def test_render_prints_pasteable_lines():
    result = run_cli("render", str(DEMO))
    assert result.returncode == 0
    lines = [line for line in result.stdout.splitlines() if line.startswith("cd ")]
    assert len(lines) == 3
    assert "--job_name=worker --task_index=1" in lines[2] and "CUDA_VISIBLE_DEVICES=''" in lines[0]
    data = json.loads(run_cli("render", str(DEMO), "--json").stdout)
    assert [d["role"] for d in data] == ["ps:0", "worker:0", "worker:1"]


def test_import_flags_round_trips(tmp_path: Path):
    command = "python trainer.py --ps_hosts=a:2222,b:2222 --worker_hosts=c:2223 --job_name=ps --task_index=0 --lr 0.1"
    result = run_cli("import", "--flags", command)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "imported.toml"
    out.write_text(result.stdout)
    spec, problems = load(out)
    assert spec is not None and problems == []
    assert [t.address for t in spec.tasks()] == ["a:2222", "b:2222", "c:2223"]
    assert spec.command == ("python", "trainer.py", "--lr", "0.1") and spec.launch_style == "flags"


def test_import_tf_config(tmp_path: Path):
    config = json.dumps(
        {"cluster": {"chief": ["h:1"], "worker": ["h:2", "h:3"], "ps": ["h:4"]}, "task": {"type": "worker", "index": 1}}
    )
    result = run_cli("import", "--tf-config", config, "--command", "python -u ps.py", "-o", str(tmp_path / "c.toml"))
    assert result.returncode == 0, result.stderr
    spec, _ = load(tmp_path / "c.toml")
    assert spec is not None and spec.strategy == "parameter_server" and spec.launch_style == "tf_config"
    assert spec.role_ids() == ["ps:0", "chief:0", "worker:0", "worker:1"]


def test_import_errors_are_clear():
    result = run_cli("import", "--tf-config", "{not json")
    assert result.returncode == 2 and "not valid JSON" in result.stderr and "Traceback" not in result.stderr
    result = run_cli("import", "--flags", "python t.py --ps_hosts=a:1")
    assert result.returncode == 2 and "no --worker_hosts" in result.stderr
    result = run_cli("import", "--flags", "python t.py --worker_hosts=a:99999")
    assert result.returncode == 2 and "out of range" in result.stderr


def test_runs_with_none_and_ctl_on_unknown_run(data_dir: Path):
    result = run_cli("runs")
    assert result.returncode == 0 and "no runs" in result.stdout
    result = run_cli("ctl", "latest", "status")
    assert result.returncode == 2 and "no runs" in result.stderr


def test_metrics_and_placement_of_a_log(tmp_path: Path):
    log = tmp_path / "worker.log"
    log.write_bytes(
        b"I0000 00:00:1795305212.417898    3241 placer.cc:162] MatMul: (MatMul): /job:worker/replica:0/task:0/device:CPU:0\n"
        b"MatMul: (MatMul): /job:worker/replica:0/task:0/device:CPU:0\n"
        b"w: (VarHandleOp): /job:ps/replica:0/task:0/device:CPU:0\n"
        b"Step: 20,  Epoch:  1,  Batch: 20 of 23,  Cost: 2.3000,  AvgTime: 5.00ms\n"
        b"binary \xff\xfe garbage\n"
        b"Step: 40,  Epoch:  2,  Batch: 17 of 23,  Cost: 1.1000,  AvgTime: 4.00ms"  # no final newline
    )
    result = run_cli("metrics", str(log))
    assert result.returncode == 0, result.stderr
    assert "2 samples; loss 2.3000 -> 1.1000" in result.stdout and "5.00 ms" in result.stdout
    samples = [json.loads(line) for line in run_cli("metrics", str(log), "--json").stdout.splitlines()]
    assert [(s["step"], s["loss"]) for s in samples] == [(20, 2.3), (40, 1.1)]
    summary = json.loads(run_cli("placement", str(log), "--json").stdout)
    assert summary["counts_by_device"] == {
        "/job:worker/replica:0/task:0/device:CPU:0": 1,
        "/job:ps/replica:0/task:0/device:CPU:0": 1,
    }
    text = run_cli("placement", str(log)).stdout
    assert "worker/0 CPU:0" in text and "MatMul" in text
    missing = run_cli("placement", str(tmp_path / "nope.log"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr and "Traceback" not in missing.stderr
