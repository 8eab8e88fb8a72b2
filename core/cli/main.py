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
from typing import TextIO

from core.cli.ctl import add_parser as add_ctl_parser
from core.cli.desktop import add_parser as add_desktop_parsers
from core.cli.exits import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, line_count, write_output
from core.cli.exits import print_problems as _print_problems
from core.cli.export import add_csv_arguments, cmd_export_csv, wants_csv
from core.cli.gpus import add_parser as add_gpus_parser
from core.cli.launch import cmd_attach, cmd_launch
from core.cli.profile import add_summary_parser
from core.cli.runs import add_arguments as add_runs_arguments
from core.cli.runs import cmd_runs
from core.cluster.demo import DEMO_CLUSTER
from core.cluster.pasted import from_flags, from_tf_config
from core.cluster.problems import SpecError
from core.cluster.render import render_all
from core.cluster.spec import UnplacedTasksError, dumps, load
from core.textsafe import terminal, terminal_lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python main.py", description="TowerDeck: launch and watch distributed TensorFlow clusters."
    )
    sub = parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND")

    p = sub.add_parser("validate", help="check a cluster file; exit 0 if it can launch, 2 with every problem if not")
    p.set_defaults(handler=cmd_validate)
    p.add_argument("file", type=Path)
    p.add_argument("--no-ports", action="store_true", help="do not check whether the task ports are free")
    p.add_argument(
        "--remote",
        action="store_true",
        help="also check every host over SSH (reachable, python, TensorFlow, workdir, script, ports, NVML)",
    )
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS", help="per host, for --remote")

    p = sub.add_parser("render", help="print each role's environment and command line, ready to paste")
    p.set_defaults(handler=cmd_render)
    p.add_argument("file", type=Path)
    p.add_argument("--run-dir", type=Path, help="the run directory to show in paths (default: <run-dir>)")
    p.add_argument("--json", action="store_true", help="print JSON instead of shell lines")

    p = sub.add_parser("import", help="turn a pasted command line or TF_CONFIG into a cluster file")
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

    p = sub.add_parser("launch", help="start every role and manage them until the training is over")
    p.set_defaults(handler=cmd_launch)
    p.add_argument("file", type=Path)
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

    p = sub.add_parser("attach", help="reattach to a run that is still going (left, or its launcher was killed)")
    p.set_defaults(handler=cmd_attach)
    p.add_argument("run", help="a run directory, a run id from `runs`, or 'latest'")
    p.add_argument("--follow", metavar="ROLE", action="append", default=[], help="print this role's output ('all')")
    p.add_argument("--tail", type=line_count, default=20, help="lines of a failed role's output to print (default 20)")
    p.add_argument("--progress-every", type=float, default=5.0, metavar="SECONDS", help="0: never; default 5")
    p.add_argument("--root", type=Path, help=argparse.SUPPRESS)

    p = sub.add_parser(
        "runs",
        help="list past and running runs; `runs compare A B` puts runs side by side; "
        "`runs tensorboard RUN` opens one in TensorBoard",
    )
    p.set_defaults(handler=cmd_runs)
    p.add_argument("--root", type=Path, help="the runs root (default: the user data dir)")
    add_runs_arguments(p)  # core/cli/runs.py

    add_ctl_parser(sub)  # ctl: core/cli/ctl.py

    p = sub.add_parser("placement", help="summarise TensorFlow's device placement log in a role's output")
    p.set_defaults(handler=cmd_placement)
    p.add_argument("logfile", type=Path)
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser("metrics", help="print the step, loss and step time found in a role's output")
    p.set_defaults(handler=cmd_metrics)
    p.add_argument("logfile", type=Path)
    p.add_argument("--json", action="store_true", help="print JSON, one object per sample")

    add_gpus_parser(sub)  # gpus: core/cli/gpus.py

    p = sub.add_parser("demo-path", help="print the path of the bundled demo cluster file")
    p.set_defaults(handler=cmd_demo_path)

    # export: the cluster for another scheduler (core/cluster/tfjob.py); only Kubeflow's TFJob for now.
    # export RUN --csv DIR: a run's figures as CSV (core/cli/export.py).
    p = sub.add_parser(
        "export", help="write the cluster as a Kubeflow TFJob manifest (kubeflow.org/v1), or a run's figures as CSV"
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
    return parser


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
