"""
What every adapter shares: plain data from SDK objects, the messages of a
context, the provider rules and their repair, and request keys.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeGuard

import attrs

from workingctx._canonical import canonical_json
from workingctx._wire import wire_errors
from workingctx.callids import fresh_call_id
from workingctx.context import WorkingContext
from workingctx.exceptions import ArgumentTypeError, InvalidMessageError, ProviderError
from workingctx.media import resolve_media
from workingctx.messages import (
    ContentBlock,
    ImageBlock,
    MediaRef,
    Message,
    ProviderBlock,
    ReasoningBlock,
    RemoteToolCallBlock,
    ToolCall,
    ToolCallBlock,
    ToolResultBlock,
    answered_id,
    asked_id,
    image_type,
)
from workingctx.prefix import PrefixContext
from workingctx.validity import LEFT_OUT_CALL, RULES, STRUCTURAL_RULES, Problem, Provider, RuleState
from workingctx.validity import check_messages as validity_check

__all__ = [
    "STAND_IN",
    "Problem",
    "ProviderError",
    "check_messages",
    "context_from",
    "messages_of",
    "plain",
    "refuse",
    "repair_messages",
    "request_key_of",
    "wire_errors",
]


Drops = Callable[[ContentBlock, str], bool]
"""Whether a format leaves out a block (another provider's reasoning or items) in a message of a role."""

_TOOL_RULES = frozenset({*STRUCTURAL_RULES, "pending-at-end", "reused-call-id", "call-not-assistant"})

REPAIRED = frozenset({"orphan-result", "dangling-call", "pending-at-end", "unencodable-text", "call-not-assistant"})
"""The rules ``repair=True`` fixes: it drops results whose call is nowhere,
closes unanswered calls, moves calls out of messages of other roles than
assistant and replaces lone surrogates. A request whose every problem is one
of these is the only one whose error advises it."""

CONTINUES = "_previous_response_id"
"""The key (under ``openai_responses``) of the ``previous_response_id`` of a
Responses request that continues a stored response, kept on the results it
starts with (their calls are in that response) or else on its first message."""


def ordered(problems: Iterable[Problem]) -> tuple[Problem, ...]:
    """
    *problems* by position, those about the whole conversation last (a stable sort).
    """
    return tuple(sorted(problems, key=lambda p: (p.index is None, p.index or 0)))


def refuse(problems: Sequence[Problem], provider: str | None) -> ProviderError:
    """
    The error ``write`` raises: every problem by position, and how ``repair=True``
    helps when it does (it fixes tool exchanges, not turns or blocks).
    """
    error = ProviderError.from_problems(ordered(problems), provider=provider)
    if not all(p.rule in REPAIRED for p in problems):
        return error  # repair would not make it sendable: the error does not advise it
    hint = (
        "pass repair=True to drop orphan results, close unanswered calls with an error result, "
        "move calls into assistant messages and replace lone surrogates with U+FFFD"
    )
    return ProviderError(f"{error}\n{hint}", problems=error.problems, provider=provider)


def check_messages(
    messages: Sequence[Message],
    *,
    provider: Provider | None = None,
    allow_pending: bool = False,
    drops: Drops | None = None,
) -> tuple[Problem, ...]:
    """
    The tool-exchange rules of :func:`workingctx.validity.check_messages` (the
    one rule set), which every wire format enforces whatever its turn rules,
    and the data every format must be able to send (:func:`data_problems`).
    With *drops* (the blocks a format leaves out), a message it writes nothing
    of (:func:`sends_nothing`) is not sent, so the rules walk past it.
    """
    if drops is not None and any(sends_nothing(message, drops) for message in messages):
        walk = RuleState()
        for message in messages:
            if sends_nothing(message, drops):
                walk.skip()
            else:
                walk.feed(message)
        walked = walk.finish(allow_pending=allow_pending)
        found = tuple(p for p in walked if provider is None or provider in RULES[p.rule][1])
    else:
        found = validity_check(messages, provider=provider, allow_pending=allow_pending)
    # A reused id is a problem of a request to a provider that needs unique ids, whose
    # writer re-keys it; a list of framework messages (provider None) keeps ids as they are.
    rules = _TOOL_RULES if provider is not None else _TOOL_RULES - {"reused-call-id"}
    data = (p for p in data_problems(messages) if provider is None or provider in RULES[p.rule][1])
    return ordered((*(_continued(p, messages) for p in found if p.rule in rules), *data))


def sends_nothing(message: Message, drops: Drops) -> bool:
    """
    Whether a format that leaves out the blocks *drops* says writes nothing of
    *message*: a user or assistant message, with no call and no result, whose
    every block is one it leaves out (another provider's reasoning or items).
    Such a message is not sent: an empty turn would say nothing, and between a
    call and its result it would break the exchange.
    """
    content = message.content
    if isinstance(content, str) or not content or message.tool_calls or message.tool_call_id is not None:
        return False
    return (
        message.role in ("user", "assistant")
        and all(isinstance(block, ReasoningBlock | ProviderBlock) for block in content)
        and all(drops(block, message.role) for block in content)
    )


def continued(message: Message) -> str | None:
    """
    The id of the stored response a Responses request continues
    (``previous_response_id``), kept on its leading results (whose calls are
    in that response) or else on its first message; None for other messages.
    """
    found = message.provider_data.get("openai_responses", {}).get(CONTINUES)
    return found if isinstance(found, str) else None


def _continued(problem: Problem, messages: Sequence[Message]) -> Problem:
    """
    An orphan result that answers a call of a stored Responses response, named as such.
    """
    if problem.rule != "orphan-result" or problem.index is None:
        return problem
    previous = continued(messages[problem.index])
    if previous is None:
        return problem
    return Problem(
        problem.index,
        "continued-result",
        f"this result answers the call {', '.join(map(repr, problem.ids))} of the stored response {previous!r} "
        "(the request continues it with previous_response_id), and only the OpenAI Responses API holds that call; "
        "send it with openai_responses, or add the assistant message that made the call before it",
        problem.ids,
    )


_SENT = ("content", "name", "tool_call_id", "tool_calls", "provider_data")
"""The fields of a message a provider receives (its id, metadata, usage and delta stay local)."""

_SURROGATE = re.compile("[\ud800-\udfff]")
"""A lone surrogate: half of a character cut in two (inside an emoji), which UTF-8 cannot encode."""


def _strings(value: Any, path: str) -> Iterable[tuple[str, str]]:
    """
    (path, text) for every str in *value* (keys of JSON objects included), walking
    JSON data, tuples of blocks and the fields of attrs values.
    """
    if value.__class__ is str:
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{path}[{key!r}]"
            if isinstance(key, str):
                yield f"{where} (the key)", key
            yield from _strings(item, where)
    elif isinstance(value, list | tuple):
        for position, item in enumerate(value):
            yield from _strings(item, f"{path}[{position}]")
    elif attrs.has(value.__class__):
        for field in attrs.fields(value.__class__):
            if field.init:
                yield from _strings(getattr(value, field.name), f"{path}.{field.name}")


def _fields(value: Any) -> dict[str, Any]:
    if not attrs.has(value.__class__):
        msg = f"not JSON data: {value!r}"
        raise TypeError(msg)
    # long ASCII text (inline media, a tool's log) holds no surrogate: passed over, not copied into the text
    return {
        field.name: found
        for field in attrs.fields(value.__class__)
        if field.init
        and not ((found := getattr(value, field.name)).__class__ is str and len(found) > _LONG and found.isascii())
    }


_LONG = 256
"""Text longer than this is passed over when it is ASCII, rather than copied into the JSON text."""


_TEXT_OF = json.JSONEncoder(ensure_ascii=False, check_circular=False, default=_fields).encode
"""The JSON text of a field's value, blocks as their fields: one C-encoder pass finds any surrogate in it."""


def _may_hold_surrogate(value: Any) -> bool:
    """
    Whether *value* may hold a lone surrogate (False is sure; True is then walked to name the place).
    """
    try:
        text = value if value.__class__ is str else _TEXT_OF(value)
    except (TypeError, ValueError, RecursionError):
        return True
    return not text.isascii() and _SURROGATE.search(text) is not None


def data_problems(messages: Sequence[Message]) -> tuple[Problem, ...]:
    """
    What no wire format can carry as it is: a tool call whose arguments text is
    not a JSON object (``unparsable-arguments``: sending it as ``{}`` would run
    the tool with arguments the model never gave), and text holding a lone
    surrogate (``unencodable-text``: the provider SDK fails to encode the
    request), each named by message, field and character offset.
    """
    problems: list[Problem] = []
    for index, message in enumerate(messages):
        for position, call in enumerate(message.tool_calls):
            if not call.arguments_parsed:
                problems.append(
                    Problem(
                        index,
                        "unparsable-arguments",
                        f"tool_calls[{position}] ({call.name!r}, id {call.id!r}) has arguments text that is not a "
                        f"JSON object, {(call.arguments_json or '')[:60]!r} (a reply cut off by max_tokens?), "
                        "and this format sends arguments as an object, never as {}: give the call the arguments "
                        "the tool should see (ToolCall(id, name, arguments={...})), or leave the message out "
                        "and ask the model again",
                        (call.id,),
                    )
                )
        for field in _SENT:
            value = getattr(message, field)
            if not value or (value.__class__ is str and value.isascii()) or not _may_hold_surrogate(value):
                continue  # the common case: nothing, or no surrogate anywhere in it
            for where, text in _strings(value, field):
                found = None if text.isascii() else _SURROGATE.search(text)
                if found is not None:
                    problems.append(
                        Problem(
                            index,
                            "unencodable-text",
                            f"{where} holds the lone surrogate {found.group()!r} at character {found.start()} "
                            "(text cut inside an emoji?), which UTF-8 cannot encode, so the provider SDK fails "
                            "to send it; replace it (repair=True puts U+FFFD in its place)",
                        )
                    )
    return tuple(problems)


def _scrubbed(value: Any) -> Any:
    """
    *value* with every lone surrogate replaced by U+FFFD (the same object when it holds none).
    """
    if value.__class__ is str:
        return value if value.isascii() else _SURROGATE.sub("\ufffd", value)
    if isinstance(value, Mapping):
        pairs = [(_scrubbed(k), _scrubbed(v)) for k, v in value.items()]
        same = all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True))
        return value if same else dict(pairs)
    if isinstance(value, list | tuple):
        items = [_scrubbed(item) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else type(value)(items)
    if attrs.has(value.__class__):
        changes = {}
        for field in attrs.fields(value.__class__):
            if field.init:
                old = getattr(value, field.name)
                new = _scrubbed(old)
                if new is not old:
                    changes[field.alias] = new
        if not changes:
            return value
        try:
            return attrs.evolve(value, **changes)
        except InvalidMessageError:
            if not isinstance(value, ToolCall):
                raise
            # a call whose exact text spelled the surrogate as an escape: the repaired arguments are sent
            return attrs.evolve(value, **{**changes, "arguments_json": None})
    return value


def scrub_text(messages: Sequence[Message]) -> list[Message]:
    """
    *messages* with every lone surrogate in what a provider receives replaced by U+FFFD.
    """
    out = []
    for message in messages:
        changes = {}
        for field in _SENT:
            old = getattr(message, field)
            new = _scrubbed(old)
            if new is not old:
                changes[field] = new
        out.append(attrs.evolve(message, **changes) if changes else message)
    return out


UNANSWERED = "error: this tool call was not answered"


def repair_messages(messages: Sequence[Message]) -> list[Message]:
    """
    *messages* with orphan results dropped, every unanswered call closed by
    an error result placed right after the call's other results, every tool
    call a message of another role holds moved into an assistant message right
    after it, and every lone surrogate in what is sent replaced by U+FFFD. A
    result that answers a call elsewhere (misplaced, repeated, or of a stored
    Responses response) is a real result and is kept: repair never discards one.
    """
    messages = _calls_to_assistant(scrub_text(messages))
    called: set[str] = set()
    kept: list[Message] = []
    for message in messages:
        ids = message.result_ids
        if ids and not all(call_id in called for call_id in ids):
            if continued(message) is not None:  # its call is in a stored response: a real result, kept
                pass
            elif isinstance(message.content, str) or message.role == "tool":
                if message.tool_call_id is None or message.tool_call_id not in called:
                    continue
            else:
                blocks = tuple(b for b in message.content if (answer := answered_id(b)) is None or answer in called)
                if not blocks:
                    continue
                message = attrs.evolve(message, content=blocks)  # noqa: PLW2901
        called.update(message.call_ids)
        kept.append(message)
    answers = _answered_asks(kept)
    out: list[Message] = []
    missing: list[str] = []
    for message, answered in zip(kept, answers, strict=True):
        if missing and not message.result_ids:
            out.extend(Message("tool", UNANSWERED, tool_call_id=call_id) for call_id in missing)
            missing = []
        if not isinstance(message.content, str) and any(_unanswered(b, answered) for b in message.content):
            # a provider's own call (a computer or custom tool call) has no error result
            # this library could write in its kind: an unanswered one is left out instead,
            # with the reasoning that led to it (OpenAI refuses reasoning with nothing after it)
            blocks = tuple(b for b in message.content if not _unanswered(b, answered))
            if all(isinstance(b, ReasoningBlock) for b in blocks) and not message.tool_calls:
                continue
            message = attrs.evolve(message, content=blocks)  # noqa: PLW2901
        out.append(message)
        missing.extend(call_id for call_id in message.call_ids if call_id not in answered)
    out.extend(Message("tool", UNANSWERED, tool_call_id=call_id) for call_id in missing)
    return out


def _calls_to_assistant(messages: Sequence[Message]) -> list[Message]:
    """
    *messages* with the call blocks of every message whose role is not
    ``assistant`` moved, in order, into an assistant message right after it;
    a message left with nothing else is left out.
    """
    out: list[Message] = []
    for message in messages:
        content = message.content
        if message.role == "assistant" or isinstance(content, str) or all(asked_id(b) is None for b in content):
            out.append(message)
            continue
        rest = tuple(b for b in content if asked_id(b) is None)
        if rest or message.tool_call_id is not None:
            out.append(attrs.evolve(message, content=rest))
        out.append(Message("assistant", [b for b in content if asked_id(b) is not None]))
    return out


def without_provider_calls(messages: Sequence[Message], drops: Drops | None = None) -> list[Message]:
    """
    *messages* as a format that leaves a provider's own calls and answers out
    (a Responses computer call written for Chat, a custom tool call for
    Anthropic or LangChain) checks them: each such block (with *drops*, each
    one it says the format leaves out) stands as a block that neither asks nor
    answers, in its place.
    """
    out = []
    for message in messages:
        content = message.content
        if isinstance(content, str) or not any(_provider_call(b, message.role, drops) for b in content):
            out.append(message)
            continue
        kept = tuple(
            (ProviderBlock(b.provider, {LEFT_OUT_CALL: True}) if b.asks is not None else ProviderBlock(b.provider, {}))
            if _provider_call(b, message.role, drops)
            else b
            for b in content
        )
        out.append(attrs.evolve(message, content=kept))
    return out


def _provider_call(block: ContentBlock, role: str, drops: Drops | None) -> TypeGuard[ProviderBlock]:
    return (
        isinstance(block, ProviderBlock)
        and (block.asks is not None or block.answers is not None)
        and (drops is None or drops(block, role))
    )


def answers_left_out(messages: Sequence[Message], drops: Drops) -> list[Message]:
    """
    *messages* with every answer to a provider's own call the format leaves
    out (a Chat Completions custom tool call, written for Anthropic, Gemini or
    LangChain) left out with its call, until a call the format sends asks
    that id again: a tool message answering it stands as a user message
    holding the results it carries for other calls, or only an empty block of
    that provider, which the format leaves out too, so that it is neither sent
    nor checked; a tool-result block answering it is taken from its message.
    """
    left: dict[str, str] = {}  # the id of a call the format leaves out -> its provider
    out = []
    for message in messages:
        content = message.content
        if not left and content.__class__ is str:  # the common case: no such call before
            out.append(message)
            continue
        if left and not message.tool_calls:
            message = _without_answers(message, left)  # noqa: PLW2901
            content = message.content
        for block in () if isinstance(content, str) else content:
            asked = asked_id(block)
            if isinstance(block, ProviderBlock) and asked is not None and drops(block, message.role):
                left[asked] = block.provider
            elif asked is not None:
                left.pop(asked, None)
        for call in message.tool_calls:
            left.pop(call.id, None)
        out.append(message)
    return out


def _without_answers(message: Message, left: Mapping[str, str]) -> Message:
    """
    *message* without what it answers of the calls *left* out (see :func:`answers_left_out`).
    """
    content = message.content
    blocks = () if isinstance(content, str) else content
    answered = message.tool_call_id
    if message.role == "tool" and answered is not None and answered in left:
        others = tuple(b for b in blocks if isinstance(b, ToolResultBlock) and b.call_id not in left)
        return Message("user", others or (ProviderBlock(left[answered], {}),))
    if not any(isinstance(b, ToolResultBlock) and b.call_id in left for b in blocks):
        return message
    kept = tuple(b for b in blocks if not (isinstance(b, ToolResultBlock) and b.call_id in left))
    provider = next(left[b.call_id] for b in blocks if isinstance(b, ToolResultBlock) and b.call_id in left)
    return attrs.evolve(message, content=kept or (ProviderBlock(provider, {}),))


def _answered_asks(messages: Sequence[Message]) -> list[set[str]]:
    """
    For each message, the ids of its calls that a later message answers
    before the id is asked again: an id a transcript uses twice (``call_0``
    answered, then asked anew) is answered or not on each use.
    """
    later: set[str] = set()  # ids answered after this point and not asked again before their answer
    out: list[set[str]] = []
    for message in reversed(messages):
        asked = set(message.call_ids)
        out.append(asked & later)
        later -= asked
        later.update(message.result_ids)
    out.reverse()
    return out


def _unanswered(block: ContentBlock, answered: set[str]) -> bool:
    """
    Whether *block* is a provider's own call that no message answers.
    """
    if not isinstance(block, ProviderBlock):
        return False
    asked = block.asks
    return asked is not None and asked not in answered


def _renamed_message(message: Message, calls: Mapping[str, str], results: Mapping[str, str]) -> Message:
    """
    *message* with the ids of its calls renamed by *calls* and of its results by *results*.
    """
    changes: dict[str, Any] = {}
    if message.tool_calls and any(c.id in calls for c in message.tool_calls):
        changes["tool_calls"] = tuple(
            attrs.evolve(c, id=calls[c.id]) if c.id in calls else c for c in message.tool_calls
        )
    if message.tool_call_id is not None and message.tool_call_id in results:
        changes["tool_call_id"] = results[message.tool_call_id]
    if not isinstance(message.content, str):
        blocks = tuple(
            attrs.evolve(b, id=calls[b.id])
            if isinstance(b, ToolCallBlock | RemoteToolCallBlock) and b.id in calls
            else attrs.evolve(b, call_id=results[b.call_id])
            if isinstance(b, ToolResultBlock) and b.call_id in results
            else _renamed_block(b, calls, results)
            if isinstance(b, ProviderBlock)
            else b
            for b in message.content
        )
        if blocks != message.content:
            changes["content"] = blocks
    return attrs.evolve(message, **changes) if changes else message


def _renamed_block(block: ProviderBlock, calls: Mapping[str, str], results: Mapping[str, str]) -> ProviderBlock:
    """
    A provider's own call or answer (see ``ProviderBlock.asks``) with its id renamed by *calls* or *results*.
    """
    asked, answered = block.asks, block.answers
    if asked is not None and asked in calls:
        return block.renamed(calls[asked])
    if answered is not None and answered in results:
        return block.renamed(results[answered])
    return block


def unique_call_ids(messages: Sequence[Message]) -> tuple[list[Message], dict[str, str]]:
    """
    *messages* with every call that reuses the id of an earlier, answered call
    (a new exchange: OpenAI-compatible servers' ``call_0`` in every response)
    given a new id by :func:`workingctx.callids.fresh_call_id`, and its results
    with it; and the map of each new id to the context's own. The formats that
    need an id once per request (Anthropic, Gemini, OpenAI Responses) write
    these. Deterministic: the same messages give the same ids.

    An id asked again before its call was answered is left as it is: no result
    could say which call it answers (``duplicate-call-id``).
    """
    asked: set[str] = set()
    answered: set[str] = set()
    reused = False
    for message in messages:
        for call_id in message.result_ids:
            answered.add(call_id)
        for call_id in message.call_ids:
            reused = reused or (call_id in asked and call_id in answered)
            asked.add(call_id)
    if not reused:
        return list(messages), {}
    taken = {i for m in messages for i in (*m.call_ids, *m.result_ids)}
    current: dict[str, str] = {}  # the context's id -> the name its latest call is written with
    renamed: dict[str, str] = {}
    asked.clear()
    answered.clear()
    out: list[Message] = []
    for message in messages:
        calls: dict[str, str] = {}
        for call_id in message.call_ids:
            if call_id in asked and call_id in answered:
                new = fresh_call_id(call_id, taken)
                taken.add(new)
                calls[call_id] = current[call_id] = new
                renamed[new] = call_id
                answered.discard(call_id)
            else:
                current.pop(call_id, None)
            asked.add(call_id)
        results = {i: current[i] for i in message.result_ids if i in current}
        answered.update(message.result_ids)
        out.append(_renamed_message(message, calls, results) if calls or results else message)
    return out, renamed


def original_ids(message: Message, renamed: Mapping[str, str]) -> Message:
    """
    *message* (a provider's reply) with each id a writer gave a reused call
    (see :func:`unique_call_ids`) named by the context's own id again.
    """
    if not renamed:
        return message
    return _renamed_message(message, renamed, renamed)


def _refs(blocks: Iterable[Any]) -> Iterable[Any]:
    for block in blocks:
        for name in ("media", "thumbnail"):
            ref = getattr(block, name, None)
            if ref is not None:
                yield ref
        yield from _refs(getattr(block, "content", ()) if isinstance(block, ToolResultBlock) else ())


def media_problems(messages: Sequence[Message]) -> tuple[Problem, ...]:
    """
    Media a provider cannot fetch: references into a media store, not yet resolved.
    """
    problems: list[Problem] = []
    for index, message in enumerate(messages):
        if isinstance(message.content, str):
            continue
        problems.extend(
            Problem(
                index,
                "unresolved-media",
                f"{ref.url} is a reference into a media store; pass store=... (and upload=...) to write, "
                "or call workingctx.media.resolve_media first, so the bytes are sent",
            )
            for ref in _refs(message.content)
            if ref.kind == "store"
        )
    return tuple(problems)


def unsendable(index: int, where: str, what: str, fix: str) -> Problem:
    """
    The problem of a block a wire format has no place for: named, never dropped in silence.
    """
    return Problem(index, "unsendable", f"{where} holds {what}; {fix}")


LossRule = Callable[[Any, Message, bool], "tuple[str, str] | None"]
"""
What a wire format says of a block ``(block, its message, inside a tool result)``:
``(why, fix)`` when it has no place for it, else None.
"""


def lost_blocks(messages: Sequence[Message], rule: LossRule) -> tuple[Problem, ...]:
    """
    Every block of *messages* (those inside tool results too) that *rule*
    says a wire format has no place for, each an ``unsendable`` problem:
    writing never drops one in silence. A block whose bytes are a media-store
    reference is left to its unresolved-media problem.
    """
    problems: list[Problem] = []
    for index, message in enumerate(messages):
        for block, in_result in blocks_of(message):
            media = getattr(block, "media", None)
            if media is not None and media.kind == "store":
                continue
            found = rule(block, message, in_result)
            if found is not None:
                why, fix = found
                problems.append(unsendable(index, f"message {index}", f"{describe(block)}: {why}", fix))
    return tuple(problems)


def describe(block: Any) -> str:
    """
    A short name of a block for a problem message: its type and where its bytes are.
    """
    media = getattr(block, "media", None)
    if media is None:
        return f"a {type(block).__name__}"
    source = {"url": media.url, "file_id": media.file_id, "data": "inline data", "store": media.url}[media.kind]
    mime = f" ({media.mime_type})" if media.mime_type else ""
    return f"a {type(block).__name__}{mime} from {source}"


def blocks_of(message: Message) -> Iterable[tuple[Any, bool]]:
    """
    Every block of *message*, blocks inside tool results included: (block, inside a result).
    """
    if isinstance(message.content, str):
        return
    for block in message.content:
        yield block, False
        if isinstance(block, ToolResultBlock):
            for inner in block.content:
                yield inner, True


def store_ref_error(ref: Any) -> ProviderError:
    """
    The error a writer raises on a media-store reference that reached it unresolved.
    """
    problem = Problem(
        None,
        "unresolved-media",
        f"{ref.url} is a reference into a media store and its bytes were not resolved; pass store=... to write, "
        "or call workingctx.media.resolve_media first",
    )
    return ProviderError.from_problems([problem])


STAND_IN = "workingctx-media-sha256:"
"""What a request key puts in place of a media-store reference's bytes, followed by their sha256."""


class _StandIns:
    """
    A media store that reads nothing: request keys stand a reference's sha256 in for its bytes.
    """

    def put(self, data: bytes, mime_type: str, *, filename: str | None = None) -> Any:  # noqa: ARG002  # the protocol
        msg = "request keys never store media"
        raise TypeError(msg)

    def get(self, ref: Any) -> bytes:  # noqa: ARG002  # the protocol
        return b""

    def has(self, ref: Any) -> bool:  # noqa: ARG002  # the protocol
        return True

    def delete(self, ref: Any) -> None:  # noqa: ARG002  # the protocol
        return None


def _stand_in(ref: Any, data: bytes) -> Any:  # noqa: ARG001  # an upload hook's signature
    digest = ref.sha256 or hashlib.sha256(str(ref.url).encode("utf-8", "surrogatepass")).hexdigest()
    return MediaRef(kind="data", data_base64=STAND_IN + digest, mime_type=ref.mime_type, filename=ref.filename)


def keyed_messages(source: Any) -> list[Message]:
    """
    The messages of *source* for a request key: each media-store reference stands
    as its sha256 (content-addressed, so the key is stable and follows the bytes)
    without reading the store.
    """
    messages = messages_of(source)
    if not media_problems(messages):
        return messages
    return resolve_media(messages, _StandIns(), upload=_stand_in)


def prepare(messages: list[Message], *, store: Any = None, upload: Any = None, repair: bool = False) -> list[Message]:
    """
    *messages* with store references resolved through *store* and, if asked, repaired.
    """
    if store is not None:
        messages = resolve_media(messages, store, upload=upload)
    return repair_messages(messages) if repair else messages


def checked(
    messages: list[Message],
    *,
    provider: Provider | None,
    repair: bool,
    store: Any = None,
    upload: Any = None,
    drops: Drops | None = None,
) -> list[Message]:
    """
    *messages* if the provider would accept them (store references resolved,
    repaired if asked), sent by a format that leaves out the blocks *drops*
    says; else ProviderError listing every problem.
    """
    messages = prepare(messages, store=store, upload=upload, repair=repair)
    if drops is not None:
        messages = answers_left_out(messages, drops)
    checked_messages = without_provider_calls(messages, drops)
    problems = (*check_messages(checked_messages, provider=provider, drops=drops), *media_problems(messages))
    if problems:
        raise refuse(problems, provider)
    return messages


def plain(value: Any) -> Any:
    """
    Plain JSON-like data of *value*: SDK objects through ``model_dump``, lists item by item.
    """
    if type(value) is dict or type(value) is list:  # the common case, without abc checks
        return value if type(value) is dict else [plain(item) for item in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    if isinstance(value, Mapping):
        return value
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


def messages_of(source: Any) -> list[Message]:
    """
    The messages a context sends (prefix rendered, then the tail).
    """
    assembled = getattr(source, "assembled", None)
    if callable(assembled):
        return list(assembled())
    if isinstance(source, Iterable) and not isinstance(source, str | bytes | Mapping):
        items = list(source)
        for position, item in enumerate(items):
            if not isinstance(item, Message):
                msg = (
                    f"expected a WorkingContext, a FrozenContext or Message values, got {item!r} of type "
                    f"{type(item).__name__} at position {position}; read a wire payload with read() first"
                )
                raise ArgumentTypeError(msg, argument=f"messages[{position}]", value=item, expected="a Message")
        return items
    msg = (
        f"expected a WorkingContext, a FrozenContext or a list of Message values, got {source!r} of type "
        f"{type(source).__name__}"
    )
    raise ArgumentTypeError(msg, argument="source", value=source, expected="a context or a list of messages")


def cache_hinted(source: Any) -> int:
    """
    How many of the assembled messages of *source* are its prefix, when the
    prefix asks to be cached (``PrefixContext(cache_hint=True)``); 0 otherwise
    (no hint, a prefix that renders nothing, or a plain list of messages).
    """
    prefix = getattr(source, "prefix", None)
    if getattr(prefix, "cache_hint", False) is not True:
        return 0
    return len(prefix.as_messages())  # type: ignore[union-attr]  # a PrefixContext: it has a hint


def is_workingctx(source: Any) -> bool:
    """
    True for a context, a snapshot or a sequence of Message values (not a wire payload).
    """
    if callable(getattr(source, "assembled", None)):
        return True
    return isinstance(source, list | tuple) and bool(source) and all(isinstance(m, Message) for m in source)


def context_from(system: Sequence[Message], tail: Sequence[Message]) -> Any:
    """
    A WorkingContext whose prefix grounds the leading system messages.
    """
    return WorkingContext(prefix=PrefixContext(grounding=tuple(system)), messages=tail)


def split_system(messages: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    """
    The leading system messages and the rest.
    """
    cut = 0
    while cut < len(messages) and messages[cut].role == "system":
        cut += 1
    return list(messages[:cut]), list(messages[cut:])


def request_key_of(body: Any, fields: Mapping[str, Any]) -> str:
    """
    sha256 of the canonical JSON of a request body plus extra request fields.
    """
    data = {"body": body, "fields": {key: plain(value) for key, value in fields.items()}}
    return hashlib.sha256(canonical_json(data).encode("utf-8", "surrogatepass")).hexdigest()


def expect_list(value: Any, what: str) -> list[Any]:
    """
    *value* as a list, or a TypeError naming *what* (and holding *value* itself,
    so that the reader's error locates it in the payload).
    """
    if isinstance(value, list):
        return value
    found = plain(value)
    if not isinstance(found, list):
        msg = f"{what} must be a list, got {found!r} of type {type(found).__name__}"
        raise ArgumentTypeError(msg, argument=what, value=value, expected="a list")
    return found


def expect_mapping(value: Any, what: str) -> Mapping[str, Any]:
    """
    *value* as a mapping, or a TypeError naming *what* (and holding *value* itself,
    so that the reader's error locates it in the payload).
    """
    if type(value) is dict:
        return value
    found = plain(value)
    if not isinstance(found, Mapping):
        msg = f"{what} must be a JSON object, got {found!r} of type {type(found).__name__}"
        raise ArgumentTypeError(msg, argument=what, value=value, expected="a JSON object")
    return found


_DATA_URL = re.compile(r"data:([^;,]*);base64,(.*)", re.DOTALL)


def parse_data_url(url: str) -> tuple[str, str] | None:
    """
    (mime type, base64 data) of a ``data:`` URL, or None.
    """
    match = _DATA_URL.fullmatch(url)
    return None if match is None else (match.group(1), match.group(2))


IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""The image types OpenAI and Anthropic take (no other)."""


def base64_head(data: str, length: int = 24) -> bytes:
    """
    The bytes of the first *length* characters of the base64 text *data*
    (by default enough for an image's signature, 18 bytes); none when they are not base64.
    """
    head = data[:length]
    try:
        return base64.b64decode(head + "=" * (-len(head) % 4))
    except ValueError:
        return b""


def inline(media: MediaRef, default_mime: str) -> tuple[str, str]:
    """
    The MIME type and base64 text of inline media (a data URL's own type first).
    """
    data = media.data_base64 or ""
    mime = media.mime_type or default_mime
    if data.startswith("data:") and ";base64," in data:
        mime, data = data[5:].split(";base64,", 1)
    return mime, data


def odd_image_type(block: object) -> str | None:
    """
    The type of an inline image of a type OpenAI and Anthropic do not take
    (a BMP, a HEIC photo, an SVG): the type it is labelled with, when its
    bytes are none of :data:`IMAGE_TYPES` either; None for any other block.
    """
    if not isinstance(block, ImageBlock) or block.media.kind != "data":
        return None
    mime, data = inline(block.media, "image/png")
    if mime in IMAGE_TYPES or image_type(base64_head(data)) is not None:
        return None
    return mime


NAME_PATTERN = re.compile(r"[a-zA-Z0-9_-]{1,64}")
"""What OpenAI takes as a speaker's name and a called function's name, and
Anthropic as a ``tool_use`` block's name: both refuse any other."""


def suggested_name(name: str) -> str:
    """
    A name :data:`NAME_PATTERN` takes, close to *name* (for the fix a ``name-format`` problem names).
    """
    return re.sub(r"[^a-zA-Z0-9_-]+", "_", name).strip("_")[:64] or "name"


TEXT_LIMIT = 10_485_760
"""The longest string OpenAI takes in a request's text, in characters (10 MiB):
a longer content, text part, tool output or arguments string is refused
("string too long", ``string_above_max_length``)."""


def long_texts(entries: Sequence[Any], name: str, origins: Sequence[int]) -> list[Problem]:
    """
    A ``text-length`` problem for each text longer than :data:`TEXT_LIMIT`
    in the written OpenAI messages or items *entries* (``name[number]`` in
    the request; ``origins[number]`` is the message each was written from):
    a content or output (a string, or parts holding text), a refusal, a
    call's arguments or input. Most entries are told free of long text by
    their strings alone, and only the others are read field by field.
    """
    problems: list[Problem] = []
    for number, fields in enumerate(entries):
        if fields.__class__ is not dict or _holds_long(fields, 3):
            problems.extend(_long_fields(origins[number], f"{name}[{number}]", fields))
    return problems


def _long_fields(index: int, where: str, fields: Mapping[str, Any]) -> list[Problem]:
    """
    The ``text-length`` problems of one written message or item (see :func:`long_texts`).
    """
    found: list[tuple[str, str]] = []
    for key in ("content", "output", "refusal", "arguments", "input"):
        value = fields.get(key)
        if isinstance(value, str):
            found.append((key, value))
        elif isinstance(value, list):
            found.extend(
                (f"{key}[{number}].text", part["text"])
                for number, part in enumerate(value)
                if isinstance(part, Mapping) and isinstance(part.get("text"), str)
            )
    calls = fields.get("tool_calls")  # a Chat Completions message's calls, each with its arguments or input
    for number, call in enumerate(calls if isinstance(calls, list) else ()):
        for kind, key in (("function", "arguments"), ("custom", "input")):
            holder = call.get(kind) if isinstance(call, Mapping) else None
            if isinstance(holder, Mapping) and isinstance(holder.get(key), str):
                found.append((f"tool_calls[{number}].{kind}.{key}", holder[key]))
    return [too_long(index, f"{where}.{path}", text) for path, text in found if len(text) > TEXT_LIMIT]


_PLAIN = frozenset({int, float, bool, type(None)})


def _holds_long(fields: dict[str, Any], depth: int) -> bool:
    """
    Whether the dict *fields*, or a dict or list in it down to *depth* dicts
    deep (a message, its calls, a call's function), holds a string longer
    than :data:`TEXT_LIMIT`, or a value that is no plain JSON value (to be
    read field by field). False is sure.
    """
    for value in fields.values():
        kind = value.__class__
        if kind is str:
            if len(value) > TEXT_LIMIT:
                return True
        elif kind is dict:
            if depth <= 1 or _holds_long(value, depth - 1):
                return True
        elif kind is list:
            for item in value:
                if item.__class__ is dict:
                    if depth <= 1 or _holds_long(item, depth - 1):
                        return True
                elif item.__class__ is str:
                    if len(item) > TEXT_LIMIT:
                        return True
                elif item.__class__ not in _PLAIN:
                    return True
        elif kind not in _PLAIN:
            return True
    return False


def too_long(index: int | None, where: str, text: str) -> Problem:
    """
    The ``text-length`` problem of *text*, at *where* in an OpenAI request.
    """
    return Problem(
        index,
        "text-length",
        f"{where} holds {len(text):,} characters, and OpenAI takes at most {TEXT_LIMIT:,} in one string "
        "(string too long); cut it to what the model needs (a tool's output: its head and tail, or a summary)",
    )
