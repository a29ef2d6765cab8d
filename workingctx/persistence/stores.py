"""
The store protocol, and the light descriptors of checkpoints its listings give.
"""

from __future__ import annotations

import builtins
from datetime import datetime
from typing import Protocol, runtime_checkable

import attrs

from workingctx.checkpoint import Checkpoint
from workingctx.frozen import FrozenDict

__all__ = ["CheckpointInfo", "CheckpointStore"]


@attrs.frozen
class CheckpointInfo:
    """
    What :meth:`CheckpointStore.list` and :meth:`CheckpointStore.lineage`
    return for each checkpoint: enough to choose one, without loading its snapshot.

    Attributes:
        id: The checkpoint's id; :meth:`CheckpointStore.load` it for the whole checkpoint.
        parent: The id of the checkpoint it continues, or None.
        created_at: When it was taken.
        message_count: How many messages its tail holds.
        digest: The stable digest of its snapshot.
        metadata: Its metadata.
    """

    id: str
    parent: str | None
    created_at: datetime
    message_count: int
    digest: str
    metadata: FrozenDict = attrs.field(factory=FrozenDict)

    @classmethod
    def of(cls, checkpoint: Checkpoint) -> CheckpointInfo:
        """
        The descriptor of a checkpoint at hand.
        """
        return cls(
            id=checkpoint.id,
            parent=checkpoint.parent,
            created_at=checkpoint.created_at,
            message_count=len(checkpoint.snapshot.messages),
            digest=checkpoint.snapshot.digest(),
            metadata=checkpoint.metadata,
        )


@runtime_checkable
class CheckpointStore(Protocol):
    """
    Where checkpoints are kept: :class:`InMemoryStore`, :class:`SQLiteStore`, or your own.

    Every method raises :class:`~workingctx.exceptions.CheckpointError` when it
    cannot do its job (an unknown id, a damaged record), and then leaves the
    store as it was.

    A *thread* is a named line of checkpoints with a *head*, its latest one.
    ``save(checkpoint, thread=name)`` moves the head to *checkpoint* only if
    the head is still ``checkpoint.parent`` (compare-and-set), so writers
    sharing a thread, in any process on any machine, never lose each other's
    checkpoints: the one that lost the race gets
    :class:`~workingctx.exceptions.HeadConflictError`, continues from the new
    head and saves again.
    """

    def save(self, checkpoint: Checkpoint, *, thread: str | None = None) -> str:
        """
        Keep *checkpoint* (replacing one with the same id) and return its id;
        with *thread*, also move that thread's head to it (see the class).
        """
        ...

    def head(self, thread: str) -> str | None:
        """
        The id of *thread*'s latest checkpoint, or None for a thread never saved to.
        """
        ...

    def load(self, checkpoint_id: str) -> Checkpoint:
        """
        The checkpoint saved under *checkpoint_id*, equal to the one saved.
        """
        ...

    def list(self) -> list[CheckpointInfo]:
        """
        A descriptor of every checkpoint, oldest first, without loading snapshots.

        One damaged record never hides the others: the stores workingctx
        ships return a :class:`~workingctx.persistence.Listing`, which leaves
        it out and names it in ``damaged``.
        """
        ...

    def delete(self, checkpoint_id: str) -> None:
        """
        Remove the checkpoint saved under *checkpoint_id* (its children stay;
        a thread whose head it was goes back to its parent).
        """
        ...

    def lineage(self, checkpoint_id: str) -> builtins.list[CheckpointInfo]:
        """
        The checkpoints from the root to *checkpoint_id*, itself included,
        oldest first, following parent ids while the parent is in the store
        (and can be read: a damaged ancestor ends it, named in the listing's ``damaged``).
        """
        ...
