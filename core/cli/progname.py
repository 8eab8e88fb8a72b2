"""How the user started TowerDeck, for the usage lines and examples that help prints.

From a checkout it is ``python main.py``; installed (pipx, or a wheel from ``make dist``) it is the
``towerdeck`` command, and help that told that user to type ``python main.py`` would send them
looking for a file they do not have.
"""

from __future__ import annotations

import os
import sys

__all__ = ["PROG", "invoked_as"]


def invoked_as(argv0: str) -> str:
    """The command to print for a process started as ``argv0``."""
    return "towerdeck" if os.path.basename(argv0) == "towerdeck" else "python main.py"


PROG = invoked_as(sys.argv[0] if sys.argv else "")
