"""
WorkingContext: what an agent knows right now, on four independent axes.

* the **prefix**: a frozen :class:`~workingctx.PrefixContext`, sent first on every call;
* the **tail**: the messages, which only grow (append / extend) or are cleared;
* the **scratchpad**: a plain dict of notes the model never sees;
* the **journal**: an append-only :class:`~workingctx.MutationJournal`.

>>> import asyncio
>>> from workingctx import Message, PrefixContext, WorkingContext
>>> ctx = WorkingContext(prefix=PrefixContext(system_prompt="You are a careful research assistant."))
>>> ctx.append(Message("user", "What changed in the pricing table?")).note("ticket", "ENG-4412").size()
1
>>> [m.role for m in ctx.assembled()]
['system', 'user']
>>> asyncio.run(ctx.tokens())
25
"""

from __future__ import annotations

import inspect
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar

import attrs

from workingctx import _checks, _rekey
from workingctx import history as _records
from workingctx._lock import ContextLock
from workingctx._notes import Notes, NotesMark, copy_notes, prepare_notes
from workingctx._tail import Mark, Tail, TailView
from workingctx.exceptions import (
    ArgumentTypeError,
    ArgumentValueError,
    HistoryError,
    MergeError,
    PricingError,
)
from workingctx.frozen import FrozenDict
from workingctx.journal import MutationJournal
from workingctx.messages import Message, RemoteToolCallBlock, ToolCall, ToolCallBlock, Usage
from workingctx.prefix import PrefixContext
from workingctx.scopes import surviving_indices
from workingctx.scopes._exchanges import is_reasoning_only
from workingctx.snapshot import (
    ContextDiff,
    FrozenContext,
    diff_states,
    digest_of_parts,
)
from workingctx.tokens import ApproxTokenCounter, MessageCounter, TokenCounter, whole_counter
from workingctx.validity import STRUCTURAL_RULES, RuleState

if TYPE_CHECKING:
    from workingctx.history import Entry, NotesEdit, Outcome
    from workingctx.persistence.checkpoint import Checkpoint
    from workingctx.scopes import ContextScope, PositionalScope

__all__ = ["ContextLock", "MergeMode", "ScratchpadPolicy", "TailView", "WorkingContext"]

_R = TypeVar("_R")

MessageReducer: TypeAlias = Callable[[Sequence[Message], Sequence[Message]], Sequence[Message]]
MergeMode: TypeAlias = Literal["concat", "union", "delta", "result"] | MessageReducer
"""How :meth:`WorkingContext.merge` combines tails: a mode name, or a reducer
``(left, right) -> messages`` such as :func:`workingctx.reducers.add_messages`."""

ValueReducer: TypeAlias = Callable[[Any, Any], Any]
ScratchpadPolicy: TypeAlias = Literal["last_write_wins", "raise"] | ValueReducer | Mapping[str, ValueReducer]
"""How :meth:`WorkingContext.merge` combines scratchpads: last write wins, raise on a
conflicting key, one reducer ``(old, new) -> value`` for every key, or one per key
(keys without a reducer: last write wins)."""

_MISSING = object()


def _check_messages(values: Sequence[object], what: str) -> None:
    for value in values:
        if not isinstance(value, Message):
            break
    else:
        return  # all messages: the common case, checked without numbering them
    for position, value in enumerate(values):
        if not isinstance(value, Message):
            hint = (
                "; to add several messages from a list use extend()"
                if isinstance(value, list | tuple)
                else "; build one with Message(role, text), e.g. Message('user', 'hi')"
            )
            msg = f"{what}: item {position} is {value!r} of type {type(value).__name__}, not a Message{hint}"
            raise ArgumentTypeError(msg, argument=f"{what}[{position}]", value=value, expected="a Message")


def _check_key(key: object) -> None:
    _checks.check_instance(key, "key", str, "str", label="scratchpad keys", fix="use str(key) or a name")


class WorkingContext:
    """
    A live, mutable working context.

    Args:
        prefix: The frozen head of every request.
        messages: The initial tail.
        scratchpad: Initial notes (copied, writable at every depth), each checked as :meth:`note` checks it.
        journal: A journal to use, or seed entries for a new one (seeds start committed).
        counter: The token counter (default: :class:`~workingctx.ApproxTokenCounter`).
        limit: A declared token ceiling; the caller's policy owns what to do past it.
        shared: Marks a context several coroutines write to. It does not lock
            anything by itself: use :attr:`lock` or :meth:`apply_locked` around
            sequences that must look atomic.
        record: Keep :attr:`history`, an entry per change (see :mod:`workingctx.history`).
            Notes must then be JSON data, and are frozen.
        id: The name a store saves a recorded context under (letters, digits,
            ``_`` and ``-``); random when left out.

    Mutators return the context, so calls chain. A bad argument raises before
    anything changes.
    """

    __slots__ = (
        "_edit_lock",
        "_history",
        "_lock",
        "_marks",
        "_parent_call",
        "_prefix",
        "_prefix_tokens",
        "_routes",
        "_scratch_base",
        "_scratchpad",
        "_tail",
        "_token",
        "journal",
        "limit",
        "shared",
    )

    __hash__ = None  # type: ignore[assignment]  # the live side is not a value

    _history: _records.Recorder | None

    def __init__(
        self,
        *,
        prefix: PrefixContext | None = None,
        messages: Iterable[Message] = (),
        scratchpad: Mapping[str, Any] | None = None,
        journal: MutationJournal[Any] | Iterable[Any] | None = None,
        counter: MessageCounter | None = None,
        limit: int | None = None,
        shared: bool = False,
        record: bool = False,
        id: str | None = None,  # noqa: A002  # the reference's name for it
    ) -> None:
        if prefix is None:
            prefix = PrefixContext()
        _checks.check_instance(prefix, "prefix", PrefixContext, "a PrefixContext")
        if isinstance(messages, str | Message):
            raise _checks.wrong_type(
                messages, "messages", "an iterable of Message values", fix="wrap one message in a list"
            )
        tail = list(messages)
        _check_messages(tail, "messages")
        notes = Notes()
        if scratchpad is not None:
            _checks.check_instance(scratchpad, "scratchpad", Mapping, "a mapping")
            for key in scratchpad:
                _check_key(key)
            notes = Notes(scratchpad, writable=True)
        if journal is None:
            journal = MutationJournal()
        elif not isinstance(journal, MutationJournal):
            journal = MutationJournal(journal)
        if isinstance(counter, MessageCounter):
            counter = whole_counter(counter)  # a name and count_message are enough
        elif counter is not None and not callable(getattr(counter, "estimate", None)):
            raise _checks.wrong_type(
                counter, "counter", "a token counter with estimate(messages)", fix="use ApproxTokenCounter()"
            )
        if limit is not None:
            _checks.check_count(limit, "limit", fix="pass a token count, or None for no limit")
        _checks.check_flag(shared, "shared")
        _checks.check_flag(record, "record")
        if id is not None and not record:
            msg = f"id={id!r} names a recorded context: pass record=True too"
            raise ArgumentValueError(msg, argument="id", value=id)

        if counter is None:
            counter = ApproxTokenCounter()
        # whether the counter counts one message at a time (checked once: protocol checks are slow)
        self._init(prefix, Tail(tail, counter, incremental=isinstance(counter, TokenCounter)), notes, journal)
        self.limit = limit
        self.shared = shared
        if record:
            self._history = _records.start(self, id)

    def _init(
        self,
        prefix: PrefixContext,
        tail: Tail,
        notes: Notes,
        journal: MutationJournal[Any],
        marks: dict[object, int] | None = None,
        bases: dict[object, Mapping[str, Any]] | None = None,
    ) -> None:
        self._prefix = prefix
        self._tail = tail
        self._scratchpad = notes
        self.journal: MutationJournal[Any] = journal
        self._prefix_tokens: int | None = None
        # the locks are made on first use (see lock and edit_notes()): most forks never take them
        self._lock: ContextLock | None = None
        self._edit_lock: threading.Lock | None = None
        self._token = object()
        # token of an ancestor -> the position in the lineage log when this
        # context forked from it (or last merged into it): a delta is what was appended since
        self._marks: dict[object, int] = {} if marks is None else marks
        # (token of the parent, call id) for a context forked for a pending call
        self._parent_call: tuple[object, str] | None = None
        # token of the parent -> the notes (frozen, or copies) when this context forked from it
        self._scratch_base: dict[object, Mapping[str, Any]] = {} if bases is None else bases
        # the history of a recorded context (None: not recorded)
        self._history = None
        # old id -> new id of each call a merge re-keyed while it was pending: its result may
        # still come under the old id (see _rekey.route_results); kept while the call is pending
        self._routes: dict[str, str] = {}

    # -- construction from other states ----------------------------------------

    @classmethod
    def from_snapshot(cls, snapshot: FrozenContext) -> WorkingContext:
        """
        A live, writable context from a snapshot: the scratchpad is thawed at
        every depth and the journal's entries start committed.

        The one way from a snapshot to a context: :meth:`FrozenContext.to_context`
        and :func:`~workingctx.persistence.rehydrate` call it. The context shares frozen
        values with the snapshot (messages, prefix, journal entries) and no
        list, dict or set, so no write to either reaches the other.
        """
        _checks.check_instance(snapshot, "snapshot", FrozenContext, "a FrozenContext", owner="from_snapshot")
        ctx = cls(prefix=snapshot.prefix, scratchpad=dict(snapshot.scratchpad), journal=snapshot.journal)
        ctx._tail = Tail.from_snapshot(
            snapshot.messages, snapshot._chain, ctx._tail.counter, incremental=ctx._tail.incremental
        )
        return ctx

    def _spawn(
        self, tail: Tail, scratchpad: Notes, marks: dict[object, int], base: Mapping[str, Any]
    ) -> WorkingContext:
        """
        A child context holding *tail* and *scratchpad*, forked from this one
        when the lineage log was at *marks* and the notes were *base*.
        """
        child = WorkingContext.__new__(WorkingContext)
        # the baselines towards older ancestors are shared: they are never changed, only replaced
        bases = {**self._scratch_base, self._token: base} if self._scratch_base else {self._token: base}
        child._init(self._prefix, tail, scratchpad, self.journal._seed(), marks, bases)
        if self._routes:
            child._routes = dict(self._routes)
        child.limit = self.limit
        child.shared = self.shared
        return child

    # -- the axes ----------------------------------------------------------------

    @property
    def prefix(self) -> PrefixContext:
        """
        The frozen prefix. Build a new context (or :meth:`with_prefix`) to change it.
        """
        return self._prefix

    @property
    def messages(self) -> tuple[Message, ...]:
        """
        The tail, as a tuple (a snapshot of this moment; it does not follow later appends).
        """
        return self._tail.messages()

    @property
    def scratchpad(self) -> dict[str, Any]:
        """
        The live scratchpad dict; on a recorded context a read-only copy
        (change notes with :meth:`note` or :meth:`edit_notes`).

        A note read out of it is the note: changing it in place is seen by the
        next :meth:`freeze` and :meth:`digest`. Plain data written to it is
        copied (see :meth:`note`).
        """
        if self._history is not None:
            return FrozenDict(self._scratchpad.raw())
        return self._scratchpad.as_dict()

    @property
    def counter(self) -> TokenCounter:
        """
        The token counter this context counts with.
        """
        return self._tail.counter

    @property
    def lock(self) -> ContextLock:
        """
        The context's lock, for sequences of mutations that must look atomic
        to other coroutines (``async with ctx.lock: ...``).

        It works under every event loop, one after another (``asyncio.run()``
        per request) or at once on several threads.
        """
        lock = self._lock
        if lock is None:
            with self._tail.lock:  # two first uses at once make one lock
                lock = self._lock
                if lock is None:
                    lock = self._lock = ContextLock()
        return lock

    def size(self) -> int:
        """
        The number of messages in the tail (the prefix is not counted).
        """
        return len(self._tail)

    def get(self, key: str, default: Any = None) -> Any:
        """
        The scratchpad value under *key*, or *default*.
        """
        return self._scratchpad.get(key, default)

    def assembled(self) -> list[Message]:
        """
        What a provider sees: the prefix rendered to messages, then the tail.
        A new list on every call.
        """
        return [*self._prefix.as_messages(), *self._tail.messages()]

    def tail_view(self) -> TailView:
        """
        A read-only view of the tail as it is now, in O(1), that also knows
        where the system messages are (found incrementally, once per message)
        and carries the prefix's messages (``prefix_messages``).

        Positional scopes such as :class:`~workingctx.TokenBudget` use it to
        avoid a pass over the whole tail, and a budget counts the prefix it
        carries; :meth:`slice` passes one.
        """
        view = self._tail.view()
        view.prefix_messages = tuple(self._prefix.as_messages())
        return view

    def has_id(self, message_id: str | int) -> bool:
        """
        Whether a message with this explicit ``id`` is in the tail (O(1) after the first call).
        """
        return self._tail.has_id(message_id)

    # -- mutators ----------------------------------------------------------------

    def append(self, *messages: Message) -> WorkingContext:
        """
        Append messages to the tail.

        Raises:
            TypeError: an argument is not a :class:`Message` (nothing is appended).
        """
        _check_messages(messages, "append()")
        if self._routes:
            messages = tuple(self._routed(messages))
        if self._history is not None:
            self._history.append(self, messages)
            return self
        self._tail.extend(messages)
        return self

    def extend(self, messages: Iterable[Message]) -> WorkingContext:
        """
        Append every message of an iterable to the tail.

        Raises:
            TypeError: an item is not a :class:`Message` (nothing is appended).
        """
        if isinstance(messages, Message | str):
            raise _checks.wrong_type(
                messages, "messages", "an iterable of messages", owner="extend()", fix="use append() for one message"
            )
        items = list(messages)
        _check_messages(items, "extend()")
        if self._routes:
            items = self._routed(items)
        if self._history is not None:
            self._history.append(self, items)
            return self
        self._tail.extend(items)
        return self

    def clear_messages(self) -> WorkingContext:
        """
        Empty the tail. The prefix, scratchpad and journal are untouched.
        """
        if self._history is not None:
            self._history.replace(self, [], "clear")
            return self
        self._tail.clear()
        return self

    def replace_tail(self, messages: Iterable[Message]) -> WorkingContext:
        """
        Replace the tail in one step, as a context manager does when it trims.

        A replacement is not an append: a later ``merge(self, mode="delta")``
        into the context this one forked from brings what this context
        appended, whatever was replaced since (a trim, a summary). The leading
        messages that stay (the same objects, in the same places) keep their
        digests, which are not computed again.

        Raises:
            TypeError: an item is not a :class:`Message` (nothing changes).
        """
        if isinstance(messages, Message | str):
            raise _checks.wrong_type(messages, "messages", "an iterable of messages", owner="replace_tail()")
        items = list(messages)
        _check_messages(items, "replace_tail()")
        if self._history is not None:
            self._history.replace(self, items)
            return self
        self._replace(items)
        return self

    def _replace(self, items: list[Message]) -> None:
        self._tail.replace(items)

    # -- results for re-keyed calls --------------------------------------------------

    def _routed(self, messages: Sequence[Message]) -> list[Message]:
        """
        *messages* with the results for calls a merge re-keyed while they were
        pending sent to the calls' new names (see :meth:`merge`).
        """
        with self._tail.lock:
            pending = _rules(self._tail.view()).pending()[1]
            return _rekey.route_results(messages, self._routes, pending)

    def _routed_id(self, call_id: str) -> str:
        """
        The name the pending call a result for *call_id* answers goes by here.
        """
        if not self._routes:
            return call_id
        with self._tail.lock:
            pending = _rules(self._tail.view()).pending()[1]
            new = self._routes.get(call_id)
            return new if new is not None and new in pending and call_id not in pending else call_id

    def _remember_routes(self, pairs: Sequence[tuple[str, str]]) -> None:
        """
        Keep the route of every re-keyed call still pending (and only those).
        """
        if not pairs and not self._routes:
            return
        with self._tail.lock:
            pending = set(_rules(self._tail.view()).pending()[1])
            routes = {old: new for old, new in self._routes.items() if new in pending}
            routes.update((old, new) for old, new in pairs if new in pending)
            self._routes = routes

    def _rekeyed(self, messages: Sequence[Message]) -> tuple[list[Message], tuple[tuple[str, str], ...]]:
        """
        *messages* as they join the tail: calls whose ids are in use re-keyed,
        results following them, and what was re-keyed. Call under the tail lock.
        """
        engine = _rekey.Rekeyer(_rules(self._tail.view()), messages, self._routes)
        return [engine.take(message) for message in messages], tuple(engine.pairs)

    def _set_notes(self, notes: Mapping[str, Any], removed: Iterable[str], *, replace: bool = False) -> None:
        """
        Set and remove notes as they are (the history checked them already).
        """
        with self._tail.lock:
            if replace:
                self._scratchpad.replace_all(notes)
                return
            for key in removed:
                self._scratchpad.pop(key, None)
            self._scratchpad.update(notes)

    def _set_prefix(self, prefix: PrefixContext) -> None:
        self._prefix = prefix
        self._prefix_tokens = None

    def note(self, key: str, value: Any) -> WorkingContext:
        """
        Set one scratchpad note.

        Plain JSON-like data (dicts, lists, str, numbers, bool, None) is copied,
        so later changes to your own object do not reach the note; change it
        through :attr:`scratchpad` or :meth:`get`, or set it again. Anything
        else is kept as it is. A note costs its size once, when it is set or
        first read: later freezes, digests and forks reuse it while it is unchanged.

        Raises:
            TypeError: *key* is not a str.
            PayloadError: No note can keep *value*: it contains itself, nests
                more than :data:`~workingctx.frozen.MAX_DEPTH` levels, or holds
                (at any depth) a NaN, an infinity or an int longer than
                :data:`~workingctx.frozen.MAX_INT_DIGITS` digits. The message
                names the note and the path; nothing changes.
        """
        if type(key) is not str:
            _check_key(key)
        if self._history is not None:
            self._history.set_notes(self, {key: value})
            return self
        with self._tail.lock:
            self._scratchpad._put(key, value)  # what notes[key] = value does, one call shorter
        return self

    def update_scratchpad(self, notes: Mapping[str, Any]) -> WorkingContext:
        """
        Set several scratchpad notes at once (each as :meth:`note` sets it).

        Raises:
            TypeError: *notes* is not a mapping, or a key is not a str (nothing is set).
            PayloadError: No note can keep one of the values (see :meth:`note`; nothing is set).
        """
        _checks.check_instance(notes, "notes", Mapping, "a mapping", owner="update_scratchpad()")
        for key in notes:
            _check_key(key)
        if self._history is not None:
            self._history.set_notes(self, notes)
            return self
        with self._tail.lock:
            self._scratchpad.update(notes)
        return self

    def with_prefix(self, prefix: PrefixContext) -> WorkingContext:
        """
        A fork of this context with another prefix: the one deliberate way to
        change what every request starts with (and lose the provider's cache).
        """
        _checks.check_instance(prefix, "prefix", PrefixContext, "a PrefixContext")
        child = self.fork()
        child._set_prefix(prefix)
        if child._history is not None:
            child._history.derived(child, "prefix", child.messages, prefix)
        return child

    # -- tokens ------------------------------------------------------------------

    def count_tokens(self) -> int:
        """
        The token count of :meth:`assembled`, synchronously, with the context's
        counter. Each message is counted once; after an append only the new
        messages are counted.
        """
        counter = self._tail.counter
        if self._prefix_tokens is None:
            self._prefix_tokens = counter.count(self._prefix.as_messages())
        running = self._tail.running()
        if running is None:
            msg = f"count_tokens() needs a counter with count_message(); {counter!r} is async only: await tokens()"
            raise TypeError(msg)
        return self._prefix_tokens + running.total

    async def tokens(self) -> int:
        """
        The token count of :meth:`assembled` (prefix and tail).

        Counters with a synchronous per-message path are counted incrementally;
        any other counter is awaited on the whole assembled transcript.
        """
        if self._tail.incremental:
            return self.count_tokens()
        return int(await self._tail.counter.estimate(self.assembled()))

    # -- fork, merge, slice --------------------------------------------------------

    def fork(self, *, for_call: str | None = None) -> WorkingContext:
        """
        An independent copy for a sub-agent.

        The child gets its own messages, a deep copy of the scratchpad, a
        fresh journal seeded with this one's entries (committed), and the same
        prefix object (frozen, so sharing it is safe and keeps the cache key).
        A fork costs the same at every length: the child shares this context's
        message list, which only ever grows at its end, and neither sees what
        the other appends (the first to append after the fork appends in place;
        the other, if it appends too, copies the list once, when its messages
        are next read).
        Counter, limit and ``shared`` are inherited; the lock is new. The child
        remembers where it forked, for ``merge(child, mode="delta")``: what it
        appends from now on is its delta.

        Args:
            for_call: The id of a pending tool call (see :attr:`pending_calls`)
                that the sub-agent answers. The child starts without the
                unanswered exchange (the assistant message making the call, and
                the results it already has), since a request ending in
                unanswered calls is invalid, and remembers the id as
                :attr:`parent_call_id`; ``merge(child, mode="result")`` then
                closes the call with the child's answer.

        Raises:
            MergeError: *for_call* is not the id of a pending call here.

        >>> from workingctx import Message, ToolCall, WorkingContext
        >>> ctx = WorkingContext(messages=[Message("user", "Check the certificate of example.com.")])
        >>> _ = ctx.append(Message("assistant", tool_calls=(ToolCall("c1", "delegate", {"host": "example.com"}),)))
        >>> [call.id for call in ctx.pending_calls]
        ['c1']
        >>> child = ctx.fork(for_call="c1")
        >>> child.parent_call_id, [m.role for m in child.messages]
        ('c1', ['user'])
        >>> _ = child.append(Message("assistant", "It expires on 1 August."))
        >>> [m.role for m in ctx.merge(child, mode="result").messages], ctx.messages[-1].text()
        (['user', 'assistant', 'tool'], 'It expires on 1 August.')
        """
        if for_call is not None:
            _checks.check_instance(for_call, "for_call", str, "a tool call id (a str)")
            for_call = self._routed_id(for_call)  # the old id of a call a merge re-keyed names it too
        parent = self._tail
        with parent.lock:
            # the marks towards older ancestors are positions in the shared lineage log
            appended = parent.appended
            if self._marks:
                marks = {**self._marks, self._token: appended}
                retain = min(marks.values())
            else:
                marks, retain = {self._token: appended}, appended
            if for_call is None:
                tail = parent.copy(retain=retain)
            else:
                view = parent.view()
                start = self._pending_exchange_start(view, for_call)
                tail = parent.copy(list(view[:start]), retain=retain)
            notes, base = self._scratchpad.fork()
            child = self._spawn(tail, notes, marks, base)
        if for_call is None:
            child._prefix_tokens = self._prefix_tokens
        else:
            child._parent_call = (self._token, for_call)
        if self._history is not None:
            child._history = self._history.fork(self, child, for_call)
        return child

    def _pending_exchange_start(self, view: TailView, call_id: str) -> int:
        """
        Where the exchange of the pending call *call_id* starts (its reasoning included).
        """
        at, ids = _rules(view).pending()
        if call_id not in ids:
            known = f"the pending calls are {', '.join(map(repr, ids))}" if ids else "no call is pending"
            msg = (
                f"fork(for_call={call_id!r}): {call_id!r} is not a pending tool call of this context ({known}); "
                "fork for a call the newest assistant message made and that has no result yet"
            )
            raise MergeError(msg, ids=(call_id,))
        return at - 1 if at > 0 and is_reasoning_only(view[at - 1]) else at

    @property
    def pending_calls(self) -> tuple[ToolCall, ...]:
        """
        The tool calls that wait for their result at the end of the tail, in order.

        They are the calls of the newest assistant message that asked for
        tools, when only results (or nothing) came after it; a call that other
        messages followed without its result is not pending but broken (see
        :func:`workingctx.validity.check_messages`). Costs only what was
        appended since the last look.
        """
        with self._tail.lock:
            view = self._tail.view()
            at, ids = _rules(view).pending()
            if not ids:
                return ()
            return _calls_of(view[at], ids)

    @property
    def parent_call_id(self) -> str | None:
        """
        The id of the call this context was forked for (``fork(for_call=...)``), or None.
        """
        if self._parent_call is not None:
            return self._parent_call[1]
        return None if self._history is None else self._history.parent_call_id

    def slice(self, scope: ContextScope | PositionalScope) -> WorkingContext:
        """
        A new private context holding the messages *scope* keeps, in order.

        A slice is a fork whose tail was replaced: the prefix is shared,
        scratchpad and journal are copied as by :meth:`fork`, writes to the
        slice never reach this context, and ``merge(slice, mode="delta")``
        brings back what the slice appended.

        The slice keeps the prefix, so a :class:`~workingctx.TokenBudget` in
        *scope* counts the prefix first: ``ctx.slice(TokenBudget(n))`` is a
        request of at most *n* tokens, as the budget counts them (unless the
        prefix and the system messages alone are more). Wrap the scope in
        :class:`~workingctx.ValidRequest` for a request a provider accepts.
        """
        with self._tail.lock:
            view = self.tail_view()
            notes, base = self._scratchpad.fork()
            appended = self._tail.appended
        kept = surviving_indices(scope, view)
        marks = {**self._marks, self._token: appended}
        picked = view._pick(sorted(kept))  # ascending and unique, as _pick needs
        tail = self._tail.copy(picked, retain=min(marks.values()))
        child = self._spawn(tail, notes, marks, base)
        child.shared = False
        if self._history is not None:
            child._history = self._history.fork(self, child)
            child._history.derived(child, "slice", view, None)
        return child

    def fit(self, max_tokens: int, *, pin: ContextScope | PositionalScope | None = None) -> WorkingContext:
        """
        A new private context whose whole request fits *max_tokens*: the prefix
        counts, and so does every tail message kept.

        It keeps what ``TokenBudgetContextManager(max_tokens, low_watermark=max_tokens, pin=pin)``
        keeps: every system message, the pinned messages with their exchanges,
        the newest whole exchanges that fit (from a user turn when one fits),
        and a user message first; a valid request, even when that means going
        over (see :class:`~workingctx.TokenBudgetContextManager`). This context
        is left as it is, and the result merges back like a slice.

        Raises:
            TypeError: *max_tokens* is not an int, or *pin* is not a scope.
            ScopeError: *max_tokens* is negative.

        >>> from workingctx import Message, PrefixContext, WorkingContext
        >>> ctx = WorkingContext(prefix=PrefixContext(system_prompt="Be brief."))
        >>> for i in range(5):
        ...     _ = ctx.append(Message("user", f"question {i}"), Message("assistant", f"answer {i}"))
        >>> fitted = ctx.fit(40)
        >>> [m.text() for m in fitted.messages], fitted.count_tokens() <= 40, ctx.size()
        (['question 3', 'answer 3', 'question 4', 'answer 4'], True, 10)
        """
        from workingctx.managers import TokenBudgetContextManager  # noqa: PLC0415  # managers import this module
        from workingctx.scopes import Since  # noqa: PLC0415  # see above

        manager = TokenBudgetContextManager(max_tokens, low_watermark=max_tokens, pin=pin)
        fitted = self.slice(Since(0))
        manager.trim_context(fitted)
        return fitted

    def merge(
        self,
        other: WorkingContext,
        mode: MergeMode = "concat",
        *,
        scratchpad: ScratchpadPolicy = "last_write_wins",
        result: str | Message | None = None,
    ) -> WorkingContext:
        """
        Fold another context into this one (fan-in).

        Args:
            other: The context to merge, typically a fork of this one.
            mode: ``"concat"`` appends its messages verbatim; ``"union"`` adds
                only messages not already here (a multiset union: merging the
                same context twice equals merging it once); ``"delta"`` appends
                what *other* did since it forked from this context (or last
                merged into it): the messages it appended or brought in by its
                own merges, in order, whatever it replaced meanwhile (a trim, a
                summary, ``replace_tail``), never one it inherited and never a
                summary a manager wrote; ``"result"`` closes the call *other*
                was forked for (``fork(for_call=...)``) with one tool result,
                the child's final answer (or *result*), and leaves the child's
                transcript out. A callable ``(left, right) -> messages``
                decides instead (see :mod:`workingctx.reducers`).
            scratchpad: How notes combine (see :data:`ScratchpadPolicy`). In
                ``"delta"`` and ``"result"`` modes only notes the fork changed are considered.
            result: With ``mode="result"``: the text of the tool result, or the
                tool message itself; by default the child's final answer (its
                newest assistant message without tool calls).

        The other journal's uncommitted entries are applied here as they are,
        and marked committed there, as is the delta mode's watermark: merging
        the same child twice does not apply its work twice.

        Call ids are local names. An incoming tool call whose id a *different*
        call here already uses (two sub-agents both numbering their calls
        ``call_0``) comes in under a new id, and so does every result that
        answers it: :func:`~workingctx.callids.fresh_call_id` of the old id,
        given every id the merged tail uses (``call_0`` -> ``call_0-2``), so
        the same merge gives the same ids in every process. The same call
        (same id, same call, such as the history a fork shares with its
        parent under ``"union"`` and ``"delta"``) stays one call. The map is
        recorded: a journal entry ``{"kind": "merge", "mode": ..., "rekeyed":
        [[old, new], ...]}`` and, on a recorded context, the merge entry's
        ``rekeyed``. A result that comes later under the old id for a call
        re-keyed while it was pending (``append``, ``extend``, ``append_result``,
        :func:`~workingctx.reducers.add_messages_to`,
        :meth:`~workingctx.reducers.ToolResult.apply_to`, or a later merge)
        answers it under the new id, as long as the old id is not pending
        itself; ``fork(for_call=old id)`` forks for it too.

        >>> from workingctx import ToolCall
        >>> parent = WorkingContext().append(Message("user", "Compare Oslo and Rome."))
        >>> oslo, rome = parent.fork(), parent.fork()
        >>> _ = oslo.append(Message("assistant", tool_calls=[ToolCall("call_0", "weather", {"city": "Oslo"})]))
        >>> _ = oslo.append(Message("tool", "rain", tool_call_id="call_0"))
        >>> _ = rome.append(Message("assistant", tool_calls=[ToolCall("call_0", "weather", {"city": "Rome"})]))
        >>> _ = parent.merge(oslo, mode="delta").merge(rome, mode="delta")
        >>> [c.id for c in parent.pending_calls], list(parent.journal)[-1]["rekeyed"]
        (['call_0-2'], [['call_0', 'call_0-2']])
        >>> _ = parent.append(Message("tool", "sun", tool_call_id="call_0"))  # Rome's result, under its old id
        >>> parent.messages[-1].tool_call_id
        'call_0-2'

        Raises:
            MergeError: ``"delta"`` with a context that is not a fork of this one,
                ``"result"`` with one not forked for a call of this one (or a
                call no longer pending, or a child without an answer), a merge
                that would leave a result whose call is nowhere, a second result
                for one call, or a call without its result (``ids`` names them),
                an unknown mode, or a conflicting note under ``scratchpad="raise"``.
                Nothing changes.
            PayloadError: A merged note (as a reducer made it, or as it was
                changed in place in *other*) is one no note can keep (see
                :meth:`note`). Nothing changes.
        """
        _checks.check_instance(other, "other", WorkingContext, "a WorkingContext", owner="merge()")
        # Their messages and watermark are read together, then released, so two
        # contexts merging into each other on two threads cannot deadlock.
        if result is not None and mode != "result":
            msg = f"merge(result=...) goes with mode='result' (closing the call a child was forked for), not {mode!r}"
            raise MergeError(msg)
        with other._tail.lock:
            # a delta or a result reads only what the other appended: its tail is not read (nor copied)
            theirs = () if mode in ("delta", "result") else other._tail.messages()
            since = other._marks.get(self._token)
            own = other._tail.appended_since(since) if since is not None and mode in ("delta", "result") else []
            position = other._tail.appended
        with self._tail.lock:
            incoming, whole, base, rekeyed = self._incoming_messages(other, theirs, since, mode, own, result)
            if whole and self._tail.kept(incoming) == len(self._tail):
                # a reducer that kept the tail as it was appends the rest
                incoming, whole = incoming[len(self._tail) :], False
            self._refuse_breaks(incoming, whole=whole)
            notes = self._incoming_notes(other, mode, scratchpad)

            if self._history is not None:
                appended, replacement = (None, incoming) if whole else (incoming, None)
                self._history.merge(self, other, mode, appended, replacement, notes, rekeyed)
            else:
                prepared = prepare_notes(notes.items())  # a note no context can keep is refused here
                # Everything is checked: apply.
                if whole:
                    self._tail.replace(incoming)
                else:
                    self._tail.extend(incoming)
                self._scratchpad._put_all(prepared)
                self._remember_routes(rekeyed)
            self.journal.apply(other.journal.diff())
            if rekeyed:
                name = mode if isinstance(mode, str) else "reducer"
                self.journal.record({"kind": "merge", "mode": name, "rekeyed": [list(pair) for pair in rekeyed]})
        other.journal.mark_committed()
        if base is not None:
            with other._tail.lock:
                other._marks[self._token] = position
                other._tail.retain(min(other._marks.values()))
                other._scratch_base[self._token] = other._scratchpad.fork(child=False)[1]
        return self

    def _refuse_breaks(self, incoming: list[Message], *, whole: bool) -> None:
        """
        Refuse a merge that would break a tool rule the tail does not break
        already: *incoming* is appended, or becomes the *whole* tail.
        """
        view = self._tail.view()
        if not whole:
            if not incoming:
                return
            new = [p for p in _rules(view).probe(incoming).problems if p.rule in _MERGE_BREAKS]
        else:
            before = _broken(view)
            after = RuleState()
            for message in incoming:
                after.feed(message)
            new = [p for p in after.problems if p.rule in _MERGE_BREAKS and not before.pop((p.rule, p.ids), 0)]
        if new:
            ids = tuple(dict.fromkeys(i for p in new for i in p.ids))
            lines = "; ".join(f"{p.rule} ({', '.join(map(repr, p.ids)) or 'no id'}): {p.message}" for p in new)
            msg = (
                f"merge refused, nothing changed: it would break the provider rules for the tool calls "
                f"{', '.join(map(repr, ids)) or '(none)'}: {lines}"
            )
            raise MergeError(msg, ids=ids)

    def _incoming_messages(
        self,
        other: WorkingContext,
        theirs: tuple[Message, ...],
        since: int | None,
        mode: MergeMode,
        own: list[Message],
        given: str | Message | None,
    ) -> tuple[list[Message], bool, int | None, tuple[tuple[str, str], ...]]:
        """
        The messages a merge brings, whether they are the whole new tail (a
        reducer's result) rather than an append, the delta watermark, and the
        calls re-keyed on the way in (old id, new id).
        """
        if mode == "concat":
            return self._appended(theirs, None)
        if mode == "union":
            return self._union(theirs)
        if mode == "delta":
            if since is None:
                msg = (
                    "merge(mode='delta') needs a fork of this context (or of a fork of it): "
                    f"{other!r} was not forked from {self!r}; use mode='union' to merge an unrelated context"
                )
                raise MergeError(msg)
            return self._appended(own, since)
        if mode == "result":
            return [self._result_message(other, own, given)], False, since, ()
        if callable(mode):
            for reducer, twin in _rekey.REKEYING_REDUCERS.items():
                if reducer is mode:  # add_messages: it re-keys, and says what
                    added, engine = twin(self._tail.messages(), theirs, _rules(self._tail.view()), self._routes)
                    return added, False, None, tuple(engine.pairs)
            result = list(mode(self._tail.messages(), theirs))
            _check_messages(result, f"merge reducer {mode!r} returned")
            return result, True, None, ()
        msg = (
            f"unknown merge mode {mode!r}; use 'concat', 'union', 'delta', 'result' "
            "or a reducer (left, right) -> messages"
        )
        raise MergeError(msg)

    def _appended(
        self, messages: Sequence[Message], since: int | None
    ) -> tuple[list[Message], bool, int | None, tuple[tuple[str, str], ...]]:
        """
        What a ``"concat"`` or ``"delta"`` merge appends: every message, re-keyed.
        """
        added, rekeyed = self._rekeyed(messages)
        return added, False, since, rekeyed

    def _union(self, theirs: Sequence[Message]) -> tuple[list[Message], bool, None, tuple[tuple[str, str], ...]]:
        """
        What a ``"union"`` merge appends: the messages not here already, by
        value, as a multiset, an exchange at a time.

        An exchange (a call and the results right after it) found here whole,
        under its own ids or under the ones an earlier merge gave it, adds
        nothing. One whose call is here and still pending adds the results
        not here yet. Any other comes in whole, its calls re-keyed when their
        ids are in use: the same call answered differently is another call.
        """
        view = self._tail.view()
        state = _rules(view)
        present = Counter(self._tail.messages())
        engine = _rekey.Rekeyer(state, theirs, self._routes)
        added: list[Message] = []
        position, size = 0, len(theirs)
        while position < size:
            head = theirs[position]
            end = _rekey.exchange_end(theirs, position)
            if end == position:  # a message that asks for no call
                position += 1
                if present[head] > 0:
                    present[head] -= 1
                else:
                    added.append(engine.take(head))
                continue
            unit = list(theirs[position:end])
            position = end
            match = self._union_match(unit, view, state, present)
            if match is None:
                added.extend(engine.take(message) for message in unit)
                continue
            names, here = match
            engine.alias({call_id: names.get(call_id, call_id) for call_id in head.call_ids})
            present[here[0]] -= 1
            for message, found in zip(unit[1:], here[1:], strict=True):
                if present[found] > 0:
                    present[found] -= 1
                else:
                    added.append(engine.take(message))
        return added, False, None, tuple(engine.pairs)

    @staticmethod
    def _union_match(
        unit: list[Message], view: TailView, state: RuleState, present: Counter[Message]
    ) -> tuple[dict[str, str], list[Message]] | None:
        """
        Where the exchange *unit* is here already: the names its calls go by
        here and its messages under them. A copy that holds it whole comes
        first; else the pending call at the end, whose results are still
        coming; else None (it is another exchange).
        """
        at, waiting = state.pending()
        partial = None
        for names in _rekey.matchings(unit[0], view, state, lambda message: present[message] > 0):
            here = [_rekey.rename(message, names, names) for message in unit]
            if all(present[message] >= count for message, count in Counter(here).items()):
                return names, here
            first = here[0].call_ids[0]
            if partial is None and waiting and state.asked.get(first) == at:
                partial = names, here
        return partial

    def _result_message(self, other: WorkingContext, own: list[Message], result: str | Message | None) -> Message:
        """
        The one tool result a ``"result"`` merge of *other* appends.
        """
        forked = other._parent_call
        if forked is None or forked[0] is not self._token:
            msg = (
                f"merge(mode='result') takes a context forked from this one with fork(for_call=...); {other!r} "
                "was not; use mode='delta' to bring back a plain fork's messages"
            )
            raise MergeError(msg)
        call_id = forked[1]
        view = self._tail.view()
        at, ids = _rules(view).pending()
        if call_id not in ids:
            msg = (
                f"merge(mode='result'): the call {call_id!r} is no longer pending here (it has its result "
                "already, or other messages came after it); a sub-agent's result is merged once, right after the call"
            )
            raise MergeError(msg, ids=(call_id,))
        name = _calls_of(view[at], (call_id,))[0].name
        if result is None:
            answers = [m for m in own if m.role == "assistant" and not m.call_ids and m.text().strip()]
            if not answers:
                msg = (
                    f"merge(mode='result'): the sub-agent for {call_id!r} has no final answer (an assistant "
                    "message without tool calls); append one, or pass result='...'"
                )
                raise MergeError(msg, ids=(call_id,))
            return Message("tool", answers[-1].text(), tool_call_id=call_id, name=name)
        if isinstance(result, str):
            return Message("tool", result, tool_call_id=call_id, name=name)
        if not isinstance(result, Message):
            raise _checks.wrong_type(result, "result", "a str or a tool Message", label="merge(result=...)")
        if result.role != "tool" or (result.tool_call_id or call_id) != call_id:
            msg = (
                f"merge(result=...) must be a tool message answering {call_id!r}, got a {result.role!r} message "
                f"answering {result.tool_call_id!r}"
            )
            raise MergeError(msg, ids=(call_id,))
        if result.tool_call_id is None:
            return attrs.evolve(result, tool_call_id=call_id)
        return result

    def _incoming_notes(self, other: WorkingContext, mode: MergeMode, policy: ScratchpadPolicy) -> dict[str, Any]:
        if not (policy in ("last_write_wins", "raise") or isinstance(policy, Mapping) or callable(policy)):
            msg = f"unknown scratchpad policy {policy!r}; use 'last_write_wins', 'raise', a reducer or a mapping"
            raise MergeError(msg)
        theirs = other._scratchpad.plain()
        if mode in ("delta", "result"):
            before = other._scratch_base.get(self._token, {})
            theirs = {k: v for k, v in theirs.items() if before.get(k, _MISSING) != v}
        mine = self._scratchpad
        notes: dict[str, Any] = {}
        for key, new in copy_notes(theirs)[0].items():
            if key not in mine or policy == "last_write_wins":
                notes[key] = new
                continue
            old = mine.get(key)
            if policy == "raise":
                if old != new:
                    msg = (
                        f"scratchpad conflict on {key!r}: this context has {old!r}, the merged one {new!r}; "
                        "pass scratchpad='last_write_wins' or a reducer to decide"
                    )
                    raise MergeError(msg)
            elif isinstance(policy, Mapping):
                reducer = policy.get(key)
                notes[key] = new if reducer is None else reducer(old, new)
            else:
                notes[key] = policy(old, new)  # a reducer: checked on entry
        return notes

    # -- history -------------------------------------------------------------------

    def _recorder(self, what: str) -> _records.Recorder:
        if self._history is None:
            msg = f"{what} needs a recorded context: build it with WorkingContext(record=True)"
            raise HistoryError(msg)
        return self._history

    @classmethod
    def replay(
        cls, history: Iterable[Entry], *, counter: TokenCounter | None = None, limit: int | None = None
    ) -> WorkingContext:
        """
        The recorded context *history* describes: its digest, notes, finished
        state, usage and history are those of the context it was recorded from.

        Raises:
            TypeError: *history* is not a sequence of :class:`~workingctx.history.Entry`.
            HistoryError: It does not begin with a start entry, or an entry
                does not apply (the message names its index).
        """
        return _records.replay(history, ctx_type=cls, counter=counter, limit=limit)

    @property
    def history(self) -> tuple[Entry, ...]:
        """
        Every change to a recorded context, oldest first (see :mod:`workingctx.history`).
        """
        return self._recorder("history").history

    @property
    def recorded(self) -> bool:
        """
        Whether this context keeps a :attr:`history`.
        """
        return self._history is not None

    @property
    def id(self) -> str | None:
        """
        The name a store saves a recorded context under; None when not recorded.
        """
        return None if self._history is None else self._history.id

    @property
    def parent_id(self) -> str | None:
        """
        The id of the recorded context this one was forked from, or None.
        """
        return None if self._history is None else self._history.parent_id

    @property
    def turn(self) -> int:
        """
        How many model replies a recorded context received (0 when not recorded).
        """
        return 0 if self._history is None else self._history.turn

    @property
    def finished(self) -> bool:
        """
        Whether :meth:`finish` ended this context.
        """
        return self._history is not None and self._history.finished

    @property
    def answer(self) -> Any:
        """
        The answer given to :meth:`finish` (JSON data, frozen); otherwise the
        text of the newest reply without tool calls; otherwise None.
        """
        if self._history is None:
            return None
        return self._history.answer(self.messages)

    @property
    def usage(self) -> Usage:
        """
        The token usage of every reply: on a recorded context, every reply
        ever recorded and what merged sub-agents brought; otherwise the
        replies in the tail.
        """
        if self._history is not None:
            return self._history.usage
        return sum((m.usage for m in self.messages if m.usage is not None), Usage())

    def finish(self, answer: Any = None) -> WorkingContext:
        """
        End a recorded context: appends and merges raise afterwards; only
        :meth:`restore` undoes it.

        Raises:
            TypeError: *answer* is not JSON data.
            HistoryError: The context is not recorded.
        """
        self._recorder("finish()").finish(self, answer)
        return self

    def restore(self, to: int | str | Checkpoint) -> WorkingContext:
        """
        Bring messages, notes and the finished state back to what they were
        after entry *to* (an index, negative from the end; a checkpoint id
        captured from this context; or a :class:`~workingctx.Checkpoint`),
        by adding an entry: the history never shrinks.

        Raises:
            PendingCallsError: Calls are pending.
            HistoryError: *to* names no entry, or one in the middle of a turn.
        """
        self._recorder("restore()").restore(self, to)
        return self

    def append_result(self, message: Message, *, outcome: Outcome = "done") -> WorkingContext:
        """
        Append a tool result, recording how the call ended (``"done"``,
        ``"error"``, ``"denied"``, ``"cancelled"`` or ``"interrupted"``).

        Raises:
            TypeError: *message* is not a message.
            ValueError: it is not a tool result, or *outcome* is unknown.
        """
        _check_messages([message], "append_result()")
        if message.role != "tool":
            msg = f"append_result() takes a tool result (role 'tool'), got a {message.role!r} message"
            raise HistoryError(msg)
        if outcome not in _records.OUTCOMES:
            msg = f"unknown outcome {outcome!r}; use one of {', '.join(_records.OUTCOMES)}"
            raise HistoryError(msg)
        if self._history is None:
            return self.append(message)
        if self._routes:
            message = self._routed([message])[0]
        self._history.append(self, [message], outcome)
        return self

    def close_pending(self, outcome: Outcome = "interrupted", text: str | None = None) -> WorkingContext:
        """
        Give every pending tool call of a recorded context a result (``text``,
        by default ``"(<outcome>)"``) with *outcome*; messages waiting for them go in next.
        """
        if outcome not in _records.OUTCOMES or outcome == "done":
            msg = f"close_pending() takes an outcome other than 'done', got {outcome!r}"
            raise HistoryError(msg)
        self._recorder("close_pending()").close_pending(self, outcome, text)
        return self

    def record_error(self, error: BaseException | str, *, during: str | None = None) -> WorkingContext:
        """
        Add an ``error`` entry to a recorded context's history (nothing else changes).
        """
        self._recorder("record_error()").error(self, error, during)
        return self

    def edit_notes(self) -> NotesEdit:
        """
        ``with ctx.edit_notes() as notes:`` edit a plain copy of the notes;
        a normal exit commits the changes (one ``notes`` entry on a recorded
        context), an exception commits nothing. Values must be JSON data.
        Editors take turns (``async with`` in coroutines).
        """
        lock = self._edit_lock
        if lock is None:
            with self._tail.lock:  # two first uses at once make one lock
                lock = self._edit_lock
                if lock is None:
                    lock = self._edit_lock = threading.Lock()
        return _records.NotesEdit(self, lock)

    # -- snapshots ---------------------------------------------------------------

    # -- cost ----------------------------------------------------------------------

    def cost(self, model: str | None = None) -> Decimal:
        """
        What the replies in the context's tail cost, in US dollars; on a
        recorded context, every reply ever recorded and those merged sub-agents
        brought, as :attr:`usage` counts them.

        Each reply is priced for the model named in its ``metadata["model"]``
        (the name the provider reported), or else for *model*.

        >>> from workingctx import Usage
        >>> ctx = WorkingContext().append(Message.assistant("a", usage=Usage(input_tokens=20_000, output_tokens=200)))
        >>> ctx.cost("claude-sonnet-4-6")
        Decimal('0.063')

        Raises:
            PricingError: a reply's model has no price, or a reply names no
                model and *model* is not given (the message says which reply).
        """
        if self._history is not None:
            return self._history.cost(model)
        from workingctx.pricing import cost as price  # noqa: PLC0415  # pricing is optional to load

        total = Decimal(0)
        for position, message in enumerate(self.messages):
            if message.usage is None:
                continue
            named = message.metadata.get("model", model)
            if not isinstance(named, str):
                msg = (
                    f"message {position} carries usage but names no model in metadata['model']; "
                    "pass the model to cost(model=...)"
                )
                raise PricingError(msg)
            total += price(named, message.usage)
        return total

    def freeze(self) -> FrozenContext:
        """
        A frozen, hashable snapshot of this moment (see :class:`FrozenContext`).

        Costs the same at every length of a run: the snapshot reads the
        messages and journal entries of this moment into tuples only when they
        are first read, the digest chain is shared with the live context, and
        only new messages are hashed.
        """
        with self._tail.lock:
            messages, chain = self._tail.frozen()
            notes = self._scratchpad.frozen()
            known = self._scratchpad.known_digest()
            entries = self.journal._source()
        return FrozenContext._lazily(self._prefix, messages, notes, entries, chain, known)

    def digest(self) -> str:
        """
        The stable digest :meth:`freeze` would give now, without taking a snapshot.

        Only messages appended since the last digest are hashed.
        """
        with self._tail.lock:
            return digest_of_parts(self._prefix, self._tail.chain_digest(), self._scratchpad.digest())

    def diff(self, other: WorkingContext | FrozenContext) -> ContextDiff:
        """
        What this context has that *other* has not (``self - other``): a frozen copy.
        """
        if isinstance(other, WorkingContext):
            old_prefix, old_messages, old_notes = other._prefix, other.messages, other._scratchpad.raw()
        elif isinstance(other, FrozenContext):
            old_prefix, old_messages, old_notes = other.prefix, other.messages, dict(other.scratchpad)
        else:
            raise _checks.wrong_type(other, "other", "a WorkingContext or a FrozenContext", owner="diff()")
        return diff_states(self._prefix, self.messages, self._scratchpad.raw(), old_prefix, old_messages, old_notes)

    # -- concurrency ---------------------------------------------------------------

    async def apply_locked(self, fn: Callable[[WorkingContext], Awaitable[_R] | _R]) -> _R:
        """
        Run ``fn(self)`` under the context's lock, awaiting it when it is async,
        and return its result.

        All or nothing: when *fn* raises (or is cancelled), the tail, the
        scratchpad and the journal are put back as they were when it started,
        and the error propagates. Notes are restored by value when they can be
        copied (plain data, or objects that support ``copy.deepcopy``), otherwise
        the keys are restored and a value *fn* changed in place stays changed.
        Writes other code made to the context meanwhile without holding the
        lock are undone with *fn*'s: write to a shared context under its lock.
        """
        async with self.lock:
            undo = self._undo_point()
            try:
                result = fn(self)
                if inspect.isawaitable(result):
                    result = await result
            except BaseException:
                self._roll_back(undo)
                raise
            return result

    def _undo_point(self) -> tuple[Mark, NotesMark, tuple[int, int], dict[str, str]]:
        with self._tail.lock:
            journal = (len(self.journal), self.journal.committed)
            return self._tail.mark(), self._scratchpad.mark(), journal, dict(self._routes)

    def _roll_back(self, undo: tuple[Mark, NotesMark, tuple[int, int], dict[str, str]]) -> None:
        mark, notes, (size, committed), routes = undo
        with self._tail.lock:
            self._tail.restore(mark)
            self._scratchpad.restore(notes)
            self.journal._truncate(size, committed)
            self._routes = dict(routes)

    def __repr__(self) -> str:
        keys = sorted(self._scratchpad)
        return (
            f"<WorkingContext messages={len(self._tail)} scratchpad={keys!r} "
            f"journal={len(self.journal)} prefix_messages={len(self._prefix.as_messages())}>"
        )


_MERGE_BREAKS = STRUCTURAL_RULES - {"result-without-id"}
"""The tool rules a merge may not break: two calls with one id, a result whose
call is nowhere (or elsewhere, or answered already), a call left without its result.
A tool message that names no call links to nothing and is let through."""


def _rules(view: TailView) -> RuleState:
    """
    The provider rules' state of a tail view, kept by its index.
    """
    index = view.tail_index
    if index is None:  # pragma: no cover  # a context's view always has one
        state = RuleState()
        for message in view:
            state.feed(message)
        return state
    return index.walk


def _broken(view: TailView) -> Counter[tuple[str, tuple[str, ...]]]:
    """
    The tool-rule problems the tail has, by rule and ids.
    """
    return Counter((p.rule, p.ids) for p in _rules(view).problems if p.rule in _MERGE_BREAKS)


def _calls_of(message: Message, ids: Sequence[str]) -> tuple[ToolCall, ...]:
    """
    The calls of *message* with these ids, in the order of *ids* (call blocks as :class:`ToolCall`).
    """
    calls = {call.id: call for call in message.tool_calls}
    if not isinstance(message.content, str):
        for block in message.content:
            if isinstance(block, ToolCallBlock | RemoteToolCallBlock) and block.id not in calls:
                calls[block.id] = ToolCall(block.id, block.name, block.args)
    return tuple(calls[i] for i in ids if i in calls)
