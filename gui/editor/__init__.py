"""The cluster editor: every field of a cluster file in a form, checked as the user types.

``ClusterEditor`` (``widget``) is what the main window embeds; its parts are the form
(``cluster``, one ``job`` tab per job, ``fields``), the ``problems`` list, the ``paste`` dialog and
the recent ``files``. ``python -m gui.editor [FILE] [--screenshot PNG]`` (``__main__``) shows it
alone. What a form value means, and every message about it, is :mod:`core.cluster.spec`'s.
"""

from __future__ import annotations

from gui.editor.widget import ClusterEditor

__all__ = ["ClusterEditor"]
