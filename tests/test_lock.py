"""
Tests for workingctx._lock: a context's lock works under every event loop and on every
thread, drops a cancelled waiter, and leaves nothing half applied when a locked function fails.
"""

from __future__ import annotations

import asyncio

import pytest

from workingctx import Message, WorkingContext


class TestLockUnderEveryLoop:
    @staticmethod
    def _request(ctx: WorkingContext, name: str, pairs: int = 6) -> None:
        """
        One request of an app that calls asyncio.run() per request: *pairs*
        coroutines each append a pair under the lock, with an await between.
        """

        async def add_pair(c: WorkingContext, i: int) -> None:
            c.append(Message("user", f"{name}-{i}-q"))
            await asyncio.sleep(0)
            c.append(Message("assistant", f"{name}-{i}-a"))

        async def main() -> None:
            await asyncio.gather(*(ctx.apply_locked(lambda c, i=i: add_pair(c, i)) for i in range(pairs)))

        asyncio.run(main())

    def test_a_long_lived_context_serves_one_asyncio_run_per_request(self):
        """
        The lock contended under one event loop still works under the next
        asyncio.run(): every request applies all its pairs, whole and in order.
        """
        ctx = WorkingContext(shared=True)
        for request in ("r1", "r2", "r3"):
            self._request(ctx, request)
        assert 36 == ctx.size()
        contents = [str(m.content) for m in ctx.messages]
        assert all(q.endswith("-q") and a == q[:-1] + "a" for q, a in zip(contents[::2], contents[1::2], strict=True))
        assert not ctx.lock.locked()

    def test_event_loops_on_two_threads_exclude_each_other(self):
        """
        Two threads, each with its own event loop, run 200 read-modify-writes
        on one context under its lock: none is lost.
        """
        import threading  # noqa: PLC0415

        ctx = WorkingContext(shared=True).note("n", 0)

        async def bump(c: WorkingContext) -> None:
            value = c.get("n")
            await asyncio.sleep(0)
            c.note("n", value + 1)

        async def main() -> None:
            await asyncio.gather(*(ctx.apply_locked(bump) for _ in range(100)))

        threads = [threading.Thread(target=asyncio.run, args=(main(),)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert 200 == ctx.get("n")
        assert not ctx.lock.locked()

    def test_a_failing_function_leaves_nothing_half_applied(self):
        """
        apply_locked() is all or nothing: a function that appends, notes and
        records, then raises, leaves the tail, notes and journal as they were.
        """
        ctx = WorkingContext(messages=[Message("user", "keep")]).note("plan", {"steps": ["a"]})
        ctx.journal.record({"kind": "kept"})
        before = ctx.freeze()

        async def half(c: WorkingContext) -> None:
            c.append(Message("assistant", "one"), Message("assistant", "two"))
            c.get("plan")["steps"].append("b")
            c.note("extra", 1)
            c.journal.record({"kind": "lost"})
            await asyncio.sleep(0)
            c.replace_tail([Message("user", "other")])
            msg = "tool failed"
            raise RuntimeError(msg)

        with pytest.raises(RuntimeError, match="tool failed"):
            asyncio.run(ctx.apply_locked(half))
        assert before == ctx.freeze()
        assert before.digest() == ctx.digest()
        assert (1, 0) == (len(ctx.journal), ctx.journal.committed)
        assert not ctx.lock.locked()
        # the context works on afterwards
        assert 2 == asyncio.run(ctx.apply_locked(lambda c: c.append(Message("user", "next")).size()))

    def test_a_cancelled_waiter_never_holds_the_lock(self):
        """
        A coroutine cancelled while it waits for the lock neither runs nor
        keeps the lock; the waiters behind it still get it, in order.
        """
        ctx = WorkingContext(shared=True)

        async def main() -> list[str]:
            order: list[str] = []
            gate = asyncio.Event()

            async def first(_c: WorkingContext) -> None:
                order.append("first")
                await gate.wait()

            holder = asyncio.create_task(ctx.apply_locked(first))
            await asyncio.sleep(0)
            cancelled = asyncio.create_task(ctx.apply_locked(lambda _c: order.append("cancelled")))
            last = asyncio.create_task(ctx.apply_locked(lambda _c: order.append("last")))
            await asyncio.sleep(0)
            cancelled.cancel()
            gate.set()
            await asyncio.gather(holder, last)
            with pytest.raises(asyncio.CancelledError):
                await cancelled
            return order

        assert ["first", "last"] == asyncio.run(main())
        assert not ctx.lock.locked()

    def test_release_of_a_free_lock_raises(self):
        """
        Releasing a lock nobody holds is a RuntimeError, as with asyncio.Lock.
        """
        with pytest.raises(RuntimeError, match="not held"):
            WorkingContext().lock.release()
