"""
Context-manager and reducer benchmarks.

* each manager trimming a fresh context holding a tool-heavy transcript of
  100 / 1,000 / 10,000 messages (per-message token counts already cached, the
  context's running count up to date: what an agent's context looks like);
* ``TokenBudgetContextManager`` against LangChain's ``trim_messages(strategy="last",
  token_counter=count_tokens_approximately, start_on="human", include_system=True)``
  on the same transcript and budget;
* validity: both over the same random transcripts the property tests use
  (``tests.strategies.transcripts``), counting outputs that orphan a tool
  result, keep a call without one of its results, or lose a system message;
* a prompt-cache simulation: a 300-turn tool-heavy conversation under a fixed
  window, each turn's request built (a) by ``trim_messages`` to the window
  every turn and (b) by the watermark manager; what share of each request's
  input tokens is a prefix of the previous request (what a provider's cache can
  serve), and the input cost at $3.00 per million fresh and $0.30 per million
  cached tokens;
* ``add_messages_to`` (one message onto a 10,000-message context) against
  LangGraph's ``add_messages``;
* per-step cost at 1,000 / 10,000 / 100,000 messages (each should be flat):
  an append plus ``MessageContextManager(10).trim_context`` that cuts nothing
  (one task, then tool turns); an append plus ``TokenBudgetContextManager``
  below its watermark; and an appended result answering the one call every
  earlier result answers, plus the ``TokenBudget`` scope through the tail index.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import statistics
import time
from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any

import attrs

from benchmarks._data import to_langchain, tool_heavy
from benchmarks._harness import Table, measure
from workingctx import ApproxTokenCounter, Message, TokenBudget, ToolCall, WorkingContext
from workingctx.managers import MessageContextManager, SummaryContextManager, TokenBudgetContextManager
from workingctx.reducers import add_messages, add_messages_to
from workingctx.scopes import surviving_indices
from workingctx.snapshot import common_prefix_length

GROUP = "managers"
BUDGET = 4_000
"""The token budget of the manager-vs-trim_messages rows (a cut happens at every size)."""
WINDOW = 32_000
"""The fixed window of the cache simulation."""
FRESH_PER_M = 3.00
CACHED_PER_M = 0.30

_counter = ApproxTokenCounter()


def _lc_trim(messages: list[Any], budget: int, start_on: str | None = "human") -> list[Any]:
    from langchain_core.messages import trim_messages  # noqa: PLC0415
    from langchain_core.messages.utils import count_tokens_approximately  # noqa: PLC0415

    return trim_messages(
        messages,
        strategy="last",
        token_counter=count_tokens_approximately,
        max_tokens=budget,
        start_on=start_on,
        include_system=True,
    )


def _warm_context(messages: list[Message]) -> WorkingContext:
    """
    A context as an agent loop leaves it: counted, and its tail indexed by the
    previous turns' checks (each turn indexes only its new messages).
    """
    ctx = WorkingContext(messages=messages)
    ctx.count_tokens()
    ctx.tail_view().tail_index  # noqa: B018  # the index is built on first use, as a loop's first check does
    return ctx


# -- validity ---------------------------------------------------------------------


def violations(before: Sequence[Message], after: Sequence[Message]) -> set[str]:
    """
    The kinds of invalid output in *after* (a trim of *before*, same objects).
    """
    found: set[str] = set()
    kept = {id(m) for m in after}
    if any(id(m) not in kept for m in before if m.role == "system"):
        found.add("lost system message")
    asked: set[str] = set()
    for message in after:
        if any(r not in asked for r in message.result_ids):
            found.add("orphaned tool result")
        asked.update(message.call_ids)
    if any(id(m) not in kept and any(r in asked for r in m.result_ids) for m in before):
        found.add("call kept without its results")
    return found


def _random_transcripts(count: int) -> list[tuple[list[Message], int]]:
    """
    *count* transcripts from the property tests' generator, each with a budget; deterministic.
    """
    from hypothesis import HealthCheck, Phase, given, settings  # noqa: PLC0415
    from hypothesis import strategies as st  # noqa: PLC0415

    from tests.strategies import transcripts  # noqa: PLC0415

    out: list[tuple[list[Message], int]] = []

    @settings(
        max_examples=count,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(transcripts(max_turns=8), st.integers(0, 300))
    def collect(messages: list[Message], budget: int) -> None:
        out.append((messages, budget))

    collect()
    return out


def _validity(table: Table, quick: bool) -> None:
    samples = _random_transcripts(200 if quick else 1_000)

    def peer(start_on: str | None) -> Any:
        def trim(messages: list[Message], budget: int) -> list[Message]:
            lc = to_langchain(messages)
            back = {id(m): original for m, original in zip(lc, messages, strict=True)}
            return [back[id(m)] for m in _lc_trim(lc, budget, start_on)]

        return trim

    def ours(messages: list[Message], budget: int) -> list[Message]:
        ctx = WorkingContext(messages=messages)
        # budgets down to 0 tokens on purpose: the manager's warning that what it
        # must keep does not fit is expected here, and would flood the table
        quiet = logging.getLogger("workingctx.managers")
        level = quiet.level
        quiet.setLevel(logging.ERROR)
        try:
            return list(TokenBudgetContextManager(budget).trim_context(ctx).messages)
        finally:
            quiet.setLevel(level)

    n = len(samples)
    for label, trim in (
        ("trim_messages(last, start_on=human, include_system)", peer("human")),
        ("trim_messages(last, include_system), no start_on", peer(None)),
        ("TokenBudgetContextManager", ours),
    ):
        kinds: dict[str, int] = {}
        bad = 0
        for messages, budget in samples:
            found = violations(messages, trim(messages, budget))
            bad += bool(found)
            for kind in found:
                kinds[kind] = kinds.get(kind, 0) + 1
        detail = ", ".join(f"{k}: {v}" for k, v in sorted(kinds.items())) or "none"
        table.add(GROUP, f"invalid outputs, {label}", f"{n} transcripts", None, note=f"{bad} of {n} ({detail})")


# -- speed ----------------------------------------------------------------------------


def _add_next(ctx: WorkingContext, fresh: Iterator[Message]) -> object:
    return add_messages_to(ctx, next(fresh))


def _timed_trim(manager: Any, messages: list[Message], *, repeat: int, number: int, run: Any = None) -> float:
    """
    Median seconds for *manager* to trim a fresh, warm context holding *messages*.

    Each round trims *number* contexts built beforehand (untimed), each one
    holding the same messages with their token counts cached.
    """
    pool: list[WorkingContext] = []

    def setup() -> None:
        pool[:] = [_warm_context(messages) for _ in range(number)]

    def trim() -> None:
        ctx = pool.pop()
        if run is None:
            manager.trim_context(ctx)
        else:
            run(manager.atrim_context(ctx))

    return measure(trim, repeat=repeat, number=number, setup=setup)


async def _fixed_summary(messages: Sequence[Message], **_settings: object) -> str:
    return f"{len(messages)} earlier messages about certificates, queries and forecasts."


def _speed(table: Table, quick: bool) -> None:
    sizes = [100, 1_000] if quick else [100, 1_000, 10_000]
    loop = asyncio.new_event_loop()
    try:
        for n in sizes:
            messages = tool_heavy(n)
            _warm_context(messages)  # cache every message's count once
            repeat, number = (5, 10) if n >= 10_000 else (9, 20)

            seconds = _timed_trim(MessageContextManager(max_messages=10), messages, repeat=repeat, number=number)
            table.add(GROUP, "MessageContextManager(10).trim_context", n, seconds, note="fresh warm context per call")
            seconds = _timed_trim(
                MessageContextManager(max_messages=10, remove_tool_msgs=True), messages, repeat=repeat, number=number
            )
            table.add(
                GROUP, "MessageContextManager(10, remove_tool_msgs)", n, seconds, note="fresh warm context per call"
            )
            summary = SummaryContextManager(_fixed_summary, max_messages=30, keep_recent=8)
            seconds = _timed_trim(summary, messages, repeat=repeat, number=number, run=loop.run_until_complete)
            table.add(
                GROUP,
                "SummaryContextManager(30, keep_recent=8).atrim_context",
                n,
                seconds,
                note="instant summarizer: the manager's own work",
            )

            manager = TokenBudgetContextManager(BUDGET)
            ours = _timed_trim(manager, messages, repeat=max(repeat, 15), number=number)
            lc = to_langchain(messages)
            _lc_trim(lc, BUDGET)
            peer = measure(partial(_lc_trim, lc, BUDGET), repeat=repeat)
            table.add(
                GROUP,
                f"TokenBudgetContextManager({BUDGET:,}) cut",
                n,
                ours,
                baseline="langchain trim_messages(last, human, system)",
                baseline_seconds=peer,
                note="warm: counts cached; ours cuts to the low watermark",
            )
            ctx = _warm_context(messages)
            manager.trim_context(ctx)
            ctx.append(Message("user", "And the queue backlog?"))
            steady = measure(partial(manager.trim_context, ctx), repeat=repeat, number=1_000)
            table.add(
                GROUP,
                f"TokenBudgetContextManager({BUDGET:,}) under the watermark",
                n,
                steady,
                note="the common case between cuts: a check, no change",
            )
    finally:
        loop.close()


# -- the prompt-cache simulation ------------------------------------------------------


def _turns(count: int) -> list[list[Message]]:
    """
    The system prompt, then *count* tool-heavy turns (each starting at its user message).
    """
    messages = tool_heavy(40 * count)
    turns: list[list[Message]] = [[]]
    for message in messages:
        if message.role == "user":
            if len(turns) > count:
                break
            turns.append([])
        turns[-1].append(message)
    return turns[: count + 1]


@attrs.define
class _Bill:
    requests: int = 0
    tokens: int = 0
    cached: int = 0

    def add(self, request: Sequence[Message], shared: int) -> None:
        self.requests += 1
        self.tokens += _counter.count(request)
        self.cached += _counter.count(request[:shared])

    @property
    def share(self) -> float:
        return self.cached / self.tokens if self.tokens else 0.0

    @property
    def cost(self) -> float:
        return ((self.tokens - self.cached) * FRESH_PER_M + self.cached * CACHED_PER_M) / 1e6


def _shared(a: Sequence[Any], b: Sequence[Any]) -> int:
    return sum(1 for _ in itertools.takewhile(lambda pair: pair[0] is pair[1], zip(a, b, strict=False)))


def _cache_simulation(table: Table, quick: bool) -> None:
    count = 100 if quick else 300
    turns = _turns(count)
    system, turns = turns[0], turns[1:]

    # (a) trim_messages to the window before every turn's request.
    everything = [m for turn in (system, *turns) for m in turn]
    converted = to_langchain(everything)
    lc_of = {id(m): c for m, c in zip(everything, converted, strict=True)}
    back = {id(c): m for m, c in zip(everything, converted, strict=True)}
    history = list(system)
    previous: list[Message] = []
    peer = _Bill()
    for turn in turns:
        history.append(turn[0])
        request = [back[id(m)] for m in _lc_trim([lc_of[id(m)] for m in history], WINDOW)]
        peer.add(request, _shared(previous, request))
        previous = request
        history.extend(turn[1:])

    # (b) the watermark manager, trimming the live context before every request.
    manager = TokenBudgetContextManager(WINDOW)
    ctx = WorkingContext(messages=system)
    before = ctx.freeze()
    ours = _Bill()
    for turn in turns:
        ctx.append(turn[0])
        manager.trim_context(ctx)
        now = ctx.freeze()
        ours.add(now.messages, common_prefix_length(before, now))
        before = now
        ctx.extend(turn[1:])

    size = f"{count} turns, {WINDOW:,}-token window"
    for label, bill in (("(a) trim_messages every turn", peer), ("(b) TokenBudgetContextManager", ours)):
        table.add(
            GROUP,
            f"cache simulation {label}",
            size,
            None,
            note=(
                f"{bill.share:.1%} of {bill.tokens:,} input tokens cached; "
                f"${bill.cost:.2f} at ${FRESH_PER_M:.2f}/M fresh, ${CACHED_PER_M:.2f}/M cached"
            ),
        )
    table.add(
        GROUP,
        "cache simulation: cost (b) / (a)",
        size,
        None,
        note=f"{ours.cost / peer.cost:.2f} (${ours.cost:.2f} vs ${peer.cost:.2f})",
    )


# -- add_messages ----------------------------------------------------------------------


def _add_messages(table: Table, quick: bool) -> None:
    from langchain_core.messages import HumanMessage  # noqa: PLC0415
    from langgraph.graph.message import add_messages as lg_add_messages  # noqa: PLC0415

    sizes = [100, 1_000] if quick else [100, 1_000, 10_000]
    for n in sizes:
        messages = [attrs.evolve(m, id=f"m{i}") for i, m in enumerate(tool_heavy(n))]
        ctx = WorkingContext(messages=messages)
        ctx.has_id("warm")  # the id index is built once, then kept up to date
        fresh = iter([Message("user", f"follow-up {i}", id=f"new{i}") for i in range(7 * 200)])
        ours = measure(partial(_add_next, ctx, fresh), repeat=7, number=200)

        plain = measure(
            partial(add_messages, messages, [Message("user", "follow-up", id="new")]),
            repeat=5,
            number=5,
        )
        lc = to_langchain(messages)
        for message, original in zip(lc, messages, strict=True):
            message.id = str(original.id)
        news: list[Any] = [HumanMessage("follow-up", id="new")]
        peer = measure(partial(lg_add_messages, lc, news), repeat=5, number=3)
        table.add(
            GROUP,
            "add_messages_to(ctx, message)",
            n,
            ours,
            baseline="langgraph add_messages(left, [message])",
            baseline_seconds=peer,
            note="O(1): the context's id index",
        )
        table.add(
            GROUP,
            "add_messages(list, [message])",
            n,
            plain,
            baseline="langgraph add_messages(left, [message])",
            baseline_seconds=peer,
            note="plain function: O(n), a new list",
        )


def _long_task(n: int) -> WorkingContext:
    """
    One user task, then tool turns: *n* messages in one user turn.
    """
    messages = [Message("user", "Migrate every table.")]
    step = 0
    while len(messages) < n:
        messages.append(Message("assistant", tool_calls=(ToolCall(f"s{step}", "run", {"step": step}),)))
        messages.append(Message("tool", f"step {step} done", tool_call_id=f"s{step}"))
        step += 1
    return WorkingContext(messages=messages[:n] if n % 2 == 0 else messages[: n - 1])


def _per_step(ctx: WorkingContext, step: Any, steps: int) -> float:
    """
    Median seconds of ``step(ctx, i)`` over *steps* calls (after one warm-up call).
    """
    step(ctx, -1)
    samples = []
    for i in range(steps):
        start = time.perf_counter()
        step(ctx, i)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _flat(table: Table, quick: bool) -> None:
    sizes = [1_000, 10_000] if quick else [1_000, 10_000, 100_000]
    steps = 50 if quick else 200
    window = MessageContextManager(max_messages=10)
    budget = TokenBudgetContextManager(10**9)

    def turn(ctx: WorkingContext, i: int) -> None:
        ctx.append(
            Message("assistant", tool_calls=(ToolCall(f"n{i}", "run", {}),)),
            Message("tool", "done", tool_call_id=f"n{i}"),
        )

    def window_step(ctx: WorkingContext, i: int) -> None:
        turn(ctx, i)
        window.trim_context(ctx)

    def budget_step(ctx: WorkingContext, i: int) -> None:
        turn(ctx, i)
        budget.trim_context(ctx)

    scope = TokenBudget(2_000)

    def one_call_step(ctx: WorkingContext, i: int) -> None:
        ctx.append(Message("tool", f"part {i}", tool_call_id="c0"))
        surviving_indices(scope, ctx.tail_view())

    for n in sizes:
        seconds = _per_step(_long_task(n), window_step, steps)
        table.add(GROUP, "append + MessageContextManager(10), no cut", n, seconds, note="per step: flat")
        seconds = _per_step(_long_task(n), budget_step, steps)
        table.add(GROUP, "append + TokenBudgetContextManager, below", n, seconds, note="per step: flat")
        many = [Message("user", "Stream it."), Message("assistant", tool_calls=(ToolCall("c0", "stream", {}),))]
        many += [Message("tool", f"part {j}", tool_call_id="c0") for j in range(n - 2)]
        seconds = _per_step(WorkingContext(messages=many), one_call_step, steps)
        table.add(GROUP, "append result of one call + TokenBudget index", n, seconds, note="per step: flat")


def run(table: Table, quick: bool) -> None:
    """
    Every manager and reducer row, with the peers measured in the same run.
    """
    _flat(table, quick)
    _speed(table, quick)
    _add_messages(table, quick)
    _cache_simulation(table, quick)
    _validity(table, quick)
