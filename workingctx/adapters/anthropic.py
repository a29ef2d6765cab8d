"""
Anthropic Messages: ``{"system": ..., "messages": [...]}`` in and out.

>>> from workingctx.adapters import anthropic
>>> body = {
...     "system": [{"type": "text", "text": "You review code.", "cache_control": {"type": "ephemeral"}}],
...     "messages": [
...         {"role": "user", "content": "Is this safe?"},
...         {"role": "assistant", "content": [
...             {"type": "thinking", "thinking": "Check the input.", "signature": "EqQBCg..."},
...             {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.py"}}]},
...         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x = 1"}]},
...     ],
... }
>>> ctx = anthropic.read(body)
>>> anthropic.write(ctx) == body
True
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from workingctx import _checks
from workingctx.adapters import _engine as engine
from workingctx.adapters._common import (
    NAME_PATTERN,
    Problem,
    ProviderError,
    base64_head,
    cache_hinted,
    check_messages,
    context_from,
    expect_list,
    expect_mapping,
    inline,
    lost_blocks,
    messages_of,
    odd_image_type,
    plain,
    sends_nothing,
    suggested_name,
    wire_errors,
)
from workingctx.adapters._engine import Where, content_of, sendable, unknown
from workingctx.cache import CachePlan
from workingctx.exceptions import ArgumentTypeError, ArgumentValueError, WorkingCtxError
from workingctx.frozen import thaw
from workingctx.media import image_size, pdf_pages
from workingctx.messages import (
    AudioBlock,
    CacheBreakpoint,
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
    ToolCallBlock,
    ToolResultBlock,
    Usage,
    VideoBlock,
    image_type,
)
from workingctx.pricing import context_window

__all__ = ["Problem", "ProviderError", "check", "read", "read_response", "request_key", "write"]

PROVIDER = "anthropic"
ID_PATTERN = re.compile(r"[a-zA-Z0-9_-]+")
_ID_PREFIX = "wcx_"  # an id that does not fit ID_PATTERN, base64url-encoded


def wire_id(call_id: str) -> str:
    """
    *call_id* made to fit ``^[a-zA-Z0-9_-]+$``: unchanged when it fits, else
    encoded reversibly (see :func:`original_id`).

    >>> wire_id("call_abc"), wire_id("call.1:x")
    ('call_abc', 'wcx_Y2FsbC4xOng')
    >>> original_id(wire_id("call.1:x"))
    'call.1:x'
    """
    if ID_PATTERN.fullmatch(call_id):
        return call_id
    return _ID_PREFIX + base64.urlsafe_b64encode(call_id.encode("utf-8", "surrogatepass")).decode("ascii").rstrip("=")


def original_id(wire: str) -> str:
    """
    The id :func:`wire_id` encoded; any other id unchanged.
    """
    if not wire.startswith(_ID_PREFIX):
        return wire
    body = wire[len(_ID_PREFIX) :]
    try:
        decoded = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return wire
    return decoded if not ID_PATTERN.fullmatch(decoded) and wire_id(decoded) == wire else wire


# -- reading ---------------------------------------------------------------------------


def _cache(raw: Mapping[str, Any]) -> CacheBreakpoint | bool | None:
    """
    The breakpoint of a block; False when its cache_control is not one we model.
    """
    control = raw.get("cache_control")
    if control is None:
        return None if "cache_control" not in raw else False
    if isinstance(control, Mapping) and control.get("type") == "ephemeral" and set(control) <= {"type", "ttl"}:
        ttl = control.get("ttl")
        if ttl in {None, "5m", "1h"} and (ttl is not None or "ttl" not in control):
            return CacheBreakpoint(ttl)
    return False


def _media(source: Mapping[str, Any]) -> MediaRef | None:
    kind = source.get("type")
    if kind == "base64" and set(source) == {"type", "media_type", "data"}:
        return MediaRef(kind="data", data_base64=source["data"], mime_type=source["media_type"])
    if kind == "url" and set(source) == {"type", "url"}:
        return MediaRef(kind="url", url=source["url"])
    if kind == "file" and set(source) == {"type", "file_id"}:
        return MediaRef(kind="file_id", file_id=source["file_id"])
    return None


_SIMPLE = {
    "text": {"type", "text", "cache_control", "citations"},
    "image": {"type", "source", "cache_control"},
    "document": {"type", "source", "cache_control", "title", "context", "citations"},
    "tool_use": {"type", "id", "name", "input", "cache_control"},
    "tool_result": {"type", "tool_use_id", "content", "is_error", "cache_control"},
    "thinking": {"type", "thinking", "signature"},
    "redacted_thinking": {"type", "data"},
}


_KEYS = "_keys"
"""Where a call or result keeps the keys its block does not model (the SDK's ``caller``,
``toolset_name``, a ``cache_control`` of null), written back as they came."""


def read_block(raw: Mapping[str, Any]) -> ContentBlock:
    """
    The workingctx block for one Anthropic content block, as :func:`read` reads
    it (what it does not model kept to write back as it came).
    """
    return _block(raw)


def _block(raw: Mapping[str, Any]) -> ContentBlock:
    kind = raw.get("type")
    if kind in {"tool_use", "tool_result"}:
        keys = {k: v for k, v in raw.items() if k not in _SIMPLE[kind] or (k == "cache_control" and v is None)}
        if keys:  # still a call or a result: the rules and the trims must see it as one
            typed = _block({k: v for k, v in raw.items() if k not in keys})
            if not isinstance(typed, ToolCallBlock | ToolResultBlock):
                return ProviderBlock(PROVIDER, raw)
            data = {**typed.provider_data.get(PROVIDER, {}), _KEYS: keys}
            return attrs.evolve(typed, provider_data={**typed.provider_data, PROVIDER: data})
    allowed = _SIMPLE.get(kind) if isinstance(kind, str) else None
    found = _cache(raw)
    if allowed is None or not set(raw) <= allowed or isinstance(found, bool):  # False: a cache_control not modelled
        return ProviderBlock(PROVIDER, raw)
    cache = found
    if kind == "text":
        if isinstance(raw.get("text"), str):
            # citations (None as the SDK's model_dump writes them unset) are Anthropic's: the text is anyone's
            extra = {"citations": raw["citations"]} if "citations" in raw else {}
            return TextBlock(raw["text"], cache=cache, provider_data={PROVIDER: extra} if extra else {})
    elif kind in {"image", "document"}:
        media = _media(expect_mapping(raw.get("source"), "source"))
        if media is not None:
            if kind == "image":
                return ImageBlock(media, cache=cache)
            extra = {k: v for k, v in raw.items() if k in {"title", "context", "citations"}}
            return DocumentBlock(media, cache=cache, provider_data={PROVIDER: extra} if extra else {})
    elif kind == "tool_use":
        if isinstance(raw.get("input"), Mapping):
            return ToolCallBlock(original_id(raw["id"]), raw["name"], raw["input"], cache=cache)
    elif kind == "tool_result":
        return _result(raw, cache)
    elif kind == "thinking":
        return ReasoningBlock(raw["thinking"], signature=raw["signature"], provider=PROVIDER)
    elif kind == "redacted_thinking":
        return ReasoningBlock("", encrypted=raw["data"], redacted=True, provider=PROVIDER)
    return ProviderBlock(PROVIDER, raw)


def _result(raw: Mapping[str, Any], cache: CacheBreakpoint | None) -> ContentBlock:
    extra: dict[str, Any] = {}
    if "is_error" in raw and raw["is_error"] is False:
        extra["_is_error"] = False
    content = raw.get("content")
    call_id = original_id(raw["tool_use_id"])
    is_error = bool(raw.get("is_error", False))
    if "content" not in raw:
        extra["_content"] = "absent"
        block = ToolResultBlock(call_id, "", is_error, cache=cache)
    elif isinstance(content, str):
        block = ToolResultBlock(call_id, content, is_error, cache=cache)
    else:
        inner = tuple(_block(expect_mapping(item, "tool_result content")) for item in expect_list(content, "content"))
        if any(isinstance(b, ToolResultBlock | ToolCallBlock | ReasoningBlock) for b in inner):
            return ProviderBlock(PROVIDER, raw)
        if not inner:
            extra["_content"] = "list"
        block = ToolResultBlock(call_id, "", is_error, content=inner, cache=cache)
    if extra:
        return ToolResultBlock(
            block.call_id,
            block.output,
            block.is_error,
            content=block.content,
            cache=cache,
            provider_data={PROVIDER: extra},
        )
    return block


def _system(raw: Any) -> list[Message]:
    if raw is None:
        return []
    return [Message("system", content_of(raw, _block, "a content block"))]


@wire_errors("Anthropic Messages", "messages")
def read(payload: Any) -> Any:
    """
    A WorkingContext from a Messages request body (``{"system": ..., "messages": [...]}``),
    a bare list of messages, or SDK objects; ``system`` becomes the prefix.

    Raises:
        TypeError: a part of the payload has the wrong shape.
        ValueError: a role other than user and assistant.
    """
    data = plain(payload)
    system: list[Message] = []
    if isinstance(data, Mapping):
        if "messages" not in data:
            msg = "an Anthropic body needs a 'messages' list; pass the body or the list itself"
            raise ArgumentValueError(msg, argument="payload", value=payload)
        system = _system(data.get("system"))
        data = data["messages"]
    messages: list[Message] = []
    for position, item in enumerate(expect_list(data, "messages")):
        raw = expect_mapping(item, f"messages[{position}]")
        role = raw.get("role")
        if role not in {"user", "assistant", "system"}:
            msg = (
                f"messages[{position}] has role {role!r}; Anthropic messages are 'user', 'assistant' or 'system' "
                "(the SDK's SystemMessageParam)"
            )
            raise ArgumentValueError(msg, argument=f"messages[{position}]", value=raw)
        extra = unknown(raw, {"role", "content"})
        if role == "system":  # a system message among the turns stays there, as it was sent
            extra[_IN_MESSAGES] = True
        messages.append(
            Message(
                role,
                content_of(raw.get("content", ""), _block, "a content block"),
                provider_data={PROVIDER: extra} if extra else {},
            )
        )
    return context_from(system, messages)


# -- writing ---------------------------------------------------------------------------


_IN_MESSAGES = "_in_messages"  # a system message read from inside 'messages': written back there


def _split_system(messages: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    """
    The leading system messages that go in the top-level ``system``, and the
    rest (a system message read from inside ``messages`` stays a turn).
    """
    cut = 0
    while (
        cut < len(messages)
        and messages[cut].role == "system"
        and not messages[cut].provider_data.get(PROVIDER, {}).get(_IN_MESSAGES)
    ):
        cut += 1
    return list(messages[:cut]), list(messages[cut:])


def _cache_control(cache: CacheBreakpoint | None) -> dict[str, Any]:
    if cache is None:
        return {}
    control: dict[str, Any] = {"type": "ephemeral"}
    if cache.ttl is not None:
        control["ttl"] = cache.ttl
    return {"cache_control": control}


def _source(media: MediaRef, default_mime: str, *, image: bool = False) -> dict[str, Any] | None:
    """
    The ``source`` of a media block; an inline *image* is labelled with the
    type its bytes say when they say one (Anthropic refuses an image labelled
    otherwise: a JPEG sent as ``image/png``, the type assumed when none is given).
    """
    if media.kind == "data":
        mime, data = inline(media, default_mime)
        if image:
            mime = image_type(base64_head(data)) or mime
        return {"type": "base64", "media_type": mime, "data": data}
    if media.kind == "url":
        return {"type": "url", "url": media.url}
    if media.kind == "file_id":
        return {"type": "file", "file_id": media.file_id}
    return None


def _write_block(block: ContentBlock) -> dict[str, Any] | None:
    """
    The content block of a block; None for what this format leaves out by design
    (other providers' reasoning and blocks). :func:`lost` names the blocks it cannot carry.
    """
    sendable(block)
    if isinstance(block, TextBlock):
        citations = block.provider_data.get(PROVIDER, {})
        citations = {"citations": thaw(citations["citations"])} if "citations" in citations else {}
        return {"type": "text", "text": block.text, **citations, **_cache_control(block.cache)}
    if isinstance(block, ImageBlock):
        source = _source(block.media, "image/png", image=True)
        return None if source is None else {"type": "image", "source": source, **_cache_control(block.cache)}
    if isinstance(block, DocumentBlock):
        source = _source(block.media, "application/pdf")
        if source is None:
            return None if block.text is None else {"type": "text", "text": block.text}
        extra = thaw(block.provider_data.get(PROVIDER, {}))
        return {"type": "document", "source": source, **extra, **_cache_control(block.cache)}
    if isinstance(block, ToolCallBlock | RemoteToolCallBlock):
        cache = block.cache if isinstance(block, ToolCallBlock) else None
        keys = block.provider_data.get(PROVIDER, {}).get(_KEYS, {}) if isinstance(block, ToolCallBlock) else {}
        return {
            "type": "tool_use",
            "id": wire_id(block.id),
            "name": block.name,
            "input": thaw(block.args),
            **_cache_control(cache),
            **thaw(keys),
        }
    if isinstance(block, ToolResultBlock):
        return _write_result(block)
    if isinstance(block, ReasoningBlock):
        if block.provider != PROVIDER:
            return None  # another provider's thinking is never replayed here
        if block.redacted and block.encrypted is not None:
            return {"type": "redacted_thinking", "data": block.encrypted}
        if block.signature is not None:
            return {"type": "thinking", "thinking": block.summary, "signature": block.signature}
        return None
    if isinstance(block, ProviderBlock):
        return thaw(block.data) if block.provider == PROVIDER else None
    return None


def _write_result(block: ToolResultBlock) -> dict[str, Any]:
    extra = block.provider_data.get(PROVIDER, {})
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": wire_id(block.call_id)}
    form = extra.get("_content")
    if form == "absent":
        pass
    elif block.content or form == "list":
        # A result with both an output and blocks sends the output first, as text.
        head = [{"type": "text", "text": block.output}] if block.output else []
        out["content"] = head + [b for b in map(_write_block, block.content) if b is not None]
    else:
        out["content"] = block.output_text()
    if block.is_error:
        out["is_error"] = True
    elif "_is_error" in extra:
        out["is_error"] = False
    out.update(_cache_control(block.cache))
    out.update(thaw(extra.get(_KEYS, {})))
    return out


def _blocks(content: str | tuple[ContentBlock, ...]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [b for b in map(_write_block, content) if b is not None]


def _turn(message: Message) -> tuple[str, Any, bool]:
    """
    (role, content, native) for one message: native turns are sent as they
    are; the others (tool results, system notes, calls) may merge with neighbours.
    """
    if message.role == "tool":
        if message.tool_call_id is None:
            return "user", _blocks(message.content), False
        if isinstance(message.content, str):
            return "user", [_write_result(ToolResultBlock(message.tool_call_id, message.content))], False
        # A tool message may carry its results as blocks: each is written as it is
        # (its output included); other blocks join the result for the message's call.
        results = [b for b in message.content if isinstance(b, ToolResultBlock)]
        rest = tuple(b for b in message.content if not isinstance(b, ToolResultBlock))
        own = next((i for i, b in enumerate(results) if b.call_id == message.tool_call_id), None)
        if own is None:
            results.insert(0, ToolResultBlock(message.tool_call_id, "", content=rest))
        elif rest:
            results[own] = attrs.evolve(results[own], content=results[own].content + rest)
        return "user", [_write_result(b) for b in results], False
    if message.role == "system" and message.provider_data.get(PROVIDER, {}).get(_IN_MESSAGES):
        content = message.content
        return "system", content if isinstance(content, str) else _blocks(content), True
    if message.role == "system":
        text = message.text()
        return "user", [{"type": "text", "text": f"<system>{text}</system>"}], False
    if message.tool_calls:
        blocks = _blocks(message.content)
        blocks += [
            {"type": "tool_use", "id": wire_id(c.id), "name": c.name, "input": thaw(c.arguments)}
            for c in message.tool_calls
        ]
        return message.role, blocks, False
    content = message.content
    if isinstance(content, str):
        return message.role, content, True
    return message.role, _blocks(content), True


def _as_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content)


def write_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """
    Anthropic messages for workingctx messages (no system), without checks:
    results first in the user turn after the calls, non-native neighbours merged.
    """
    return _write_turns(messages)[0]


def _write_turns(messages: Sequence[Message]) -> tuple[list[dict[str, Any]], list[list[int]]]:
    """
    The Anthropic messages, and for each the positions (in *messages*) of the
    messages written into it; an empty turn, which Anthropic refuses, is left out.
    """

    def turn(position: int, message: Message) -> engine.Turn | None:
        if sends_nothing(message, _drops):  # not even as the last turn: it was no empty reply
            return None
        role, content, native = _turn(message)
        if not isinstance(content, str):
            content = [
                b for b in content if not (b.get("type") == "text" and b.get("text") == "" and "cache_control" not in b)
            ]
        if content in ("", []) and not (position == len(messages) - 1 and role == "assistant"):
            return role, None, native
        extra = {k: thaw(v) for k, v in message.provider_data.get(PROVIDER, {}).items() if k != _IN_MESSAGES}
        return role, {"role": role, "content": content, **extra}, native

    return engine.grouped(messages, turn, _join, after_empty=True)


def _drops(block: ContentBlock, _role: str) -> bool:
    """
    Whether this format leaves out *block* (another provider's reasoning or items).
    """
    return _write_block(block) is None


def _join(last: dict[str, Any], turn: dict[str, Any]) -> None:
    blocks = [*_as_blocks(last["content"]), *_as_blocks(turn["content"])]
    results = [b for b in blocks if b.get("type") == "tool_result"]
    last["content"] = results + [b for b in blocks if b.get("type") != "tool_result"]


def write_system(messages: Sequence[Message]) -> str | list[dict[str, Any]] | None:
    """
    The top-level ``system`` for the leading system messages.
    """
    if not messages:
        return None
    if len(messages) == 1 and isinstance(messages[0].content, str):
        return messages[0].content
    return [b for m in messages for b in _blocks(m.content)]


def _apply_cache(messages: list[Message], cache: Any) -> list[Message]:
    """
    Put the breakpoints of a cache plan on the blocks it names: a
    :class:`~workingctx.cache.CachePlan` sets each on its block, any other
    plan (``cache.breakpoints``: items with a message ``index`` and a ``ttl``)
    on the last block of each message named.
    """
    if cache is None or cache is False or cache == "auto":
        return messages
    if isinstance(cache, CachePlan):
        if cache.provider != PROVIDER:
            msg = f"the cache plan was made for {cache.provider!r}; plan with provider='anthropic' for this adapter"
            raise ArgumentValueError(msg, argument="cache", value=cache)
        return cache.apply(messages)
    points = getattr(cache, "breakpoints", None)
    if points is None:
        msg = f"cache must have .breakpoints (items with index and ttl), got {cache!r}"
        raise ArgumentTypeError(msg, argument="cache", value=cache, expected="a CachePlan or breakpoints")
    out = list(messages)
    for point in points:
        index, ttl = point.index, getattr(point, "ttl", None)
        message = out[index]
        blocks = (TextBlock(message.content),) if isinstance(message.content, str) else message.content
        last = blocks[-1]
        if not hasattr(last, "cache"):
            msg = f"message {index} ends with a {type(last).__name__}, which cannot hold a cache breakpoint"
            raise ArgumentValueError(msg, argument="cache", value=cache)
        blocks = (*blocks[:-1], attrs.evolve(last, cache=CacheBreakpoint(ttl)))
        out[index] = attrs.evolve(message, content=blocks)
    return out


def _hinted(source: Any, cache: Any) -> list[Message]:
    """
    The messages of *source* with *cache* applied; with no *cache* (None) and a
    prefix that asks to be cached, a breakpoint (the provider's default
    lifetime, 5 minutes) on the last block of the prefix that can carry one,
    unless the prefix holds a breakpoint already.
    """
    messages = messages_of(source)
    if cache is not None:
        return _apply_cache(messages, cache)
    size = cache_hinted(source)
    if not size or any(getattr(b, "cache", None) is not None for m in messages[:size] for b in _content_blocks(m)):
        return messages
    for index in range(size - 1, -1, -1):
        blocks = _content_blocks(messages[index])
        for position in range(len(blocks) - 1, -1, -1):
            block: Any = blocks[position]
            if not hasattr(block, "cache") or (isinstance(block, TextBlock) and not block.text.strip()):
                continue  # Anthropic refuses a breakpoint on blank text
            marked = (*blocks[:position], attrs.evolve(block, cache=CacheBreakpoint()), *blocks[position + 1 :])
            out = list(messages)
            out[index] = attrs.evolve(messages[index], content=marked)
            return out
    return messages


def _content_blocks(message: Message) -> tuple[ContentBlock, ...]:
    return (TextBlock(message.content),) if isinstance(message.content, str) else message.content


@wire_errors("Anthropic Messages", "messages")
def write(
    source: Any, *, repair: bool = False, cache: Any = None, store: Any = None, upload: Any = None
) -> dict[str, Any]:
    """
    The ``system`` and ``messages`` fields of a Messages request for a context,
    a snapshot or a list of messages.

    Leading system messages become ``system``; a system message later in the
    tail is sent as a ``<system>`` note in a user turn, so the cached top-level
    ``system`` never changes. Tool messages become ``tool_result`` blocks first
    in the next user turn; ids that do not fit ``^[a-zA-Z0-9_-]+$`` are encoded
    reversibly; another provider's reasoning is left out.

    Args:
        source: A WorkingContext, a FrozenContext or a list of messages.
        repair: Drop orphan results and close unanswered calls with an error
            result instead of raising.
        cache: ``"auto"`` for Anthropic's automatic breakpoint (top-level
            ``cache_control``); a :class:`~workingctx.cache.CachePlan` from
            :func:`workingctx.cache.plan`, whose breakpoints go on their blocks
            (and the automatic one when the plan asks for it); or any object
            whose ``breakpoints`` items each have a message ``index`` (into the
            assembled messages) and a ``ttl``. None (the default): a
            breakpoint (default lifetime) at the end of the prefix when it
            asks for one (``PrefixContext(cache_hint=True)``) and holds none
            yet; False: no breakpoint but those already on the blocks.
        store: A media store; references into it are sent as inline bytes
            (or, with *upload*, as what the hook returns). Without it a
            store reference is a problem.
        upload: ``upload(ref, data) -> file_id | MediaRef``, passed to
            :func:`workingctx.media.resolve_media`.

    Raises:
        ProviderError: the request would be refused; it lists every problem.
    """
    body = engine.write(FORMAT, _hinted(source, cache), repair=repair, store=store, upload=upload)
    if cache == "auto" or getattr(cache, "automatic", False) is True:
        problems = _breakpoint_problems(body, automatic=True)
        if problems:
            raise ProviderError.from_problems(problems, provider=PROVIDER)
        body["cache_control"] = {"type": "ephemeral"}
    return body


def _body(sent: list[Message]) -> tuple[dict[str, Any], tuple[Problem, ...]]:
    system, tail = _split_system(sent)
    body: dict[str, Any] = {}
    written = write_system(system)
    if written is not None:
        body["system"] = written
    body["messages"], origins = _write_turns(tail)
    problems = wire_problems(body["messages"], origins=engine.shifted(origins, len(system)))
    return body, (*problems, *_breakpoint_problems(body))


MAX_BREAKPOINTS = 4
"""The most blocks with ``cache_control`` one request may hold, the automatic (top-level) one included."""


def _marked(body: Mapping[str, Any]) -> list[str]:
    """
    Where *body*'s blocks carrying ``cache_control`` are (``tools[3]``, ``system[0]``,
    ``messages[2].content[1]``), in order.
    """
    found: list[str] = []
    tools = body.get("tools")  # a tool's definition is cached with the request too
    if isinstance(tools, list):
        found.extend(f"tools[{k}]" for k, tool in enumerate(tools) if _carries(tool))
    system = body.get("system")
    if isinstance(system, list):
        found.extend(f"system[{k}]" for k, block in enumerate(system) if _carries(block))
    messages = body.get("messages")
    for position, message in enumerate(messages if isinstance(messages, list) else ()):
        content = message.get("content") if isinstance(message, Mapping) else None
        for k, block in enumerate(content if isinstance(content, list) else ()):
            where = f"messages[{position}].content[{k}]"
            if _carries(block):
                found.append(where)
            inner = block.get("content") if isinstance(block, Mapping) and block.get("type") == "tool_result" else None
            if isinstance(inner, list):
                found.extend(f"{where}.content[{j}]" for j, part in enumerate(inner) if _carries(part))
    return found


def _carries(block: object) -> bool:
    return isinstance(block, Mapping) and block.get("cache_control") is not None


def _breakpoint_problems(body: Mapping[str, Any], *, automatic: bool = False) -> tuple[Problem, ...]:
    """
    The problem of a request holding more breakpoints than Anthropic takes
    (``A maximum of 4 blocks with cache_control may be provided``).
    """
    marked = _marked(body)
    count = len(marked) + automatic
    if count <= MAX_BREAKPOINTS:
        return ()
    also = " and the automatic (top-level) one" if automatic else ""
    message = (
        f"{count} cache breakpoints ({', '.join(marked)}{also}), and Anthropic takes at most {MAX_BREAKPOINTS} "
        "in a request; take cache= off the blocks (and cache_control off the tools) that need none, or let "
        "workingctx.cache.plan place them"
    )
    return (Problem(None, "cache-breakpoints", message),)


def _text_problems(message: Mapping[str, Any], index: int, where: Where, last: bool) -> list[Problem]:
    """
    Blank text and, in a final assistant turn (a prefill), trailing whitespace.
    """
    content = message.get("content")
    if not last and content.__class__ is str and (not content or content.strip()):
        return []  # most turns: text that is not blank, and no prefill to check
    texts = (
        [content]
        if isinstance(content, str)
        else [b.get("text") for b in content if isinstance(b, Mapping) and b.get("type") == "text"]
        if isinstance(content, list)
        else []
    )
    texts = [t for t in texts if isinstance(t, str)]
    problems: list[Problem] = []
    if any(t == "" for t in texts) and not isinstance(content, str):
        problems.append(
            Problem(
                index,
                "blank-text",
                f"{where} holds an empty text block, which Anthropic refuses; give it text or leave it out "
                "(move its cache breakpoint to a block with content)",
            )
        )
    elif texts and not any(t.strip() for t in texts) and any(texts):
        problems.append(
            Problem(
                index,
                "blank-text",
                f"{where} has only whitespace as text, which Anthropic refuses; give it text or leave the text out",
            )
        )
    elif last and message.get("role") == "assistant":
        tail_text = content if isinstance(content, str) else None
        if isinstance(content, list) and content and isinstance(content[-1], Mapping):
            tail_text = content[-1].get("text") if content[-1].get("type") == "text" else None
        if isinstance(tail_text, str) and tail_text and tail_text != tail_text.rstrip():
            problems.append(
                Problem(
                    index,
                    "trailing-whitespace",
                    f"{where} is the final assistant turn (a prefill) and ends with whitespace, which Anthropic "
                    "refuses; strip the trailing whitespace or append the next user message",
                )
            )
    return problems


def lost(messages: Sequence[Message]) -> tuple[Problem, ...]:
    """
    The blocks of *messages* Anthropic has no place for (audio, video, data;
    media in a system message, which takes text only), each an ``unsendable``
    problem: writing never drops them in silence.
    """
    return lost_blocks(messages, _lost)


# Anthropic needs each tool_use id once per request: reused ids are re-keyed
FORMAT = engine.Format(
    "anthropic", _body, lost, unique_ids=True, messages=lambda source: _hinted(source, None), drops=_drops
)


def _lost(block: Any, message: Message, _in_result: bool) -> tuple[str, str] | None:
    if isinstance(block, AudioBlock | VideoBlock | DataBlock):
        return (
            "Anthropic takes images and documents only",
            "describe or transcribe it as text, or write this context with google, which takes it",
        )
    if message.role == "system" and isinstance(block, ImageBlock | DocumentBlock):
        return "a system message, which Anthropic takes as text only", "move it into a user message"
    odd = odd_image_type(block)
    if odd is not None:
        return (
            f"an image of type {odd!r}, and Anthropic takes PNG, JPEG, GIF and WebP images only",
            "convert it to one of those",
        )
    return None


MAX_IMAGE_BASE64 = 10 * 1024 * 1024
"""
The longest base64 text of one image Anthropic's own API takes (its "10 MB";
Amazon Bedrock and Google Cloud take 5 MB).
"""
MAX_IMAGES = 600
"""
The most images Anthropic takes in one request (pages of documents count
too), on a model whose context window is over 200k tokens or not known.
"""
MAX_IMAGES_200K = 100
"""The most images Anthropic takes in one request on a model with a context window of 200k tokens or less."""
_SMALL_WINDOW = 200_000
"""The largest context window, in tokens, of the models that take :data:`MAX_IMAGES_200K` images."""


def max_images(model: object = None) -> int:
    """
    The most images (and pages of documents) Anthropic takes in one request
    on *model*: :data:`MAX_IMAGES_200K` when genai-prices records a context
    window of 200k tokens or less for it, else :data:`MAX_IMAGES` (with no
    model, an unknown one, or without the ``prices`` extra: what no model refuses).
    """
    if not isinstance(model, str) or not model.strip():
        return MAX_IMAGES
    try:
        window = context_window(model)
    except WorkingCtxError:  # a name no price table takes: a model nobody knows
        return MAX_IMAGES
    return MAX_IMAGES_200K if window is not None and window <= _SMALL_WINDOW else MAX_IMAGES


MAX_SIDE = 8000
"""The longest side of an image Anthropic takes, in pixels."""
MANY_IMAGES = 20
"""In a request of more images than this, an image's side is MAX_SIDE_OF_MANY pixels at most."""
MAX_SIDE_OF_MANY = 2000


def _dimensions(data: str) -> tuple[int, int] | None:
    """
    The width and height of the inline image *data* (base64), decoding no
    more of it than its header needs; None when they cannot be read.
    """
    if image_type(base64_head(data)) != "image/jpeg":
        return image_size(base64_head(data, 64))
    # a JPEG's size comes after its other segments, mostly in its first 3 KiB (EXIF may take 64 KiB)
    for length in (4 * 1024, 128 * 1024, len(data)):
        size = image_size(base64_head(data, length))
        if size is not None or length >= len(data):
            return size
    return None


_MEDIA_TYPES = ("image", "document")


def _media_blocks(content: list[Any]) -> Iterable[tuple[str, Mapping[str, Any]]]:
    """
    (path, block) of each image and document block of *content*, those in tool results too.
    """
    for position, block in enumerate(content):
        if not isinstance(block, Mapping):
            continue
        if block.get("type") in _MEDIA_TYPES:
            yield f"content[{position}]", block
        inner = block.get("content") if block.get("type") == "tool_result" else None
        if isinstance(inner, list):
            for j, item in enumerate(inner):
                if isinstance(item, Mapping) and item.get("type") in _MEDIA_TYPES:
                    yield f"content[{position}].content[{j}]", item


def _inline_pdf(block: Mapping[str, Any]) -> bool:
    """
    Whether the document *block* holds a PDF inline (base64).
    """
    source = block.get("source")
    return (
        isinstance(source, Mapping)
        and source.get("type") == "base64"
        and source.get("media_type") == "application/pdf"
        and isinstance(source.get("data"), str)
    )


_PAGES_KNOWN: dict[tuple[int, int], int] = {}
"""
The pages of the PDFs counted lately, by the length and hash of their base64
text (a request writes the same text again and again): counted once, and
without keeping the text alive. With a random hash seed (Python's default)
no document can be made to take another's count.
"""
_PAGES_KEPT = 256


def _pages(data: str) -> int:
    """
    The pages of the inline PDF *data* (base64), 0 when they cannot be read.
    """
    key = (len(data), hash(data))
    found = _PAGES_KNOWN.get(key)
    if found is None:
        try:
            found = pdf_pages(base64.b64decode(data)) or 0  # as lenient as a decoder that skips line breaks
        except ValueError:
            found = 0
        if len(_PAGES_KNOWN) >= _PAGES_KEPT:
            _PAGES_KNOWN.clear()
        _PAGES_KNOWN[key] = found
    return found


MAX_REQUEST_BYTES = 32 * 1024 * 1024
"""The largest request body Anthropic's API takes (its "32 MB"; less on some cloud platforms)."""


def _inline_data(block: Mapping[str, Any]) -> int:
    """
    The characters of the base64 data an image or document *block* holds inline (0 for none).
    """
    source = block.get("source")
    data = source.get("data") if isinstance(source, Mapping) and source.get("type") == "base64" else None
    return len(data) if isinstance(data, str) else 0


def _size_problems(
    held: Sequence[Sequence[tuple[str, Mapping[str, Any]]]],
    documents: Sequence[Sequence[Mapping[str, Any]]],
    origins: Sequence[Sequence[int]] | None,
) -> list[Problem]:
    """
    The problem of a request whose inline images and documents (each turn's,
    *held* and *documents*) alone are longer than the largest body Anthropic
    takes (text never comes near: 32 MB is some eight million tokens),
    naming the first turn holding any.
    """
    sizes = [
        sum(_inline_data(image) for _, image in turn) + sum(map(_inline_data, kept))
        for turn, kept in zip(held, documents, strict=True)
    ]
    total = sum(sizes)
    if total <= MAX_REQUEST_BYTES:
        return []
    first = next(position for position, size in enumerate(sizes) if size)
    index, where = Where.of(first, origins, "messages", "Anthropic turn")
    message = (
        f"the request's inline images and documents, from {where} on, hold {total:,} bytes of base64, and "
        f"Anthropic takes a request of {MAX_REQUEST_BYTES:,} bytes at most (less on some cloud platforms): send "
        "the large ones by file id (the Files API) or by URL, or leave the oldest out"
    )
    return [Problem(index, "request-size", message)]


def _image_problems(
    images: Sequence[tuple[str, Mapping[str, Any]]], index: int | None, where: Any, count: int
) -> Iterable[Problem]:
    """
    The problems of the inline *images* of a turn ((path, block), those in
    tool results too) in a request of *count* images: one labelled with
    another type than its bytes say (``media-type``), longer than Anthropic
    takes (``image-size``), or with a side longer than Anthropic takes
    (``image-dimensions``: 8000 pixels, 2000 in a request of more than 20 images).
    """
    side = MAX_SIDE_OF_MANY if count > MANY_IMAGES else MAX_SIDE
    for path, image in images:
        source = image.get("source")
        if not isinstance(source, Mapping) or source.get("type") != "base64" or not isinstance(source.get("data"), str):
            continue
        data, declared = source["data"], source.get("media_type")
        actual = image_type(base64_head(data))
        if actual is not None and actual != declared:
            yield Problem(
                index,
                "media-type",
                f"{where}: {path} is an image labelled {declared!r} whose bytes are {actual!r}, which "
                f"Anthropic refuses: label it {actual!r} (write does)",
            )
        if len(data) > MAX_IMAGE_BASE64:
            yield Problem(
                index,
                "image-size",
                f"{where}: {path} is an image of {len(data):,} bytes of base64, and Anthropic takes "
                f"{MAX_IMAGE_BASE64:,} at most: send a smaller copy (scaled down or compressed)",
            )
        size = _dimensions(data)
        if size is not None and max(size) > side:
            many = (
                f" in a request of more than {MANY_IMAGES} images (this one holds {count})" if side < MAX_SIDE else ""
            )
            yield Problem(
                index,
                "image-dimensions",
                f"{where}: {path} is an image of {size[0]}x{size[1]} pixels, and Anthropic takes {side} pixels "
                f"a side at most{many}: send a copy scaled down to fit" + (", or fewer images" if many else ""),
            )


def wire_problems(
    messages: Sequence[Mapping[str, Any]],
    *,
    origins: Sequence[Sequence[int]] | None = None,
    model: object = None,
) -> tuple[Problem, ...]:
    """
    Rules of the Anthropic wire format itself: no empty
    turn or blank text, no trailing whitespace in a prefill, ids, results
    first, no more images than *model* takes (see :func:`max_images`), no
    more inline media than a request body holds.

    Problem indexes are positions in *messages*, or with *origins* (for each
    wire message, the positions of the messages written into it) the first of those.
    """
    problems: list[Problem] = []
    if not messages:
        problems.append(
            Problem(None, "empty", "there is no Anthropic turn to send (no message with content); add a user message")
        )
    media = [
        list(_media_blocks(message["content"]))
        if isinstance(message, Mapping) and isinstance(message.get("content"), list)
        else []
        for message in messages
    ]  # each turn's images and documents, walked once
    held = [[(path, block) for path, block in turn if block["type"] == "image"] for turn in media]
    images = sum(map(len, held))
    documents = [[block for _, block in turn if block["type"] == "document" and _inline_pdf(block)] for turn in media]
    pages = [sum(_pages(document["source"]["data"]) for document in kept) for kept in documents]
    page_count = sum(pages)
    problems.extend(_size_problems(held, documents, origins))
    limit = max_images(model) if images + page_count > MAX_IMAGES_200K else MAX_IMAGES
    if images + page_count > limit:
        first = next(position for position, found in enumerate(held) if found or pages[position])
        index, where = Where.of(first, origins, "messages", "Anthropic turn")
        on = f" on {model}, a model with a context window of 200k tokens or less" if limit < MAX_IMAGES else ""
        parts = [f"{images} images" if images else "", f"{page_count} pages of PDF documents" if page_count else ""]
        held_text = " and ".join(part for part in parts if part)
        problems.append(
            Problem(
                index,
                "media-count",
                f"the request holds {held_text}, from {where} on, and Anthropic takes {limit} at most{on} "
                "(images and pages of documents together): leave the oldest out, or put text in their place",
            )
        )
    for position, message in enumerate(messages):
        index, where = Where.of(position, origins, "messages", "Anthropic turn")
        content = message.get("content")
        last = position == len(messages) - 1
        if content in ("", []) and not (last and message.get("role") == "assistant"):
            problems.append(Problem(index, "empty-content", f"{where} has no content; Anthropic refuses empty turns"))
        problems.extend(_text_problems(message, index, where, last))
        if not isinstance(content, list):
            continue
        problems.extend(_image_problems(held[position], index, where, images))
        seen_other = False
        for block in content:
            kind = block.get("type")
            ident = (
                block.get("id") if kind == "tool_use" else block.get("tool_use_id") if kind == "tool_result" else None
            )
            if isinstance(ident, str) and not ID_PATTERN.fullmatch(ident):
                problems.append(
                    Problem(index, "id-format", f"{where}: id {ident!r} must match ^[a-zA-Z0-9_-]+$", (ident,))
                )
            name = block.get("name") if kind == "tool_use" else None
            if isinstance(name, str) and not NAME_PATTERN.fullmatch(name):
                problems.append(
                    Problem(
                        index,
                        "name-format",
                        f"{where}: the tool_use name {name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$, as Anthropic "
                        f"refuses any other (rename the tool, e.g. {suggested_name(name)!r})",
                        (str(ident),),
                    )
                )
            if kind == "tool_result" and seen_other:
                problems.append(
                    Problem(
                        index,
                        "result-not-first",
                        f"{where}: tool_result blocks must come first in the user turn",
                        (str(ident),),
                    )
                )
            seen_other = seen_other or kind != "tool_result"
    return tuple(problems)


_THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
"""The block types that hold the model's thinking."""


def _results_only(message: Any) -> bool:
    """
    Whether *message* is a user turn of tool results alone (a tool-use loop going on).
    """
    if not isinstance(message, Mapping):
        return False
    content = message.get("content")
    return (
        message.get("role") == "user"
        and isinstance(content, list)
        and bool(content)
        and all(isinstance(block, Mapping) and block.get("type") == "tool_result" for block in content)
    )


_VERSIONED = re.compile(r"claude-(?:opus|sonnet|haiku)-(\d+)(?:[-.](\d{1,2})(?!\d))?")
_NEWER_FAMILIES = re.compile(r"claude-(?:mythos|fable)(?![a-z])")
_FIRST_WITHOUT_PREFILL = (4, 6)


def takes_prefill(model: str) -> bool:
    """
    Whether *model* takes a request ending in an assistant turn (a prefill):
    Claude Opus 4.6, Sonnet 4.6 and every later model refuse one ("Prefilling
    assistant messages is not supported for this model"); older models, and
    names that are not Claude's, take it.

    >>> takes_prefill("claude-haiku-4-5"), takes_prefill("anthropic/claude-opus-4.7")
    (True, False)
    """
    name = _checks.check_instance(model, "model", str, "a model name (str)").lower()
    if _NEWER_FAMILIES.search(name):
        return False
    found = _VERSIONED.search(name)
    if found is None:
        return True
    version = (int(found.group(1)), int(found.group(2) or 0))
    return version < _FIRST_WITHOUT_PREFILL


def _prefill_problems(data: Mapping[str, Any], messages: Sequence[Any]) -> tuple[Problem, ...]:
    """
    A request ending in an assistant turn, on a model that takes no prefill (see :func:`takes_prefill`).
    """
    model = data.get("model")
    last = messages[-1] if messages else None
    if not isinstance(model, str) or not isinstance(last, Mapping) or last.get("role") != "assistant":
        return ()
    if takes_prefill(model) or _continues_server_tools(last):
        return ()
    where = f"messages[{len(messages) - 1}]"
    message = (
        f"the request ends in an assistant turn ({where}, a prefill), and {model} takes none (Anthropic refuses "
        "it: 'Prefilling assistant messages is not supported for this model'): leave it out, and ask for the "
        "reply's form in the system prompt or with output_config.format"
    )
    return (Problem(len(messages) - 1, "prefill", message),)


def _continues_server_tools(turn: Mapping[str, Any]) -> bool:
    """
    Whether the assistant *turn* holds a server tool's call or result: a
    turn the model paused (``pause_turn``), sent back as it came so the model
    goes on with it, not a prefill.
    """
    content = turn.get("content")
    return isinstance(content, list) and any(
        isinstance(block, Mapping)
        and isinstance(block.get("type"), str)
        and (block["type"] in ("server_tool_use", "mcp_tool_use") or block["type"].endswith("_tool_result"))
        for block in content
    )


def _thinking_problems(data: Mapping[str, Any], messages: Sequence[Any]) -> tuple[Problem, ...]:
    """
    With manual extended thinking (``"thinking": {"type": "enabled", ...}``),
    a request that ends inside an assistant turn (its last message a user
    turn of tool results alone: a tool-use loop is one assistant turn) must
    send that turn starting with its thinking block, as the model returned
    it; Anthropic refuses it otherwise ("a final assistant message must
    start with a thinking block"). Adaptive thinking may start a turn with
    a tool call, so only manual thinking is checked.
    """
    thinking = data.get("thinking")
    if not isinstance(thinking, Mapping) or thinking.get("type") != "enabled":
        return ()
    if not messages or not _results_only(messages[-1]):
        return ()
    start = len(messages) - 1
    while start and isinstance(messages[start - 1], Mapping):
        before = messages[start - 1]
        if before.get("role") != "assistant" and not _results_only(before):
            break
        start -= 1
    first = next(
        (i for i in range(start, len(messages)) if messages[i].get("role") == "assistant"),
        None,
    )
    if first is None:
        return ()
    content = messages[first].get("content")
    head = content[0] if isinstance(content, list) and content else None
    kind = head.get("type") if isinstance(head, Mapping) else "text" if isinstance(content, str) and content else None
    if kind in _THINKING_BLOCKS:
        return ()
    opening = f"a {kind!r} block" if isinstance(kind, str) else "no block"
    return (
        Problem(
            first,
            "thinking-not-first",
            f"messages[{first}] starts the assistant turn that the final tool results continue with {opening}, "
            'and while thinking is enabled ("type": "enabled") Anthropic takes that turn only starting with its '
            "thinking block: send the turn's thinking blocks back first, unchanged, as the model returned them, "
            "or leave thinking out of this request",
        ),
    )


@wire_errors("Anthropic Messages", "messages")
def check(source: Any) -> tuple[Problem, ...]:
    """
    The problems ``write`` would raise for a context, or for a wire payload
    (its own turns checked as they are, and what reading it gives).
    """
    return engine.check(FORMAT, source, _payload_problems)


def _payload_problems(payload: Any) -> tuple[Problem, ...]:
    ctx = read(payload)
    data = plain(payload)
    raw = data["messages"] if isinstance(data, Mapping) else data
    thinking = (*_thinking_problems(data, raw), *_prefill_problems(data, raw)) if isinstance(data, Mapping) else ()
    model = data.get("model") if isinstance(data, Mapping) else None
    wire = engine.at_context((*wire_problems(raw, model=model), *thinking), len(ctx.prefix.as_messages()))
    automatic = isinstance(data, Mapping) and data.get("cache_control") is not None
    marked = _breakpoint_problems(data, automatic=automatic) if isinstance(data, Mapping) else ()
    return (*check_messages(ctx.assembled(), provider="anthropic"), *wire, *marked)


@wire_errors("Anthropic Messages", "messages")
def request_key(source: Any, **fields: Any) -> str:
    """
    A key for exactly what ``write`` sends plus *fields* (model, tools, ...).
    """
    return engine.request_key(FORMAT, write, source, fields)


# -- responses ---------------------------------------------------------------------------


@wire_errors("Anthropic Messages")
def read_response(response: Any, *, context: Any = None) -> Message:
    """
    The assistant message of a Messages response (SDK object or dict), with its
    usage (5-minute and 1-hour cache writes apart) and the model in ``metadata``.

    With *context* (the context, snapshot or messages the request was written
    from), an id in the reply that ``write`` gave a reused call (see
    :func:`workingctx.adapters._common.unique_call_ids`) is the context's own id again.
    """
    data = expect_mapping(response, "an Anthropic message")
    if data.get("type", "message") != "message" or "content" not in data:
        msg = f"not an Anthropic message response (type {data.get('type')!r}); pass the result of messages.create"
        raise ArgumentValueError(msg, argument="response", value=response)
    blocks = []
    for raw in expect_list(data["content"], "content"):
        item = dict(expect_mapping(raw, "a content block"))
        if item.get("type") == "text" and not item.get("citations"):
            item.pop("citations", None)
        if item.get("type") == "tool_use":
            item.pop("caller", None)
        blocks.append(_block(item))
    return engine.reply(data, tuple(blocks), usage=Usage.from_anthropic, context=context)
