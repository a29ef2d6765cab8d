"""
pydantic-ai on workingctx: a history processor that trims with a manager or a scope.

:func:`trim_history` makes the function pydantic-ai's ``ProcessHistory``
capability runs before every model request:
``Agent(model, capabilities=[ProcessHistory(trim_history(manager))])``.

Each ``ModelMessage`` part becomes a workingctx message (a system prompt, a
user prompt, a tool return or tool retry answering its call, the feedback on
a response pydantic-ai refused answering that response; a model response
is one assistant message with its text, thinking and tool calls; the parts
pydantic-ai keeps for itself ride with a neighbour in their request), the manager
or scope decides which to keep, and what comes back is pydantic-ai's own
objects: a message kept whole is the very object given, a request kept in part
is a copy holding the parts kept. The output needs nothing from pydantic-ai's
own repair (``pydantic_ai.messages.repair_messages``): no tool return without
its call, no call without its return, no two requests in a row.

A history that arrives broken (a tool return whose call is nowhere, a call
never answered, a response with calls followed by another response rather
than by the request with their returns, responses before the first request)
is repaired before the trim, so the manager or scope cuts a valid history:
each broken exchange is dropped whole, requests it leaves next to each other
are one, and a request in flight it empties stays empty at the end, as
pydantic-ai keeps it. A warning is logged on this module's logger.

pydantic-ai is imported only when the processor runs (extra ``workingctx[pydantic-ai]``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from workingctx.callids import fresh_call_id
from workingctx.context import WorkingContext
from workingctx.exceptions import WorkingCtxError
from workingctx.integrations._window import CallNames, Window, broken, check_manager, repaired, report
from workingctx.managers import BaseContextManager
from workingctx.messages import (
    AudioBlock,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    MediaRef,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    VideoBlock,
)
from workingctx.scopes import Scope

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

__all__ = ["trim_history"]

logger = logging.getLogger(__name__)

KEY = "pydantic_ai"
"""The metadata key under which a workingctx message names its origin: ``[message, part]``."""


def _text(value: Any) -> str:
    """
    The text a part's content amounts to, for counting (media by their kind).
    """
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return "\n".join(_text(item) for item in value)
    kind = getattr(value, "kind", None)
    if isinstance(kind, str) and not isinstance(value, dict):
        content = getattr(value, "content", None)  # text or structured content: what it says
        return f"[{kind}]" if content is None or isinstance(content, bytes | bytearray) else _text(content)
    try:
        return json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _part_text(part: Any) -> str:
    for name in ("model_response_str", "model_response"):
        method = getattr(part, name, None)
        if callable(method):
            try:
                return str(method())
            except Exception:  # noqa: BLE001,S112  # a part that cannot render itself: count its content
                continue
    return _text(getattr(part, "content", ""))


@attrs.frozen
class _Ids:
    """
    The local call ids of one history: the stand-in for the empty call id a
    model may give, and the ids tying feedback to the response before it,
    none of them an id the history's own parts hold (a call named like a
    stand-in stays apart from the calls with no id).
    """

    empty: str
    feedback: dict[tuple[int, int], str]

    @classmethod
    def of(cls, messages: Sequence[Any]) -> _Ids:
        from pydantic_ai import messages as parts  # noqa: PLC0415

        kinds = tuple(getattr(parts, name) for name in ("RetryFeedbackPart", "RetryPromptPart") if hasattr(parts, name))
        taken = {i for m in messages for p in m.parts if isinstance(i := getattr(p, "tool_call_id", None), str)}

        def free(name: str) -> str:
            name = name if name not in taken else fresh_call_id(name, taken)
            taken.add(name)
            return name

        feedback = {
            (index, position): free(f"pydantic-ai-feedback-{index}-{position}")
            for index, message in enumerate(messages)
            for position, part in enumerate(message.parts)
            if isinstance(part, kinds) and getattr(part, "tool_name", None) is None
        }
        return cls(free(_EMPTY_ID), feedback)

    def call(self, call_id: str) -> str:
        """
        The local id of the call *call_id* (the stand-in for an empty one).
        """
        return call_id or self.empty


def _request_messages(index: int, request: Any, ids: _Ids) -> list[Message]:
    """
    The workingctx messages of a request's parts: system prompts, the user's
    prompts, and tool returns and retries answering their calls, the returns
    first (pydantic-ai sends them so: a prompt a tool enqueued between two
    returns does not break the exchange). The feedback pydantic-ai sends on a
    response it refused (a ``RetryFeedbackPart``, or a ``RetryPromptPart``
    naming no tool) answers that response: it is a result of the call
    :func:`to_workingctx` gives the response before it, so it is kept with
    the response and never taken for the user's turn (with no response
    before it, it answers nothing and is repaired away as any orphan). The
    parts pydantic-ai keeps for itself (instructions, tool availability, ...)
    are no turn: each rides with the part before it in its request (or the
    first one), is kept when that part is, and what it sends the model counts
    with that part.
    """
    from pydantic_ai import messages as parts  # noqa: PLC0415

    feedback = tuple(getattr(parts, name) for name in ("RetryFeedbackPart", "RetryPromptPart") if hasattr(parts, name))
    made: list[tuple[int, Message]] = []
    riders: dict[int, list[int]] = {}
    before: list[int] = []  # riders before the request's first part that is a message
    host: int | None = None
    for position, part in enumerate(request.parts):
        if isinstance(part, parts.SystemPromptPart):
            message = Message("system", part.content)
        elif isinstance(part, parts.ToolReturnPart) or (
            isinstance(part, parts.RetryPromptPart) and part.tool_name is not None  # a retry answers its call
        ):
            message = Message("tool", _result(part), tool_call_id=ids.call(part.tool_call_id))
        elif isinstance(part, parts.UserPromptPart):
            message = Message("user", _prompt(part.content))
        elif isinstance(part, feedback):
            message = Message("tool", _part_text(part), tool_call_id=ids.feedback[index, position])
        else:
            (before if host is None else riders[host]).append(position)
            continue
        made.append((position, message))
        riders[position], before, host = before, [], position
    made.sort(key=lambda placed: placed[1].role != "tool")  # stable: returns first, the rest in order

    def counted(message: Message, positions: list[int]) -> Message:  # what the riders send counts with their host
        said = [text for q in positions if (text := _rider_text(request.parts[q]))]
        if not said:
            return message
        if isinstance(message.content, str):
            return attrs.evolve(message, content="\n".join([message.content, *said]))
        return attrs.evolve(message, content=(*message.content, *map(TextBlock, said)))

    messages = [attrs.evolve(counted(m, riders[p]), metadata={KEY: [index, p, *riders[p]]}) for p, m in made]
    if not messages:  # an empty request, or one of parts that are no turn, still holds its place
        messages.append(counted(Message("user", "", metadata={KEY: [index, -1]}), before))
    return messages


_MEDIA_BLOCKS: dict[str, type[ImageBlock | AudioBlock | VideoBlock | DocumentBlock]] = {
    "image-url": ImageBlock,
    "audio-url": AudioBlock,
    "video-url": VideoBlock,
    "document-url": DocumentBlock,
}


def _prompt(content: Any) -> str | tuple[ContentBlock, ...]:
    """
    A user prompt's content: its text, and each image, audio, video or
    document as the media block workingctx counts it as (an image of unknown
    size as 1024 x 1024), never as the few tokens of its kind's name.
    """
    if isinstance(content, str):
        return content
    items = content if isinstance(content, Sequence) and not isinstance(content, bytes | bytearray) else [content]
    return tuple(_media(item) or TextBlock(_text(item)) for item in items)


def _result(part: Any) -> str | tuple[ContentBlock, ...]:
    """
    A tool return's content: its text, or, when the tool returned media (a
    screenshot), its items as :func:`_prompt` reads a prompt's.
    """
    content = getattr(part, "content", None)
    items = content if isinstance(content, list | tuple) else [content]
    if any(_media(item) is not None for item in items):
        return _prompt(list(items))
    return _part_text(part)


def _media(item: Any) -> ContentBlock | None:
    """
    The media block an item of a prompt counts as, or None for text and other content.
    """
    kind = getattr(item, "kind", None)
    url = getattr(item, "url", None)
    if isinstance(kind, str) and kind in _MEDIA_BLOCKS and isinstance(url, str) and url:
        return _MEDIA_BLOCKS[kind](MediaRef(kind="url", url=url))
    if kind == "binary":  # pydantic-ai names it to the model by its identifier
        found = [k for k in ("image", "audio", "video", "document") if getattr(item, f"is_{k}", False) is True]
        identifier = getattr(item, "identifier", None)
        if found and isinstance(identifier, str) and identifier:
            media = MediaRef(kind="file_id", file_id=identifier)
            return _MEDIA_BLOCKS[f"{found[0]}-url"](media)
    return None


def _rider_text(part: Any) -> str:
    """
    The text a part that is no turn sends the model (a summary the application
    stored, a change of instructions, a transcript), for counting: none for
    the bookkeeping pydantic-ai keeps for itself.
    """
    for name in ("content", "transcript"):
        value = getattr(part, name, None)
        if isinstance(value, str):
            return value
    return ""


def _response_message(index: int, response: Any, ids: _Ids) -> Message:
    from pydantic_ai.messages import TextPart, ThinkingPart, ToolCallPart  # noqa: PLC0415

    blocks: list[ContentBlock] = []
    for part in response.parts:
        if isinstance(part, ToolCallPart):
            blocks.append(_call_block(part, ids))
        elif isinstance(part, ThinkingPart):
            blocks.append(ReasoningBlock(part.content, signature=part.signature, provider=part.provider_name))
        elif isinstance(part, TextPart):
            blocks.append(TextBlock(part.content))
        else:  # native tool calls and returns, files, ...: counted by their text
            blocks.append(TextBlock(_part_text(part)))
    return Message("assistant", tuple(blocks), metadata={KEY: [index, -1]})


_EMPTY_ID = "pydantic-ai-empty-call-id"
"""The local name of the empty call id a model may give (``""``), unless a part holds it as its own id."""


def _call_block(part: Any, ids: _Ids) -> ToolCallBlock:
    """
    A tool call as workingctx holds one, whatever the model wrote, as pydantic-ai
    takes it: an empty id or tool name (a local stand-in), and arguments JSON
    cannot hold (``NaN``, nesting past workingctx's limit), counted as the text
    pydantic-ai sends.
    """
    call_id, name = ids.call(part.tool_call_id), part.tool_name or "unnamed-tool"
    args = part.args_as_dict()
    try:
        return ToolCallBlock(call_id, name, args if isinstance(args, dict) else {})
    except WorkingCtxError:
        return ToolCallBlock(call_id, name, {"args": part.args_as_json_str()})


def to_workingctx(messages: Sequence[ModelMessage]) -> list[Message]:
    """
    The workingctx messages of a pydantic-ai history, each naming its origin in ``metadata``.
    """
    from pydantic_ai.messages import ModelResponse  # noqa: PLC0415

    ids = _Ids.of(messages)
    out: list[Message] = []
    for index, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            out.append(_response_message(index, message, ids))
            continue
        made = _request_messages(index, message, ids)
        asked = [
            call_id
            for m in made
            if (call_id := m.tool_call_id) is not None and call_id == ids.feedback.get(tuple(m.metadata[KEY][:2]))
        ]
        if asked and index > 0 and isinstance(messages[index - 1], ModelResponse):
            # the response before asks for the feedback that answers it, as a call for its result
            response = out[-1]
            calls = tuple(ToolCallBlock(call_id, "feedback", {}) for call_id in asked)
            out[-1] = attrs.evolve(response, content=(*response.content, *calls))
        out.extend(made)
    return out


def from_workingctx(kept: Sequence[Message], messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """
    The pydantic-ai history for the workingctx messages *kept* out of *messages*.

    A message whose every part is kept is the very object; a request kept in
    part is a copy with those parts. System prompts workingctx made (a
    summary) and those whose request was cut go into the next request, so two
    requests never follow each other.
    """
    from pydantic_ai.messages import ModelRequest, ModelResponse, SystemPromptPart  # noqa: PLC0415

    parts: dict[int, list[int]] = {}
    made: dict[tuple[int, int], list[Any]] = {}  # system prompts workingctx made, by the part they precede
    pending: list[Any] = []
    for message in kept:
        origin = message.metadata.get(KEY)
        if origin is None:
            pending.append(SystemPromptPart(message.text()))
            continue
        index, position, *riding = origin
        if pending:
            made.setdefault((index, position), []).extend(pending)
            pending = []
        parts.setdefault(index, []).extend([position, *riding])
    out: list[tuple[int | None, Any]] = []  # (where it was in *messages*, the message)
    for index, positions in parts.items():
        original = messages[index]
        if isinstance(original, ModelResponse) or positions == [-1]:
            extra = made.get((index, -1), [])
            if isinstance(original, ModelResponse):
                if extra:
                    out.append((None, ModelRequest(parts=extra)))
                out.append((index, original))
            else:
                out.append(
                    (index, dataclasses.replace(original, parts=[*extra, *original.parts]) if extra else original)
                )
            continue
        chosen = sorted(p for p in positions if p >= 0)  # the parts in their order in the request
        if len(chosen) == len(original.parts) and not any((index, p) in made for p in chosen):
            out.append((index, original))
            continue
        out.append(
            (
                index,
                dataclasses.replace(
                    original, parts=[x for p in chosen for x in (*made.get((index, p), ()), original.parts[p])]
                ),
            )
        )
    if pending:
        out.append((None, ModelRequest(parts=pending)))
    return _alternating(out)


def _suspended(message: Any) -> bool:
    """
    Whether *message* is a response whose turn the provider paused (Anthropic's
    ``pause_turn``, OpenAI's background mode): a history ending in one is
    resumed, and pydantic-ai requires the processed history to end in it.
    """
    from pydantic_ai.messages import ModelResponse  # noqa: PLC0415  # the [pydantic-ai] extra

    return isinstance(message, ModelResponse) and getattr(message, "state", None) == "suspended"


def _synthetic(message: Any) -> bool:
    return message.provider_response_id is None and message.provider_name is None and message.model_name is None


def _alternating(messages: list[tuple[int | None, Any]]) -> list[Any]:
    """
    The messages with no two requests in a row that the trim put together
    (the first's parts go to the front of the second) and no two synthetic
    responses in a row (joined, as pydantic-ai joins them).

    Two requests that were already next to each other in the history handed
    over (a run's new prompt after a history that ends in tool returns) stay
    as they are: pydantic-ai joins them on the copy it sends, and keeping them
    apart keeps its record of which messages each run added.
    """
    from pydantic_ai.messages import ModelRequest, ModelResponse  # noqa: PLC0415

    out: list[tuple[int | None, Any]] = []
    for index, message in messages:
        last_index, last = out[-1] if out else (None, None)
        if isinstance(last, ModelRequest) and isinstance(message, ModelRequest):
            if last_index is not None and index == last_index + 1:
                out.append((index, message))
            else:
                out[-1] = (index, dataclasses.replace(message, parts=[*last.parts, *message.parts]))
        elif (
            isinstance(last, ModelResponse)
            and isinstance(message, ModelResponse)
            and _synthetic(last)
            and _synthetic(message)
        ):
            out[-1] = (index, dataclasses.replace(last, parts=[*last.parts, *message.parts]))
        else:
            out.append((index, message))
    return [message for _, message in out]


def _sendable(messages: Sequence[ModelMessage], converted: Sequence[Message]) -> list[int]:
    """
    Which of *converted* (the workingctx messages of *messages*, the history
    handed over) are left once the history is repaired (each repair logged):

    - responses before the first request are left out, with the returns
      answering their calls, since pydantic-ai sends a history that opens
      with a request;
    - each broken exchange (see :func:`~workingctx.integrations._window.broken`)
      is dropped whole, the calls with the returns answering them.

    The messages left keep their origin in *messages*, so requests the repair
    brings together become one request in :func:`from_workingctx`, and
    requests pydantic-ai handed over in a row stay apart.
    """
    from pydantic_ai.messages import ModelRequest  # noqa: PLC0415  # the [pydantic-ai] extra

    names = CallNames()  # reused call ids get local names, as the window gives them
    local = [names.rename(m) for m in converted]
    chosen = list(range(len(local)))
    first = next((i for i, m in enumerate(messages) if isinstance(m, ModelRequest)), len(messages))
    if first:
        dropped = {c for m in local if m.metadata[KEY][0] < first for c in m.call_ids}
        logger.warning(
            "the history handed over opens with %d response(s) before any request: left out, with the returns "
            "answering their calls (%s)",
            first,
            ", ".join(sorted(dropped)) or "none",
        )
        chosen = [
            i
            for i, m in enumerate(local)
            if m.metadata[KEY][0] >= first and not (m.result_ids and all(r in dropped for r in m.result_ids))
        ]
    left = [local[i] for i in chosen]
    problems = broken(left, joined=False)
    if problems:
        report(logger, problems)
        chosen = [chosen[i] for i in repaired(left, joined=False)]
    return chosen


def trim_history(
    manager_or_scope: BaseContextManager[WorkingContext] | Scope,
) -> Callable[[list[ModelMessage]], Awaitable[list[ModelMessage]]]:
    """
    A history processor for pydantic-ai's ``ProcessHistory`` that keeps what a manager or a scope keeps.

    Args:
        manager_or_scope: A context manager (such as
            :class:`~workingctx.TokenBudgetContextManager`), or a scope (such as
            ``LastNTurns(10)``), whose kept messages are made a valid request
            (:class:`~workingctx.scopes.ValidRequest`); the request in flight
            (the newest ``ModelRequest``) is always kept, and so is a turn the
            provider paused that a run resumes (a history ending in a
            ``ModelResponse`` whose ``state`` is ``'suspended'``), with the
            request before it.

    Returns:
        An async function ``(messages) -> messages``. It replaces the run's
        history, so the next request continues from what it kept, and a
        manager with watermarks cuts rarely.

    Raises:
        TypeError: *manager_or_scope* is neither (the error names it).
    """
    check_manager(manager_or_scope, "manager_or_scope", "trim_history()", scopes=True)

    # Annotated with Any: pydantic-ai reads the processor's type hints at run time,
    # and this module names pydantic-ai's types only for the type checker.
    async def process_history(messages: list[Any]) -> list[Any]:
        from pydantic_ai.messages import ModelRequest  # noqa: PLC0415  # the [pydantic-ai] extra

        # a window of this call's own: pydantic-ai keeps what this returns, so the next history
        # continues from it; and one agent's runs, in any thread or event loop, share nothing
        window = Window(manager_or_scope, logger, joined=False)  # each response answered by the next request
        in_flight = messages[-1] if messages and isinstance(messages[-1], ModelRequest) else None
        converted = to_workingctx(messages)
        left = [converted[i] for i in _sendable(messages, converted)]
        keep = 0  # the newest request left is the one in flight, always kept
        if left and isinstance(messages[last := left[-1].metadata[KEY][0]], ModelRequest):
            keep = sum(1 for m in left if m.metadata[KEY][0] == last)
        elif left and _suspended(messages[last]):
            # a turn the provider paused, being resumed: pydantic-ai sends the history ending in it
            # back as it is, so it is kept with the request that asked for it
            asked = max(
                (m.metadata[KEY][0] for m in left if isinstance(messages[m.metadata[KEY][0]], ModelRequest)),
                default=last,
            )
            keep = sum(1 for m in left if m.metadata[KEY][0] >= asked)
        kept = await window.trim(left, keep=keep, sendable=True)
        out = from_workingctx(kept, messages)
        if in_flight is not None and (not out or not isinstance(out[-1], ModelRequest)):
            # every part of the request in flight answered nothing: it stays, empty, as pydantic-ai keeps it
            out.append(dataclasses.replace(in_flight, parts=[]))
        return out

    return process_history
