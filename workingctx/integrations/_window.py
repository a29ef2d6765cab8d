"""
What the framework integrations share: checking a manager or a scope, giving
reused call ids local names, and the live window a manager trims.

A framework hands its history over whole before every model call. The
:class:`Window` keeps one live :class:`~workingctx.WorkingContext` per
integration object and appends only what is new since the last call, so a
manager with watermarks (:class:`~workingctx.TokenBudgetContextManager`) cuts
rarely and the request grows at its end between cuts, as the provider's prompt
cache needs. A history that does not continue the last one (a rewind, a
cleared session, another agent's instructions) starts a new window.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import attrs

from workingctx.callids import fresh_call_id
from workingctx.context import WorkingContext
from workingctx.exceptions import ArgumentTypeError
from workingctx.managers import BaseContextManager
from workingctx.messages import (
    ContentBlock,
    Message,
    ProviderBlock,
    RemoteToolCallBlock,
    ToolCall,
    ToolCallBlock,
    ToolResultBlock,
    answered_id,
)
from workingctx.prefix import PrefixContext
from workingctx.scopes import ContextScope, PositionalScope, Scope, Since, ValidRequest, WholeExchanges
from workingctx.validity import STRUCTURAL_RULES, Problem, check_messages

__all__ = ["CallNames", "Window", "broken", "check_manager", "is_scope", "repaired", "report"]


def is_scope(value: object) -> bool:
    """
    Whether *value* is a scope (a predicate or a positional scope).
    """
    return isinstance(value, ContextScope | PositionalScope)


def check_manager(value: object, argument: str, owner: str, *, scopes: bool = False) -> None:
    """
    Refuse what is not a context manager (or, with *scopes*, a scope), naming *argument*.

    Raises:
        ArgumentTypeError: *value* is of the wrong type (a ``TypeError``).
    """
    if isinstance(value, BaseContextManager) or (scopes and is_scope(value)):
        return
    expected = "a workingctx context manager or a scope" if scopes else "a workingctx context manager"
    msg = (
        f"{owner}: {argument} must be {expected}, got {value!r} of type {type(value).__name__}; "
        "pass e.g. TokenBudgetContextManager(8_000)" + (" or a scope such as LastNTurns(10)" if scopes else "")
    )
    raise ArgumentTypeError(msg, argument=argument, value=value, expected=expected)


class CallNames:
    """
    Gives every tool call a name no other call of the window has.

    Frameworks reuse call ids (pydantic-ai's test model names every call of a
    tool after the tool; OpenAI-compatible servers start at ``call_0`` in every
    response). Inside workingctx a call id means "the result that answers this
    call", so a call whose id an earlier call already took is renamed with
    :func:`~workingctx.callids.fresh_call_id`, and the results that follow it
    answer the new name. The names only live inside the window: what goes back
    to the framework is its own objects.
    """

    def __init__(self) -> None:
        self._taken: set[str] = set()
        self._current: dict[str, str] = {}

    def rename(self, message: Message) -> Message:
        """
        *message* with its calls and results under their local names (itself when none change).
        """
        if message.result_ids:
            message = self._results(message)
        if message.call_ids:
            message = self._calls(message)
        return message

    def _name(self, call_id: str) -> str:
        name = call_id if call_id not in self._taken else fresh_call_id(call_id, self._taken)
        self._taken.add(name)
        self._current[call_id] = name
        return name

    def _calls(self, message: Message) -> Message:
        names: dict[str, str] = {}
        for call_id in message.call_ids:
            names[call_id] = self._name(call_id)
        if all(old == new for old, new in names.items()):
            return message
        calls = tuple(attrs.evolve(c, id=names[c.id]) if isinstance(c, ToolCall) else c for c in message.tool_calls)
        content = message.content
        if not isinstance(content, str):
            content = tuple(_named_call(b, names) for b in content)
        return attrs.evolve(message, content=content, tool_calls=calls)

    def _results(self, message: Message) -> Message:
        def local(call_id: str) -> str:
            return self._current.get(call_id, call_id)

        changes: dict[str, object] = {}
        if message.tool_call_id is not None and local(message.tool_call_id) != message.tool_call_id:
            changes["tool_call_id"] = local(message.tool_call_id)
        content = message.content
        if not isinstance(content, str) and any(
            (answered := answered_id(b)) is not None and local(answered) != answered for b in content
        ):
            changes["content"] = tuple(_named_answer(b, local) for b in content)
        return attrs.evolve(message, **changes) if changes else message  # type: ignore[arg-type]


def _named_call(block: ContentBlock, names: Mapping[str, str]) -> ContentBlock:
    """
    *block* asking for its call under the name *names* gives it (a provider's own call included).
    """
    if isinstance(block, ToolCallBlock | RemoteToolCallBlock):
        return attrs.evolve(block, id=names[block.id])
    if isinstance(block, ProviderBlock) and (asked := block.asks) is not None and asked in names:
        return block.renamed(names[asked])
    return block


def _named_answer(block: ContentBlock, local: Callable[[str], str]) -> ContentBlock:
    """
    *block* answering its call under the call's local name (a provider's own answer included).
    """
    if isinstance(block, ToolResultBlock):
        return attrs.evolve(block, call_id=local(block.call_id))
    if isinstance(block, ProviderBlock) and block.answers is not None:
        return block.renamed(local(block.answers))
    return block


def broken(messages: Sequence[Message], *, joined: bool = True) -> tuple[Problem, ...]:
    """
    The tool-exchange problems of *messages* (a result without its call, a call
    answered after other messages, ...), trailing unanswered calls allowed.

    Args:
        messages: The messages to check.
        joined: Assistant turns that only call, one right after another, are
            one exchange whose results follow them all (as workingctx and the
            providers see them). ``False`` for a framework that needs each
            turn's calls answered by the very next message (pydantic-ai): each
            such turn but the last is then a broken exchange (``dangling-call``).
    """
    problems = tuple(p for p in check_messages(messages, allow_pending=True) if p.rule in STRUCTURAL_RULES)
    if joined:
        return problems
    reported = {p.index for p in problems}
    split = tuple(
        Problem(
            i,
            "dangling-call",
            f"the tool call(s) {', '.join(map(repr, messages[i].call_ids))} are followed by another turn of calls, "
            "not by their results; this framework needs each turn's calls answered by the next message",
            messages[i].call_ids,
        )
        for i in _joined_turns(messages)
        if i not in reported
    )
    return tuple(sorted((*problems, *split), key=lambda p: -1 if p.index is None else p.index))


def _joined_turns(messages: Sequence[Message]) -> list[int]:
    """
    Where an assistant turn that calls is followed right away by another that calls.
    """
    return [
        i
        for i in range(len(messages) - 1)
        if messages[i].role == "assistant"
        and messages[i].call_ids
        and messages[i + 1].role == "assistant"
        and messages[i + 1].call_ids
        and not messages[i + 1].result_ids
    ]


def _split(messages: Sequence[Message]) -> list[int]:
    """
    The indices of *messages* left when each call turn followed right away by
    another call turn (see :func:`broken`) is left out, with the results
    answering its calls.
    """
    turns = set(_joined_turns(messages))
    if not turns:
        return list(range(len(messages)))
    calls = {c for i in turns for c in messages[i].call_ids}
    return [
        i
        for i, m in enumerate(messages)
        if i not in turns and not (m.result_ids and all(r in calls for r in m.result_ids))
    ]


def repaired(messages: Sequence[Message], *, joined: bool = True, user_first: bool = False) -> list[int]:
    """
    The indices of *messages* kept when each broken exchange (see
    :func:`broken`) is dropped whole, the calls with their results: what
    every workingctx manager does to a transcript that arrives broken.

    Args:
        messages: The messages to repair.
        joined: As for :func:`broken`; with ``False`` each call turn followed
            right away by another is dropped too, with its results.
        user_first: Also make a user message the first non-system message
            (see :class:`~workingctx.scopes.ValidRequest`).
    """
    scope = ValidRequest(Since(0), user_first=user_first)
    indices = list(range(len(messages)))
    while True:  # dropping an exchange can bring two call turns together: repeat until nothing is dropped
        chosen = [messages[i] for i in indices]
        step = list(range(len(chosen))) if joined else _split(chosen)
        step = [step[i] for i in _valid_indices([chosen[i] for i in step], scope)]
        if len(step) == len(chosen):
            return indices
        indices = [indices[i] for i in step]


def report(logger: logging.Logger, problems: Sequence[Problem]) -> None:
    """
    Log that the history handed over breaks tool exchanges, naming each problem.
    """
    logger.warning(
        "the history handed over breaks tool exchanges (%s): each broken exchange is dropped whole "
        "before the model sees it",
        "; ".join(f"message {p.index}: {p.rule}" for p in problems),
    )


class Window:
    """
    The live context a manager (or a scope) trims, fed the framework's history call after call.

    Args:
        manager: A :class:`~workingctx.managers.BaseContextManager`, or a scope
            (kept messages made a valid request with
            :class:`~workingctx.scopes.ValidRequest`).
        logger: Where a history that arrives broken is reported.
        joined: Whether the framework takes turns that only call, one right
            after another, as one exchange (see :func:`broken`); with
            ``False`` each such turn but the last is dropped, with its results.
    """

    def __init__(
        self, manager: BaseContextManager[WorkingContext] | Scope, logger: logging.Logger, *, joined: bool = True
    ) -> None:
        self.manager = manager
        self._logger = logger
        self._joined = joined
        self._seen: list[Message] = []
        self._prefix: PrefixContext | None = None
        self._view: WorkingContext | None = None
        self._names = CallNames()

    def reset(self) -> None:
        """
        Forget the window: the next history starts a new one.
        """
        self._seen = []
        self._view = None

    def _continues(self, messages: Sequence[Message], prefix: PrefixContext) -> bool:
        seen = self._seen
        return (
            self._view is not None
            and prefix == self._prefix
            and len(messages) >= len(seen)
            and all(a == b for a, b in zip(messages, seen, strict=False))
        )

    async def trim(
        self,
        messages: Sequence[Message],
        prefix: PrefixContext | None = None,
        *,
        keep: int = 0,
        sendable: bool = False,
    ) -> list[Message]:
        """
        The messages the model gets for *messages* (the framework's whole
        history, in its order): what the manager keeps of the live window,
        after the messages new since the last call were appended to it.

        A window that breaks tool exchanges is repaired first (each broken
        exchange dropped whole, see :func:`repaired`) and logged, so the
        manager or scope never cuts a broken history: a cut that joined the
        two halves of a broken exchange would pass it on.

        Args:
            messages: The whole history, as workingctx messages.
            prefix: What the model gets first (counted by a manager's budget).
            keep: For a scope, how many of the newest messages are always
                kept, with the calls they answer (the request in flight).
            sendable: The result is sent as it is, so it cannot end in calls
                still waiting for their results: such an exchange is left out
                (and logged). A session's state may end so; a request may not.
        """
        prefix = PrefixContext() if prefix is None else prefix
        if not self._continues(messages, prefix):
            self._view = WorkingContext(prefix=prefix)
            self._names = CallNames()
            self._prefix = prefix
            self._seen = []
        view = self._view
        assert view is not None  # noqa: S101  # set just above
        view.extend(self._names.rename(m) for m in messages[len(self._seen) :])
        self._seen = list(messages)
        problems = broken(view.messages, joined=self._joined)
        if problems:  # repaired before the manager cuts: a cut must not join the halves of a broken exchange
            report(self._logger, problems)
            size = len(view.messages)
            indices = repaired(view.messages, joined=self._joined)
            keep = sum(1 for i in indices if i >= size - keep)
            view.replace_tail([view.messages[i] for i in indices])
        if isinstance(self.manager, BaseContextManager):
            await self.manager.atrim_context(view)
            if broken(view.messages, joined=self._joined):  # a manager of your own that left a broken exchange
                view.replace_tail(self._repaired(view.messages, user_first=False))
            kept = list(view.messages)
        else:  # a scope decides anew over the whole window each call
            scope: Scope = self.manager
            if keep:
                scope = scope | WholeExchanges(Since(max(len(view.messages) - keep, 0)), mode="expand")
            kept = _valid(view.messages, ValidRequest(scope, user_first=True))
            if broken(kept, joined=self._joined):  # what the scope kept joins call turns
                kept = self._repaired(kept, user_first=True)
        return _closed(kept, self._logger) if sendable else kept

    def _repaired(self, messages: Sequence[Message], *, user_first: bool) -> list[Message]:
        """
        *messages* without their broken exchanges (joined call turns too, when the framework needs them apart).
        """
        return [messages[i] for i in repaired(messages, joined=self._joined, user_first=user_first)]


def _closed(messages: list[Message], logger: logging.Logger) -> list[Message]:
    """
    *messages* without a trailing exchange whose calls wait for results (the
    calls and the results they already have).
    """
    for index in range(len(messages) - 1, -1, -1):
        calls = messages[index].call_ids
        if calls:
            answered = {i for m in messages[index + 1 :] for i in m.result_ids}
            if all(c in answered for c in calls):
                return messages
            logger.warning(
                "the history handed over ends in tool calls without results (%s): left out of the request",
                ", ".join(c for c in calls if c not in answered),
            )
            return messages[:index]
    return messages


def _valid_indices(messages: Sequence[Message], scope: ValidRequest) -> list[int]:
    kept, _ = scope.repair(messages)
    return list(kept)


def _valid(messages: Sequence[Message], scope: ValidRequest) -> list[Message]:
    return [messages[i] for i in _valid_indices(messages, scope)]
