"""
``ContextLock``: an asyncio lock that belongs to no event loop.

:class:`asyncio.Lock` binds itself to the first event loop it is contended on,
and refuses every other loop from then on. A context often outlives a loop
(an app calling ``asyncio.run()`` per request, or requests served on several
threads, each with its own loop), so its lock keeps its state under a thread
lock and wakes each waiter on the waiter's own loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["ContextLock"]


class ContextLock:
    """
    A fair, non-reentrant async lock that works under any event loop and any thread.

    Use it like :class:`asyncio.Lock`: ``async with lock: ...``, or
    ``await lock.acquire()`` then ``lock.release()``. Waiters are served in
    the order they came; a waiter that is cancelled never holds the lock.

    >>> import asyncio
    >>> lock = ContextLock()
    >>> async def hold():
    ...     async with lock:
    ...         return lock.locked()
    >>> asyncio.run(hold()), asyncio.run(hold()), lock.locked()
    (True, True, False)
    """

    __slots__ = ("_guard", "_locked", "_waiters")
    __module__ = "workingctx.context"  # where users import it from

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locked = False
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    def locked(self) -> bool:
        """
        Whether some coroutine holds the lock.
        """
        return self._locked

    async def acquire(self) -> bool:
        """
        Wait until the lock is free and take it; returns True.
        """
        loop = asyncio.get_running_loop()
        with self._guard:
            if not self._locked and not self._waiters:
                self._locked = True
                return True
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            with self._guard:
                handed_over = waiter.done() and not waiter.cancelled()
                if not handed_over:
                    # Still queued (or its hand-over will find it cancelled and pass on).
                    self._forget(waiter)
            if handed_over:
                # The lock was handed over just as the wait was cancelled: pass it on.
                self.release()
            raise
        return True

    def _forget(self, waiter: asyncio.Future[None]) -> None:
        for entry in self._waiters:
            if entry[1] is waiter:
                self._waiters.remove(entry)
                return

    def release(self) -> None:
        """
        Release the lock, handing it to the oldest waiter, if any.

        Raises:
            RuntimeError: The lock is not held.
        """
        with self._guard:
            if not self._locked:
                msg = "release() of a ContextLock that is not held"
                raise RuntimeError(msg)
            self._pass_on()

    def _pass_on(self) -> None:
        # With the guard held: the lock goes to the oldest waiter whose loop
        # still runs (it stays held meanwhile), or becomes free.
        while self._waiters:
            loop, waiter = self._waiters.popleft()
            try:
                loop.call_soon_threadsafe(self._hand_over, waiter)
            except RuntimeError:  # that loop is closed: its waiter is gone
                continue
            return
        self._locked = False

    def _hand_over(self, waiter: asyncio.Future[None]) -> None:
        # On the waiter's loop.
        if waiter.done():  # cancelled meanwhile: the next waiter gets it
            with self._guard:
                self._pass_on()
            return
        waiter.set_result(None)

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<ContextLock locked={self._locked} waiters={len(self._waiters)}>"
