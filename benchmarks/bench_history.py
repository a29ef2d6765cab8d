"""
History benchmarks: a recorded run saved as its history after every turn.

The run is the persistence benchmark's (``tool_heavy()`` cut into turns: a user
question, one or two tool exchanges, an answer; two notes per turn). The same
turns are played twice into two SQLite files:

* checkpoints: a plain context, ``Checkpoint.capture`` + ``SQLiteStore.save``
  after every turn (the content-addressed checkpoint store);
* history: a recorded context (``record=True``), ``SQLiteStore.save_context``
  after every turn (each save writes the entries added since the last one).

Reported: the bytes of both files (the history store must stay within 2x the
checkpoint store), the median of the last 20 saves of each, and loading the
last state from a fresh store (``load_context`` replays the whole history;
``load`` reads the last checkpoint). The loaded context is checked to have the
recorded one's digest.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from benchmarks._harness import Table, measure
from benchmarks.bench_persistence import _turns
from workingctx import Checkpoint, Message, PrefixContext, SQLiteStore, WorkingContext

GROUP = "history"


def _play(ctx: WorkingContext, number: int, turn: list[Message]) -> None:
    ctx.extend(turn)
    ctx.note("turn", number)
    ctx.note("last_tool", next(call.name for m in turn for call in m.tool_calls))


def checkpoint_run(path: Path, system: str, turns: list[list[Message]]) -> tuple[str, list[float]]:
    """
    A checkpoint after every turn; the last checkpoint's id and every save's time.
    """
    ctx = WorkingContext(prefix=PrefixContext(system_prompt=system))
    parent: str | None = None
    times: list[float] = []
    with SQLiteStore(path) as store:
        for number, turn in enumerate(turns):
            _play(ctx, number, turn)
            start = time.perf_counter()
            parent = store.save(Checkpoint.capture(ctx, parent=parent, metadata={"turn": number}))
            times.append(time.perf_counter() - start)
    assert parent is not None
    return parent, times


def history_run(path: Path, system: str, turns: list[list[Message]]) -> tuple[WorkingContext, list[float]]:
    """
    The recorded run saved after every turn; the context and every save's time.
    """
    ctx = WorkingContext(prefix=PrefixContext(system_prompt=system), record=True, id="run")
    times: list[float] = []
    with SQLiteStore(path) as store:
        for number, turn in enumerate(turns):
            _play(ctx, number, turn)
            start = time.perf_counter()
            store.save_context(ctx)
            times.append(time.perf_counter() - start)
    return ctx, times


def run(table: Table, quick: bool) -> None:
    turn_count = 100 if quick else 1000
    system, turns = _turns(turn_count)
    message_total = sum(len(turn) for turn in turns)
    size = f"{turn_count} turns, {message_total} msgs"

    with tempfile.TemporaryDirectory() as directory:
        checkpoints_path = Path(directory) / "checkpoints.db"
        history_path = Path(directory) / "history.db"
        last_id, checkpoint_times = checkpoint_run(checkpoints_path, system, turns)
        ctx, history_times = history_run(history_path, system, turns)
        checkpoint_bytes = checkpoints_path.stat().st_size
        history_bytes = history_path.stat().st_size

        opened: list[SQLiteStore] = []

        def reopen(path: Path) -> None:
            for old in opened:
                old.close()
            opened[:] = [SQLiteStore(path)]

        replay_s = measure(lambda: opened[0].load_context("run"), repeat=3, setup=lambda: reopen(history_path))
        loaded = opened[0].load_context("run")
        assert loaded.digest() == ctx.digest()
        assert loaded.history == ctx.history
        load_s = measure(lambda: opened[0].load(last_id), repeat=3, setup=lambda: reopen(checkpoints_path))
        assert opened[0].load(last_id).snapshot.digest() == ctx.digest()
        for old in opened:
            old.close()

    ratio = history_bytes / checkpoint_bytes
    assert ratio <= 2, f"the history store is {ratio:.2f}x the checkpoint store (target: at most 2x)"
    table.add(
        GROUP,
        "bytes on disk, saved every turn",
        size,
        None,
        baseline="SQLiteStore checkpoints",
        note=(
            f"save_context {history_bytes / 1e6:.2f} MB ({len(ctx.history)} entries) vs checkpoints "
            f"{checkpoint_bytes / 1e6:.2f} MB: {ratio:.2f}x (target <= 2x)"
        ),
    )
    table.add(
        GROUP,
        "save_context(), last 20 turns (median)",
        size,
        statistics.median(history_times[-20:]),
        baseline="capture + save checkpoint",
        baseline_seconds=statistics.median(checkpoint_times[-20:]),
        note="one transaction; new entries only",
    )
    table.add(
        GROUP,
        "load_context() (replays), fresh store",
        size,
        replay_s,
        baseline="load() last checkpoint",
        baseline_seconds=load_s,
        note="every entry checked against its chain digest, then replayed",
    )
