"""
The providers' prompt-caching rules as data: :class:`CacheRules` and :data:`RULES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from types import MappingProxyType
from typing import Literal, TypeAlias

import attrs

from workingctx import _checks
from workingctx.exceptions import CacheRuleError
from workingctx.frozen import FrozenDict

__all__ = ["RULES", "RULES_AS_OF", "TTL", "TTL_ORDER", "CacheRules", "rules_for"]

TTL: TypeAlias = Literal["5m", "1h"]
"""A cache entry's lifetime: five minutes (the default) or one hour."""

RULES_AS_OF = "2026-12-07"
"""The day the rules below were checked against the providers' documentation."""

TTL_ORDER = {"1h": 0, "5m": 1}


def _minimums(value: object) -> Mapping[str, int]:
    value = _checks.check_instance(value, "minimum_tokens", Mapping, "a mapping of model-name prefix to tokens")
    for name, tokens in value.items():
        _checks.check_instance(name, "minimum_tokens", str, "a str", label="minimum_tokens keys")
        _checks.check_count(tokens, f"minimum_tokens[{name!r}]", error=CacheRuleError)
    return FrozenDict(value)


_nonneg = _checks.count(error=CacheRuleError)
_positive = _checks.integer(minimum=1, error=CacheRuleError)


def _no_write_charge() -> Mapping[str, Decimal]:
    return FrozenDict({"5m": Decimal(1)})


def _read_only(value: Mapping[str, Decimal]) -> Mapping[str, Decimal]:
    return FrozenDict(value)


def _five_minutes() -> Mapping[str, int]:
    return FrozenDict({"5m": 300})


def _lifetimes(value: object) -> Mapping[str, int]:
    value = _checks.check_instance(value, "lifetimes", Mapping, "a mapping of TTL name to seconds, such as {'5m': 300}")
    for name, seconds in value.items():
        if name not in TTL_ORDER:
            msg = f"lifetimes[{name!r}] must map '5m' or '1h' to a positive int of seconds, got {seconds!r}"
            raise CacheRuleError(msg, argument="lifetimes", value=name)
        _checks.check_int(seconds, f"lifetimes[{name!r}]", minimum=1, fix="a number of seconds", error=CacheRuleError)
    return FrozenDict(value)


_KEPT_MINIMUMS = 256
"""How many model names a :class:`CacheRules` keeps the minimum of."""


@attrs.frozen
class CacheRules:
    """
    One provider's prompt-caching rules.

    Attributes:
        provider: ``"anthropic"``, ``"openai"`` or ``"gemini"``.
        explicit: Whether the client marks breakpoints (Anthropic); otherwise
            the provider caches every prefix it has seen (OpenAI, Gemini).
        max_breakpoints: Breakpoints allowed in one request, the automatic one included.
        lookback_blocks: How many blocks back from a breakpoint (itself
            included) the provider looks for an earlier cache entry.
        minimum_tokens: The shortest cacheable prefix, by model-name prefix
            (the longest matching prefix wins).
        default_minimum: The minimum for a model none of those match.
        step_tokens: Cached prefixes grow in steps of this many tokens past the minimum.
        ttls: The lifetimes a breakpoint can ask for, longest first.
        read_multiplier: A cache read's price as a multiple of the input price
            (what the built-in prices say; :mod:`workingctx.pricing` bills it).
        write_multipliers: A cache write's price as a multiple of the input price, by lifetime.
        lifetimes: How many seconds an entry of each TTL lives after it was
            last written or read (every read renews it); an entry older than
            that is gone, and the next request writes it again. For implicit
            caches, the ``"5m"`` lifetime is how long an unused prefix stays.

    Raises:
        CacheRuleError: a negative limit, or a TTL of *ttls* without a lifetime.
    """

    provider: str
    explicit: bool
    max_breakpoints: int = attrs.field(validator=_nonneg)
    lookback_blocks: int = attrs.field(validator=_positive)
    minimum_tokens: Mapping[str, int] = attrs.field(converter=_minimums)
    default_minimum: int = attrs.field(validator=_nonneg)
    step_tokens: int = attrs.field(default=1, validator=_positive)
    ttls: tuple[TTL, ...] = ("5m",)
    read_multiplier: Decimal = Decimal("0.1")
    write_multipliers: Mapping[str, Decimal] = attrs.field(factory=_no_write_charge, converter=_read_only)
    lifetimes: Mapping[str, int] = attrs.field(factory=_five_minutes, converter=_lifetimes)
    # minimum_for's answer by model name, as it is asked (the rules never change)
    _minimum_of: dict[str, int] = attrs.field(factory=dict, init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        missing = [ttl for ttl in self.ttls if ttl not in self.lifetimes]
        if missing:
            msg = (
                f"{self.provider} caching rules offer the TTLs {list(self.ttls)} but give no lifetime for "
                f"{missing}; pass lifetimes={{'5m': 300, '1h': 3600}} (seconds)"
            )
            raise CacheRuleError(msg)

    def minimum_for(self, model: str) -> int:
        """
        The shortest prefix *model* caches, in tokens.

        >>> RULES["anthropic"].minimum_for("claude-opus-4-6-20260101")
        4096
        """
        found = self._minimum_of.get(model) if type(model) is str else None
        if found is not None:
            return found
        _checks.check_instance(model, "model", str, "a str")
        name = model.rsplit("/", 1)[-1]
        best = ""
        for prefix in self.minimum_tokens:
            if name.startswith(prefix) and len(prefix) > len(best):
                best = prefix
        found = self.minimum_tokens[best] if best else self.default_minimum
        if len(self._minimum_of) < _KEPT_MINIMUMS:
            self._minimum_of[model] = found
        return found


RULES: Mapping[str, CacheRules] = MappingProxyType(
    {
        "anthropic": CacheRules(
            provider="anthropic",
            explicit=True,
            max_breakpoints=4,
            lookback_blocks=20,
            minimum_tokens={
                "claude-opus-5": 512,
                "claude-fable-5": 512,
                "claude-mythos-5": 512,
                "claude-opus-4-8": 1024,
                "claude-sonnet-5": 1024,
                "claude-sonnet-4": 1024,
                "claude-opus-4": 1024,
                "claude-3-7-sonnet": 1024,
                "claude-opus-4-7": 2048,
                "claude-3-5-haiku": 2048,
                "claude-3-haiku": 2048,
                "claude-opus-4-6": 4096,
                "claude-opus-4-5": 4096,
                "claude-haiku-4-5": 4096,
            },
            # An unknown model: the highest minimum, so no breakpoint is wasted.
            default_minimum=4096,
            ttls=("1h", "5m"),
            read_multiplier=Decimal("0.1"),
            write_multipliers={"5m": Decimal("1.25"), "1h": Decimal(2)},
            # Every read renews an entry for its whole lifetime, at no charge.
            lifetimes={"5m": 300, "1h": 3_600},
        ),
        "openai": CacheRules(
            provider="openai",
            explicit=False,
            max_breakpoints=0,
            lookback_blocks=1,
            minimum_tokens={},
            default_minimum=1024,
            step_tokens=128,
            read_multiplier=Decimal("0.1"),
            # In-memory retention: cleared after five to ten idle minutes; the
            # simulation takes the shorter figure.
            lifetimes={"5m": 300},
        ),
        "gemini": CacheRules(
            provider="gemini",
            explicit=False,
            max_breakpoints=0,
            lookback_blocks=1,
            minimum_tokens={
                # Google's table says 2,048 for 2.5 Flash; its API caches 1,024 (and 2,048 for Flash-Lite).
                "gemini-2.5-flash": 1024,
                "gemini-2.5-flash-lite": 2048,
                "gemini-2.5-pro": 2048,
                "gemini-3-flash": 1024,
                "gemini-3-pro": 4096,
                "gemini-3.1-pro": 4096,
            },
            default_minimum=4096,
            read_multiplier=Decimal("0.1"),
            # Google gives no idle lifetime for implicit caching (entries go
            # within a day, most much sooner); the simulation takes five minutes.
            lifetimes={"5m": 300},
        ),
    }
)
"""The caching rules of each provider (see :data:`RULES_AS_OF`)."""


def rules_for(provider: object, model: object) -> CacheRules:
    provider = _checks.check_instance(provider, "provider", str, "a str such as 'anthropic'")
    _checks.check_instance(model, "model", str, "a str such as 'claude-sonnet-4-6'")
    rules = RULES.get(provider)
    if rules is None:
        msg = f"no caching rules for provider {provider!r}; use one of {sorted(RULES)}"
        raise CacheRuleError(msg, argument="provider", value=provider)
    return rules
