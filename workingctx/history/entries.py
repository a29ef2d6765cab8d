"""
The entries of a recorded context's history: frozen values, one per change.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Literal, TypeAlias, get_args

import attrs

from workingctx import _checks
from workingctx.exceptions import (
    ArgumentTypeError,
    ArgumentValueError,
)
from workingctx.frozen import _INT_BOUND, _INT_LOW, MAX_DEPTH, MAX_INT_DIGITS, FrozenDict, FrozenList
from workingctx.messages import Message, Usage
from workingctx.prefix import PrefixContext

__all__ = [
    "ENTRY_KINDS",
    "OUTCOMES",
    "ContextChange",
    "Entry",
    "EntryKind",
    "ErrorInfo",
    "Finished",
    "Forked",
    "Kept",
    "Merged",
    "NotesChange",
    "Outcome",
    "Started",
    "freeze_json",
]


EntryKind: TypeAlias = Literal[
    "start",
    "user",
    "notice",
    "system",
    "reply",
    "tool_result",
    "context_change",
    "notes",
    "merge",
    "fork",
    "finish",
    "error",
]
"""The closed set of entry kinds (see :data:`ENTRY_KINDS` and the docs' table)."""

ENTRY_KINDS: tuple[str, ...] = get_args(EntryKind)
"""Every entry kind, in the order the docs list them."""

Outcome: TypeAlias = Literal["done", "error", "denied", "cancelled", "interrupted"]
"""How a tool call ended: every outcome but ``"done"`` is an error."""

OUTCOMES: tuple[str, ...] = get_args(Outcome)

Change: TypeAlias = Literal["trim", "summary", "replace_tail", "clear", "slice", "prefix", "restore"]
"""What a ``context_change`` entry did to the context."""

SUMMARY_NAME = "context_summary"  # the name SummaryContextManager gives its summary message

_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
NOTICE_PREFIX = "[notice] "


# -- entry contents ----------------------------------------------------------------------


_count = _checks.count()
_ID_RULE = "1 to 128 letters, digits, '_' or '-'"


_context_id = _checks.matches(_ID, _ID_RULE, fix="leave it out for a random one")
_opt_context_id = _checks.matches(_ID, _ID_RULE, optional=True, fix="leave it out for a random one")


def _messages(value: Iterable[Any]) -> tuple[Message, ...]:
    return _checks.check_items(value, "messages", Message, "a Message")


def _json(value: object) -> Any:
    return freeze_json(value, "value")


def _json_object(value: object) -> FrozenDict:
    if not isinstance(value, Mapping):
        raise _checks.wrong_type(value, "values", "a mapping of JSON data", label="", verb="expected")
    return FrozenDict({key: freeze_json(item, key) for key, item in value.items()})


@attrs.frozen
class Kept:
    """
    A run of the tail as it was before a change: ``messages[start:stop]``.

    Written as the two-item array ``[start, stop]``.
    """

    start: int = attrs.field(validator=_count)
    stop: int = attrs.field(validator=_count)

    def __attrs_post_init__(self) -> None:
        if self.stop < self.start:
            msg = f"Kept({self.start}, {self.stop}): stop must not be before start"
            raise ArgumentValueError(msg, argument="stop", value=self.stop)


Piece: TypeAlias = Kept | Message
"""One piece of a new tail: a run of the old tail, or a new message."""


def _pieces(value: Iterable[Any]) -> tuple[Piece, ...]:
    return _checks.check_items(value, "tail", (Kept, Message), "Kept or a Message")


@attrs.frozen
class Started:
    """
    The content of a ``start`` entry: the context as it was built.
    """

    id: str = attrs.field(validator=_context_id)
    prefix: PrefixContext = attrs.field(factory=PrefixContext, validator=attrs.validators.instance_of(PrefixContext))
    messages: tuple[Message, ...] = attrs.field(default=(), converter=_messages)
    notes: FrozenDict = attrs.field(factory=FrozenDict, converter=_json_object)


@attrs.frozen
class ContextChange:
    """
    The content of a ``context_change`` entry.

    Attributes:
        change: ``"trim"`` (messages dropped), ``"summary"`` (a summary put in
            their place), ``"replace_tail"`` (any other replacement), ``"clear"``,
            ``"slice"`` (a slice taken from the parent), ``"prefix"`` (a fork with
            another prefix) or ``"restore"``.
        tail: The new tail, as runs of the old one and new messages.
        prefix: The new prefix, when it changed.
        to: For a restore, the index of the entry it went back to.
        notes: For a restore, every note as it was then.
        finished: For a restore, whether the context was finished then.
        answer: For a restore, the answer given to ``finish`` then.
    """

    change: Change
    tail: tuple[Piece, ...] = attrs.field(default=(), converter=_pieces)
    prefix: PrefixContext | None = None
    to: int | None = None
    notes: FrozenDict | None = None
    finished: bool = False
    answer: Any = attrs.field(default=None, converter=_json)


@attrs.frozen
class NotesChange:
    """
    The content of a ``notes`` entry: the notes set (JSON, frozen) and the keys removed.
    """

    set: FrozenDict = attrs.field(factory=FrozenDict, converter=_json_object)
    removed: tuple[str, ...] = ()


@attrs.frozen
class Merged:
    """
    The content of a ``merge`` entry.

    Attributes:
        mode: The merge mode (``"reducer"`` for a callable).
        tail: The new tail, as runs of the old one and the messages merged in.
        notes: The notes the merge set.
        usage: The token usage the merged context brought (its own replies and
            its children's, since it forked or was last merged here).
        child: The id of the merged context, when it was recorded.
        models: That usage by model: ``(model name, usage)`` pairs, the name
            ``""`` for replies that named no model (see :meth:`~workingctx.WorkingContext.cost`).
        rekeyed: The calls the merge gave new ids, because a different call
            here used theirs: ``(old id, new id)`` pairs, in order. A result
            that comes later under the old id for one still pending answers it
            under the new one.
    """

    mode: str
    tail: tuple[Piece, ...] = attrs.field(default=(), converter=_pieces)
    notes: FrozenDict = attrs.field(factory=FrozenDict, converter=_json_object)
    usage: Usage = attrs.field(factory=Usage)
    child: str | None = None
    models: tuple[tuple[str, Usage], ...] = ()
    rekeyed: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class Forked:
    """
    The content of a ``fork`` entry: the parent's id, the child's, and the tool
    call that started the child (when it was forked for one).
    """

    parent: str = attrs.field(validator=_context_id)
    id: str = attrs.field(validator=_context_id)
    call: str | None = None


@attrs.frozen
class Finished:
    """
    The content of a ``finish`` entry: the answer (JSON data, frozen), or None.
    """

    answer: Any = attrs.field(default=None, converter=_json)


@attrs.frozen
class ErrorInfo:
    """
    The content of an ``error`` entry: the exception's type name, its text,
    and what was running.
    """

    type: str
    message: str
    during: str | None = None


Content: TypeAlias = Message | Started | ContextChange | NotesChange | Merged | Forked | Finished | ErrorInfo

CONTENT_TYPES: dict[str, type[Any]] = {
    "start": Started,
    "user": Message,
    "notice": Message,
    "system": Message,
    "reply": Message,
    "tool_result": Message,
    "context_change": ContextChange,
    "notes": NotesChange,
    "merge": Merged,
    "fork": Forked,
    "finish": Finished,
    "error": ErrorInfo,
}

_ROLE: dict[str, str] = {
    "user": "user",
    "notice": "user",
    "system": "system",
    "reply": "assistant",
    "tool_result": "tool",
}


_aware = _checks.aware_datetime(fix="use datetime.now(UTC)")


@attrs.frozen
class Entry:
    """
    One change to a recorded context.

    Args:
        kind: One of :data:`ENTRY_KINDS`.
        content: What changed; its type follows the kind (a :class:`Message`
            for ``user``, ``notice``, ``system``, ``reply`` and ``tool_result``;
            :class:`Started`, :class:`ContextChange`, :class:`NotesChange`,
            :class:`Merged`, :class:`Forked`, :class:`Finished` or
            :class:`ErrorInfo` for the others).
        turn: How many model replies the context had received when it was recorded.
        at: When it was recorded (timezone-aware, UTC when recorded here).
        outcome: For a ``tool_result``, how the call ended; None otherwise.

    Entries work with ``match``:

    >>> from workingctx import Message
    >>> from workingctx.history import Entry
    >>> from datetime import UTC, datetime
    >>> entry = Entry("tool_result", Message.tool("timeout", call_id="c1"), 1, datetime.now(UTC), "error")
    >>> match entry:
    ...     case Entry("tool_result", Message(tool_call_id=call), outcome=outcome) if entry.is_error:
    ...         print(call, outcome)
    c1 error
    """

    kind: EntryKind
    content: Content
    turn: int = attrs.field(validator=_count)
    at: datetime = attrs.field(validator=_aware)
    outcome: Outcome | None = None

    def __attrs_post_init__(self) -> None:
        if self.kind not in CONTENT_TYPES:
            msg = f"unknown entry kind {self.kind!r}; the kinds are {', '.join(ENTRY_KINDS)}"
            raise ArgumentValueError(msg, argument="kind", value=self.kind)
        expected = CONTENT_TYPES[self.kind]
        if not isinstance(self.content, expected):
            msg = (
                f"a {self.kind!r} entry holds a {expected.__name__}, got {self.content!r} "
                f"of type {type(self.content).__name__}"
            )
            raise ArgumentTypeError(msg, argument="content", value=self.content, expected=expected.__name__)
        role = _ROLE.get(self.kind)
        if role is not None and isinstance(self.content, Message) and self.content.role != role:
            msg = f"a {self.kind!r} entry holds a {role!r} message, got a {self.content.role!r} one"
            raise ArgumentValueError(msg, argument="content", value=self.content)
        if self.kind == "tool_result" and self.outcome is None:
            msg = f"a 'tool_result' entry needs an outcome, one of {', '.join(OUTCOMES)}; got None"
            raise ArgumentValueError(msg, argument="outcome", value=self.outcome)
        if self.kind != "tool_result" and self.outcome is not None:
            msg = f"outcome is set on tool_result entries only, got outcome={self.outcome!r} on a {self.kind!r} entry"
            raise ArgumentValueError(msg, argument="outcome", value=self.outcome)
        if self.outcome is not None and self.outcome not in OUTCOMES:
            msg = f"unknown outcome {self.outcome!r}; use one of {', '.join(OUTCOMES)}"
            raise ArgumentValueError(msg, argument="outcome", value=self.outcome)

    @property
    def is_error(self) -> bool:
        """
        True for a tool result that did not end ``"done"``, and for an ``error`` entry.
        """
        return self.kind == "error" or (self.outcome is not None and self.outcome != "done")


# -- (de)serialization -------------------------------------------------------------------


def freeze_json(value: Any, key: str, path: str = "") -> Any:
    """
    *value* checked to be JSON data and deep-frozen (a tuple becomes a list,
    a dataclass or attrs instance its fields as a dict).

    Raises:
        ArgumentTypeError: A part is not JSON data; the message names *key*, where in
            the value, and the type found.
        ArgumentValueError: A float is not finite, an int is longer than
            :data:`~workingctx.frozen.MAX_INT_DIGITS` digits, or the value nests
            deeper than :data:`~workingctx.frozen.MAX_DEPTH` levels or contains itself.
    """
    return _freeze_json(value, key, path, MAX_DEPTH, set())


def _freeze_json(value: Any, key: str, path: str, room: int, inside: set[int]) -> Any:
    # A subclass (an enum) becomes its plain type: what a store gives back, with the same digest.
    if value is None or type(value) is str or type(value) is bool:
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        if _INT_LOW < value < _INT_BOUND:
            return int(value)
        msg = (
            f"{key!r}{path} is an int of {value.bit_length()} bits, longer than {MAX_INT_DIGITS} decimal digits "
            "(Python's str() limit, so no store could write it); store it as a string"
        )
        raise ArgumentValueError(msg, argument=key, value=value)
    if isinstance(value, float):
        if math.isfinite(value):
            return float(value)
        msg = f"{key!r}{path} is {value!r}, which JSON cannot hold; store None or a string"
        raise ArgumentValueError(msg, argument=key, value=value)
    if id(value) in inside:
        msg = f"{key!r}{path} contains itself (a cycle), which JSON cannot hold; store a copy without the cycle"
        raise ArgumentValueError(msg, argument=key, value=value)
    if room <= 0:
        msg = f"{key!r}{path} is nested more than {MAX_DEPTH} levels deep; flatten it, or store its deep part as text"
        raise ArgumentValueError(msg, argument=key, value=value)
    inside.add(id(value))
    try:
        return _freeze_container(value, key, path, room - 1, inside)
    finally:
        inside.discard(id(value))


def _freeze_container(value: Any, key: str, path: str, room: int, inside: set[int]) -> Any:
    if isinstance(value, Mapping):
        items: dict[str, Any] = {}
        for name, item in value.items():
            if not isinstance(name, str):
                msg = f"{key!r}{path} has the key {name!r} of type {type(name).__name__}; JSON object keys are str"
                raise ArgumentTypeError(msg, argument=key, value=name, expected="a str key")
            items[str.__str__(name)] = _freeze_json(item, key, f"{path}[{name!r}]", room, inside)
        return FrozenDict(items)
    if isinstance(value, list | tuple):
        return FrozenList(_freeze_json(item, key, f"{path}[{i}]", room, inside) for i, item in enumerate(value))
    if attrs.has(type(value)):
        return _freeze_container(attrs.asdict(value, recurse=False), key, path, room, inside)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return _freeze_container(fields, key, path, room, inside)
    hint = "; use a list" if isinstance(value, set | frozenset) else "; store a plain-data projection of it"
    msg = f"{key!r}{path} is {value!r} of type {type(value).__name__}, which is not JSON data{hint}"
    raise ArgumentTypeError(msg, argument=key, value=value, expected="JSON data")


def check_note_key(key: object) -> str:
    return _checks.check_instance(key, "key", str, "str", label="note keys", fix="use str(key) or a name")


# -- tails -----------------------------------------------------------------------------------
