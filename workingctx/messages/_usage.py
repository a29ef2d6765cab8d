"""
``Usage``: the tokens one model call used, read from each provider's usage object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from workingctx import _checks
from workingctx._wire import wire_errors
from workingctx.exceptions import ArgumentValueError, InvalidMessageError

__all__ = ["Usage"]


def _usage_data(usage: Any, provider: str, keys: tuple[str, ...]) -> Mapping[str, Any]:
    """
    A usage object as a mapping (SDK objects through ``model_dump``), checked to
    carry at least one of *keys*.
    """
    dump = getattr(usage, "model_dump", None)
    data = dump() if callable(dump) else usage
    if not isinstance(data, Mapping):
        raise _checks.wrong_type(
            usage,
            "usage",
            "a mapping or an SDK usage object",
            label=f"a {provider} usage",
            fix="pass the response's usage field",
        )
    if keys and not any(key in data for key in keys):
        msg = (
            f"{data!r} is not a {provider} usage: it has none of {', '.join(keys)}; "
            "pass the usage of a response from that provider, or use the matching Usage.from_* reader"
        )
        raise ArgumentValueError(msg, argument="usage", value=usage)
    return data


def _count(data: Mapping[str, Any], *keys: str) -> int:
    for key in keys:
        value = data.get(key)
        if value is not None:
            return _checks.check_count(value, key, label=f"usage field {key} (a non-negative int)")
    return 0


def _details(data: Mapping[str, Any], provider: str, *keys: str) -> Mapping[str, Any]:
    """
    The first detail object of *keys* that is set, as a mapping (empty when none is).
    """
    for key in keys:
        if value := data.get(key):
            return _usage_data(value, provider, ())
    return {}


def _cache_writes(total: int, split: Mapping[str, Any]) -> tuple[int, int]:
    """
    Every cache write (the *total*, or the 5m and 1h writes of *split* if more) and the 1h part.
    """
    hour = _count(split, "ephemeral_1h_input_tokens")
    return max(total, _count(split, "ephemeral_5m_input_tokens") + hour), hour


_nonneg_int = _checks.count(error=InvalidMessageError)


@attrs.frozen(cache_hash=True)
class Usage:
    """
    Token usage of one model call.

    ``input_tokens`` counts fresh (uncached) input; cache reads and writes are
    counted apart, as the providers bill them.

    ``cache_write_tokens`` counts every token written to the cache, whatever its
    lifetime; ``cache_write_1h_tokens`` is the part of it written with a one-hour
    lifetime (billed higher by Anthropic), and the rest, ``cache_write_5m_tokens``,
    was written with the default five minutes. This mirrors Anthropic's usage
    object, which reports the total and the split.

    >>> usage = Usage.from_openai({"prompt_tokens": 120, "completion_tokens": 8,
    ...     "prompt_tokens_details": {"cached_tokens": 100}})
    >>> usage.input_tokens, usage.cache_read_tokens, usage.output_tokens
    (20, 100, 8)
    >>> Usage(cache_write_tokens=3_000, cache_write_1h_tokens=2_000).cache_write_5m_tokens
    1000

    Raises:
        InvalidMessageError: ``cache_write_1h_tokens`` exceeds ``cache_write_tokens``
            (the one-hour writes are a part of the total).
        ArgumentTypeError: a count is not an int (a bool is not one).
        InvalidMessageError: a count is negative.
    """

    input_tokens: int = attrs.field(default=0, validator=_nonneg_int)
    output_tokens: int = attrs.field(default=0, validator=_nonneg_int)
    cache_read_tokens: int = attrs.field(default=0, validator=_nonneg_int)
    cache_write_tokens: int = attrs.field(default=0, validator=_nonneg_int)
    reasoning_tokens: int = attrs.field(default=0, validator=_nonneg_int)
    cache_write_1h_tokens: int = attrs.field(default=0, validator=_nonneg_int)

    def __attrs_post_init__(self) -> None:
        if self.cache_write_1h_tokens > self.cache_write_tokens:
            msg = (
                f"cache_write_1h_tokens={self.cache_write_1h_tokens} exceeds "
                f"cache_write_tokens={self.cache_write_tokens}; cache_write_tokens is the total of every "
                "cache write and the one-hour writes are a part of it: pass "
                f"cache_write_tokens={self.cache_write_tokens + self.cache_write_1h_tokens} if "
                f"{self.cache_write_tokens} were the five-minute writes, or use Usage.from_cache_writes(...)"
            )
            raise InvalidMessageError(msg)

    @property
    def cache_write_5m_tokens(self) -> int:
        """
        The tokens written to the cache with the default five-minute lifetime.
        """
        return self.cache_write_tokens - self.cache_write_1h_tokens

    @classmethod
    def from_cache_writes(
        cls,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cache_read_tokens: int = 0,
        cache_write_5m_tokens: int = 0,
        cache_write_1h_tokens: int = 0,
        reasoning_tokens: int = 0,
    ) -> Usage:
        """
        A usage built from the two kinds of cache write, five-minute and one-hour.

        >>> Usage.from_cache_writes(cache_write_5m_tokens=1_000, cache_write_1h_tokens=2_000).cache_write_tokens
        3000
        """
        for name, value in (
            ("cache_write_5m_tokens", cache_write_5m_tokens),
            ("cache_write_1h_tokens", cache_write_1h_tokens),
        ):
            _checks.check_count(value, name, owner="Usage.from_cache_writes", error=InvalidMessageError)
        return cls(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cache_read_tokens,
            cache_write_tokens=cache_write_5m_tokens + cache_write_1h_tokens,
            reasoning_tokens=reasoning_tokens,
            cache_write_1h_tokens=cache_write_1h_tokens,
        )

    @property
    def total_tokens(self) -> int:
        """
        Every input token (fresh, cache read and cache write) plus the output.
        """
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(*(a + b for a, b in zip(attrs.astuple(self), attrs.astuple(other), strict=True)))

    @classmethod
    @wire_errors("OpenAI usage")
    def from_openai(cls, usage: Any) -> Usage:
        """
        Read an OpenAI usage object (Chat Completions or Responses shape), a dict
        or the SDK's object.

        Raises:
            ValueError: *usage* has neither ``prompt_tokens`` nor ``input_tokens``.
        """
        data = _usage_data(usage, "OpenAI", ("prompt_tokens", "input_tokens", "completion_tokens", "output_tokens"))
        prompt = _count(data, "prompt_tokens", "input_tokens")
        details = _details(data, "OpenAI", "prompt_tokens_details", "input_tokens_details")
        cached = _count(details, "cached_tokens")
        written = _count(details, "cache_write_tokens", "cache_creation_tokens")
        out_details = _details(data, "OpenAI", "completion_tokens_details", "output_tokens_details")
        return cls(
            input_tokens=max(prompt - cached - written, 0),
            output_tokens=_count(data, "completion_tokens", "output_tokens"),
            cache_read_tokens=cached,
            cache_write_tokens=written,
            reasoning_tokens=_count(out_details, "reasoning_tokens"),
        )

    @classmethod
    @wire_errors("Anthropic usage")
    def from_anthropic(cls, usage: Any) -> Usage:
        """
        Read an Anthropic usage object, a dict or the SDK's object
        (``input_tokens`` already excludes the cache); the one-hour part of the
        cache writes comes from ``cache_creation.ephemeral_1h_input_tokens``.

        Raises:
            ValueError: *usage* has neither ``input_tokens`` nor ``output_tokens``.
        """
        data = _usage_data(usage, "Anthropic", ("input_tokens", "output_tokens"))
        creation = _details(data, "Anthropic", "cache_creation")
        written, hour = _cache_writes(_count(data, "cache_creation_input_tokens"), creation)
        return cls(
            input_tokens=_count(data, "input_tokens"),
            output_tokens=_count(data, "output_tokens"),
            cache_read_tokens=_count(data, "cache_read_input_tokens"),
            cache_write_tokens=written,
            cache_write_1h_tokens=hour,
        )

    @classmethod
    @wire_errors("Gemini usage")
    def from_google(cls, usage: Any) -> Usage:
        """
        Read a Gemini ``usage_metadata`` (snake_case or camelCase, a dict or the
        SDK's object); the prompt count includes cached content.

        Raises:
            ValueError: *usage* has no prompt or candidates token count.
        """
        data = _usage_data(
            usage,
            "Gemini",
            ("prompt_token_count", "promptTokenCount", "candidates_token_count", "candidatesTokenCount"),
        )
        cached = _count(data, "cached_content_token_count", "cachedContentTokenCount")
        prompt = _count(data, "prompt_token_count", "promptTokenCount")
        candidates = _count(data, "candidates_token_count", "candidatesTokenCount")
        thoughts = _count(data, "thoughts_token_count", "thoughtsTokenCount")
        return cls(
            input_tokens=max(prompt - cached, 0),
            output_tokens=candidates + thoughts,
            cache_read_tokens=cached,
            reasoning_tokens=thoughts,
        )

    @classmethod
    @wire_errors("LangChain usage")
    def from_langchain(cls, usage: Any) -> Usage:
        """
        Read LangChain's ``usage_metadata`` (``input_tokens`` includes cache
        reads and writes, detailed in ``input_token_details``), or a message
        that carries one.

        Raises:
            ValueError: *usage* is not a usage_metadata shape.
        """
        usage = getattr(usage, "usage_metadata", usage)
        data = _usage_data(usage, "LangChain", ("input_tokens", "output_tokens", "total_tokens"))
        details = _details(data, "LangChain", "input_token_details")
        out_details = _details(data, "LangChain", "output_token_details")
        read = _count(details, "cache_read")
        written, hour = _cache_writes(_count(details, "cache_creation"), details)
        return cls(
            input_tokens=max(_count(data, "input_tokens") - read - written, 0),
            output_tokens=_count(data, "output_tokens"),
            cache_read_tokens=read,
            cache_write_tokens=written,
            reasoning_tokens=_count(out_details, "reasoning"),
            cache_write_1h_tokens=hour,
        )

    @classmethod
    def from_token_usages(cls, usage: Mapping[str, Any]) -> Usage:
        """
        Read the ``prompt_tokens`` / ``completion_tokens`` / ``cache_*_input_tokens``
        shape some frameworks store per message (the prompt count includes cache reads).
        """
        cached = int(usage.get("cache_read_input_tokens", 0) or 0)
        return cls(
            input_tokens=max(int(usage.get("prompt_tokens", 0) or 0) - cached, 0),
            output_tokens=int(usage.get("completion_tokens", 0) or 0),
            cache_read_tokens=cached,
            cache_write_tokens=int(usage.get("cache_creation_input_tokens", 0) or 0),
            reasoning_tokens=int(usage.get("reasoning_tokens", 0) or 0),
        )
