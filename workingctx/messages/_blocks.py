"""
The content blocks a message can hold (text, media, tool calls and results,
reasoning, citations, errors, a provider's own blocks) and ``ToolCall``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, TypeAlias

import attrs

from workingctx import _checks
from workingctx.exceptions import InvalidMessageError
from workingctx.frozen import EMPTY_JSON_OBJECT, FrozenDict
from workingctx.messages._fields import (
    _args,
    _arguments,
    _as_tuple,
    _bool,
    _check_int,
    _check_number,
    _error_data,
    _json_object,
    _json_output,
    _nonempty_str,
    _one_of,
    _opt_int,
    _opt_str,
    _provider_block_data,
    _provider_data,
    _quiet_repr,
    _str,
)
from workingctx.messages._refs import AnnotationRef, CacheBreakpoint, MediaRef

__all__ = [
    "BLOCK_TYPES",
    "AnnotationBlock",
    "AudioBlock",
    "ContentBlock",
    "DataBlock",
    "DocumentBlock",
    "ErrorBlock",
    "ImageBlock",
    "ProviderBlock",
    "ReasoningBlock",
    "RemoteToolCallBlock",
    "TextBlock",
    "ToolCall",
    "ToolCallBlock",
    "ToolResultBlock",
    "VideoBlock",
]


def _to_annotations(value: object) -> tuple[AnnotationRef, ...]:
    return _as_tuple(value, AnnotationRef, "annotations")


def _to_refs(value: object) -> tuple[AnnotationRef, ...]:
    return _as_tuple(value, AnnotationRef, "refs")


def _to_bbox(value: object) -> tuple[float, ...] | None:
    if value is None:
        return None
    numbers = _as_tuple(value, (int, float), "bbox")
    for position, number in enumerate(numbers):
        _check_number(number, f"bbox[{position}]")
    return numbers


def _to_pages(value: object) -> tuple[int, ...] | None:
    if value is None:
        return None
    pages = _as_tuple(value, int, "pages")
    for position, page in enumerate(pages):
        _check_int(page, f"pages[{position}]")
    return pages


def _to_details(value: object) -> tuple[str, ...] | None:
    return None if value is None else _as_tuple(value, str, "details")


def _to_spans(value: object) -> tuple[tuple[int, int], ...] | None:
    if value is None:
        return None
    spans = _as_tuple(value, (tuple, list), "spans")
    for position, span in enumerate(spans):
        if len(span) != 2 or not all(isinstance(n, int) and not isinstance(n, bool) for n in span):
            raise _checks.wrong_type(span, f"spans[{position}]", "a (start, end) pair of ints")
        _check_int(span[0], f"spans[{position}][0]")
        _check_int(span[1], f"spans[{position}][1]")
    return tuple((span[0], span[1]) for span in spans)


_detail = _one_of("auto", "low", "high", None)


_MEDIA = _checks.instance_of(MediaRef, "a MediaRef")
_OPT_MEDIA = _checks.instance_of(MediaRef, "a MediaRef", optional=True)
_OPT_CACHE = _checks.instance_of(CacheBreakpoint, "a CacheBreakpoint", optional=True)


# -- content blocks -----------------------------------------------------------


def _to_result_content(value: object) -> tuple[Any, ...]:
    blocks = _as_tuple(value, BLOCK_TYPES, "content")
    for position, block in enumerate(blocks):
        if isinstance(block, ToolResultBlock | ToolCallBlock | RemoteToolCallBlock):
            msg = (
                f"content[{position}] of a tool result is a {type(block).__name__}; "
                "a result holds text, images, documents and data, not calls or results"
            )
            raise InvalidMessageError(msg)
    return blocks


@attrs.frozen(cache_hash=True, repr=False)
class TextBlock:
    """
    Text, with optional citations.
    """

    type: ClassVar[Literal["text"]] = "text"
    text: str = attrs.field(validator=_str)
    annotations: tuple[AnnotationRef, ...] = attrs.field(default=(), converter=_to_annotations)
    cache: CacheBreakpoint | None = attrs.field(default=None, kw_only=True, validator=_OPT_CACHE)
    provider_data: FrozenDict = attrs.field(default=EMPTY_JSON_OBJECT, kw_only=True, converter=_provider_data)


@attrs.frozen(cache_hash=True, repr=False)
class ImageBlock:
    """
    An image, referenced through a :class:`MediaRef`.

    ``detail`` is the resolution asked of the provider (OpenAI's ``"low"``,
    ``"high"`` or ``"auto"``); None leaves it to the provider's default.
    """

    type: ClassVar[Literal["image"]] = "image"
    media: MediaRef = attrs.field(validator=_MEDIA)
    alt_text: str | None = attrs.field(default=None, validator=_opt_str)
    bbox: tuple[float, ...] | None = attrs.field(default=None, converter=_to_bbox)
    detail: Literal["auto", "low", "high"] | None = attrs.field(default=None, validator=_detail)
    cache: CacheBreakpoint | None = attrs.field(default=None, kw_only=True, validator=_OPT_CACHE)
    provider_data: FrozenDict = attrs.field(default=EMPTY_JSON_OBJECT, kw_only=True, converter=_provider_data)


@attrs.frozen(cache_hash=True, repr=False)
class AudioBlock:
    """
    Audio, referenced through a :class:`MediaRef`, with an optional transcript.
    """

    type: ClassVar[Literal["audio"]] = "audio"
    media: MediaRef = attrs.field(validator=_MEDIA)
    transcript: str | None = attrs.field(default=None, validator=_opt_str)
    sample_rate: int | None = attrs.field(default=None, validator=_opt_int)
    channels: int | None = attrs.field(default=None, validator=_opt_int)
    provider_data: FrozenDict = attrs.field(default=EMPTY_JSON_OBJECT, kw_only=True, converter=_provider_data)


@attrs.frozen(cache_hash=True, repr=False)
class VideoBlock:
    """
    A video, referenced through a :class:`MediaRef`.
    """

    type: ClassVar[Literal["video"]] = "video"
    media: MediaRef = attrs.field(validator=_MEDIA)
    thumbnail: MediaRef | None = attrs.field(default=None, validator=_OPT_MEDIA)
    provider_data: FrozenDict = attrs.field(default=EMPTY_JSON_OBJECT, kw_only=True, converter=_provider_data)


@attrs.frozen(cache_hash=True, repr=False)
class DocumentBlock:
    """
    A document such as a PDF, with optional extracted text, pages and excerpt.
    """

    type: ClassVar[Literal["document"]] = "document"
    media: MediaRef = attrs.field(validator=_MEDIA)
    text: str | None = attrs.field(default=None, validator=_opt_str)
    pages: tuple[int, ...] | None = attrs.field(default=None, converter=_to_pages)
    excerpt: str | None = attrs.field(default=None, validator=_opt_str)
    cache: CacheBreakpoint | None = attrs.field(default=None, kw_only=True, validator=_OPT_CACHE)
    provider_data: FrozenDict = attrs.field(default=EMPTY_JSON_OBJECT, kw_only=True, converter=_provider_data)


@attrs.frozen(cache_hash=True)
class DataBlock:
    """
    Generic binary data, inline or referenced.
    """

    type: ClassVar[Literal["data"]] = "data"
    mime_type: str = attrs.field(validator=_str)
    data_base64: str | None = attrs.field(default=None, validator=_opt_str)
    media: MediaRef | None = attrs.field(default=None, validator=_OPT_MEDIA)


@attrs.frozen(cache_hash=True, repr=False)
class ToolCallBlock:
    """
    A model's request to call a tool, as a content block.
    """

    type: ClassVar[Literal["tool_call"]] = "tool_call"
    id: str = attrs.field(validator=_nonempty_str)
    name: str = attrs.field(validator=_nonempty_str)
    args: FrozenDict = attrs.field(default=EMPTY_JSON_OBJECT, converter=_args)
    tool_type: str | None = attrs.field(default=None, validator=_opt_str)
    cache: CacheBreakpoint | None = attrs.field(default=None, kw_only=True, validator=_OPT_CACHE)
    provider_data: FrozenDict = attrs.field(default=EMPTY_JSON_OBJECT, kw_only=True, converter=_provider_data)


@attrs.frozen(cache_hash=True)
class RemoteToolCallBlock:
    """
    A tool call meant to run on a remote client rather than in the agent.
    """

    type: ClassVar[Literal["remote_tool_call"]] = "remote_tool_call"
    id: str = attrs.field(validator=_nonempty_str)
    name: str = attrs.field(validator=_nonempty_str)
    args: FrozenDict = attrs.field(default=EMPTY_JSON_OBJECT, converter=_args)
    tool_type: str = attrs.field(default="remote", validator=_str)


@attrs.frozen(cache_hash=True, repr=False)
class ToolResultBlock:
    """
    The output of a tool call, linked to it by ``call_id``.

    ``output`` is text or JSON-like data (deep-frozen). A result made of content
    blocks (text, a screenshot, a document) keeps them in ``content`` instead,
    each counted as what it is; ``output`` then stays ``""``.
    """

    type: ClassVar[Literal["tool_result"]] = "tool_result"
    call_id: str = attrs.field(validator=_nonempty_str)
    output: Any = attrs.field(default="", converter=_json_output)
    is_error: bool = attrs.field(default=False, validator=_bool)
    status: Literal["completed", "failed"] | None = attrs.field(
        default=None, validator=_one_of("completed", "failed", None)
    )
    content: tuple[ContentBlock, ...] = attrs.field(default=(), kw_only=True, converter=_to_result_content)
    cache: CacheBreakpoint | None = attrs.field(default=None, kw_only=True, validator=_OPT_CACHE)
    provider_data: FrozenDict = attrs.field(default=EMPTY_JSON_OBJECT, kw_only=True, converter=_provider_data)

    def output_text(self) -> str:
        """
        The output as text: strings as they are, the text of ``content`` blocks,
        anything else JSON-encoded.
        """
        if self.content:
            return "".join(b.text for b in self.content if isinstance(b, TextBlock))
        if isinstance(self.output, str):
            return self.output
        return json.dumps(self.output, sort_keys=True, ensure_ascii=False, default=str)


@attrs.frozen(cache_hash=True, repr=False)
class ReasoningBlock:
    """
    A reasoning model's thinking: a summary and optional detailed steps.

    What a provider needs to accept the thinking back is kept untouched:
    ``signature`` (Anthropic's thinking signature, Gemini's thought signature),
    ``encrypted`` (Anthropic's redacted thinking data, OpenAI's
    ``encrypted_content``) with ``redacted=True`` when the thinking itself is
    hidden. ``provider`` names who produced it (``"anthropic"``, ``"openai"``,
    ``"google"``): adapters replay the block only to that provider and drop it
    for the others.
    """

    type: ClassVar[Literal["reasoning"]] = "reasoning"
    summary: str = attrs.field(validator=_str)
    details: tuple[str, ...] | None = attrs.field(default=None, converter=_to_details)
    signature: str | None = attrs.field(default=None, kw_only=True, validator=_opt_str)
    encrypted: str | None = attrs.field(default=None, kw_only=True, validator=_opt_str)
    redacted: bool = attrs.field(default=False, kw_only=True, validator=_bool)
    provider: str | None = attrs.field(default=None, kw_only=True, validator=_opt_str)
    provider_data: FrozenDict = attrs.field(default=EMPTY_JSON_OBJECT, kw_only=True, converter=_provider_data)


@attrs.frozen(cache_hash=True)
class AnnotationBlock:
    """
    A structured citation or note attached to a response.
    """

    type: ClassVar[Literal["annotation"]] = "annotation"
    kind: Literal["citation", "note"] = attrs.field(default="citation", validator=_one_of("citation", "note"))
    refs: tuple[AnnotationRef, ...] = attrs.field(default=(), converter=_to_refs)
    spans: tuple[tuple[int, int], ...] | None = attrs.field(default=None, converter=_to_spans)


@attrs.frozen(cache_hash=True)
class ErrorBlock:
    """
    An error recorded in the conversation.
    """

    type: ClassVar[Literal["error"]] = "error"
    message: str = attrs.field(validator=_str)
    code: str | None = attrs.field(default=None, validator=_opt_str)
    data: FrozenDict | None = attrs.field(default=None, converter=_error_data)


@attrs.frozen(cache_hash=True)
class ProviderBlock:
    """
    A block of one provider's wire format that has no first-class workingctx
    counterpart (a server tool's result, a search result, ...), kept as that
    provider sent it, deep-frozen.

    Adapters send it back to ``provider`` unchanged and leave it out for the
    others. It counts as the length of its JSON text.

    >>> ProviderBlock("anthropic", {"type": "server_tool_use", "id": "srvtoolu_1"}).data["type"]
    'server_tool_use'
    """

    type: ClassVar[Literal["provider"]] = "provider"
    provider: str = attrs.field(validator=_nonempty_str)
    data: FrozenDict = attrs.field(default=EMPTY_JSON_OBJECT, converter=_provider_block_data)

    @property
    def asks(self) -> str | None:
        """
        The id of the call this block asks the agent to run, when a later
        message must answer it: an OpenAI Responses client-side call
        (``computer_call``, ``custom_tool_call``, ``shell_call``, ...) or MCP
        approval request; a Chat Completions custom tool call is held as a
        ``custom_tool_call`` too. None for any other block.

        >>> ProviderBlock("openai_responses", {"type": "custom_tool_call", "call_id": "c1", "input": "x"}).asks
        'c1'
        """
        return self._call(_ASKING)

    @property
    def answers(self) -> str | None:
        """
        The id of the call this block answers (see :attr:`asks`): a Responses
        ``computer_call_output``, ``custom_tool_call_output``, ... or MCP
        approval response. None for any other block.

        >>> output = {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"}
        >>> ProviderBlock("openai_responses", output).answers
        'c1'
        """
        return self._call(_ANSWERING)

    def renamed(self, call_id: str) -> ProviderBlock:
        """
        This block asking for, or answering, the call *call_id* instead (see
        :attr:`asks` and :attr:`answers`); the block itself when it does neither.

        >>> ProviderBlock("openai_responses", {"type": "computer_call_output", "call_id": "c1"}).renamed("c2").answers
        'c2'
        """
        field = self._field(_ASKING) or self._field(_ANSWERING)
        if field is None:
            return self
        return ProviderBlock(self.provider, {**self.data, field: call_id})

    def _call(self, fields: dict[str, tuple[str, ...]]) -> str | None:
        """
        The call id this block names in the first field *fields* gives for its type that holds one, if any.
        """
        field = self._field(fields)
        return None if field is None else str(self.data[field])

    def _field(self, fields: dict[str, tuple[str, ...]]) -> str | None:
        """
        The first field *fields* gives for this block's type that holds a call id, if any.
        """
        return _item_field(self.data, fields) if self.provider == _RESPONSES else None


def _item_field(item: Mapping[str, Any], fields: dict[str, tuple[str, ...]]) -> str | None:
    """
    The first field *fields* gives for a Responses item's type that holds a call id, if any.
    """
    kind = item.get("type")
    names = fields.get(kind, ()) if isinstance(kind, str) else ()
    if str(kind).startswith("tool_search") and item.get("execution") != "client":
        return None
    return next((name for name in names if type(found := item.get(name)) is str and found), None)


def item_call_ids(item: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """
    The id of the call a Responses input item asks for, and of the call it
    answers (a ``function_call`` asks, its ``function_call_output`` answers;
    likewise the kinds of :attr:`ProviderBlock.asks`); None where it does neither.

    >>> item_call_ids({"type": "local_shell_call_output", "id": "call_1", "output": "ok"})
    (None, 'call_1')
    """
    asks, answers = _item_field(item, _ASKING), _item_field(item, _ANSWERING)
    return (None if asks is None else str(item[asks])), (None if answers is None else str(item[answers]))


def asked_id(block: object) -> str | None:
    """
    The id of the call *block* asks for: a tool-call block's, or a provider's
    own call's (:attr:`ProviderBlock.asks`); None for any other block.
    """
    if isinstance(block, ToolCallBlock | RemoteToolCallBlock):
        return block.id
    return block.asks if isinstance(block, ProviderBlock) else None


def answered_id(block: object) -> str | None:
    """
    The id of the call *block* answers: a tool result's, or a provider's own
    answer's (:attr:`ProviderBlock.answers`); None for any other block.
    """
    if isinstance(block, ToolResultBlock):
        return block.call_id
    return block.answers if isinstance(block, ProviderBlock) else None


_RESPONSES = "openai_responses"
"""The provider name of the OpenAI Responses adapter's blocks (its ``PROVIDER``)."""

_ASKING: dict[str, tuple[str, ...]] = {
    "function_call": ("call_id",),
    "custom_tool_call": ("call_id",),
    "computer_call": ("call_id",),
    "local_shell_call": ("call_id",),
    "shell_call": ("call_id",),
    "apply_patch_call": ("call_id",),
    "tool_search_call": ("call_id",),  # when the client runs the search
    "mcp_approval_request": ("id",),
}
"""The Responses items that the agent must answer, by type: the field naming the call."""

_ANSWERING: dict[str, tuple[str, ...]] = {
    "function_call_output": ("call_id",),
    "custom_tool_call_output": ("call_id",),
    "computer_call_output": ("call_id",),
    # the API's own type names the call by "id"; the Agents SDK writes "call_id"
    "local_shell_call_output": ("call_id", "id"),
    "shell_call_output": ("call_id",),
    "apply_patch_call_output": ("call_id",),
    "tool_search_output": ("call_id",),
    "mcp_approval_response": ("approval_request_id",),
}
"""The Responses items that answer one of :data:`_ASKING`, by type: the field naming the call."""


ContentBlock: TypeAlias = (
    TextBlock
    | ImageBlock
    | AudioBlock
    | VideoBlock
    | DocumentBlock
    | DataBlock
    | ToolCallBlock
    | RemoteToolCallBlock
    | ToolResultBlock
    | ReasoningBlock
    | AnnotationBlock
    | ErrorBlock
    | ProviderBlock
)
BLOCK_TYPES: tuple[type[Any], ...] = (
    TextBlock,
    ImageBlock,
    AudioBlock,
    VideoBlock,
    DocumentBlock,
    DataBlock,
    ToolCallBlock,
    RemoteToolCallBlock,
    ToolResultBlock,
    ReasoningBlock,
    AnnotationBlock,
    ErrorBlock,
    ProviderBlock,
)


# -- tool calls ---------------------------------------------------------------


@attrs.frozen(cache_hash=True, repr=False)
class ToolCall:
    """
    A tool call the model asked for: its id, the tool's name, and JSON arguments.

    The arguments are deep-frozen, so a message carrying tool calls hashes.
    ``arguments_json`` keeps the exact text the model wrote, when there is one,
    so that it is sent back byte for byte. Text that is the text of a JSON
    object decodes to ``arguments``; any other text (a reply cut off by
    ``max_tokens``, ``'[1,2]'``, ``'null'``) is kept verbatim as data, with
    ``arguments`` empty and :attr:`arguments_parsed` False: no tool should run
    it. The OpenAI formats send the text back as it came; the formats that take
    arguments as an object refuse it (the ``unparsable-arguments`` problem)
    rather than send ``{}``.

    >>> ToolCall("c1", "openssl", {"host": "example.com"}).arguments
    {'host': 'example.com'}
    >>> ToolCall("c1", "openssl", arguments_json='{"host":"example.com"}').arguments
    {'host': 'example.com'}
    >>> cut = ToolCall("c2", "read", arguments_json='{"path": "/tmp/a')
    >>> cut.arguments, cut.arguments_json, cut.arguments_parsed
    ({}, '{"path": "/tmp/a', False)

    Raises:
        InvalidMessageError: ``arguments`` and ``arguments_json`` disagree (the
            text decodes to other arguments, or is not a JSON object while
            ``arguments`` is not empty).
    """

    id: str = attrs.field(validator=_nonempty_str)
    name: str = attrs.field(validator=_nonempty_str)
    arguments: FrozenDict = attrs.field(default=EMPTY_JSON_OBJECT, converter=_arguments)
    arguments_json: str | None = attrs.field(default=None, kw_only=True, validator=_opt_str)
    provider_data: FrozenDict = attrs.field(default=EMPTY_JSON_OBJECT, kw_only=True, converter=_provider_data)

    def __attrs_post_init__(self) -> None:
        raw = self.arguments_json
        if raw is None:
            return
        decoded = _json_object_text(raw)
        if decoded is None:
            if self.arguments:
                msg = (
                    f"arguments_json {raw[:60]!r} is not the text of a JSON object, so arguments must stay empty, "
                    f"got {dict(self.arguments)!r}; pass the text alone (kept as data) or arguments alone"
                )
                raise InvalidMessageError(msg, argument="arguments_json", value=raw)
            return
        if not self.arguments:
            object.__setattr__(self, "arguments", _json_object(decoded, "arguments_json"))
        elif decoded != self.arguments:
            msg = (
                f"arguments_json {raw[:60]!r} does not decode to arguments {dict(self.arguments)!r}; "
                "pass one of them, or both in agreement"
            )
            raise InvalidMessageError(msg)

    @property
    def arguments_parsed(self) -> bool:
        """
        Whether ``arguments`` holds what the model asked for: False when
        ``arguments_json`` is text that is not a JSON object (kept verbatim,
        ``arguments`` then empty).
        """
        raw = self.arguments_json
        return raw is None or bool(self.arguments) or _json_object_text(raw) is not None


def _json_object_text(raw: str) -> dict[str, Any] | None:
    """
    The object *raw* is the JSON text of, or None for any other text.
    """
    try:
        decoded = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return decoded if isinstance(decoded, dict) else None


for _cls in (
    TextBlock,
    ImageBlock,
    AudioBlock,
    VideoBlock,
    DocumentBlock,
    ToolCallBlock,
    ToolResultBlock,
    ReasoningBlock,
    ToolCall,
):
    _cls.__repr__ = _quiet_repr  # type: ignore[method-assign]
