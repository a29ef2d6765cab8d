"""
The reference tool transcript and the helpers the token tests share: a fresh
copy of a message and the count cached on one.
"""

from __future__ import annotations

import attrs

from workingctx import Message, ToolCall
from workingctx.tokens._cache import count_cache


def openssl_transcript() -> list[Message]:
    return [
        Message("user", "check the cert"),
        Message(
            "assistant",
            "",
            tool_calls=(ToolCall("c1", "openssl", {"host": "example.com", "port": 443}),),
        ),
        Message("tool", "notAfter=2026-08-01", name="openssl", tool_call_id="c1"),
    ]


def fresh(message: Message) -> Message:
    """
    An equal message with no cached counts.
    """
    copy = attrs.evolve(message)
    assert cached(copy, "approx") is None
    return copy


def _never(message: Message) -> int:
    raise AssertionError(message)


def cached(message: Message, name: str) -> int | None:
    """
    The count cached on *message* under the counter name *name*, or None.
    """
    return count_cache(name, _never).peek(message)
