"""Incremental reading of TensorBoard event files (see :mod:`core.agent.tbtail`).

One implementation serves both sides: the agent tails a role's TensorBoard directory on its own
host and sends ``scalars`` events, and the controller can use the same :class:`ScalarTailer` on
this machine. Re-exported here so that ``core.telemetry.tbevents`` keeps working.
"""

from __future__ import annotations

from core.agent.tbtail import ScalarPoint, ScalarTailer, tensorboard_available

__all__ = ["ScalarPoint", "ScalarTailer", "tensorboard_available"]
