"""Notifications: a run's few events a person wants to hear about (finished, a role failed for good,
stuck or stalled, a host or Slurm job lost), turned into one JSON object each and handed to the
user's own command (``[notify]`` in the cluster file).

- ``events``: which controller events are notifications, and their JSON (:func:`classify`)
- ``notifier``: :class:`Notifier`, the thread that runs the command (timeout, rate limit, reports)
- ``reaper``: the small program the command runs under, which ends whatever the command started

The ``[notify]`` table itself is part of the cluster model: :mod:`core.cluster.notify_table`.

TowerDeck opens no listener and makes no network call for this: the command does what it likes.
"""

from __future__ import annotations

from core.notify.events import Notification, classify
from core.notify.notifier import Notifier

__all__ = [
    "Notification",
    "Notifier",
    "classify",
]
