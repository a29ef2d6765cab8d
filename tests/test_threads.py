"""
Tests for a WorkingContext shared between threads: readers that freeze, digest
and fork while a writer appends and trims always see one whole state.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from workingctx import Checkpoint, FrozenContext, Message, SQLiteStore, WorkingContext
from workingctx.snapshot import Chain

RUN_SECONDS = 1.5


def _from_scratch(snapshot: FrozenContext) -> FrozenContext:
    """
    The same state rebuilt without any shared cache (a new digest chain).
    """
    return FrozenContext(prefix=snapshot.prefix, messages=snapshot.messages, scratchpad=snapshot.scratchpad)


def _check_chain(snapshot: FrozenContext) -> None:
    """
    Every prefix digest of *snapshot* equals one computed from scratch.
    """
    fresh = Chain()
    for n in range(len(snapshot.messages) + 1):
        assert fresh.upto(snapshot.messages, n) == snapshot.chain_digest(n), n


def _run(*workers: Callable[[threading.Event], None], seconds: float = RUN_SECONDS) -> None:
    """
    Run the workers on their own threads until *seconds* pass; re-raise the first failure.
    """
    stop = threading.Event()
    failures: list[BaseException] = []

    def guarded(work: Callable[[threading.Event], None]) -> None:
        try:
            work(stop)
        except BaseException as error:  # the test thread re-raises it
            failures.append(error)
            stop.set()

    threads = [threading.Thread(target=guarded, args=(work,)) for work in workers]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stop.is_set():
        time.sleep(0.01)
    stop.set()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


@pytest.mark.usefixtures("fast_switching")
class TestSharedBetweenThreads:
    def test_readers_see_whole_states_while_a_writer_appends_and_trims(self, tmp_path: Path) -> None:
        """
        One thread appends and trims with replace_tail (as a manager does) and
        writes notes; another freezes, digests and forks. Every snapshot's digest
        chain, every digest() and every fork equal ones recomputed from scratch,
        and every checkpoint saved on the way loads back equal in a new store.
        """
        ctx = WorkingContext(messages=[Message("system", "Be brief.")])
        states: set[str] = {_from_scratch(ctx.freeze()).digest()}
        digests: list[str] = []
        snapshots: list[FrozenContext] = []
        forks: list[tuple[FrozenContext, WorkingContext]] = []

        def writer(stop: threading.Event) -> None:
            step = 0
            while not stop.is_set():
                ctx.append(Message("user", f"q{step}"), Message("assistant", f"a{step}"))
                states.add(_from_scratch(ctx.freeze()).digest())
                if step % 5 == 4:
                    ctx.replace_tail([ctx.messages[0], *ctx.messages[-4:]])
                    states.add(_from_scratch(ctx.freeze()).digest())
                if step % 3 == 0:
                    ctx.note("step", step)
                    states.add(_from_scratch(ctx.freeze()).digest())
                step += 1

        def reader(stop: threading.Event) -> None:
            while not stop.is_set():
                digests.append(ctx.digest())
                snapshots.append(ctx.freeze())
                child = ctx.fork()
                forks.append((child.freeze(), child))

        _run(writer, reader)

        assert len(snapshots) > 50
        for snapshot in snapshots:
            _check_chain(snapshot)
            assert _from_scratch(snapshot).digest() == snapshot.digest()
        for frozen, child in forks:
            _check_chain(frozen)
            assert _from_scratch(frozen).digest() == child.digest()
            child.append(Message("user", "more"))
            _check_chain(child.freeze())
        # every digest() names a state the writer made (states never seen are wrong digests)
        assert set(digests) <= states
        _check_chain(ctx.freeze())

        store = SQLiteStore(tmp_path / "runs.db")
        saved = [Checkpoint.capture(snapshot) for snapshot in snapshots[:: max(1, len(snapshots) // 40)]]
        for checkpoint in saved:
            store.save(checkpoint)
        reopened = SQLiteStore(tmp_path / "runs.db")
        for checkpoint in saved:
            assert checkpoint == reopened.load(checkpoint.id)

    def test_live_checkpoints_save_and_load_while_the_tail_is_trimmed(self, tmp_path: Path) -> None:
        """
        Checkpoints captured from the live context on one thread while another
        trims it are saved and load back equal, with digests from scratch.
        """
        ctx = WorkingContext()
        store = SQLiteStore(tmp_path / "live.db")
        saved: list[Checkpoint] = []

        def writer(stop: threading.Event) -> None:
            step = 0
            while not stop.is_set():
                ctx.append(Message("user", f"q{step}"), Message("assistant", f"a{step}"))
                if step % 4 == 3:
                    ctx.replace_tail(ctx.messages[-3:])
                step += 1

        def saver(stop: threading.Event) -> None:
            while not stop.is_set():
                checkpoint = Checkpoint.capture(ctx)
                store.save(checkpoint)
                saved.append(checkpoint)

        _run(writer, saver)

        assert saved
        reopened = SQLiteStore(tmp_path / "live.db")
        for checkpoint in saved:
            loaded = reopened.load(checkpoint.id)
            assert checkpoint == loaded
            assert _from_scratch(loaded.snapshot).digest() == checkpoint.snapshot.digest()

    def test_forks_race_appends_and_clears(self) -> None:
        """
        Forks taken while another thread appends, trims and clears hold a
        consistent tail: their digests, system positions and token counts match
        a context built from their messages alone.
        """
        ctx = WorkingContext()
        forks: list[WorkingContext] = []

        def writer(stop: threading.Event) -> None:
            step = 0
            while not stop.is_set():
                role = "system" if step % 6 == 0 else "user"
                ctx.append(Message(role, f"m{step}"))
                if step % 50 == 49:
                    ctx.clear_messages()
                elif step % 9 == 8:
                    ctx.replace_tail(ctx.messages[::2])
                step += 1

        def forker(stop: threading.Event) -> None:
            while not stop.is_set():
                forks.append(ctx.fork())

        _run(writer, forker)

        assert forks
        for child in forks[:: max(1, len(forks) // 300)]:
            plain = WorkingContext(messages=child.messages)
            assert plain.digest() == child.digest()
            assert plain.tail_view().system_positions == child.tail_view().system_positions
            assert plain.count_tokens() == child.count_tokens()
            assert plain.has_id("nothing") == child.has_id("nothing")
