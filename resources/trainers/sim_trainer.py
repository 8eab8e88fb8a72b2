"""The command of a simulated role: only a simulating TowerDeck agent runs it, and it runs nothing.

With ``TOWERDECK_SIMULATE=1`` in the controller's environment (or an agent started with
``--simulate``), each local agent simulates its roles instead of starting them: a role whose
command is ``["{python}", "-u", "sim_trainer.py", ...flags]`` prints step lines at ``--rate_hz``
and plays the fault its flags name, all inside the agent (core/agent/simulate.py). This file
exists so that a cluster file naming it passes the pre-flight; docs/guide/simulation.md has the
flags. Run for real, it says so and exits 2: a simulated figure must never pass for a real one.
"""

from __future__ import annotations

import sys


def main() -> int:
    print(
        "sim_trainer.py only runs inside a simulating TowerDeck agent: launch with TOWERDECK_SIMULATE=1 "
        "(see docs/guide/simulation.md)",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
