"""A live or past run in the window.

- ``overview``: one tile per role, hosts as boxes; past 256 roles a tile per host
- ``gpu_grid``: one small tile per GPU, grouped by host
- ``gpu_host_grid``: one tile per host past 16 hosts or 128 GPUs, drilling down to its GPUs
- ``roles``: the roles table and the banner above it
- ``banner``: the banner's lines, one per role in trouble, with *Show log* for a role that died
- ``roles_model``: the roles table's model: grouped, filtered, sorted, updated in place
- ``recovery_banner``: the cluster's recovery, in one line above the run
- ``tabs/``: training curves, GPUs, logs, placement, spread, profile
"""
