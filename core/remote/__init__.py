"""Reaching a host's agent: ``transport`` (the agent as a local child, the event lines),
``link`` (an agent behind a relay process that reconnects and reattaches: local socket, SSH, Slurm
step), ``ssh`` (argv, host-key checking on, failures in words).
"""
