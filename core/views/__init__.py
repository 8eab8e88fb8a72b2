"""Qt-free view models both the CLI and the window show: ``overview`` (a run at a glance),
``gpu_tiles``, ``spread`` (the workers' spread), ``series`` and ``curves`` (bounded series, EMA),
``series_bulk``, ``runs_table`` (the runs list's columns), ``slurm_text``; and the window's tabs'
models, which the tabs own and draw: ``training`` (``TrainingFigures``), ``gpu_figures``
(``GpuFigures``), ``logs`` (the output kept per role), ``placement`` (the op table),
``checkpoints`` (``CheckpointFigures``: the list and the step-axis markers).
"""
