"""
Random agent programs: a root agent and its sub-agents, as a script of events.

:func:`make_program` draws a script from a ``random.Random``: agents append
user turns, answers, parallel tool calls and results; fork plain sub-agents
(or slices) and sub-agents for a pending call; trim before each model request
with one of several managers; and merge finished sub-agents back, in random
order. The script does not depend on how contexts are kept, so the property
suite (:func:`run_workingctx`) and the benchmark (workingctx against LangChain's
``trim_messages`` with list concatenation) run the very same programs.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from workingctx import (
    LastNTurns,
    Message,
    MessageContextManager,
    PrefixContext,
    SummaryContextManager,
    TokenBudgetContextManager,
    ToolCall,
    WorkingContext,
)
from workingctx.exceptions import MergeError
from workingctx.scopes import Tagged
from workingctx.validity import PROVIDERS, STRUCTURAL_RULES, check_messages

SYSTEM_PROMPT = "You are an agent that delegates to sub-agents."
BUDGET = (240, 120)
"""The token watermarks of the budget manager (and of ``trim_messages`` in the benchmark)."""


@dataclass(frozen=True)
class Event:
    """
    One step of a program.

    ``kind`` is ``append`` (*message* to *agent*), ``fork`` (*child* from
    *agent*, for the pending *call* when set), ``slice`` (*child* as the last
    turn of *agent*), ``request`` (*agent* trims with manager number *manager*
    and calls its model) or ``merge`` (*child* into *agent*: its result for
    *call* when set, else its delta).
    """

    kind: str
    agent: int
    message: Message | None = None
    child: int | None = None
    call: str | None = None
    manager: int = 0


@dataclass
class _Agent:
    parent: int | None
    call: str | None
    depth: int
    pending: list[str] = field(default_factory=list)
    delegated: dict[str, int] = field(default_factory=dict)
    children: list[int] = field(default_factory=list)
    answered: bool = False
    merged: bool = False


def make_program(rng: random.Random, *, steps: int = 40) -> list[Event]:  # noqa: PLR0915  # one script, read top down
    """
    A random program of about *steps* events.
    """
    events: list[Event] = []
    agents = [_Agent(None, None, 0)]
    tags = iter(range(1_000_000))

    def add(agent: int, message: Message) -> None:
        events.append(Event("append", agent, message))
        agents[agent].answered = message.role == "assistant" and not message.tool_calls

    add(0, Message("user", f"task-{next(tags)}: research and report", name="task"))

    def finished(i: int) -> bool:
        a = agents[i]
        return a.answered and not a.pending and not a.children and not a.delegated

    def spawn(parent: int, call: str | None, *, as_slice: bool = False) -> int:
        child = len(agents)
        agents.append(_Agent(parent, call, agents[parent].depth + 1))
        events.append(Event("slice" if as_slice else "fork", parent, child=child, call=call))
        add(child, Message("user", f"subtask-{next(tags)} for {call or 'a plain fork'}"))
        return child

    for _ in range(steps):
        alive = [i for i, a in enumerate(agents) if not a.merged]
        i = rng.choice(alive)
        a = agents[i]
        if a.pending:
            free = [c for c in a.pending if c not in a.delegated]
            done = [c for c in a.pending if c in a.delegated and finished(a.delegated[c])]
            if done and rng.random() < 0.6:
                call = rng.choice(done)
                child = a.delegated.pop(call)
                events.append(Event("merge", i, child=child, call=call))
                agents[child].merged = True
                a.pending.remove(call)
            elif free:
                call = rng.choice(free)
                if a.depth < 2 and rng.random() < 0.35:
                    a.delegated[call] = spawn(i, call)
                else:
                    add(i, Message("tool", f"result-{next(tags)}", tool_call_id=call, name="lookup"))
                    a.pending.remove(call)
            continue
        ready = [c for c in a.children if finished(c)]
        roll = rng.random()
        if ready and roll < 0.25:
            child = rng.choice(ready)
            a.children.remove(child)
            events.append(Event("merge", i, child=child))
            agents[child].merged = True
        elif roll < 0.45:
            events.append(Event("request", i, manager=rng.randrange(len(managers()))))
            if rng.random() < 0.5:
                add(i, Message("assistant", f"answer-{next(tags)}"))
            else:
                count = rng.randint(1, 3)
                calls = tuple(ToolCall(f"call-{next(tags)}", "lookup", {"n": n}) for n in range(count))
                add(i, Message("assistant", f"calling-{next(tags)}" if rng.random() < 0.3 else "", tool_calls=calls))
                a.pending = [c.id for c in calls]
        elif roll < 0.55 and i == 0:
            add(i, Message("user", f"follow-up-{next(tags)}"))
        elif roll < 0.65 and a.depth < 2:
            a.children.append(spawn(i, None, as_slice=rng.random() < 0.3))
        else:
            add(i, Message("assistant", f"note-{next(tags)}"))
    return events


async def _summarize(messages: Sequence[Message], *, prompt: str, max_tokens: int) -> str:  # noqa: ARG001
    return f"summary of {len(messages)} messages"


def managers() -> list[Any]:
    """
    The managers a request may trim with (fresh instances), by number.
    """
    return [
        MessageContextManager(2),
        MessageContextManager(3, remove_tool_msgs=True, pin=Tagged("task")),
        TokenBudgetContextManager(BUDGET[0], low_watermark=BUDGET[1]),
        TokenBudgetContextManager(BUDGET[0] // 2, low_watermark=BUDGET[1] // 3, pin=Tagged("task")),
        SummaryContextManager(_summarize, max_messages=8, keep_recent=0),
        SummaryContextManager(_summarize, max_messages=10, keep_recent=3),
    ]


def key(message: Message) -> tuple[Any, ...]:
    """
    What identifies a message of a program (every text is unique).
    """
    return (message.role, message.text(), message.tool_call_id, message.call_ids)


@dataclass
class Tally:
    """
    What went wrong in a run (every count should be 0 for workingctx).
    """

    requests: int = 0
    invalid_requests: int = 0
    duplicated: int = 0
    lost: int = 0
    merges: int = 0
    refused_merges: int = 0
    invalid: Counter[str] = field(default_factory=Counter)

    def add(self, other: Tally) -> None:
        for name in ("requests", "invalid_requests", "duplicated", "lost", "merges", "refused_merges"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.invalid.update(other.invalid)


def request_problems(messages: Sequence[Message]) -> set[str]:
    """
    The rules a request breaks under any of the three providers.
    """
    return {p.rule for provider in PROVIDERS for p in check_messages(messages, provider=provider)}


def duplicates(messages: Sequence[Message]) -> int:
    """
    How many messages repeat an earlier one.
    """
    seen = Counter(key(m) for m in messages if m.role != "system")
    return sum(n - 1 for n in seen.values())


def run_workingctx(program: Sequence[Event], *, check: Callable[[str, Any], None] | None = None) -> Tally:
    """
    Run *program* with workingctx: ``fork``/``fork(for_call=...)``/``slice``,
    a manager before every request, ``merge(mode="delta" | "result")``.

    *check* is called after every step with ``(what, details)`` so a test can
    assert its invariants.
    """
    tally = Tally()
    ctxs: dict[int, WorkingContext] = {0: WorkingContext(prefix=PrefixContext(system_prompt=SYSTEM_PROMPT))}
    own: dict[int, list[Message]] = {0: []}
    for event in program:
        ctx = ctxs[event.agent]
        if event.kind == "append":
            assert event.message is not None
            ctx.append(event.message)
            own[event.agent].append(event.message)
        elif event.kind in ("fork", "slice"):
            assert event.child is not None
            if event.kind == "slice":
                ctxs[event.child] = ctx.slice(LastNTurns(1))
            else:
                ctxs[event.child] = ctx.fork(for_call=event.call)
            own[event.child] = []
        elif event.kind == "request":
            before = ctx.messages
            managers()[event.manager].trim_context(ctx)
            request = ctx.assembled()
            tally.requests += 1
            broken = request_problems(request)
            if broken:
                tally.invalid_requests += 1
                tally.invalid.update(broken)
            if check is not None:
                check("request", (before, ctx, broken))
        else:
            assert event.child is not None
            child = ctxs.pop(event.child)
            before = ctx.messages
            tally.merges += 1
            try:
                ctx.merge(child, mode="result" if event.call else "delta")
            except MergeError:
                tally.refused_merges += 1
                tally.lost += len(own[event.child])
                if check is not None:
                    check("refused", (before, ctx))
                continue
            added = list(ctx.messages[len(before) :])
            present = Counter(key(m) for m in ctx.messages)
            wanted = own[event.child] if not event.call else added
            tally.lost += sum(1 for m in wanted if present[key(m)] == 0)
            tally.duplicated += duplicates(ctx.messages) - duplicates(before)
            own[event.agent].extend(added)
            if check is not None:
                check("merge", (before, ctx, own[event.child], event.call))
        if check is not None:
            check("step", ctxs)
    return tally


def structural(messages: Sequence[Message]) -> list[str]:
    """
    The tool rules *messages* break, pending calls at the end allowed.
    """
    return [p.rule for p in check_messages(messages, allow_pending=True) if p.rule in STRUCTURAL_RULES]


def run_seed(seed: int, *, steps: int = 40) -> Tally:
    """
    :func:`run_workingctx` of the program drawn from *seed*.
    """
    return run_workingctx(make_program(random.Random(seed), steps=steps))


__all__ = [
    "BUDGET",
    "SYSTEM_PROMPT",
    "Event",
    "Tally",
    "duplicates",
    "key",
    "make_program",
    "managers",
    "request_problems",
    "run_seed",
    "run_workingctx",
    "structural",
]
