"""Notifications: a run's few events a person wants to hear about (finished, a role failed for good,
stuck or stalled, a host or Slurm job lost), turned into one JSON object each and handed to the
user's own command (``[notify]`` in the cluster file).

- ``config``: the ``[notify]`` table (parse, check, write back);
- ``events``: which controller events are notifications, and their JSON (:func:`classify`);
- ``notifier``: :class:`Notifier`, the thread that runs the command (timeout, rate limit, reports).

TowerDeck opens no listener and makes no network call for this: the command does what it likes.
"""

from __future__ import annotations

from core.cluster.notify_table import NOTIFY_KEYS, NOTIFY_KINDS, NotifyConfig, notify_to_data, parse_notify
from core.notify.events import Notification, classify
from core.notify.notifier import Notifier

__all__ = [
    "NOTIFY_KEYS",
    "NOTIFY_KINDS",
    "Notification",
    "Notifier",
    "NotifyConfig",
    "classify",
    "notify_to_data",
    "parse_notify",
]
