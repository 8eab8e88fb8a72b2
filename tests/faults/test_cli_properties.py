"""Property-based: generated cluster files, TF_CONFIG and flag strings, run directories and
trainer output thrown at the CLI's entry points (issue 20).

Each property asserts what a user must always get: exit 0 or 2 (1 where the command says "not
running"), problems as lines naming where and how to fix, never a traceback, never a hang (a hard
timeout ends the run), never a process left behind. The CLI's ``main`` runs in this process (fast);
one property launches real clusters in subprocesses. ``TOWERDECK_FUZZ_SCALE`` multiplies the cases.
Hostile text (issue 34) rides along: no output holds a raw control character, no CSV cell is a
formula, and read_file never leaves profiles/ through generated symbolic links.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import time
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.cli.main import main as cli_main
from core.run.csv_export import read_csv
from core.telemetry.metrics import MetricParser, MetricPattern
from tests.helpers.bad_input import FLAG_WORDS, JSONISH, SEED_TEXTS, TOKENS, mutated
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import ROOT, run_cli
from tests.helpers.textcheck import formula_cells_in, raw_controls

SCALE = int(os.environ.get("TOWERDECK_FUZZ_SCALE", "1"))
HARD_TIMEOUT = pytest.mark.timeout(600, method="thread")  # a hang ends the run instead of stalling it

# Pieces issue 20 found or that sit at the edges of what the CLI reads.
HOSTILE = [
    "\\u0000", "'^(?P<step>(a|aa)+)+$'", "'(?P<loss>.*.*)x'", "tasks = 9223372036854775807", "tasks = 10001",
    "start_s = inf", "stop_grace_s = nan", "[" * 500 + "]" * 500, "[slurm]\npartition = \"x\"\n", "\r\n",
    'gpus = [0, "1"]', 'command = ["/tmp"]', 'command = ["./nope.sh"]', "tasks = [\"127.0.0.5:1\"]",
    'name = "\\u001b]0;T\\u0007\\u001b[2J"', '[env]\n"\\u001b[2J" = "\\u009b"', 'command = ["\\u001b[31m", "\\t"]',
    'env = { A = "\\u202e\\r" }', 'name = "=1+1"',
]  # fmt: skip
# Text a terminal would act on, and cells a spreadsheet would run.
HOSTILE_TEXT = st.lists(
    st.sampled_from(
        ["\x1b]0;TITLE\x07", "\x1b[2J", "\x9b", "\r", "\n", "\t", "\x00", "\u202e", "=1+1", "@SUM(1)", "-2+3"]
    )
    | st.text(max_size=8),
    max_size=5,
).map("".join)
SLURM_SEED = (
    'command = "python -u t.py"\n[slurm]\npartition = "debug"\n[jobs.ps]\ntasks = 1\n[jobs.worker]\ntasks = {}\n'
)
DEEP = st.integers(1, 3000).map(lambda n: "[" * n + "]" * n)
CLUSTER_TEXT = (
    mutated(SEED_TEXTS)
    | st.lists(st.sampled_from(TOKENS + HOSTILE), max_size=12).map("\n".join)
    | st.integers(-5, 2**63 - 1).map(SLURM_SEED.format)  # a count of tasks up to 2**63-1
    | st.tuples(st.sampled_from(SEED_TEXTS), st.sampled_from(["name", "workdir", "env.A", "x"]), DEEP).map(
        lambda t: f"{t[1]} = {t[2]}\n" + t[0]  # nesting where a value goes
    )
)
PROBLEM_LINE_ENDS = (" error", " errors", " warning", " warnings")


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        code = cli_main(list(args), out, err)
    except SystemExit as exc:  # argparse's own refusal (usage line, exit 2)
        code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def assert_clear(code: int, err: str, allowed: tuple[int, ...] = (0, 2)) -> None:
    """Exit 0 or 2; on 2 at least one line saying what is wrong; never a traceback."""
    assert code in allowed, (code, err)
    assert "Traceback" not in err and "Error:" not in err.replace("error:", ""), err
    if code == 2:
        assert err.strip(), "refused without a word"
    assert not psutil.Process().children(recursive=True), "a process was left behind"


@pytest.fixture(scope="module")
def cluster_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clusters")
    (path / "trainers").mkdir()
    return path


@HARD_TIMEOUT
@given(text=CLUSTER_TEXT)
@settings(max_examples=200 * SCALE, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_generated_cluster_files_at_validate_render_and_export(cluster_dir: Path, text: str) -> None:
    path = cluster_dir / "cluster.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    for args in (
        ["validate", str(path), "--no-ports"],
        ["render", str(path)],
        ["export", "--tfjob", str(path), "--image", "tf:1"],
    ):
        code, out, err = cli(*args)
        assert_clear(code, err)
        assert raw_controls(out + err) == [], (args[0], out + err)  # problems, OK line, shell lines
        if code == 2 and args[0] == "validate":  # problems name the file, and end with their count
            assert err.rstrip().endswith(PROBLEM_LINE_ENDS) or "cannot" in err, err


@HARD_TIMEOUT
@given(
    tf_config=JSONISH.map(lambda v: json.dumps(v, allow_nan=True)) | st.text(max_size=200) | DEEP,
    flags=st.lists(FLAG_WORDS | st.text(max_size=10), max_size=10).map(" ".join) | st.text(max_size=200),
    command=st.none() | st.sampled_from(["python t.py", "", "'", "a\x00b"]),
)
@settings(max_examples=300 * SCALE, deadline=None)
def test_generated_tf_config_and_flags_at_import(tf_config: str, flags: str, command: str | None) -> None:
    extra = [f"--command={command}"] if command is not None else []
    for args in (["import", f"--tf-config={tf_config}", *extra], ["import", f"--flags={flags}"]):
        code, out, err = cli(*args)
        assert_clear(code, err)
        if code == 0:  # what it prints is a cluster file TowerDeck reads back
            assert out.startswith("name = ") or "[jobs." in out, out


RUN_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "id": JSONISH | HOSTILE_TEXT,
        "name": HOSTILE_TEXT,
        "source": HOSTILE_TEXT,
        "reason": HOSTILE_TEXT,
        "created": st.floats(allow_nan=True, allow_infinity=True) | JSONISH,
        "state": st.sampled_from(["running", "completing", "done", "stopping", "starting"]) | JSONISH,
        "result": JSONISH,
        "roles": st.lists(st.sampled_from(["ps:0", "worker:0", "worker:1"]) | JSONISH, max_size=3) | JSONISH,
        "control_socket": st.sampled_from(["/nonexistent/control.sock", "", "a\x00b", "/tmp"]) | JSONISH,
        "pid": JSONISH,
    },
)
RUN_JSON = (
    RUN_FIELDS.map(lambda d: json.dumps(d, allow_nan=True))
    | JSONISH.map(lambda v: json.dumps(v, allow_nan=True))
    | st.binary(max_size=80).map(lambda b: b.decode("utf-8", "replace"))
    | RUN_FIELDS.map(lambda d: json.dumps(d)[: max(1, len(json.dumps(d)) // 2)])
)
JOURNAL_LINE = st.fixed_dictionaries(
    {"kind": st.sampled_from(["role_state", "cluster_state", "host_state", "warning"])},
    optional={"role": st.sampled_from(["ps:0", "worker:0"]) | JSONISH, "state": JSONISH, "t": JSONISH},
).map(lambda d: json.dumps(d, allow_nan=True)) | st.text(max_size=40)


@HARD_TIMEOUT
@given(run_json=RUN_JSON, journal=st.lists(JOURNAL_LINE, max_size=6))
@settings(max_examples=150 * SCALE, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_generated_run_directories_at_runs_and_ctl(cluster_dir: Path, run_json: str, journal: list[str]) -> None:
    root = cluster_dir / "runs"
    run = root / "run-1"
    run.mkdir(parents=True, exist_ok=True)
    (run / "run.json").write_text(run_json, encoding="utf-8", errors="surrogatepass")
    (run / "events.jsonl").write_text("\n".join(journal) + "\n", encoding="utf-8", errors="surrogatepass")
    code, out, err = cli("runs", "--root", str(root))
    assert_clear(code, err)
    assert raw_controls(out + err) == [], out + err
    for action in (["status"], ["stop", "worker:0"], ["signal", "worker:0", "INT"]):
        code, out, err = cli("ctl", str(run), *action)
        assert_clear(code, err, allowed=(1, 2))  # never running here: 1 says so, 2 a damaged run.json
        assert len(err.splitlines()) == 1, err
        assert raw_controls(out + err) == [], err


TRAINER_BYTES = st.lists(
    st.binary(max_size=300)
    | st.sampled_from([b"\r\n", b"\xff\xfe", b"step 5 loss 0.5\n", b"a" * 5000 + b"!\n", b"\x1b[31m", b"\r"]),
    max_size=8,
).map(b"".join)


@HARD_TIMEOUT
@given(data=TRAINER_BYTES)
@settings(max_examples=200 * SCALE, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_generated_trainer_output_at_metrics_and_placement(cluster_dir: Path, data: bytes) -> None:
    log = cluster_dir / "attempt-1.log"
    log.write_bytes(data)
    for command in ("metrics", "placement"):
        for extra in ([], ["--json"]):
            code, out, err = cli(command, str(log), *extra)
            assert_clear(code, err, allowed=(0,))
            assert not err
            assert raw_controls(out) == [], out  # op names, devices, sources from the trainer


BYTES_ROLE = "import sys; sys.stdout.buffer.write(bytes.fromhex(sys.argv[1])); sys.stdout.flush()"


@HARD_TIMEOUT
@given(data=TRAINER_BYTES)
@settings(max_examples=4 * SCALE, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_generated_trainer_output_through_a_real_launch(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    """A real launch (subprocess, agent, roles) whose worker prints the bytes: it ends with exit 0,
    the log holds every byte, and nothing is left running or listening."""
    base = tmp_path_factory.mktemp("launch")
    (base / "role.py").write_text(BYTES_ROLE)
    ps, worker = free_ports(2)
    path = base / "c.toml"
    path.write_text(
        f'command = ["python", "{base / "role.py"}", "{data.hex()}"]\ncomplete_when = ["worker"]\n'
        "metric_patterns = ['step (?P<step>\\d+) loss (?P<loss>[0-9.]+)']\n"
        f'[jobs.ps]\ntasks = ["127.0.0.1:{ps}"]\n[jobs.worker]\ntasks = ["127.0.0.1:{worker}"]\n'
    )
    result = run_cli("launch", str(path), "--run-dir", str(base / "run"), "--follow", "all", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert raw_controls(result.stdout + result.stderr) == [], result.stdout  # followed, escaped
    assert (base / "run" / "roles" / "worker-0" / "attempt-1.log").read_bytes() == data
    assert_nothing_left([ps, worker], str(base))


OLD_RUN = ROOT / "tests" / "fixtures" / "run_c23e87e"
CELL = HOSTILE_TEXT | st.sampled_from(['=HYPERLINK("http://x","y")', "+1", "-1", "-1.5e3", "\t=1", "@x"])
NUMBER = st.integers() | st.floats(allow_nan=False, allow_infinity=False)


@HARD_TIMEOUT
@given(
    tags=st.lists(CELL, min_size=1, max_size=4),
    values=st.lists(NUMBER, min_size=4, max_size=4),
    gpu_name=CELL,
    host=CELL,
    detail=CELL,
    names=st.tuples(CELL, CELL),
)
@settings(max_examples=40 * SCALE, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_generated_text_never_reaches_a_csv_cell_as_a_formula(
    tmp_path_factory: pytest.TempPathFactory,
    tags: list[str],
    values: list[float],
    gpu_name: str,
    host: str,
    detail: str,
    names: tuple[str, str],
) -> None:
    """export RUN --csv and runs compare --csv, with tags, GPU names, hosts, details and cluster
    names generated: no cell a spreadsheet would run, numbers read back as the numbers written."""
    base = tmp_path_factory.mktemp("csv")
    runs = []
    for i, name in enumerate(names):
        run = base / f"run-{i}"
        shutil.copytree(OLD_RUN, run)
        info = json.loads((run / "run.json").read_text())
        (run / "run.json").write_text(json.dumps({**info, "id": f"run-{i}", "name": name}))
        runs.append(run)
    points = [
        {"tag": t, "step": n, "wall_time": 1.0, "value": v} for n, (t, v) in enumerate(zip(tags, values, strict=False))
    ]
    (runs[0] / "roles" / "worker-0" / "scalars.jsonl").write_text("".join(json.dumps(p) + "\n" for p in points))
    sample = {"t": 1.0, "host": host, "figures": {}, "roles": {}, "gpus": [{"index": 0, "name": gpu_name}]}
    (runs[0] / "telemetry" / "samples-x.jsonl").write_text(json.dumps(sample) + "\n")
    with open(runs[0] / "events.jsonl", "a") as f:
        f.write(json.dumps({"t": 2.0, "kind": "role_state", "role": "worker:0", "state": "failed", "detail": detail}))
        f.write("\n")
    code, out, err = cli("export", str(runs[0]), "--csv", str(base / "out"))
    assert_clear(code, err, allowed=(0,))
    for name in ("scalars.csv", "gpu_samples.csv", "host_samples.csv", "role_states.csv"):
        assert formula_cells_in(base / "out" / name) == [], name
    written = [float(r["value"]) for r in read_csv(base / "out" / "scalars.csv")]
    assert written == [float(p["value"]) for p in points]
    code, out, err = cli("runs", "compare", str(runs[0]), str(runs[1]), "--csv", str(base / "compare.csv"))
    assert_clear(code, err, allowed=(0,))
    assert formula_cells_in(base / "compare.csv") == []
    assert raw_controls(out + err) == [], out


SEGMENT = st.sampled_from(["t", "a.pb", "etc", "up", "away", "inner", ".", "..", "latest", "loop", "x", "hostname"])
LINKS = ["profiles/etc", "profiles/up", "profiles/t/away", "profiles/latest", "profiles/t/loop"]
TARGETS = ["/etc", "../secret", "./../secret", "../../secret", "../../../outside", "t", "a.pb", "../t", "/", "loop"]
# Paths through the links (their names, what lies behind them), and paths made of any segments.
REQUEST = st.sampled_from(
    [*LINKS, *(f"{link}/{leaf}" for link in LINKS for leaf in ("hostname", "a.pb", "secret"))]
) | (st.lists(SEGMENT, min_size=1, max_size=4).map(lambda parts: "profiles/" + "/".join(parts)))


@HARD_TIMEOUT
@given(
    links=st.lists(st.tuples(st.sampled_from(LINKS), st.sampled_from(TARGETS)), max_size=4, unique_by=lambda x: x[0]),
    requests=st.lists(REQUEST, max_size=6),
)
@settings(max_examples=150 * SCALE, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_generated_symlinks_never_let_read_file_out_of_profiles(
    tmp_path_factory: pytest.TempPathFactory, links: list[tuple[str, str]], requests: list[str]
) -> None:
    """Links in profiles/ to anywhere (absolute, relative, ./ and ../, chains, loops), and paths
    through them: read_file answers with data only from a regular file really inside profiles/."""
    from core.agent.profile import profile_path, read_chunk

    base = tmp_path_factory.mktemp("links")
    run = base / "run"
    (run / "profiles" / "t").mkdir(parents=True)
    (run / "profiles" / "t" / "a.pb").write_bytes(b"inside")
    (run / "secret").write_bytes(b"SECRET")
    (base / "outside").write_bytes(b"SECRET")
    for link, target in links:
        (run / link).symlink_to(target)
    cwd = os.getcwd()
    os.chdir(run)
    try:
        for path in requests:
            try:
                profile_path(path, "path")
            except ValueError:
                continue  # refused as written (.. or not under profiles/), as before
            chunk = read_chunk({"id": "r", "path": path})
            if "data" in chunk:
                assert base64.b64decode(chunk["data"]) == b"inside", (path, links)
                real = os.path.realpath(path)
                assert real.startswith(str((run / "profiles").resolve()) + os.sep), (path, real)
            else:
                assert chunk["error"].startswith(f"cannot read {profile_path(path, 'path')}: "), chunk
    finally:
        os.chdir(cwd)


ATOMS = st.sampled_from(["a", "1", " ", "!", ".", "\\d", "\\D", "\\s", "\\w", "[a1]", "[^!]", "(?:aa)"])
QUANTIFIERS = st.sampled_from(["+", "*", "?", "{2,}", "{0,99}", "++", "*+", "{3}"])
REGEXES = st.recursive(
    ATOMS,
    lambda inner: (
        st.tuples(inner, QUANTIFIERS).map(lambda t: f"(?:{t[0]}){t[1]}")
        | st.lists(inner, min_size=2, max_size=3).map("".join)
        | st.lists(inner, min_size=2, max_size=3).map(lambda parts: "(?:" + "|".join(parts) + ")")
        | inner.map(lambda r: f"(?>{r})")
    ),
    max_leaves=6,
)
ADVERSARIAL_LINES = ["a" * 2048, "1" * 2048, "a1 " * 682, " " * 2048, "ab" * 1024, "a" * 2047 + "!"]


@HARD_TIMEOUT
@given(regex=REGEXES, anchor=st.sampled_from(["", "^"]), end=st.sampled_from(["", "$", "!"]))
@settings(max_examples=400 * SCALE, deadline=None)
def test_every_metric_pattern_accepted_takes_bounded_time_per_line(regex: str, anchor: str, end: str) -> None:
    """What `validate` accepts as a metric pattern matches any line in well under a second; what
    could take longer is refused (core/telemetry/regex_risk.py). The bound is generous on purpose:
    an exponential or cubic pattern takes seconds to forever on these 2 kB lines."""
    try:
        parser = MetricParser((MetricPattern(f"{anchor}(?P<step>{regex}){end}"),))
    except ValueError:
        return  # refused with a reason, before any output
    for line in ADVERSARIAL_LINES:
        started = time.process_time()
        parser.feed(line + "\n", 0.0)
        assert time.process_time() - started < 1.0, (regex, line[:10])
