"""What tests share: every helper, fixture and helper program a test imports or runs lives here, and
a test module never imports another test module or a conftest (tests/test_imports.py checks both).

The checkout and its processes:

- ``project``: the checkout (``ROOT``), its example trainers (``TRAINERS``), ``run_cli``
- ``ports``: ports free on a loopback address now
- ``waits``: ``wait_for``, a condition polled under a deadline
- ``procs``: nothing left behind: no process, no listening port
- ``in_child``: a test's body in a child process under a deadline that kills it

Clusters and launches:

- ``clusters``: cluster files the tests write (between-graph, light trainer, "why", TensorBoard), two runs one flag apart
- ``cli_launch``: ``python main.py launch`` in the background (``Launch``, the ``launches`` fixture), a run's states, pids and journal records
- ``controllers``: a real controller started on a cluster file, its events kept
- ``cli_process``: the CLI under a hard limit (``Cli``), clusters of fault roles launched with it
- ``close_window``: the window as ``python main.py CLUSTER --launch`` runs it, closed with "stop" once every role runs
- ``window_launch``: the window as ``python main.py CLUSTER --launch`` runs it, left open; prints the run once every role runs (to be killed)
- ``agent_process``: the host agent as a child process, spoken to through its JSON-lines protocol
- ``remote_clusters``: cluster files whose roles run on other hosts over the test sshd
- ``ssh_server``: the test sshd as tests see it (``SshServer``), what a test left under its folder
- ``silent_ssh``: an "SSH server" that sends its greeting and then nothing
- ``slurm_cluster``: the test Slurm as tests see it (``SlurmCluster``), a cluster file launched through it
- ``run_copies``: many runs on disk copied from one finished run
- ``event_runs``: copies of a recorded run with a real TensorBoard event file, named as asked
- ``captures``: profile captures on disk, as ``ctl RUN profile`` writes them, from recorded files
- ``past_run``: a day-long finished run directory, generated
- ``compact_run``: a run directory's copy with its telemetry re-encoded compact (both formats of one run)
- ``tmpfs``: a real small file system to fill or make read-only (the ``small_disk`` fixture)

Programs the tests run as roles or commands:

- ``crasher``: a trainer that crashes a given number of starts
- ``stubborn``: a role that ignores SIGTERM and leaves children behind
- ``fault_role``: a light role that prints bad UTF-8, steps, floods or one long line
- ``flood_role``: a role that floods its output in one of several shapes
- ``notify_sink``: a user's notification command that appends what it reads to a file
- ``fake_nvml``: the double of NVML's call layer (the only double in the suite)
- ``fake_nvidia_smi``: ``nvidia-smi`` over the NVML double's state

Data and checks:

- ``events``: events as the journal keeps them, written by hand
- ``statuses``: role statuses written by hand (``role_status``, ``hosted_status``)
- ``metric_lines``: trainer output lines of every step/loss format TowerDeck parses
- ``metric_records``: metrics.jsonl records drawn by hypothesis, damaged ones too
- ``metrics_reference``: the metrics parser before its speed-up, kept as an oracle
- ``step_times``: N workers' step times binned as the Training tab bins them
- ``role_profiles``: a role's profile built by hand, and a "why" verdict read back
- ``typos``: a cluster file with six mistakes of six kinds, a missing script among them
- ``bad_input``: hypothesis strategies for bad cluster files, pasted command lines, TF_CONFIG
- ``textcheck``: no raw control character on a terminal, no formula in a CSV cell
- ``tfjob_rules``: what Kubernetes and the training operator would say of a TFJob manifest
- ``control_clients``: control-socket clients that misbehave on purpose

The window:

- ``widgets``: typing into a field, reading a role's cell of the roles table
- ``heartbeat``: proof that the GUI thread's event loop keeps turning
- ``gui_waits``: how long the GUI thread waited, and on what
- ``gcwatch``: which thread ran each garbage collection
"""
