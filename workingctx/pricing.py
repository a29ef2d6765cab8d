"""
Prices: what a model call cost, in US dollars, from its :class:`~workingctx.Usage`.

:func:`cost` looks the model up in a small built-in table of per-million-token
prices (fresh input, output, cache read, five-minute and one-hour cache
writes), in the prices you added with :func:`add_price`, and, when the
``workingctx[prices]`` extra is installed, in the ``genai-prices`` package,
which knows most other models. The table holds the models people use (GPT-4.1,
GPT-4o, o3, o4-mini, GPT-5, Claude 4, Gemini 2.x), so they are priced without
it. Amounts are :class:`~decimal.Decimal`, so sums over thousands of calls do
not drift. A genai-prices amount is the one its own calculation gives, to the
digit; for the usual price shapes workingctx works it out itself, some twenty
times faster.

A 20,000-token prefix re-sent on each of 30 turns, fresh and then read from
the cache:

>>> from workingctx import Usage
>>> fresh = Usage(input_tokens=20_000, output_tokens=200)
>>> cached = Usage(output_tokens=200, cache_read_tokens=20_000)
>>> round(cost("claude-sonnet-4-6", fresh) * 30, 2), round(cost("claude-sonnet-4-6", cached) * 30, 2)
(Decimal('1.89'), Decimal('0.27'))
"""

from __future__ import annotations

import difflib
import functools
import re
import threading
from collections.abc import Mapping
from datetime import UTC, date, datetime
from decimal import Decimal
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs

from workingctx import _checks
from workingctx.exceptions import PricingError
from workingctx.messages import Usage

if TYPE_CHECKING:
    from genai_prices.data_snapshot import DataSnapshot
    from genai_prices.types import ModelInfo

__all__ = [
    "BUILTIN_PRICES",
    "PRICES_AS_OF",
    "Price",
    "add_price",
    "close_names",
    "context_window",
    "cost",
    "find_price",
    "prices",
    "remove_price",
]

PRICES_AS_OF = "2026-12-04"
"""The day the built-in prices were checked against the providers' price pages."""

_MTOK = Decimal(1_000_000)


def _decimal(value: object, name: str) -> Decimal:
    where = f"Price({name}=...)"
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise _checks.wrong_type(value, name, "a number (dollars per million tokens)", label=where)
    try:
        amount = Decimal(str(value)) if isinstance(value, float) else Decimal(value)
    except ArithmeticError:
        problem = "must be a number (dollars per million tokens)"
        raise _checks.wrong_value(value, name, problem, label=where, error=PricingError) from None
    if not amount.is_finite() or amount < 0:
        problem = "must be a finite, non-negative number of dollars per million tokens"
        raise _checks.wrong_value(value, name, problem, label=where, error=PricingError)
    return amount


def _opt_decimal(value: object, name: str) -> Decimal | None:
    return None if value is None else _decimal(value, name)


def _input(value: object) -> Decimal:
    return _decimal(value, "input")


def _output(value: object) -> Decimal:
    return _decimal(value, "output")


def _cache_read(value: object) -> Decimal | None:
    return _opt_decimal(value, "cache_read")


def _cache_write_5m(value: object) -> Decimal | None:
    return _opt_decimal(value, "cache_write_5m")


def _cache_write_1h(value: object) -> Decimal | None:
    return _opt_decimal(value, "cache_write_1h")


_opt_tier_start = _checks.integer(minimum=1, optional=True, fix="a count of input tokens", error=PricingError)


@attrs.frozen
class Price:
    """
    A model's prices in US dollars per million tokens.

    Args:
        input: Fresh (uncached) input.
        output: Output, reasoning included.
        cache_read: Input read from the prompt cache.
        cache_write_5m: Input written to the cache for five minutes; the
            input price when left out (providers that do not charge writes).
        cache_write_1h: Input written to the cache for an hour; the
            five-minute write price when left out.
        long_context_above: When a request's input (fresh, read and written)
            exceeds this many tokens, every token of it is billed at
            *long_context* instead (Anthropic's and OpenAI's long-context rates).
        long_context: The prices above *long_context_above*.

    Raises:
        PricingError: a negative or non-finite price, or only one of
            *long_context_above* and *long_context*.
        TypeError: a price that is not a number.

    >>> Price(3, 15, cache_read=0.3, cache_write_5m=3.75, cache_write_1h=6).cache_write_1h
    Decimal('6')
    """

    input: Decimal = attrs.field(converter=_input)
    output: Decimal = attrs.field(converter=_output)
    cache_read: Decimal | None = attrs.field(default=None, kw_only=True, converter=_cache_read)
    cache_write_5m: Decimal | None = attrs.field(default=None, kw_only=True, converter=_cache_write_5m)
    cache_write_1h: Decimal | None = attrs.field(default=None, kw_only=True, converter=_cache_write_1h)
    long_context_above: int | None = attrs.field(default=None, kw_only=True, validator=_opt_tier_start)
    long_context: Price | None = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if self.cache_read is None:
            object.__setattr__(self, "cache_read", self.input)
        if self.cache_write_5m is None:
            object.__setattr__(self, "cache_write_5m", self.input)
        if self.cache_write_1h is None:
            object.__setattr__(self, "cache_write_1h", self.cache_write_5m)
        if (self.long_context_above is None) != (self.long_context is None):
            msg = (
                "Price needs both long_context_above=<input tokens> and long_context=Price(...), or neither; "
                f"got long_context_above={self.long_context_above!r}, long_context={self.long_context!r}"
            )
            raise PricingError(msg, argument="long_context_above", value=self.long_context_above)
        if self.long_context is not None:
            _checks.check_instance(self.long_context, "long_context", Price, "a Price")

    def cost(self, usage: Usage) -> Decimal:
        """
        The dollar cost of *usage* at these prices.

        ``reasoning_tokens`` are not added again: providers count them inside
        the output tokens.
        """
        _checks.check_instance(usage, "usage", Usage, "a Usage", label="cost()", verb="needs")
        return self._cost_of(
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_5m_tokens,
            usage.cache_write_1h_tokens,
        )

    def _rates(self, input_tokens: int) -> Price:
        """
        The prices a request of *input_tokens* (fresh, read and written) is
        billed at: the long-context ones above their threshold.
        """
        above = self.long_context_above
        if above is not None and input_tokens > above and self.long_context is not None:
            return self.long_context
        return self

    def _cost_of(self, fresh: int, output: int, read: int, write_5m: int, write_1h: int) -> Decimal:
        """
        :meth:`cost` of the :class:`~workingctx.Usage` holding these token
        counts (unchecked: a count is an int, 0 or more).

        >>> Price(3, 15, cache_read=0.3)._cost_of(1_000_000, 0, 1_000_000, 0, 0)
        Decimal('3.3')
        """
        rates = self._rates(fresh + read + write_5m + write_1h)
        return (
            fresh * rates.input
            + output * rates.output
            + read * _set(rates.cache_read)
            + write_5m * _set(rates.cache_write_5m)
            + write_1h * _set(rates.cache_write_1h)
        ) / _MTOK

    def _request_costs(
        self, fresh: int, output: int, read: int, write_5m: int, write_1h: int, known: int
    ) -> tuple[Decimal, Decimal, Decimal, Decimal, Decimal]:
        """
        What the simulation says of one request, each equal to :meth:`_cost_of`
        of its counts, term for term (the same products, added in the same
        order), each product made once: the cost, the input's cost, both
        uncached (every input token fresh), and the input's cost had it read
        the *known* tokens an earlier request sent. The five share the
        request's input, so its tier.

        >>> price = Price(3, 15, cache_read=0.3, cache_write_5m=3.75)
        >>> costs = price._request_costs(1_000, 200, 30_000, 2_000, 0, 32_000)
        >>> costs == (
        ...     price._cost_of(1_000, 200, 30_000, 2_000, 0),
        ...     price._cost_of(1_000, 0, 30_000, 2_000, 0),
        ...     price._cost_of(33_000, 200, 0, 0, 0),
        ...     price._cost_of(33_000, 0, 0, 0, 0),
        ...     price._cost_of(1_000, 0, 32_000, 0, 0),
        ... )
        True
        """
        total = fresh + read + write_5m + write_1h
        rates = self._rates(total)
        per_input, per_output = rates.input, rates.output
        per_read, per_5m, per_1h = _set(rates.cache_read), _set(rates.cache_write_5m), _set(rates.cache_write_1h)
        no_output, no_read, no_5m, no_1h = 0 * per_output, 0 * per_read, 0 * per_5m, 0 * per_1h
        fresh_in, output_out, read_in = fresh * per_input, output * per_output, read * per_read
        written_5m, written_1h = write_5m * per_5m, write_1h * per_1h
        all_in = total * per_input
        return (
            (fresh_in + output_out + read_in + written_5m + written_1h) / _MTOK,
            (fresh_in + no_output + read_in + written_5m + written_1h) / _MTOK,
            (all_in + output_out + no_read + no_5m + no_1h) / _MTOK,
            (all_in + no_output + no_read + no_5m + no_1h) / _MTOK,
            ((total - known) * per_input + no_output + known * per_read + no_5m + no_1h) / _MTOK,
        )


def _set(value: Decimal | None) -> Decimal:
    # Every optional rate is filled in by Price.__attrs_post_init__.
    assert value is not None  # noqa: S101
    return value


def _anthropic(input_: str, output: str, read: str, write_5m: str, write_1h: str, **tier: Any) -> Price:
    return Price(input_, output, cache_read=read, cache_write_5m=write_5m, cache_write_1h=write_1h, **tier)


# Source: the providers' price pages (Anthropic's model pricing table, OpenAI's
# API pricing page, Google's Gemini API pricing page), checked on PRICES_AS_OF
# against the data of genai-prices 0.2.3 (its standard tier, text input), which
# tests/test_pricing.py compares every entry with. The table holds the models
# people use, so the command line prices them without the prices extra.
# Providers that do not charge cache writes bill them at the input price (the default).
BUILTIN_PRICES: Mapping[str, Price] = MappingProxyType(
    {
        # Anthropic: writes 1.25x (5 m) and 2x (1 h) the input price.
        "claude-sonnet-4-6": _anthropic("3", "15", "0.30", "3.75", "6"),
        "claude-sonnet-5": _anthropic("2", "10", "0.20", "2.50", "4"),
        "claude-sonnet-4-5": _anthropic(
            "3",
            "15",
            "0.30",
            "3.75",
            "6",
            long_context_above=200_000,
            long_context=_anthropic("6", "22.50", "0.60", "7.50", "12"),
        ),
        "claude-opus-5": _anthropic("5", "25", "0.50", "6.25", "10"),
        "claude-opus-4-8": _anthropic("5", "25", "0.50", "6.25", "10"),
        "claude-opus-4-7": _anthropic("5", "25", "0.50", "6.25", "10"),
        "claude-opus-4-5": _anthropic("5", "25", "0.50", "6.25", "10"),
        "claude-haiku-4-5": _anthropic("1", "5", "0.10", "1.25", "2"),
        "claude-opus-4-1": _anthropic("15", "75", "1.50", "18.75", "30"),
        "claude-opus-4-0": _anthropic("15", "75", "1.50", "18.75", "30"),
        "claude-sonnet-4-0": _anthropic("3", "15", "0.30", "3.75", "6"),
        # OpenAI: no write charge before the GPT-5.6 family.
        "gpt-4.1": Price("2", "8", cache_read="0.50"),
        "gpt-4.1-mini": Price("0.40", "1.60", cache_read="0.10"),
        "gpt-4.1-nano": Price("0.10", "0.40", cache_read="0.025"),
        "gpt-4o": Price("2.50", "10", cache_read="1.25"),
        "gpt-4o-mini": Price("0.15", "0.60", cache_read="0.075"),
        "o4-mini": Price("1.10", "4.40", cache_read="0.275"),
        "o3": Price("2", "8", cache_read="0.50"),
        "gpt-5": Price("1.25", "10", cache_read="0.125"),
        "gpt-5-mini": Price("0.25", "2", cache_read="0.025"),
        "gpt-5.4": Price(
            "2.50",
            "15",
            cache_read="0.25",
            long_context_above=272_000,
            long_context=Price("5", "22.50", cache_read="0.50"),
        ),
        "gpt-5.5": Price(
            "5",
            "30",
            cache_read="0.50",
            long_context_above=272_000,
            long_context=Price("10", "45", cache_read="1"),
        ),
        # Google Gemini: implicit caching, no write charge.
        "gemini-2.5-flash": Price("0.30", "2.50", cache_read="0.03"),
        "gemini-2.5-flash-lite": Price("0.10", "0.40", cache_read="0.01"),
        "gemini-2.0-flash": Price("0.10", "0.40", cache_read="0.025"),
        "gemini-2.5-pro": Price(
            "1.25",
            "10",
            cache_read="0.125",
            long_context_above=200_000,
            long_context=Price("2.50", "15", cache_read="0.25"),
        ),
        "gemini-3.5-flash": Price("1.50", "9", cache_read="0.15"),
    }
)
"""The built-in prices, by model name (read-only; add your own with :func:`add_price`)."""

_added: dict[str, Price] = {}
_added_lock = threading.Lock()
_added_version = 0  # counts the changes to _added: a price looked up under an older one is looked up again


def _check_model(model: object) -> str:
    expected = "a str such as 'claude-sonnet-4-6'"
    model = _checks.check_instance(model, "model", str, expected, label="a model name")
    if not model.strip():
        msg = (
            f"a model name must not be empty, got {model!r}; "
            "pass the name the provider reports, such as 'claude-sonnet-4-6'"
        )
        raise PricingError(msg, argument="model", value=model)
    return model


def add_price(model: str, price: Price) -> None:
    """
    Price *model* with *price* in this process, over any built-in price.

    >>> add_price("my-finetune", Price(1, 2))
    >>> cost("my-finetune", Usage(input_tokens=1_000_000))
    Decimal('1')
    >>> remove_price("my-finetune")

    Raises:
        TypeError: *model* is not a str or *price* not a :class:`Price`.
    """
    _check_model(model)
    _checks.check_instance(price, "price", Price, "a Price", label=f"add_price({model!r}, ...)", verb="needs")
    global _added_version  # noqa: PLW0603  # the module's prices are process-wide
    with _added_lock:
        _added[model] = price
        _added_version += 1


def remove_price(model: str) -> None:
    """
    Forget a price added with :func:`add_price` (nothing happens when there is none).
    """
    _check_model(model)
    global _added_version  # noqa: PLW0603  # the module's prices are process-wide
    with _added_lock:
        _added.pop(model, None)
        _added_version += 1


def prices() -> Mapping[str, Price]:
    """
    Every price known without ``genai-prices``: the built-in table with your additions over it.
    """
    with _added_lock:
        return MappingProxyType({**BUILTIN_PRICES, **_added})


_DATED = re.compile(r"(?:[-@]\d{8}|[-@]\d{4}-\d{2}-\d{2}|-latest)$")


@functools.lru_cache(maxsize=1024)
def _names(model: str) -> tuple[str, ...]:
    """
    The names to try for *model*: as given, without a provider prefix, without a date suffix.
    """
    names = [model]
    bare = re.split(r"[/:]", model)[-1] if re.search(r"[/:]", model) else model
    for name in (bare, _DATED.sub("", bare)):
        if name and name not in names:
            names.append(name)
    return tuple(names)


def find_price(model: str) -> Price | None:
    """
    The table price of *model* (added or built in), or None.

    The name is tried as given, then without a provider prefix
    (``anthropic/``, ``openai:``) and without a date suffix
    (``-20250929``, ``@20250929``, ``-2025-08-07``, ``-latest``).

    >>> find_price("anthropic/claude-sonnet-4-6-20260217") == find_price("claude-sonnet-4-6")
    True
    """
    _check_model(model)
    return _table_price(model)


def _table_price(model: str) -> Price | None:
    """
    :func:`find_price` of a checked model name: looked up once per name until a
    price is added or removed (which moves ``_added_version``).
    """
    return _price_at(model, _added_version)


@functools.lru_cache(maxsize=1024)
def _price_at(model: str, _version: int) -> Price | None:
    for name in _names(model):
        # An added price wins over a built-in one (reading a dict needs no lock).
        price = _added.get(name)
        if price is None:
            price = BUILTIN_PRICES.get(name)
        if price is not None:
            return price
    return None


def cost(model: str, usage: Usage) -> Decimal:
    """
    What *usage* cost on *model*, in US dollars.

    Raises:
        PricingError: *model* has no price in the table and ``genai-prices``
            (the ``workingctx[prices]`` extra) is not installed or does not
            know it either; the message says how to add one.
        TypeError: *model* is not a str or *usage* not a :class:`~workingctx.Usage`.
    """
    _check_model(model)
    _checks.check_instance(usage, "usage", Usage, "a Usage", label=f"cost({model!r}, ...)", verb="needs")
    price = _table_price(model)
    if price is not None:
        return price.cost(usage)
    return _genai_cost(model, usage)


def close_names(model: str, *, limit: int = 5) -> list[str]:
    """
    The priced model names closest to *model* (by :func:`difflib.get_close_matches`,
    without its provider prefix and date suffix), best first: the table's, and
    genai-prices' when it is installed.

    >>> close_names("gpt4.1-mini")[:2]
    ['gpt-4.1-mini', 'gpt-4o-mini']
    """
    names = set(prices())
    try:
        from genai_prices import data  # noqa: PLC0415  # an optional extra
    except ImportError:
        pass
    else:
        names.update(m.id for provider in data.providers for m in provider.models)
    wanted = _names(model)[-1].lower()
    return difflib.get_close_matches(wanted, sorted(names), n=limit, cutoff=0.6)


def _did_you_mean(model: str) -> str:
    close = close_names(model)
    return f" (close names: {', '.join(close)})" if close else ""


def _genai_cost(model: str, usage: Usage) -> Decimal:
    how = (
        f"add one with workingctx.pricing.add_price({model!r}, Price(input, output, cache_read=..., "
        "cache_write_5m=..., cache_write_1h=...)) in dollars per million tokens"
    )
    try:
        import genai_prices  # noqa: PLC0415, F401  # an optional extra: is it installed?
    except ImportError:
        msg = (
            f"no price for model {model!r}{_did_you_mean(model)}: it is not in workingctx's table and genai-prices "
            f'is not installed; {how}, or install the prices extra (pip install ".[prices]" in a checkout, '
            "workingctx[prices] from an index) to price it with genai-prices"
        )
        raise PricingError(msg) from None
    try:
        rates, moment = _genai_rates(model)
        if rates is None:
            return _their_cost(model, usage, moment)
    except LookupError as error:
        msg = (
            f"no price for model {model!r}: neither workingctx's table nor genai-prices "
            f"knows it ({error}); {how}{_did_you_mean(model)}"
        )
        raise PricingError(msg) from None
    return rates.cost(usage)


def _their_cost(model: str, usage: Usage, moment: datetime | None) -> Decimal:
    """
    What genai-prices' own calculation gives for *usage* on *model* at *moment* (None: now).
    """
    import genai_prices  # noqa: PLC0415  # an optional extra

    # genai-prices counts input_tokens as every input token, cache reads and writes included.
    theirs = genai_prices.Usage(
        input_tokens=usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        cache_write_1h_tokens=usage.cache_write_1h_tokens,
    )
    return Decimal(genai_prices.calc_price(theirs, model, genai_request_timestamp=moment).total_price)


# genai-prices validates a model's prices and splits the usage into the parts
# each price bills on every call (some 80 µs). _genai_rates looks a model up
# once and, for the price shapes _Rates covers, works the same sum out with the
# same Decimal operations in the same order, so the amount is the same Decimal,
# digit for digit; any other shape is left to genai-prices.

_PER: Mapping[str, int] = MappingProxyType(
    {
        # Tokens, priced per million.
        "input_mtok": 1_000_000,
        "output_mtok": 1_000_000,
        "cache_read_mtok": 1_000_000,
        "cache_write_mtok": 1_000_000,
        "cache_write_1h_mtok": 1_000_000,
        # Tool calls a Usage never reports (none of them), and the request itself (one), priced per thousand.
        "web_searches_kcount": 1_000,
        "storage_searches_kcount": 1_000,
        "requests_kcount": 1_000,
    }
)
"""The genai-prices price keys _Rates bills, with the count each price is per."""

_SLOT: Mapping[str, int] = MappingProxyType({key: place for place, key in enumerate(_PER)})
"""The place of each price key's count among those _Rates.cost works out (in _PER's order)."""


_CACHE_KEYS = frozenset({"cache_read_mtok", "cache_write_mtok", "cache_write_1h_mtok"})


@attrs.frozen
class _Tiered:
    """
    A genai-prices tiered price: once a call's input (every input token)
    exceeds a tier's start, all of the call's tokens are billed at that tier.
    """

    base: Decimal
    tiers: tuple[tuple[int, Decimal], ...]  # (start, price), starts non-decreasing

    def at(self, total_input: int) -> Decimal:
        for start, price in reversed(self.tiers):
            if total_input > start:
                return price
        return self.base


@attrs.frozen
class _Rates:
    """
    A genai-prices ``ModelPrice`` in the shape workingctx prices itself.

    genai-prices bills each token once, at the most specific price the model
    has for it: a cache read at ``cache_read_mtok`` when the model has one,
    else at ``input_mtok``; a one-hour write at ``cache_write_1h_mtok``, else
    at ``cache_write_mtok``, else at ``input_mtok``. A price's amount is
    ``rate * count / per``, and the amounts are added from zero in the order
    the prices are stored.
    """

    terms: tuple[tuple[int, Decimal | _Tiered, int], ...]  # (the price key's _SLOT, rate, per), in stored order
    reads: bool  # cache reads have a price of their own
    writes: bool  # cache writes have a price of their own
    hours: bool  # one-hour writes have a price of their own

    def cost(self, usage: Usage) -> Decimal:
        read, write, hour = usage.cache_read_tokens, usage.cache_write_tokens, usage.cache_write_1h_tokens
        fresh = usage.input_tokens
        counts = (  # in _PER's order (see _SLOT)
            fresh + (0 if self.reads else read) + (0 if self.writes else write),
            usage.output_tokens,
            read,
            write - hour if self.hours else write,
            hour,
            0,
            0,
            1,
        )
        total_input = fresh + read + write
        total = Decimal(0)
        for slot, rate, per in self.terms:
            price = rate if isinstance(rate, Decimal) else rate.at(total_input)
            total += price * counts[slot] / per
        return total


def _valid_rate(value: object) -> bool:
    return isinstance(value, Decimal) and value.is_finite() and value >= 0


def _rate(value: object) -> Decimal | _Tiered | None:
    """
    A genai-prices price as a rate, or None for a value genai-prices would refuse.
    """
    import genai_prices.types  # noqa: PLC0415  # an optional extra

    if isinstance(value, Decimal):
        return value if _valid_rate(value) else None
    if not isinstance(value, genai_prices.types.TieredPrices) or not _valid_rate(value.base):
        return None
    tiers: list[tuple[int, Decimal]] = []
    for tier in value.tiers:
        start, price = tier.start, tier.price
        after = tiers[-1][0] if tiers else 0  # starts are counts of tokens, in order
        if type(start) is not int or start < after or not _valid_rate(price):
            return None
        tiers.append((start, price))
    return _Tiered(value.base, tuple(tiers))


def _rates_of(price: object) -> _Rates | None:
    """
    *price* (a genai-prices ``ModelPrice``) as _Rates, or None for a shape _Rates does not cover.
    """
    import genai_prices.types  # noqa: PLC0415  # an optional extra

    if type(price) is not genai_prices.types.ModelPrice:
        return None
    terms: list[tuple[int, Decimal | _Tiered, int]] = []
    keys: set[str] = set()
    for key, value in vars(price).items():
        if key.startswith("_") or value is None:
            continue
        rate = _rate(value) if key in _PER else None
        if rate is None:
            return None
        terms.append((_SLOT[key], rate, _PER[key]))
        keys.add(key)
    # genai-prices refuses a cache price without the input price, or a one-hour write price without the write price.
    if (keys & _CACHE_KEYS and "input_mtok" not in keys) or (
        "cache_write_1h_mtok" in keys and "cache_write_mtok" not in keys
    ):
        return None
    return _Rates(
        tuple(terms),
        reads="cache_read_mtok" in keys,
        writes="cache_write_mtok" in keys,
        hours="cache_write_1h_mtok" in keys,
    )


@attrs.frozen
class _GenaiModel:
    """
    A model as genai-prices' data has it, with the _Rates of each price it may bill at.

    A model has one price, or prices that apply from a date or at times of
    day (genai-prices' conditional prices), of which genai-prices picks the
    one for the moment of the call.
    """

    snapshot: DataSnapshot  # the genai-prices data it was found in
    info: ModelInfo
    options: Mapping[int, _Rates | None]  # by id() of each of the model's prices (info holds them)
    fixed: bool  # the price never changes: `rates` is it
    dated: bool  # the price changes only at a UTC midnight: `rates` holds all of `day`
    rates: _Rates | None = None  # None: the shape is left to genai-prices
    day: date | None = None

    @classmethod
    def find(cls, snapshot: DataSnapshot, model: str) -> _GenaiModel:
        """
        Raises:
            LookupError: genai-prices knows no such model.
        """
        import genai_prices.types  # noqa: PLC0415  # an optional extra

        types = genai_prices.types
        _, info = snapshot.find_provider_model(model, None, None, None)
        if isinstance(info.prices, types.ModelPrice):
            return cls(snapshot, info, {}, fixed=True, dated=True, rates=_rates_of(info.prices))
        choices = info.prices if isinstance(info.prices, list) else []
        if not choices or not all(isinstance(choice, types.ConditionalPrice) for choice in choices):
            # Left to genai-prices, which refuses it.
            return cls(snapshot, info, {}, fixed=True, dated=True)
        dated = all(
            choice.constraint is None or type(choice.constraint) is types.StartDateConstraint for choice in choices
        )
        options = {id(choice.prices): _rates_of(choice.prices) for choice in choices}
        return cls(snapshot, info, MappingProxyType(options), fixed=False, dated=dated)


_genai_models: dict[str, _GenaiModel] = {}
_genai_lock = threading.Lock()
_GENAI_MODELS_KEPT = 1024


def _utcnow() -> datetime:
    """
    The moment a call is priced for (genai-prices' conditional prices depend on it).
    """
    return datetime.now(UTC)


def _keep(model: str, found: _GenaiModel) -> None:
    with _genai_lock:
        if len(_genai_models) >= _GENAI_MODELS_KEPT and model not in _genai_models:
            _genai_models.clear()
        _genai_models[model] = found


def _genai_model(model: str) -> _GenaiModel:
    """
    What genai-prices knows of *model*, looked up once per genai-prices snapshot
    (it replaces the snapshot when it updates its prices).

    Raises:
        LookupError: genai-prices knows no such model.
    """
    import genai_prices.data_snapshot  # noqa: PLC0415  # an optional extra

    snapshot = genai_prices.data_snapshot.get_snapshot()
    found = _genai_models.get(model)
    if found is None or found.snapshot is not snapshot:
        found = _GenaiModel.find(snapshot, model)
        _keep(model, found)
    return found


def context_window(model: str) -> int | None:
    """
    The context window of *model* in tokens, as genai-prices records it; None
    when it records none, does not know the model, or is not installed (the
    ``prices`` extra).

    >>> context_window("claude-opus-4-6"), context_window("claude-haiku-4-5")
    (1000000, 200000)
    """
    _check_model(model)
    try:
        window = _genai_model(model).info.context_window
    except (ImportError, LookupError):  # genai-prices not installed, or not knowing the model
        return None
    return window if type(window) is int and window > 0 else None


def _genai_rates(model: str) -> tuple[_Rates | None, datetime | None]:
    """
    The _Rates genai-prices bills *model* at now (None: a shape left to
    genai-prices), and the moment that is, when the price depends on it.

    A model is looked up once per genai-prices snapshot (it replaces the
    snapshot when it updates its prices). A price that starts on a date is
    picked once per UTC day; a price for times of day, on every call.

    Raises:
        LookupError: genai-prices knows no such model.
    """
    found = _genai_model(model)
    if found.fixed:
        return found.rates, None
    now = _utcnow()
    today = now.date()
    if found.day == today:
        return found.rates, now
    rates = found.options.get(id(found.info.get_prices(now)))
    if found.dated:
        _keep(model, attrs.evolve(found, rates=rates, day=today))
    return rates, now
