"""The cluster file: parsing, every validation error with its location, rendering, writing."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from core.cluster.render import render, tf_config
from core.cluster.spec import RestartPolicy, dumps, load, locate, parse_role_id, parse_text
from core.preflight.checks import check_local, port_in_use
from tests.helpers.project import ROOT

GOOD = """\
name = "t"
strategy = "between_graph"
launch_style = "both"
command = ["python", "-u", "between_graph.py", "--train_steps=10"]
workdir = "trainers"

[env]
FOO = "bar"

[jobs.ps]
tasks = ["127.0.0.1:2222"]

[jobs.worker]
tasks = [
    "127.0.0.1:2223",
    { address = "127.0.0.1:2224", gpus = [1, 2] },
]
gpus = [0]
restart = { policy = "OnFailure", max_restarts = 2, backoff_s = 0.5 }
"""


def parse(text: str, source: Path | None = None):
    return parse_text(text, source or ROOT / "resources" / "x.toml")


def only_error(text: str):
    spec, problems = parse(text)
    errors = [p for p in problems if p.severity == "error"]
    assert spec is None
    assert errors, problems
    return errors


def test_good_file_parses_with_defaults():
    spec, problems = parse(GOOD)
    assert problems == []
    assert spec is not None
    assert spec.role_ids() == ["ps:0", "worker:0", "worker:1"]
    assert spec.jobs["ps"].tasks[0].gpus == ()  # ps gets no GPU unless told
    assert spec.jobs["worker"].tasks[0].gpus == (0,)  # job default
    assert spec.jobs["worker"].tasks[1].gpus == (1, 2)  # task override
    assert spec.jobs["worker"].restart == RestartPolicy("OnFailure", 2, 0.5, 30.0)
    assert spec.workdir == ROOT / "resources" / "trainers"
    assert spec.completion_jobs() == ("worker",)


def test_unparsable_toml_names_the_line():
    errors = only_error('name = "x"\n[jobs.worker]\ntasks = [127.0.0.1:2222]\n')
    assert errors[0].line == 3
    assert "not valid TOML" in errors[0].message
    assert "tasks = [127.0.0.1:2222]" in errors[0].hint


def test_unknown_key_suggests_the_right_one():
    errors = only_error(GOOD.replace("launch_style", "launch_stlye"))
    assert errors[0].field == "launch_stlye"
    assert "did you mean 'launch_style'" in errors[0].hint
    assert errors[0].line == 3


def test_unknown_key_in_a_job():
    errors = only_error(GOOD.replace("gpus = [0]", "gpu = [0]"))
    assert errors[0].field == "jobs.worker.gpu"
    assert "'gpus'" in errors[0].hint
    assert errors[0].line == 18


@pytest.mark.parametrize(
    ("address", "needle"),
    [
        ("127.0.0.1", "is not host:port"),
        ("127.0.0.1:abc", "is not a number"),
        ("127.0.0.1:0", "out of range"),
        ("127.0.0.1:65536", "out of range"),
        ("bad host:22", "has whitespace in it"),
    ],
)
def test_bad_addresses(address: str, needle: str):
    errors = only_error(GOOD.replace('"127.0.0.1:2222"', json.dumps(address)))
    assert errors[0].field == "jobs.ps.tasks[0]"
    assert needle in errors[0].message
    assert "host:port" in errors[0].hint
    assert errors[0].line == 11


def test_duplicate_address_names_both():
    errors = only_error(GOOD.replace('"127.0.0.1:2223"', '"localhost:2222"'))
    assert errors[0].field == "jobs.worker.tasks[0]"
    assert "used twice" in errors[0].message and "jobs.ps.tasks[0]" in errors[0].message
    assert errors[0].line == 15  # the element's own line in the multi-line array


def test_missing_worker_job():
    errors = only_error('command = "python t.py"\n[jobs.ps]\ntasks = ["127.0.0.1:2222"]\n')
    assert any("no worker job" in e.message for e in errors)


def test_parameter_server_needs_a_chief():
    text = GOOD.replace('strategy = "between_graph"', 'strategy = "parameter_server"')
    errors = only_error(text)
    assert any("needs a chief" in e.message and "[jobs.chief]" in e.hint for e in errors)
    spec, _ = parse(text + '\n[jobs.chief]\ntasks = ["127.0.0.1:2221"]\n')
    assert spec is not None and spec.completion_jobs() == ("chief",)


def test_parameter_server_with_flags_only_is_a_warning():
    text = GOOD.replace('strategy = "between_graph"', 'strategy = "parameter_server"').replace('"both"', '"flags"')
    spec, problems = parse(text + '\n[jobs.chief]\ntasks = ["127.0.0.1:2221"]\n')
    assert spec is not None
    assert [p.severity for p in problems] == ["warning"] and "TF_CONFIG" in problems[0].message


@pytest.mark.parametrize(
    ("old", "new", "field", "needle"),
    [
        ('"both"', '"yaml"', "launch_style", "is not one of"),
        ('policy = "OnFailure"', 'policy = "onfailure"', "jobs.worker.restart.policy", "did you mean 'OnFailure'"),
        ("max_restarts = 2", "max_restarts = -1", "jobs.worker.restart.max_restarts", "at least"),
        ("gpus = [1, 2]", "gpus = [1, 1]", "jobs.worker.tasks[1].gpus", "twice"),
        ("gpus = [0]", 'gpus = "0"', "jobs.worker.gpus", "list of GPU indices"),
        ('FOO = "bar"', "FOO = [1]", "env.FOO", "must be a string"),
        ('command = ["python"', 'command = [1, "python"', "command", "list of strings"),
    ],
)
def test_value_errors(old: str, new: str, field: str, needle: str):
    text = GOOD.replace(old, new)
    assert text != GOOD
    errors = only_error(text)
    assert errors[0].field == field
    assert needle in errors[0].message + errors[0].hint


def test_every_problem_is_reported_at_once():
    text = GOOD.replace("launch_style", "launchstyle").replace('"127.0.0.1:2222"', '"nope"')
    errors = only_error(text)
    assert {e.field for e in errors} >= {"launchstyle", "jobs.ps.tasks[0]"}


def test_command_that_does_not_exist(tmp_path: Path):
    (tmp_path / "t.toml").write_text(
        GOOD.replace('"python", "-u"', '"no-such-python-here", "-u"').replace('workdir = "trainers"', 'workdir = "."')
    )
    spec, _ = load(tmp_path / "t.toml")
    assert spec is not None
    problems = check_local(spec, (tmp_path / "t.toml").read_text(), check_ports=False)
    assert problems[0].field == "command" and "not found on PATH" in problems[0].message
    assert problems[0].line == 4


def test_script_that_does_not_exist(tmp_path: Path):
    (tmp_path / "t.toml").write_text(GOOD.replace('workdir = "trainers"', 'workdir = "."'))
    spec, _ = load(tmp_path / "t.toml")
    assert spec is not None
    problems = check_local(spec, check_ports=False)
    assert "between_graph.py" in problems[0].message and "does not exist" in problems[0].message


def test_port_in_use_is_an_error_naming_the_holder():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert port_in_use("127.0.0.1", port)
        spec, _ = parse(GOOD.replace("2222", str(port)))
        assert spec is not None
        problems = check_local(spec, GOOD.replace("2222", str(port)))
        busy = [p for p in problems if "already in use" in p.message]
        assert busy and busy[0].field == "jobs.ps.tasks[0]" and busy[0].line == 11
        assert "pid" in busy[0].message  # names who holds it
    assert not port_in_use("127.0.0.1", port)


def test_remote_host_is_reached_over_ssh_and_left_to_the_preflight():
    spec, _ = parse(GOOD.replace('"127.0.0.1:2222"', '"gpu-node-7.example:2222"'))
    assert spec is not None
    assert spec.host_config("gpu-node-7.example").ssh == "gpu-node-7.example"
    assert not spec.host_config("127.0.0.1").remote
    problems = check_local(spec, check_ports=False)
    assert not any("gpu-node-7" in p.message for p in problems)


def test_whether_a_host_is_this_machine_is_read_once_for_a_whole_cluster(monkeypatch):
    import psutil

    from core.cluster import locality

    calls = []
    real = psutil.net_if_addrs

    def counted():
        calls.append(1)
        return real()

    monkeypatch.setattr(psutil, "net_if_addrs", counted)
    this_machine = socket.gethostname().lower()  # neither loopback nor [hosts]: only the cache knows
    locality.forget()
    workers = ", ".join(f'"{this_machine}:{3000 + i}"' for i in range(40))
    spec, problems = parse(GOOD.replace('"127.0.0.1:2223",', workers + ","))
    assert spec is not None, problems
    configs = [spec.host_config(t.host) for t in spec.tasks()]
    assert len(configs) == 42 and not any(c.remote for c in configs)
    assert len(calls) == 1  # not once per task
    locality.forget()  # the network changed: read again, once
    assert not spec.host_config(this_machine).remote and not spec.host_config(this_machine).remote
    assert len(calls) == 2
    assert spec.host_config("gpu-node-7.example").remote
    # The model asks whoever knows; another machine's view can be passed in.
    assert not spec.host_config("gpu-node-7.example", is_local=lambda host: True).remote


def test_hosts_table_round_trips_and_bad_entries_name_their_line():
    text = (
        GOOD
        + '\n[hosts."127.0.0.9"]\nssh = "me@lab-1:2200"\npython = "/opt/py/bin/python3"\nrun_root = "/scratch/td"\n'
    )
    spec, problems = parse(text)
    assert spec is not None, problems
    host = spec.hosts["127.0.0.9"]
    assert (host.ssh, host.python, host.run_root) == ("me@lab-1:2200", "/opt/py/bin/python3", "/scratch/td")
    again, _ = parse(dumps(spec))
    assert again is not None and again.hosts == spec.hosts
    bad = GOOD + '\n[hosts."127.0.0.9"]\nssh = "me@lab 1"\nport = 22\n'
    spec, problems = parse(bad)
    assert spec is None
    lines = bad.splitlines()
    ssh_problem = next(p for p in problems if p.field == "hosts.127.0.0.9.ssh")
    assert ssh_problem.line is not None and lines[ssh_problem.line - 1].startswith("ssh =")
    assert any(p.field == "hosts.127.0.0.9.port" and "did you mean" not in p.message for p in problems)


def test_render_flags_tf_config_and_gpus():
    spec, _ = parse(GOOD)
    assert spec is not None
    ps = render(spec, spec.task("ps:0"))
    w1 = render(spec, spec.task("worker:1"), Path("/runs/r1"))
    assert ps.env["CUDA_VISIBLE_DEVICES"] == ""
    assert w1.env["CUDA_VISIBLE_DEVICES"] == "1,2"
    assert w1.env["FOO"] == "bar" and w1.env["PYTHONUNBUFFERED"] == "1"
    assert w1.env["TOWERDECK_TB_DIR"] == "/runs/r1/roles/worker-1/tensorboard"
    assert w1.argv[-4:] == (
        "--ps_hosts=127.0.0.1:2222",
        "--worker_hosts=127.0.0.1:2223,127.0.0.1:2224",
        "--job_name=worker",
        "--task_index=1",
    )
    config = json.loads(w1.env["TF_CONFIG"])
    assert config == {
        "cluster": {"worker": ["127.0.0.1:2223", "127.0.0.1:2224"], "ps": ["127.0.0.1:2222"]},
        "task": {"type": "worker", "index": 1},
    }
    assert "cd " in w1.shell_line() and "TF_CONFIG='{" in w1.shell_line()


def test_evaluator_is_kept_out_of_the_cluster_dict():
    spec, _ = parse(GOOD + '\n[jobs.evaluator]\ntasks = ["127.0.0.1:2230"]\n')
    assert spec is not None
    config = json.loads(tf_config(spec, spec.task("evaluator:0")))
    assert "evaluator" not in config["cluster"] and config["task"] == {"type": "evaluator", "index": 0}


def test_dumps_round_trips():
    spec, _ = parse(GOOD)
    assert spec is not None
    again, problems = parse_text(dumps(spec), spec.source)
    assert problems == [] and again is not None
    assert (
        again.tasks() == spec.tasks()
        and again.command == spec.command
        and again.jobs["worker"].restart == spec.jobs["worker"].restart
    )


def test_role_ids_in_every_spelling():
    for text in ("worker:1", "worker/1", "/job:worker/task:1", "worker-1"):
        assert parse_role_id(text) == ("worker", 1)
    with pytest.raises(ValueError, match="JOB:INDEX"):
        parse_role_id("worker")


def test_restart_policies():
    assert RestartPolicy("Never").wants_restart(1, None) is False
    assert RestartPolicy("OnFailure").wants_restart(0, None) is False
    assert RestartPolicy("OnFailure").wants_restart(None, 9) is True
    assert RestartPolicy("Always").wants_restart(0, None) is True
    assert RestartPolicy("ExitCode").wants_restart(1, None) is False  # permanent error
    assert RestartPolicy("ExitCode").wants_restart(137, None) is True
    assert RestartPolicy("ExitCode").wants_restart(None, 9) is True
    policy = RestartPolicy(backoff_s=1.0, backoff_max_s=5.0)
    assert [policy.backoff_for(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]


def test_locate_finds_nested_keys():
    text = GOOD
    assert locate(text, ("jobs", "worker", "restart")) == 19
    assert locate(text, ("env", "FOO")) == 8
    assert locate(text, ("name",)) == 1


def test_metric_patterns_are_checked_and_kept():
    text = GOOD.replace(
        'workdir = "trainers"',
        "workdir = \"trainers\"\nmetric_patterns = ['iter (?P<step>\\d+) loss=(?P<loss>[0-9.]+)']",
    )
    spec, problems = parse(text)
    assert (
        problems == [] and spec is not None and spec.metric_patterns == (r"iter (?P<step>\d+) loss=(?P<loss>[0-9.]+)",)
    )
    again, _ = parse_text(dumps(spec), spec.source)
    assert again is not None and again.metric_patterns == spec.metric_patterns
    errors = only_error(
        GOOD.replace(
            'workdir = "trainers"', "workdir = \"trainers\"\nmetric_patterns = ['loss (?P<loss>[0-9.]+', 'no groups']"
        )
    )
    assert [e.field for e in errors] == ["metric_patterns[0]", "metric_patterns[1]"]
    assert "not a valid regular expression" in errors[0].message and "no named groups" in errors[1].message
    assert errors[0].line == 6


def test_restart_reset_after_is_checked_kept_and_written_back():
    text = GOOD.replace("backoff_s = 0.5 }", "backoff_s = 0.5, reset_after_s = 3600 }")
    assert text != GOOD
    spec, problems = parse(text)
    assert spec is not None, problems
    assert spec.jobs["worker"].restart.reset_after_s == 3600.0
    assert spec.jobs["ps"].restart.reset_after_s == 600.0  # the default: ten healthy minutes
    again, _ = parse_text(dumps(spec))
    assert again is not None and again.jobs["worker"].restart == spec.jobs["worker"].restart
    spec, problems = parse(GOOD.replace("backoff_s = 0.5 }", "backoff_s = 0.5, reset_after_s = -1 }"))
    assert spec is None
    bad = [p for p in problems if p.field.endswith("restart.reset_after_s")]
    assert len(bad) == 1 and bad[0].line == 19, problems


def test_pasted_text_is_a_cluster_or_the_importers_problems():
    from core.cluster.pasted import import_pasted, looks_like_tf_config

    tf_config = """export TF_CONFIG='{"cluster": {"chief": ["h1:4000"], "worker": ["h2:4001"], "ps": ["h3:4002"]}}'"""
    assert looks_like_tf_config(tf_config) and not looks_like_tf_config("python t.py --worker_hosts=h:1")
    spec, problems = import_pasted(tf_config, "python -u pss.py", Path("/tmp"))
    assert problems == [] and spec is not None
    assert (spec.strategy, spec.launch_style, spec.command) == (
        "parameter_server",
        "tf_config",
        ("python", "-u", "pss.py"),
    )
    assert [t.address for t in spec.tasks()] == ["h3:4002", "h1:4000", "h2:4001"]

    spec, problems = import_pasted("python t.py --ps_hosts=h:1 --worker_hosts=h:2,h:3 --job_name=ps", None, None)
    assert problems == [] and spec is not None and spec.command == ("python", "t.py")
    assert spec.role_ids() == ["ps:0", "worker:0", "worker:1"]

    for text, message in (("  ", "nothing was pasted"), ("python t.py --ps_hosts=h:1", "no --worker_hosts")):
        spec, problems = import_pasted(text, None, None)
        assert spec is None and message in problems[0].message and problems[0].hint
    spec, problems = import_pasted('{"cluster": [1]', None, None)
    assert spec is None and "not valid JSON" in problems[0].message
