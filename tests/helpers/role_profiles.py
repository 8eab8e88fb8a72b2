"""Profiles of a role built by hand (:class:`RoleProfile`) for the rules that explain a slow worker,
and the verdict those rules give read back."""

from __future__ import annotations

import re

from core.profiling.summary import OpTime, RoleProfile

# The part of a step outside TensorFlow's ops, as core/profiling/why.py (OTHER_PART) names it.
OTHER = "other: Python, I/O, waiting"


def profile(role: str, step_ms: float, steps: int = 10, ops: tuple[OpTime, ...] = (), **parts: float) -> RoleProfile:
    """``steps`` steps of ``step_ms`` each, split as ``parts`` says (input, host, device, comm, other)."""
    names = {"input": "input", "host": "host compute", "device": "device compute", "comm": "communication"}
    breakdown = {names.get(k, OTHER): v for k, v in parts.items()}
    return RoleProfile(role, (step_ms,) * steps, breakdown, top_ops=ops)


def why_verdict(text: str) -> tuple[int, int]:
    """The straggler's and the median worker's input shares from a verdict naming input for worker:1."""
    m = re.fullmatch(r"worker:1 spends (\d+)% of each step in input \(median worker worker:0: (\d+)%\)", text)
    assert m, text
    return int(m[1]), int(m[2])
