"""The main window and what belongs to it alone: ``app`` (start-up), ``main_window`` (the window: it
builds its parts and passes between them), ``run_wiring`` (``RunBinding``: which run is shown;
launch, open, attach and close off the GUI thread; users' commands), ``frame`` (``FramePump``: each
frame's redraw), ``actions`` (``WindowActions``: its menus and toolbar), ``host_check`` (the hosts'
pre-flight), ``collector`` (Python's GC on the GUI thread only), ``settings``, ``dialogs``,
``preflight`` (the pre-flight table), ``tensorboard_action``, ``exporting`` (plots and CSV),
``profile_action``, ``why_action``, ``runs_install`` (the Runs page as a page), ``hosts`` (what the
add-ons use of the window, as Protocols), ``desktop_notify``.
"""
