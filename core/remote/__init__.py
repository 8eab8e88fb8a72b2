"""Reaching a host's agent.

- ``transport``: the agent as a local child, the event lines, the ``Transport`` protocol
- ``link``: an agent behind a relay process that reconnects and reattaches (local socket, SSH, Slurm step)
- ``endpoints``: the command lines that start an agent and reach it again
- ``ssh``: argv, host-key checking on, failures in words
- ``agent_requests``: requests to an agent that another thread waits for (profile, read_file)
"""
