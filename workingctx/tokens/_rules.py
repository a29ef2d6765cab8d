"""
What a message costs in tokens: the parts every counter counts, the per-message
and per-call overheads, and the estimates for media.

Every counter counts the same parts of a message: its text, ``name`` and
``tool_call_id``, and each tool call in its wire form (id, name and JSON
arguments), plus :data:`MESSAGE_OVERHEAD` per message and
:data:`TOOL_CALL_OVERHEAD` per tool call, plus :func:`media_tokens` for media.
:func:`approx_count` turns those parts into tokens at :data:`CHARS_PER_TOKEN`
characters each; a real tokenizer encodes the text of :func:`message_parts`.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

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
    from collections.abc import Callable, Iterable

__all__ = [
    "ANTHROPIC_MAX_EDGE",
    "ANTHROPIC_MAX_IMAGE_TOKENS",
    "ANTHROPIC_PIXELS_PER_TOKEN",
    "AUDIO_TOKENS_PER_SECOND",
    "CHARS_PER_TOKEN",
    "DATA_UNKNOWN_SIZE_TOKENS",
    "DOCUMENT_PAGE_TOKENS",
    "ENCODER",
    "IMAGE_BASE_TOKENS",
    "IMAGE_RULES",
    "IMAGE_TILE_TOKENS",
    "IMAGE_UNKNOWN_SIZE",
    "IMAGE_UNKNOWN_SIZE_TOKENS",
    "MESSAGE_OVERHEAD",
    "TOOL_CALL_OVERHEAD",
    "UNKNOWN_DURATION_MS",
    "VIDEO_TOKENS_PER_SECOND",
    "ImageRule",
    "approx_count",
    "call_arguments",
    "check_rule",
    "image_tokens",
    "media_tokens",
    "message_parts",
    "wire_json",
]

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


ENCODER = _make_encoder()


def wire_json(value: Any) -> str:
    """
    Tool arguments in their wire form: ``json.dumps`` with its default separators.
    """
    try:
        return "".join(ENCODER(value, 0)) if ENCODER is not None else json.dumps(value)
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
    check_rule(rule)
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


def check_rule(rule: object) -> ImageRule:
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
            parts += (block.id, block.name, wire_json(block.args))
            calls += 1
        elif isinstance(block, ReasoningBlock):
            parts.append(block.summary)
            if block.details:
                parts.extend(block.details)
            if block.encrypted is not None:  # opaque, but it stands for thinking of about its size
                parts.append(block.encrypted)
        elif isinstance(block, ProviderBlock):
            parts.append(wire_json(block.data))
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


def message_parts(message: Message, images: ImageRule = "openai") -> tuple[list[str], int, int]:
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
        parts += (call.id, call.name, call_arguments(call))
    calls += len(message.tool_calls)
    return parts, calls, media


def approx_count(message: Message, images: ImageRule = "openai") -> int:
    # The same parts as message_parts(), summed as lengths without building a list: this is the hot path.
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
            chars += len(call.id) + len(call.name) + len(call_arguments(call))
        calls += len(tool_calls)
    return chars // CHARS_PER_TOKEN + MESSAGE_OVERHEAD + TOOL_CALL_OVERHEAD * calls + media


def call_arguments(call: ToolCall) -> str:
    """
    A call's arguments as counted: their wire JSON, or, for a call whose
    arguments text is not a JSON object (kept as data), that text.
    """
    if call.arguments or call.arguments_json is None or call.arguments_parsed:
        return wire_json(call.arguments)
    return call.arguments_json
