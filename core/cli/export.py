"""``export RUN --csv DIR``: a run's figures as CSV files (:mod:`core.run.csv_export`), beside the
``export --tfjob`` form of the same sub-command (:mod:`core.cli.main`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from core.cli.exits import EXIT_OK, EXIT_USAGE, resolve_run
from core.textsafe import terminal


def add_csv_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``RUN --csv DIR`` arguments of ``export``."""
    parser.add_argument("run", nargs="?", help="with --csv: a run directory, a run id from `runs`, or 'latest'")
    parser.add_argument(
        "--csv",
        type=Path,
        metavar="DIR",
        help="write the run's metrics, scalars, samples and role states as CSV files into DIR",
    )
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)


def wants_csv(args: argparse.Namespace) -> bool:
    return args.csv is not None or args.run is not None


def cmd_export_csv(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from core.run.csv_export import ExportError, export_csv

    if args.tfjob is not None:
        print("export: give either --tfjob FILE or RUN --csv DIR, not both", file=err)
        return EXIT_USAGE
    if args.run is None or args.csv is None:
        print("export: CSV needs a run and a directory, e.g. `export latest --csv figures/`", file=err)
        return EXIT_USAGE
    path = resolve_run(args.run, args.root, err)
    if path is None:
        return EXIT_USAGE
    try:
        result = export_csv(path, args.csv)
    except ExportError as exc:
        print(terminal(f"--csv: {exc}"), file=err)
        return EXIT_USAGE
    print(terminal(result.summary()), file=out)  # the directory as the user named it
    return EXIT_OK
