"""
The state of a live context: its slots, its locks, and all-or-nothing application.

:class:`ContextState` is the base every part of :class:`~workingctx.WorkingContext`
shares (the context itself, its merge, its recorded side), so each of them is typed
against the same attributes.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from workingctx._lock import ContextLock

if TYPE_CHECKING:
    from workingctx._notes import Notes, NotesMark
    from workingctx._tail import Mark, Tail
    from workingctx.context import WorkingContext
    from workingctx.history.recorder import Recorder
    from workingctx.journal import MutationJournal
    from workingctx.prefix import PrefixContext

__all__ = ["ContextState"]

_R = TypeVar("_R")


class ContextState:
    """
    The attributes of a live context, and what works on them alone.
    """

    __slots__ = (
        "_edit_lock",
        "_history",
        "_lock",
        "_marks",
        "_parent_call",
        "_prefix",
        "_prefix_tokens",
        "_routes",
        "_scratch_base",
        "_scratchpad",
        "_tail",
        "_token",
        "journal",
        "limit",
        "shared",
    )

    _edit_lock: threading.Lock | None
    _history: Recorder | None
    _lock: ContextLock | None
    _marks: dict[object, int]
    _parent_call: tuple[object, str] | None
    _prefix: PrefixContext
    _prefix_tokens: int | None
    _routes: dict[str, str]
    _scratch_base: dict[object, Mapping[str, Any]]
    _scratchpad: Notes
    _tail: Tail
    _token: object
    journal: MutationJournal[Any]
    limit: int | None
    shared: bool

    def _init(
        self,
        prefix: PrefixContext,
        tail: Tail,
        notes: Notes,
        journal: MutationJournal[Any],
        marks: dict[object, int] | None = None,
        bases: dict[object, Mapping[str, Any]] | None = None,
    ) -> None:
        self._prefix = prefix
        self._tail = tail
        self._scratchpad = notes
        self.journal: MutationJournal[Any] = journal
        self._prefix_tokens: int | None = None
        # the locks are made on first use (see lock and edit_notes()): most forks never take them
        self._lock: ContextLock | None = None
        self._edit_lock: threading.Lock | None = None
        self._token = object()
        # token of an ancestor -> the position in the lineage log when this
        # context forked from it (or last merged into it): a delta is what was appended since
        self._marks: dict[object, int] = {} if marks is None else marks
        # (token of the parent, call id) for a context forked for a pending call
        self._parent_call: tuple[object, str] | None = None
        # token of the parent -> the notes (frozen, or copies) when this context forked from it
        self._scratch_base: dict[object, Mapping[str, Any]] = {} if bases is None else bases
        # the history of a recorded context (None: not recorded)
        self._history = None
        # old id -> new id of each call a merge re-keyed while it was pending: its result may
        # still come under the old id (see _rekey.route_results); kept while the call is pending
        self._routes: dict[str, str] = {}

    @property
    def lock(self) -> ContextLock:
        """
        The context's lock, for sequences of mutations that must look atomic
        to other coroutines (``async with ctx.lock: ...``).

        It works under every event loop, one after another (``asyncio.run()``
        per request) or at once on several threads.
        """
        lock = self._lock
        if lock is None:
            with self._tail.lock:  # two first uses at once make one lock
                lock = self._lock
                if lock is None:
                    lock = self._lock = ContextLock()
        return lock

    # -- concurrency ---------------------------------------------------------------

    async def apply_locked(self, fn: Callable[[WorkingContext], Awaitable[_R] | _R]) -> _R:
        """
        Run ``fn(self)`` under the context's lock, awaiting it when it is async,
        and return its result.

        All or nothing: when *fn* raises (or is cancelled), the tail, the
        scratchpad and the journal are put back as they were when it started,
        and the error propagates. Notes are restored by value when they can be
        copied (plain data, or objects that support ``copy.deepcopy``), otherwise
        the keys are restored and a value *fn* changed in place stays changed.
        Writes other code made to the context meanwhile without holding the
        lock are undone with *fn*'s: write to a shared context under its lock.
        """
        async with self.lock:
            undo = self._undo_point()
            try:
                result = fn(cast("WorkingContext", self))
                if inspect.isawaitable(result):
                    result = await result
            except BaseException:
                self._roll_back(undo)
                raise
            return result

    def _undo_point(self) -> tuple[Mark, NotesMark, tuple[int, int], dict[str, str]]:
        with self._tail.lock:
            journal = (len(self.journal), self.journal.committed)
            return self._tail.mark(), self._scratchpad.mark(), journal, dict(self._routes)

    def _roll_back(self, undo: tuple[Mark, NotesMark, tuple[int, int], dict[str, str]]) -> None:
        mark, notes, (size, committed), routes = undo
        with self._tail.lock:
            self._tail.restore(mark)
            self._scratchpad.restore(notes)
            self.journal._truncate(size, committed)
            self._routes = dict(routes)
