"""TensorFlow profiles of a run's roles (``ctl RUN profile``, the window's *Profile*), and why a
worker is slow (``ctl RUN why``, the window's *Why*).

- ``capture``: capturing the roles of a live run into ``RUN/profiles/<timestamp>/``
- ``remote``: a role on another host, traced by its agent, its files brought back
- ``env``: the separate profiler environment (``.venv-prof``)
- ``xprof_worker``: runs inside that environment: xprof's conversions, in a process of their own
- ``summary``: what a captured profile says, per role and side by side
- ``breakdown``: a capture's one breakdown, computed once and kept with it, shown by every view
- ``files``: a capture's files: written whole, ``profile.json`` read back with checks
- ``tensorboard``: a run's profiles in TensorBoard's Profile tab
- ``why``: the rules that name why the straggler is slow, from typed facts
- ``why_gpus``: the workers' GPUs while asked (through preflight's look at a host's GPUs)
- ``why_record``: the verdict kept with its capture (``why.json``)
- ``why_run``: why, asked of a running launch: the steps the CLI and the window share
"""
