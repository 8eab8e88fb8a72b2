"""The main window and what belongs to it alone: ``app`` (start-up), ``main_window``, ``actions``
(its menus and toolbar), ``collector`` (Python's GC on the GUI thread only), ``settings``,
``dialogs``, ``preflight`` (the pre-flight table), ``tensorboard_action``, ``desktop_notify``.
"""
