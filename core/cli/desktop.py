"""``towerdeck install-desktop`` / ``uninstall-desktop``: TowerDeck in the application menu
(core/install/desktop.py writes the files)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from core.cli.exits import EXIT_OK, EXIT_USAGE
from core.cli.helptree import command
from core.cli.progname import PROG
from core.install.desktop import DesktopError, DesktopFiles, data_home, install, launcher_argv, uninstall
from core.textsafe import terminal


def add_parser(sub: Any) -> None:
    """Register ``install-desktop`` and ``uninstall-desktop`` on the CLI's sub-command parser."""
    for name, handler, text in (
        ("install-desktop", cmd_install, "add TowerDeck (entry and icon) to the desktop's application menu"),
        ("uninstall-desktop", cmd_uninstall, "remove what install-desktop added"),
    ):
        p = command(
            sub,
            name,
            summary=text,
            description=f"{text[0].upper()}{text[1:]}: files under $XDG_DATA_HOME (default ~/.local/share).",
            examples=[
                (text, f"{PROG} {name}"),
                ("under another folder", f"{PROG} {name} --data-home /tmp/share"),
            ],
        )
        p.set_defaults(handler=handler)
        p.add_argument(
            "--data-home", type=Path, metavar="DIR", help="write under DIR instead of $XDG_DATA_HOME (~/.local/share)"
        )


def _files(args: argparse.Namespace) -> DesktopFiles:
    return DesktopFiles(args.data_home.resolve() if args.data_home else data_home())


def cmd_install(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    files = _files(args)
    argv = launcher_argv()
    try:
        written = install(files, argv)
    except DesktopError as exc:
        print(terminal(f"install-desktop: {exc}"), file=err)
        return EXIT_USAGE
    for path in written:
        print(terminal(f"wrote {path}"), file=out)
    print(terminal(f"TowerDeck is in the application menu (Development); it runs: {' '.join(argv)}"), file=out)
    return EXIT_OK


def cmd_uninstall(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        removed = uninstall(_files(args))
    except DesktopError as exc:
        print(terminal(f"uninstall-desktop: {exc}"), file=err)
        return EXIT_USAGE
    for path in removed:
        print(terminal(f"removed {path}"), file=out)
    if not removed:
        print(terminal(f"nothing to remove: no TowerDeck entry under {_files(args).data_home}"), file=out)
    return EXIT_OK
