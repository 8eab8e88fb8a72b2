"""The headless CLI, ``python main.py SUBCOMMAND``: ``main`` (the parser and the small commands),
``launch`` (launch and attach with a printer thread), ``runs``, ``export``, ``gpus``,
``tensorboard``, ``profile``, ``exits`` (exit codes, resolving a run by name), ``interrupts`` (Ctrl-C,
SIGTERM and SIGHUP while a command waits).
"""
