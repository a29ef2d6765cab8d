"""
OpenAI Chat Completions: ``{"messages": [...]}`` in and out.

>>> from workingctx.adapters import openai_chat
>>> body = {"messages": [
...     {"role": "developer", "content": "Answer in French."},
...     {"role": "user", "content": "Hi"},
...     {"role": "assistant", "content": None, "tool_calls": [
...         {"id": "call_1", "type": "function", "function": {"name": "greet", "arguments": '{"lang":"fr"}'}}]},
...     {"role": "tool", "tool_call_id": "call_1", "content": "Bonjour"},
... ]}
>>> ctx = openai_chat.read(body)
>>> openai_chat.write(ctx) == body
True
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from workingctx.adapters import _engine as engine
from workingctx.adapters._common import (
    NAME_PATTERN,
    Problem,
    ProviderError,
    cache_hinted,
    check_messages,
    context_from,
    expect_list,
    expect_mapping,
    long_texts,
    lost_blocks,
    media_problems,
    messages_of,
    odd_image_type,
    plain,
    sends_nothing,
    split_system,
    suggested_name,
    wire_errors,
)
from workingctx.adapters._engine import arguments_text, call_text, content_of, data_url, media_of_url, sendable, unknown
from workingctx.cache import prompt_cache_key
from workingctx.callids import short_call_ids
from workingctx.exceptions import ArgumentValueError
from workingctx.frozen import EMPTY_JSON_OBJECT, thaw
from workingctx.messages import (
    AudioBlock,
    ContentBlock,
    DataBlock,
    DocumentBlock,
    ImageBlock,
    MediaRef,
    Message,
    ProviderBlock,
    RemoteToolCallBlock,
    TextBlock,
    ToolCall,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
    VideoBlock,
)

__all__ = ["Problem", "ProviderError", "check", "read", "read_response", "request_key", "write"]

PROVIDER = "openai_chat"  # the key of what only this format carries
OPENAI = "openai"  # what both OpenAI formats share: the developer role
_KNOWN = frozenset({"role", "content", "name", "tool_calls", "tool_call_id"})
_CONTENT_FORM = "_content"  # how content was sent: "absent", "null", "empty", "list"; "text" beside custom calls
_CALLS = "_calls"  # the order of a message's function and custom calls, and custom calls' unknown fields
_RESPONSES = "openai_responses"  # custom calls are held as the Responses items (both OpenAI formats write them)
_REFUSAL = "_refusal"  # the text is a refusal; how its content was sent: "absent" or "null"


# -- reading ---------------------------------------------------------------------------


def _part(part: Mapping[str, Any]) -> ContentBlock:
    kind = part.get("type")
    if kind == "text" and set(part) == {"type", "text"}:
        return TextBlock(part["text"])
    if kind == "image_url" and set(part) == {"type", "image_url"} and set(part["image_url"]) <= {"url", "detail"}:
        image = part["image_url"]
        return ImageBlock(media_of_url(image["url"]), detail=image.get("detail"))
    if (
        kind == "input_audio"
        and set(part) == {"type", "input_audio"}
        and set(part["input_audio"]) == {"data", "format"}
    ):
        audio = part["input_audio"]
        return AudioBlock(MediaRef(kind="data", data_base64=audio["data"], mime_type=f"audio/{audio['format']}"))
    if kind == "file" and set(part) == {"type", "file"} and set(part["file"]) <= {"file_id", "file_data", "filename"}:
        file = part["file"]
        if "file_id" in file and "file_data" not in file:
            media = MediaRef(kind="file_id", file_id=file["file_id"], filename=file.get("filename"))
            return DocumentBlock(media)
        if "file_data" in file and "file_id" not in file:
            media = MediaRef(kind="data", data_base64=file["file_data"], filename=file.get("filename"))
            return DocumentBlock(media)
    return ProviderBlock(PROVIDER, part)


_CALL_KEYS = frozenset({"id", "type", "function"})
_FUNCTION_KEYS = frozenset({"name", "arguments"})


def _call(raw: Mapping[str, Any]) -> ToolCall:
    extra = {} if raw.keys() <= _CALL_KEYS else unknown(raw, _CALL_KEYS)
    function = expect_mapping(raw.get("function"), "tool_calls[].function")
    if raw.get("type", "function") != "function" or function.keys() != _FUNCTION_KEYS:
        extra["_call"] = dict(raw)
    arguments = function.get("arguments", "{}")
    if isinstance(arguments, str):  # text that is not a JSON object is kept verbatim, as data
        call = ToolCall(raw["id"], function["name"], arguments_json=arguments)
    else:  # arguments given as data, not text: sent back as they came, and read as what they are
        extra["_call"] = dict(raw)
        call = ToolCall(raw["id"], function["name"], arguments_json=arguments_text(arguments))
    return (
        call
        if not extra
        else ToolCall(
            call.id, call.name, call.arguments, arguments_json=call.arguments_json, provider_data={PROVIDER: extra}
        )
    )


_CUSTOM_KEYS = frozenset({"id", "type", "custom"})
_INPUT_KEYS = frozenset({"name", "input"})


def _custom_call(raw: Mapping[str, Any]) -> tuple[ProviderBlock, dict[str, Any]]:
    """
    A custom tool call (``{"type": "custom", "custom": {"name", "input"}}``) as
    the Responses ``custom_tool_call`` item workingctx holds OpenAI's custom
    calls as, and the fields it has besides (``"custom"``: those of its ``custom``).
    """
    custom = expect_mapping(raw.get("custom"), "tool_calls[].custom")
    call_id, name, text = raw.get("id"), custom.get("name"), custom.get("input")
    if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name and isinstance(text, str)):
        msg = (
            f"a custom tool call needs an id, a name and an input text, got {dict(raw)!r}; "
            'send {"id": "call_...", "type": "custom", "custom": {"name": "...", "input": "..."}}'
        )
        raise ArgumentValueError(msg, argument="tool_calls[]", value=raw)
    extra = unknown(raw, _CUSTOM_KEYS)
    if custom.keys() != _INPUT_KEYS:
        extra["custom"] = unknown(custom, _INPUT_KEYS)
    item = {"type": "custom_tool_call", "call_id": call_id, "name": name, "input": text}
    return ProviderBlock(_RESPONSES, item), extra


def _calls(raw_calls: Sequence[Any]) -> tuple[list[ToolCall], list[ProviderBlock], list[Any]]:
    """
    The function calls of a message, its custom calls (see :func:`_custom_call`),
    and for each call in order ``"function"`` or the custom call's other fields.
    """
    calls: list[ToolCall] = []
    customs: list[ProviderBlock] = []
    order: list[Any] = []
    for raw in raw_calls:
        call = expect_mapping(raw, "a tool call")
        if call.get("type") == "custom":
            block, extra = _custom_call(call)
            customs.append(block)
            order.append(extra)
        else:
            calls.append(_call(call))
            order.append("function")
    return calls, customs, order


def _message(raw: Mapping[str, Any], position: int) -> Message:
    role = raw.get("role")
    extra: dict[str, Any] = {} if raw.keys() <= _KNOWN else unknown(raw, _KNOWN)
    shared = {}
    if role == "developer":
        shared = {OPENAI: {"role": "developer"}}
        role = "system"
    if role not in {"system", "user", "assistant", "tool"}:
        msg = (
            f"messages[{position}] has role {role!r}; Chat Completions roles are developer, system, user, "
            "assistant and tool (the deprecated 'function' role is not read: send it as 'tool')"
        )
        raise ArgumentValueError(msg, argument=f"messages[{position}]", value=raw)
    content: str | tuple[ContentBlock, ...]
    refusal = extra.get("refusal")
    if role == "assistant" and isinstance(refusal, str) and raw.get("content") is None and not raw.get("tool_calls"):
        # a refusal is what the model said: its text is the message's, so every format sends it
        del extra["refusal"]
        extra[_REFUSAL] = "absent" if "content" not in raw else "null"
        content = refusal
    elif "content" not in raw:
        content, extra[_CONTENT_FORM] = "", "absent"
    elif raw["content"] is None:
        content = ""
        if not raw.get("tool_calls"):
            extra[_CONTENT_FORM] = "null"
    else:
        content = content_of(raw["content"], _part)
        if content in ("", ()) and raw.get("tool_calls"):
            extra[_CONTENT_FORM] = "empty" if content == "" else "list"
    raw_calls = raw.get("tool_calls")
    calls, customs, order = _calls(raw_calls) if raw_calls else ([], [], [])
    if customs:  # held as blocks after the content, which then is blocks too
        if isinstance(content, str):
            if content:
                extra[_CONTENT_FORM] = "text"
            content = (TextBlock(content),) if content else ()
        content = (*content, *customs)
        functions = [entry == "function" for entry in order]
        if any(entry != "function" and entry for entry in order) or functions != sorted(functions, reverse=True):
            extra[_CALLS] = order  # not all the functions first, or custom calls with fields of their own
    return Message(
        role,
        content,
        name=raw.get("name"),
        tool_call_id=raw.get("tool_call_id"),
        tool_calls=tuple(calls),
        provider_data={**shared, PROVIDER: extra} if extra else shared or EMPTY_JSON_OBJECT,
    )


@wire_errors("Chat Completions", "messages")
def read_messages(payload: Any) -> list[Message]:
    """
    The messages of a request body or of a bare list of messages, as workingctx values.
    """
    data = plain(payload)
    if isinstance(data, Mapping):
        if "messages" not in data:
            msg = "a Chat Completions body needs a 'messages' list; pass the body or the list itself"
            raise ArgumentValueError(msg, argument="payload", value=payload)
        data = data["messages"]
    items = expect_list(data, "messages")
    return [_message(expect_mapping(item, f"messages[{i}]"), i) for i, item in enumerate(items)]


@wire_errors("Chat Completions", "messages")
def read(payload: Any) -> Any:
    """
    A WorkingContext from a Chat Completions body (``{"messages": [...]}``), a
    list of messages, or SDK objects; leading system and developer messages
    become the prefix. A custom tool call (``"type": "custom"``) is held as
    the Responses ``custom_tool_call`` OpenAI's custom calls are, a
    ``ProviderBlock`` after the message's text: a call its ``tool`` message answers.

    Raises:
        TypeError: a part of the payload has the wrong shape.
        ValueError: an unknown role.
    """
    return context_from(*split_system(read_messages(payload)))


# -- writing ---------------------------------------------------------------------------


def _write_call(call: ToolCall) -> dict[str, Any]:
    extra = call.provider_data.get(PROVIDER, {})
    out: dict[str, Any]
    if "_call" in extra:
        out = dict(thaw(extra["_call"]))
    else:
        out = {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call_text(call)}}
    out.update({k: thaw(v) for k, v in extra.items() if k != "_call"})
    return out


def _item(block: ContentBlock, kind: str) -> Mapping[str, Any] | None:
    """
    The Responses item of *kind* that *block* holds when Chat Completions can
    send it (a ``custom_tool_call`` or its ``custom_tool_call_output``), else None.
    """
    if not (isinstance(block, ProviderBlock) and block.provider == _RESPONSES and block.data.get("type") == kind):
        return None
    data = block.data
    if kind == "custom_tool_call":
        sendable = block.asks is not None and isinstance(data.get("name"), str) and isinstance(data.get("input"), str)
    else:
        sendable = block.answers is not None and isinstance(data.get("output"), str | Sequence)
    return data if sendable else None


def _write_custom(item: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": item["call_id"], "type": "custom", "custom": {"name": item["name"], "input": item["input"]}}


def _output_text(output: str | Sequence[Any]) -> str | list[dict[str, Any]]:
    """
    A custom tool's output as a tool message's content: its text, or its text
    parts (:func:`lost` names the images and files it cannot carry).
    """
    if isinstance(output, str):
        return output
    texts = [p.get("text", "") for p in _output_parts(output) if p.get("type") == "input_text"]
    return [{"type": "text", "text": text} for text in texts] or ""


def _output_parts(output: str | Sequence[Any]) -> list[Mapping[str, Any]]:
    """
    The parts of a custom tool's output given as a list (none for text).
    """
    return [] if isinstance(output, str) else [p if isinstance(p, Mapping) else {} for p in output]


def _in_order(calls: list[dict[str, Any]], order: Any) -> list[dict[str, Any]]:
    """
    *calls* in the order they were read (*order*, see :func:`_calls`), custom
    calls with the fields they had besides; as they are when the message's
    calls changed since.
    """
    functions = [c for c in calls if c.get("type") != "custom"]
    customs = [c for c in calls if c.get("type") == "custom"]
    if order is None or len(order) != len(calls) or list(order).count("function") != len(functions):
        return calls
    function, custom = iter(functions), iter(customs)
    out = []
    for entry in order:
        if entry == "function":
            out.append(next(function))
            continue
        call = next(custom)
        inner = {**call["custom"], **thaw(entry.get("custom", {}))}
        out.append({**call, **{k: thaw(v) for k, v in entry.items() if k != "custom"}, "custom": inner})
    return out


_AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/mp3": "mp3",
    "audio/mpeg": "mp3",
}


def _audio_format(media: MediaRef) -> str | None:
    """
    The ``input_audio`` format of inline audio ("wav" or "mp3"), or None when Chat Completions cannot take it.
    """
    return _AUDIO_FORMATS.get(media.mime_type or "") if media.kind == "data" else None


def _write_part(block: ContentBlock) -> dict[str, Any] | None:
    """
    The content part of a block; None for what this format leaves out by design
    (reasoning, other providers' blocks). :func:`lost` names the blocks it cannot carry.
    """
    sendable(block)
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        media = block.media
        if media.kind == "url":
            url = media.url
        elif media.kind == "data":
            url = data_url(media, "image/png")
        else:
            return None
        image: dict[str, Any] = {"url": url}
        if block.detail is not None:
            image["detail"] = block.detail
        return {"type": "image_url", "image_url": image}
    if isinstance(block, AudioBlock):
        fmt = _audio_format(block.media)
        data = block.media.data_base64
        return None if fmt is None else {"type": "input_audio", "input_audio": {"data": data, "format": fmt}}
    if isinstance(block, DocumentBlock):
        media = block.media
        file: dict[str, Any] = {}
        if media.kind == "file_id":
            file["file_id"] = media.file_id
        elif media.kind == "data":
            data = media.data_base64 or ""
            file["file_data"] = data if data.startswith("data:") else data_url(media, "application/pdf")
        elif block.text is not None:
            return {"type": "text", "text": block.text}
        else:
            return {"type": "text", "text": f"[document: {media.url}]"}
        if media.filename is not None:
            file["filename"] = media.filename
        return {"type": "file", "file": file}
    if isinstance(block, ProviderBlock) and block.provider == PROVIDER:
        return thaw(block.data)
    return None  # reasoning, other providers' blocks: not carried by this format


def _drops(block: ContentBlock, _role: str) -> bool:
    """
    Whether this format leaves out *block* (reasoning, another format's items
    but for custom tool calls and their outputs).
    """
    return (
        _write_part(block) is None
        and _item(block, "custom_tool_call") is None
        and _item(block, "custom_tool_call_output") is None
    )


_MEDIA = (ImageBlock, AudioBlock, VideoBlock, DocumentBlock, DataBlock)


def _why_lost(block: ContentBlock, role: str, in_result: bool) -> str | None:
    """
    Why Chat Completions cannot carry *block* in a *role* message, or None when it can.
    """
    if isinstance(block, VideoBlock | DataBlock):  # a data block inline, without a media reference, too
        return "a block Chat Completions has no part for"
    output = _item(block, "custom_tool_call_output")
    if output is not None and any(p.get("type") != "input_text" for p in _output_parts(output["output"])):
        return "a custom tool's output holding images or files, where a tool message takes text only"
    if not isinstance(block, _MEDIA) or block.media is None:
        return None
    media = block.media
    if isinstance(block, ImageBlock) and media.kind == "file_id":
        return "an image by file id, which Chat Completions cannot take (only URLs and inline data)"
    if isinstance(block, AudioBlock) and _audio_format(media) is None:
        return "audio that is not inline wav or mp3, the only audio Chat Completions takes"
    if role in {"system", "assistant"} and not in_result:
        if isinstance(block, DocumentBlock) and media.kind not in {"file_id", "data"}:
            return None  # sent as its text, or its URL, as text
        return f"media in a {role} message, where Chat Completions takes text only"
    return None


def lost(messages: Sequence[Message]) -> tuple[Problem, ...]:
    """
    The blocks of *messages* Chat Completions has no place for (media where it
    takes text only, image file ids, audio other than wav and mp3, video, data),
    each an ``unsendable`` problem: writing never drops them in silence.
    """
    return lost_blocks(messages, _lost)


def _lost(block: Any, message: Message, in_result: bool) -> tuple[str, str] | None:
    odd = odd_image_type(block)
    if odd is not None:
        return (
            f"an image of type {odd!r}, and OpenAI takes PNG, JPEG, GIF and WebP images only",
            "convert it to one of those, or write this context with google",
        )
    why = _why_lost(block, message.role, in_result)
    if why is None:
        return None
    fix = (
        "give its URL or inline bytes in a user message, convert it to a format Chat Completions "
        "takes, or write this context with openai_responses, anthropic or google"
    )
    return why, fix


def _parts(blocks: Sequence[ContentBlock]) -> list[dict[str, Any]]:
    return [part for part in map(_write_part, blocks) if part is not None]


def _result_text(block: ToolResultBlock) -> str | list[dict[str, Any]]:
    if block.content:
        texts = [{"type": "text", "text": b.text} for b in block.content if isinstance(b, TextBlock)]
        if block.is_error:  # a tool message has no error flag: its text says so
            texts.insert(0, {"type": "text", "text": "error: "})
        return texts or ""
    return engine.result_text(block)


def _write_plain(message: Message) -> dict[str, Any]:
    """
    A message of text only and without provider data (the common case), as :func:`_write_message` writes it.
    """
    body: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.name is not None:
        body["name"] = message.name
    if message.tool_call_id is not None:
        body["tool_call_id"] = message.tool_call_id
    return body


def _write_refusal(message: Message, form: str, extra: Mapping[str, Any]) -> dict[str, Any]:
    """
    The assistant message of a refusal, as it came: ``content: null`` (or none) and ``refusal``.
    """
    body: dict[str, Any] = {"role": message.role, **({"content": None} if form == "null" else {})}
    body["refusal"] = message.content
    if message.name is not None:
        body["name"] = message.name
    return {**body, **{k: thaw(v) for k, v in extra.items()}}


def _split(
    blocks: Sequence[ContentBlock], calls: list[dict[str, Any]], before: list[dict[str, Any]], after: list[Any]
) -> list[ContentBlock]:
    """
    The blocks of a message that are content parts; its calls go to *calls*,
    its results to *before* as tool messages, and the media of those to
    *after*, as a user message.
    """
    kept: list[ContentBlock] = []
    for block in blocks:
        if isinstance(block, ToolCallBlock | RemoteToolCallBlock):
            calls.append(_write_call(ToolCall(block.id, block.name, block.args)))
        elif (custom := _item(block, "custom_tool_call")) is not None:
            calls.append(_write_custom(custom))
        elif (answer := _item(block, "custom_tool_call_output")) is not None:
            before.append(
                {"role": "tool", "tool_call_id": answer["call_id"], "content": _output_text(answer["output"])}
            )
        elif isinstance(block, ToolResultBlock):
            before.append({"role": "tool", "tool_call_id": block.call_id, "content": _result_text(block)})
            media = _parts([b for b in block.content if not isinstance(b, TextBlock)])
            if media:
                after.append({"role": "user", "content": media})
        else:
            kept.append(block)
    return kept


def _write_message(message: Message) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """
    The Chat Completions messages of one message, and the user messages that
    carry the media of its results (they go after the whole run of tool messages).
    """
    extra = dict(message.provider_data.get(PROVIDER, {}))
    form = extra.pop(_CONTENT_FORM, None)
    order = extra.pop(_CALLS, None)
    refused = extra.pop(_REFUSAL, None)
    if refused is not None and isinstance(message.content, str) and not message.tool_calls:
        return [_write_refusal(message, refused, extra)], []
    body: dict[str, Any] = {"role": message.provider_data.get(OPENAI, {}).get("role", message.role)}
    calls = [_write_call(call) for call in message.tool_calls]
    before: list[dict[str, Any]] = []  # tool results held as blocks go first, as tool messages
    after: list[dict[str, Any]] = []  # images returned by a tool follow as a user message
    value: Any
    if isinstance(message.content, str):
        value = message.content
    else:
        kept = _split(message.content, calls, before, after)
        value = _parts(kept)
        if message.role == "tool":  # media a tool returned follow as a user message, as results' do
            media_parts = [p for p in value if p.get("type") not in ("text", "refusal")]
            if media_parts:
                after.append({"role": "user", "content": media_parts})
        if message.role != "user":
            value = [p for p in value if p.get("type") in ("text", "refusal")]
        if form == "text" and len(value) == 1 and value[0]["type"] == "text":  # text beside custom calls
            value = value[0]["text"]
        # what was there is not carried by this format; an assistant message with
        # nothing (a reply cut before its first word) is sent as "", which OpenAI takes
        if not value and (kept or before or calls or message.role == "assistant"):
            if before and message.role in {"user", "tool"} and message.tool_call_id is None:
                return before, after
            value = ""
    if form == "absent":
        pass
    elif form == "null" or (calls and value == "" and form != "empty") or (calls and value == [] and form != "list"):
        body["content"] = None
    else:
        body["content"] = value
    if message.name is not None:
        body["name"] = message.name
    if calls:
        body["tool_calls"] = calls if order is None else _in_order(calls, order)
    if message.tool_call_id is not None:
        body["tool_call_id"] = message.tool_call_id
    body.update({k: thaw(v) for k, v in extra.items()})
    return [*before, body], after


def write_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """
    Chat Completions messages for workingctx messages, without checks.
    """
    return _write_all(messages)[0]


def _write_all(messages: Sequence[Message]) -> tuple[list[dict[str, Any]], list[int]]:
    """
    The Chat Completions messages, and for each the position of the message it
    was written from. Media returned by tools follow the whole run of tool
    messages, so that every result stays right after its call.
    """
    out: list[dict[str, Any]] = []
    origins: list[int] = []
    pending: list[dict[str, Any]] = []
    pending_at: list[int] = []
    for position, message in enumerate(messages):
        if not pending and message.content.__class__ is str and not message.tool_calls and not message.provider_data:
            out.append(_write_plain(message))
            origins.append(position)
            continue
        if sends_nothing(message, _drops):  # nothing of it is sent: not even an empty turn
            continue
        main, after = _write_message(message)
        if not pending and not after:
            out.extend(main)
            origins.extend([position] * len(main))
            continue
        lead = 0
        while lead < len(main) and main[lead]["role"] == "tool":
            lead += 1
        out.extend(main[:lead])
        origins.extend([position] * lead)
        if lead < len(main) and pending:
            out.extend(pending)
            origins.extend(pending_at)
            pending, pending_at = [], []
        out.extend(main[lead:])
        origins.extend([position] * (len(main) - lead))
        pending.extend(after)
        pending_at.extend([position] * len(after))
    out.extend(pending)
    origins.extend(pending_at)
    joined, origins = _join_calls(out, origins)
    return _short_ids(joined), origins


ID_LIMIT = 40
"""The most characters OpenAI takes in a tool call's id (``string_above_max_length`` past it)."""


def _ids(messages: Sequence[Mapping[str, Any]]) -> list[tuple[int, str]]:
    """
    Each tool call id of *messages* (its calls' and the one a tool message answers), with its message's position.
    """
    found: list[tuple[int, str]] = []
    for position, message in enumerate(messages):
        calls = message.get("tool_calls")
        if calls:
            found.extend(
                (position, call["id"])
                for call in calls
                if isinstance(call, Mapping) and isinstance(call.get("id"), str)
            )
        answered = message.get("tool_call_id")
        if isinstance(answered, str):
            found.append((position, answered))
    return found


def _short_ids(out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """
    *out* with every tool call id longer than OpenAI takes written under its
    short name (:func:`~workingctx.callids.short_call_ids`), in the calls and
    in the tool messages that answer them alike.
    """
    names = short_call_ids([call_id for _, call_id in _ids(out)], ID_LIMIT)
    if not names:
        return out
    renamed = []
    for message in out:
        calls, answered = message.get("tool_calls"), message.get("tool_call_id")
        written = message
        if calls:
            written = {**written, "tool_calls": [{**c, "id": names.get(c["id"], c["id"])} for c in calls]}
        if answered in names:
            written = {**written, "tool_call_id": names[answered]}
        renamed.append(written)
    return renamed


def _join_calls(out: list[dict[str, Any]], origins: list[int]) -> tuple[list[dict[str, Any]], list[int]]:
    """
    An assistant message right after one that calls, joined to it: OpenAI wants
    a call's results right after the message that made it, and the rules read
    consecutive assistant turns as one exchange, as Anthropic and Gemini join
    them (their transcripts hold one turn per call before one turn of results;
    a message whose only call a format leaves out continues the calls before it).
    Its calls follow the earlier ones, its text the earlier text.
    """
    if not any(_joins(a, b) for a, b in itertools.pairwise(out)):
        return out, origins
    joined: list[dict[str, Any]] = []
    joined_origins: list[int] = []
    for message, origin in zip(out, origins, strict=True):
        if joined and _joins(joined[-1], message):
            joined[-1] = _joined(joined[-1], message)
            continue
        joined.append(message)
        joined_origins.append(origin)
    return joined, joined_origins


_JOINABLE = frozenset({"role", "content", "tool_calls"})


def _joins(last: Mapping[str, Any], message: Mapping[str, Any]) -> bool:
    """
    Whether *message* joins *last*: an assistant message holding only text and
    calls, right after an assistant message that calls.
    """
    return (
        last.get("role") == message.get("role") == "assistant"
        and bool(last.get("tool_calls"))
        and message.keys() <= _JOINABLE
    )


def _joined(last: dict[str, Any], message: Mapping[str, Any]) -> dict[str, Any]:
    out = {**last, "tool_calls": [*last["tool_calls"], *(message.get("tool_calls") or ())]}
    text = message.get("content")
    if text:
        before = last.get("content")
        if not before:
            out["content"] = text
        else:
            out["content"] = [*_text_parts(before), *_text_parts(text)]
    return out


def _text_parts(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def wire_problems(
    messages: Sequence[Mapping[str, Any]], *, origins: Sequence[int] | None = None
) -> tuple[Problem, ...]:
    """
    Rules of the Chat Completions wire format itself: at least one message,
    content on every message (an assistant may have tool calls instead), no
    empty content list, no text longer than OpenAI takes in one string.

    Problem indexes are positions in *messages*, or with *origins* (for each
    wire message, the position of the message it was written from) those.
    """
    problems: list[Problem] = []
    if not messages:
        problems.append(Problem(None, "empty", "there is no message to send; add a user message"))
    problems.extend(_name_problems(messages, origins))
    for position, message in enumerate(messages):
        index = position if origins is None else origins[position]
        where = f"messages[{position}]" if origins is None else f"messages[{position}] (from message {index})"
        role = message.get("role")
        content = message.get("content")
        if content is None and role == "assistant" and not message.get("tool_calls") and not message.get("refusal"):
            problems.append(
                Problem(
                    index,
                    "empty-content",
                    f"{where} is an assistant message with neither content nor tool_calls, which OpenAI refuses; "
                    'give it content ("" is accepted) or leave it out',
                )
            )
        elif content is None and role != "assistant":
            problems.append(
                Problem(
                    index,
                    "empty-content",
                    f"{where} is a {role!r} message without content, which OpenAI refuses; give it content",
                )
            )
        elif isinstance(content, list) and not content:
            problems.append(
                Problem(
                    index,
                    "empty-content",
                    f"{where} has an empty content list, which OpenAI refuses; send a string or at least one part",
                )
            )
        if message.get("tool_calls") == []:  # as the SDK's parse() gives a reply that calls nothing
            problems.append(
                Problem(
                    index,
                    "empty-calls",
                    f"{where} has an empty tool_calls list, which OpenAI refuses: leave tool_calls out (write does)",
                )
            )
    problems.extend(long_texts(messages, "messages", range(len(messages)) if origins is None else origins))
    return tuple(problems)


_NAMED_ROLES = frozenset({"system", "developer", "user", "assistant"})
"""The roles whose ``name`` OpenAI reads (and checks)."""


def _name_problems(messages: Sequence[Mapping[str, Any]], origins: Sequence[int] | None) -> list[Problem]:
    """
    A problem for each speaker's name and each called function's name that OpenAI refuses.
    """
    problems: list[Problem] = []
    for position, message in enumerate(messages):
        index = position if origins is None else origins[position]
        name = message.get("name")
        if isinstance(name, str) and message.get("role") in _NAMED_ROLES and not NAME_PATTERN.fullmatch(name):
            problems.append(_bad_name(index, f"messages[{position}].name", name))
        for number, call in enumerate(message.get("tool_calls") or ()):
            kind = "custom" if isinstance(call, Mapping) and call.get("type") == "custom" else "function"
            holder = call.get(kind) if isinstance(call, Mapping) else None
            name = holder.get("name") if isinstance(holder, Mapping) else None
            if isinstance(name, str) and not NAME_PATTERN.fullmatch(name):
                problems.append(_bad_name(index, f"messages[{position}].tool_calls[{number}].{kind}.name", name))
    return problems


def _bad_name(index: int, where: str, name: str) -> Problem:
    return Problem(
        index,
        "name-format",
        f"{where} is {name!r}, and OpenAI takes only 1 to 64 letters, digits, '_' and '-' "
        f"(rename it, e.g. {suggested_name(name)!r})",
    )


def _body(messages: list[Message]) -> tuple[dict[str, Any], tuple[Problem, ...]]:
    written, origins = _write_all(messages)
    return {"messages": written}, wire_problems(written, origins=origins)


FORMAT = engine.Format("openai", _body, lost, drops=_drops)


@wire_errors("Chat Completions", "messages")
def write(
    source: Any, *, repair: bool = False, store: Any = None, upload: Any = None, cache: Any = None
) -> dict[str, Any]:
    """
    The ``{"messages": [...]}`` fields of a Chat Completions request for a
    context, a snapshot or a list of messages.

    With *cache* (True, a str, or a :class:`~workingctx.cache.CachePlan`),
    ``prompt_cache_key`` is set too: for True, from the prefix digest (see
    :func:`workingctx.cache.prompt_cache_key`). With no *cache* (None), a
    prefix that asks to be cached (``PrefixContext(cache_hint=True)``) sets it
    as True does; ``cache=False`` leaves it out.

    Reasoning blocks and other providers' blocks are left out (this format
    has no place for them), but for custom tool calls and their outputs
    (Responses items), written as ``custom`` tool calls and ``tool`` messages;
    tool results held as blocks become ``tool`` messages, images in them a
    following user message.

    Raises:
        ProviderError: the request would be refused (an unanswered call, an
            assistant message with neither content nor calls, an empty content
            list, ...); it lists every problem. ``repair=True`` drops orphan
            results and closes unanswered calls with an error result instead.
    """
    key = prompt_cache_key(source, True if cache is None and cache_hinted(source) else cache)
    body = engine.write(FORMAT, messages_of(source), repair=repair, store=store, upload=upload)
    if key is not None:
        body["prompt_cache_key"] = key
    return body


@wire_errors("Chat Completions", "messages")
def check(source: Any) -> tuple[Problem, ...]:
    """
    The problems ``write`` would raise for a context, or for a wire payload
    (its own messages checked as they are, and what reading it gives).
    """
    return engine.check(FORMAT, source, _payload_problems)


def _payload_problems(payload: Any) -> tuple[Problem, ...]:
    messages = read_messages(payload)
    data = plain(payload)
    raw = expect_list(data["messages"] if isinstance(data, Mapping) else data, "messages")
    return (
        *check_messages(messages, provider="openai"),
        *media_problems(messages),
        *lost(messages),
        *wire_problems(raw),
        *_long_ids(raw),
    )


def _long_ids(raw: Sequence[Mapping[str, Any]]) -> list[Problem]:
    """
    A problem for each tool call id of a payload longer than OpenAI takes (a
    written body has none: ``write`` gives such a call a short name).
    """
    return [
        Problem(
            position,
            "id-length",
            f"messages[{position}]: tool call id {call_id!r} has {len(call_id)} characters and OpenAI takes "
            f"at most {ID_LIMIT}; write the context read from it, which names the call within that",
            (call_id,),
        )
        for position, call_id in _ids(raw)
        if len(call_id) > ID_LIMIT
    ]


@wire_errors("Chat Completions", "messages")
def request_key(source: Any, **fields: Any) -> str:
    """
    A key for exactly what ``write`` sends plus *fields* (model, tools, ...):
    equal for contexts that send the same bytes, whatever their ids, notes,
    usage or metadata.
    """
    return engine.request_key(FORMAT, write, source, fields)


# -- responses ---------------------------------------------------------------------------


@wire_errors("Chat Completions")
def read_response(response: Any, *, context: Any = None) -> Message:  # noqa: ARG001  # the shared signature
    """
    The assistant message of a Chat Completion (SDK object or dict), with its
    usage and model name in ``metadata``. A refusal (``content: null`` and
    ``refusal``) is the message's text, written back as it came by ``write``
    and as text by the other formats. Custom tool calls are read as
    :func:`read` reads them. *context* is taken as every adapter
    takes it; Chat Completions keeps reused ids, so there is nothing to map back.

    Raises:
        ValueError: the response has no choices.
    """
    data = expect_mapping(response, "a chat completion")
    choices = data.get("choices") or []
    if not choices:
        msg = "the chat completion has no choices; read_response needs at least one"
        raise ArgumentValueError(msg, argument="response", value=response)
    raw = dict(expect_mapping(choices[0].get("message"), "choices[0].message"))
    for key in ("annotations", "refusal", "audio", "function_call"):
        if raw.get(key) in (None, []):
            raw.pop(key, None)
    if "refusal" in raw:  # an SDK object leaves its null content out: a refusal is sent back with it
        raw.setdefault("content", None)
    message = _message(raw, 0)
    return engine.reply(
        data,
        message.content,
        usage=Usage.from_openai,
        role=message.role,
        name=message.name,
        tool_calls=message.tool_calls,
        provider_data=message.provider_data,
    )
