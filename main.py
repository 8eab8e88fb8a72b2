#!/usr/bin/env python3
"""TowerDeck: launch and watch distributed TensorFlow clusters.

``python main.py`` opens the window; ``python main.py SUBCOMMAND`` runs the headless CLI
(``python main.py --help`` lists the subcommands).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

CLI_COMMANDS = {"validate", "render", "import", "launch", "runs", "ctl", "placement", "metrics", "demo-path"}


def main(argv: list[str]) -> int:
    if argv and (argv[0] in CLI_COMMANDS or argv[0] in ("-h", "--help")):
        from core.cli import main as cli_main

        return cli_main(argv)
    try:
        from gui.app import main as gui_main
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("gui"):
            raise
        # The window is not part of this checkout yet: run the demo headless instead.
        from core.cli import DEMO_CLUSTER
        from core.cli import main as cli_main

        print("TowerDeck's window is not built yet; running the demo cluster headless.", file=sys.stderr)
        if "--demo" not in argv:
            print("usage: python main.py --demo, or python main.py --help for the CLI", file=sys.stderr)
            return 2
        return cli_main(["launch", str(DEMO_CLUSTER)])
    return gui_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
