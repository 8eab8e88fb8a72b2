"""The main window and what belongs to it alone.

- ``app``: start-up, ``python main.py [FILE] [--demo] ...``
- ``main_window``: the window: it builds its parts and passes between them
- ``run_wiring``: ``RunBinding``: which run is shown; launch, open, attach and close off the GUI thread; users' commands
- ``frame``: ``FramePump``: each frame's redraw
- ``actions``: ``WindowActions``: its menus and toolbar
- ``host_check``: the hosts' pre-flight
- ``preflight``: the pre-flight table
- ``collector``: Python's GC on the GUI thread only
- ``settings``: where the window keeps its layout, last cluster and recent runs
- ``dialogs``: questions the window asks
- ``tensorboard_action``: *File > Open in TensorBoard*
- ``exporting``: *File > Export plot* and *Export run figures as CSV*
- ``plot_render``: a plot drawn for a report: its own size, its key beside the data, PNG or SVG
- ``export_dialog``: *Export plot*'s questions: folder, format, size, one image or a file per plot
- ``profile_action``: *Role > Profile*
- ``why_action``: *Role > Why is this worker slow?*
- ``runs_install``: the Runs page as a page of the window
- ``hosts``: what the add-ons use of the window, as Protocols
- ``about``: *Help > About* and the window's icon
- ``desktop_notify``: desktop notifications while the window is not the active one
"""
