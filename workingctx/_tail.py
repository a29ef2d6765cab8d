"""
The tail engine: the messages of a live context and everything derived from them.

A :class:`Tail` owns the message list of one :class:`~workingctx.WorkingContext`
and the caches that make its hot paths cheap: the tuple view, the digest chain,
the running token sums, the id index, the system positions and the cut index.
Only the operations here change the list (:meth:`Tail.extend`,
:meth:`Tail.replace`, :meth:`Tail.clear`, :meth:`Tail.copy`), each keeping every
cache in step, and every operation holds the tail's lock, so a context can be
shared between threads: a reader never sees a list from after a change with a
cache from before it.

A list only grows in place, and an item in it never changes; clearing or
replacing a tail starts a new list, so a :class:`TailView` or a snapshot taken
earlier never sees a message change. That is what lets a fork share its
parent's list instead of copying it: a tail's messages are the first ``n``
items of a list that other tails (its parent, its forks, their forks) may also
hold, followed by the messages it appended that are not in that list yet.
Whichever tail appends first at the end of a shared list places its messages
there in place, and checks after the append that the slots hold its own
messages (``list.extend`` is atomic, so two tails appending at once cannot
both win); a tail that finds the end taken keeps what it appends aside, and
copies its ``n`` items into a list of its own the next time it is read. So a
fork costs the same at every length, and the first of a list's tails to
append after a fork keeps appending in place.
"""

from __future__ import annotations

import bisect
import itertools
import operator
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import TypeAlias, overload

from workingctx.messages import Message
from workingctx.scopes._index import TailIndex
from workingctx.snapshot import Chain
from workingctx.tokens import RunningCount, TokenCounter
from workingctx.validity import RuleState

__all__ = ["Mark", "Tail", "TailView"]

_HEAD = 16
"""A trim's result is carried over from the old tail's index when at most this
many messages (the system messages it keeps) come before the newest ones it keeps."""

_FEW = 64
"""Up to this many messages, the cut index of a shared list reads them through a view."""

Mark: TypeAlias = tuple[list[Message], int, int]
"""A tail as it was: its list, how many of its first items were the messages
(the list only grows in place), and how many messages its lineage had appended."""


class TailView(Sequence[Message]):
    """
    A read-only view of the first ``len(view)`` messages of a context's tail.

    Made in O(1): a context's tail only grows in place (clearing or replacing
    it starts a new list), so the viewed messages never change under the view.
    The cut index and the running sums are brought up to date when first
    asked for, so a scope that needs neither (a cold :class:`~workingctx.TokenBudget`
    counts only the suffix it keeps) never pays for them.

    Attributes:
        system_positions: The indices of the system messages, ascending.
        prefix_messages: The messages of the context's prefix, sent before
            these with every request (empty unless the context gave them): a
            :class:`~workingctx.TokenBudget` counts them first.
    """

    __slots__ = ("_index", "_items", "_running", "_size", "_tail", "prefix_messages", "system_positions")
    __module__ = "workingctx.context"  # where users import it from

    def __init__(self, items: list[Message], size: int, system_positions: tuple[int, ...], tail: Tail) -> None:
        self._items = items
        self._size = size
        self.system_positions = system_positions
        self._tail = tail
        self._index: TailIndex | None = None
        self._running: RunningCount | None = None
        self.prefix_messages: tuple[Message, ...] = ()

    @property
    def tail_index(self) -> TailIndex:
        """
        Where the tail may be cut without splitting an exchange (indexed on first use).
        """
        index = self._index
        if index is None:
            index = self._index = self._tail.index_for(self._items, self._size)
        return index

    @property
    def running(self) -> RunningCount | None:
        """
        The running token sums under the context's counter, counted at least as
        far as the view reaches (on first use), or None for an async-only counter.
        """
        running = self._running
        if running is None:
            running = self._running = self._tail.running_for(self._items, self._size)
        return running

    def warm(self) -> bool:
        """
        Whether a budget should read the running sums and the cut index rather
        than walk the view from its end: when the context keeps running sums
        already (bringing them up to date costs only the messages appended
        since), or when it was asked once before (a context sliced again and
        again pays for them once, then each answer costs the log of its length).
        """
        return self._running is not None or self._tail.warm(self._items)

    def extends(self, other: TailView) -> bool:
        """
        Whether this view's first messages are the very messages of *other*
        (told in O(1): both view one list, which only grows in place, and this
        one reaches at least as far).
        """
        return self._items is other._items and self._size >= other._size

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            picked = range(self._size)[index]
            if picked.step == 1:  # one run, copied alone (not the whole list first)
                return self._items[picked.start : picked.stop]
            return [self._items[i] for i in picked]
        position = index + self._size if index < 0 else index
        if not 0 <= position < self._size:
            msg = f"tail index {index!r} out of range for {self._size} messages"
            raise IndexError(msg)
        return self._items[position]

    def __iter__(self) -> Iterator[Message]:
        return itertools.islice(self._items, self._size)

    def _pick(self, indices: Sequence[int]) -> list[Message]:
        """
        The messages at *indices*, in that order: one slice of the list when
        they are one run (the newest messages a budget keeps), else one
        C-level gather, never a call per message. The caller passes indices
        that ascend strictly (only the first and the last are checked: the
        shortcut and the bounds rely on the order).

        Raises:
            IndexError: An index is out of the view's range.
        """
        count = len(indices)
        if count == 0:
            return []
        first, last = indices[0], indices[-1]
        if first < 0 or last >= self._size:
            bad = first if first < 0 else last
            msg = f"tail index {bad!r} out of range for {self._size} messages"
            raise IndexError(msg)
        if last - first + 1 == count:  # one run, a single index included
            return self._items[first : last + 1]
        return list(operator.itemgetter(*indices)(self._items))

    def __reversed__(self) -> Iterator[Message]:
        items = self._items
        return (items[i] for i in range(self._size - 1, -1, -1))

    def __reduce__(self) -> tuple[type[tuple[Message, ...]], tuple[tuple[Message, ...]]]:
        # pickled as the messages it views (a cache plan keeps the view of its request's tail)
        return tuple, (tuple(self),)

    def __repr__(self) -> str:
        return f"<TailView size={self._size}>"


_RLock = type(threading.RLock())
"""The class of the locks ``threading.RLock()`` makes, called directly: a fork makes one."""


class Tail:
    """
    The message list of a live context, its caches, and the lock over both.

    Args:
        messages: The initial list (owned from now on: the caller gives it away).
        counter: The token counter the running sums count with.
        incremental: Whether *counter* counts one message at a time (checked
            once by the caller: protocol checks are slow).

    The messages are the first ``_n`` items of ``_items``, a list that forks
    may share (see the module), then the messages in ``_extra``, appended
    while another tail held the end of that list (None: there are none).
    Reading the messages places those first (:meth:`_settle`).

    Every method holds :attr:`lock`, a re-entrant lock that a caller may also
    hold around several calls that must see one state (a snapshot reads the
    messages and the notes together).
    """

    __slots__ = (
        "_appended",
        "_calls",
        "_chain",
        "_counter",
        "_extra",
        "_id_index",
        "_incremental",
        "_items",
        "_log",
        "_log_base",
        "_looked",
        "_n",
        "_owned",
        "_running",
        "_system",
        "_tail_index",
        "_view",
        "lock",
    )

    def __init__(
        self, messages: list[Message], counter: TokenCounter, *, incremental: bool, chain: Chain | None = None
    ) -> None:
        self._own(messages)
        self._counter = counter
        self._incremental = incremental
        self.lock = threading.RLock()
        # The lineage log: what this tail's context (and the ancestors it was
        # forked from) appended, numbered from the lineage's first append. Only
        # the entries from _log_base on are kept: a context keeps what a delta
        # merge into one of its ancestors may still need (see retain()).
        self._appended = 0
        self._log: list[Message] = []
        self._log_base = -1  # -1: nothing is retained
        self._reset(Chain() if chain is None else chain)

    def _own(self, messages: list[Message]) -> None:
        """
        Make *messages*, a list no other tail holds, the messages.
        """
        self._items = messages
        self._n = len(messages)
        self._extra: list[Message] | None = None
        # whether no other tail holds _items (a fork shares it): then nothing
        # but this tail appends to it, and it holds only this tail's messages
        self._owned = True

    def _reset(self, chain: Chain) -> None:
        self._view: tuple[Message, ...] | None = None
        self._chain = chain
        self._running: RunningCount | None = None
        self._id_index: set[str | int] | None = None
        # the positions of the system messages among the first _system[0] messages
        self._system: tuple[int, tuple[int, ...]] = (0, ())
        self._tail_index: TailIndex | None = None
        self._looked = False  # a budget asked once, without running sums (see warm())
        # tool call id -> (times an assistant message asks it, times a message answers it)
        self._calls: dict[str, list[int]] | None = None

    # -- building ------------------------------------------------------------------

    @classmethod
    def from_snapshot(
        cls, messages: tuple[Message, ...], chain: Chain | None, counter: TokenCounter, *, incremental: bool
    ) -> Tail:
        """
        A tail holding a snapshot's messages, reusing its tuple and its digests.
        """
        tail = cls(list(messages), counter, incremental=incremental)
        tail._view = messages
        if chain is not None:
            tail._chain = chain.copy(len(messages))
        return tail

    def copy(self, messages: list[Message] | None = None, *, retain: int) -> Tail:
        """
        An independent tail: the same messages (or *messages*), a new lock,
        and the lineage log from position *retain* on (see :meth:`retain`).

        A copy of the same messages shares the list (in O(1): see the module)
        and keeps the view, the digests and the system positions already
        found; a copy with other *messages* starts fresh.
        """
        with self.lock:
            other: Tail = (
                self._share() if messages is None else Tail(messages, self._counter, incremental=self._incremental)
            )
            other._appended = self._appended
            base = self._log_base if self._log_base >= 0 else self._appended
            drop = retain - base
            if drop > 0:
                other._log = self._log[drop:]
                other._log_base = retain
            else:
                other._log = self._log[:]
                other._log_base = base
            return other

    def _share(self) -> Tail:
        """
        A tail sharing this one's list (the caller holds the lock; see :meth:`copy`).
        """
        items = self._items if self._extra is None else self._settle()
        n = self._n
        self._owned = False
        other: Tail = Tail.__new__(Tail)
        other._items = items
        other._n = n
        other._extra = None
        other._owned = False
        other._counter = self._counter
        other._incremental = self._incremental
        other.lock = _RLock()
        other._view = self._view
        other._chain = self._chain.share(n)
        other._running = None
        other._id_index = None
        other._system = self._system  # never changed, only replaced
        other._tail_index = None
        other._looked = False
        other._calls = None
        return other

    # -- the shared list -------------------------------------------------------------

    def _place(self, messages: Sequence[Message]) -> bool:
        """
        Append *messages* in place when this tail holds the end of its list,
        and say whether it did (the caller holds the lock).
        """
        items = self._items
        n = self._n
        if len(items) != n:  # another tail sharing the list appended there
            return False
        items.extend(messages)
        # Another tail may have appended between the check and the extend: the
        # slots are this tail's only if they hold its messages (they never
        # change once written, so then this tail's messages are its first items).
        end = n + len(messages)
        # (a slice, not islice: islice would walk the list from its start)
        placed = items[n] is messages[0] if end - n == 1 else all(map(operator.is_, items[n:end], messages))
        if placed:
            self._n = end
        return placed

    def _settle(self) -> list[Message]:
        """
        The list whose first ``_n`` items are every message: the messages set
        aside are placed at its end, or the list is copied when another tail
        holds the end (the caller holds the lock).
        """
        extra = self._extra
        if extra is not None:
            if not self._place(extra):
                items = self._items[: self._n]
                items.extend(extra)
                self._items = items
                self._n = len(items)
                self._owned = True
            self._extra = None
        return self._items

    # -- reading -------------------------------------------------------------------

    @property
    def counter(self) -> TokenCounter:
        """
        The token counter of the running sums.
        """
        return self._counter

    @property
    def incremental(self) -> bool:
        """
        Whether the counter counts one message at a time.
        """
        return self._incremental

    def __len__(self) -> int:
        with self.lock:
            extra = self._extra
            return self._n if extra is None else self._n + len(extra)

    def messages(self) -> tuple[Message, ...]:
        """
        The messages, as a tuple shared until the next change.
        """
        with self.lock:
            view = self._view
            if view is None:
                view = tuple(self._settle())
                if len(view) != self._n:  # the list holds another tail's messages past this one's
                    view = view[: self._n]
                self._view = view
            return view

    def frozen(self) -> tuple[tuple[list[Message] | tuple[Message, ...], int], Chain]:
        """
        The messages, as ``(list or tuple, n)``, and the digest chain that goes
        with them, taken together in O(1).

        The first *n* items of the list never change (it only grows in place),
        so a snapshot can read them later; items past *n* may be another
        tail's. The chain is shared with the caller: it only ever grows by the
        digests of these messages and their successors.
        """
        with self.lock:
            items = self._settle()
            view = self._view
            return (view if view is not None else items, self._n), self._chain

    def chain_digest(self) -> str:
        """
        The chain digest of every message, hashing only the ones not hashed yet.
        """
        with self.lock:
            return self._chain.upto(self._settle(), self._n)

    def view(self) -> TailView:
        """
        A read-only view of the messages as they are now, with the system
        positions, the cut index and the running sums brought up to date.
        """
        with self.lock:
            messages = self._settle()
            n = self._n
            scanned, positions = self._system
            if scanned < n:
                positions += tuple(i for i in range(scanned, n) if messages[i].role == "system")
                self._system = (n, positions)
            return TailView(messages, n, positions, self)

    def index_for(self, items: list[Message], size: int) -> TailIndex:
        """
        The cut index of the first *size* messages of *items*: the tail's own,
        brought up to date, while *items* is still its list; else a new one.
        """
        with self.lock:
            if items is not self._items:
                fresh = TailIndex()
                fresh.update(items[:size])
                return fresh
            index = self._tail_index
            if index is None:
                index = self._tail_index = TailIndex()
            n = self._n
            if self._owned:
                index.update(items)
            # The index reads len(): a list another tail holds may grow past this
            # tail's messages, so it reads a copy of them (when it has many to
            # index) or a view bounded to them (few: a copy would cost more).
            elif n - index.size > _FEW:
                index.update(items[:n])
            else:
                index.update(TailView(items, n, (), self))
            return index

    def running_for(self, items: list[Message], size: int) -> RunningCount | None:
        """
        Running sums reaching the first *size* messages of *items*: the tail's
        own while *items* is still its list; else new ones.
        """
        if not self._incremental:
            return None
        with self.lock:
            if items is self._items:
                return self.running()
        running = RunningCount(self._counter)
        running.extend(items[:size])
        return running

    def warm(self, items: list[Message]) -> bool:
        """
        Whether the tail keeps running sums of *items* (its list) already, or
        was asked before; the first ask of a tail never counted answers False.
        """
        with self.lock:
            if items is not self._items:
                return False
            if self._running is not None or self._looked:
                return True
            self._looked = True
            return False

    def running(self) -> RunningCount | None:
        """
        The running token sums of every message, or None for an async-only counter.
        """
        if not self._incremental:
            return None
        with self.lock:
            items = self._settle()
            running = self._running
            if running is None:
                running = self._running = RunningCount(self._counter)
            if len(running) < self._n:
                running.extend(items[len(running) : self._n])
            return running

    def has_id(self, message_id: str | int) -> bool:
        """
        Whether a message carries this explicit id (O(1) after the first call).
        """
        with self.lock:
            if self._id_index is None:
                items = self._settle()
                self._id_index = {m.id for m in itertools.islice(items, self._n) if m.id is not None}
            return message_id in self._id_index

    def kept(self, messages: Sequence[Message]) -> int:
        """
        How many leading messages of *messages* are the tail's own, in place
        (the same objects): what a :meth:`replace` by *messages* keeps.
        """
        with self.lock:
            old = self._settle()
            kept = 0
            limit = min(self._n, len(messages))
            while kept < limit and messages[kept] is old[kept]:
                kept += 1
            return kept

    def call_state(self, call_id: str) -> tuple[int, int]:
        """
        How many assistant messages ask for tool call *call_id*, and how many
        messages answer it (O(1) after the first call).
        """
        with self.lock:
            calls = self._calls
            if calls is None:
                calls = self._calls = {}
                _count_calls(calls, itertools.islice(self._settle(), self._n))
            found = calls.get(call_id)
            return (0, 0) if found is None else (found[0], found[1])

    # -- changing ------------------------------------------------------------------

    def extend(self, messages: Sequence[Message], *, logged: bool = True) -> None:
        """
        Append checked messages (and log them as appended, unless *logged* is False).
        """
        if not messages:
            return
        with self.lock:
            extra = self._extra
            if extra is not None:
                extra.extend(messages)
            elif not self._place(messages):
                self._extra = list(messages)  # placed, or copied, when next read
            self._view = None
            if self._id_index is not None:
                self._id_index.update(m.id for m in messages if m.id is not None)
            if self._calls is not None:
                _count_calls(self._calls, messages)
            if logged:
                self._appended += len(messages)
                if self._log_base >= 0:  # else nothing is retained
                    self._log.extend(messages)

    # -- the lineage log -------------------------------------------------------------

    @property
    def appended(self) -> int:
        """
        How many messages the lineage appended so far (a position in its log).
        """
        return self._appended

    def appended_since(self, position: int) -> list[Message]:
        """
        The messages appended after log *position* (kept by :meth:`retain`), in order.
        """
        with self.lock:
            start = position - self._log_base
            if self._log_base < 0 or start < 0:
                msg = f"the lineage log no longer holds position {position}"
                raise RuntimeError(msg)
            return self._log[start:]

    def retain(self, position: int | None) -> None:
        """
        Keep the log from *position* on (None: keep nothing from now on).
        """
        with self.lock:
            if position is None:
                self._log = []
                self._log_base = -1
                return
            if self._log_base < 0:
                self._log_base = self._appended
            drop = position - self._log_base
            if drop > 0:
                del self._log[:drop]
                self._log_base = position

    def replace(self, messages: list[Message], *, logged: bool = True) -> int:
        """
        Make *messages* (checked, given away) the tail; returns how many leading
        messages stayed (the same objects in the same places).

        When every message stays, the rest is appended in place; otherwise a new
        list starts, keeping the digests of the messages that stayed.
        """
        with self.lock:
            kept = self.kept(messages)  # places the messages set aside
            if kept == self._n:
                self.extend(messages[kept:], logged=logged)
                return kept
            chain, items, n, old = self._chain, self._items, self._n, (self._tail_index, self._running, self._system)
            self._own(messages)
            self._reset(chain.copy(kept))
            self._rebase(items, n, *old)
            return kept

    def _rebase(
        self,
        items: list[Message],
        n: int,
        index: TailIndex | None,
        running: RunningCount | None,
        system: tuple[int, tuple[int, ...]],
    ) -> None:
        """
        Carry the cut index, the running sums and the system positions of the
        first *n* messages of *items*, the list just replaced, over to the new
        messages when they are a few messages and then the newest of the old
        ones (what a trim keeps), instead of indexing and counting them again
        (the caller holds the lock).
        """
        if index is None and running is None:
            return
        messages = self._items
        size = len(messages)
        if not messages or not n or messages[-1] is not items[n - 1]:
            return
        # the new messages past the few leading ones are the old ones from `start` on
        for head in range(max(size - n, 0), min(size, _HEAD)):
            start = n - size + head
            if messages[head] is items[start]:
                break
        else:
            return
        if not all(map(operator.is_, messages[head:], items[start:n])):
            return
        leading = messages[:head]
        if index is not None and index.size == n:
            self._tail_index = index.rebased(leading, messages[head:], start, items[:start])
        if running is not None and len(running) >= n:
            self._running = running.rebased(leading, start, n)
        scanned, positions = system
        if scanned == n:
            shift = head - start
            moved = positions[bisect.bisect_left(positions, start) :]
            own = tuple(i for i in range(head) if leading[i].role == "system")
            self._system = (size, own + tuple(i + shift for i in moved))

    def mark(self) -> Mark:
        """
        A token for :meth:`restore`: the tail as it is now.
        """
        with self.lock:
            return (self._settle(), self._n, self._appended)

    def restore(self, mark: Mark) -> int:
        """
        Put back the messages of a :meth:`mark`; returns how many leading
        messages of the current tail stayed.
        """
        messages, n, appended = mark
        with self.lock:
            kept = self.replace(messages[:n], logged=False)
            if self._log_base >= 0 and appended >= self._log_base:
                del self._log[appended - self._log_base :]
            self._appended = min(self._appended, appended)
            return kept

    def clear(self) -> None:
        """
        Empty the tail (a new list: views and snapshots taken before keep theirs).
        """
        with self.lock:
            self._own([])
            self._reset(Chain())


def _count_calls(calls: dict[str, list[int]], messages: Iterable[Message]) -> None:
    for message in messages:
        if message.role == "assistant":
            for asked in message.call_ids:
                calls.setdefault(asked, [0, 0])[0] += 1
        for answered in message.result_ids:
            calls.setdefault(answered, [0, 0])[1] += 1


def rule_state(view: TailView) -> RuleState:
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
