"""
What the tests of workingctx.cache share: contexts with a prefix of a given size in tokens,
a counter giving each message a fixed count plus its text length, and models with built-in prices.
"""

from __future__ import annotations

from collections.abc import Iterable

from workingctx import Message, PrefixContext, WorkingContext

# Built-in prices, minimums of 512, 1,024 and 4,096 tokens, and a long-context tier.
PRICED_MODELS = {
    "anthropic": ["claude-sonnet-4-6", "claude-opus-5", "claude-haiku-4-5"],
    "openai": ["gpt-5", "gpt-5.4"],
}


class PerMessage:
    """
    A token counter that gives every message *each* tokens plus its text length.
    """

    name = "per-message"
    exact = False

    def __init__(self, each: int) -> None:
        self.each = each

    def count_message(self, message: Message) -> int:
        return self.each + len(message.text())

    def count(self, messages: Iterable[Message]) -> int:
        return sum(self.count_message(m) for m in messages)

    async def estimate(self, messages: Iterable[Message]) -> int:
        return self.count(messages)


def _big(tokens: int) -> str:
    return "x" * (tokens * 4)


def _context(prefix_tokens: int, tail: list[Message]) -> WorkingContext:
    return WorkingContext(prefix=PrefixContext(system_prompt=_big(prefix_tokens)), messages=tail)
