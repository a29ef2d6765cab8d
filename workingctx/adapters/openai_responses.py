"""
OpenAI Responses: ``{"instructions": ..., "input": [...]}`` in and out.

Items map to messages: input messages to user, system and developer messages;
a run of output items (reasoning, an assistant message, function calls) to one
assistant message whose blocks keep their order; ``function_call_output`` to a
tool message. Reasoning items keep their ``encrypted_content`` untouched and
are replayed only to OpenAI.

>>> from workingctx.adapters import openai_responses
>>> body = {"instructions": "Be brief.", "input": [
...     {"role": "user", "content": "Weather in Paris?"},
...     {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA..."},
...     {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": '{"city":"Paris"}'},
...     {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
... ]}
>>> openai_responses.write(openai_responses.read(body)) == body
True
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeGuard

import attrs

from workingctx.adapters import _engine as engine
from workingctx.adapters._common import (
    CONTINUES,
    TEXT_LIMIT,
    Problem,
    ProviderError,
    cache_hinted,
    context_from,
    continued,
    expect_list,
    expect_mapping,
    long_texts,
    lost_blocks,
    messages_of,
    odd_image_type,
    plain,
    sends_nothing,
    split_system,
    too_long,
    wire_errors,
)
from workingctx.adapters._engine import arguments_text, call_text, content_of, data_url, media_of_url, sendable, unknown
from workingctx.cache import prompt_cache_key
from workingctx.callids import short_call_ids
from workingctx.exceptions import ArgumentValueError
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
    calls_of,
    tool_answers,
)
from workingctx.validity import check_messages as every_rule

__all__ = ["Problem", "ProviderError", "check", "message_starts", "read", "read_response", "request_key", "write"]

PROVIDER = "openai_responses"  # the key of what only this format carries
OPENAI = "openai"  # who produces the reasoning; what both OpenAI formats share (the developer role)
_OUTPUT_TYPES = frozenset({"reasoning", "function_call", "mcp_approval_request", "mcp_list_tools"})
"""Output items that belong to the assistant's run besides messages and calls (``*_call``)."""


# -- reading ---------------------------------------------------------------------------


def _part(part: Mapping[str, Any]) -> ContentBlock:
    kind = part.get("type")
    keys = set(part)
    if kind in {"input_text", "output_text"} and "text" in part:
        extra = {k: v for k, v in part.items() if k not in {"type", "text"}}
        if kind == "output_text":
            extra["_type"] = kind
        return TextBlock(part["text"], provider_data={PROVIDER: extra} if extra else {})
    if kind == "input_image" and keys <= {"type", "detail", "image_url", "file_id"}:
        if "image_url" in part and "file_id" not in part:
            media = media_of_url(part["image_url"])
        elif "file_id" in part and "image_url" not in part:
            media = MediaRef(kind="file_id", file_id=part["file_id"])
        else:
            return ProviderBlock(PROVIDER, part)
        detail = part.get("detail")
        if detail in {None, "auto", "low", "high"}:
            return ImageBlock(media, detail=detail, provider_data={} if detail else {PROVIDER: {"_no_detail": True}})
    if kind == "input_file" and keys <= {"type", "file_id", "file_data", "file_url", "filename"}:
        sources = keys & {"file_id", "file_data", "file_url"}
        if len(sources) == 1:
            (source,) = sources
            filename = part.get("filename")
            if source == "file_id":
                media = MediaRef(kind="file_id", file_id=part["file_id"], filename=filename)
            elif source == "file_url":
                media = MediaRef(kind="url", url=part["file_url"], filename=filename)
            else:
                media = MediaRef(kind="data", data_base64=part["file_data"], filename=filename)
                if not part["file_data"].startswith("data:"):  # sent back as it came, not as a data URL
                    return DocumentBlock(media, provider_data={PROVIDER: {"_raw": True}})
            return DocumentBlock(media)
    return ProviderBlock(PROVIDER, part)


def _output_blocks(item: Mapping[str, Any]) -> list[ContentBlock]:
    """
    The blocks of one output item in an assistant run.
    """
    kind = item.get("type")
    if kind == "reasoning":
        parts = expect_list(item.get("summary") or [], "a reasoning item's summary")
        summary = [expect_mapping(s, "a summary part").get("text", "") for s in parts]
        extra = unknown(item, {"encrypted_content"})
        return [
            ReasoningBlock(
                "\n\n".join(summary),
                encrypted=item.get("encrypted_content"),
                provider=OPENAI,
                provider_data={PROVIDER: {"item": extra}},
            )
        ]
    if kind == "function_call":
        arguments = item.get("arguments", "")
        try:
            decoded = json.loads(arguments)
        except (TypeError, ValueError):
            decoded = None
        if isinstance(decoded, dict):
            extra = unknown(item, {"call_id", "name"})
            return [ToolCallBlock(item["call_id"], item["name"], decoded, provider_data={PROVIDER: {"item": extra}})]
        return [ProviderBlock(PROVIDER, item)]
    if kind == "message" or (kind is None and item.get("role") == "assistant"):
        content = item.get("content")
        envelope = unknown(item, {"content"})
        if isinstance(content, str):
            return [TextBlock(content, provider_data={PROVIDER: {"item": envelope, "_text": True}})]
        blocks = [_part(expect_mapping(p, "a content part")) for p in expect_list(content, "content")]
        if not blocks:
            return [ProviderBlock(PROVIDER, item)]
        first = blocks[0]
        if not isinstance(first, TextBlock):
            return [ProviderBlock(PROVIDER, item)]
        data = {**first.provider_data.get(PROVIDER, {}), "item": envelope}
        blocks[0] = TextBlock(first.text, provider_data={PROVIDER: data})
        return blocks
    return [ProviderBlock(PROVIDER, item)]


def _is_output(item: Mapping[str, Any]) -> bool:
    kind = item.get("type")
    if kind in _OUTPUT_TYPES:
        return True
    if kind in {None, "message"}:
        return item.get("role") == "assistant"
    return isinstance(kind, str) and kind.endswith("_call")


def message_starts(items: Sequence[Mapping[str, Any]]) -> list[int]:
    """
    The index of the input item each message :func:`read` makes of *items*
    starts at: a run of the assistant's output items (reasoning, calls, its
    messages) is one message, every other item one of its own.

    >>> message_starts([{"role": "user", "content": "hi"}, {"type": "reasoning", "summary": []},
    ...                 {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}])
    [0, 1]
    """
    return [i for i, item in enumerate(items) if not (i and _is_output(item) and _is_output(items[i - 1]))]


@wire_errors("Responses", "input")
def read_messages(payload: Any) -> list[Message]:
    """
    The messages of a Responses body (``instructions`` first) or of a bare item list.
    """
    data = plain(payload)
    messages: list[Message] = []
    items: Any = data
    if isinstance(data, Mapping):
        if "input" not in data:
            msg = "a Responses body needs 'input'; pass the body or the list of items itself"
            raise ArgumentValueError(msg, argument="payload", value=payload)
        if data.get("instructions") is not None:
            messages.append(Message("system", data["instructions"], provider_data={PROVIDER: {"_instructions": True}}))
        items = data["input"]
        if isinstance(items, str):
            text = {"_input_text": True}
            if isinstance(data.get("previous_response_id"), str):
                text[CONTINUES] = data["previous_response_id"]
            messages.append(Message("user", items, provider_data={PROVIDER: text}))
            return messages
    previous = data.get("previous_response_id") if isinstance(data, Mapping) else None
    run: list[ContentBlock] = []
    calls: list[ToolCall] = []  # calls whose arguments text is not a JSON object, kept as data
    for position, raw in enumerate(expect_list(items, "input")):
        item = expect_mapping(raw, f"input[{position}]")
        if _is_output(item):
            cut = _unparsed_call(item, len(run))
            if cut is None:
                run.extend(_output_blocks(item))
            else:
                calls.append(cut)
            previous = None
            continue
        if run or calls:
            messages.append(Message("assistant", tuple(run), tool_calls=calls))
            run, calls = [], []
        message = _input_item(item, position)
        if isinstance(previous, str) and message.role != "system":
            # a continuation's leading results answer calls of the stored response; its
            # first message keeps the id even when no result leads, so it is sent back
            message = _continuing(message, previous)
            if not message.result_ids:
                previous = None
        messages.append(message)
    if run or calls:
        messages.append(Message("assistant", tuple(run), tool_calls=calls))
    return messages


def _continuing(message: Message, previous: str) -> Message:
    """
    *message* marked as a message of a request that continues the stored response *previous*.
    """
    data = {**message.provider_data, PROVIDER: {**message.provider_data.get(PROVIDER, {}), CONTINUES: previous}}
    return attrs.evolve(message, provider_data=data)


def _unparsed_call(item: Mapping[str, Any], at: int) -> ToolCall | None:
    """
    A ``function_call`` whose arguments text is not a JSON object (a reply cut
    off by ``max_tokens``) as a call keeping that text verbatim, and the
    position *at* (the blocks before it) it is written back to; None for any other item.
    """
    arguments = item.get("arguments")
    if item.get("type") != "function_call" or not isinstance(arguments, str):
        return None
    call = ToolCall(item["call_id"], item["name"], arguments_json=arguments)
    if call.arguments_parsed:
        return None
    extra = unknown(item, {"call_id", "name", "arguments"})
    data = {PROVIDER: {"item": extra, "_at": at}}
    return ToolCall(call.id, call.name, arguments_json=arguments, provider_data=data)


def _input_item(item: Mapping[str, Any], position: int) -> Message:
    kind = item.get("type")
    if kind == "function_call_output":
        extra = unknown(item, {"type", "call_id", "output"})
        output = item.get("output")
        content = content_of(output, _part) if output is not None else ""
        return Message("tool", content, tool_call_id=item["call_id"], provider_data={PROVIDER: extra} if extra else {})
    if kind in {None, "message"} and item.get("role") in {"user", "system", "developer"}:
        extra = unknown(item, {"role", "content"})
        role = item["role"]
        shared = {}
        if role == "developer":
            shared = {OPENAI: {"role": "developer"}}
            role = "system"
        extra["_item"] = True
        return Message(role, content_of(item.get("content", ""), _part), provider_data={**shared, PROVIDER: extra})
    if kind is None:
        msg = f"input[{position}] is not a Responses item: it has no 'type' and role {item.get('role')!r}"
        raise ArgumentValueError(msg, argument=f"input[{position}]", value=item)
    return Message("user", (ProviderBlock(PROVIDER, item),), provider_data={PROVIDER: {"_item": True}})


@wire_errors("Responses", "input")
def read(payload: Any) -> Any:
    """
    A WorkingContext from a Responses body (``{"instructions": ..., "input": [...]}``),
    a list of items, or SDK objects; ``instructions`` and leading system and
    developer items become the prefix.
    """
    return context_from(*split_system(read_messages(payload)))


# -- writing ---------------------------------------------------------------------------


def _write_part(block: ContentBlock, assistant: bool) -> dict[str, Any] | None:
    """
    The content part of a block; None for what this format leaves out by design
    (other providers' reasoning and blocks). :func:`lost` names the blocks it cannot carry.
    """
    sendable(block)
    if isinstance(block, TextBlock):
        extra = {k: thaw(v) for k, v in block.provider_data.get(PROVIDER, {}).items() if k not in {"item", "_text"}}
        kind = extra.pop("_type", "output_text" if assistant else "input_text")
        part = {"type": kind, "text": block.text, **extra}
        if kind == "output_text" and "annotations" not in part and not block.provider_data.get(PROVIDER):
            part["annotations"] = []
        return part
    if isinstance(block, ImageBlock):
        media = block.media
        part = {"type": "input_image", "detail": block.detail or "auto"}
        if block.detail is None and block.provider_data.get(PROVIDER, {}).get("_no_detail"):
            del part["detail"]
        if media.kind == "url":
            part["image_url"] = media.url
        elif media.kind == "data":
            part["image_url"] = data_url(media, "image/png")
        elif media.kind == "file_id":
            part["file_id"] = media.file_id
        else:
            return None
        return part
    if isinstance(block, DocumentBlock):
        media = block.media
        part = {"type": "input_file"}
        if media.kind == "file_id":
            part["file_id"] = media.file_id
        elif media.kind == "url":
            part["file_url"] = media.url
        elif media.kind == "data":
            data = media.data_base64 or ""
            raw = data.startswith("data:") or block.provider_data.get(PROVIDER, {}).get("_raw")
            part["file_data"] = data if raw else data_url(media, "application/pdf")
        else:
            return None
        if media.filename is not None:
            part["filename"] = media.filename
        return part
    if isinstance(block, ProviderBlock) and block.provider == PROVIDER:
        return dict(thaw(block.data))
    return None


def lost(messages: Sequence[Message]) -> tuple[Problem, ...]:
    """
    The blocks of *messages* the Responses input has no place for (audio,
    video, data; media in an assistant message), each an ``unsendable``
    problem: writing never drops them in silence.
    """
    return lost_blocks(messages, _lost)


def _unanswerable(messages: Sequence[Message]) -> tuple[Problem, ...]:
    """
    Every tool result (a tool message, a result block) answering a call that
    only an output item of the call's own kind answers (a computer, shell or
    patch call, an MCP approval request: see :func:`workingctx.messages.tool_answers`),
    each a ``result-kind`` problem: the Responses input would send it as a
    ``function_call_output``, which OpenAI refuses for such a call.
    """
    kinds: dict[str, str] = {}  # call id -> the kind of its latest call, where a tool result cannot answer it
    problems: list[Problem] = []
    for index, message in enumerate(messages):
        blocks = () if isinstance(message.content, str) else message.content
        if not (kinds or any(isinstance(block, ProviderBlock) for block in blocks)):
            continue  # only a provider's own call asks for an output of its kind (every write walks this)
        for call in calls_of([message], message.call_ids):
            item = call.provider_data.get(PROVIDER, {}).get("item", {})
            if tool_answers(call):
                kinds.pop(call.id, None)
            else:
                kinds[call.id] = str(item.get("type"))
        answered = [b.call_id for b in blocks if isinstance(b, ToolResultBlock)]
        if message.tool_call_id is not None:
            answered.append(message.tool_call_id)
        problems.extend(
            Problem(
                index,
                "result-kind",
                f"this tool result answers the {kinds[call_id]} {call_id!r}, which only an output item of "
                "its own kind answers (OpenAI refuses a function_call_output for it); answer it with "
                "ProviderBlock('openai_responses', {...}) holding that output item, or leave the call out",
                (call_id,),
            )
            for call_id in dict.fromkeys(answered)
            if call_id in kinds
        )
    return tuple(problems)


_OUTPUT_OF = {
    "function_call_output": "function_call",
    "custom_tool_call_output": "custom_tool_call",
    "computer_call_output": "computer_call",
    "local_shell_call_output": "local_shell_call",
    "shell_call_output": "shell_call",
    "apply_patch_call_output": "apply_patch_call",
    "tool_search_output": "tool_search_call",
    "mcp_approval_response": "mcp_approval_request",
}
"""The kind of call each output item answers: OpenAI pairs an output only with a call of its kind."""


def _mismatched(messages: Sequence[Message]) -> tuple[Problem, ...]:
    """
    Every output item of this format's own (a ``custom_tool_call_output``, a
    ``computer_call_output``, ...) naming a call of another kind, each a
    ``result-kind`` problem: OpenAI refuses the output (no call of its kind
    has that id), and the call it names is left without its answer.
    """
    outputs = [
        (index, block.answers, block.data["type"])
        for index, message in enumerate(messages)
        if not isinstance(message.content, str)
        for block in message.content
        if isinstance(block, ProviderBlock)
        and block.provider == PROVIDER
        and block.answers is not None
        and block.data.get("type") in _OUTPUT_OF
    ]
    if not outputs:  # the usual request: no message is walked for its calls
        return ()
    problems: list[Problem] = []
    kinds: dict[str, str] = {}  # call id -> the kind of its latest call
    pending = iter(outputs)
    output = next(pending, None)
    for index, message in enumerate(messages):
        while output is not None and output[0] == index:
            _, call_id, kind = output
            asked = kinds.get(call_id)
            if asked is not None and asked != _OUTPUT_OF[kind]:
                problems.append(
                    Problem(
                        index,
                        "result-kind",
                        f"this {kind} answers {call_id!r}, a {asked}, and OpenAI pairs an output only with a "
                        f"call of its own kind: answer the {asked} with its own output (a tool message for a "
                        "function call), or leave this output out",
                        (call_id,),
                    )
                )
            output = next(pending, None)
        for call in calls_of([message], message.call_ids):
            kinds[call.id] = str(call.provider_data.get(PROVIDER, {}).get("item", {}).get("type", "function_call"))
    return tuple(problems)


def _refused(messages: Sequence[Message]) -> tuple[Problem, ...]:
    return (*lost(messages), *_unanswerable(messages), *_mismatched(messages))


def _lost(block: Any, message: Message, in_result: bool) -> tuple[str, str] | None:
    if isinstance(block, AudioBlock | VideoBlock | DataBlock):
        return (
            "the Responses input takes text, images and files only",
            "transcribe or describe it as text, or write this context with google, which takes it",
        )
    if message.role == "assistant" and not in_result and isinstance(block, ImageBlock | DocumentBlock):
        return "an assistant message, which the Responses input takes as text only", "move it into a user message"
    odd = odd_image_type(block)
    if odd is not None:
        return (
            f"an image of type {odd!r}, and OpenAI takes PNG, JPEG, GIF and WebP images only",
            "convert it to one of those, or write this context with google",
        )
    return None


def _parts(blocks: Sequence[ContentBlock], assistant: bool) -> list[dict[str, Any]]:
    return [p for p in (_write_part(b, assistant) for b in blocks) if p is not None]


def _assistant_items(message: Message) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None  # the output message being filled with text parts
    content = message.content
    blocks: Sequence[ContentBlock] = (TextBlock(content),) if isinstance(content, str) and content else ()
    if not isinstance(content, str):
        blocks = content
    placed: dict[int, list[ToolCall]] = {}  # calls kept as data go back where they were read, else last
    for call in message.tool_calls:
        at = call.provider_data.get(PROVIDER, {}).get("_at")
        placed.setdefault(at if at.__class__ is int and 0 <= at < len(blocks) else len(blocks), []).append(call)
    for position, block in enumerate(blocks):
        if position in placed:
            items.extend(map(_tool_call_item, placed.pop(position)))
            current = None
        data = block.provider_data.get(PROVIDER, {}) if hasattr(block, "provider_data") else {}
        if isinstance(block, TextBlock):
            envelope = data.get("item")
            if data.get("_text"):
                items.append({**thaw(envelope or {}), "content": block.text})
                current = None
                continue
            if envelope is not None or current is None:
                if envelope is None and isinstance(content, str):
                    items.append({"role": "assistant", "content": block.text})
                    continue
                current = {
                    **(thaw(envelope) if envelope is not None else {"type": "message", "role": "assistant"}),
                    "content": [],
                }
                if envelope is None:
                    current["status"] = "completed"
                    current["id"] = _NEW_ID  # named by _name_messages, unique in the request
                items.append(current)
            current["content"].append(_write_part(block, assistant=True))
            continue
        current = None
        if isinstance(block, ReasoningBlock):
            if block.provider != OPENAI or "item" not in data:
                continue  # another provider's thinking, or one without the item id OpenAI needs
            item = dict(thaw(data["item"]))
            texts = [s.get("text", "") for s in item.get("summary") or ()]
            if "\n\n".join(texts) != block.summary:
                item["summary"] = [{"type": "summary_text", "text": block.summary}] if block.summary else []
            if block.encrypted is not None:
                item["encrypted_content"] = block.encrypted
            items.append(item)
        elif isinstance(block, ToolCallBlock | RemoteToolCallBlock):
            envelope = dict(thaw(data.get("item", {"type": "function_call"})))
            arguments = envelope.pop("arguments", None)
            if not isinstance(arguments, str) or json.loads(arguments) != block.args:
                arguments = arguments_text(block.args)
            items.append(_call_item(envelope, block.id, block.name, arguments))
        elif isinstance(block, ProviderBlock) and block.provider == PROVIDER:
            items.append(dict(thaw(block.data)))
    for calls in placed.values():
        items.extend(map(_tool_call_item, calls))
    return items


def _tool_call_item(call: ToolCall) -> dict[str, Any]:
    envelope = dict(thaw(call.provider_data.get(PROVIDER, {}).get("item", {"type": "function_call"})))
    return _call_item(envelope, call.id, call.name, call_text(call))


def _call_item(envelope: dict[str, Any], call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {**envelope, "call_id": call_id, "name": name, "arguments": arguments}


def _block_result(block: ToolResultBlock) -> dict[str, Any]:
    """
    The ``function_call_output`` of a result block; an error says so in its text, as Chat's tool messages do.
    """
    if block.content:
        content = (TextBlock("error: "), *block.content) if block.is_error else block.content
        return _result_item(block.call_id, content, {})
    return _result_item(block.call_id, engine.result_text(block), {})


def _result_item(call_id: str, content: str | tuple[ContentBlock, ...], extra: Mapping[str, Any]) -> dict[str, Any]:
    output: Any = content if isinstance(content, str) else _parts(content, assistant=False)
    return {
        "type": "function_call_output",
        "call_id": call_id,
        "output": output,
        **{k: thaw(v) for k, v in extra.items()},
    }


def _items(message: Message) -> list[dict[str, Any]]:
    extra = dict(message.provider_data.get(PROVIDER, {}))
    extra.pop(CONTINUES, None)  # a field of the request (previous_response_id), not of an item
    if message.role == "assistant":
        return _assistant_items(message)
    if message.role == "tool":
        if message.tool_call_id is not None:
            return [_result_item(message.tool_call_id, message.content, extra)]
        return _split_items(message.content, message.role, parts=False)
    if (
        not isinstance(message.content, str)
        and len(message.content) == 1
        and isinstance(message.content[0], ProviderBlock)
    ):
        block = message.content[0]
        if block.provider == PROVIDER and extra.get("_item"):
            return [dict(thaw(block.data))]
    items: list[dict[str, Any]] = []
    content = message.content
    role = message.provider_data.get(OPENAI, {}).get("role", message.role)
    if not isinstance(content, str) and any(map(_own_item, content)):
        return _split_items(content, role)
    if not isinstance(content, str):
        items = [_block_result(b) for b in _results(content)]
        kept = tuple(b for b in content if not isinstance(b, ToolResultBlock))
        if items and not kept:
            return items
        content = kept
    extra.pop("_item", None)
    extra.pop("_instructions", None)
    value: Any = content if isinstance(content, str) else _parts(content, assistant=False)
    return [*items, {"role": role, "content": value, **{k: thaw(v) for k, v in extra.items()}}]


def _results(content: str | tuple[ContentBlock, ...]) -> list[ToolResultBlock]:
    return [] if isinstance(content, str) else [b for b in content if isinstance(b, ToolResultBlock)]


def _own_item(block: ContentBlock) -> TypeGuard[ProviderBlock]:
    """
    Whether *block* is an item of this format that asks for or answers a call
    (a custom tool call's output, ...): an item of its own, never a content part.
    """
    return (
        isinstance(block, ProviderBlock)
        and block.provider == PROVIDER
        and (block.asks is not None or block.answers is not None)
    )


def _split_items(content: str | tuple[ContentBlock, ...], role: str, *, parts: bool = True) -> list[dict[str, Any]]:
    """
    The items of a message holding calls or answers of this format's own kinds:
    each such block an item of its own, in its place, results as their items,
    and (with *parts*) the content parts around them a *role* message each.
    """
    items: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for block in () if isinstance(content, str) else content:
        if isinstance(block, ToolResultBlock) or _own_item(block):
            if pending:
                items.append({"role": role, "content": pending})
                pending = []
            items.append(_block_result(block) if isinstance(block, ToolResultBlock) else dict(thaw(block.data)))
        elif parts and (part := _write_part(block, assistant=False)) is not None:
            pending.append(part)
    if pending:
        items.append({"role": role, "content": pending})
    return items


@wire_errors("Responses", "input")
def write(
    source: Any, *, repair: bool = False, store: Any = None, upload: Any = None, cache: Any = None
) -> dict[str, Any]:
    """
    The ``instructions`` and ``input`` fields of a Responses request.

    With *cache* (True, a str, or a :class:`~workingctx.cache.CachePlan`),
    ``prompt_cache_key`` is set too: for True, from the prefix digest (see
    :func:`workingctx.cache.prompt_cache_key`). With no *cache* (None), a
    prefix that asks to be cached (``PrefixContext(cache_hint=True)``) sets it
    as True does; ``cache=False`` leaves it out.

    The first leading system message becomes ``instructions`` (unless it was
    read as an input item); reasoning from other providers, and OpenAI
    reasoning without its item id, are left out.

    Raises:
        ProviderError: the request would be refused; it lists every problem.
    """
    key = prompt_cache_key(source, True if cache is None and cache_hinted(source) else cache)
    body = engine.write(FORMAT, messages_of(source), repair=repair, store=store, upload=upload)
    return body if key is None else {"prompt_cache_key": key, **body}


def _body(sent: list[Message]) -> tuple[dict[str, Any], tuple[Problem, ...]]:
    """
    The body for *sent*, and the problem of a request with nothing to send.
    """
    positions: Sequence[int] = range(len(sent))  # of each message kept, in *sent*: where its problems are
    if any(sends_nothing(m, _drops) for m in sent):  # not even an empty message
        positions = [i for i, m in enumerate(sent) if not sends_nothing(m, _drops)]
        sent = [sent[i] for i in positions]
    body: dict[str, Any] = {}
    previous = next((found for m in sent if (found := continued(m)) is not None), None)
    if previous is not None:  # the request continues a stored response, whose calls these results answer
        body["previous_response_id"] = previous
    rest = sent
    long: list[Problem] = []  # texts longer than OpenAI takes in one string
    if sent and sent[0].role == "system" and isinstance(sent[0].content, str):
        data = sent[0].provider_data.get(PROVIDER, {})
        if data.get("_instructions") or not data.get("_item"):
            body["instructions"] = sent[0].content
            if len(sent[0].content) > TEXT_LIMIT:
                long.append(too_long(positions[0], "instructions", sent[0].content))
            rest = sent[1:]
            positions = positions[1:]
    if len(rest) == 1 and rest[0].provider_data.get(PROVIDER, {}).get("_input_text"):
        text = rest[0].content
        body["input"] = text
        if isinstance(text, str) and len(text) > TEXT_LIMIT:
            long.append(too_long(positions[0], "input", text))
        return body, tuple(long)
    items: list[dict[str, Any]] = []
    origins: list[int] = []  # the message each item is written from
    for position, message in zip(positions, rest, strict=True):
        made = _items(message)
        items.extend(made)
        origins.extend([position] * len(made))
    items, refused = _distinct_ids(items, origins)
    body["input"] = _short_ids(_custom_outputs(_name_messages(items)))
    if not items and "instructions" not in body:
        return body, (
            Problem(None, "empty", "there is nothing to send (no instructions, no input); add a user message"),
        )
    long.extend(long_texts(body["input"], "input", origins))
    return body, (*refused, *long)


_NEW_ID: Any = object()
"""The id of an output message written from text read elsewhere, until :func:`_name_messages` names it."""


def _name_messages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """
    *items* with each output message written from text read elsewhere given an
    id of its own: ``msg_`` and its position in the input (so an id stays the
    same while the transcript grows), never an id another item holds. OpenAI
    refuses a request holding two items with one id ("Duplicate item found").
    """
    fresh = [position for position, item in enumerate(items) if item.get("id") is _NEW_ID]
    if not fresh:
        return items
    taken = {item.get("id") for item in items}
    for position in fresh:
        name, n = f"msg_{position}", 0
        while name in taken:
            n += 1
            name = f"msg_{position}_{n}"
        taken.add(name)
        items[position]["id"] = name
    return items


ID_OPTIONAL = frozenset(
    {
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "computer_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "mcp_approval_response",
        "tool_search_call",
        "tool_search_output",
        "additional_tools",
        "configuration_update",
        "compaction",
        "compaction_trigger",
    }
)
"""The input items whose ``id`` the SDK's param types leave optional: sent
without it, OpenAI takes such an item as a new one. Every other item with an
id needs it (reasoning, an output message, the calls OpenAI runs itself, ...);
a message of the user, system or developer has none."""

_ID_NAMES_CALL = frozenset({"local_shell_call_output"})
"""The items whose ``id`` is the call id they answer, not an id of their own."""

Duplicate = tuple[int, int, str, str]
"""(position of the first item holding an id, position of a later one, the id,
what ``write`` does: ``drop``, ``rename``, ``rekey`` (a call whose id is its
call id, re-keyed as every reused call id is) or a reason it refuses)."""


def _duplicates(items: Sequence[Mapping[str, Any]]) -> list[Duplicate]:
    """
    Every item of *items* holding an id an earlier item holds, with the first
    one's position and what ``write`` does about it. OpenAI refuses an input
    holding two items with one id ("Duplicate item found with id ...; remove
    duplicate items from your input"), as concatenated histories make. The
    later item goes without its id when the SDK's param type leaves it out
    (:data:`ID_OPTIONAL`), and an output message takes a ``msg_`` id of its
    own (as one written from another format's text does), unless a reasoning
    item of its run is paired with it by that id; any other item needs its id.
    """
    seen: dict[str, int] = {}
    found: list[Duplicate] = []
    reasoned = False  # whether a reasoning item came earlier in the current run of output items
    for position, item in enumerate(items):
        kind = item.get("type")
        if not (kind is None or isinstance(kind, str)):  # no item OpenAI takes, refused as it is
            reasoned = False
            continue
        if not _is_output(item):
            reasoned = False
        ident = item.get("id")
        if isinstance(ident, str) and kind not in _ID_NAMES_CALL:
            first = seen.setdefault(ident, position)
            if first != position:
                found.append((first, position, ident, _settle(item, reasoned)))
        reasoned = reasoned or (kind == "reasoning" and _is_output(item))
    return found


def _settle(item: Mapping[str, Any], reasoned: bool) -> str:
    """
    What ``write`` does with *item*, holding an id an earlier item holds: ``drop``
    its id, ``rename`` it, or why it cannot (what refusing says).
    """
    kind = item.get("type")
    if kind in {None, "message"}:
        output = item.get("role") == "assistant" and isinstance(item.get("content"), list)
        kind = "message" if output else None
    if reasoned and kind != "reasoning":
        return f"a reasoning item before it in its turn is paired with this {kind} by its id"
    if kind is None or kind in ID_OPTIONAL:
        return "drop"
    if kind in _CALL_KEY and _CALL_KEY[kind] == "id":
        return "rekey"
    if kind == "message":
        return "rename"
    return f"a {kind} item needs its id (the SDK's {kind} param type requires it)"


def _duplicate_text(first: str, later: str, ident: str, done: str) -> str:
    return (
        f"{first} and {later} both have id {ident!r}, and OpenAI refuses an input holding two items with "
        f'one id ("Duplicate item found"); {done}'
    )


_REFUSED_FIX = (
    "leave out one of the two items (a transcript holding the same turn twice, as concatenated "
    "histories do, sends it once)"
)


def _distinct_ids(items: list[dict[str, Any]], origins: Sequence[int]) -> tuple[list[dict[str, Any]], list[Problem]]:
    """
    *items* with no id held twice: a later item whose id may go is sent
    without it, a later output message under an id of its own; a
    ``duplicate-item-id`` problem (at the later item's message) for any other.
    """
    found = _duplicates(items)
    problems: list[Problem] = []
    for first, later, ident, done in found:
        if done == "drop":
            items[later] = {k: v for k, v in items[later].items() if k != "id"}
        elif done == "rename":
            items[later] = {**items[later], "id": _NEW_ID}  # named by _name_messages, unique in the request
        else:
            # a call whose id is its call id was re-keyed if reused: here another item holds that id
            reason = f"the {items[later]['type']}'s id is the call id its answer names" if done == "rekey" else done
            where = f"input[{later}] (written from message {origins[later]})"
            text = _duplicate_text(f"input[{first}] (written from message {origins[first]})", where, ident, reason)
            problems.append(Problem(origins[later], "duplicate-item-id", f"{text}: {_REFUSED_FIX}", (ident,)))
    return items, problems


def _custom_outputs(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """
    *items* with each result of a custom tool call (a tool message, as Chat
    Completions answers one) a ``custom_tool_call_output``, the kind the call wants.
    """
    custom: set[Any] = set()  # the ids whose latest call is a custom tool call
    for position, item in enumerate(items):
        kind, call_id = item.get("type"), item.get("call_id")
        if not isinstance(call_id, str):
            continue  # an item kept as it came, whose call id (not text) no answer can name
        if kind == "custom_tool_call":
            custom.add(call_id)
        elif kind == "function_call":
            custom.discard(call_id)
        elif kind == "function_call_output" and call_id in custom:
            items[position] = {**item, "type": "custom_tool_call_output"}
    return items


ID_LIMIT = 64
"""The most characters OpenAI takes in an input item's ``call_id`` (``string_above_max_length`` past it)."""


_CALL_KEY = {
    "local_shell_call_output": "id",
    "mcp_approval_request": "id",
    "mcp_approval_response": "approval_request_id",
}
"""The key of the call id in the items that do not name it ``call_id``."""


def _call_key(item: Mapping[str, Any]) -> str:
    kind = item.get("type")
    return _CALL_KEY.get(kind, "call_id") if isinstance(kind, str) else "call_id"


def _call_ids(item: Mapping[str, Any]) -> tuple[str, ...]:
    """
    The call id *item* names (none or one): the call's own, or the one its output answers.
    """
    found = item.get(_call_key(item))
    return (found,) if isinstance(found, str) else ()


def _short_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """
    *items* with every call id longer than OpenAI takes written under its
    short name (:func:`~workingctx.callids.short_call_ids`), in the calls and
    in the outputs that answer them alike.
    """
    names = short_call_ids([call_id for item in items for call_id in _call_ids(item)], ID_LIMIT)
    if not names:
        return items
    return [
        {**item, _call_key(item): names[item[_call_key(item)]]} if any(c in names for c in _call_ids(item)) else item
        for item in items
    ]


def _long_ids(messages: Sequence[Message]) -> list[Problem]:
    """
    A problem for each call id of *messages* (a payload as read) longer than OpenAI takes.
    """
    return [
        Problem(
            index,
            "id-length",
            f"message {index}: call_id {call_id!r} has {len(call_id)} characters and OpenAI takes at most "
            f"{ID_LIMIT}; write the context read from it, which names the call within that",
            (call_id,),
        )
        for index, message in enumerate(messages)
        for call_id in dict.fromkeys((*message.call_ids, *message.result_ids))
        if len(call_id) > ID_LIMIT
    ]


def _drops(block: ContentBlock, role: str) -> bool:
    """
    Whether this format leaves out *block* in a *role* message: another
    provider's reasoning or items, reasoning without the item id OpenAI
    needs, and any reasoning outside an assistant message.
    """
    if isinstance(block, ReasoningBlock):
        return role != "assistant" or block.provider != OPENAI or "item" not in block.provider_data.get(PROVIDER, {})
    return isinstance(block, ProviderBlock) and block.provider != PROVIDER


# Responses wants one function_call_output per call_id: reused ids are re-keyed
FORMAT = engine.Format(
    "openai",
    _body,
    _refused,
    unique_ids=True,
    skipped=frozenset({"continued-result"}),
    drops=_drops,
)


@wire_errors("Responses", "input")
def check(source: Any) -> tuple[Problem, ...]:
    """
    The problems ``write`` would raise for a context, or for a wire payload
    (a payload giving one ``call_id`` to two calls is refused by OpenAI as it
    stands: ``reused-call-id``; ``write`` re-keys it. Two items with one id are
    ``duplicate-item-id``, saying what ``write`` does about the later one).
    """
    return engine.check(FORMAT, source, _payload_problems)


def _payload_problems(payload: Any) -> tuple[Problem, ...]:
    messages = read_messages(payload)
    reused = (p for p in every_rule(messages, allow_pending=True) if p.rule == "reused-call-id")
    written = (p for p in engine.build(FORMAT, messages)[1] if p.rule != "duplicate-item-id")  # all are below
    return (*written, *reused, *_long_ids(messages), *_repeated_ids(payload), *_unstored(payload))


def _unstored(payload: Any) -> list[Problem]:
    """
    An ``unstored-reasoning`` problem for each reasoning item a body with
    ``"store": false`` sends by its id alone, without its
    ``encrypted_content``: OpenAI looks such an item up among the stored
    ones, and with ``store`` false none was kept ("Item with id 'rs_...' not
    found. Items are not persisted when `store` is set to false").
    """
    data = plain(payload)
    if not isinstance(data, Mapping) or data.get("store") is not False:
        return []
    items = data.get("input")
    if not isinstance(items, list):
        return []
    message_of = _message_of(data, items)
    problems = []
    for number, item in enumerate(items):
        if not isinstance(item, Mapping) or item.get("type") != "reasoning" or item.get("encrypted_content"):
            continue
        ident = item.get("id")
        if not isinstance(ident, str) or not ident:
            continue
        text = (
            f"input[{number}] is the reasoning item {ident!r} without its encrypted_content, and with store false "
            "OpenAI keeps no item to find it by (it answers 'Item ... not found'): make the responses with "
            "include=['reasoning.encrypted_content'] and send each reasoning item with it, leave the item out, "
            "or set store to true"
        )
        problems.append(Problem(message_of(number), "unstored-reasoning", text, (ident,)))
    return problems


def _message_of(data: Any, items: Sequence[Mapping[str, Any]]) -> Callable[[int], int]:
    """
    The position, in the messages :func:`read_messages` makes of the body
    *data*, of the message read from each of its input *items* (by the item's index).
    """
    starts = message_starts(items)
    by = 1 if isinstance(data, Mapping) and data.get("instructions") is not None else 0
    return lambda number: by + bisect.bisect_right(starts, number) - 1


def _repeated_ids(payload: Any) -> list[Problem]:
    """
    A ``duplicate-item-id`` problem for each item of a payload (already read)
    holding an id an earlier item holds, at the message read from it, saying
    what ``write`` does about it.
    """
    data = plain(payload)
    items = data.get("input") if isinstance(data, Mapping) else data
    if isinstance(items, str) or not items:
        return []
    found = _duplicates(items)
    if not found:
        return []
    message_of = _message_of(data, items)
    problems = []
    for first, later, ident, done in found:
        if done == "drop":
            fix = f"write sends input[{later}] without its id, which its item type leaves out"
        elif done == "rename":
            fix = f"write gives the message at input[{later}] a msg_ id of its own"
        elif done == "rekey":
            fix = f"write gives the call at input[{later}] and its answer a fresh id, as every reused call id"
        else:
            fix = f"write refuses it, as {done}: {_REFUSED_FIX}"
        index = message_of(later)
        text = _duplicate_text(f"input[{first}]", f"input[{later}]", ident, fix)
        problems.append(Problem(index, "duplicate-item-id", text, (ident,)))
    return problems


@wire_errors("Responses", "input")
def request_key(source: Any, **fields: Any) -> str:
    """
    A key for exactly what ``write`` sends plus *fields* (model, tools, ...).
    """
    return engine.request_key(FORMAT, write, source, fields)


@wire_errors("Responses")
def read_response(response: Any, *, context: Any = None) -> Message:
    """
    The assistant message of a Response (SDK object or dict): its output items
    as one assistant message, with usage and the model in ``metadata``.

    With *context* (the context, snapshot or messages the request was written
    from), a ``call_id`` in the reply that ``write`` gave a reused call is the
    context's own id again.
    """
    data = expect_mapping(response, "a response")
    if "output" not in data:
        msg = "not a Responses response: it has no 'output'; pass the result of responses.create"
        raise ArgumentValueError(msg, argument="response", value=response)
    blocks: list[ContentBlock] = []
    calls: list[ToolCall] = []
    for raw in expect_list(data["output"], "output"):
        item = dict(expect_mapping(raw, "an output item"))
        cut = _unparsed_call(item, len(blocks))
        if cut is None:
            blocks.extend(_output_blocks(item))
        else:
            calls.append(cut)
    return engine.reply(data, tuple(blocks), usage=Usage.from_openai, tool_calls=calls, context=context)
