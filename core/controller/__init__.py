"""The controller: one thread that owns a run's roles and decides; its parts are collaborators with
state of their own, wired by the controller, which only dispatches.

- ``controller``: :class:`~core.controller.controller.Controller`: the queues, the loop, dispatch
- ``lanes``: what waits for the controller's thread: lifecycle news first, each role's output in a lane of its own
- ``roles``: the role state machine: named transitions, the status snapshot
- ``supervisor``: the restart policy applied, the tick's deadlines, the cluster's phase
- ``supervised``: one role's record as supervision keeps it
- ``policy``: the pure restart and completion rules
- ``crashloop``: a role whose attempts keep failing, shown as crash-looping
- ``recovery``: recovery by strategy: what the training's strategy needs restarted, together
- ``ops``: start, stop, kill, signal a role through its agent
- ``commands``: the typed commands users send
- ``connections``: one transport per host
- ``reattach``: taking over a run's agents again
- ``output_intake``: output lines, metrics, coalescing a flood
- ``intake``: samples, scalars, log-write trouble
- ``stalls``: no new step
- ``stragglers``: straggler flags raised and cleared on the tick
- ``slurm``: a run held by a Slurm allocation
- ``session``: a launch or attach (run directory, lock, control server, notifier); the :class:`RunSource` protocol
- ``control_server``: answers the control socket
- ``child_launch``: a launch run by a child process (``launch --quiet``) that the window follows, for large clusters
- ``checkpoints``: the checkpoint directory watched on its own thread; what changed published, which checkpoint a recovery restored
"""
