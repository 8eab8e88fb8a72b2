"""The cluster model: what a cluster file says and how it is read, checked and written.

``spec/`` (the frozen model, parsing with precise problems, the one writer), ``problems`` (a
problem names its line and fix), ``locality`` (is an address this machine), ``render`` (a task's
command line and environment), ``arglimits`` (what exec lets a role be given: ARG_MAX), ``roles`` (which role is the chief, which roles train),
``stuck_options``, ``slurm_table`` and ``notify_table`` (the ``[stuck]``-related keys,
``[slurm]`` and ``[notify]``), ``pasted`` (command lines pasted into the editor), ``tfjob``
(export to Kubeflow's TFJob), ``demo``. The bottom of core/ but for the agent and telemetry: it
imports neither the run, the diagnosis nor any transport.
"""
