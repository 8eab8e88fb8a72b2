"""The controller: one thread that owns a run's roles and decides.

``controller`` (:class:`~core.controller.controller.Controller`: the queue, the loop, the agents'
events), ``base`` (what the controller's parts share, declared once), ``lifecycle`` (role states,
launch, exit, the cluster's phase), ``commands`` (stop, kill, restart, signal), ``connections`` (the
hosts' agent links), ``slurm`` (a run held by a Slurm allocation), ``intake`` and ``output_intake``
(samples, metrics, stalls, output lines, diagnosis), ``supervised`` (one role's record), ``policy``
(the pure restart rules), ``session`` (a launch or attach: run directory, lock, control server,
notifier), ``control_server`` (answers the control socket).
"""
