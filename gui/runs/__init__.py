"""Past runs.

- ``runs_page``: the browser, as a widget (the window installs it: :mod:`gui.window.runs_install`)
- ``compare``: runs' curves overlaid above the table of what differs
"""
