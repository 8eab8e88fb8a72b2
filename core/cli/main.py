"""The headless command line: ``python main.py SUBCOMMAND``. Everything the window does but draw.

Exit codes: 0 success, 1 the training failed (or a control request was refused), 2 bad input
(every problem printed with its location and a fix), 130 interrupted by the user.
"""

from __future__ import annotations

import argparse
import codecs
import dataclasses
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from core.cli import window_args
from core.cli.ctl import add_parser as add_ctl_parser
from core.cli.desktop import add_parser as add_desktop_parsers
from core.cli.exits import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, line_count, write_output
from core.cli.exits import print_problems as _print_problems
from core.cli.export import add_csv_arguments, cmd_export_csv, wants_csv
from core.cli.gpus import add_parser as add_gpus_parser
from core.cli.helptree import FORMATTER, Parser, add_topic_help, command, examples_text, topic
from core.cli.launch import cmd_attach, cmd_launch
from core.cli.profile import add_summary_parser
from core.cli.progname import PROG
from core.cli.runs import add_arguments as add_runs_arguments
from core.cli.runs import cmd_runs
from core.cluster.demo import DEMO_CLUSTER
from core.cluster.pasted import from_flags, from_tf_config
from core.cluster.problems import SpecError
from core.cluster.render import render_all
from core.cluster.spec import UnplacedTasksError, dumps, load
from core.textsafe import terminal, terminal_lines

# The subcommands as ``python main.py --help`` lists them, by what a user is doing (git's and
# kubectl's help group theirs the same way); one not named here is listed under "other".
COMMAND_GROUPS = (
    ("check and start a cluster", ("validate", "render", "import", "gpus", "launch")),
    ("watch and control a run", ("ctl", "attach")),
    ("look back at runs", ("runs", "export", "metrics", "placement", "profile-summary")),
    ("other", ("demo-path", "install-desktop", "uninstall-desktop")),
)

TOP_EXAMPLES = (
    ("open the window on the bundled demo cluster", f"{PROG} --demo"),
    ("check a cluster file, then launch it without the window", f"{PROG} validate cluster.toml"),
    ("", f"{PROG} launch cluster.toml"),
    ("the last run's roles, then stop one worker", f"{PROG} ctl latest status"),
    ("", f"{PROG} ctl latest stop worker:1"),
    ("every run so far, and two side by side", f"{PROG} runs"),
    ("", f"{PROG} runs compare RUN_A RUN_B"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROG,
        usage=f"{PROG} {window_args.USAGE}\n       {PROG} SUBCOMMAND [ARGS] [--help]",
        description="TowerDeck: launch and watch distributed TensorFlow clusters, in a window or from a terminal.",
        formatter_class=FORMATTER,
    )
    parser.example = f"{PROG} --demo"
    window_args.window_group(parser)  # the window's options, parsed by gui/window/app.py
    # The subcommands are listed in groups by _command_list below, not by argparse.
    sub = parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", help=argparse.SUPPRESS, prog=PROG)

    p = command(
        sub,
        "validate",
        summary="check a cluster file: exit 0 if it can launch, 2 with every problem if not",
        description="Check a cluster file as `launch` would before starting anything: every problem at once,\n"
        "each with its line and a fix. Exit 0 if it can launch, 2 if not.",
        examples=(
            ("check the file and that its ports are free here", f"{PROG} validate cluster.toml"),
            (
                "also check every remote host over SSH (python, TensorFlow, script, ports)",
                f"{PROG} validate cluster.toml --remote",
            ),
        ),
    )
    p.set_defaults(handler=cmd_validate)
    p.add_argument("file", type=Path, metavar="FILE", help="the cluster file (TOML)")
    p.add_argument("--no-ports", action="store_true", help="do not check whether the task ports are free")
    p.add_argument(
        "--remote",
        action="store_true",
        help="also check every host over SSH (reachable, python, TensorFlow, workdir, script, ports, NVML)",
    )
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS", help="per host, for --remote")

    p = command(
        sub,
        "render",
        summary="print each role's environment and command line, ready to paste",
        description="Print, for every role, the environment (TF_CONFIG or the classic flags) and the command line\n"
        "TowerDeck would start it with: to paste into a terminal on its host, or to read.",
        examples=(
            ("each role's shell line", f"{PROG} render cluster.toml"),
            ("the same as JSON, for a script", f"{PROG} render cluster.toml --json"),
        ),
    )
    p.set_defaults(handler=cmd_render)
    p.add_argument("file", type=Path, metavar="FILE", help="the cluster file (TOML)")
    p.add_argument("--run-dir", type=Path, help="the run directory to show in paths (default: <run-dir>)")
    p.add_argument("--json", action="store_true", help="print JSON instead of shell lines")

    p = command(
        sub,
        "import",
        summary="turn a pasted command line or TF_CONFIG into a cluster file",
        description="Write a cluster file from what you launch by hand today: a trainer's command line with\n"
        "--ps_hosts/--worker_hosts, or a TF_CONFIG value.",
        examples=(
            (
                "from a classic command line",
                f'{PROG} import --flags "python train.py --ps_hosts=a:2222 --worker_hosts=b:2223,c:2223" -o cluster.toml',
            ),
            (
                "from TF_CONFIG, with the command to run",
                f'{PROG} import --tf-config "$TF_CONFIG" --command "python -u train.py" -o cluster.toml',
            ),
        ),
    )
    p.set_defaults(handler=cmd_import)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--flags",
        metavar="COMMAND",
        help='a command with --ps_hosts/--worker_hosts, e.g. "python train.py --ps_hosts=a:2222 --worker_hosts=b:2223"',
    )
    src.add_argument("--tf-config", metavar="JSON", help="a TF_CONFIG value")
    p.add_argument("--command", help="the training command to use with --tf-config")
    p.add_argument("-o", "--output", type=Path, help="write the cluster file here instead of printing it")

    p = command(
        sub,
        "launch",
        summary="start every role and manage them until the training is over",
        description="Start every role of the cluster (here, over SSH or on Slurm), print their states and progress,\n"
        "restart them as their policy says, and stop the ps tasks when training is done. Ctrl-C stops\n"
        "the cluster. The run is kept in a run directory: `runs` lists it, `ctl` controls it.",
        examples=(
            ("launch and follow every role", f"{PROG} launch cluster.toml"),
            ("also print worker:0's output", f"{PROG} launch cluster.toml --follow worker:0"),
            ("keep the run in a folder of your choice", f"{PROG} launch cluster.toml --run-dir runs/try-3"),
        ),
    )
    p.set_defaults(handler=cmd_launch)
    p.add_argument("file", type=Path, metavar="FILE", help="the cluster file (TOML)")
    p.add_argument("--run-dir", type=Path, help="where to keep this run (default: a new directory under the runs root)")
    p.add_argument(
        "--follow",
        metavar="ROLE",
        action="append",
        default=[],
        help="also print this role's output (repeatable; 'all' for every role)",
    )
    p.add_argument("--tail", type=line_count, default=20, help="lines of a failed role's output to print (default 20)")
    p.add_argument(
        "--progress-every",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="print a line per training role this often (0: never; default 5)",
    )

    p.add_argument(
        "--on-disconnect",
        choices=("keep", "stop"),
        default="keep",
        help="if TowerDeck goes away (killed, crashed, connection lost): keep the roles running (default; "
        "reattach with `attach`) or have each host's agent stop them",
    )
    p.add_argument(
        "--no-preflight",
        action="store_true",
        help="skip the pre-flight check of remote hosts over SSH before launching",
    )
    p.add_argument(
        "--quiet",
        action="store_true",
        help="print no state changes, progress or output lines, only the run directory, errors and the "
        "summary at the end (the window uses it for the launch it follows: it shows them itself, and "
        "printing a line per role of a large cluster costs the launcher CPU for nothing)",
    )

    p = command(
        sub,
        "attach",
        summary="reattach to a run that is still going (left, or its launcher was killed)",
        description="Take control of a run whose roles still run but whose launcher is gone (it was detached with\n"
        "`ctl RUN detach`, killed, or lost its terminal): states, progress and restarts go on from here.",
        examples=(
            ("the last run", f"{PROG} attach latest"),
            ("a run by id, printing worker:1's output", f"{PROG} attach 20261127-153012-mnist --follow worker:1"),
        ),
    )
    p.set_defaults(handler=cmd_attach)
    p.add_argument("run", help="a run directory, a run id from `runs`, or 'latest'")
    p.add_argument("--follow", metavar="ROLE", action="append", default=[], help="print this role's output ('all')")
    p.add_argument("--tail", type=line_count, default=20, help="lines of a failed role's output to print (default 20)")
    p.add_argument("--progress-every", type=float, default=5.0, metavar="SECONDS", help="0: never; default 5")
    p.add_argument("--root", type=Path, help=argparse.SUPPRESS)

    add_runs_parser(sub)  # runs, runs compare, runs tensorboard: below
    add_ctl_parser(sub)  # ctl: core/cli/ctl.py

    p = command(
        sub,
        "placement",
        summary="summarise TensorFlow's device placement log in a role's output",
        description="Read a role's output (run with placement logging on) and print which ops ran on which device,\n"
        "per device and per op type.",
        examples=(
            ("worker 0's first attempt of the last run", f"{PROG} placement RUN/roles/worker-0/attempt-1.log"),
            ("as JSON", f"{PROG} placement worker.log --json"),
        ),
    )
    p.set_defaults(handler=cmd_placement)
    p.add_argument("logfile", type=Path)
    p.add_argument("--json", action="store_true", help="print JSON")

    p = command(
        sub,
        "metrics",
        summary="print the step, loss and step time found in a role's output",
        description="Read a role's output and print every step, loss and step time TowerDeck recognises in it:\n"
        "the way to check that your trainer's lines are understood.",
        examples=(
            ("a worker's log", f"{PROG} metrics RUN/roles/worker-0/attempt-1.log"),
            ("one JSON object per sample", f"{PROG} metrics worker.log --json"),
        ),
    )
    p.set_defaults(handler=cmd_metrics)
    p.add_argument("logfile", type=Path)
    p.add_argument("--json", action="store_true", help="print JSON, one object per sample")

    add_gpus_parser(sub)  # gpus: core/cli/gpus.py

    p = command(
        sub,
        "demo-path",
        summary="print the path of the bundled demo cluster file",
        description="Print where the bundled demo cluster file is, to copy it as a start for your own.",
        examples=(("copy the demo to edit it", f'cp "$({PROG} demo-path)" my-cluster.toml'),),
    )
    p.set_defaults(handler=cmd_demo_path)

    # export: the cluster for another scheduler (core/cluster/tfjob.py); only Kubeflow's TFJob for now.
    # export RUN --csv DIR: a run's figures as CSV (core/cli/export.py).
    p = command(
        sub,
        "export",
        summary="write the cluster as a Kubeflow TFJob manifest, or a run's figures as CSV",
        description="Two exports: `export --tfjob FILE --image IMAGE` writes the cluster as a Kubeflow TFJob\n"
        "manifest (kubeflow.org/v1, JSON that `kubectl apply -f` reads); `export RUN --csv DIR` writes\n"
        "a run's metrics, scalars, samples and role states as CSV files.",
        examples=(
            (
                "a TFJob for kubectl",
                f"{PROG} export --tfjob cluster.toml --image registry.example/train:1 -o tfjob.json",
            ),
            ("the last run's figures as CSV", f"{PROG} export latest --csv figures/"),
        ),
    )
    p.set_defaults(handler=cmd_export)
    p.add_argument("--tfjob", type=Path, metavar="FILE", help="the cluster file to export")
    add_csv_arguments(p)
    p.add_argument("-o", "--output", type=Path, help="write the manifest here instead of printing it")
    p.add_argument("--image", help="the container image with TensorFlow and your trainer (with --tfjob)")
    p.add_argument("--name", help="the TFJob's name (default: from the cluster's name, as a DNS-1035 label)")
    p.add_argument("--namespace", help="the Kubernetes namespace (default: kubectl's current one)")
    p.add_argument("--workdir", help="the directory the trainer starts in inside the image (default: the image's)")
    add_summary_parser(sub)  # profile-summary (core/cli/profile.py)
    add_desktop_parsers(sub)  # install-desktop, uninstall-desktop (core/cli/desktop.py)
    parser.epilog = (
        _command_list(sub)
        + "\n\n"
        + examples_text(TOP_EXAMPLES)
        + (
            f"\n\nRun `{PROG} SUBCOMMAND --help` for a subcommand's options and examples,\n"
            f"e.g. `{PROG} ctl --help` or `{PROG} runs compare --help`."
        )
    )
    return parser


def _command_list(sub: Any) -> str:
    """The subcommands with their summaries, in COMMAND_GROUPS' groups."""
    summaries = {a.dest: str(a.help) for a in sub._choices_actions}
    grouped = [name for _, names in COMMAND_GROUPS for name in names]
    groups = [(title, [n for n in names if n in summaries]) for title, names in COMMAND_GROUPS]
    if rest := [name for name in summaries if name not in grouped]:
        groups = [*groups[:-1], (groups[-1][0], [*groups[-1][1], *rest])]
    width = max(map(len, summaries)) + 2
    lines = ["subcommands:"]
    for title, names in groups:
        lines.append(f"  {title}")
        lines += [f"    {name:<{width}}{summaries[name]}" for name in names]
    return "\n".join(lines)


def add_runs_parser(sub: Any) -> None:
    """``runs``, with ``runs compare`` and ``runs tensorboard``: the arguments are core/cli/runs.py's
    (one parser, its first positional the action); each action has its own help (``TopicHelp``)."""
    p = command(
        sub,
        "runs",
        summary="list past and running runs; compare them side by side; open them in TensorBoard",
        description="List every run under the runs root, newest first: name, cluster file, start, duration, outcome,\n"
        "roles, loss and steps/s. Narrow the list with --outcome and --filter, order it with --sort.\n"
        "\n"
        "actions:\n"
        "  compare A B ...      2-8 runs side by side, the rows that differ marked\n"
        "  tensorboard RUN ...  one TensorBoard over the runs' event files, roles named <run>/<role>\n"
        f"(`{PROG} runs compare --help`, `{PROG} runs tensorboard --help`: their own options)",
        examples=(
            ("every run", f"{PROG} runs"),
            ("the failed ones of the mnist cluster", f"{PROG} runs --outcome failed --filter mnist"),
            ("as JSON, one run a line", f"{PROG} runs --json"),
        ),
        add_help=False,
    )
    topics = add_topic_help(p, key="action")
    p.set_defaults(handler=cmd_runs)
    p.add_argument("--root", type=Path, help="the runs root (default: the user data dir)")
    add_runs_arguments(p)  # core/cli/runs.py
    topic(
        p,
        topics,
        "compare",
        description="Print 2 to 8 runs side by side (cluster, program, each flag and [env] value, outcome, loss,\n"
        "steps/s, restarts ...), the rows that differ marked; --csv also writes the table for a spreadsheet.",
        examples=(
            ("two runs by id", f"{PROG} runs compare 20261127-153012-mnist 20261127-160544-mnist"),
            ("the same, also as CSV", f"{PROG} runs compare RUN_A RUN_B --csv compare.csv"),
        ),
        dests=("run", "csv", "root"),
        metavars={"run": "RUN"},
    )
    topic(
        p,
        topics,
        "tensorboard",
        description="Open one TensorBoard over the runs' event files on 127.0.0.1, with your browser, until\n"
        "Ctrl-C; each role is named <run name>/<role> (one run: <role>). Nothing is left running after.",
        examples=(
            ("the last run", f"{PROG} runs tensorboard latest"),
            ("two runs overlaid", f"{PROG} runs tensorboard 20261127-153012-mnist 20261127-160544-mnist"),
            (
                "print the address only (on a remote machine: forward the port)",
                f"{PROG} runs tensorboard latest --no-browser",
            ),
            ("the run's profiles, in TensorBoard's Profile tab", f"{PROG} runs tensorboard latest --profile"),
        ),
        dests=("run", "no_browser", "profile", "root"),
        metavars={"run": "RUN"},
    )


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.subcommand is None:
        parser.print_help(out)
        return EXIT_USAGE
    handler: Callable[[argparse.Namespace, TextIO, TextIO], int] = args.handler
    try:
        code: int = handler(args, out, err)
        return code
    except KeyboardInterrupt:
        print("interrupted", file=err)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except UnplacedTasksError as exc:  # tasks = N: no hosts before a Slurm allocation places them
        print(terminal(f"error: {exc}"), file=err)
        print("    fix: launch it on Slurm, or list the tasks as host:port to use them here", file=err)
        return EXIT_USAGE


# ------------------------------------------------------------------------------------------
# Input


def cmd_validate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from core.controller.session import load_checked

    spec = load_checked(args.file, err, check_ports=not args.no_ports)
    if spec is None:
        return EXIT_USAGE
    if args.remote:
        from core.preflight.runner import format_table, preflight

        if spec.slurm is not None:
            from core.preflight.runner import slurm_preflight

            results = [slurm_preflight(spec)]
        else:
            from core.cli.interrupts import on_signals
            from core.preflight.runner import PreflightRun

            checking = PreflightRun()
            with on_signals(lambda signum: checking.cancel()):  # Ctrl-C, SIGTERM, SIGHUP end a hung ssh at once
                results = preflight(spec, timeout_s=args.timeout, check_ports=not args.no_ports, run=checking)
            if checking.cancelled:
                print("interrupted during the remote checks", file=err)
                return EXIT_INTERRUPTED
        print(terminal_lines(format_table(results).split("\n")), file=out)  # remote hosts' own words
        failed = [r for r in results if not r.ok]
        if failed:
            print(terminal(f"{args.file}: {len(failed)} of {len(results)} hosts cannot launch"), file=err)
            return EXIT_USAGE
    jobs = ", ".join(f"{j.size} {name}" for name, j in spec.jobs.items())  # size: counted jobs too
    print(
        terminal(f"{args.file}: OK - {spec.name}: {jobs}; strategy {spec.strategy}, launch style {spec.launch_style}"),
        file=out,
    )
    return EXIT_OK


def cmd_render(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    spec, problems = load(args.file)
    _print_problems(problems, str(args.file), err)
    if spec is None:
        return EXIT_USAGE
    launches = render_all(spec, args.run_dir)
    if args.json:
        data = [
            {"role": x.role, "host": x.host, "cwd": str(x.cwd), "env": x.env, "argv": list(x.argv)} for x in launches
        ]
        print(json.dumps(data, indent=2), file=out)
        return EXIT_OK
    for launch in launches:
        print(f"# {launch.role} on {launch.host}", file=out)
        for key, value in launch.env.items():
            # A newline in a value would end the comment and make the rest a command when the
            # output is pasted into a shell: such values are shown escaped.
            shown = value if value.isprintable() else json.dumps(value)
            print(f"#   {key}={shown}", file=out)
        print(launch.shell_line(), file=out)
        print(file=out)
    return EXIT_OK


def cmd_import(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    base = args.output.parent.resolve() if args.output else Path.cwd()
    try:
        spec = (
            from_flags(args.flags, base)
            if args.flags is not None
            else from_tf_config(args.tf_config, args.command, base)
        )
    except SpecError as exc:
        _print_problems(exc.problems, "", err)
        return EXIT_USAGE
    text = dumps(spec, relative_to=base)
    if args.tf_config is not None and not args.command:
        print("note: TF_CONFIG has no command; edit `command` (set to python -u train.py)", file=err)
    if args.output:
        if not write_output(args.output, text, err):
            return EXIT_USAGE
        print(terminal(f"wrote {args.output}"), file=err)
    else:
        out.write(text)
    return EXIT_OK


READ_CHUNK_BYTES = 1 << 20


def _read_chunks(path: Path, err: TextIO) -> Iterator[str] | None:
    """The file's text in chunks (invalid UTF-8 replaced), or None after printing why not."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed by the generator
    except OSError as exc:
        print(terminal(f"{path}: cannot read: {exc.strerror or exc}"), file=err)
        return None

    def chunks() -> Iterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        with handle:
            while data := handle.read(READ_CHUNK_BYTES):
                yield decoder.decode(data)
            yield decoder.decode(b"", final=True)

    return chunks()


def cmd_placement(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from core.telemetry.placement import PlacementAggregator, format_summary

    chunks = _read_chunks(args.logfile, err)
    if chunks is None:
        return EXIT_USAGE
    aggregator = PlacementAggregator()
    for chunk in chunks:
        aggregator.feed_stream(chunk)
    aggregator.flush()
    summary = aggregator.summary()
    if args.json:
        print(json.dumps(summary, indent=2), file=out)
    elif not summary["ops"] and not summary["devices"]:
        print(
            terminal(
                f"{args.logfile}: no device placement lines (run the trainer with placement logging on, e.g. --log_device_placement)"
            ),
            file=out,
        )
    else:  # op and device names come from the trainer's log: each line escaped
        print(terminal_lines(format_summary(summary).split("\n")), file=out)
    return EXIT_OK


def cmd_metrics(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from core.telemetry.metrics import MetricParser

    chunks = _read_chunks(args.logfile, err)
    if chunks is None:
        return EXIT_USAGE
    parser = MetricParser()
    samples = [sample for chunk in chunks for sample in parser.feed(chunk, t=0.0)]
    samples += parser.flush(t=0.0)
    if args.json:
        for sample in samples:
            print(json.dumps({k: v for k, v in dataclasses.asdict(sample).items() if k != "t"}), file=out)
        return EXIT_OK
    if not samples:
        print(terminal(f"{args.logfile}: no training metrics found"), file=out)
        return EXIT_OK
    print(f"{'STEP':>8}  {'LOSS':>10}  {'STEP TIME':>10}  {'STEPS/S':>8}  SOURCE", file=out)
    for sample in samples:
        step = str(sample.step) if sample.step is not None else "-"
        loss = f"{sample.loss:.4f}" if sample.loss is not None else "-"
        step_time = f"{sample.step_time_s * 1000:.2f} ms" if sample.step_time_s is not None else "-"
        rate = f"{sample.steps_per_sec:.1f}" if sample.steps_per_sec is not None else "-"
        print(terminal(f"{step:>8}  {loss:>10}  {step_time:>10}  {rate:>8}  {sample.source}"), file=out)
    losses = [s.loss for s in samples if s.loss is not None]
    summary = f"{len(samples)} samples"
    if losses:
        summary += f"; loss {losses[0]:.4f} -> {losses[-1]:.4f}"
    print(summary, file=out)
    return EXIT_OK


def cmd_export(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``export --tfjob``: the manifest as JSON, which ``kubectl apply -f`` reads like YAML."""
    from core.cluster.tfjob import to_tfjob

    if wants_csv(args):
        return cmd_export_csv(args, out, err)
    if args.tfjob is None or not args.image:
        print(
            "export: give --tfjob FILE --image IMAGE (a TFJob manifest), or RUN --csv DIR (a run's figures)", file=err
        )
        return EXIT_USAGE
    spec, problems = load(args.tfjob)
    _print_problems(problems, str(args.tfjob), err)
    if spec is None:
        return EXIT_USAGE
    manifest, problems = to_tfjob(spec, args.image, name=args.name, namespace=args.namespace, workdir=args.workdir)
    _print_problems(problems, str(args.tfjob), err)
    if manifest is None:
        return EXIT_USAGE
    text = json.dumps(manifest, indent=2) + "\n"
    if args.output is None:
        out.write(text)
    else:
        if not write_output(args.output, text, err):
            return EXIT_USAGE
        print(
            terminal(f"wrote {args.output} (TFJob {manifest['metadata']['name']}): kubectl apply -f {args.output}"),
            file=out,
        )
    return EXIT_OK


def cmd_demo_path(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    print(DEMO_CLUSTER, file=out)
    return EXIT_OK
