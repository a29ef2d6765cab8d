"""
LangChain messages: a ``list[BaseMessage]`` in and out (``langchain_core`` is
imported when these functions run; install the ``[langchain]`` extra).

>>> from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
>>> from workingctx.adapters import langchain
>>> messages = [
...     SystemMessage("Be brief."),
...     HumanMessage("Weather in Paris?", id="m1"),
...     AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "c1"}]),
...     ToolMessage("18C", tool_call_id="c1"),
... ]
>>> ctx = langchain.read(messages)
>>> langchain.write(ctx) == messages
True
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import attrs

from workingctx.adapters import anthropic
from workingctx.adapters._common import (
    Problem,
    ProviderError,
    answers_left_out,
    check_messages,
    checked,
    context_from,
    is_workingctx,
    keyed_messages,
    lost_blocks,
    media_problems,
    messages_of,
    parse_data_url,
    refuse,
    request_key_of,
    sends_nothing,
    split_system,
    store_ref_error,
    wire_errors,
    without_provider_calls,
)
from workingctx.adapters._engine import data_url
from workingctx.exceptions import ArgumentTypeError, ArgumentValueError
from workingctx.frozen import thaw
from workingctx.messages import (
    AudioBlock,
    ContentBlock,
    DataBlock,
    DocumentBlock,
    ImageBlock,
    MediaRef,
    Message,
    ProviderBlock,
    ReasoningBlock,
    RemoteToolCallBlock,
    TextBlock,
    ToolCall,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
    VideoBlock,
)

__all__ = ["Problem", "ProviderError", "check", "read", "read_response", "request_key", "write"]

PROVIDER = "langchain"
_ROLES = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}
_MODELLED = frozenset({"content", "type", "id", "name", "tool_calls", "tool_call_id"})
_NOT_SENT = frozenset({"id", "response_metadata", "usage_metadata"})
# What a runtime's state may hold beside the four kinds (streaming chunks, chat, function and
# LangGraph's remove messages): read only with state=True, kept whole, written back as the same class.
_STATE_ROLES = {
    "AIMessageChunk": "assistant",
    "HumanMessageChunk": "user",
    "SystemMessageChunk": "system",
    "ToolMessageChunk": "tool",
    "ChatMessageChunk": "user",
    "FunctionMessageChunk": "tool",
    "chat": "user",
    "function": "tool",
    "remove": "user",
}


def _core() -> Any:
    try:
        import langchain_core.messages as core  # noqa: PLC0415  # an optional extra ([langchain]): imported when used
    except ImportError as exc:  # pragma: no cover - the dev extra installs it
        msg = "workingctx.adapters.langchain needs langchain-core: pip install 'workingctx[langchain]'"
        raise ImportError(msg) from exc
    return core


# -- reading ---------------------------------------------------------------------------


def _block(item: Any) -> ContentBlock:
    if isinstance(item, str):
        return TextBlock(item, provider_data={PROVIDER: {"_str": True}})
    if isinstance(item, Mapping):
        kind = item.get("type")
        if kind == "text" and isinstance(item.get("text"), str):
            return _text(item)
        if kind == "image_url" and set(item) == {"type", "image_url"} and isinstance(item["image_url"], Mapping):
            image = item["image_url"]
            if set(image) <= {"url", "detail"} and isinstance(image.get("url"), str):
                detail = image.get("detail")
                if detail in {None, "auto", "low", "high"}:
                    return ImageBlock(MediaRef(kind="url", url=image["url"]), detail=detail)
        if kind in _STANDARD and set(item) <= _STANDARD_KEYS:
            block = _standard(kind, item)
            if block is not None:
                return block
        if kind in _STANDARD and set(item) <= _STANDARD_KEYS | _LANGCHAIN_KEYS:
            # as LangChain's create_image_block, create_audio_block, ... make them
            block = _standard(kind, {k: v for k, v in item.items() if k not in _LANGCHAIN_KEYS})
            if isinstance(block, ImageBlock | AudioBlock | VideoBlock | DocumentBlock):
                return _keeping(block, item)
        if kind == "thinking" and set(item) == {"type", "thinking", "signature"}:
            return ReasoningBlock(item["thinking"], signature=item["signature"], provider="anthropic")
        if kind == "redacted_thinking" and set(item) == {"type", "data"}:
            return ReasoningBlock("", encrypted=item["data"], redacted=True, provider="anthropic")
        return ProviderBlock(PROVIDER, item)
    msg = f"a LangChain content item must be a str or a dict, got {item!r} of type {type(item).__name__}"
    raise ArgumentTypeError(msg, argument="content", value=item, expected="a str or a dict")


_Block = TypeVar("_Block", bound=TextBlock | ImageBlock | AudioBlock | VideoBlock | DocumentBlock)

_LANGCHAIN_KEYS = frozenset({"id", "index", "extras"})
"""What LangChain's standard blocks carry beside their content (``create_text_block`` gives each an ``id``)."""


def _text(item: Mapping[str, Any]) -> TextBlock:
    """
    A text dict as text. Its other keys (an ``id``, ``annotations``, Anthropic's
    ``cache_control``, as ChatOpenAI, ChatAnthropic and LangChain's own block
    factories write them) keep the dict, written back while the text is as read.
    """
    if set(item) == {"type", "text"}:
        return TextBlock(item["text"])
    # Anthropic's cache_control and citations (ChatAnthropic keeps a cited answer's citations and sends them back)
    block = anthropic.read_block(item) if set(item) <= {"type", "text", "cache_control", "citations"} else None
    return _keeping(block if isinstance(block, TextBlock) else TextBlock(item["text"]), item)


def _keeping(block: _Block, item: Mapping[str, Any]) -> _Block:
    """
    *block* keeping *item*, the dict it was read from, to write back while it is unchanged.
    """
    provider_data = block.provider_data
    data = provider_data.get(PROVIDER)
    kept = {**(data if isinstance(data, Mapping) else {}), _RAW: item}
    return attrs.evolve(block, provider_data={**provider_data, PROVIDER: kept})


_STANDARD: dict[str, type[ImageBlock | AudioBlock | VideoBlock | DocumentBlock]] = {
    "image": ImageBlock,
    "audio": AudioBlock,
    "video": VideoBlock,
    "file": DocumentBlock,
}
_STANDARD_KEYS = frozenset({"type", "url", "base64", "file_id", "mime_type", "filename"})


def _standard(kind: str, item: Mapping[str, Any]) -> ContentBlock | None:
    """
    A LangChain standard media block (one source: url, base64 or file_id) as a workingctx block.
    """
    sources = [key for key in ("url", "base64", "file_id") if key in item]
    if len(sources) != 1 or not all(
        isinstance(item.get(k), str) for k in (*sources, "mime_type", "filename") if k in item
    ):
        return None
    mime, filename = item.get("mime_type"), item.get("filename")
    (source,) = sources
    if source == "url":
        media = MediaRef(kind="url", url=item["url"], mime_type=mime, filename=filename)
    elif source == "base64":
        media = MediaRef(kind="data", data_base64=item["base64"], mime_type=mime, filename=filename)
    else:
        media = MediaRef(kind="file_id", file_id=item["file_id"], mime_type=mime, filename=filename)
    if kind == "image":  # marked, so that it is written back in this form, not as image_url
        return ImageBlock(media, provider_data={PROVIDER: {"_standard": True}})
    return _STANDARD[kind](media)


def _write_standard(block: ImageBlock | AudioBlock | VideoBlock | DocumentBlock) -> dict[str, Any] | None:
    """
    A LangChain standard media block (``{"type": "audio", "base64": ..., "mime_type": ...}``), or
    None for a media-store reference.
    """
    media = block.media
    if media.kind == "store":
        raise store_ref_error(media)
    kind = {"image": "image", "audio": "audio", "video": "video", "document": "file"}[block.type]
    out: dict[str, Any] = {"type": kind}
    if media.kind == "url":
        out["url"] = media.url
    elif media.kind == "file_id":
        out["file_id"] = media.file_id
    elif media.kind == "data":
        data, mime = media.data_base64 or "", media.mime_type
        inline = parse_data_url(data)
        if inline is not None:
            mime, data = inline
        out["base64"] = data
        if mime:
            out["mime_type"] = mime
    else:
        return None
    if media.mime_type is not None and "mime_type" not in out:
        out["mime_type"] = media.mime_type
    if media.filename is not None:
        out["filename"] = media.filename
    return out


def _default(key: str, value: Any) -> bool:
    """
    True for a LangChain field left at its default (not worth keeping).
    """
    return value is None or value in ({}, []) or (key == "status" and value == "success")


_CHUNKS = {
    "AIMessageChunk": "ai",
    "HumanMessageChunk": "human",
    "SystemMessageChunk": "system",
    "ToolMessageChunk": "tool",
}
"""The streaming chunks a chat model takes as the message they complete, by the kind of that message."""

_CHUNK_ONLY = frozenset({"tool_call_chunks", "chunk_position"})
"""A chunk's fields its message lacks: the pieces its ``tool_calls`` were parsed from, and where it stood."""


def _message(data: Mapping[str, Any], position: int, *, state: bool = False) -> Message:
    kind = data.get("type")
    role = _ROLES.get(kind) if isinstance(kind, str) else None
    if role is None and state and kind in _STATE_ROLES:
        return _state_message(data, kind)
    if role is None and isinstance(kind, str) and kind in _CHUNKS:
        # A chat model sends a chunk (what streaming gives, summed) as the message it completes.
        whole = {k: v for k, v in data.items() if k not in _CHUNK_ONLY}
        return _message({**whole, "type": _CHUNKS[kind]}, position)
    if role is None:
        msg = (
            f"messages[{position}] is a LangChain {kind!r} message; read takes system, human, ai and tool "
            "messages and their streaming chunks (convert chat and function messages to these first, or read "
            "a runtime's state with state=True)"
        )
        raise ArgumentValueError(msg, argument=f"messages[{position}]", value=data)
    content = _content(data)
    rest = {k: v for k, v in data.items() if k not in _MODELLED and not _default(k, v)}
    if role == "tool" and not isinstance(content, str) and all(isinstance(b, ToolResultBlock) for b in content):
        # ChatAnthropic sends a tool message of tool_result blocks as a user turn of those blocks alone
        role = "user"
        rest.update({"_type": kind, "tool_call_id": data.get("tool_call_id")})
    calls = tuple(
        ToolCall(c["id"], c["name"], c.get("args") or {}) for c in data.get("tool_calls") or () if c.get("id")
    )
    if len(calls) != len(data.get("tool_calls") or ()):
        rest["tool_calls"] = data["tool_calls"]
        calls = ()
    raw_invalid = data.get("invalid_tool_calls") or ()
    invalid = [call for call in map(_invalid_call, raw_invalid) if call is not None]
    if invalid and (calls or not data.get("tool_calls")):
        # calls all the same: ChatAnthropic and ChatOpenAI send them (as {} or as the text), so each needs its
        # result; those without an id or a name (which ChatAnthropic leaves out) stay in LangChain's field,
        # which is then written back as it is
        calls = (*calls, *invalid)
        if len(invalid) == len(raw_invalid):
            rest.pop("invalid_tool_calls", None)
    usage = Usage.from_langchain(data["usage_metadata"]) if data.get("usage_metadata") else None
    message_id = data.get("id")
    return Message(
        role,  # type: ignore[arg-type]  # from _ROLES
        content,
        name=data.get("name"),
        tool_call_id=data.get("tool_call_id") if role == "tool" else None,
        tool_calls=calls,
        id=message_id if isinstance(message_id, str) else None,
        metadata={PROVIDER: rest} if rest else {},
        usage=usage,
    )


def _invalid_call(call: Any) -> ToolCall | None:
    """
    A LangChain invalid tool call (arguments that did not parse) as a call
    whose arguments are kept as text; None for one without an id or a name,
    which no chat model sends.
    """
    if not isinstance(call, Mapping):
        return None
    call_id, name, args, error = call.get("id"), call.get("name"), call.get("args"), call.get("error")
    if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name):
        return None
    if not (args is None or isinstance(args, str)) or not (error is None or isinstance(error, str)):
        return None
    return ToolCall(call_id, name, arguments_json=args, provider_data={PROVIDER: {"invalid": True, "error": error}})


def _content(data: Mapping[str, Any]) -> str | tuple[ContentBlock, ...]:
    raw = data.get("content", "")
    if isinstance(raw, str):
        return raw
    kind = data.get("type")
    if kind == "human":
        return tuple(_human_block(i) for i in raw)
    if kind == "ai":
        calls = [*(data.get("tool_calls") or ()), *(data.get("invalid_tool_calls") or ())]
        named = {call.get("id") for call in calls if isinstance(call, Mapping)}
        meta = data.get("response_metadata") or {}
        signed = meta.get("output_version") == "v1" and meta.get("model_provider") == "anthropic"
        return tuple(_ai_block(i, named, anthropic_v1=signed) for i in raw)
    if kind == "tool" and raw and all(isinstance(i, Mapping) and i.get("type") == "tool_result" for i in raw):
        return tuple(_human_block(i) for i in raw)  # ChatAnthropic sends these blocks as they are, in a user turn
    return tuple(_block(i) for i in raw)


_RAW = "_block"
"""Where a block read from a LangChain dict it does not model whole keeps that dict, written back as it came."""

ANTHROPIC_BLOCKS = frozenset(
    {
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "mcp_tool_listing",
        "container_upload",
        "advisor_tool_result",
        "compaction",
    }
)
"""The blocks of Anthropic's replies (the SDK's content block types) other than text, thinking
and client tool calls: the tools Anthropic runs itself, their results, MCP calls. ChatAnthropic
keeps them in an AIMessage's content and sends them back as they are; they are Anthropic's alone."""


def _ai_block(item: Any, named: set[Any], *, anthropic_v1: bool) -> ContentBlock:
    """
    An item of an AI message's content. A ``tool_use`` (Anthropic), ``tool_call``
    (LangChain's standard) or ``function_call`` (OpenAI Responses) dict that no
    entry of ``tool_calls`` names is a call all the same (ChatAnthropic and
    ChatOpenAI send it as one), read as a call block keeping the dict; one that
    ``tool_calls`` names stays a LangChain block, the call being there. In a v1
    message from Anthropic, a signed ``reasoning`` block is Anthropic's thinking
    (ChatAnthropic sends it back as that).
    """
    if anthropic_v1:
        thinking = _v1_thinking(item) or _v1_invalid_call(item)
        if thinking is not None and not (isinstance(thinking, ToolCallBlock) and thinking.id in named):
            return thinking
    if isinstance(item, Mapping) and item.get("type") in ANTHROPIC_BLOCKS:
        return ProviderBlock(anthropic.PROVIDER, item)  # as ChatAnthropic gives and sends it: Anthropic's alone
    block = _ai_call_block(item)
    return _block(item) if block is None or block.id in named else block


def _v1_thinking(item: Any) -> ReasoningBlock | None:
    """
    Anthropic's thinking as LangChain's v1 ``reasoning`` block holds it (the
    signature in ``extras``), keeping the dict; None for any other block.
    """
    if not (isinstance(item, Mapping) and item.get("type") == "reasoning"):
        return None
    extras, text = item.get("extras"), item.get("reasoning", "")
    if not (set(item) <= {"type", "reasoning", "extras", "index"} and isinstance(text, str)):
        return None
    if not (isinstance(extras, Mapping) and set(extras) == {"signature"} and isinstance(extras["signature"], str)):
        return None
    kept = {PROVIDER: {_RAW: item}}
    return ReasoningBlock(text, signature=extras["signature"], provider="anthropic", provider_data=kept)


def _v1_invalid_call(item: Any) -> ToolCallBlock | None:
    """
    The call a v1 ``invalid_tool_call`` block (arguments that did not parse)
    is in a message from Anthropic: ChatAnthropic sends it as a ``tool_use``
    with an empty input, so it is that call, keeping the dict; None for any
    other block, or one without an id and a name.
    """
    if not (isinstance(item, Mapping) and item.get("type") == "invalid_tool_call"):
        return None
    call_id, name = item.get("id"), item.get("name")
    if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name):
        return None
    return ToolCallBlock(call_id, name, {}, provider_data={PROVIDER: {_RAW: item, _AI: True}})


def _ai_call_block(item: Any) -> ToolCallBlock | None:
    """
    The call a ``tool_use``, ``tool_call`` or ``function_call`` dict is (its
    arguments a JSON object), or None for anything else.
    """
    if not isinstance(item, Mapping):
        return None
    kind = item.get("type")
    if kind == "tool_use":
        block = _anthropic_tool_block(item)
        if not isinstance(block, ToolCallBlock):
            return None
        return attrs.evolve(block, provider_data={**block.provider_data, PROVIDER: {_RAW: item, _AI: True}})
    if kind == "tool_call":
        call_id, name, args = item.get("id"), item.get("name"), item.get("args")
    elif kind == "function_call":
        call_id, name, args = item.get("call_id"), item.get("name"), item.get("arguments")
        try:
            args = json.loads(args) if isinstance(args, str) else None
        except ValueError:
            return None
    else:
        return None
    if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name and isinstance(args, Mapping)):
        return None
    return ToolCallBlock(call_id, name, args, provider_data={PROVIDER: {_RAW: item, _AI: True}})


_AI = "_ai"
"""Marks a call read from an AI message's content: written back there as it came, and only there
(a call moved out of a human message is written as a ``tool_calls`` entry)."""


def _human_block(item: Any) -> ContentBlock:
    """
    An item of a human message's content. ChatAnthropic sends a ``tool_result``
    or ``tool_use`` dict found there to Anthropic as it is, so it is read as the
    result or the call it is (the rules pair a result with its call, and refuse
    a call outside an assistant message), keeping the dict to write back.
    """
    block = _anthropic_tool_block(item)
    return _block(item) if block is None else block


def _anthropic_tool_block(item: Any) -> ToolCallBlock | ToolResultBlock | None:
    """
    The call or the result an Anthropic ``tool_use`` or ``tool_result`` dict is,
    read as the Anthropic adapter reads it, or None for anything else (or one
    too damaged to be either).
    """
    if not isinstance(item, Mapping):
        return None
    kind = item.get("type")
    if kind == "tool_use":
        call_id, name = item.get("id"), item.get("name")
        whole = isinstance(name, str) and bool(name) and isinstance(item.get("input"), Mapping)
    elif kind == "tool_result":
        call_id, output = item.get("tool_use_id"), item.get("content", "")
        whole = isinstance(item.get("is_error", False), bool) and (
            isinstance(output, str) or (isinstance(output, list) and all(isinstance(i, Mapping) for i in output))
        )
    else:
        return None
    if not (whole and isinstance(call_id, str) and call_id):
        return None
    block = anthropic.read_block(item)
    if not isinstance(block, ToolCallBlock | ToolResultBlock):
        return None
    return attrs.evolve(block, provider_data={**block.provider_data, PROVIDER: {_RAW: item}})


def _as_read(block: ContentBlock, role: str) -> Any:
    """
    The dict *block* was read from in a message of *role*, if it still reads as
    *block* (a re-keyed call id, a trimmed output or an edited text does not),
    else None.
    """
    data = getattr(block, "provider_data", {}).get(PROVIDER)
    raw = data.get(_RAW) if isinstance(data, Mapping) else None
    if not isinstance(raw, Mapping):
        return None
    typed: ContentBlock | None = None
    if role in {"user", "tool"}:
        typed = _anthropic_tool_block(raw)
    elif role == "assistant":
        typed = _ai_call_block(raw) or _v1_thinking(raw) or _v1_invalid_call(raw)
    return thaw(raw) if (typed or _block(raw)) == block else None


def _state_message(data: Mapping[str, Any], kind: str) -> Message:
    """
    A message of another LangChain kind kept whole: its fields (its type under ``_type``) ride
    in ``metadata["langchain"]``, so that writing gives back the same class.
    """
    rest = {k: v for k, v in data.items() if k not in {"content", "type", "id"} and not _default(k, v)}
    message_id = data.get("id")
    return Message(
        _STATE_ROLES[kind],  # type: ignore[arg-type]  # a role
        _content(data),
        id=message_id if isinstance(message_id, str) else None,
        metadata={PROVIDER: {**rest, "_type": kind}},
    )


def _dumped(item: Any) -> bool:
    """
    Whether *item* is a LangChain message as its ``model_dump()``: read as it is,
    so that an error names the field it is in.
    """
    return isinstance(item, Mapping) and "role" not in item and item.get("type") in {*_ROLES, *_STATE_ROLES}


def _data(item: Any) -> Mapping[str, Any]:
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        return dict(dump())
    msg = f"expected a LangChain message, got {item!r} of type {type(item).__name__}"
    raise ArgumentTypeError(msg, argument="payload", value=item, expected="a LangChain message")


@wire_errors("LangChain", "messages")
def read_messages(payload: Any, *, state: bool = False) -> list[Message]:
    """
    workingctx messages for LangChain messages (or a state mapping with ``messages``).
    Dicts and tuples are converted with LangChain's ``convert_to_messages`` first.
    With *state*, streaming chunks and the other kinds a runtime holds are kept whole.
    """
    if isinstance(payload, Mapping) and "messages" in payload:
        payload = payload["messages"]
    if isinstance(payload, str | bytes) or not isinstance(payload, Sequence):
        msg = f"expected a list of LangChain messages, got {payload!r} of type {type(payload).__name__}"
        raise ArgumentTypeError(msg, argument="payload", value=payload, expected="a list of LangChain messages")
    items = list(payload)
    if any(not callable(getattr(item, "model_dump", None)) and not _dumped(item) for item in items):
        items = list(_core().convert_to_messages(items))
    return [
        _message(item if _dumped(item) else _data(item), position, state=state) for position, item in enumerate(items)
    ]


@wire_errors("LangChain", "messages")
def read(payload: Any, *, state: bool = False) -> Any:
    """
    A WorkingContext from LangChain messages; leading system messages become the prefix.
    LangChain's own fields (``response_metadata``, ``additional_kwargs``, ...) ride in
    ``metadata["langchain"]`` and the message id in ``id``.

    A streaming chunk (``AIMessageChunk``, summed or not, and the other chunks) reads as the
    message it completes, as a chat model sends it, and is written back as that message.

    With ``state=True``, *payload* is a runtime's state rather than a request: every
    kind of message it may hold (``AIMessageChunk`` and the other chunks, chat,
    function and ``RemoveMessage``) is read, kept whole, and ``write(..., state=True)``
    gives it back as the same class.
    """
    return context_from(*split_system(read_messages(payload, state=state)))


# -- writing ---------------------------------------------------------------------------


def _write_block(block: ContentBlock, role: str = "") -> Any:
    """
    The LangChain content item of *block* in a message of *role*; None for
    what LangChain content leaves out (other providers' reasoning and items).
    In an AI message, Anthropic's own blocks (:data:`ANTHROPIC_BLOCKS`) and
    its text's citations are written as ChatAnthropic gives them, which it
    sends back to Anthropic as they are.
    """
    kept = _as_read(block, "")
    if kept is not None:
        return kept
    if isinstance(block, TextBlock):
        if block.provider_data.get(PROVIDER, {}).get("_str"):
            return block.text
        cited = block.provider_data.get(anthropic.PROVIDER, {})
        if role == "assistant" and "citations" in cited:
            return {"type": "text", "text": block.text, "citations": thaw(cited["citations"])}
        return {"type": "text", "text": block.text}
    if (
        isinstance(block, ImageBlock)
        and block.media.kind in {"url", "data"}
        and block.media.filename is None
        and not block.provider_data.get(PROVIDER, {}).get("_standard")
    ):
        media = block.media
        url = media.url if media.kind == "url" else data_url(media, "image/png")
        image: dict[str, Any] = {"url": url}
        if block.detail is not None:
            image["detail"] = block.detail
        return {"type": "image_url", "image_url": image}
    if isinstance(block, ImageBlock | AudioBlock | VideoBlock | DocumentBlock):
        return _write_standard(block)
    if isinstance(block, ReasoningBlock):
        if block.provider != "anthropic":
            return None  # Anthropic's thinking rides in LangChain content (ChatAnthropic sends it back); no other
        if block.redacted and block.encrypted is not None:
            return {"type": "redacted_thinking", "data": block.encrypted}
        if block.signature is not None:
            return {"type": "thinking", "thinking": block.summary, "signature": block.signature}
        return None
    if isinstance(block, ProviderBlock):
        if block.provider == PROVIDER or (role == "assistant" and _anthropic_own(block)):
            return dict(thaw(block.data))
        return None
    return None


def _anthropic_own(block: ProviderBlock) -> bool:
    """
    Whether *block* is one of Anthropic's own reply blocks ChatAnthropic keeps in an AI message.
    """
    return block.provider == anthropic.PROVIDER and block.data.get("type") in ANTHROPIC_BLOCKS


def _drops(block: ContentBlock, role: str) -> bool:
    """
    Whether a request leaves out *block* (reasoning other than Anthropic's, other formats' items).
    """
    return _write_block(block, role) is None


def _is_invalid(call: ToolCall) -> bool:
    """
    Whether *call* is written as a LangChain invalid tool call: its arguments
    text is not a JSON object, or it was read as one.
    """
    return not call.arguments_parsed or bool(_langchain_data(call).get("invalid"))


def _error(call: ToolCall) -> Any:
    return _langchain_data(call).get("error")


def _langchain_data(call: ToolCall) -> Mapping[str, Any]:
    data = call.provider_data.get(PROVIDER)
    return data if isinstance(data, Mapping) else {}


def _write(core: Any, message: Message) -> list[Any]:
    rest = dict(thaw(message.metadata.get(PROVIDER, {}))) if isinstance(message.metadata.get(PROVIDER), Mapping) else {}
    kind = rest.pop("_type", None)
    if isinstance(kind, str) and kind in _STATE_ROLES:  # a kind kept whole by read(..., state=True)
        raw: Any = message.content
        if not isinstance(raw, str):
            raw = [b for b in (_write_block(block, message.role) for block in raw) if b is not None]
        data = {**rest, "content": raw, "id": None if message.id is None else str(message.id)}
        return list(core.messages_from_dict([{"type": kind, "data": data}]))
    if kind == "tool":  # a tool message of tool_result blocks, read as the user turn ChatAnthropic sends
        return _tool_results_message(core, message, rest)
    fields: dict[str, Any] = {**rest}
    if message.id is not None:
        fields["id"] = str(message.id)
    if message.name is not None:
        fields["name"] = message.name
    before: list[Any] = []
    calls = [
        {"name": c.name, "args": thaw(c.arguments), "id": c.id, "type": "tool_call"}
        for c in message.tool_calls
        if not _is_invalid(c)
    ]
    # a call whose arguments text is not a JSON object is what LangChain calls an invalid tool call: text, never {}
    invalid = [
        {"name": c.name, "args": c.arguments_json, "id": c.id, "error": _error(c), "type": "invalid_tool_call"}
        for c in message.tool_calls
        if _is_invalid(c)
    ]
    content: Any
    if isinstance(message.content, str):
        content = message.content
    else:
        content = []
        for block in message.content:
            kept = _as_read(block, message.role)
            if kept is not None:
                content.append(kept)
            elif isinstance(block, ToolCallBlock | RemoteToolCallBlock):
                calls.append({"name": block.name, "args": thaw(block.args), "id": block.id, "type": "tool_call"})
            elif isinstance(block, ToolResultBlock):
                result: Any = block.output_text()
                if any(not isinstance(b, TextBlock) for b in block.content):  # media a tool returned: kept as blocks
                    written_blocks = [_write_block(b) for b in block.content]
                    result = [b for b in written_blocks if b is not None]
                status = "error" if block.is_error else "success"
                before.append(core.ToolMessage(result, tool_call_id=block.call_id, status=status))
            else:
                written = _write_block(block, message.role)
                if written is not None:
                    content.append(written)
        if before and not content and message.role in {"user", "tool"}:
            return before
    if message.role == "system":
        return [*before, core.SystemMessage(content, **fields)]
    if message.role == "user":
        return [*before, core.HumanMessage(content, **fields)]
    if message.role == "assistant":
        if calls and "tool_calls" not in fields:
            fields["tool_calls"] = calls
        if invalid and "invalid_tool_calls" not in fields:
            fields["invalid_tool_calls"] = invalid
        elif isinstance(fields.get("invalid_tool_calls"), list) and "tool_calls" not in rest:
            # LangChain's field as read (some calls in it were not), less the calls the message no longer makes
            made = {c.id for c in message.tool_calls}
            fields["invalid_tool_calls"] = [
                call
                for call in fields["invalid_tool_calls"]
                if (read := _invalid_call(call)) is None or read.id in made
            ]
        if message.usage is not None and "usage_metadata" not in fields:
            fields["usage_metadata"] = {
                "input_tokens": message.usage.input_tokens
                + message.usage.cache_read_tokens
                + message.usage.cache_write_tokens,
                "output_tokens": message.usage.output_tokens,
                "total_tokens": message.usage.total_tokens,
            }
        return [*before, core.AIMessage(content, **fields)]
    return [*before, core.ToolMessage(content, tool_call_id=message.tool_call_id or "", **fields)]


def _tool_results_message(core: Any, message: Message, rest: dict[str, Any]) -> list[Any]:
    """
    The tool message of ``tool_result`` blocks *message* was read from, while
    each block is as read; else the results it now holds, each its own tool message.
    """
    blocks = () if isinstance(message.content, str) else message.content
    kept = [_as_read(block, "user") for block in blocks]
    if blocks and all(raw is not None for raw in kept):
        fields = {**rest, "name": message.name, "id": None if message.id is None else str(message.id)}
        return [core.ToolMessage(kept, **{k: v for k, v in fields.items() if v is not None})]
    return _write(core, attrs.evolve(message, metadata={}))


def write_messages(messages: Sequence[Message]) -> list[Any]:
    """
    LangChain messages for workingctx messages, without checks.
    """
    core = _core()
    out: list[Any] = []
    for message in messages:
        out.extend(_write(core, message))
    return out


@wire_errors("LangChain", "messages")
def write(
    source: Any, *, repair: bool = False, store: Any = None, upload: Any = None, state: bool = False
) -> list[Any]:
    """
    LangChain messages (``SystemMessage``, ``HumanMessage``, ``AIMessage``,
    ``ToolMessage``) for a context, a snapshot or a list of messages.

    With ``state=True`` the messages are a runtime's state, not a request: they
    are written as they are, unchecked (a trailing call whose result has not run
    yet stays), and the kinds ``read(..., state=True)`` kept whole come back as
    their own class.

    Raises:
        ProviderError: an orphan result or an unanswered call; ``repair=True``
            drops and closes them instead.
    """
    if state:
        return write_messages(messages_of(source))
    messages = checked(messages_of(source), provider=None, repair=repair, store=store, upload=upload, drops=_drops)
    problems = lost(messages)
    if problems:
        raise refuse(problems, None)
    return write_messages([message for message in messages if not sends_nothing(message, _drops)])


def lost(messages: Sequence[Message]) -> tuple[Problem, ...]:
    """
    The blocks of *messages* LangChain content has no place for (data blocks),
    each an ``unsendable`` problem: writing never drops them in silence.
    """
    return lost_blocks(messages, _lost)


def _lost(block: Any, _message: Message, _in_result: bool) -> tuple[str, str] | None:
    if isinstance(block, DataBlock):
        return (
            "LangChain content has no block for generic data",
            "send it as an image, audio, video or document block with its MIME type",
        )
    return None


@wire_errors("LangChain", "messages")
def check(source: Any) -> tuple[Problem, ...]:
    """
    The problems ``write`` would raise for a context or for LangChain messages.
    """
    messages = messages_of(source) if is_workingctx(source) else read_messages(source)
    messages = answers_left_out(messages, _drops)
    found = check_messages(without_provider_calls(messages, _drops), drops=_drops)
    return (*found, *media_problems(messages), *lost(messages))


@wire_errors("LangChain", "messages")
def request_key(source: Any, **fields: Any) -> str:
    """
    A key for what reaches the model: the messages without their ids and
    LangChain's response and usage metadata, plus *fields*.
    """
    sent = [{k: v for k, v in m.model_dump().items() if k not in _NOT_SENT} for m in write(keyed_messages(source))]
    return request_key_of(sent, fields)


@wire_errors("LangChain")
def read_response(response: Any, *, context: Any = None) -> Message:  # noqa: ARG001  # the shared signature
    """
    The assistant message of an ``AIMessage`` (what a chat model's ``invoke``
    returns), with usage from ``usage_metadata`` and the model from
    ``response_metadata``. *context* is taken as every adapter takes it;
    LangChain messages keep their ids, so there is nothing to map back.
    """
    data = _data(response)
    if data.get("type") != "ai":
        msg = f"read_response takes an AIMessage, got a {data.get('type')!r} message"
        raise ArgumentValueError(msg, argument="response", value=response)
    message = _message(data, 0)
    meta = data.get("response_metadata") or {}
    model = meta.get("model_name") or meta.get("model")
    metadata = dict(message.metadata)
    if model is not None:
        metadata["model"] = model
    return Message(
        "assistant",
        message.content,
        tool_calls=message.tool_calls,
        id=message.id,
        name=message.name,
        metadata=metadata,
        usage=message.usage,
    )
