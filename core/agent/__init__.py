"""TowerDeck's host agent: starts, watches and stops the roles of one host; JSON lines on stdio.

Standard library only (psutil, pynvml or $TOWERDECK_NVML_MODULE, and tensorboard are used when
importable), so that it runs on any host with a python 3. It is shipped as one zipapp built from
this package (:func:`artifact`), over SSH or locally; docs/agent-protocol.md is its protocol.

    protocol    JSON-lines framing, command checks, the events built once (``hello``)
    processes   a role's process tree: own session, token, subreaper, signals; /proc/PID/stat
    pump        the per-role log pump (output to disk even when the disk is full)
    supervisor  the Agent: commands; watch: the tick (exits, output, stops, samples)
    sampling    host, role and GPU (NVML) figures; gpuquery: NVML itself, ``--gpus`` (python main.py gpus)
    tbtail      TensorBoard event files read as they grow; scalars: the ``scalars`` events
    serve       serve/attach mode (an owner-only Unix socket that outlives the controller)
    probe       the pre-flight checks; main: the command line; artifact: the zipapp
    freeports   ``--free-ports N``: ports chosen free on a Slurm node for counted tasks
"""

from __future__ import annotations

from .artifact import ARTIFACT_NAME, GPUS_MEMBER, PROBE_MEMBER, artifact, artifact_file, probe_source

__all__ = ["ARTIFACT_NAME", "GPUS_MEMBER", "PROBE_MEMBER", "artifact", "artifact_file", "probe_source"]
