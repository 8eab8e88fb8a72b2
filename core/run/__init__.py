"""One run, as the controller writes it and anyone reads it back.

- ``status``: role and cluster states, :class:`~core.run.status.RoleStatus`
- ``events``: the typed events every source publishes (:class:`~core.run.events.EventKind`, a payload class per kind, their JSON records)
- ``publish``: the one publish rule
- ``role_view``: the live view of a role the status is built from, and the status snapshot
- ``journal``: state-only events, JSON lines, read streaming
- ``compact``: the compact telemetry lines (key frames and deltas) and their one decoder
- ``rundir``: the run directory: layout, run.json, cluster.toml
- ``openfiles``: the run directory's hot files kept open, written unbuffered
- ``reader``: a past or live run read back
- ``skim``: a large telemetry file read at the resolution a view can show, tail first
- ``control``: the control socket's protocol and client
- ``inbox``: the lossless event inbox the window and the CLI drain
- ``lock``: one controller per run
- ``index``: the runs list, one cached summary per run (with each role's last 30 s of steps)
- ``compare``: the runs to compare, and their curves
- ``csv_export``: a run's figures as CSV files
- ``pids``: a stored pid is still the process it was
- ``leftover``: what of a run its launcher left still running: roles, agents
- ``tensorboard``: serving a run's TensorBoard
- ``children``: child processes that end with this one: ssh, GPU queries, TensorBoard, notify
- ``checkpoints``: where a run's checkpoints are (the [recovery] key, a role's --checkpoint_dir-style flag, a state file found) and what is there
"""
