"""
Prompt-cache economics: a long tool-heavy agent run under Anthropic's and OpenAI's caching rules.

A 300-turn tool-heavy conversation (a request before every assistant message)
behind a 20,000-token frozen prefix, in a 30,000-token window, replayed with
``workingctx.cache.simulate`` under each provider's rules (minimums, Anthropic's
20-block lookback, OpenAI's 1,024-token start and 128-token steps), three ways:

(a) LangChain's ``trim_messages`` to the window before every request, with one
    five-minute breakpoint on the last block (what LangChain's Anthropic prompt
    caching middleware does);
(b) ``TokenBudgetContextManager`` (cuts only past the window, down to 25,000
    tokens) with the provider's automatic caching alone;
(c) the same manager with breakpoints from ``workingctx.cache.plan``;
(d) the same with ``plan(..., tail_ttl="1h")``: every breakpoint written for an
    hour, dearer to write, but it outlives a pause.

Each row reports the share of input tokens read from the cache, the run's
total cost (input and output), its input cost against (a)'s, the lowest input
cost any cache plan could reach for the same requests (``best_input_cost``:
everything an earlier request sent read from the cache, the rest paid as fresh
input), and how many requests paid again for tokens a cache entry held because
no breakpoint's lookback reached it. Models: claude-sonnet-4-6 and gpt-5, at
the built-in prices.

The first rows let no time pass, so nothing expires. The rows marked "paused"
replay the same run with time: 20 seconds from each request to the next, and a
10-minute pause every 25 requests (the user is away), so five-minute entries
expire; they also count the requests that paid again because an entry had expired.

The turns of the transcript ask for one to three tool calls at a time, so no
request adds more blocks than Anthropic's lookback reaches. The rows marked
"12 parallel calls" replay a run whose every turn asks for twelve calls at
once (25 new blocks before the answer), under Anthropic's rules, where the
lookback decides what is read.

The first rows say how ``simulate`` scales: its time per request over
``tool_heavy`` runs of 1,000, 10,000 and 40,000 messages (the quick run stops
at 10,000), with a 30,000-token ``TokenBudgetContextManager`` cutting at every
request past the window (low watermark = window), and with no manager; the
ratio compares each size with the first (near 1.0x: the cost per request does
not grow with the run). The first 450 or so messages of a run fit the window
uncut, so the 1,000-message run cuts at fewer of its requests: cheaper per
request; from 10,000 messages on nearly every request is a cut.

The rows "workingctx replay" time the command line per turn on a tool-heavy
transcript of 1,000, 10,000 and 40,000 turns (four messages a turn; quick:
500 and 2,000) written as one Anthropic request body, with ``--window 100000``
and without a window: with one it reads the file and replays it under its
three strategies (the whole history; trimming to the window every turn; the
watermark manager), without one under the first alone, priced with
claude-sonnet-4-5 through genai-prices. The ratio compares each size with the
first (near 1.0x: the cost per turn does not grow with the transcript).

The row "pricing.cost" times ``workingctx.pricing.cost`` on claude-sonnet-4-5
(a model only genai-prices' data prices, with prices tiered by input size)
against genai-prices' own ``calc_price`` on the same usage (the peer); the two
amounts are checked equal first. The replay prices every request it simulates
so.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import random
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import genai_prices

from benchmarks._data import _call, _sentence, to_langchain, tool_heavy
from benchmarks._harness import Table, measure
from workingctx import Message, PrefixContext, Usage, WorkingContext, cli
from workingctx.adapters import anthropic
from workingctx.cache import CachePlan, Simulation, Strategy, plan, simulate
from workingctx.managers import TokenBudgetContextManager
from workingctx.pricing import cost

GROUP = "cache"
PREFIX_TOKENS = 20_000
WINDOW = 30_000
LOW = 25_000
MODELS = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-5"}
STEP_SECONDS = 20
PAUSE_SECONDS = 600
PAUSE_EVERY = 25


def paused() -> Iterator[float]:
    """
    Seconds between requests: 20, with a 10-minute pause after every 25th request.
    """
    for n in itertools.count(1):
        yield PAUSE_SECONDS if n % PAUSE_EVERY == 0 else STEP_SECONDS


def _prefix_text() -> str:
    # Four characters make one token for the approximate counter.
    line = "Reference: the service catalogue, runbooks and escalation policy, section by section. "
    text = line * (PREFIX_TOKENS * 4 // len(line) + 1)
    return text[: PREFIX_TOKENS * 4]


def _turns(count: int) -> list[list[Message]]:
    """
    *count* tool-heavy turns, each starting at its user message (no system message).
    """
    turns: list[list[Message]] = []
    for message in tool_heavy(40 * count)[1:]:
        if message.role == "user":
            if len(turns) == count:
                break
            turns.append([])
        if turns:
            turns[-1].append(message)
    return turns


def _wide_turns(count: int, fan_out: int = 12) -> list[list[Message]]:
    """
    *count* turns that each ask for *fan_out* tool calls at once, then answer.
    """
    rng = random.Random(14)
    turns: list[list[Message]] = []
    for t in range(count):
        pairs = [_call(rng, f"wide_{t}_{k}") for k in range(fan_out)]
        turns.append(
            [
                Message("user", _sentence(rng, rng.randint(6, 18)).rstrip(".") + "?"),
                Message("assistant", tool_calls=tuple(call for call, _ in pairs)),
                *(Message("tool", result, tool_call_id=call.id, name=call.name) for call, result in pairs),
                Message("assistant", " ".join(_sentence(rng, rng.randint(8, 20)) for _ in range(3))),
            ]
        )
    return turns


class _TrimMessages:
    """
    LangChain's ``trim_messages`` to the window before every request, as a manager.
    """

    def __init__(self, messages: Sequence[Message], window: int) -> None:
        converted = to_langchain(list(messages))
        self._to_lc = {id(m): c for m, c in zip(messages, converted, strict=True)}
        self._back = {id(c): m for m, c in zip(messages, converted, strict=True)}
        self.window = window

    def trim_context(self, ctx: WorkingContext) -> WorkingContext:
        from langchain_core.messages import trim_messages  # noqa: PLC0415
        from langchain_core.messages.utils import count_tokens_approximately  # noqa: PLC0415

        kept = trim_messages(
            [self._to_lc[id(m)] for m in ctx.messages],
            strategy="last",
            token_counter=count_tokens_approximately,
            max_tokens=self.window,
            start_on="human",
            include_system=True,
        )
        ctx.replace_tail(self._back[id(c)] for c in kept)
        return ctx


def run_strategy(
    strategy: str, provider: str, turns: list[list[Message]], gaps: Iterator[float] | None = None
) -> Simulation:
    """
    One of the strategies, (a) to (d), under *provider*'s rules, with
    *gaps* seconds between requests (None: no time passes).
    """
    model = MODELS[provider]
    flat = [m for turn in turns for m in turn]
    if strategy == "a":
        system = Message("system", _prefix_text())
        return simulate(
            flat,
            provider=provider,
            model=model,
            manager=_TrimMessages([system, *flat], WINDOW),
            context=WorkingContext(messages=[system]),
            cache="last",
            gaps=gaps,
        )
    manager = TokenBudgetContextManager(WINDOW, low_watermark=LOW)
    context = WorkingContext(prefix=PrefixContext(system_prompt=_prefix_text()))

    def long_tail(ctx: WorkingContext, previous: CachePlan | None) -> CachePlan:
        return plan(ctx, provider=provider, model=model, previous=previous, tail_ttl="1h")

    strategies: dict[str, Strategy] = {"b": "auto", "c": "plan", "d": long_tail}
    return simulate(
        flat,
        provider=provider,
        model=model,
        manager=manager,
        context=context,
        cache=strategies[strategy],
        gaps=gaps,
    )


LABELS = {
    "a": "(a) trim_messages every turn, breakpoint on last message",
    "b": "(b) watermark manager, automatic caching",
    "c": "(c) watermark manager, plan()",
    "d": "(d) watermark manager, plan(tail_ttl='1h')",
}
STRATEGIES = "abcd"


def results(
    count: int, *, pauses: bool = False, wide: bool = False, providers: Sequence[str] = tuple(MODELS)
) -> dict[tuple[str, str], Simulation]:
    """
    Every strategy under each of *providers*' rules, over *count* turns (of
    twelve parallel calls each when *wide*), with :func:`paused` gaps between
    requests when *pauses*.
    """
    turns = _wide_turns(count) if wide else _turns(count)
    return {
        (provider, s): run_strategy(s, provider, turns, paused() if pauses else None)
        for provider in providers
        for s in STRATEGIES
    }


SCENARIOS: tuple[tuple[str, Callable[[int], dict[tuple[str, str], Simulation]]], ...] = (
    ("", results),
    (", paused", lambda count: results(count, pauses=True)),
    (", 12 parallel calls", lambda count: results(count, wide=True, providers=("anthropic",))),
)


SCALING_SIZES = (1_000, 10_000, 40_000)
"""Messages of the runs the scaling rows replay (the quick run stops at 10,000)."""
SCALING_WINDOW = 30_000
"""The window of the scaling rows: cut down to it at every request past it (low watermark = window)."""


def per_request(messages: int, window: int | None) -> tuple[float, int]:
    """
    Seconds per request of ``simulate`` over :func:`tool_heavy` (*messages*), with
    a token-budget manager of *window* tokens cutting at every request past it
    (None: no manager), and the number of requests.
    """
    msgs = tool_heavy(messages)
    manager = None if window is None else TokenBudgetContextManager(window, low_watermark=window)
    start = time.perf_counter()
    sim = simulate(msgs, provider="anthropic", model="claude-sonnet-4-6", manager=manager, context=WorkingContext())
    return (time.perf_counter() - start) / len(sim.requests), len(sim.requests)


def scaling(table: Table, quick: bool) -> None:
    """
    Rows of ``simulate``'s cost per request as the run grows, with and without a
    window; each row's baseline is the same replay at the first size, so a ratio
    near 1.0x means the cost per request does not grow with the run.
    """
    sizes = SCALING_SIZES[:2] if quick else SCALING_SIZES
    for window in (SCALING_WINDOW, None):
        label = "no manager" if window is None else f"{window:,}-token window cut at every request"
        first: float | None = None
        for messages in sizes:
            seconds, requests = per_request(messages, window)
            first = seconds if first is None else first
            table.add(
                GROUP,
                f"simulate per request, {label}",
                f"{messages:,} msgs",
                seconds,
                baseline=f"same at {sizes[0]:,} msgs",
                baseline_seconds=first,
                note=f"{requests:,} requests",
            )


REPLAY_TURNS = (1_000, 10_000, 40_000)
"""Turns of the command-line replay rows (four messages a turn)."""
REPLAY_QUICK_TURNS = (500, 2_000)
"""Turns of the command-line replay rows in a quick run."""
REPLAY_WINDOW = 100_000


def replay_seconds(messages: int, directory: Path, window: int | None = REPLAY_WINDOW) -> float:
    """
    Wall seconds of ``workingctx replay FILE --window 100000 --json`` (with
    *window* None, without ``--window``) on an Anthropic request body holding
    :func:`tool_heavy` (*messages*), in this process (the file's reading,
    every strategy, the facts written out).
    """
    ctx = WorkingContext()
    ctx.extend(tool_heavy(messages))
    body = anthropic.write(ctx)
    body["model"] = "claude-sonnet-4-5"
    path = directory / f"run-{messages}.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    argv = ["replay", str(path), "--json"]
    if window is not None:
        argv += ["--window", str(window)]
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        status = cli.main(argv)
    seconds = time.perf_counter() - start
    assert status == 0, status
    return seconds


def replay_scaling(table: Table, quick: bool) -> None:
    """
    Rows of the command line's ``replay`` time per turn (four messages) as the
    transcript grows, with ``--window 100000`` and without a window; the
    baseline is the same at the first size.
    """
    sizes = REPLAY_QUICK_TURNS if quick else REPLAY_TURNS
    with tempfile.TemporaryDirectory() as directory:
        for window in (REPLAY_WINDOW, None):
            label = "no window" if window is None else f"--window {window:,}"
            strategies = "the whole history alone" if window is None else "three strategies"
            first: float | None = None
            for turns in sizes:
                per_turn = replay_seconds(4 * turns, Path(directory), window) / turns
                first = per_turn if first is None else first
                table.add(
                    GROUP,
                    f"workingctx replay {label}, per turn",
                    f"{turns:,} turns",
                    per_turn,
                    baseline=f"same at {sizes[0]:,} turns",
                    baseline_seconds=first,
                    note=f"{strategies}, claude-sonnet-4-5 (genai-prices); target <= 0.5 ms per turn",
                )


PRICING_MODEL = "claude-sonnet-4-5"
PRICING_USAGE = Usage(input_tokens=1_200, output_tokens=300, cache_read_tokens=40_000, cache_write_tokens=2_000)


def pricing_row(table: Table) -> None:
    """
    A row of ``pricing.cost`` on a model genai-prices prices, against
    ``genai_prices.calc_price`` on the same usage (the same amount, checked).
    """
    usage = PRICING_USAGE
    # genai-prices counts every input token as input_tokens, cache reads and writes included.
    theirs = genai_prices.Usage(
        input_tokens=usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )
    amount = cost(PRICING_MODEL, usage)
    assert amount == genai_prices.calc_price(theirs, PRICING_MODEL).total_price, amount
    number = 2_000
    ours = measure(lambda: cost(PRICING_MODEL, usage), number=number)
    peer = measure(lambda: genai_prices.calc_price(theirs, PRICING_MODEL), number=number)
    table.add(
        GROUP,
        f"pricing.cost on {PRICING_MODEL} (genai-prices data, tiered)",
        "1 call",
        ours,
        baseline="genai_prices.calc_price",
        baseline_seconds=peer,
        note=f"same amount (${amount}); the replay prices every simulated request so",
    )


def run(table: Table, quick: bool) -> None:
    pricing_row(table)
    scaling(table, quick)
    replay_scaling(table, quick)
    count = 60 if quick else 300
    size = f"{count} turns, {PREFIX_TOKENS:,}-token prefix, {WINDOW:,}-token window"
    for suffix, scenario in SCENARIOS:
        runs = scenario(count)
        for provider, model in MODELS.items():
            if (provider, "a") not in runs:
                continue
            base = runs[(provider, "a")]
            for strategy in STRATEGIES:
                sim = runs[(provider, strategy)]
                expiry = f"; {sim.expiry_misses} expiry misses" if "paused" in suffix else ""
                table.add(
                    GROUP,
                    f"{provider} {LABELS[strategy]}{suffix}",
                    size,
                    None,
                    note=(
                        f"{len(sim.requests)} requests, {sim.cached_share:.1%} of {sim.input_tokens:,} input tokens "
                        f"read from cache; ${sim.cost:.2f} on {model} (uncached ${sim.uncached_cost:.2f}); "
                        f"input ${sim.input_cost:.2f}, {sim.input_cost / base.input_cost:.1%} of (a)'s "
                        f"(best any plan: {sim.best_input_cost / base.input_cost:.1%}); "
                        f"{sim.lookback_misses} lookback misses{expiry}"
                    ),
                )
