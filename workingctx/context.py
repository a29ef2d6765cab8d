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

import asyncio
import copy
import inspect
import itertools
import pickle
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar, overload

from workingctx.exceptions import MergeError
from workingctx.frozen import FrozenDict, FrozenList, thaw
from workingctx.journal import MutationJournal
from workingctx.messages import Message
from workingctx.prefix import PrefixContext
from workingctx.snapshot import (
    Chain,
    ContextDiff,
    FrozenContext,
    diff_states,
    freeze_scratchpad,
    snapshot_digest,
)
from workingctx.tokens import ApproxTokenCounter, RunningCount, TokenCounter

if TYPE_CHECKING:
    from workingctx.scopes import ContextScope, PositionalScope
    from workingctx.scopes._index import TailIndex

__all__ = ["MergeMode", "ScratchpadPolicy", "TailView", "WorkingContext"]

_R = TypeVar("_R")

MessageReducer: TypeAlias = Callable[[Sequence[Message], Sequence[Message]], Sequence[Message]]
MergeMode: TypeAlias = Literal["concat", "union", "delta"] | MessageReducer
"""How :meth:`WorkingContext.merge` combines tails: a mode name, or a reducer
``(left, right) -> messages`` such as :func:`workingctx.reducers.add_messages`."""

ValueReducer: TypeAlias = Callable[[Any, Any], Any]
ScratchpadPolicy: TypeAlias = Literal["last_write_wins", "raise"] | ValueReducer | Mapping[str, ValueReducer]
"""How :meth:`WorkingContext.merge` combines scratchpads: last write wins, raise on a
conflicting key, one reducer ``(old, new) -> value`` for every key, or one per key
(keys without a reducer: last write wins)."""

_MISSING = object()


def _check_messages(values: Sequence[object], what: str) -> None:
    for position, value in enumerate(values):
        if not isinstance(value, Message):
            hint = (
                "; to add several messages from a list use extend()"
                if isinstance(value, list | tuple)
                else "; build one with Message(role, text), e.g. Message('user', 'hi')"
            )
            msg = f"{what}: item {position} is {value!r} of type {type(value).__name__}, not a Message{hint}"
            raise TypeError(msg)


def _check_key(key: object) -> None:
    if not isinstance(key, str):
        msg = f"scratchpad keys must be str, got {key!r} of type {type(key).__name__}; use str(key) or a name"
        raise TypeError(msg)


_LEAVES: frozenset[type] = frozenset({str, int, float, bool, type(None), bytes})
_CONTAINERS: frozenset[type] = frozenset({dict, list, tuple, set, frozenset, FrozenDict, FrozenList})


def _is_plain(value: Any) -> bool:
    """
    Whether *value* is plain data all the way down (no object of your own,
    which might define how it is copied).
    """
    kind = type(value)
    if kind in _LEAVES:
        return True
    if kind is dict or kind is FrozenDict:
        return all(type(key) in _LEAVES and _is_plain(item) for key, item in value.items())
    if kind in _CONTAINERS or isinstance(value, frozenset):  # frozen sets of a payload included
        return all(_is_plain(item) for item in value)
    return False


def _copy_notes(notes: Mapping[str, Any], copies: int = 1) -> list[dict[str, Any]]:
    """
    Independent deep copies of the notes, with ``copy.deepcopy``'s meaning.

    Plain data is pickled once and unpickled once per copy, several times
    faster than ``copy.deepcopy``; notes holding objects of your own go
    through ``copy.deepcopy``, so their ``__deepcopy__`` is honoured.
    """
    plain = dict(notes)
    if all(_is_plain(value) for value in plain.values()):
        data = pickle.dumps(plain, protocol=pickle.HIGHEST_PROTOCOL)
        return [pickle.loads(data) for _ in range(copies)]  # noqa: S301  # our own bytes, made just above
    return [copy.deepcopy(plain) for _ in range(copies)]


class WorkingContext:
    """
    A live, mutable working context.

    Args:
        prefix: The frozen head of every request.
        messages: The initial tail.
        scratchpad: Initial notes (copied, writable at every depth).
        journal: A journal to use, or seed entries for a new one (seeds start committed).
        counter: The token counter (default: :class:`~workingctx.ApproxTokenCounter`).
        limit: A declared token ceiling; the caller's policy owns what to do past it.
        shared: Marks a context several coroutines write to. It does not lock
            anything by itself: use :attr:`lock` or :meth:`apply_locked` around
            sequences that must look atomic.

    Mutators return the context, so calls chain. A bad argument raises before
    anything changes.
    """

    __slots__ = (
        "_bases",
        "_chain",
        "_counter",
        "_id_index",
        "_incremental",
        "_lock",
        "_messages",
        "_prefix",
        "_prefix_tokens",
        "_running",
        "_scratch_base",
        "_scratchpad",
        "_system",
        "_tail_index",
        "_token",
        "_view",
        "journal",
        "limit",
        "shared",
    )

    __hash__ = None  # type: ignore[assignment]  # the live side is not a value

    def __init__(
        self,
        *,
        prefix: PrefixContext | None = None,
        messages: Iterable[Message] = (),
        scratchpad: Mapping[str, Any] | None = None,
        journal: MutationJournal[Any] | Iterable[Any] | None = None,
        counter: TokenCounter | None = None,
        limit: int | None = None,
        shared: bool = False,
    ) -> None:
        if prefix is None:
            prefix = PrefixContext()
        if not isinstance(prefix, PrefixContext):
            msg = f"prefix must be a PrefixContext, got {prefix!r} of type {type(prefix).__name__}"
            raise TypeError(msg)
        if isinstance(messages, str | Message):
            msg = f"messages must be an iterable of Message values, got {messages!r}; wrap one message in a list"
            raise TypeError(msg)
        tail = list(messages)
        _check_messages(tail, "messages")
        notes: dict[str, Any] = {}
        if scratchpad is not None:
            if not isinstance(scratchpad, Mapping):
                msg = f"scratchpad must be a mapping, got {scratchpad!r} of type {type(scratchpad).__name__}"
                raise TypeError(msg)
            for key in scratchpad:
                _check_key(key)
            notes = thaw(dict(scratchpad))
        if journal is None:
            journal = MutationJournal()
        elif not isinstance(journal, MutationJournal):
            journal = MutationJournal(journal)
        if (
            counter is not None
            and not isinstance(counter, TokenCounter)
            and not callable(getattr(counter, "estimate", None))
        ):
            msg = f"counter must be a token counter with estimate(messages), got {counter!r}"
            raise TypeError(msg)
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            msg = f"limit must be a non-negative int or None, got {limit!r}"
            raise ValueError(msg)
        if not isinstance(shared, bool):
            msg = f"shared must be a bool, got {shared!r}"
            raise TypeError(msg)

        self._prefix = prefix
        self._messages: list[Message] = tail
        self._scratchpad: dict[str, Any] = notes
        self.journal: MutationJournal[Any] = journal
        self._counter: TokenCounter = counter if counter is not None else ApproxTokenCounter()
        # whether the counter counts one message at a time (checked once: protocol checks are slow)
        self._incremental = isinstance(self._counter, TokenCounter)
        self.limit = limit
        self.shared = shared
        self._lock: asyncio.Lock | None = None
        self._token = object()
        # token of an ancestor -> how many leading messages still come from it
        self._bases: dict[object, int] = {}
        # token of the parent -> a copy of the notes when this context forked from it
        self._scratch_base: dict[object, dict[str, Any]] = {}
        self._reset_caches()

    def _reset_caches(self) -> None:
        self._view: tuple[Message, ...] | None = None
        self._chain = Chain()
        self._running: RunningCount | None = None
        self._prefix_tokens: int | None = None
        self._id_index: set[str | int] | None = None
        # positions of the system messages among the first _system[0] tail messages
        self._system: tuple[int, list[int]] = (0, [])
        self._tail_index: TailIndex | None = None

    # -- construction from other states ----------------------------------------

    @classmethod
    def from_snapshot(cls, snapshot: FrozenContext) -> WorkingContext:
        """
        A live, writable context from a snapshot: the scratchpad is thawed at
        every depth and the journal's entries start committed.
        """
        if not isinstance(snapshot, FrozenContext):
            msg = f"from_snapshot takes a FrozenContext, got {snapshot!r} of type {type(snapshot).__name__}"
            raise TypeError(msg)
        ctx = cls(
            prefix=snapshot.prefix,
            messages=snapshot.messages,
            scratchpad=dict(snapshot.scratchpad),
            journal=snapshot.journal,
        )
        ctx._view = snapshot.messages
        if snapshot._chain is not None:
            ctx._chain = snapshot._chain.copy(len(snapshot.messages))
        return ctx

    def _spawn(self, messages: list[Message], scratchpad: dict[str, Any]) -> WorkingContext:
        child = WorkingContext.__new__(WorkingContext)
        child._prefix = self._prefix
        child._messages = messages
        child._scratchpad = scratchpad
        child.journal = MutationJournal(self.journal.view())
        child._counter = self._counter
        child._incremental = self._incremental
        child.limit = self.limit
        child.shared = self.shared
        child._lock = None
        child._token = object()
        child._bases = {}
        child._scratch_base = {}
        child._reset_caches()
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
        if self._view is None:
            self._view = tuple(self._messages)
        return self._view

    @property
    def scratchpad(self) -> dict[str, Any]:
        """
        The live scratchpad dict.
        """
        return self._scratchpad

    @property
    def counter(self) -> TokenCounter:
        """
        The token counter this context counts with.
        """
        return self._counter

    @property
    def lock(self) -> asyncio.Lock:
        """
        The context's lock, for sequences of mutations that must look atomic
        to other coroutines (``async with ctx.lock: ...``).
        """
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def size(self) -> int:
        """
        The number of messages in the tail (the prefix is not counted).
        """
        return len(self._messages)

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
        return [*self._prefix.as_messages(), *self._messages]

    def tail_view(self) -> TailView:
        """
        A read-only view of the tail as it is now, in O(1), that also knows
        where the system messages are (found incrementally, once per message).

        Positional scopes such as :class:`~workingctx.TokenBudget` use it to
        avoid a pass over the whole tail; :meth:`slice` passes one.
        """
        from workingctx.scopes._index import TailIndex  # noqa: PLC0415  # scopes import this module

        messages = self._messages
        scanned, positions = self._system
        if scanned < len(messages):
            positions.extend(i for i in range(scanned, len(messages)) if messages[i].role == "system")
            self._system = (len(messages), positions)
        index = self._tail_index
        if index is None:
            index = self._tail_index = TailIndex()
        index.update(messages)
        return TailView(messages, len(messages), tuple(positions), index, self._synced_running())

    def _synced_running(self) -> RunningCount | None:
        """
        The running token sums of the tail under the context's counter, up to date.
        """
        if not self._incremental:
            return None
        running = self._running
        if running is None:
            running = self._running = RunningCount(self._counter)
        if len(running) < len(self._messages):
            running.extend(self._messages[len(running) :])
        return running

    def has_id(self, message_id: str | int) -> bool:
        """
        Whether a message with this explicit ``id`` is in the tail (O(1) after the first call).
        """
        if self._id_index is None:
            self._id_index = {m.id for m in self._messages if m.id is not None}
        return message_id in self._id_index

    # -- mutators ----------------------------------------------------------------

    def append(self, *messages: Message) -> WorkingContext:
        """
        Append messages to the tail.

        Raises:
            TypeError: an argument is not a :class:`Message` (nothing is appended).
        """
        _check_messages(messages, "append()")
        self._add(messages)
        return self

    def extend(self, messages: Iterable[Message]) -> WorkingContext:
        """
        Append every message of an iterable to the tail.

        Raises:
            TypeError: an item is not a :class:`Message` (nothing is appended).
        """
        if isinstance(messages, Message | str):
            msg = f"extend() takes an iterable of messages, got {messages!r}; use append() for one message"
            raise TypeError(msg)
        items = list(messages)
        _check_messages(items, "extend()")
        self._add(items)
        return self

    def _add(self, messages: Sequence[Message]) -> None:
        if not messages:
            return
        self._messages.extend(messages)
        self._view = None
        if self._id_index is not None:
            self._id_index.update(m.id for m in messages if m.id is not None)

    def clear_messages(self) -> WorkingContext:
        """
        Empty the tail. The prefix, scratchpad and journal are untouched.
        """
        self._messages = []
        self._bases = dict.fromkeys(self._bases, 0)
        self._reset_caches()
        return self

    def replace_tail(self, messages: Iterable[Message]) -> WorkingContext:
        """
        Replace the tail in one step, as a context manager does when it trims.

        The leading messages that stay (the same objects, in the same places)
        keep their place in the lineage: a later ``merge(self, mode="delta")``
        into the context this one forked from still knows what they share, and
        their digests are not computed again.

        Raises:
            TypeError: an item is not a :class:`Message` (nothing changes).
        """
        if isinstance(messages, Message | str):
            msg = f"replace_tail() takes an iterable of messages, got {messages!r}"
            raise TypeError(msg)
        items = list(messages)
        _check_messages(items, "replace_tail()")
        old = self._messages
        kept = 0
        limit = min(len(old), len(items))
        while kept < limit and items[kept] is old[kept]:
            kept += 1
        if kept == len(old):
            self._add(items[kept:])
            return self
        chain = self._chain
        self._messages = items
        self._bases = {token: min(base, kept) for token, base in self._bases.items()}
        self._reset_caches()
        self._chain = chain.copy(kept)
        return self

    def note(self, key: str, value: Any) -> WorkingContext:
        """
        Set one scratchpad note.

        Raises:
            TypeError: *key* is not a str.
        """
        _check_key(key)
        self._scratchpad[key] = value
        return self

    def update_scratchpad(self, notes: Mapping[str, Any]) -> WorkingContext:
        """
        Set several scratchpad notes at once.

        Raises:
            TypeError: *notes* is not a mapping, or a key is not a str (nothing is set).
        """
        if not isinstance(notes, Mapping):
            msg = f"update_scratchpad() takes a mapping, got {notes!r} of type {type(notes).__name__}"
            raise TypeError(msg)
        for key in notes:
            _check_key(key)
        self._scratchpad.update(notes)
        return self

    def with_prefix(self, prefix: PrefixContext) -> WorkingContext:
        """
        A fork of this context with another prefix: the one deliberate way to
        change what every request starts with (and lose the provider's cache).
        """
        child = self.fork()
        if not isinstance(prefix, PrefixContext):
            msg = f"prefix must be a PrefixContext, got {prefix!r} of type {type(prefix).__name__}"
            raise TypeError(msg)
        child._prefix = prefix
        child._prefix_tokens = None
        return child

    # -- tokens ------------------------------------------------------------------

    def count_tokens(self) -> int:
        """
        The token count of :meth:`assembled`, synchronously, with the context's
        counter. Each message is counted once; after an append only the new
        messages are counted.
        """
        if self._prefix_tokens is None:
            self._prefix_tokens = self._counter.count(self._prefix.as_messages())
        running = self._synced_running()
        if running is None:
            msg = (
                f"count_tokens() needs a counter with count_message(); {self._counter!r} is async only: await tokens()"
            )
            raise TypeError(msg)
        return self._prefix_tokens + running.total

    async def tokens(self) -> int:
        """
        The token count of :meth:`assembled` (prefix and tail).

        Counters with a synchronous per-message path are counted incrementally;
        any other counter is awaited on the whole assembled transcript.
        """
        if self._incremental:
            return self.count_tokens()
        return int(await self._counter.estimate(self.assembled()))

    # -- fork, merge, slice --------------------------------------------------------

    def fork(self) -> WorkingContext:
        """
        An independent copy for a sub-agent.

        The child gets its own message list, a deep copy of the scratchpad, a
        fresh journal seeded with this one's entries (committed), and the same
        prefix object (frozen, so sharing it is safe and keeps the cache key).
        Counter, limit and ``shared`` are inherited; the lock is new. The child
        remembers where it forked, for ``merge(child, mode="delta")``.
        """
        notes, base = _copy_notes(self._scratchpad, 2)
        child = self._spawn(list(self._messages), notes)
        child._view = self._view
        child._chain = self._chain.copy()
        child._prefix_tokens = self._prefix_tokens
        child._system = (self._system[0], list(self._system[1]))
        n = len(self._messages)
        child._bases = {token: min(base, n) for token, base in self._bases.items()}
        child._bases[self._token] = n
        # the baselines towards older ancestors are shared: they are never changed, only replaced
        child._scratch_base = {**self._scratch_base, self._token: base}
        return child

    def slice(self, scope: ContextScope | PositionalScope) -> WorkingContext:
        """
        A new private context holding the messages *scope* keeps, in order.

        The prefix is shared; scratchpad and journal are copied as by
        :meth:`fork`. Writes to the slice never reach this context.
        """
        from workingctx.scopes import surviving_indices  # noqa: PLC0415  # scopes import contexts lazily too

        kept = surviving_indices(scope, self.tail_view())
        messages = self._messages
        child = self._spawn([messages[i] for i in sorted(kept)], _copy_notes(self._scratchpad)[0])
        child.shared = False
        return child

    def merge(
        self,
        other: WorkingContext,
        mode: MergeMode = "concat",
        *,
        scratchpad: ScratchpadPolicy = "last_write_wins",
    ) -> WorkingContext:
        """
        Fold another context into this one (fan-in).

        Args:
            other: The context to merge, typically a fork of this one.
            mode: ``"concat"`` appends its messages verbatim; ``"union"`` adds
                only messages not already here (a multiset union: merging the
                same context twice equals merging it once); ``"delta"`` appends
                only what *other* added since it forked from this context. A
                callable ``(left, right) -> messages`` decides instead (see
                :mod:`workingctx.reducers`).
            scratchpad: How notes combine (see :data:`ScratchpadPolicy`). In
                ``"delta"`` mode only notes the fork changed are considered.

        The other journal's uncommitted entries are applied here as they are,
        and marked committed there, as is the delta mode's watermark: merging
        the same child twice does not apply its work twice.

        Raises:
            MergeError: ``"delta"`` with a context that is not a fork of this one,
                an unknown mode, or a conflicting note under ``scratchpad="raise"``.
        """
        if not isinstance(other, WorkingContext):
            msg = f"merge() takes a WorkingContext, got {other!r} of type {type(other).__name__}"
            raise TypeError(msg)
        incoming, base = self._incoming_messages(other, mode)
        notes = self._incoming_notes(other, mode, scratchpad)

        # Everything is checked: apply.
        if isinstance(incoming, list):
            self._add(incoming)
        else:
            self.replace_tail(incoming.replace)
        self._scratchpad.update(notes)
        self.journal.apply(other.journal.diff())
        other.journal.mark_committed()
        if base is not None:
            other._bases[self._token] = len(other._messages)
            other._scratch_base[self._token] = _copy_notes(other._scratchpad)[0]
        return self

    def _incoming_messages(self, other: WorkingContext, mode: MergeMode) -> tuple[list[Message] | _Replace, int | None]:
        if mode == "concat":
            return list(other._messages), None
        if mode == "union":
            present = Counter(self._messages)
            added: list[Message] = []
            for message in other._messages:
                if present[message] > 0:
                    present[message] -= 1
                else:
                    added.append(message)
            return added, None
        if mode == "delta":
            base = other._bases.get(self._token)
            if base is None:
                msg = (
                    "merge(mode='delta') needs a fork of this context (or of a fork of it): "
                    f"{other!r} was not forked from {self!r}; use mode='union' to merge an unrelated context"
                )
                raise MergeError(msg)
            return other._messages[base:], base
        if callable(mode):
            result = list(mode(tuple(self._messages), tuple(other._messages)))
            _check_messages(result, f"merge reducer {mode!r} returned")
            n = len(self._messages)
            if len(result) >= n and all(a is b for a, b in zip(result, self._messages, strict=False)):
                return result[n:], None
            return _Replace(result), None
        msg = f"unknown merge mode {mode!r}; use 'concat', 'union', 'delta' or a reducer (left, right) -> messages"
        raise MergeError(msg)

    def _incoming_notes(self, other: WorkingContext, mode: MergeMode, policy: ScratchpadPolicy) -> dict[str, Any]:
        if not (policy in ("last_write_wins", "raise") or isinstance(policy, Mapping) or callable(policy)):
            msg = f"unknown scratchpad policy {policy!r}; use 'last_write_wins', 'raise', a reducer or a mapping"
            raise MergeError(msg)
        theirs = other._scratchpad
        if mode == "delta":
            before = other._scratch_base.get(self._token, {})
            theirs = {k: v for k, v in theirs.items() if before.get(k, _MISSING) != v}
        notes: dict[str, Any] = {}
        for key, new in _copy_notes(theirs)[0].items():
            old = self._scratchpad.get(key, _MISSING)
            if old is _MISSING or policy == "last_write_wins":
                notes[key] = new
            elif policy == "raise":
                if old != new:
                    msg = (
                        f"scratchpad conflict on {key!r}: this context has {old!r}, the merged one {new!r}; "
                        "pass scratchpad='last_write_wins' or a reducer to decide"
                    )
                    raise MergeError(msg)
            elif isinstance(policy, Mapping):
                reducer = policy.get(key)
                notes[key] = new if reducer is None else reducer(old, new)
            elif callable(policy):
                notes[key] = policy(old, new)
            else:
                msg = f"unknown scratchpad policy {policy!r}; use 'last_write_wins', 'raise', a reducer or a mapping"
                raise MergeError(msg)
        return notes

    # -- snapshots ---------------------------------------------------------------

    def freeze(self) -> FrozenContext:
        """
        A frozen, hashable snapshot of this moment (see :class:`FrozenContext`).

        Cheap to repeat: the message tuple and the digest chain are shared with
        the live context until it changes, and only new messages are hashed.
        """
        return FrozenContext._trusted(
            self._prefix, self.messages, freeze_scratchpad(self._scratchpad), self.journal.view(), self._chain
        )

    def digest(self) -> str:
        """
        The stable digest :meth:`freeze` would give now, without taking a snapshot.

        Only messages appended since the last digest are hashed.
        """
        chain = self._chain.upto(self._messages, len(self._messages))
        return snapshot_digest(self._prefix, chain, self._scratchpad)

    def diff(self, other: WorkingContext | FrozenContext) -> ContextDiff:
        """
        What this context has that *other* has not (``self - other``): a frozen copy.
        """
        if isinstance(other, WorkingContext):
            old_prefix, old_messages, old_notes = other._prefix, other._messages, other._scratchpad
        elif isinstance(other, FrozenContext):
            old_prefix, old_messages, old_notes = other.prefix, list(other.messages), dict(other.scratchpad)
        else:
            msg = f"diff() takes a WorkingContext or a FrozenContext, got {other!r} of type {type(other).__name__}"
            raise TypeError(msg)
        return diff_states(self._prefix, self._messages, self._scratchpad, old_prefix, old_messages, old_notes)

    # -- concurrency ---------------------------------------------------------------

    async def apply_locked(self, fn: Callable[[WorkingContext], Awaitable[_R] | _R]) -> _R:
        """
        Run ``fn(self)`` under the context's lock, awaiting it when it is async,
        and return its result.
        """
        async with self.lock:
            result = fn(self)
            if inspect.isawaitable(result):
                return await result
            return result

    def __repr__(self) -> str:
        keys = sorted(self._scratchpad)
        return (
            f"<WorkingContext messages={len(self._messages)} scratchpad={keys!r} "
            f"journal={self.journal.size()} prefix_messages={len(self._prefix.as_messages())}>"
        )


class TailView(Sequence[Message]):
    """
    A read-only view of the first ``len(view)`` messages of a context's tail.

    Made in O(1): a context's tail only grows in place (clearing or replacing
    it starts a new list), so the viewed messages never change under the view.

    Attributes:
        system_positions: The indices of the system messages, ascending.
        tail_index: Where the tail may be cut without splitting an exchange.
        running: The running token sums under the context's counter (counted
            at least as far as the view reaches), or None for an async-only counter.
    """

    __slots__ = ("_items", "_size", "running", "system_positions", "tail_index")

    def __init__(
        self,
        items: list[Message],
        size: int,
        system_positions: tuple[int, ...],
        tail_index: TailIndex | None = None,
        running: RunningCount | None = None,
    ) -> None:
        self._items = items
        self._size = size
        self.system_positions = system_positions
        self.tail_index = tail_index
        self.running = running

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return self._items[: self._size][index]
        position = index + self._size if index < 0 else index
        if not 0 <= position < self._size:
            msg = f"tail index {index!r} out of range for {self._size} messages"
            raise IndexError(msg)
        return self._items[position]

    def __iter__(self) -> Iterator[Message]:
        return itertools.islice(self._items, self._size)

    def __reversed__(self) -> Iterator[Message]:
        items = self._items
        return (items[i] for i in range(self._size - 1, -1, -1))

    def __repr__(self) -> str:
        return f"<TailView of {self._size} messages>"


class _Replace:
    """
    A reducer's result that does not keep the tail as it was: replace it whole.
    """

    __slots__ = ("replace",)

    def __init__(self, messages: list[Message]) -> None:
        self.replace = messages
