"""
Messages, tool calls, content blocks and token usage: the values of a transcript.

Every class here is a frozen attrs value. Two values built from the same data
are equal and hash equal in every process: there are no random ids and no
timestamps, so a transcript can serve as a cache key.

>>> from workingctx import Message, ToolCall
>>> Message("user", "hi") == Message.user("hi")
True
>>> call = ToolCall("c1", "lookup", {"q": "cert"})
>>> Message.assistant(tool_calls=(call,)).tool_calls[0].arguments
{'q': 'cert'}
"""

from __future__ import annotations

import asyncio
import base64
import json
import mimetypes
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeAlias, cast

import attrs

from workingctx import _checks
from workingctx._canonical import message_digest
from workingctx._wire import wire_errors
from workingctx.exceptions import ArgumentTypeError, ArgumentValueError, InvalidMessageError
from workingctx.frozen import EMPTY_JSON_OBJECT, FrozenDict, freeze_json, is_json_payload

if TYPE_CHECKING:
    from workingctx.media import MediaStore

__all__ = [
    "MAX_INLINE_FILE_BYTES",
    "ROLES",
    "AnnotationBlock",
    "AnnotationRef",
    "AudioBlock",
    "CacheBreakpoint",
    "ContentBlock",
    "DataBlock",
    "DocumentBlock",
    "ErrorBlock",
    "ImageBlock",
    "MediaRef",
    "Message",
    "ProviderBlock",
    "ReasoningBlock",
    "RemoteToolCallBlock",
    "Role",
    "TextBlock",
    "ToolCall",
    "ToolCallBlock",
    "ToolResultBlock",
    "Usage",
    "VideoBlock",
]

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})


# -- validators and converters ------------------------------------------------


_str = _checks.text()
_opt_str = _checks.text(optional=True)
_opt_int = _checks.integer(optional=True, error=InvalidMessageError)
_bool = _checks.flag()
_nonempty_str = _checks.text(nonempty=True, fix="pass the id or name the provider gave", error=InvalidMessageError)


def _one_of(*choices: str | None) -> Callable[[object, attrs.Attribute[Any], object], None]:
    """
    A validator for a ``Literal`` field: exactly one of *choices* (a str, not a subclass).
    """
    return _checks.one_of(*choices, error=InvalidMessageError)


def _check_int(value: object, what: str) -> None:
    """
    Refuse anything but an int (a bool is not one) that ``str()`` can write.
    """
    _checks.check_int(value, what, error=InvalidMessageError)


def _check_number(value: object, what: str) -> None:
    """
    Refuse anything but a finite float or an int that ``str()`` can write.
    """
    _checks.check_number(value, what, fix="JSON has no NaN or infinity", error=InvalidMessageError)
    if isinstance(value, int):
        _check_int(value, what)


def _json_object(value: object, where: str) -> FrozenDict:
    """
    A payload field holding a JSON object, checked and deep-frozen (a frozen
    object already checked is kept as it is).
    """
    if type(value) is FrozenDict and is_json_payload(value):
        return value
    if not isinstance(value, Mapping):
        raise _checks.wrong_type(
            value,
            where,
            "a mapping (such as a dict)",
            fix=f"{where} is a JSON object: pass a dict, or json.loads() a JSON string first",
        )
    return cast("FrozenDict", freeze_json(value, where))


def _arguments(value: object) -> FrozenDict:
    return _json_object(value, "arguments")


def _args(value: object) -> FrozenDict:
    return _json_object(value, "args")


def _metadata(value: object) -> FrozenDict:
    return _json_object(value, "metadata")


def _error_data(value: object) -> FrozenDict | None:
    return None if value is None else _json_object(value, "data")


def _json_output(value: object) -> Any:
    return freeze_json(value, "output")


def _provider_data(value: object) -> FrozenDict:
    if not isinstance(value, Mapping):
        raise _checks.wrong_type(
            value,
            "provider_data",
            "a mapping",
            fix="key it by provider, such as {'anthropic': {'citations': [...]}}",
        )
    for key in value:
        if not isinstance(key, str):
            raise _checks.wrong_type(key, "provider_data", "provider names (str)", label="provider_data keys")
    return _json_object(value, "provider_data")


def _provider_block_data(value: object) -> FrozenDict:
    return _json_object(value, "data")


def _as_tuple(value: object, kind: type[Any] | tuple[type[Any], ...], what: str) -> tuple[Any, ...]:
    if value.__class__ is tuple and all(isinstance(item, kind) for item in value):
        return value  # a tuple of the right items, as most are
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise _checks.wrong_type(value, what, "a sequence")
    return _checks.check_items(value, what, kind, f"a {_kind_name(kind)}")


def _kind_name(kind: type[Any] | tuple[type[Any], ...]) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return kind.__name__


def _quiet_repr(self: Any) -> str:
    """
    The attrs repr, leaving out keyword-only fields at their default (caches,
    provider data, signatures), so everyday values print as they always did.
    """
    parts = []
    for field in attrs.fields(type(self)):
        value = getattr(self, field.name)
        if field.kw_only:
            factory = getattr(field.default, "factory", None)
            default = factory() if factory is not None else field.default
            if value == default:
                continue
        parts.append(f"{field.name}={value!r}")
    return f"{type(self).__name__}({', '.join(parts)})"


# -- references ---------------------------------------------------------------


@attrs.frozen(cache_hash=True)
class MediaRef:
    """
    A pointer to binary media: by URL, by a provider's file id, inline base64,
    or in a media store.

    ``kind`` says which of ``url``, ``file_id`` or ``data_base64`` holds it, and
    that field must be set. A ``"store"`` reference names bytes kept in a
    :mod:`workingctx.media` store by their content: its ``url`` is
    ``workingctx://media/<sha256>`` and its ``sha256`` is that same hex digest;
    make one with a store's ``put``, never by hand.

    >>> MediaRef(kind="url", url="https://example.com/a.png", mime_type="image/png").kind
    'url'
    """

    kind: Literal["url", "file_id", "data", "store"] = attrs.field(
        default="url", validator=_one_of("url", "file_id", "data", "store")
    )
    url: str | None = attrs.field(default=None, validator=_opt_str)
    file_id: str | None = attrs.field(default=None, validator=_opt_str)
    data_base64: str | None = attrs.field(default=None, validator=_opt_str)
    mime_type: str | None = attrs.field(default=None, validator=_opt_str)
    size_bytes: int | None = attrs.field(default=None, validator=_opt_int)
    sha256: str | None = attrs.field(default=None, validator=_opt_str)
    filename: str | None = attrs.field(default=None, validator=_opt_str)
    width: int | None = attrs.field(default=None, validator=_opt_int)
    height: int | None = attrs.field(default=None, validator=_opt_int)
    duration_ms: int | None = attrs.field(default=None, validator=_opt_int)
    page: int | None = attrs.field(default=None, validator=_opt_int)

    def __attrs_post_init__(self) -> None:
        field = {"url": "url", "file_id": "file_id", "data": "data_base64", "store": "url"}.get(self.kind)
        if field is None:
            msg = f"MediaRef kind must be 'url', 'file_id', 'data' or 'store', got {self.kind!r}"
            raise InvalidMessageError(msg)
        if getattr(self, field) is None:
            msg = (
                f"MediaRef(kind={self.kind!r}) needs {field}=...; "
                "set it, or pick the kind that matches the field you have"
            )
            raise InvalidMessageError(msg)
        if self.kind == "store":
            _check_store_ref(self)


STORE_URL_PREFIX = "workingctx://media/"
"""The URL scheme and path of a ``MediaRef`` of kind ``"store"``: the sha256 follows it."""

_HEX = frozenset("0123456789abcdef")


def _check_store_ref(ref: MediaRef) -> None:
    sha = ref.sha256
    if sha is None or len(sha) != 64 or not _HEX.issuperset(sha):  # a sha256 has 64 hex digits
        msg = (
            f"MediaRef(kind='store') needs sha256= the 64 lower-case hex digits of the content, got {sha!r}; "
            "make store references with a media store's put()"
        )
        raise InvalidMessageError(msg)
    if ref.url != STORE_URL_PREFIX + sha:
        msg = (
            f"MediaRef(kind='store') has url={ref.url!r}, which does not name its sha256 {sha!r}; "
            f"the url must be {STORE_URL_PREFIX + sha!r}"
        )
        raise InvalidMessageError(msg)


@attrs.frozen(cache_hash=True)
class AnnotationRef:
    """
    The source of a citation or note.

    >>> AnnotationRef(url="https://arxiv.org/abs/2303.08774", page=1).page
    1
    """

    url: str | None = attrs.field(default=None, validator=_opt_str)
    file_id: str | None = attrs.field(default=None, validator=_opt_str)
    page: int | None = attrs.field(default=None, validator=_opt_int)
    index: int | None = attrs.field(default=None, validator=_opt_int)
    title: str | None = attrs.field(default=None, validator=_opt_str)


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


@attrs.frozen(cache_hash=True)
class CacheBreakpoint:
    """
    A prompt-cache breakpoint set on a content block: the provider caches the
    request up to and including this block (Anthropic's ``cache_control``).

    ``ttl`` is ``"5m"`` or ``"1h"``, or None to leave the provider's default
    (five minutes) unstated.

    >>> CacheBreakpoint("1h").ttl
    '1h'
    """

    ttl: Literal["5m", "1h"] | None = attrs.field(default=None, validator=_one_of("5m", "1h", None))


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


@attrs.frozen(cache_hash=True)
class AudioBlock:
    """
    Audio, referenced through a :class:`MediaRef`, with an optional transcript.
    """

    type: ClassVar[Literal["audio"]] = "audio"
    media: MediaRef = attrs.field(validator=_MEDIA)
    transcript: str | None = attrs.field(default=None, validator=_opt_str)
    sample_rate: int | None = attrs.field(default=None, validator=_opt_int)
    channels: int | None = attrs.field(default=None, validator=_opt_int)


@attrs.frozen(cache_hash=True)
class VideoBlock:
    """
    A video, referenced through a :class:`MediaRef`.
    """

    type: ClassVar[Literal["video"]] = "video"
    media: MediaRef = attrs.field(validator=_MEDIA)
    thumbnail: MediaRef | None = attrs.field(default=None, validator=_OPT_MEDIA)


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


# -- tool calls and usage -----------------------------------------------------


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


def _to_tool_calls(value: object) -> tuple[ToolCall, ...]:
    return _as_tuple(value, ToolCall, "tool_calls")


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
        details = _usage_data(data.get("prompt_tokens_details") or data.get("input_tokens_details") or {}, "OpenAI", ())
        cached = _count(details, "cached_tokens")
        written = _count(details, "cache_write_tokens", "cache_creation_tokens")
        out_details = _usage_data(
            data.get("completion_tokens_details") or data.get("output_tokens_details") or {}, "OpenAI", ()
        )
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
        creation = _usage_data(data.get("cache_creation") or {}, "Anthropic", ())
        written = _count(data, "cache_creation_input_tokens")
        five = _count(creation, "ephemeral_5m_input_tokens")
        hour = _count(creation, "ephemeral_1h_input_tokens")
        return cls(
            input_tokens=_count(data, "input_tokens"),
            output_tokens=_count(data, "output_tokens"),
            cache_read_tokens=_count(data, "cache_read_input_tokens"),
            cache_write_tokens=max(written, five + hour),
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
        return cls(
            input_tokens=max(_count(data, "prompt_token_count", "promptTokenCount") - cached, 0),
            output_tokens=_count(data, "candidates_token_count", "candidatesTokenCount")
            + _count(data, "thoughts_token_count", "thoughtsTokenCount"),
            cache_read_tokens=cached,
            reasoning_tokens=_count(data, "thoughts_token_count", "thoughtsTokenCount"),
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
        details = _usage_data(data.get("input_token_details") or {}, "LangChain", ())
        out_details = _usage_data(data.get("output_token_details") or {}, "LangChain", ())
        read = _count(details, "cache_read")
        written = _count(details, "cache_creation")
        hour = _count(details, "ephemeral_1h_input_tokens")
        written = max(written, _count(details, "ephemeral_5m_input_tokens") + hour)
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


# -- the message --------------------------------------------------------------


def _content(value: object) -> str | tuple[ContentBlock, ...]:
    if isinstance(value, str):
        return value
    if isinstance(value, ToolCall | Message) or not isinstance(value, Iterable) or isinstance(value, bytes | Mapping):
        raise _checks.wrong_type(
            value,
            "content",
            "a str or a sequence of content blocks",
            fix="pass text as a str, or wrap blocks in a list such as [TextBlock(text=...)]",
        )
    return _as_tuple(value, BLOCK_TYPES, "content")


def _role(_inst: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    if type(value) is not str or value not in ROLES:
        msg = (
            f"unknown role {value!r}; a message's role is one of "
            "'system', 'user', 'assistant' or 'tool' (exact, lower case)"
        )
        if not isinstance(value, str):
            raise ArgumentTypeError(msg, argument="role", value=value, expected="a str")
        raise InvalidMessageError(msg, argument="role", value=value)


def _opt_id(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, str | int) or isinstance(value, bool)):
        raise _checks.wrong_type(value, attribute.name, "a str, an int or None")
    if isinstance(value, int):
        _check_int(value, attribute.name)


MAX_INLINE_FILE_BYTES = 32 * 1024 * 1024
"""The default limit of :meth:`Message.from_file`: 32 MiB, more than any provider accepts inline."""


def _read_regular_file(path: Path, max_bytes: int | None, caller: str = "Message.from_file()") -> bytes:
    """
    The bytes of a regular file of at most *max_bytes* (None: any size),
    checked on the open file itself (a path swapped for a FIFO after a check
    cannot block the read).
    """
    if max_bytes is not None:
        _checks.check_count(max_bytes, "max_bytes", error=InvalidMessageError)
    # O_NONBLOCK: opening a FIFO without a writer returns at once instead of waiting.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = "special file"
        if stat.S_ISDIR(info.st_mode):
            kind = "directory"
        elif stat.S_ISFIFO(info.st_mode):
            kind = "FIFO"
        msg = f"{caller} reads regular files only; {str(path)!r} is a {kind}"
        raise InvalidMessageError(msg)
    if max_bytes is None:
        with os.fdopen(fd, "rb") as handle:
            return handle.read()
    too_big = (
        f"{str(path)!r} holds more than {max_bytes:,} bytes, the limit of an inline file; "
        "pass max_bytes=... to raise it, or keep the file in a media store with Message.with_file()"
    )
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > max_bytes:
            raise InvalidMessageError(too_big)
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:  # it grew while it was read
        raise InvalidMessageError(too_big)
    return data


@attrs.frozen(cache_hash=True, repr=False)
class Message:
    """
    One turn of a conversation.

    Args:
        role: ``"system"``, ``"user"``, ``"assistant"`` or ``"tool"``.
        content: Text, or a sequence of content blocks (stored as a tuple).
        name: The speaker's or the tool's name, when the provider wants one.
        tool_call_id: On a tool message, the id of the call it answers.
        tool_calls: On an assistant message, the tool calls it asks for.
        id: An explicit id of your own; ``add_messages`` deduplicates on it.
            Nothing is generated when you leave it out.
        metadata: Free data of your own, deep-frozen; not sent to providers.
        usage: Token usage of the call that produced this message.
        delta: True for a partial streaming chunk (never kept by ``add_messages``).
        provider_data: What a provider's wire format carries that has no field
            here, keyed by provider (``{"openai": {"role": "developer"}}``),
            deep-frozen. It is sent, so it is compared, hashed and digested;
            adapters read only their own provider's key.

    Raises:
        InvalidMessageError: An unknown role, a ``tool_call_id`` on a message
            that is not a tool result, or ``tool_calls`` on a message that is
            not the assistant's.
        TypeError: A field of the wrong type (non-string text, arguments that
            are not a mapping, ...).

    >>> Message("user", "What changed?").text()
    'What changed?'
    """

    role: Role = attrs.field(validator=_role)
    content: str | tuple[ContentBlock, ...] = attrs.field(default="", converter=_content)
    name: str | None = attrs.field(default=None, kw_only=True, validator=_opt_str)
    tool_call_id: str | None = attrs.field(default=None, kw_only=True, validator=_opt_str)
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), kw_only=True, converter=_to_tool_calls)
    id: str | int | None = attrs.field(default=None, kw_only=True, validator=_opt_id)
    metadata: FrozenDict = attrs.field(default=EMPTY_JSON_OBJECT, kw_only=True, converter=_metadata, hash=False)
    usage: Usage | None = attrs.field(
        default=None,
        kw_only=True,
        hash=False,
        validator=_checks.instance_of(Usage, "a Usage", optional=True),
    )
    delta: bool = attrs.field(default=False, kw_only=True, validator=_bool)
    provider_data: FrozenDict = attrs.field(default=EMPTY_JSON_OBJECT, kw_only=True, converter=_provider_data)
    # Per-message caches, filled on first use: never compared, hashed or serialized.
    _digest: str | None = attrs.field(init=False, default=None, eq=False, repr=False)
    # owned by workingctx.tokens (count_cache in its _cache module): (counter name, count, name, count, ...)
    _token_counts: tuple[str, int] | dict[str, int] | None = attrs.field(init=False, default=None, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.tool_call_id is not None and self.role != "tool":
            msg = (
                f"tool_call_id={self.tool_call_id!r} is set on a {self.role!r} message; "
                "only a 'tool' message answers a call: use role='tool'"
            )
            raise InvalidMessageError(msg)
        if self.tool_calls and self.role != "assistant":
            msg = f"tool_calls are set on a {self.role!r} message; only an 'assistant' message asks for tool calls"
            raise InvalidMessageError(msg)

    def __repr__(self) -> str:
        parts = [repr(self.role), repr(self.content)]
        for name in ("name", "tool_call_id", "tool_calls", "id", "metadata", "usage", "delta", "provider_data"):
            value = getattr(self, name)
            if value != _MESSAGE_DEFAULTS[name]:
                parts.append(f"{name}={value!r}")
        return f"Message({', '.join(parts)})"

    # -- readers ------------------------------------------------------------

    def text(self) -> str:
        """
        The message's text: the content string, or the text of every
        :class:`TextBlock` and the output of every :class:`ToolResultBlock`,
        concatenated. Other blocks are skipped.
        """
        if isinstance(self.content, str):
            return self.content
        parts: list[str] = []
        for block in self.content:
            if isinstance(block, TextBlock):
                parts.append(block.text)
            elif isinstance(block, ToolResultBlock):
                parts.append(block.output_text())
        return "".join(parts)

    @property
    def call_ids(self) -> tuple[str, ...]:
        """
        The ids of the tool calls this message asks for (from ``tool_calls``
        and from tool-call blocks), in order, without repeats.
        """
        ids = [call.id for call in self.tool_calls]
        if not isinstance(self.content, str):
            ids.extend(b.id for b in self.content if isinstance(b, ToolCallBlock | RemoteToolCallBlock))
        return tuple(dict.fromkeys(ids))

    @property
    def result_ids(self) -> tuple[str, ...]:
        """
        The ids of the tool calls this message answers (``tool_call_id`` and
        tool-result blocks), in order, without repeats.
        """
        ids = [] if self.tool_call_id is None else [self.tool_call_id]
        if not isinstance(self.content, str):
            ids.extend(b.call_id for b in self.content if isinstance(b, ToolResultBlock))
        return tuple(dict.fromkeys(ids))

    def digest(self) -> str:
        """
        The hex sha256 of this message's canonical JSON encoding.

        Stable across processes, machines and ``PYTHONHASHSEED`` values; equal
        messages have equal digests. Computed once and cached.
        """
        if self._digest is None:
            object.__setattr__(self, "_digest", message_digest(self))
        return self._digest  # type: ignore[return-value]  # set just above

    # -- constructors -------------------------------------------------------

    @classmethod
    def system(cls, text: str, *, name: str | None = None, id: str | int | None = None) -> Message:  # noqa: A002
        """
        A system instruction.
        """
        return cls("system", text, name=name, id=id)

    @classmethod
    def user(cls, text: str, *, name: str | None = None, id: str | int | None = None) -> Message:  # noqa: A002
        """
        A message from the person.
        """
        return cls("user", text, name=name, id=id)

    @classmethod
    def assistant(
        cls,
        text: str | Iterable[ContentBlock] = "",
        *,
        tool_calls: Iterable[ToolCall] = (),
        name: str | None = None,
        id: str | int | None = None,  # noqa: A002
        usage: Usage | None = None,
    ) -> Message:
        """
        A reply from the model, possibly asking for tool calls.
        """
        return cls("assistant", text, tool_calls=tuple(tool_calls), name=name, id=id, usage=usage)

    @classmethod
    def tool(
        cls,
        output: str | Iterable[ContentBlock],
        *,
        call_id: str,
        name: str | None = None,
        id: str | int | None = None,  # noqa: A002
    ) -> Message:
        """
        The result of the tool call *call_id*.

        Raises:
            InvalidMessageError: *call_id* is empty.
        """
        if not isinstance(call_id, str) or not call_id:
            msg = f"Message.tool needs the id of the call it answers, got call_id={call_id!r}"
            raise InvalidMessageError(msg)
        return cls("tool", output, tool_call_id=call_id, name=name, id=id)

    @classmethod
    def notice(cls, text: str, *, id: str | int | None = None) -> Message:  # noqa: A002
        """
        A note from your code to the model: a user message that reads ``[notice] text``.
        """
        _checks.check_str(text, "text", owner="Message.notice")
        return cls("user", f"[notice] {text}", id=id)

    @classmethod
    def tool_message(
        cls,
        content: Iterable[ContentBlock],
        *,
        id: str | int | None = None,  # noqa: A002
        metadata: Mapping[str, Any] | None = None,
    ) -> Message:
        """
        A tool message built from blocks, usually :class:`ToolResultBlock`; its
        ``tool_call_id`` is taken from the single result block when there is one.
        """
        blocks = _content(content)
        results = [b for b in blocks if isinstance(b, ToolResultBlock)]
        call_id = results[0].call_id if len(results) == 1 else None
        return cls("tool", blocks, tool_call_id=call_id, id=id, metadata=metadata or {})

    @classmethod
    def image_message(
        cls,
        *,
        image_url: str | None = None,
        image_base64: str | None = None,
        mime_type: str = "image/png",
        text: str | None = None,
        role: Role = "user",
        id: str | int | None = None,  # noqa: A002
    ) -> Message:
        """
        A message with an optional text block and one image, by URL or inline base64.

        Raises:
            InvalidMessageError: neither *image_url* nor *image_base64* is given.
        """
        if image_url is not None:
            media = MediaRef(kind="url", url=image_url, mime_type=mime_type)
        elif image_base64 is not None:
            media = MediaRef(kind="data", data_base64=image_base64, mime_type=mime_type)
        else:
            msg = "image_message needs image_url=... or image_base64=..."
            raise InvalidMessageError(msg)
        blocks: list[ContentBlock] = [] if text is None else [TextBlock(text)]
        blocks.append(ImageBlock(media))
        return cls(role, tuple(blocks), id=id)

    @classmethod
    def from_file(
        cls,
        file_path: str | Path,
        mime_type: str | None = None,
        text: str | None = None,
        role: Role = "user",
        *,
        id: str | int | None = None,  # noqa: A002
        max_bytes: int = MAX_INLINE_FILE_BYTES,
    ) -> Message:
        """
        A message carrying a file inline (base64): an image, audio or video
        block by MIME type, a document block otherwise. Without *mime_type*,
        the type is guessed from the file name (an image whose bytes are a
        PNG, JPEG, GIF or WebP gets that type whatever its name says).

        Only regular files are read (a FIFO, a device or a directory could
        block or never end), and only up to *max_bytes*
        (:data:`MAX_INLINE_FILE_BYTES`, 32 MiB, by default: more than any
        provider accepts inline); keep larger files in a media store with
        :meth:`with_file`.

        Raises:
            FileNotFoundError: *file_path* does not exist.
            InvalidMessageError: *file_path* is not a regular file, or holds
                more than *max_bytes* bytes (a ``ValueError``).
            TypeError: *max_bytes* is not an int.
        """
        path = Path(file_path)
        data = _read_regular_file(path, max_bytes)
        mime = mime_type or _guess_mime(path, data)
        media = MediaRef(
            kind="data",
            data_base64=base64.b64encode(data).decode("ascii"),
            mime_type=mime,
            size_bytes=len(data),
            filename=path.name,
        )
        return cls(role, _with_text(text, _media_block(mime, media)), id=id)

    @classmethod
    async def with_image(
        cls,
        data: bytes,
        mime_type: str,
        store: MediaStore,
        text: str | None = None,
        role: Role = "user",
        *,
        id: str | int | None = None,  # noqa: A002
        alt_text: str | None = None,
        detail: Literal["auto", "low", "high"] | None = None,
    ) -> Message:
        """
        A message whose image is saved to a media store: the message keeps only
        a :class:`MediaRef` of kind ``"store"`` (with the sha256, the size and,
        for PNG, JPEG, GIF and WebP, the width and height read from the header).

        The store's ``put`` runs in a worker thread, so a slow disk does not
        block the event loop.

        Args:
            data: The image's bytes.
            mime_type: Its MIME type, ``image/...``.
            store: A media store, such as :class:`~workingctx.media.FileMediaStore`.
            text: An optional text block placed before the image.
            role: The message's role.
            id: An explicit message id.
            alt_text: Text describing the image.
            detail: The resolution to ask of the provider (``"low"``, ``"high"``, ``"auto"``).

        Raises:
            TypeError: *data* is not bytes, or the store's ``put`` did not return a :class:`MediaRef`.
            InvalidMessageError: *mime_type* is not an ``image/`` type (use :meth:`with_file`).

        >>> import asyncio
        >>> from workingctx.media import InMemoryMediaStore
        >>> png = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000280000001e00806000000")
        >>> msg = asyncio.run(Message.with_image(png, "image/png", InMemoryMediaStore(), text="What is this?"))
        >>> ref = msg.content[1].media
        >>> ref.kind, ref.url == "workingctx://media/" + ref.sha256, (ref.width, ref.height)
        ('store', True, (640, 480))
        """
        _checks.check_instance(
            data,
            "data",
            (bytes, bytearray, memoryview),
            "bytes",
            owner="Message.with_image",
            fix="with_image needs the image as bytes: decode base64 text with base64.b64decode() first",
        )
        if not isinstance(mime_type, str) or not mime_type.startswith("image/"):
            msg = (
                f"with_image needs an image MIME type such as 'image/png', got {mime_type!r}; "
                "for audio, video or documents use Message.with_file"
            )
            raise InvalidMessageError(msg)
        media = await _put(store, bytes(data), mime_type, None)
        return cls(role, _with_text(text, ImageBlock(media, alt_text=alt_text, detail=detail)), id=id)

    @classmethod
    async def with_file(
        cls,
        file_path: str | Path,
        store: MediaStore,
        mime_type: str | None = None,
        text: str | None = None,
        role: Role = "user",
        *,
        id: str | int | None = None,  # noqa: A002
    ) -> Message:
        """
        :meth:`from_file`, but the bytes go to a media store and the message
        keeps only a :class:`MediaRef` of kind ``"store"``.

        The block type follows the MIME type (``image/`` an image block,
        ``audio/`` audio, ``video/`` video, anything else a document); without
        one, the type is guessed from the file name (an image whose bytes are
        a PNG, JPEG, GIF or WebP gets that type whatever its name says), else
        ``application/octet-stream``. Only regular files are read, of any
        size; the file is read and stored in a worker thread.

        Raises:
            FileNotFoundError: *file_path* does not exist.
            InvalidMessageError: *file_path* is not a regular file (a FIFO, a
                device or a directory, which could block or never end).
            TypeError: The store's ``put`` did not return a :class:`MediaRef`.
        """
        path = Path(file_path)
        data = await asyncio.to_thread(_read_regular_file, path, None, "Message.with_file()")
        mime = mime_type or _guess_mime(path, data)
        media = await _put(store, data, mime, path.name)
        return cls(role, _with_text(text, _media_block(mime, media)), id=id)


def _guess_mime(path: Path, data: bytes) -> str:
    """
    The MIME type of a file, from its name; for a name saying image, the
    type its bytes' signature says when they are another image type (a GIF
    saved as ``.png``), since providers refuse an image of another type.
    """
    guessed = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    if guessed.startswith("image/"):
        for signature, offset, kind in _IMAGE_SIGNATURES:
            if data[offset : offset + len(signature)] == signature and (offset == 0 or data.startswith(b"RIFF")):
                return kind
    return guessed


_IMAGE_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", 0, "image/png"),
    (b"\xff\xd8\xff", 0, "image/jpeg"),
    (b"GIF87a", 0, "image/gif"),
    (b"GIF89a", 0, "image/gif"),
    (b"WEBP", 8, "image/webp"),  # after "RIFF" and the size
)


def _media_block(mime: str, media: MediaRef) -> ContentBlock:
    """
    The block a file of type *mime* goes in.
    """
    if mime.startswith("image/"):
        return ImageBlock(media)
    if mime.startswith("audio/"):
        return AudioBlock(media)
    if mime.startswith("video/"):
        return VideoBlock(media)
    return DocumentBlock(media)


def _with_text(text: str | None, block: ContentBlock) -> tuple[ContentBlock, ...]:
    return (block,) if text is None else (TextBlock(text), block)


async def _put(store: MediaStore, data: bytes, mime_type: str, filename: str | None) -> MediaRef:
    put = getattr(store, "put", None)
    if not callable(put):
        msg = (
            f"store must be a media store (with put(data, mime_type, filename=...)), got {store!r} "
            f"of type {type(store).__name__}; use workingctx.media.FileMediaStore or InMemoryMediaStore"
        )
        raise ArgumentTypeError(msg, argument="store", value=store, expected="a media store")
    media = await asyncio.to_thread(put, data, mime_type, filename=filename)
    if not isinstance(media, MediaRef):
        msg = f"{type(store).__name__}.put returned {media!r} of type {type(media).__name__}; it must return a MediaRef"
        raise ArgumentTypeError(
            msg, argument="store", value=store, expected="a media store whose put returns a MediaRef"
        )
    return media


_MESSAGE_DEFAULTS: dict[str, Any] = {
    "name": None,
    "tool_call_id": None,
    "tool_calls": (),
    "id": None,
    "metadata": {},
    "usage": None,
    "delta": False,
    "provider_data": {},
}

for _cls in (TextBlock, ImageBlock, DocumentBlock, ToolCallBlock, ToolResultBlock, ReasoningBlock, ToolCall):
    _cls.__repr__ = _quiet_repr  # type: ignore[method-assign]
