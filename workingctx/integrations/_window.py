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
from collections.abc import Mapping, Sequence

import attrs

from workingctx.callids import SEPARATOR
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
    asked_id,
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
    Gives every tool call a name no other call of the window has, and every
    result the name of the call it answers.

    Frameworks reuse call ids (pydantic-ai's test model names every call of a
    tool after the tool; OpenAI-compatible servers start at ``call_0`` in every
    response; a model may give no id at all, and a framework's stand-in is then
    the same for every call). Inside workingctx a call id means "the result
    that answers this call", so every call but the first under an id is
    renamed with :func:`~workingctx.callids.fresh_call_id`, and results are
    paired as the frameworks pair them (pydantic-ai's ``repair_messages``): a
    result answers the oldest call under its id still waiting (calls repeating
    an id in one message are answered in order), and a call under an id that
    earlier calls still waiting hold takes the id from them (later results
    answer the new call). A result that answers no waiting call keeps the name
    of the newest call under its id (a second result for it), or a name no call
    has (an orphan). The names only live inside the window: what goes back to
    the framework is its own objects.
    """

    def __init__(self) -> None:
        self._taken: set[str] = set()  # every local name given
        self._waiting: dict[str, list[str]] = {}  # an id -> the names of its calls still waiting, oldest first
        self._newest: dict[str, str] = {}  # an id -> the name of its newest call
        self._stray: dict[str, str] = {}  # an id no call had, taken as a local name -> what its results are named
        self._searched: dict[str, int] = {}  # an id -> the number its next fresh name is searched from

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
        """
        *call_id* itself, or :func:`~workingctx.callids.fresh_call_id`'s name
        for it when another call has it: found from where the last search for
        *call_id* ended (names are only ever taken), so a history of calls that
        all reuse one id is named in linear time.
        """
        name, number = call_id, self._searched.get(call_id, 2)
        while name in self._taken:  # the names numbered below where the last search ended are all taken
            name, number = f"{call_id}{SEPARATOR}{number}", number + 1
        if name != call_id:
            self._searched[call_id] = number
        self._taken.add(name)
        return name

    def _calls(self, message: Message) -> Message:
        given: dict[str, list[str]] = {}  # an id -> the names of this message's calls under it, in order
        calls: list[ToolCall] = []
        for call in message.tool_calls:
            name = self._name(call.id)
            given.setdefault(call.id, []).append(name)
            calls.append(call if name == call.id else attrs.evolve(call, id=name))
        content = message.content
        if not isinstance(content, str):
            blocks: list[ContentBlock] = []
            for block in content:
                asked = asked_id(block)
                if asked is None:
                    blocks.append(block)
                    continue
                name = self._name(asked)
                given.setdefault(asked, []).append(name)
                blocks.append(block if name == asked else _named_call(block, name))
            content = tuple(blocks)
        for call_id, names in given.items():  # the calls still waiting under these ids can no longer be answered
            self._waiting[call_id] = list(names)
            self._newest[call_id] = names[-1]
        if all(old == new for old, names in given.items() for new in names):
            return message
        return attrs.evolve(message, content=content, tool_calls=tuple(calls))

    def _answered(self, call_id: str) -> str:
        """
        The local name of the call a result under *call_id* answers (see the class).
        """
        waiting = self._waiting.get(call_id)
        if waiting:
            return waiting.pop(0)
        if call_id in self._newest:
            return self._newest[call_id]
        if call_id not in self._taken:
            return call_id
        if call_id not in self._stray:  # a call was renamed to it: the orphan must not answer that call
            self._stray[call_id] = self._name(call_id)
        return self._stray[call_id]

    def _results(self, message: Message) -> Message:
        names = {call_id: self._answered(call_id) for call_id in message.result_ids}
        if all(old == new for old, new in names.items()):
            return message
        changes: dict[str, object] = {}
        if message.tool_call_id is not None:
            changes["tool_call_id"] = names[message.tool_call_id]
        content = message.content
        if not isinstance(content, str):
            changes["content"] = tuple(_named_answer(b, names) for b in content)
        return attrs.evolve(message, **changes)  # type: ignore[arg-type]


def _named_call(block: ContentBlock, name: str) -> ContentBlock:
    """
    *block* asking for its call under the local *name* (a provider's own call included).
    """
    if isinstance(block, ToolCallBlock | RemoteToolCallBlock):
        return attrs.evolve(block, id=name)
    if isinstance(block, ProviderBlock):
        return block.renamed(name)
    return block


def _named_answer(block: ContentBlock, names: Mapping[str, str]) -> ContentBlock:
    """
    *block* answering its call under the call's local name (a provider's own answer included).
    """
    if isinstance(block, ToolResultBlock) and block.call_id in names:
        return attrs.evolve(block, call_id=names[block.call_id])
    if isinstance(block, ProviderBlock) and block.answers is not None and block.answers in names:
        return block.renamed(names[block.answers])
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
