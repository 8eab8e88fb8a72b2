"""Qt-free view models both the CLI and the window show: ``overview`` (a run at a glance),
``gpu_tiles``, ``spread`` (the workers' spread), ``series`` and ``curves`` (bounded series, EMA),
``runs_table`` (the runs list's columns).
"""
