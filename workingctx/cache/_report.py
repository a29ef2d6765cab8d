"""
What one request reads from the cache the previous one left, and what it costs: :func:`report`.
"""

from __future__ import annotations

from decimal import Decimal

import attrs

from workingctx.cache._layout import keys, last_tokens
from workingctx.cache._plan import CachePlan, plan
from workingctx.cache._rules import rules_for
from workingctx.cache._served import Served, SimulatedCache, checked_seconds
from workingctx.context import WorkingContext
from workingctx.exceptions import CacheRuleError
from workingctx.messages import Usage
from workingctx.pricing import cost as _price
from workingctx.snapshot import FrozenContext
from workingctx.tokens import MessageCounter

__all__ = ["CacheReport", "report", "request_tokens", "sent_usage"]


@attrs.frozen
class CacheReport:
    """
    What one request is expected to read from and write to the cache, in tokens and dollars.

    Attributes:
        shared_tokens: Tokens at the start of this request that the previous
            request had too (whole messages).
        input_tokens: All input tokens of this request.
        usage: The expected usage (input only: the output is not known yet).
        cost: Its input cost in dollars.
        uncached_cost: The same input with no cache at all.
        lookback_miss_tokens: Tokens a cache entry held that no breakpoint's
            lookback reached, so they were paid again.
        expired_tokens: Tokens a cache entry held that had expired (older
            than its lifetime) before the request, beyond what a live entry
            held, so they were paid again.
    """

    shared_tokens: int
    input_tokens: int
    usage: Usage
    cost: Decimal
    uncached_cost: Decimal
    lookback_miss_tokens: int = 0
    expired_tokens: int = 0

    @property
    def saved(self) -> Decimal:
        """
        Dollars saved against sending the request uncached.
        """
        return self.uncached_cost - self.cost

    @property
    def cached_share(self) -> float:
        """
        The share of input tokens read from the cache.
        """
        return self.usage.cache_read_tokens / self.input_tokens if self.input_tokens else 0.0


def _as_plan(
    source: object, provider: str, model: str, previous: CachePlan | None, counter: MessageCounter | None
) -> CachePlan:
    if isinstance(source, CachePlan):
        if (source.provider, source.model) != (provider, model):
            msg = (
                f"the plan was made for {source.provider} {source.model}, not {provider} {model}; "
                "plan again with the same provider and model"
            )
            raise CacheRuleError(msg)
        return source
    return plan(source, provider=provider, model=model, previous=previous, counter=counter)  # type: ignore[arg-type]


def report(
    previous: WorkingContext | FrozenContext | CachePlan,
    current: WorkingContext | FrozenContext | CachePlan,
    *,
    provider: str,
    model: str,
    counter: MessageCounter | None = None,
    elapsed: float = 0,
) -> CacheReport:
    """
    What *current* will read from the cache *previous* left, and what it will cost.

    Either side is a context, a snapshot, or the :class:`CachePlan` it is sent
    with; a context or snapshot is planned with :func:`plan` (the current one
    with the previous one's plan). *elapsed* is the seconds from the previous
    request to the current one: an entry the previous request wrote that is
    older than its lifetime by then (:attr:`CacheRules.lifetimes`) is written again.

    Raises:
        CacheRuleError: an unknown provider, a plan made for another model, or
            a negative or non-finite *elapsed*.
        PricingError: *model* has no price.
    """
    rules = rules_for(provider, model)
    wait = checked_seconds(elapsed, "elapsed")
    before = _as_plan(previous, provider, model, None, counter)
    after = _as_plan(current, provider, model, before, counter)
    cache = SimulatedCache(rules, rules.minimum_for(model), prefixes=False)
    cache.send(before, 0.0)
    served = cache.send(after, wait)
    held = set(keys(before._layout))
    later = after._layout
    shared = max((later[i].tokens for i, key in enumerate(keys(later)) if key in held), default=0)
    return _report(model, request_tokens(after), shared, served)


def request_tokens(request: CachePlan) -> int:
    """
    The input tokens of *request*: a plan built by hand may leave total_tokens out, its layout knows them.
    """
    return last_tokens(request._layout) if request._layout else request.total_tokens


def sent_usage(total: int, served: Served, output: int = 0) -> Usage:
    """
    The usage of a request of *total* input tokens the cache served as *served*, with *output* tokens out.
    """
    written = served.written_5m + served.written_1h
    return Usage(
        input_tokens=max(0, total - served.read - written),
        output_tokens=output,
        cache_read_tokens=served.read,
        cache_write_tokens=written,
        cache_write_1h_tokens=served.written_1h,
    )


def _report(model: str, total: int, shared: int, served: Served) -> CacheReport:
    usage = sent_usage(total, served)
    return CacheReport(
        shared_tokens=shared,
        input_tokens=total,
        usage=usage,
        cost=_price(model, usage),
        uncached_cost=_price(model, Usage(input_tokens=total)),
        lookback_miss_tokens=served.missed,
        expired_tokens=served.expired,
    )
