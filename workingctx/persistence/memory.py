"""
The store in this process's memory.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from workingctx.context import WorkingContext
from workingctx.persistence._engine import StoreEngine, head_allows, head_conflict
from workingctx.persistence.histories import ContextInfo, diverged, missing
from workingctx.persistence.listing import Listing
from workingctx.persistence.stores import CheckpointInfo

if TYPE_CHECKING:
    from workingctx.checkpoint import Checkpoint
    from workingctx.history import Entry

__all__ = ["InMemoryStore"]


class InMemoryStore(StoreEngine):
    """
    A store in this process's memory: for tests, and for runs that need no durability.

    Checkpoints are values, so the store keeps them as they are: loading one
    gives the very checkpoint that was saved, and nothing it holds is ever
    damaged (the ``damaged`` of its listings is always empty). Safe to share
    between threads.

    >>> from workingctx import Checkpoint, InMemoryStore, Message, WorkingContext
    >>> store = InMemoryStore()
    >>> ctx = WorkingContext().append(Message("user", "hello"))
    >>> first = store.save(Checkpoint.capture(ctx))
    >>> second = store.save(Checkpoint.capture(ctx.append(Message("assistant", "hi")), parent=first))
    >>> [info.message_count for info in store.lineage(second)]
    [1, 2]
    """

    _place = "this InMemoryStore"

    def __init__(self) -> None:
        self._checkpoints: dict[str, Checkpoint] = {}
        self._contexts: dict[str, tuple[tuple[Entry, ...], ContextInfo]] = {}
        self._heads: dict[str, str] = {}
        self._lock = threading.Lock()

    def _save(self, checkpoint: Checkpoint, thread: str | None) -> None:
        with self._lock:
            if thread is not None:
                current = self._heads.get(thread)
                if not head_allows(current, checkpoint):
                    raise head_conflict(thread, checkpoint, current)
                self._heads[thread] = checkpoint.id
            held = self._checkpoints.get(checkpoint.id)
            if held is not None and (held is checkpoint or held == checkpoint):
                return  # saving a checkpoint again is a no-op: it keeps its place in list()
            self._checkpoints.pop(checkpoint.id, None)  # a replaced checkpoint counts as new in list()
            self._checkpoints[checkpoint.id] = checkpoint

    def _load(self, checkpoint_id: str) -> Checkpoint:
        with self._lock:
            found = self._checkpoints.get(checkpoint_id)
        if found is None:
            raise self._missing(checkpoint_id)
        return found

    def _list(self) -> Listing[CheckpointInfo]:
        with self._lock:
            held = list(self._checkpoints.values())
        order = {checkpoint.id: position for position, checkpoint in enumerate(held)}
        held.sort(key=lambda checkpoint: (checkpoint.created_at, order[checkpoint.id]))
        return Listing(CheckpointInfo.of(checkpoint) for checkpoint in held)

    def _head(self, thread: str) -> str | None:
        with self._lock:
            return self._heads.get(thread)

    def _delete(self, checkpoint_id: str) -> None:
        with self._lock:
            removed = self._checkpoints.pop(checkpoint_id, None)
            if removed is None:
                raise self._missing(checkpoint_id)
            for thread in [name for name, head in self._heads.items() if head == checkpoint_id]:
                if removed.parent is not None and removed.parent in self._checkpoints:
                    self._heads[thread] = removed.parent
                else:
                    del self._heads[thread]

    def _lineage(self, checkpoint_id: str) -> Listing[CheckpointInfo]:
        with self._lock:
            return self._lineage_of(self._checkpoints.get, checkpoint_id, CheckpointInfo.of)

    def _save_context(self, ctx: WorkingContext) -> str:
        history, info = ctx.history, ContextInfo.of(ctx)
        with self._lock:
            saved = self._contexts.get(info.id)
            if saved is not None:
                before = saved[0]
                if len(before) > len(history) or before[-1] != history[len(before) - 1]:
                    raise diverged(info.id, self._place)
            self._contexts[info.id] = (history, info)
        return info.id

    def _load_context(self, context_id: str) -> WorkingContext:
        with self._lock:
            saved = self._contexts.get(context_id)
        if saved is None:
            raise missing(context_id, self._place)
        return WorkingContext.replay(saved[0])

    def _list_contexts(self) -> Listing[ContextInfo]:
        with self._lock:
            infos = [info for _, info in self._contexts.values()]
        return Listing(sorted(infos, key=lambda info: (info.created_at, info.id)))

    def _delete_context(self, context_id: str) -> None:
        with self._lock:
            if self._contexts.pop(context_id, None) is None:
                raise missing(context_id, self._place)

    def _contains(self, checkpoint_id: str) -> bool:
        return checkpoint_id in self._checkpoints

    def close(self) -> None:
        """
        Nothing to let go of: the store is used until it is no longer referenced.
        """

    def __len__(self) -> int:
        return len(self._checkpoints)

    def __repr__(self) -> str:
        return f"<InMemoryStore checkpoints={len(self._checkpoints)} contexts={len(self._contexts)}>"
