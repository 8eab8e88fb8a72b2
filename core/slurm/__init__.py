"""Slurm: one allocation per run, one agent step per node (no Qt, no TensorFlow here).

- ``client``: Slurm's client commands with typed results and errors a user can act on
- ``allocation``: one run's allocation: submitted, watched, mapped onto the hosts, cancelled
- ``transport``: the per-node agent as one Slurm step
- ``counts``: counted tasks placed on an allocation: hosts from it, ports from its nodes
"""
