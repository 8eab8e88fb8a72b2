"""Qt-free view models both the CLI and the window show, and the window's tabs' models, which
the tabs own and draw.

- ``overview``: a run at a glance: hosts, their roles, states, batches/s
- ``conditions``: a role's trouble in words, the same everywhere it is shown
- ``empty``: what a view with nothing to show says instead, and why
- ``gpu_tiles``: many GPUs at a glance, tiles with sparklines
- ``gpu_hosts``: a host's GPUs summed up in one tile, past 16 hosts or 128 GPUs
- ``spread``: the workers' spread instead of one line each
- ``series``: bounded multi-resolution time series
- ``series_bulk``: the series' bucket arithmetic in NumPy, for bulk extends
- ``curves``: a curve's segments and their EMA smoothing, as arrays
- ``rates``: the run's global steps/s, each worker's batches/s and examples/s: one definition
- ``runs_table``: the runs list's columns and one run's cells
- ``runs_select``: ordering and narrowing the runs list
- ``compare_table``: runs side by side, as ``runs compare`` prints them and the window shows them
- ``slurm_text``: a Slurm run's record in words, for the CLI and the window
- ``training``: the Training tab's figures (``TrainingFigures``)
- ``gpu_figures``: the GPUs tab's figures (``GpuFigures``)
- ``logs``: the output kept per role, as a terminal shows it
- ``placement``: the Placement tab's op table
- ``checkpoints``: the Training tab's checkpoints: the list and the step-axis marks (``CheckpointFigures``)
"""
