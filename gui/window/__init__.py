"""The main window and what belongs to it alone: ``app`` (start-up), ``main_window`` (its layout),
``run_wiring`` (launch, open, attach, pre-flight, commands), ``frame`` (each frame's redraw), ``actions``
(its menus and toolbar), ``collector`` (Python's GC on the GUI thread only), ``settings``,
``dialogs``, ``preflight`` (the pre-flight table), ``tensorboard_action``, ``exporting`` (plots and
CSV), ``profile_action``, ``runs_install`` (the Runs page as a page), ``hosts`` (what the add-ons
need of the window, as Protocols), ``desktop_notify``.
"""
