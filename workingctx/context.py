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

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from workingctx import _checks, _rekey
from workingctx._lock import ContextLock
from workingctx._merging import MergeMethods, MergeMode, ScratchpadPolicy
from workingctx._notes import Notes
from workingctx._recording import RecordingMethods
from workingctx._tail import Tail, TailView, rule_state
from workingctx.exceptions import (
    ArgumentValueError,
)
from workingctx.frozen import FrozenDict
from workingctx.history.recorder import start
from workingctx.journal import MutationJournal
from workingctx.messages import Message, check_messages
from workingctx.prefix import PrefixContext
from workingctx.scopes import surviving_indices
from workingctx.snapshot import (
    ContextDiff,
    FrozenContext,
    diff_states,
    digest_of_parts,
)
from workingctx.tokens import ApproxTokenCounter, MessageCounter, TokenCounter, whole_counter

if TYPE_CHECKING:
    from workingctx.scopes import ContextScope, PositionalScope

__all__ = ["ContextLock", "MergeMode", "ScratchpadPolicy", "TailView", "WorkingContext"]


def _check_key(key: object) -> None:
    _checks.check_instance(key, "key", str, "str", label="scratchpad keys", fix="use str(key) or a name")


class WorkingContext(MergeMethods, RecordingMethods):
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

    __slots__ = ()

    __hash__ = None  # type: ignore[assignment]  # the live side is not a value

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
        check_messages(tail, "messages")
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
        if counter is not None and isinstance(counter, MessageCounter):
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

        # whether the counter counts one message at a time (checked once: protocol checks are slow;
        # the default counter does, and costs none)
        incremental = counter is None or isinstance(counter, TokenCounter)
        if counter is None:
            counter = ApproxTokenCounter()
        self._init(prefix, Tail(tail, counter, incremental=incremental), notes, journal)
        self._rebuild_routes(tail)
        self.limit = limit
        self.shared = shared
        if record:
            self._history = start(self, id)

    # -- construction from other states ----------------------------------------

    @classmethod
    def from_snapshot(cls, snapshot: FrozenContext) -> WorkingContext:
        """
        A live, writable context from a snapshot: the scratchpad is thawed at
        every depth and the journal's entries start committed.

        The one way from a snapshot to a context (:func:`~workingctx.persistence.rehydrate`
        of a checkpoint calls it). The context shares frozen
        values with the snapshot (messages, prefix, journal entries) and no
        list, dict or set, so no write to either reaches the other.
        """
        _checks.check_instance(snapshot, "snapshot", FrozenContext, "a FrozenContext", owner="from_snapshot")
        ctx = cls(prefix=snapshot.prefix, scratchpad=dict(snapshot.scratchpad), journal=snapshot.journal)
        ctx._tail = Tail.from_snapshot(
            snapshot.messages, snapshot._chain, ctx._tail.counter, incremental=ctx._tail.incremental
        )
        ctx._rebuild_routes(snapshot.messages)
        return ctx

    def _rebuild_routes(self, messages: Sequence[Message]) -> None:
        """
        The routes of the calls a merge re-keyed while they were pending,
        which a context built from *messages* (its tail) or a snapshot does not
        bring: each pending call named like one (``call_0-2``) takes the results
        for the id it was given instead of (``call_0``) while that id is not pending.
        """
        tail = self._tail
        self._routes = _rekey.rebuilt_routes(messages, lambda: rule_state(tail.view()))

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
        check_messages(messages, "append()")
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
        check_messages(items, "extend()")
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
        check_messages(items, "replace_tail()")
        return self._replace_kept(items)

    def _replace_kept(self, items: list[Message]) -> WorkingContext:
        """
        :meth:`replace_tail` with *items* (given away) that are messages
        already: what a context manager keeps of this context's own, and the
        summary message it makes.
        """
        if self._history is not None:
            self._history.replace(self, items)
            return self
        self._replace(items)
        return self

    def _replace(self, items: list[Message]) -> None:
        self._tail.replace(items)

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
            MergeError: *for_call* is not the id of a pending call here, or
                names a call a tool message cannot answer (a Responses computer
                or shell call, an MCP approval request: see :func:`workingctx.messages.calls_of`).

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

    def __repr__(self) -> str:
        keys = sorted(self._scratchpad)
        return (
            f"<WorkingContext messages={len(self._tail)} scratchpad={keys!r} "
            f"journal={len(self.journal)} prefix_messages={len(self._prefix.as_messages())}>"
        )
