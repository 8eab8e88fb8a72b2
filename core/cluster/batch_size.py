"""A role's batch size, where its command says it: ``--batch_size=N``, ``--batch_size N`` (or
``--batch-size``), the flag TensorFlow's examples and the bundled trainers take. Examples per second
are shown only where it is known (:mod:`core.views.rates`); a trainer that reads its batch size from
elsewhere shows batches and steps per second only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from core.cluster.spec import ClusterSpec

__all__ = ["FLAGS", "batch_size_of", "batch_sizes"]

FLAGS = ("--batch_size", "--batch-size")


def batch_size_of(command: Sequence[str]) -> int | None:
    """The batch size ``command`` passes its trainer (the last one given wins, as argparse does);
    None when it passes none, or one that is not a positive whole number."""
    found: int | None = None
    args = list(command)
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name not in FLAGS:
            continue
        if not eq:
            value = args[i + 1] if i + 1 < len(args) else ""
        found = int(value) if value.isdigit() and int(value) > 0 else None
    return found


def batch_sizes(spec: ClusterSpec) -> Mapping[str, int | None]:
    """Each role's batch size, from its own command or the cluster's."""
    return {t.role_id: batch_size_of(spec.command_for(t)) for t in spec.planned_tasks()}
