"""
Tests for workingctx._state: apply_locked() runs a function under the context's lock,
async or sync, one caller after another, and returns its result.
"""

from __future__ import annotations

import asyncio

from workingctx import Message, WorkingContext


class TestConcurrency:
    def test_locked_pairs_from_three_workers_stay_whole_and_in_order(self):
        """
        Three workers each append a pair with an await in between, under the
        lock: the pairs come out whole and in order.
        """

        async def main() -> list[str]:
            board = WorkingContext(shared=True)

            async def worker(name: str) -> None:
                async def add_pair(ctx: WorkingContext) -> None:
                    ctx.append(Message("assistant", f"{name}: starting"))
                    await asyncio.sleep(0)
                    ctx.append(Message("assistant", f"{name}: done"))

                await board.apply_locked(add_pair)

            await asyncio.gather(*(worker(n) for n in ("a", "b", "c")))
            return [str(m.content) for m in board.messages]

        assert [
            "a: starting",
            "a: done",
            "b: starting",
            "b: done",
            "c: starting",
            "c: done",
        ] == asyncio.run(main())

    def test_thousand_read_modify_writes_lose_nothing(self):
        """
        1,000 coroutines each read a counter, yield, and write it back plus
        one, under the lock: the final value is 1,000.
        """

        async def main() -> int:
            board = WorkingContext(shared=True).note("n", 0)

            async def bump(ctx: WorkingContext) -> None:
                value = ctx.get("n")
                await asyncio.sleep(0)
                ctx.note("n", value + 1)

            await asyncio.gather(*(board.apply_locked(bump) for _ in range(1000)))
            return int(board.get("n"))

        assert 1000 == asyncio.run(main())

    def test_apply_locked_accepts_sync_functions_and_returns(self):
        """
        A sync function runs under the lock and its result comes back.
        """

        async def main() -> int:
            ctx = WorkingContext()
            return await ctx.apply_locked(lambda c: c.append(Message("user", "x")).size())

        assert 1 == asyncio.run(main())
