"""Qt-free view models both the CLI and the window show: ``overview`` (a run at a glance),
``gpu_tiles``, ``spread`` (the workers' spread), ``series`` and ``curves`` (bounded series, EMA),
``series_bulk``, ``rates`` (the run's global steps/s, batches/s and examples/s: one definition),
``runs_table`` (the runs list's columns), ``runs_select`` (ordering and narrowing it),
``compare_table`` (runs side by side), ``conditions``, ``slurm_text``; and the window's tabs' models, which the tabs own and draw: ``training`` (``TrainingFigures``), ``gpu_figures``
(``GpuFigures``), ``logs`` (the output kept per role), ``placement`` (the op table).
"""
