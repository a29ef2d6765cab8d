"""
Persistence benchmarks: checkpoint after every turn of a long tool-heavy run.

The run is ``tool_heavy()``'s transcript cut into turns (a user question, one or
two tool exchanges, an answer), its system message as the prefix, a note and a
journal entry per turn. After each turn the context is captured and saved to a
``SQLiteStore``. The baseline is a naive store that writes the whole JSON
checkpoint (``to_json(checkpoint)``) every time:

* bytes: the SQLite file after the run against the sum of every naive
  checkpoint's JSON (computed from per-message JSON sizes, and checked against
  real ``to_json`` output at three points of the run);
* save: the median of the last 20 saves of the run, against writing the last
  checkpoint's JSON to a file;
* load: loading the last checkpoint from a freshly opened store (nothing cached)
  and from the store that saved it, against reading that file back with
  ``from_json``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import attrs

from benchmarks._data import tool_heavy
from benchmarks._harness import Table, measure
from workingctx import Checkpoint, Message, PrefixContext, SQLiteStore
from workingctx.context import WorkingContext
from workingctx.serialization import from_json, to_json
from workingctx.snapshot import FrozenContext

GROUP = "persistence"


def _turns(count: int) -> tuple[str, list[list[Message]]]:
    """
    The system prompt and *count* turns of a tool-heavy run.
    """
    size = count * 8
    while True:
        messages = tool_heavy(size)
        turns: list[list[Message]] = []
        for message in messages[1:]:
            if message.role == "user" or not turns:
                turns.append([])
            turns[-1].append(message)
        complete = [turn for turn in turns if any(m.tool_calls for m in turn)]
        if len(complete) > count:
            return messages[0].text(), complete[:count]
        size *= 2


def _json_size(checkpoint: Checkpoint) -> int:
    return len(to_json(checkpoint).encode("utf-8"))


class _NaiveSize:
    """
    The bytes of each checkpoint's whole JSON, without writing it: the skeleton
    with one message and one entry, plus every other message and entry and
    their commas (each message's JSON is measured once).
    """

    def __init__(self) -> None:
        self.message_sizes: list[int] = []
        self.entry_sizes: list[int] = []

    def add(self, messages: list[Message], entry: dict[str, object]) -> None:
        self.message_sizes.extend(len(to_json(m).encode("utf-8")) for m in messages)
        self.entry_sizes.append(len(to_json(entry).encode("utf-8")))

    def of(self, checkpoint: Checkpoint) -> int:
        snapshot = checkpoint.snapshot
        skeleton = attrs.evolve(
            checkpoint,
            snapshot=FrozenContext(snapshot.prefix, snapshot.messages[:1], snapshot.scratchpad, snapshot.journal[:1]),
        )
        size = _json_size(skeleton) + sum(self.message_sizes[1:]) + len(self.message_sizes) - 1
        return size + sum(self.entry_sizes[1:]) + len(self.entry_sizes) - 1


def _checkpoint_run(path: Path, system: str, turns: list[list[Message]]) -> tuple[Checkpoint, int, dict[str, float]]:
    """
    Run every turn, capture and save a checkpoint after each; the last
    checkpoint, the naive store's total bytes, and median times of the last 20 turns.
    """
    store = SQLiteStore(path)
    ctx = WorkingContext(prefix=PrefixContext(system_prompt=system))
    naive = _NaiveSize()
    naive_bytes = 0
    capture_times: list[float] = []
    save_times: list[float] = []
    parent: str | None = None
    checked = {0, len(turns) // 2, len(turns) - 1}
    checkpoint: Checkpoint | None = None
    for number, turn in enumerate(turns):
        ctx.extend(turn)
        ctx.note("turn", number)
        ctx.note("last_tool", next(call.name for m in turn for call in m.tool_calls))
        entry: dict[str, object] = {"kind": "turn_done", "turn": number, "messages": len(turn)}
        ctx.journal.record(entry)
        naive.add(turn, entry)

        start = time.perf_counter()
        checkpoint = Checkpoint.capture(ctx, parent=parent, metadata={"turn": number})
        captured = time.perf_counter()
        parent = store.save(checkpoint)
        capture_times.append(captured - start)
        save_times.append(time.perf_counter() - captured)

        size = naive.of(checkpoint)
        if number in checked:
            assert size == _json_size(checkpoint), (number, size, _json_size(checkpoint))
        naive_bytes += size
    store.close()
    assert checkpoint is not None
    times = {"capture": statistics.median(capture_times[-20:]), "save": statistics.median(save_times[-20:])}
    return checkpoint, naive_bytes, times


def _load_times(path: Path, last: Checkpoint) -> tuple[float, float]:
    """
    Median load time of *last* from a freshly opened store, and from one that loaded it before.
    """
    opened: list[SQLiteStore] = []

    def reopen() -> None:
        for old in opened:
            old.close()
        opened[:] = [SQLiteStore(path)]

    cold = measure(lambda: opened[0].load(last.id), repeat=5, setup=reopen)
    warm_store = opened[0]
    assert warm_store.load(last.id) == last
    warm = measure(lambda: warm_store.load(last.id), repeat=5)
    warm_store.close()
    return cold, warm


def run(table: Table, quick: bool) -> None:
    turn_count = 100 if quick else 1000
    system, turns = _turns(turn_count)
    message_total = sum(len(turn) for turn in turns)

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "run.db"
        last, naive_bytes, times = _checkpoint_run(path, system, turns)
        store_bytes = path.stat().st_size

        # The naive store at the end of the run: one file per checkpoint.
        naive_file = Path(directory) / "last.json"

        def naive_save() -> None:
            naive_file.write_text(to_json(last), encoding="utf-8")

        def naive_load() -> Checkpoint:
            return from_json(naive_file.read_text(encoding="utf-8"), Checkpoint)

        naive_save_s = measure(naive_save, repeat=5)
        naive_load_s = measure(naive_load, repeat=5)
        assert naive_load() == last
        cold, warm = _load_times(path, last)

    size = f"{turn_count} turns, {message_total} msgs"
    table.add(
        GROUP,
        "bytes on disk, a checkpoint every turn",
        size,
        None,
        baseline="naive: whole JSON each time",
        note=(
            f"SQLiteStore {store_bytes / 1e6:.2f} MB vs naive {naive_bytes / 1e6:,.1f} MB: "
            f"{naive_bytes / store_bytes:,.0f}x smaller"
        ),
    )
    table.add(
        GROUP,
        "save(), last 20 turns (median)",
        size,
        times["save"],
        baseline="naive: write whole JSON",
        baseline_seconds=naive_save_s,
        note="one transaction; new messages only",
    )
    table.add(
        GROUP,
        "Checkpoint.capture(), last 20 turns (median)",
        size,
        times["capture"],
        note="freeze + digest + id",
    )
    table.add(
        GROUP,
        "load() last checkpoint, fresh store",
        size,
        cold,
        baseline="naive: read + from_json",
        baseline_seconds=naive_load_s,
        note="one pass: each item's text hashed against its key and built with its checks, every link checked",
    )
    table.add(
        GROUP,
        "load() last checkpoint, same store",
        size,
        warm,
        baseline="naive: read + from_json",
        baseline_seconds=naive_load_s,
        note="verified messages cached by digest",
    )
