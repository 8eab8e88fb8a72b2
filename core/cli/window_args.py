"""The window's options, ``python main.py [FILE] [--demo] [--run RUN] [--tab TAB] ...``: defined once,
here (no Qt), so the window parses them (gui/window/app.py) and ``python main.py --help`` lists
them beside the subcommands."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from core.cli.progname import PROG

# Every page and tab the window opens at, as --tab names it: the Cluster and Runs pages, and the
# Run page's tabs (gui/window/app.py shows each; tests/gui checks the window has no other).
PAGES = ("cluster", "runs")
RUN_TABS = ("training", "gpus", "placement", "logs", "profile")
TABS = (*PAGES, *RUN_TABS)

USAGE = "[FILE] [--demo] [--launch] [--run RUN] [--tab TAB] [--size WxH] [--screenshot PNG [--after SECONDS]]"


def add_window_arguments(group: Any, *, with_file: bool = True) -> None:
    """The window's arguments on ``group`` (a parser, or an argument group of the CLI's help);
    ``with_file``: the cluster file positional too (the CLI's parser has its subcommand there)."""
    if with_file:
        group.add_argument("file", nargs="?", type=Path, help="a cluster file to open")
    group.add_argument("--demo", action="store_true", help="open the bundled demo cluster")
    group.add_argument("--launch", action="store_true", help="launch the cluster at once")
    group.add_argument(
        "--run", metavar="RUN", help="open a run directory (a path, a run id from `runs`, or 'latest'), past or live"
    )
    group.add_argument(
        "--tab",
        choices=TABS,
        metavar="TAB",
        help=f"the page or tab to show first: {', '.join(TABS)}",
    )
    group.add_argument(
        "--size", metavar="WxH", help="the window's size in pixels, e.g. 1600x1000 (default: the last session's)"
    )
    group.add_argument(
        "--screenshot",
        type=Path,
        metavar="PNG",
        help="save the window to PNG after --after seconds, then stop what it launched and quit",
    )
    group.add_argument(
        "--after", type=float, default=10.0, metavar="SECONDS", help="delay before --screenshot (default 10)"
    )


def window_group(parser: argparse.ArgumentParser) -> None:
    """The window's options as a section of ``python main.py --help``."""
    group = parser.add_argument_group(
        f"window options ({PROG} [FILE] [OPTIONS])",
        "With no subcommand TowerDeck opens its window on FILE, a cluster file (default: the last one you\n"
        "opened), or on --demo, --run RUN.",
    )
    add_window_arguments(group, with_file=False)
