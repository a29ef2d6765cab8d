"""
Reducers: how updates combine with what a context already holds, and ``ToolResult``.

Message reducers take ``(left, right)`` message sequences and return the new
list; pass one as ``ctx.merge(other, mode=add_messages)``. Value reducers take
``(old, new)`` and return the new value; pass them per scratchpad key as
``ctx.merge(other, scratchpad={"findings": append_items})``. Each is also a
plain function.

>>> from workingctx import Message
>>> left = [Message("user", "hi", id="m1")]
>>> [m.text() for m in add_messages(left, [Message("user", "hi", id="m1"), Message("assistant", "hello")])]
['hi', 'hello']
>>> append_items(["a"], ["b"])
['a', 'b']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

import attrs

from workingctx import _checks, _rekey
from workingctx.context import WorkingContext
from workingctx.exceptions import ArgumentTypeError, InvalidMessageError
from workingctx.frozen import FrozenDict, deep_freeze, thaw
from workingctx.messages import Message, ToolResultBlock, _as_tuple
from workingctx.scopes import surviving_indices
from workingctx.scopes._tools import WITHOUT_COMPLETED_TOOL_SEQUENCES
from workingctx.validity import RuleState

__all__ = [
    "ToolResult",
    "add_messages",
    "add_messages_to",
    "append_items",
    "remove_tool_messages",
    "replace_messages",
]


def _message_list(value: object, what: str) -> list[Message]:
    if isinstance(value, WorkingContext):
        return list(value.messages)
    if isinstance(value, Message):
        argument = what.rpartition("(")[2].rstrip(")")  # "add_messages(left)" names left
        raise _checks.wrong_type(
            value, argument, "a sequence of messages", label=what, fix="wrap a single message in a list"
        )
    return list(_as_tuple(value, Message, what))


def _new_messages(right: Iterable[Message], present: Callable[[str | int], bool]) -> list[Message]:
    """
    The messages of *right* to add: no streaming delta, no explicit id already present or seen.
    """
    seen: set[str | int] = set()
    added: list[Message] = []
    for message in right:
        if message.delta:
            continue
        message_id = message.id
        if message_id is not None:
            if message_id in seen or present(message_id):
                continue
            seen.add(message_id)
        added.append(message)
    return added


# -- message reducers -------------------------------------------------------------


def _added(
    left: Sequence[Message], right: Sequence[Message], state: RuleState, routes: Mapping[str, str]
) -> tuple[list[Message], _rekey.Rekeyer]:
    """
    The new messages of *right*, re-keyed against *left* (whose rule state is
    *state*), and the engine that did it (its ``pairs`` say what it re-keyed).
    """
    ids = {m.id for m in left if m.id is not None}
    new = _new_messages(right, ids.__contains__)
    engine = _rekey.Rekeyer(state, new, routes)
    return [engine.take(message) for message in new], engine


def add_messages(left: Sequence[Message], right: Sequence[Message]) -> list[Message]:
    """
    *left* followed by the messages of *right* that are new: append-only history.

    A message of *right* is skipped when its explicit ``id`` is already in
    *left* (or earlier in *right*), and when it is a streaming chunk
    (``delta=True``). Messages without an id are always added. On a live
    context use :func:`add_messages_to`, which costs O(1) per message.

    A new tool call whose id a *different* call of *left* already uses (two
    sub-agents both numbering their calls ``call_0``) gets a new id, and so do
    the results that answer it (``call_0`` -> ``call_0-2``, see
    :func:`~workingctx.callids.fresh_call_id`): the same lists give the same
    ids every time. A result for ``call_0`` that comes later, while
    ``call_0-2`` waits for its result and ``call_0`` does not, answers
    ``call_0-2``. Through ``ctx.merge(other, mode=add_messages)`` the merge
    records what was re-keyed (see :meth:`~workingctx.WorkingContext.merge`).

    Args:
        left: The messages already there.
        right: The messages to add.

    Returns:
        A new list; neither argument is changed.

    Raises:
        TypeError: An argument is not a sequence of messages.

    >>> from workingctx import Message
    >>> left = [Message("user", "hi", id=1)]
    >>> right = [Message("user", "hi", id=1), Message("assistant", "hel", delta=True), Message("assistant", "hello")]
    >>> [m.text() for m in add_messages(left, right)]
    ['hi', 'hello']
    """
    routes = left._routes if isinstance(left, WorkingContext) else None
    old = _message_list(left, "add_messages(left)")
    new = _message_list(right, "add_messages(right)")
    state = RuleState()
    for message in old:
        state.feed(message)
    added, _ = _added(old, new, state, _rekey.derived_routes(state) if routes is None else routes)
    return old + added


_rekey.REKEYING_REDUCERS[add_messages] = _added


def add_messages_to(ctx: WorkingContext, *messages: Message) -> WorkingContext:
    """
    :func:`add_messages` on a live context: append the new *messages* in place.

    Whether an id is already present is answered by the context's id index, so
    each call costs the messages added, not the length of the context. Calls
    are re-keyed as :func:`add_messages` re-keys them, and a result for a
    re-keyed call still pending answers it under its new id.

    Args:
        ctx: The context to add to.
        messages: The messages to add.

    Returns:
        *ctx*, for chaining.

    Raises:
        TypeError: *ctx* is not a context, or an argument is not a message
            (nothing is added).

    >>> from workingctx import Message, WorkingContext
    >>> ctx = WorkingContext().append(Message("user", "hi", id="m1"))
    >>> add_messages_to(ctx, Message("user", "hi", id="m1"), Message("assistant", "hello", id="m2")).size()
    2
    """
    _checks.check_instance(
        ctx,
        "ctx",
        WorkingContext,
        "a WorkingContext first",
        label="add_messages_to()",
        verb="takes",
        fix="for plain lists use add_messages(left, right)",
    )
    items = _message_list(messages, "add_messages_to(messages)")
    with ctx._tail.lock:
        added, rekeyed = ctx._rekeyed(_new_messages(items, ctx.has_id))
        ctx.extend(added)
        ctx._remember_routes(rekeyed)
    return ctx


def replace_messages(left: Sequence[Message], right: Sequence[Message]) -> list[Message]:  # noqa: ARG001  # reducer signature
    """
    *right*, in place of *left*: the update replaces the history.

    >>> from workingctx import Message
    >>> replace_messages([Message("user", "old")], [Message("user", "new")])
    [Message('user', 'new')]
    """
    return _message_list(right, "replace_messages(right)")


def remove_tool_messages(left: Sequence[Message], right: Sequence[Message] = ()) -> list[Message]:
    """
    *left* then *right*, without their completed tool sequences.

    A completed sequence is an assistant message asking for tool calls, every
    result of those calls and the final answer that used them. A sequence
    still waiting for a result or for its answer is kept whole, and no tool
    result is ever left without its call, nor a call without its results (a
    call whose results never came, with messages after it, goes). Called with
    one list, it cleans that list.

    >>> from workingctx import Message, ToolCall
    >>> history = [
    ...     Message("user", "cert?"),
    ...     Message("assistant", tool_calls=[ToolCall("c1", "openssl")]),
    ...     Message("tool", "notAfter=2026-08-01", tool_call_id="c1"),
    ...     Message("assistant", "It expires on 1 August."),
    ... ]
    >>> [m.text() for m in remove_tool_messages(history)]
    ['cert?']
    """
    messages = _message_list(left, "remove_tool_messages(left)") + _message_list(right, "remove_tool_messages(right)")
    kept = surviving_indices(WITHOUT_COMPLETED_TOOL_SEQUENCES, messages)
    return [messages[i] for i in sorted(kept)]


# -- value reducers -----------------------------------------------------------------


def _items(value: object, what: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        msg = (
            f"append_items() needs lists, got {what}={value!r} of type {type(value).__name__}; "
            f"wrap a single item in a list: [{value!r}]"
        )
        raise ArgumentTypeError(msg, argument=what, value=value, expected="a list")
    return list(value)


def append_items(old: Iterable[Any] | None, new: Iterable[Any] | None) -> list[Any]:
    """
    The items of *old* followed by those of *new*; ``None`` counts as empty.

    Items *new* shares with the start of *old* are not repeated: a fork starts
    from a copy of its parent's list and appends to it, so merging forks with
    ``scratchpad={"key": append_items}`` keeps the parent's items once and
    every fork's additions in merge order.

    Raises:
        TypeError: *old* or *new* is not a list-like value (a str or a dict is
            one item: wrap it in a list).

    >>> append_items([1, 2], [3])
    [1, 2, 3]
    >>> append_items(["parent", "fork 1"], ["parent", "fork 2"])
    ['parent', 'fork 1', 'fork 2']
    >>> append_items(None, ["x"])
    ['x']
    """
    before = _items(old, "old")
    after = _items(new, "new")
    shared = 0
    for left, right in zip(before, after, strict=False):
        if left != right:
            break
        shared += 1
    return before + after[shared:]


# -- ToolResult -------------------------------------------------------------------

_UNSET: Any = object()


def _state(value: object) -> FrozenDict | None:
    if value is None:
        return None
    value = _checks.check_instance(
        value, "state", Mapping, "a mapping of scratchpad keys to values", label="ToolResult(state=...)"
    )
    for key in value:
        _checks.check_instance(key, "state", str, "str", label="ToolResult(state=...) keys")
    return cast("FrozenDict", deep_freeze(dict(value)))


@attrs.frozen(init=False)
class ToolResult:
    """
    What a tool returns when it must also update state: a message for the model, and notes.

    Args:
        message: What the model sees as the tool's result (text, or any
            JSON-like value; deep-frozen). ``content=`` is accepted as an alias.
        state: Scratchpad keys mapped to new values (deep-frozen); keys not
            named are left alone.
        is_error: Marks the call as failed.

    Raises:
        TypeError: Both ``message`` and ``content`` are given, *state* is not a
            mapping with str keys, or *is_error* is not a bool.

    >>> from workingctx import Message, ToolCall, WorkingContext
    >>> ctx = WorkingContext().append(
    ...     Message("user", "Switch to Oslo."),
    ...     Message("assistant", tool_calls=[ToolCall("c1", "select_city", {"city": "Oslo"})]),
    ... )
    >>> result = ToolResult("City updated to 'Oslo'.", state={"selected_city": "Oslo"})
    >>> ctx = result.apply_to(ctx, call_id="c1")
    >>> ctx.messages[-1]
    Message('tool', "City updated to 'Oslo'.", tool_call_id='c1')
    >>> ctx.get("selected_city")
    'Oslo'
    """

    message: Any
    state: FrozenDict | None
    is_error: bool

    def __init__(
        self,
        message: Any = _UNSET,
        state: Mapping[str, Any] | None = None,
        is_error: bool = False,
        *,
        content: Any = _UNSET,
    ) -> None:
        if message is not _UNSET and content is not _UNSET:
            msg = (
                f"ToolResult got both message={message!r} and content={content!r}; "
                "content is an alias of message: pass one of them"
            )
            raise ArgumentTypeError(msg, argument="content", value=content, expected="no content beside message")
        text = content if message is _UNSET else message
        if text is _UNSET:
            text = None
        _checks.check_flag(is_error, "is_error", label="ToolResult(is_error=...)")
        self.__attrs_init__(deep_freeze(text), _state(state), is_error)

    @property
    def content(self) -> Any:
        """
        The same as :attr:`message`.
        """
        return self.message

    def to_message(self, call_id: str, *, name: str | None = None) -> Message:
        """
        The tool message answering *call_id*.

        A text result that is not an error is plain text content; an error, or
        a result that is not text, is one :class:`~workingctx.messages.ToolResultBlock`
        carrying ``is_error`` and ``status``.

        Raises:
            InvalidMessageError: *call_id* is empty or not a str.
        """
        if not isinstance(call_id, str) or not call_id:
            msg = f"a tool result needs the id of the call it answers, got call_id={call_id!r}"
            raise InvalidMessageError(msg)
        if isinstance(self.message, str) and not self.is_error:
            return Message("tool", self.message, tool_call_id=call_id, name=name)
        output: Any = "" if self.message is None else self.message
        block = ToolResultBlock(
            call_id=call_id,
            output=output,
            is_error=self.is_error,
            status="failed" if self.is_error else "completed",
        )
        return Message("tool", (block,), tool_call_id=call_id, name=name)

    def apply_to(
        self,
        ctx: WorkingContext,
        *,
        call_id: str,
        name: str | None = None,
        reducers: Mapping[str, Callable[[Any, Any], Any]] | None = None,
    ) -> WorkingContext:
        """
        Append the tool message answering *call_id* to *ctx*, and write :attr:`state` to its scratchpad.

        Args:
            ctx: The context whose latest matching call this result answers.
            call_id: The id of the call.
            name: The tool's name, when the provider wants it on the result.
            reducers: Per key, ``(old, new) -> value`` to combine a note
                already in the scratchpad with the new value (such as
                :func:`append_items`); other keys are replaced.

        Returns:
            *ctx*, for chaining.

        Raises:
            TypeError: *ctx* is not a context.
            InvalidMessageError: No message in *ctx* asks for *call_id* (the
                result would be an orphan every provider rejects), or the call
                already has its result (a second answer to one call is refused
                too). Nothing changes.
        """
        _checks.check_instance(ctx, "ctx", WorkingContext, "a WorkingContext", label="apply_to()", verb="takes")
        self.to_message(call_id, name=name)  # checks call_id
        call_id = ctx._routed_id(call_id)  # a call re-keyed by a merge while pending answers to its old id too
        message = self.to_message(call_id, name=name)
        # One lock around the check and the change: two threads answering one
        # call cannot both pass the check. The tail indexes calls and answers,
        # so the check costs the same at every length of a run.
        with ctx._tail.lock:
            asked, answered = ctx._tail.call_state(call_id)
            if not asked:
                msg = (
                    f"no message in the context asks for tool call {call_id!r}, so its result would be orphaned; "
                    "append the assistant message with that tool call first, or pass the call's id"
                )
                raise InvalidMessageError(msg)
            if answered >= asked:
                msg = (
                    f"tool call {call_id!r} already has its result in the context; a second one would give the "
                    "model two answers to one call (providers reject it): append a new call for a new result"
                )
                raise InvalidMessageError(msg)
            notes: dict[str, Any] = {}
            if self.state is not None:
                for key, value in thaw(self.state).items():
                    reducer = None if reducers is None else reducers.get(key)
                    if reducer is not None and key in ctx.scratchpad:
                        value = reducer(ctx.scratchpad[key], value)  # noqa: PLW2901  # the reduced value replaces it
                    notes[key] = value
            return ctx.append(message).update_scratchpad(notes)
