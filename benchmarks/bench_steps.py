"""
Per-step costs of a long run: one step of an agent loop at 1k, 10k and 100k messages.

A loop that takes a snapshot after every append, or records every tool result
with ``ToolResult.apply_to``, is linear over a run only when each step costs the
same whatever the length of the transcript. Each row times one step on a
context already holding *size* messages; its baseline is the same step on a
context of 1,000 messages, measured in the same run, so a ratio near 1.0x means
the step does not grow with the transcript (10k and 100k rows of a step that
walks the transcript show about 0.1x and 0.01x).

* ``append + freeze()``: one message appended, then a snapshot taken;
* ``append + freeze().digest()``: the same, and the snapshot's stable digest;
* ``ToolResult.apply_to``: an assistant message with a tool call appended, then
  its result applied (the call looked up, the result message and a note written).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from benchmarks._data import tool_heavy
from benchmarks._harness import Table, measure
from workingctx import Message, ToolCall, WorkingContext
from workingctx.reducers import ToolResult

GROUP = "steps"

BASE = 1_000


def _freeze_step(n: int, *, digest: bool) -> Callable[[], object]:
    ctx = WorkingContext(messages=tool_heavy(n), scratchpad={"stage": "act", "ticket": "ENG-4412"})
    ctx.freeze().digest()  # the chain of the starting transcript is built once, as in a running loop
    counter = iter(range(10**9))

    def step() -> object:
        ctx.append(Message("user", f"step {next(counter)}: anything new on the incident?"))
        snapshot = ctx.freeze()
        return snapshot.digest() if digest else snapshot

    return step


def _apply_to_step(n: int) -> Callable[[], object]:
    ctx = WorkingContext(messages=tool_heavy(n))
    ids: Iterator[int] = iter(range(10**9))

    def step() -> object:
        call_id = f"step-{next(ids)}"
        ctx.append(Message("assistant", tool_calls=[ToolCall(call_id, "lookup", {"ticket": "ENG-4412"})]))
        return ToolResult("status: mitigated", state={"last_call": call_id}).apply_to(ctx, call_id=call_id)

    step()  # the tail indexes the starting transcript's calls once, as in a running loop
    return step


def run(table: Table, quick: bool) -> None:
    sizes = [BASE, 10_000, 100_000]
    number = 50 if quick else 200
    repeat = 3 if quick else 7
    rows: list[tuple[str, Callable[[int], Callable[[], object]], str]] = [
        ("append + freeze()", lambda n: _freeze_step(n, digest=False), "messages read lazily"),
        ("append + freeze().digest()", lambda n: _freeze_step(n, digest=True), "only the new message hashed"),
        ("ToolResult.apply_to (call + result)", _apply_to_step, "calls indexed by the tail"),
    ]
    for operation, make, note in rows:
        base = measure(make(BASE), repeat=repeat, number=number)
        for n in sizes:
            seconds = base if n == BASE else measure(make(n), repeat=repeat, number=number)
            table.add(
                GROUP,
                operation,
                n,
                seconds,
                baseline=f"the same step at {BASE:,} messages",
                baseline_seconds=base,
                note=f"per step; {note}",
            )
