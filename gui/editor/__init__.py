"""The cluster editor: every field of a cluster file in a form, checked as the user types.

What a form value means, and every message about it, is :mod:`core.cluster.spec`'s.

- ``widget``: ``ClusterEditor``, what the main window embeds
- ``cluster``: the form: cluster-wide fields, one tab per job
- ``job``: one job's tab: tasks, GPUs, command override, env, restart policy
- ``fields``: small pieces: text <-> value, problem markers, the env table
- ``problems``: the list of problems under the form
- ``paste``: the dialog for a pasted command line or TF_CONFIG
- ``file_actions``: New, Open, Save, Save As, Paste, recent files; reads and writes off the GUI thread
- ``files``: the recent-files list, failures in a few words
- ``__main__``: ``python -m gui.editor [FILE] [--screenshot PNG]``: the editor alone
"""

from __future__ import annotations

from gui.editor.widget import ClusterEditor

__all__ = ["ClusterEditor"]
