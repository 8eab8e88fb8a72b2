"""Before a launch.

- ``checks``: this machine: commands, working directory, ports
- ``runner``: every host's probe through the agent, off the caller's thread, cancellable
- ``gpus``: each host's GPUs and who uses them
"""
