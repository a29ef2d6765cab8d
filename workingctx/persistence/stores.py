"""
The store protocol, light checkpoint descriptors, and the in-memory store.
"""

from __future__ import annotations

import builtins
import threading
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

from workingctx import _checks
from workingctx.checkpoint import Checkpoint
from workingctx.context import WorkingContext
from workingctx.exceptions import CheckpointError, HeadConflictError
from workingctx.frozen import FrozenDict
from workingctx.persistence.histories import ContextInfo, check_context_id, check_recorded, diverged, missing
from workingctx.persistence.listing import Listing

if TYPE_CHECKING:
    from workingctx.history import Entry

__all__ = ["CheckpointInfo", "CheckpointStore", "InMemoryStore"]


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


def _missing(checkpoint_id: object, where: str) -> CheckpointError:
    msg = f"no checkpoint {checkpoint_id!r} in {where}; list() shows the ids it holds"
    return CheckpointError(msg, path="$.id")


def _check_id(checkpoint_id: object) -> None:
    _checks.check_instance(checkpoint_id, "checkpoint_id", str, "a str", label="a checkpoint id", verb="is")
    if checkpoint_id and not _checks.holdable_name(checkpoint_id):
        _checks.check_name(checkpoint_id, "checkpoint_id", label="a checkpoint id", fix="pass the id of a checkpoint")


def _check_thread(thread: object, *, optional: bool = True) -> None:
    if thread is None and optional:
        return
    expected = "a non-empty str"
    if not isinstance(thread, str):
        raise _checks.wrong_type(thread, "thread", expected, label="a thread", verb="is named by")
    if not thread:
        raise _checks.wrong_value(thread, "thread", f"is named by {expected}", label="a thread")
    _checks.check_name(thread, "thread", label="a thread", fix="name the thread with text a store can hold")


def _head_allows(current: str | None, checkpoint: Checkpoint) -> bool:
    """
    Whether a thread whose head is *current* may move to *checkpoint*: a new
    thread, the checkpoint's parent, or the checkpoint itself (saved again).
    """
    return current is None or current in {checkpoint.parent, checkpoint.id}


def _head_conflict(thread: str, checkpoint: Checkpoint, actual: str | None) -> HeadConflictError:
    msg = (
        f"cannot save checkpoint {checkpoint.id!r} to thread {thread!r}: its head is {actual!r}, not the "
        f"checkpoint's parent {checkpoint.parent!r} (another writer saved first); load the head, continue "
        "from it and save again. Nothing was written"
    )
    return HeadConflictError(msg, thread=thread, expected=checkpoint.parent, actual=actual)


def _check_checkpoint(checkpoint: object) -> None:
    _checks.check_instance(
        checkpoint,
        "checkpoint",
        Checkpoint,
        "a Checkpoint",
        label="save",
        verb="takes",
        fix="make one with Checkpoint.capture(ctx)",
    )


class InMemoryStore:
    """
    A store in this process's memory: for tests, and for runs that need no durability.

    Checkpoints are values, so the store keeps them as they are: loading one
    gives the very checkpoint that was saved. Safe to share between threads.

    >>> from workingctx import Checkpoint, InMemoryStore, Message, WorkingContext
    >>> store = InMemoryStore()
    >>> ctx = WorkingContext().append(Message("user", "hello"))
    >>> first = store.save(Checkpoint.capture(ctx))
    >>> second = store.save(Checkpoint.capture(ctx.append(Message("assistant", "hi")), parent=first))
    >>> [info.message_count for info in store.lineage(second)]
    [1, 2]
    """

    def __init__(self) -> None:
        self._checkpoints: dict[str, Checkpoint] = {}
        self._contexts: dict[str, tuple[tuple[Entry, ...], ContextInfo]] = {}
        self._heads: dict[str, str] = {}
        self._lock = threading.Lock()

    def save(self, checkpoint: Checkpoint, *, thread: str | None = None) -> str:
        """
        Keep *checkpoint* (replacing one with the same id) and return its id;
        with *thread*, also move that thread's head to it.

        Raises:
            TypeError: *checkpoint* is not a :class:`Checkpoint`, or *thread* not a str.
            HeadConflictError: The thread's head is not the checkpoint's parent.
        """
        _check_checkpoint(checkpoint)
        _check_thread(thread)
        with self._lock:
            if thread is not None:
                current = self._heads.get(thread)
                if not _head_allows(current, checkpoint):
                    raise _head_conflict(thread, checkpoint, current)
                self._heads[thread] = checkpoint.id
            self._checkpoints.pop(checkpoint.id, None)  # a replaced checkpoint counts as new in list()
            self._checkpoints[checkpoint.id] = checkpoint
        return checkpoint.id

    def load(self, checkpoint_id: str) -> Checkpoint:
        """
        The checkpoint saved under *checkpoint_id*.

        Raises:
            CheckpointError: No checkpoint has that id.
        """
        _check_id(checkpoint_id)
        with self._lock:
            found = self._checkpoints.get(checkpoint_id)
        if found is None:
            raise _missing(checkpoint_id, "this InMemoryStore")
        return found

    def list(self) -> Listing[CheckpointInfo]:
        """
        A descriptor of every checkpoint, oldest first (by creation time, then
        by the order they were saved in). Checkpoints in memory are values,
        never damaged: the listing's ``damaged`` is always empty.
        """
        with self._lock:
            held = list(self._checkpoints.values())
        order = {checkpoint.id: position for position, checkpoint in enumerate(held)}
        held.sort(key=lambda checkpoint: (checkpoint.created_at, order[checkpoint.id]))
        return Listing(CheckpointInfo.of(checkpoint) for checkpoint in held)

    def head(self, thread: str) -> str | None:
        """
        The id of *thread*'s latest checkpoint, or None.
        """
        _check_thread(thread, optional=False)
        with self._lock:
            return self._heads.get(thread)

    def delete(self, checkpoint_id: str) -> None:
        """
        Remove a checkpoint. Its children stay; their lineage then starts after
        it. A thread whose head it was goes back to its parent (or ends, when
        the parent is not in the store).

        Raises:
            CheckpointError: No checkpoint has that id.
        """
        _check_id(checkpoint_id)
        with self._lock:
            removed = self._checkpoints.pop(checkpoint_id, None)
            if removed is None:
                raise _missing(checkpoint_id, "this InMemoryStore")
            for thread in [name for name, head in self._heads.items() if head == checkpoint_id]:
                if removed.parent is not None and removed.parent in self._checkpoints:
                    self._heads[thread] = removed.parent
                else:
                    del self._heads[thread]

    def lineage(self, checkpoint_id: str) -> Listing[CheckpointInfo]:
        """
        The checkpoints from the root to *checkpoint_id*, itself included, oldest first.

        Raises:
            CheckpointError: No checkpoint has that id.
        """
        _check_id(checkpoint_id)
        with self._lock:
            chain: list[Checkpoint] = []
            seen: set[str] = set()
            current: str | None = checkpoint_id
            while current is not None and current not in seen and current in self._checkpoints:
                seen.add(current)
                checkpoint = self._checkpoints[current]
                chain.append(checkpoint)
                current = checkpoint.parent
        if not chain:
            raise _missing(checkpoint_id, "this InMemoryStore")
        return Listing(CheckpointInfo.of(checkpoint) for checkpoint in reversed(chain))

    # -- recorded contexts ------------------------------------------------------------

    def save_context(self, ctx: WorkingContext) -> str:
        """
        Keep a recorded context as its history (the entries are shared, never
        copied), under its id, and return the id.

        Raises:
            TypeError: *ctx* is not a recorded context.
            CheckpointError: The history saved under that id is not the start of
                this one (another copy of the context went its own way).
        """
        history = check_recorded(ctx)
        info = ContextInfo.of(ctx)
        with self._lock:
            saved = self._contexts.get(info.id)
            if saved is not None:
                before = saved[0]
                if len(before) > len(history) or before[-1] != history[len(before) - 1]:
                    raise diverged(info.id, "this InMemoryStore")
            self._contexts[info.id] = (history, info)
        return info.id

    def load_context(self, context_id: str) -> WorkingContext:
        """
        Replay the history saved under *context_id*: a new live context, equal to the one saved.

        Raises:
            CheckpointError: No context has that id.
        """
        check_context_id(context_id)
        with self._lock:
            saved = self._contexts.get(context_id)
        if saved is None:
            raise missing(context_id, "this InMemoryStore")
        return WorkingContext.replay(saved[0])

    def list_contexts(self) -> Listing[ContextInfo]:
        """
        A descriptor of every saved context, oldest first, without replaying any
        (the listing's ``damaged`` is always empty).
        """
        with self._lock:
            infos = [info for _, info in self._contexts.values()]
        return Listing(sorted(infos, key=lambda info: (info.created_at, info.id)))

    def delete_context(self, context_id: str) -> None:
        """
        Remove a saved context.

        Raises:
            CheckpointError: No context has that id.
        """
        check_context_id(context_id)
        with self._lock:
            if self._contexts.pop(context_id, None) is None:
                raise missing(context_id, "this InMemoryStore")

    def __len__(self) -> int:
        return len(self._checkpoints)

    def __contains__(self, checkpoint_id: object) -> bool:
        return checkpoint_id in self._checkpoints

    def __repr__(self) -> str:
        return f"<InMemoryStore checkpoints={len(self._checkpoints)} contexts={len(self._contexts)}>"
