"""TowerDeck's host agent: starts, watches and stops the roles of one host; JSON lines on stdio.

Standard library only (psutil, pynvml or $TOWERDECK_NVML_MODULE, and tensorboard are used when
importable), so that it runs on any host with a python 3. It is shipped as one zipapp built from
this package (:func:`artifact`), over SSH or locally; docs/agent-protocol.md is its protocol.

- ``protocol``: JSON-lines framing, command checks, the events built once (``hello``)
- ``processes``: a role's process tree: own session, token, subreaper, signals; /proc/PID/stat
- ``pump``: the per-role log pump (output to disk even when the disk is full)
- ``supervisor``: the Agent: obeys commands, supervises the roles, streams their output
- ``watch``: one tick of the agent: exits, output, stops escalated, samples
- ``sampling``: host, role and GPU (NVML) figures for the ``sample`` event
- ``gpuquery``: one look at NVML, for ``--gpus`` (``python main.py gpus``)
- ``tbtail``: TensorBoard event files read as they grow
- ``scalars``: the ``scalars`` events, one tailer per role's TensorBoard directory
- ``profile``: the ``profile`` and ``read_file`` ops: a role traced, its files read back in chunks
- ``tracer``: run with a role's own python to ask its TensorFlow server for a trace
- ``simulate``: roles simulated instead of forked (``TOWERDECK_SIMULATE``: tests and benchmarks)
- ``simlines``: what a simulated role prints (step, Keras, TF1 lines; placement; a traceback)
- ``serve``: serve/attach mode (an owner-only Unix socket that outlives the controller)
- ``probe``: the pre-flight checks, run on the host with the agent's python
- ``freeports``: ``--free-ports N``: ports chosen free on a Slurm node for counted tasks
- ``main``: the command line: plain, ``--serve``, ``--attach``, ``--probe``, ``--free-ports``, ``--gpus``
- ``artifact``: the zipapp, built in memory, byte for byte the same every time
- ``__main__``: ``python -m core.agent`` from a checkout, as the zipapp runs
"""

from __future__ import annotations

from .artifact import ARTIFACT_NAME, GPUS_MEMBER, PROBE_MEMBER, artifact, artifact_file, probe_source

__all__ = ["ARTIFACT_NAME", "GPUS_MEMBER", "PROBE_MEMBER", "artifact", "artifact_file", "probe_source"]
