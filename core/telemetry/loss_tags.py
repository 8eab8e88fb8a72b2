"""Which TensorBoard scalar tags are a loss: the one rule the role view, the runs index and the
window's training plot share. Tags are matched case-insensitively (``Loss``, ``Train/Loss``)."""

from __future__ import annotations

from collections.abc import Iterable

# In the order a role's loss is taken from when it logs several (the first is preferred).
LOSS_TAGS = ("loss", "epoch_loss", "batch_loss", "train/loss", "training/loss", "cost")


def is_loss_tag(tag: str) -> bool:
    """Whether a scalar with this tag is the trainer's loss."""
    return tag.lower() in LOSS_TAGS


def loss_tags_in(tags: Iterable[str]) -> list[str]:
    """The loss tags among ``tags``, the preferred first (the order of :data:`LOSS_TAGS`)."""
    return sorted((tag for tag in tags if is_loss_tag(tag)), key=lambda tag: LOSS_TAGS.index(tag.lower()))
