"""
Sub-agents that trim themselves, on random agent programs.

The programs of ``tests/agent_programs.py`` (forks plain and for a pending
call, slices, parallel calls, children that trim before every model call and
merge back in random order), 10,000 seeded runs (500 with ``--quick``), each
run twice on the same script:

* workingctx: ``fork`` / ``fork(for_call=...)`` / ``slice``, a manager before
  every request, ``merge(mode="delta")`` and ``merge(mode="result")``;
* LangChain: a list of messages per agent, ``trim_messages(strategy="last",
  start_on="human", include_system=True)`` to the same token budget before
  every request (the trimmed list becomes the agent's state, as a sub-agent
  keeps its window), and list concatenation for the fan-in: the parent extends
  its list with the child's messages past the length it had at the fork, or
  appends a ``ToolMessage`` with the child's last answer for a delegated call.

Counted: requests a provider rejects (OpenAI, Anthropic or Gemini rules, from
``workingctx.validity``), messages duplicated in a parent by a merge, and
messages a child appended that are missing from its parent after the merge.
"""

from __future__ import annotations

import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks._harness import Table
from workingctx import Message, ToolCall
from workingctx.frozen import thaw

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.agent_programs import (  # the repository root, for the shared programs
    BUDGET,
    SYSTEM_PROMPT,
    Event,
    Tally,
    duplicates,
    key,
    make_program,
    request_problems,
    run_workingctx,
)

GROUP = "sub-agents"
STEPS = 40


def _to_lc(message: Message) -> Any:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage  # noqa: PLC0415

    if message.role == "system":
        return SystemMessage(message.text())
    if message.role == "user":
        return HumanMessage(message.text(), name=message.name)
    if message.role == "assistant":
        calls = [{"name": c.name, "args": thaw(c.arguments), "id": c.id} for c in message.tool_calls]
        return AIMessage(message.text(), tool_calls=calls)
    return ToolMessage(message.text(), tool_call_id=message.tool_call_id or "", name=message.name)


def _from_lc(message: Any) -> Message:
    kind = message.type
    text = message.content if isinstance(message.content, str) else str(message.content)
    if kind == "system":
        return Message("system", text)
    if kind == "human":
        return Message("user", text, name=message.name)
    if kind == "ai":
        calls = tuple(ToolCall(c["id"], c["name"], c["args"]) for c in message.tool_calls)
        return Message("assistant", text, tool_calls=calls)
    return Message("tool", text, tool_call_id=message.tool_call_id, name=message.name)


def run_langchain(program: list[Event]) -> Tally:
    """
    The same program with lists, ``trim_messages`` and list concatenation.
    """
    from langchain_core.messages import ToolMessage, trim_messages  # noqa: PLC0415
    from langchain_core.messages.utils import count_tokens_approximately  # noqa: PLC0415

    tally = Tally()
    lists: dict[int, list[Any]] = {0: [_to_lc(Message("system", SYSTEM_PROMPT))]}
    forked_at: dict[int, int] = {}
    own: dict[int, list[Message]] = {0: []}
    for event in program:
        mine = lists[event.agent]
        if event.kind == "append":
            assert event.message is not None
            mine.append(_to_lc(event.message))
            own[event.agent].append(event.message)
        elif event.kind in ("fork", "slice"):
            assert event.child is not None
            if event.kind == "slice":
                humans = [i for i, m in enumerate(mine) if m.type == "human"]
                start = humans[-1] if humans else 1
                child = [mine[0], *mine[start:]]
            else:
                child = list(mine)
            lists[event.child] = child
            forked_at[event.child] = len(child)
            own[event.child] = []
        elif event.kind == "request":
            mine[:] = trim_messages(
                mine,
                strategy="last",
                token_counter=count_tokens_approximately,
                max_tokens=BUDGET[1],
                start_on="human",
                include_system=True,
            )
            tally.requests += 1
            broken = request_problems([_from_lc(m) for m in mine])
            if broken:
                tally.invalid_requests += 1
                tally.invalid.update(broken)
        else:
            assert event.child is not None
            child = lists.pop(event.child)
            before = [_from_lc(m) for m in mine]
            tally.merges += 1
            if event.call:
                answers = [m for m in child if m.type == "ai" and not m.tool_calls]
                text = answers[-1].content if answers else ""
                mine.append(ToolMessage(text, tool_call_id=event.call, name="delegate"))
            else:
                mine.extend(child[forked_at[event.child] :])
            after = [_from_lc(m) for m in mine]
            present = Counter(key(m) for m in after)
            added = after[len(before) :]
            wanted = own[event.child] if not event.call else added
            tally.lost += sum(1 for m in wanted if present[key(m)] == 0)
            tally.duplicated += duplicates(after) - duplicates(before)
            own[event.agent].extend(added)
    return tally


def run(table: Table, quick: bool) -> None:
    """
    Counts over the seeded runs, for workingctx and for LangChain on the same programs.
    """
    runs = 500 if quick else 10_000
    ours, theirs = Tally(), Tally()
    ours_seconds = theirs_seconds = 0.0
    for seed in range(runs):
        program = make_program(random.Random(seed), steps=STEPS)
        start = time.perf_counter()
        ours.add(run_workingctx(program))
        ours_seconds += time.perf_counter() - start
        start = time.perf_counter()
        theirs.add(run_langchain(program))
        theirs_seconds += time.perf_counter() - start
    note = f"{runs:,} seeded runs, {ours.requests:,} requests, {ours.merges:,} merges"
    for name, what in (
        ("invalid_requests", "requests a provider rejects"),
        ("duplicated", "messages duplicated by merges"),
        ("lost", "child messages lost by merges"),
    ):
        table.add(
            GROUP,
            f"{what}: workingctx {getattr(ours, name):,}, langchain {getattr(theirs, name):,}",
            runs,
            None,
            note=note,
        )
    worst = ", ".join(f"{rule} {count:,}" for rule, count in theirs.invalid.most_common(4)) or "none"
    table.add(GROUP, f"langchain: broken rules ({worst})", runs, None, note="requests breaking each rule")
    table.add(
        GROUP,
        "one whole run (trims, forks, merges)",
        runs,
        ours_seconds / runs,
        baseline="langchain lists + trim_messages",
        baseline_seconds=theirs_seconds / runs,
        note="mean per run, the same script",
    )
