#!/usr/bin/env python3
"""TowerDeck: launch and watch distributed TensorFlow clusters.

``python main.py`` opens the window; ``python main.py SUBCOMMAND`` runs the headless CLI
(``python main.py --help`` lists the subcommands). Installed (``pipx install .``, or a wheel from
``make dist``), this file is ``towerdeck/main.py`` and the ``towerdeck`` command calls :func:`run`.
"""

from __future__ import annotations

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


def main(argv: list[str]) -> int:
    if argv[:1] == ["--version"]:  # as git and pip answer it, without loading Qt or the CLI
        from core.install.about import towerdeck_version

        print(f"towerdeck {towerdeck_version()}")
        return 0
    if argv and (argv[0] in CLI_COMMANDS or argv[0] in ("-h", "--help")):
        from core.cli.main import main as cli_main

        return cli_main(argv)
    from gui.window.app import main as gui_main

    return gui_main(argv)


def run() -> int:
    """The ``towerdeck`` command's entry point (pyproject.toml, [project.scripts])."""
    return main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
