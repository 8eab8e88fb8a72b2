"""The headless CLI, ``python main.py SUBCOMMAND``.

- ``main``: the parser and the small commands (validate, import, export --tfjob, ...)
- ``helptree``: the subcommands as a tree, each with its own help and examples; one-line usage errors
- ``window_args``: the window's options (``--demo``, ``--run``, ``--tab`` ...), parsed by gui/window/app.py
  and listed by ``python main.py --help``
- ``launch``: ``launch`` and ``attach``, with the printer thread that follows a run
- ``ctl``: ``ctl RUN ACTION``, a subcommand per action: control a running launch through its control
  socket, print its status
- ``profile``: ``ctl RUN profile`` and ``ctl RUN why``
- ``chaos``: ``ctl RUN chaos``: kill random roles one at a time, time the cluster's recovery
- ``runs``: ``runs`` (the runs browser in a terminal) and ``runs compare``
- ``tensorboard``: ``runs tensorboard RUN``
- ``export``: ``export RUN --csv DIR``
- ``gpus``: ``gpus``: which GPUs are free, here or on a cluster's hosts
- ``exits``: exit codes, a cluster file's problems printed, resolving a run by name, small refusals
- ``desktop``: ``install-desktop`` and ``uninstall-desktop``: TowerDeck in the application menu
- ``interrupts``: Ctrl-C, SIGTERM and SIGHUP while a command waits
- ``progname``: the command to print in help: ``towerdeck`` installed, ``python main.py`` from a checkout
"""
