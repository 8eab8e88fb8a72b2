"""The headless core: everything TowerDeck does but draw, usable from the CLI, the tests and the
window alike. No Qt and no TensorFlow is imported here (tests/test_imports.py checks it); the
packages' layers, lowest first, are in docs/architecture.md.

- ``agent/``: the per-host agent that starts, watches and stops one host's roles
- ``textsafe``: outside text made safe for a terminal, a CSV cell, a shell line
- ``atomic``: a file replaced in one step (cluster files, profile summaries, the menu entry)
- ``telemetry/``: parsers of trainer output, TensorBoard event files
- ``cluster/``: the cluster model: cluster files read, checked, rendered and written
- ``diagnosis/``: why a role waits
- ``run/``: one run on disk and as events: states, journal, run directory, reading it back
- ``views/``: Qt-free view models that the CLI and the window both show
- ``remote/``: reaching a host's agent: local child, relay, SSH
- ``slurm/``: one Slurm allocation per run, an agent step per node
- ``preflight/``: checks before a launch, on every host
- ``notify/``: the events a person hears about, handed to the user's command
- ``profiling/``: TensorFlow profiles of a run's roles, and why a worker is slow
- ``controller/``: the one thread that owns a run
- ``install/``: TowerDeck as an installed program: its version and versions (About), its menu entry
- ``cli/``: ``python main.py SUBCOMMAND``
"""
