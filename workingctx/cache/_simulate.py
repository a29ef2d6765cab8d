"""
A whole run replayed request by request under a provider's cache: :func:`simulate`.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable, Iterator
from decimal import Decimal
from typing import Any, Literal, TypeAlias

import attrs

from workingctx import _checks
from workingctx.cache._layout import per_message
from workingctx.cache._plan import CachePlan, _breakpoint, laid_out, last_carrying_index, plan
from workingctx.cache._report import request_tokens, sent_usage
from workingctx.cache._rules import rules_for
from workingctx.cache._served import SimulatedCache, checked_seconds
from workingctx.context import WorkingContext
from workingctx.exceptions import ArgumentTypeError, CacheRuleError
from workingctx.messages import Message, Usage
from workingctx.pricing import Price, find_price
from workingctx.pricing import cost as _price
from workingctx.tokens import MessageCounter

__all__ = ["SimulatedRequest", "Simulation", "Strategy", "simulate"]


@attrs.frozen
class SimulatedRequest:
    """
    One request of a simulated run: its usage (output included) and cost.

    Attributes:
        at: When it was sent, in seconds since the run's first request.
        lookback_miss_tokens: Tokens a live cache entry held that no
            breakpoint's lookback reached, so they were paid again.
        expired_tokens: Tokens a cache entry held that had expired before
            the request, beyond what a live entry held, so they were paid again.
        best_input_cost: The input cost if the request read from the cache
            everything an earlier request of the run sent, and paid for the
            rest as fresh input.
    """

    usage: Usage
    cost: Decimal
    input_cost: Decimal
    uncached_cost: Decimal
    uncached_input_cost: Decimal
    breakpoints: int
    lookback_miss_tokens: int
    at: float = 0.0
    expired_tokens: int = 0
    best_input_cost: Decimal = Decimal(0)


@attrs.frozen
class Simulation:
    """
    A replayed run: every request, and the totals.
    """

    requests: tuple[SimulatedRequest, ...]

    @property
    def usage(self) -> Usage:
        """
        The usage of every request added up.
        """
        # each count added up on its own: the same sums as adding the usages, without a Usage per step
        usages = [request.usage for request in self.requests]
        return Usage(*(sum(map(operator.attrgetter(field.name), usages)) for field in attrs.fields(Usage)))

    @property
    def cost(self) -> Decimal:
        """
        What the run cost, in dollars.
        """
        return sum((r.cost for r in self.requests), Decimal(0))

    @property
    def input_cost(self) -> Decimal:
        """
        What the run's input cost, in dollars (cache reads and writes included).
        """
        return sum((r.input_cost for r in self.requests), Decimal(0))

    @property
    def uncached_cost(self) -> Decimal:
        """
        What the same requests would have cost with no cache.
        """
        return sum((r.uncached_cost for r in self.requests), Decimal(0))

    @property
    def uncached_input_cost(self) -> Decimal:
        """
        What the same requests' input would have cost with no cache.
        """
        return sum((r.uncached_input_cost for r in self.requests), Decimal(0))

    @property
    def input_tokens(self) -> int:
        """
        Every input token of every request.
        """
        usage = self.usage
        return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens

    @property
    def cached_share(self) -> float:
        """
        The share of input tokens read from the cache.
        """
        usage = self.usage  # added up once
        total = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        return usage.cache_read_tokens / total if total else 0.0

    @property
    def lookback_misses(self) -> int:
        """
        How many requests paid again for tokens a cache entry held, because
        no breakpoint's lookback reached it.
        """
        return sum(1 for r in self.requests if r.lookback_miss_tokens)

    @property
    def expiry_misses(self) -> int:
        """
        How many requests paid again for tokens a cache entry held, because
        the entry had expired (it was older than its lifetime) when they were sent.
        """
        return sum(1 for r in self.requests if r.expired_tokens)

    @property
    def best_input_cost(self) -> Decimal:
        """
        The lowest input cost any cache plan could reach for these same
        requests: each reads from the cache everything an earlier request
        sent, and pays for the rest as fresh input, with no write premium and
        nothing expired. :attr:`input_cost` is never below it (at prices where
        a read costs no more than fresh input and a write no less).
        """
        return sum((r.best_input_cost for r in self.requests), Decimal(0))


Strategy: TypeAlias = Literal["plan", "auto", "last"] | Callable[[WorkingContext, "CachePlan | None"], CachePlan]


def _flatten(turns: Iterable[Message | Iterable[Message]]) -> Iterable[Message]:
    for turn in turns:
        if isinstance(turn, Message):
            yield turn
        elif isinstance(turn, str | bytes) or not isinstance(turn, Iterable):
            msg = f"turns must hold messages or sequences of messages, got {_checks.described(turn)}"
            raise ArgumentTypeError(msg, argument="turns", value=turn, expected="messages or sequences of messages")
        else:
            for message in turn:
                if not isinstance(message, Message):
                    msg = f"a turn holds {_checks.described(message)}, not a Message"
                    raise ArgumentTypeError(msg, argument="turns", value=message, expected="a Message")
                yield message


def _strategy_plan(
    strategy: Strategy,
    ctx: WorkingContext,
    provider: str,
    model: str,
    previous: CachePlan | None,
    counter: MessageCounter | None,
) -> CachePlan:
    if strategy == "plan":
        return plan(ctx, provider=provider, model=model, previous=previous, counter=counter)
    # "auto" and "last" lay the request out as plan() does with *previous* (only
    # what the request added to the one before), and place their own breakpoints.
    if strategy == "auto":
        return laid_out(
            ctx, provider, model, previous, automatic=True, prefix_ttl="5m", counter=counter, tail_ttl="5m"
        ).made(())
    if strategy == "last":
        laid = laid_out(
            ctx, provider, model, previous, automatic=False, prefix_ttl="5m", counter=counter, tail_ttl="5m"
        )
        layout, rules = laid.layout, laid.rules
        at = last_carrying_index(layout, layout.message_at(len(layout) - 1) + 1) if layout else None
        room = len(laid.carrying) < rules.max_breakpoints
        if at is None or not room or not rules.explicit:
            return laid.made((), ())
        tail = layout[at]
        if tail.preset is None and tail.tokens >= rules.minimum_for(model):
            return laid.made((_breakpoint(tail.message, tail.block, "5m", tail.tokens),), ((at, tail, "5m"),))
        return laid.made((), ())
    if callable(strategy):
        made = strategy(ctx, previous)
        if not isinstance(made, CachePlan):
            msg = f"the cache strategy must return a CachePlan, got {made!r}"
            raise ArgumentTypeError(msg, argument="cache", value=strategy, expected="a strategy returning a CachePlan")
        return made
    msg = f"cache must be 'plan', 'auto', 'last' or a callable (ctx, previous_plan) -> CachePlan, got {strategy!r}"
    raise CacheRuleError(msg)


def _gaps(gaps: object) -> Iterator[float] | None:
    """
    The gaps between requests as an iterator of seconds (a number repeats), or None.
    """
    if gaps is None:
        return None
    if isinstance(gaps, int | float | Decimal) and not isinstance(gaps, bool):
        return itertools.repeat(checked_seconds(gaps, "gaps"))
    if isinstance(gaps, str | bytes) or not isinstance(gaps, Iterable):
        msg = (
            "gaps must be a number of seconds, an iterable of them (one per gap between requests) or None, "
            f"got {gaps!r} of type {type(gaps).__name__}"
        )
        raise ArgumentTypeError(msg, argument="gaps", value=gaps, expected="seconds, an iterable of them or None")
    return iter(gaps)


def _next_gap(waits: Iterator[float] | None, sent: int) -> float:
    """
    The gap before request number *sent* (counting from 0), checked.
    """
    if waits is None:
        return 0.0
    try:
        gap = next(waits)
    except StopIteration:
        msg = (
            f"gaps ran out after {sent} requests; give one gap per request after the first "
            "(an endless iterator will do), or one number for every gap"
        )
        raise CacheRuleError(msg) from None
    return checked_seconds(gap, f"gaps[{sent - 1}]")


_Costs: TypeAlias = tuple[Decimal, Decimal, Decimal, Decimal, Decimal]


def _pricer(model: str) -> Callable[[int, int, int, int, int, int], _Costs]:
    """
    The costs of a request of *model* from its counts (fresh input, output,
    cache read, five-minute and one-hour writes, and the tokens an earlier
    request sent): its cost, its input's cost, both uncached, and its best
    input cost. A price in the table is found once for the run; otherwise each
    request is priced by name (genai-prices' prices may change with the time
    of day), as is a price of a subclass of :class:`~workingctx.pricing.Price`
    with a ``cost`` of its own.
    """
    price = find_price(model)
    if price is not None and type(price).cost is Price.cost:
        return price._request_costs  # the counts are the simulation's own, checked when it made them

    def by_name(fresh: int, output: int, read: int, write_5m: int, write_1h: int, known: int) -> _Costs:
        def priced(fresh: int, output: int, read: int, write_5m: int = 0, write_1h: int = 0) -> Decimal:
            usage = Usage(
                input_tokens=fresh,
                output_tokens=output,
                cache_read_tokens=read,
                cache_write_tokens=write_5m + write_1h,
                cache_write_1h_tokens=write_1h,
            )
            return _price(model, usage)

        total = fresh + read + write_5m + write_1h
        return (
            priced(fresh, output, read, write_5m, write_1h),
            priced(fresh, 0, read, write_5m, write_1h),
            priced(total, output, 0),
            priced(total, 0, 0),
            priced(total - known, 0, known),
        )

    return by_name


def simulate(
    turns: Iterable[Message | Iterable[Message]],
    *,
    provider: str,
    model: str,
    manager: Any = None,
    context: WorkingContext | None = None,
    cache: Strategy = "plan",
    counter: MessageCounter | None = None,
    gaps: float | Iterable[float] | None = None,
) -> Simulation:
    """
    Replay a run request by request and say what each request cost under *provider*'s cache.

    The messages of *turns* are appended to *context* (a new empty context by
    default) in order; before each assistant message the run makes a request:
    *manager* (anything with ``trim_context(ctx)``) trims the context, the
    request is planned with *cache*, served by a simulated cache that follows
    the provider's rules (minimums, lookback, steps), and the assistant
    message is its output (its ``usage.output_tokens`` when set, else its
    counted tokens).

    With *gaps*, time passes between requests: a cache entry older than its
    lifetime when a request is sent (five minutes or an hour for Anthropic,
    five idle minutes for OpenAI and Gemini; see :attr:`CacheRules.lifetimes`)
    is gone, and what it held is written again. A read renews the entry it
    reads. Without *gaps* no time passes and nothing expires.

    Args:
        turns: Messages, or sequences of messages, in order.
        provider: ``"anthropic"``, ``"openai"`` or ``"gemini"``.
        model: The model name (its price must be known).
        manager: A context manager run before each request, or None.
        context: The context to start from (its prefix included); it is changed.
        cache: ``"plan"`` (:func:`plan` with the previous plan), ``"auto"``
            (only the provider's automatic breakpoint), ``"last"`` (one
            five-minute breakpoint on the last block), or a callable
            ``(ctx, previous_plan) -> CachePlan``.
        counter: The token counter (default: the context's).
        gaps: Seconds from each request to the next: one number for every
            gap, or an iterable with one per gap in order (it may be endless;
            the first request is sent at 0). None: no time passes.

    Raises:
        CacheRuleError: an unknown provider or strategy, a negative or
            non-finite gap, or fewer gaps than the run needs.
        PricingError: *model* has no price.
        TypeError: a gap that is not a number.
    """
    rules = rules_for(provider, model)
    waits = _gaps(gaps)
    ctx = WorkingContext() if context is None else context
    ctx = _checks.check_instance(ctx, "context", WorkingContext, "a WorkingContext or None")
    if manager is not None and not callable(getattr(manager, "trim_context", None)):
        raise _checks.wrong_type(manager, "manager", "a manager with trim_context(ctx)")
    counter = counter or ctx.counter
    count = per_message(counter)
    served = SimulatedCache(rules, rules.minimum_for(model))
    price = _pricer(model)
    previous: CachePlan | None = None
    requests: list[SimulatedRequest] = []
    now = 0.0
    for message in _flatten(turns):
        if message.role == "assistant":
            if manager is not None:
                manager.trim_context(ctx)
            made = _strategy_plan(cache, ctx, provider, model, previous, counter)
            if requests:
                now += _next_gap(waits, len(requests))
            result = served.send(made, now)
            output = message.usage.output_tokens if message.usage is not None else count(message)
            # the usage's counts add up to the request's tokens, which its uncached costs price
            usage = sent_usage(request_tokens(made), result, output)
            costs = price(
                usage.input_tokens,
                output,
                usage.cache_read_tokens,
                usage.cache_write_5m_tokens,
                usage.cache_write_1h_tokens,
                result.known,  # what an earlier request sent, for the best cost
            )
            requests.append(
                SimulatedRequest(
                    usage=usage,
                    cost=costs[0],
                    input_cost=costs[1],
                    uncached_cost=costs[2],
                    uncached_input_cost=costs[3],
                    breakpoints=len(made.breakpoints) + (1 if made.automatic and rules.explicit else 0),
                    lookback_miss_tokens=result.missed,
                    at=now,
                    expired_tokens=result.expired,
                    best_input_cost=costs[4],
                )
            )
            previous = made
        ctx.append(message)
    return Simulation(tuple(requests))
