"""
LangChain v1 agents: middleware that sends the model a trimmed, valid request.

:class:`ContextMiddleware` runs a workingctx context manager before every model
call of a ``create_agent`` agent and sends the model what the manager keeps,
while the agent's state keeps every message; for an Anthropic chat model it also
places prompt-cache breakpoints from :func:`workingctx.cache.plan`.
:class:`SummarizingMiddleware` does the same with a
:class:`~workingctx.managers.SummaryContextManager`, keeping its running summary
in the agent's state beside (never instead of) the messages.

This module imports ``langchain`` (install the ``[langchain]`` extra); Anthropic
caching needs ``langchain-anthropic``, imported only to recognise its chat model.

>>> from workingctx import TokenBudgetContextManager
>>> middleware = ContextMiddleware(TokenBudgetContextManager(30_000, low_watermark=25_000))
>>> middleware.manager.max_tokens, middleware.cache
(30000, 'auto')
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Annotated, Any, Literal, NotRequired, TypeVar, cast

import attrs

from workingctx.adapters import data_problems, repair_messages, scrub_text
from workingctx.adapters import langchain as adapter
from workingctx.cache import CachePlan, cache_blocks, plan
from workingctx.callids import fresh_call_id
from workingctx.context import WorkingContext
from workingctx.exceptions import ArgumentTypeError, ArgumentValueError, WorkingCtxError
from workingctx.managers import SUMMARY_NAME, BaseContextManager, Summarizer, SummaryContextManager
from workingctx.messages import Message
from workingctx.prefix import PrefixContext
from workingctx.scopes import Scope
from workingctx.validity import STRUCTURAL_RULES, check_messages

try:
    from langchain.agents.middleware.types import (
        AgentMiddleware,
        AgentState,
        ExtendedModelResponse,
        ModelRequest,
        ModelResponse,
        PrivateStateAttr,
    )
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import (
        AIMessage,
        AnyMessage,
        BaseMessage,
        BaseMessageChunk,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        message_chunk_to_message,
    )
    from langgraph.constants import TAG_NOSTREAM
    from langgraph.types import Command
except ImportError as exc:  # pragma: no cover - the dev extra installs it
    _msg = "workingctx.integrations.langchain needs langchain 1.x: pip install 'workingctx[langchain]'"
    raise ImportError(_msg) from exc

__all__ = ["ContextMiddleware", "SummarizingMiddleware", "SummaryState"]

logger = logging.getLogger("workingctx.integrations.langchain")

CacheSetting = Literal["auto", False]
"""``"auto"``: breakpoints for Anthropic chat models, none for others; ``False``: never."""

_KEPT_WINDOWS = 32
"""How many conversations a middleware remembers the window of (the most recent ones)."""

_REPAIRED = frozenset({*STRUCTURAL_RULES, "pending-at-end", "unencodable-text", "call-not-assistant"})
"""The rules a request is repaired for: tool exchanges (orphans, dangling and unanswered calls) and lone surrogates."""

Handler = Callable[[ModelRequest[Any]], ModelResponse[Any]]
AsyncHandler = Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
Result = ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]


# -- conversions ------------------------------------------------------------------------


def _settled(message: BaseMessage) -> BaseMessage:
    """
    *message* as a complete message: a streaming chunk the state holds becomes the message it adds up to.
    """
    return message_chunk_to_message(message) if isinstance(message, BaseMessageChunk) else message


def _prefix(system: SystemMessage | None) -> PrefixContext:
    """
    The prefix for a request's system message (its blocks kept as they are).
    """
    if system is None:
        return PrefixContext()
    prefix: PrefixContext = adapter.read([system]).prefix
    return prefix


def _read(messages: Sequence[BaseMessage]) -> list[Message]:
    """
    workingctx messages for LangChain messages, one for each, in order.

    A message holding what JSON cannot (a tool's artifact of any Python
    object, ``NaN`` in a call's arguments, nesting past workingctx's limit),
    which LangChain keeps and sends as it is, is read as a stand-in that
    counts and pairs as it does: the middleware sends the state's own message.
    """
    if not messages:
        return []
    settled = [_settled(m) for m in messages]
    try:
        # as a runtime's state: a ChatMessage or FunctionMessage is read, not refused
        return list(adapter.read(settled, state=True).assembled())
    except WorkingCtxError:
        return [_read_one(m) for m in settled]


def _read_one(message: BaseMessage) -> Message:
    try:
        return _read_as_state(message)
    except WorkingCtxError:
        return _read_as_state(_stand_in(message))


def _read_as_state(message: BaseMessage) -> Message:
    read: list[Message] = list(adapter.read([message], state=True).assembled())
    return read[0]


_NEVER_SENT = ("artifact", "response_metadata", "usage_metadata")
"""The fields of a LangChain message no chat model sends: a tool's artifact, what a response reported."""

_DEEPEST = 32
"""How deep a stand-in's JSON goes before the rest is its text."""


def _stand_in(message: BaseMessage) -> BaseMessage:
    """
    *message* with what JSON cannot hold made JSON (see :func:`_json_safe`) and the fields no chat model sends left out.
    """
    update: dict[str, Any] = {name: None for name in _NEVER_SENT if getattr(message, name, None) is not None}
    update["content"] = _json_safe(message.content)
    update["additional_kwargs"] = _json_safe(message.additional_kwargs)
    if isinstance(message, AIMessage):
        update["tool_calls"] = [{**call, "args": _json_safe(call["args"])} for call in message.tool_calls]
    return message.model_copy(update=update)


def _json_safe(value: Any, depth: int = 0) -> Any:
    """
    *value* as JSON of the same size: a number JSON has no room for as its
    text (``"nan"``), any other object as its ``repr``, past :data:`_DEEPEST`
    levels the rest as text.
    """
    if isinstance(value, str | bool | int | None):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if depth >= _DEEPEST:
        try:
            return repr(value)
        except RecursionError:  # deeper than Python prints, and than any chat model sends
            return "..."
    if isinstance(value, Mapping):
        return {str(key): _json_safe(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_json_safe(item, depth + 1) for item in value]
    return repr(value)


@attrs.define
class _CallNames:
    """
    The call ids a conversation has used, so that a call reusing one (an
    OpenAI-compatible server numbers its calls ``call_0``, ``call_1`` in every
    reply) is read under a new name, :func:`~workingctx.callids.fresh_call_id`'s,
    and its results with it: call ids are local names. The model is still sent
    the state's own messages, and a message written for it (a repaired one)
    the state's own ids: those its tool results and the runtime use.
    """

    taken: set[str] = attrs.Factory(set)
    renamed: dict[str, str] = attrs.Factory(dict)  # the open exchange's: old id -> new id
    original: dict[str, str] = attrs.Factory(dict)  # every new id -> the state's id

    def read(self, message: Message) -> Message:
        if message.tool_calls:
            self.renamed = {}
            calls = []
            for call in message.tool_calls:
                if call.id in self.taken:
                    self.renamed[call.id] = fresh_call_id(call.id, self.taken)
                    self.original[self.renamed[call.id]] = call.id
                    call = attrs.evolve(call, id=self.renamed[call.id])  # noqa: PLW2901
                self.taken.add(call.id)
                calls.append(call)
            return attrs.evolve(message, tool_calls=tuple(calls)) if self.renamed else message
        if message.role == "tool" and message.tool_call_id in self.renamed:
            return attrs.evolve(message, tool_call_id=self.renamed[message.tool_call_id])
        return message

    def restored(self, message: Message) -> Message:
        """
        *message* under the state's own call ids (the inverse of :meth:`read`).
        """
        changes: dict[str, Any] = {}
        if any(call.id in self.original for call in message.tool_calls):
            changes["tool_calls"] = tuple(
                attrs.evolve(call, id=self.original.get(call.id, call.id)) for call in message.tool_calls
            )
        if message.tool_call_id is not None and message.tool_call_id in self.original:
            changes["tool_call_id"] = self.original[message.tool_call_id]
        return attrs.evolve(message, **changes) if changes else message


# -- the window: what the manager keeps, cache-stably ------------------------------------


@attrs.define(eq=False)
class _Window:
    """
    One conversation as the middleware last sent it: the state messages it has
    read, the context the manager keeps trimming, the state message each kept
    message was read from, and the cache plan of the last request.
    """

    prefix: PrefixContext
    seen: list[BaseMessage]
    ctx: WorkingContext
    sources: dict[int, BaseMessage] = attrs.Factory(dict)
    plan: CachePlan | None = None
    names: _CallNames = attrs.Factory(_CallNames)

    def continues(self, prefix: PrefixContext, state: Sequence[BaseMessage]) -> bool:
        """
        Whether *state* begins with every message this window has read, under the same prefix.
        """
        seen = self.seen
        if self.prefix != prefix or len(state) < len(seen):
            return False
        if seen and not (state[len(seen) - 1] is seen[-1] or state[len(seen) - 1] == seen[-1]):
            return False
        return all(a is b or a == b for a, b in zip(seen, state, strict=False))


class _Windows:
    """
    The windows of the most recent conversations, shared by the threads that call the middleware.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._windows: list[_Window] = []

    def take(self, prefix: PrefixContext, state: Sequence[BaseMessage]) -> _Window | None:
        """
        The window *state* continues, removed while the caller extends it, or None.
        """
        with self._lock:
            for position, window in enumerate(self._windows):
                if window.continues(prefix, state):
                    return self._windows.pop(position)
        return None

    def give_back(self, window: _Window) -> None:
        with self._lock:
            self._windows.insert(0, window)
            del self._windows[_KEPT_WINDOWS:]


def _trim_points(window: _Window, state: Sequence[BaseMessage]) -> Iterator[WorkingContext]:
    """
    Extend *window* with what *state* added since it was last read, yielding its
    context wherever the manager trims: before each assistant message (where
    the agent called the model) and at the end (the call being made).

    The window is what the manager would keep had it trimmed one context
    before every model call of the conversation: with a watermark manager, the
    transcript then only grows at its end between cuts, so consecutive requests
    share their prefix and the provider's prompt cache keeps hitting.
    """
    new = list(state[len(window.seen) :])
    converted = [window.names.read(m) for m in _read(new)]
    window.sources.update(zip(map(id, converted), new, strict=True))
    start = 0
    for stop in [*(i for i, m in enumerate(converted) if i > 0 and m.role == "assistant"), len(converted)]:
        window.ctx.extend(converted[start:stop])
        start = stop
        yield window.ctx
    window.seen = list(state)
    kept = {id(m) for m in window.ctx.messages}
    window.sources = {key: value for key, value in window.sources.items() if key in kept}


# -- the request: valid, then cache-marked ------------------------------------------------


def _repaired(rules: Iterable[str], where: str) -> None:
    broken = sorted({rule for rule in rules if rule in _REPAIRED})
    if broken:
        logger.warning(
            "the agent's history breaks the request rules (%s): %s; the stored state is left as it is",
            ", ".join(broken),
            where,
        )


def _sendable(
    prefix: PrefixContext, messages: list[Message], sources: Mapping[int, BaseMessage], names: _CallNames
) -> tuple[list[Message], list[BaseMessage]]:
    """
    The request's messages, valid, with the LangChain message sent for each:
    the state's own message where one was read, else one written under the
    state's own call ids (*names* restores them).

    A request still breaking a rule ``write(repair=True)`` fixes is repaired
    that way, and logged: orphan results dropped, unanswered calls (the state
    ends in calls whose results never came) closed with an error result, and
    every lone surrogate (text cut inside an emoji, which UTF-8 cannot encode)
    replaced by U+FFFD.
    """
    own = {id(m): sources[id(m)] for m in messages if id(m) in sources}
    found = [*check_messages([*prefix.as_messages(), *messages]), *data_problems(messages)]
    rules = {p.rule for p in found if p.rule in _REPAIRED}
    if rules:
        _repaired(rules, "the request repairs them as write(repair=True) does")
        messages = repair_messages(messages)
    sent: list[BaseMessage] = []
    for message in messages:
        source = own.get(id(message))
        sent.extend([source] if source is not None else adapter.write([names.restored(message)], state=True))
    if len(sent) != len(messages):  # pragma: no cover - a manager's own messages that write as several
        return _read(sent), sent
    return messages, sent


def _anthropic_model(model: object) -> str | None:
    """
    The model name of a ``ChatAnthropic`` chat model; None for any other model.
    """
    try:
        from langchain_anthropic import ChatAnthropic  # noqa: PLC0415  # optional: only to recognise its model
    except ImportError:  # pragma: no cover - the dev extra installs it
        return None
    if isinstance(model, ChatAnthropic):
        return str(model.model)
    return None


def _has_cache_control(request: ModelRequest[Any], messages: Sequence[BaseMessage]) -> bool:
    """
    Whether the request already asks for caching anywhere: a block, a tool or the request itself.
    """
    if "cache_control" in request.model_settings:
        return True
    for tool in request.tools:
        fields = tool if isinstance(tool, Mapping) else (getattr(tool, "extras", None) or {})
        if "cache_control" in fields:
            return True
    every = [request.system_message, *messages] if request.system_message is not None else messages
    return any(
        isinstance(block, Mapping) and "cache_control" in block
        for message in every
        if isinstance(message.content, list)
        for block in message.content
    )


def _control(ttl: str) -> dict[str, str]:
    return {"type": "ephemeral", "ttl": ttl}


M = TypeVar("M", bound=BaseMessage)


def _as_blocks(message: M) -> M:
    """
    A human, AI or system message whose content is text, with that text as one
    text block: what Anthropic reads the same way, and what a breakpoint can be
    set on, so a message sends the same blocks whether or not it carries one.
    """
    content = message.content
    if message.type in {"human", "ai", "system"} and isinstance(content, str) and content.strip():
        return message.model_copy(update={"content": [{"type": "text", "text": content}]})
    return message


_UNMARKABLE = frozenset({"tool_use", "reasoning", "function_call", "refusal"})
"""The LangChain blocks ChatAnthropic rebuilds from other fields or leaves out: a ``cache_control`` on one is lost."""


def _carrying(item: object, ttl: str) -> dict[str, Any] | None:
    """
    The LangChain content block *item* with a cache breakpoint, in a form whose
    ``cache_control`` ChatAnthropic sends; None where it would send the block
    without one (a block it rebuilds or leaves out, blank text).

    An ``image_url`` block (OpenAI's shape) is one ChatAnthropic rebuilds with
    no ``cache_control``: it becomes LangChain's standard image block, which
    ChatAnthropic sends as the same image block, breakpoint included.
    """
    block: dict[str, Any] = dict(item) if isinstance(item, Mapping) else {"type": "text", "text": item}
    kind = block.get("type")
    if kind == "image_url":
        image = block.get("image_url")
        if not isinstance(image, Mapping) or not isinstance(image.get("url"), str):
            return None  # not a shape ChatAnthropic sends
        block = {"type": "image", "url": image["url"]}
    elif kind in _UNMARKABLE or (kind == "text" and not str(block.get("text", "")).strip()):
        return None
    return {**block, "cache_control": _control(ttl)}


def _marked(message: BaseMessage, source: Message, block: int, ttl: str) -> BaseMessage | None:
    """
    *message* with a cache breakpoint on *block* (an index into
    :func:`~workingctx.cache.cache_blocks` of *source*, the message it was
    read as); None where ChatAnthropic would send it without one (a tool call:
    ChatAnthropic writes calls from ``tool_calls``, which have no
    ``cache_control``; see :func:`_carrying` for the blocks).
    """
    if block >= len(cache_blocks(source)) - len(source.tool_calls):
        return None
    if isinstance(message, ToolMessage):
        # ChatAnthropic sends tool_result blocks in a tool message as they are: the
        # result is written as it would be, with the breakpoint on it.
        result = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": message.content,
            "is_error": message.status == "error",
            "cache_control": _control(ttl),
        }
        return message.model_copy(update={"content": [result]})
    content = _as_blocks(message).content
    if not isinstance(content, list):  # pragma: no cover - cache_blocks gives no block for blank text
        return None
    blocks = list(content)
    carrying = _carrying(blocks[block], ttl)
    if carrying is None:
        return None
    blocks[block] = carrying
    return message.model_copy(update={"content": blocks})


def _with_breakpoints(
    request: ModelRequest[Any], made: CachePlan, messages: Sequence[Message], sent: list[BaseMessage]
) -> tuple[ModelRequest[Any], CachePlan]:
    """
    *request* sending *sent* (read as *messages*) with the breakpoints of *made*
    on their blocks, every text message as blocks (see :func:`_as_blocks`);
    and *made* with only the breakpoints placed, the previous plan of the
    next request, which must not count on an entry this one never wrote.
    """
    head = made.prefix_messages
    out = [_as_blocks(m) for m in sent]
    system = request.system_message
    read_as = _prefix(system).as_messages() if system is not None else []
    marked: BaseMessage | None
    placed = []
    for point in made.breakpoints:
        index, block = point.message, point.block
        if index < head and system is not None:  # the system prompt: the prefix's only message
            marked = _marked(_as_blocks(system), read_as[index], block, point.ttl)
            if marked is not None:
                system = cast("SystemMessage", marked)
        else:
            marked = _marked(out[index - head], messages[index - head], block, point.ttl)
            if marked is not None:
                out[index - head] = marked
        if marked is None:
            logger.debug("no breakpoint on message %d block %d: ChatAnthropic sends it without one", index, block)
        else:
            placed.append(point)
    if system is not None:
        system = _as_blocks(system)
    marked_request = request.override(messages=cast("list[AnyMessage]", out), system_message=system)
    return marked_request, attrs.evolve(made, breakpoints=tuple(placed))


# -- the middleware -----------------------------------------------------------------------


def _check_cache(value: object) -> CacheSetting:
    if value == "auto" and isinstance(value, str):
        return "auto"
    if value is False:
        return False
    msg = f"cache must be 'auto' (breakpoints for Anthropic chat models) or False (none), got {value!r}"
    raise ArgumentValueError(msg, argument="cache", value=value)


class _RequestMiddleware(AgentMiddleware[Any, Any, Any]):
    """
    What both middlewares share: the request built from a kept window, made valid and cache-marked.
    """

    cache: CacheSetting

    def _send(
        self, request: ModelRequest[Any], prefix: PrefixContext, ctx: WorkingContext, window: _Window
    ) -> ModelRequest[Any]:
        """
        *request* sending the tail of *ctx* (valid; cache-marked for an Anthropic model).
        """
        kept = list(ctx.messages)
        messages, sent = _sendable(prefix, kept, window.sources, window.names)
        model = _anthropic_model(request.model) if self.cache == "auto" else None
        if model is None or _has_cache_control(request, sent):
            return request.override(messages=cast("list[AnyMessage]", sent))
        planned = ctx if messages is kept else WorkingContext(prefix=prefix, messages=messages, counter=ctx.counter)
        made = plan(planned, provider="anthropic", model=model, previous=window.plan)
        marked, window.plan = _with_breakpoints(request, made, messages, sent)
        return marked


class ContextMiddleware(_RequestMiddleware):
    """
    Send the model what a context manager keeps; the agent's state keeps everything.

    Before every model call, the agent's messages are read into a workingctx
    context (through :mod:`workingctx.adapters.langchain`), the manager trims it,
    and the model receives the messages it kept, by
    ``handler(request.override(messages=...))``: the state, and so the
    checkpointed history, is never changed. The request is always valid: every
    tool result follows its call, and the first message after the system
    prompt is the user's (the managers guarantee it); a history that breaks a
    tool rule (a result whose call is gone, from an older version of an app)
    is repaired the documented way, the manager's (the broken exchange is
    left out whole) or ``write(repair=True)``'s (calls the state never
    answered closed with an error result, under the state's own call ids;
    a lone surrogate, text cut inside an emoji that UTF-8 cannot encode,
    replaced by U+FFFD), and logged on the ``workingctx.integrations.langchain``
    logger; nothing broken is passed on.

    The request is what the manager would keep had it trimmed one context
    before every model call of the conversation, so a watermark manager
    (:class:`~workingctx.TokenBudgetContextManager`) cuts rarely and between
    cuts the request only grows at its end. The middleware remembers the
    window of the most recent conversations, so a call costs what the state
    added; for any other (after a restart) it replays the history once.

    With ``cache="auto"`` and an Anthropic chat model (``ChatAnthropic``), the
    request carries the ``cache_control`` breakpoints of
    :func:`workingctx.cache.plan` (at most four, none below the model's
    minimum): the end of the system prompt, the furthest breakpoint of the
    previous request still in this one, and the end of the request; every
    text message is sent as one text block, which Anthropic reads as the same
    text, so a message sends the same blocks whether or not it carries one;
    a breakpoint goes only on a block ``ChatAnthropic`` sends it with (an
    ``image_url`` block carries one as LangChain's standard image block). A
    request that already asks for caching (``cache_control`` on a block, on a
    tool or in the model settings) is left as it is.

    Args:
        manager: A context manager of :mod:`workingctx.managers` (not a
            summary manager: see :class:`SummarizingMiddleware`).
        cache: ``"auto"`` or ``False`` (no breakpoints).

    Raises:
        TypeError: *manager* is not a context manager, or is a summary manager.
        ValueError: *cache* is neither ``"auto"`` nor ``False``.
    """

    def __init__(self, manager: BaseContextManager[WorkingContext], *, cache: CacheSetting = "auto") -> None:
        if isinstance(manager, SummaryContextManager):
            msg = (
                "ContextMiddleware(manager=...) takes a trimming manager, got a SummaryContextManager; use "
                "SummarizingMiddleware(summarizer, ...), which keeps the summary in the agent's state"
            )
            raise ArgumentTypeError(msg, argument="manager", value=manager, expected="a trimming context manager")
        if not isinstance(manager, BaseContextManager):
            msg = (
                f"ContextMiddleware(manager=...) must be a workingctx context manager, got {manager!r} of type "
                f"{type(manager).__name__}; use TokenBudgetContextManager(max_tokens) or MessageContextManager(n)"
            )
            raise ArgumentTypeError(msg, argument="manager", value=manager, expected="a context manager")
        self.manager = manager
        self.cache = _check_cache(cache)
        self._windows = _Windows()

    def _window(self, request: ModelRequest[Any]) -> tuple[PrefixContext, _Window, list[BaseMessage]]:
        prefix = _prefix(request.system_message)
        state: list[BaseMessage] = list(request.messages)
        window = self._windows.take(prefix, state)
        if window is None:
            window = _Window(prefix, [], WorkingContext(prefix=prefix))
        return prefix, window, state

    def _trimmed(self, rules: list[str]) -> None:
        report = getattr(self.manager, "last_trim", None)
        rules.extend(getattr(report, "repaired", ()) or ())

    def wrap_model_call(self, request: ModelRequest[Any], handler: Handler) -> Result:
        """
        Call the model with the trimmed, valid, cache-marked request.
        """
        prefix, window, state = self._window(request)
        rules: list[str] = []
        for ctx in _trim_points(window, state):
            self.manager.trim_context(ctx)
            self._trimmed(rules)
        _repaired(rules, "the request leaves out the broken exchanges")
        sent = self._send(request, prefix, window.ctx, window)
        self._windows.give_back(window)
        return handler(sent)

    async def awrap_model_call(self, request: ModelRequest[Any], handler: AsyncHandler) -> Result:
        """
        Call the model with the trimmed, valid, cache-marked request (async).
        """
        prefix, window, state = self._window(request)
        rules: list[str] = []
        for ctx in _trim_points(window, state):
            await self.manager.atrim_context(ctx)
            self._trimmed(rules)
        _repaired(rules, "the request leaves out the broken exchanges")
        sent = self._send(request, prefix, window.ctx, window)
        self._windows.give_back(window)
        return await handler(sent)


# -- summarizing --------------------------------------------------------------------------


class SummaryState(AgentState[Any]):
    """
    The agent state :class:`SummarizingMiddleware` adds: its running summary (private to the agent).
    """

    workingctx_summary: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]


def _transcript(messages: Sequence[Message]) -> str:
    """
    *messages* as plain text for a summarizing model: role, text, calls and results.
    """
    lines: list[str] = []
    for message in messages:
        text = message.text()
        if message.role == "tool":
            lines.append(f"tool result ({message.name or message.tool_call_id}): {text}")
            continue
        if text:
            lines.append(f"{message.role}: {text}")
        lines.extend(f"{message.role} calls {call.name}({dict(call.arguments)})" for call in message.tool_calls)
    return "\n".join(lines)


_BLOCKING: ContextVar[bool] = ContextVar("workingctx_langchain_blocking", default=False)
"""Set while the sync path trims: a chat model summarizer then asks with ``invoke``, not ``ainvoke``."""


@attrs.frozen
class _ChatSummarizer:
    """
    A workingctx summarizer that asks a LangChain chat model: with ``ainvoke``,
    or with ``invoke`` on the sync path (a model's async client may be bound to
    the event loop it was first used in, as ``ChatAnthropic``'s is, so the sync
    path never runs it in a loop of its own).
    """

    model: BaseChatModel

    async def __call__(self, messages: Sequence[Message], *, prompt: str, max_tokens: int) -> str:
        transcript = _transcript(scrub_text(messages))  # what UTF-8 cannot encode, as U+FFFD
        request = [SystemMessage(f"{prompt} Use at most {max_tokens} tokens."), HumanMessage(transcript)]
        config: Any = {"tags": [TAG_NOSTREAM]}  # the summary is no part of what the agent streams to its user
        if _BLOCKING.get():
            return self.model.invoke(request, config=config).text
        return (await self.model.ainvoke(request, config=config)).text


T = TypeVar("T")


def _completed(coroutine: Coroutine[Any, Any, T]) -> T:
    """
    The result of *coroutine*, which never waits (everything it awaits is
    done at once), run to its end in this thread without an event loop.
    """
    try:
        coroutine.send(None)
    except StopIteration as done:
        return cast("T", done.value)
    coroutine.close()  # pragma: no cover - only a summarizer waits, and the sync path's never does
    msg = "the sync summary waited for something; this is a bug in workingctx"  # pragma: no cover
    raise RuntimeError(msg)  # pragma: no cover


class SummarizingMiddleware(_RequestMiddleware):
    """
    Send the model a summary of the older messages and the newest ones verbatim; the state keeps everything.

    A :class:`~workingctx.managers.SummaryContextManager` runs before every
    model call, on the system prompt, the summary so far and the messages
    after it. When it summarizes, the new summary is kept in the agent's state
    under ``workingctx_summary`` (a private key, checkpointed with the thread),
    with which messages it covers, by the update the model call returns
    (``ExtendedModelResponse``); the ``messages`` channel is never changed.
    Each request is the system prompt, the summary (a system message named
    ``context_summary``), the messages kept verbatim and those added since,
    made valid and cache-marked as :class:`ContextMiddleware` does (a
    breakpoint where the conversation's previous request ended, however many
    blocks were added since: the middleware remembers the plans of the most
    recent conversations).

    Both ``invoke`` and ``ainvoke`` work, the sync one also inside a running
    event loop (a notebook, an async app calling sync code): there a chat
    model is asked with its sync API, ``invoke``, and an async summarizer runs
    in one long-lived event loop in a background thread, the same for every
    call (a client bound to the loop it was first used in keeps working).

    Args:
        summarizer: A LangChain chat model (asked with the summary prompt and
            the transcript as text) or a workingctx summarizer, an async callable
            ``(messages, *, prompt, max_tokens) -> str``.
        max_messages: As for :class:`~workingctx.managers.SummaryContextManager`.
        token_budget: As for :class:`~workingctx.managers.SummaryContextManager`.
        keep_recent: As for :class:`~workingctx.managers.SummaryContextManager`.
        remove_tool_msgs: As for :class:`~workingctx.managers.SummaryContextManager`.
        summary_prompt: As for :class:`~workingctx.managers.SummaryContextManager`.
        max_summary_tokens: As for :class:`~workingctx.managers.SummaryContextManager`.
        pin: As for :class:`~workingctx.managers.SummaryContextManager`.
        cache: ``"auto"`` or ``False``, as for :class:`ContextMiddleware`.

    Raises:
        TypeError: *summarizer* is neither a chat model nor callable, or a
            setting has the wrong type (the error names it).
        ValueError: a setting has a wrong value, or *cache* is neither ``"auto"`` nor ``False``.
    """

    state_schema = SummaryState

    def __init__(
        self,
        summarizer: BaseChatModel | Summarizer | Callable[..., Awaitable[str]],
        *,
        max_messages: int | None = 30,
        token_budget: int | None = None,
        keep_recent: int = 8,
        remove_tool_msgs: bool = False,
        summary_prompt: str | None = None,
        max_summary_tokens: int = 600,
        pin: Scope | None = None,
        cache: CacheSetting = "auto",
    ) -> None:
        call: Summarizer | Callable[..., Awaitable[str]]
        call = _ChatSummarizer(summarizer) if isinstance(summarizer, BaseChatModel) else summarizer
        if not callable(call):
            msg = (
                f"SummarizingMiddleware(summarizer=...) must be a LangChain chat model or an async callable "
                f"(messages, *, prompt, max_tokens) -> str, got {summarizer!r} of type {type(summarizer).__name__}"
            )
            raise ArgumentTypeError(msg, argument="summarizer", value=summarizer, expected="a chat model or callable")
        self.manager = SummaryContextManager(
            call,
            max_messages=max_messages,
            token_budget=token_budget,
            keep_recent=keep_recent,
            remove_tool_msgs=remove_tool_msgs,
            summary_prompt=summary_prompt,
            max_summary_tokens=max_summary_tokens,
            pin=pin,
        )
        self.cache = _check_cache(cache)
        self._windows = _Windows()  # only for the plan of each conversation's last request

    # The context of a call: the summary so far, the messages it kept, those added since.

    def _context(self, state: Mapping[str, Any], prefix: PrefixContext) -> _Window:
        messages = [_settled(m) for m in state.get("messages", ())]
        record = state.get("workingctx_summary")
        covered, kept, summary = 0, frozenset[str](), None
        if isinstance(record, Mapping):
            through, ids, text = record.get("through", 0), record.get("kept", ()), record.get("summary")
            if not (
                isinstance(through, int)
                and not isinstance(through, bool)
                and isinstance(ids, list | tuple)
                and all(isinstance(i, str) for i in ids)
                and isinstance(text, str)
                and text.strip()  # the summary manager never keeps a blank one
            ):
                logger.warning(
                    "the summary in the agent's state is not one SummarizingMiddleware wrote (%r); "
                    "it is left out and the history is summarized again when needed",
                    {key: record.get(key) for key in ("through", "last_id", "kept")},
                )
            elif 0 < through <= len(messages) and messages[through - 1].id == record.get("last_id"):
                covered, kept, summary = through, frozenset(ids), text
            else:
                logger.warning(
                    "the summary in the agent's state no longer matches its messages (they were edited); "
                    "it is left out and the history is summarized again when needed"
                )
        chosen = [m for m in messages[:covered] if m.id in kept] + messages[covered:]
        names = _CallNames()
        converted = [names.read(m) for m in _read(chosen)]
        head = [Message("system", summary, name=SUMMARY_NAME)] if isinstance(summary, str) and summary else []
        ctx = WorkingContext(prefix=prefix, messages=[*head, *converted])
        return _Window(prefix, [], ctx, dict(zip(map(id, converted), chosen, strict=True)), names=names)

    def _record(self, state: Mapping[str, Any], ctx: WorkingContext, before: str | None) -> dict[str, Any] | None:
        """
        The state update recording a new summary, or None when the manager did not summarize.
        """
        summary = self._summary_of(ctx)
        if summary is None or summary == before:
            return None
        messages = state["messages"]
        kept = [m.id for m in ctx.messages if m.id is not None]
        record = {"summary": summary, "through": len(messages), "last_id": messages[-1].id, "kept": kept}
        return {"workingctx_summary": record}

    @staticmethod
    def _summary_of(ctx: WorkingContext) -> str | None:
        return next((m.text() for m in ctx.messages if m.role == "system" and m.name == SUMMARY_NAME), None)

    def _start(self, request: ModelRequest[Any]) -> tuple[PrefixContext, dict[str, Any], _Window, str | None]:
        prefix = _prefix(request.system_message)
        state = {**request.state, "messages": list(request.messages)}
        window = self._context(state, prefix)
        earlier = self._windows.take(prefix, request.messages)
        window.plan = earlier.plan if earlier is not None else None
        return prefix, state, window, self._summary_of(window.ctx)

    def _sent(self, request: ModelRequest[Any], prefix: PrefixContext, window: _Window) -> ModelRequest[Any]:
        """
        The request to send, its plan kept for the conversation's next one.
        """
        sent = self._send(request, prefix, window.ctx, window)
        window.seen = list(request.messages)
        self._windows.give_back(window)
        return sent

    def _finish(self, response: ModelResponse[Any], update: dict[str, Any] | None) -> Result:
        if update is None:
            return response
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    def wrap_model_call(self, request: ModelRequest[Any], handler: Handler) -> Result:
        """
        Summarize when a threshold is passed, then call the model with the
        summary, the kept messages and the new ones; a new summary goes to the state.
        """
        prefix, state, window, before = self._start(request)
        if isinstance(self.manager.summarizer, _ChatSummarizer):
            blocking = _BLOCKING.set(True)
            try:
                _completed(self.manager.atrim_context(window.ctx))
            finally:
                _BLOCKING.reset(blocking)
        else:
            self.manager.trim_context(window.ctx)  # in one long-lived loop, also inside a running one
        update = self._record(state, window.ctx, before)
        return self._finish(handler(self._sent(request, prefix, window)), update)

    async def awrap_model_call(self, request: ModelRequest[Any], handler: AsyncHandler) -> Result:
        """
        Summarize when a threshold is passed, then call the model with the
        summary, the kept messages and the new ones; a new summary goes to the state (async).
        """
        prefix, state, window, before = self._start(request)
        await self.manager.atrim_context(window.ctx)
        update = self._record(state, window.ctx, before)
        return self._finish(await handler(self._sent(request, prefix, window)), update)
