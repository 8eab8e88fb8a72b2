#!/usr/bin/env python3
"""TowerDeck: launch and watch distributed TensorFlow clusters.

``python main.py`` opens the window; ``python main.py SUBCOMMAND`` runs the headless CLI
(``python main.py --help`` lists the subcommands). Installed (``pipx install .``, or a wheel from
``make dist``), this file is ``towerdeck/main.py`` and the ``towerdeck`` command calls :func:`run`.
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

# The folder that holds core/ and gui/: the checkout, or towerdeck/ in site-packages (setup.py).
sys.path.insert(0, str(Path(__file__).resolve().parent))

CLI_COMMANDS = {
    "validate",
    "render",
    "import",
    "launch",
    "runs",
    "ctl",
    "placement",
    "metrics",
    "demo-path",
    "attach",
    "export",
    "gpus",
    "profile-summary",
    "install-desktop",
    "uninstall-desktop",
}


def mistyped_command(argv: list[str]) -> str | None:
    """The subcommand a first word that is neither one nor a file was meant to be (``valdate``), or
    None: a window's FILE has a dot or a slash, and is opened (or refused) by the window."""
    first = argv[0] if argv else ""
    if (
        not first
        or first in CLI_COMMANDS
        or first.startswith("-")
        or "." in first
        or "/" in first
        or Path(first).exists()
    ):
        return None
    close = difflib.get_close_matches(first, sorted(CLI_COMMANDS), n=1)
    return close[0] if close else None


def main(argv: list[str]) -> int:
    if argv[:1] == ["--version"]:  # as git and pip answer it, without loading Qt or the CLI
        from core.install.about import towerdeck_version

        print(f"towerdeck {towerdeck_version()}")
        return 0
    if meant := mistyped_command(argv):
        print(
            f"python main.py: {argv[0]!r} is not a subcommand; did you mean `python main.py {meant}`? "
            "(`python main.py --help` lists them)",
            file=sys.stderr,
        )
        return 2
    # --help among the window's options (`--demo --help`) is the whole help: the window's options
    # are listed there, beside the subcommands.
    asks_help = not (argv and argv[0] in CLI_COMMANDS) and ("-h" in argv or "--help" in argv)
    if asks_help or (argv and argv[0] in CLI_COMMANDS):
        from core.cli.main import main as cli_main

        return cli_main(["--help"] if asks_help else argv)
    from gui.window.app import main as gui_main

    return gui_main(argv)


def run() -> int:
    """The ``towerdeck`` command's entry point (pyproject.toml, [project.scripts])."""
    return main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
