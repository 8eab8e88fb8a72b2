"""Facts about a cluster's roles that both the stuck rules of the cluster file and the diagnosis
need: which role initialises the model, and which roles print training steps."""

from __future__ import annotations

from collections.abc import Iterable


def chief_of(roles: Iterable[str]) -> str | None:
    """The role that initialises the model: ``chief:0``, else ``worker:0`` (TensorFlow's rule)."""
    names = set(roles)
    for name in ("chief:0", "worker:0"):
        if name in names:
            return name
    return None


def expects_steps(strategy: str, job: str) -> bool:
    """Whether a role of ``job`` prints training steps under ``strategy`` (so a start with no step
    for long is worth flagging). ps tasks serve; ParameterServerStrategy's workers only serve."""
    if job in ("ps", "evaluator"):
        return False
    if strategy == "parameter_server":
        return job == "chief"
    return True
