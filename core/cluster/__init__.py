"""The cluster model: what a cluster file says and how it is read, checked and written.

The bottom of core/ but for the agent and telemetry: it imports neither the run, the diagnosis
nor any transport.

- ``spec/``: the frozen model, parsing with precise problems, the one writer
- ``problems``: a problem names its line and how to fix it
- ``locality``: is an address this machine
- ``render``: a task's command line and environment, in its launch style
- ``arglimits``: what exec lets a role be given (ARG_MAX)
- ``roles``: which role is the chief, which roles train
- ``batch_size``: a role's batch size, where its command says it (for examples/s)
- ``hyperparams``: a run's hyperparameters: its command's flags and its env values (runs list, compare)
- ``stuck_options``: the ``[stuck]``-related keys and their pure rules
- ``recovery_table``: the ``[recovery]`` table, and the pure rule of what a recovery restarts
- ``slurm_table``: the ``[slurm]`` table
- ``notify_table``: the ``[notify]`` table
- ``pasted``: command lines and TF_CONFIG pasted into the editor or ``import``
- ``tfjob``: export to Kubeflow's TFJob
- ``demo``: the bundled demo cluster
"""
