"""The main window and what belongs to it alone: ``app`` (start-up), ``main_window`` (its layout),
``run_wiring`` (launch, open, attach, pre-flight, commands), ``frame`` (each frame's redraw), ``actions``
(its menus and toolbar), ``collector`` (Python's GC on the GUI thread only), ``settings``,
``dialogs``, ``preflight`` (the pre-flight table), ``tensorboard_action``, ``desktop_notify``.
"""
