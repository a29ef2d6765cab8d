"""
``Message``: one turn of a conversation, its constructors and readers, and the
helpers the context uses on sequences of messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import attrs

from workingctx import _checks
from workingctx._canonical import message_digest
from workingctx.exceptions import ArgumentTypeError, InvalidMessageError
from workingctx.frozen import EMPTY_JSON_OBJECT, FrozenDict
from workingctx.messages._blocks import (
    _ASKING,
    _RESPONSES,
    BLOCK_TYPES,
    ContentBlock,
    ProviderBlock,
    RemoteToolCallBlock,
    TextBlock,
    ToolCall,
    ToolCallBlock,
    ToolResultBlock,
    answered_id,
    asked_id,
)
from workingctx.messages._fields import _as_tuple, _bool, _check_int, _metadata, _opt_str, _provider_data
from workingctx.messages._files import (
    MAX_INLINE_FILE_BYTES,
    file_blocks,
    image_blocks,
    stored_file_blocks,
    stored_image_blocks,
)
from workingctx.messages._usage import Usage

if TYPE_CHECKING:
    from workingctx.media import MediaStore  # a layer above: for annotations only

__all__ = ["ROLES", "Message", "Role", "calls_of", "check_messages"]

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})


# -- field checks --------------------------------------------------------------


def _to_tool_calls(value: object) -> tuple[ToolCall, ...]:
    return _as_tuple(value, ToolCall, "tool_calls")


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


# -- the message --------------------------------------------------------------


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
    # owned by workingctx.cache (its _layout module): how the message lays out in a cached request
    _cache_shape: tuple[Any, ...] | None = attrs.field(init=False, default=None, eq=False, repr=False)

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
        The ids of the tool calls this message asks for (from ``tool_calls``,
        tool-call blocks and provider blocks that ask for an answer, see
        :attr:`ProviderBlock.asks`), in order, without repeats.
        """
        ids = [call.id for call in self.tool_calls]
        if not isinstance(self.content, str):
            ids.extend(filter(None, map(asked_id, self.content)))
        return tuple(dict.fromkeys(ids))

    @property
    def result_ids(self) -> tuple[str, ...]:
        """
        The ids of the tool calls this message answers (``tool_call_id``,
        tool-result blocks and provider blocks that answer one, see
        :attr:`ProviderBlock.answers`), in order, without repeats.
        """
        ids = [] if self.tool_call_id is None else [self.tool_call_id]
        if not isinstance(self.content, str):
            ids.extend(filter(None, map(answered_id, self.content)))
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
        return cls(role, image_blocks(image_url, image_base64, mime_type, text), id=id)

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
        return cls(role, file_blocks(file_path, mime_type, text, max_bytes), id=id)

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
        blocks = await stored_image_blocks(data, mime_type, store, text, alt_text, detail)
        return cls(role, blocks, id=id)

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
        return cls(role, await stored_file_blocks(file_path, store, mime_type, text), id=id)


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


def check_messages(values: Sequence[object], what: str) -> None:
    for value in values:
        if not isinstance(value, Message):
            break
    else:
        return  # all messages: the common case, checked without numbering them
    for position, value in enumerate(values):
        if not isinstance(value, Message):
            hint = (
                "; to add several messages from a list use extend()"
                if isinstance(value, list | tuple)
                else "; build one with Message(role, text), e.g. Message('user', 'hi')"
            )
            msg = f"{what}: item {position} is {value!r} of type {type(value).__name__}, not a Message{hint}"
            raise ArgumentTypeError(msg, argument=f"{what}[{position}]", value=value, expected="a Message")


def calls_of(messages: Sequence[Message], ids: Sequence[str]) -> tuple[ToolCall, ...]:
    """
    The calls with these ids that *messages* make (the assistant turns of one
    exchange, which may be several calling turns one after another, and the
    results after them), in the order of *ids* (call blocks as :class:`ToolCall`).

    A provider's own call (:attr:`ProviderBlock.asks`: a custom tool call, a
    computer or shell call, an MCP approval request) is one too: a
    :class:`ToolCall` under its item's ``name`` (its ``type`` when it has
    none), with the item whole in ``provider_data`` (see :func:`tool_answers`).
    """
    calls: dict[str, ToolCall] = {}
    for message in messages:
        for call in message.tool_calls:
            calls.setdefault(call.id, call)
        if not isinstance(message.content, str):
            for block in message.content:
                if isinstance(block, ToolCallBlock | RemoteToolCallBlock):
                    if block.id not in calls:
                        calls[block.id] = ToolCall(block.id, block.name, block.args)
                elif isinstance(block, ProviderBlock) and (asks := block.asks) is not None and asks not in calls:
                    calls[asks] = _provider_call(block, asks)
    return tuple(calls[i] for i in ids if i in calls)


def _provider_call(block: ProviderBlock, call_id: str) -> ToolCall:
    """
    A provider's own call as a :class:`ToolCall` (see :func:`calls_of`).
    """
    name = block.data.get("name")
    if not (isinstance(name, str) and name):
        name = str(block.data.get("type"))
    return ToolCall(call_id, name, provider_data={block.provider: {_ITEM: block.data}})


_ITEM = "item"
"""The key under a provider's name in a :class:`ToolCall`'s ``provider_data`` holding a provider's own call."""

_TOOL_ANSWERED = frozenset({"function_call", "custom_tool_call"})
"""The kinds of provider items a tool message answers (the OpenAI formats write it as the kind's output)."""


def tool_answers(call: ToolCall) -> bool:
    """
    Whether a tool message answers *call*: a function call, or a custom tool
    call (Chat Completions answers it with a tool message; the Responses
    adapter writes that as its ``custom_tool_call_output``). A provider's own
    call of another kind (a computer or shell call, an MCP approval request)
    is answered by an item of its own kind, which only its provider's items give.

    >>> tool_answers(ToolCall("c1", "weather"))
    True
    >>> shell = {"type": "shell_call", "call_id": "c2", "action": {"commands": ["ls"]}}
    >>> tool_answers(calls_of([Message("assistant", (ProviderBlock("openai_responses", shell),))], ["c2"])[0])
    False
    """
    held = call.provider_data.get(_RESPONSES)
    item = held.get(_ITEM) if isinstance(held, Mapping) else None
    kind = item.get("type") if isinstance(item, Mapping) else None
    return kind not in _ASKING or kind in _TOOL_ANSWERED
