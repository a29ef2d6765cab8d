"""
Token counting: what a transcript costs before it is sent.

Every counter counts the same parts of a message: its text, ``name`` and
``tool_call_id``, and each tool call in its wire form (id, name and JSON
arguments), plus four tokens of structure per message and per tool call, plus a
documented estimate for media. Counters differ only in how characters become
tokens: :class:`ApproxTokenCounter` divides by four, :class:`TiktokenCounter`
runs a real tokenizer. Counts are cached on each message, so counting a grown
transcript again costs only its new messages, and :class:`RunningCount` keeps
the running total of a growing transcript.

>>> from workingctx import Message, ToolCall
>>> from workingctx.tokens import estimate_message_tokens
>>> transcript = [
...     Message("user", "check the cert"),
...     Message("assistant", tool_calls=(ToolCall("c1", "openssl", {"host": "example.com", "port": 443}),)),
...     Message("tool", "notAfter=2026-08-01", name="openssl", tool_call_id="c1"),
... ]
>>> estimate_message_tokens(transcript)
37
>>> estimate_message_tokens([])
0
"""

import contextlib
import typing

import attrs

from workingctx.tokens import _cache, _rules
from workingctx.tokens._counters import (
    ApproxTokenCounter,
    MessageCounter,
    TiktokenCounter,
    TokenCounter,
    counting,
    estimate_message_tokens,
)
from workingctx.tokens._rules import (
    CHARS_PER_TOKEN,
    IMAGE_RULES,
    MESSAGE_OVERHEAD,
    TOOL_CALL_OVERHEAD,
    ImageRule,
    image_tokens,
    media_tokens,
)
from workingctx.tokens._running import RunningCount, whole_counter

__all__ = [
    "CHARS_PER_TOKEN",
    "IMAGE_RULES",
    "MESSAGE_OVERHEAD",
    "TOOL_CALL_OVERHEAD",
    "ApproxTokenCounter",
    "ImageRule",
    "MessageCounter",
    "RunningCount",
    "TiktokenCounter",
    "TokenCounter",
    "counting",
    "estimate_message_tokens",
    "image_tokens",
    "media_tokens",
    "whole_counter",
]

# Importable from here as before, outside __all__: the figures of the media
# estimates, checked_count (a count a counter gave, as an int: cache plans use
# it) and wire_json (tool arguments in the wire form they are counted in).
ANTHROPIC_MAX_EDGE = _rules.ANTHROPIC_MAX_EDGE
ANTHROPIC_MAX_IMAGE_TOKENS = _rules.ANTHROPIC_MAX_IMAGE_TOKENS
ANTHROPIC_PIXELS_PER_TOKEN = _rules.ANTHROPIC_PIXELS_PER_TOKEN
AUDIO_TOKENS_PER_SECOND = _rules.AUDIO_TOKENS_PER_SECOND
DATA_UNKNOWN_SIZE_TOKENS = _rules.DATA_UNKNOWN_SIZE_TOKENS
DOCUMENT_PAGE_TOKENS = _rules.DOCUMENT_PAGE_TOKENS
IMAGE_BASE_TOKENS = _rules.IMAGE_BASE_TOKENS
IMAGE_TILE_TOKENS = _rules.IMAGE_TILE_TOKENS
IMAGE_UNKNOWN_SIZE = _rules.IMAGE_UNKNOWN_SIZE
IMAGE_UNKNOWN_SIZE_TOKENS = _rules.IMAGE_UNKNOWN_SIZE_TOKENS
UNKNOWN_DURATION_MS = _rules.UNKNOWN_DURATION_MS
VIDEO_TOKENS_PER_SECOND = _rules.VIDEO_TOKENS_PER_SECOND
checked_count = _cache.checked_count
wire_json = _rules.wire_json

# Every class and function above is defined in a private module: say where users
# import it from, so reprs, docs and pickles name ``workingctx.tokens`` and a
# stored counter still loads after the private modules move. A class's annotations
# are evaluated first, where their names are, so typing.get_type_hints and cattrs
# still read them once the class names this module.
for _name in __all__:
    _value = globals()[_name]
    if getattr(_value, "__module__", "").startswith(f"{__name__}._"):
        if attrs.has(_value):
            with contextlib.suppress(TypeError):  # array[int] before Python 3.12: no hints there, as before
                _value.__annotations__ = typing.get_type_hints(_value)
        _value.__module__ = __name__
del _name, _value
