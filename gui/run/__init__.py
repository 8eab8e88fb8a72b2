"""A live or past run in the window: ``overview`` (one tile per role), ``gpu_grid``, ``roles`` and
``roles_model`` (the roles table), and ``tabs/`` (training curves, GPUs, logs, placement, spread).
"""
