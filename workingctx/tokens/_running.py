"""
Running totals and whole counters: :class:`RunningCount` keeps the total of a
growing transcript as prefix sums, and :func:`whole_counter` makes a full
:class:`~workingctx.tokens.TokenCounter` of a counter that counts one message
at a time.
"""

from __future__ import annotations

from array import array
from itertools import accumulate
from typing import TYPE_CHECKING

import attrs

from workingctx.messages import Message
from workingctx.tokens._cache import approx_counts, as_sequence, count_all, relocate
from workingctx.tokens._counters import (
    ApproxTokenCounter,
    MessageCounter,
    TiktokenCounter,
    TokenCounter,
    counting,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["RunningCount", "whole_counter"]


@attrs.frozen
class _WholeCounter:
    """
    A full :class:`TokenCounter` made of a :class:`MessageCounter` of one's
    own: lists are the sum of their messages, async callers get the same count.
    """

    counter: MessageCounter

    @property
    def name(self) -> str:
        return self.counter.name

    @property
    def exact(self) -> bool:
        return getattr(self.counter, "exact", False) is True

    def count_message(self, message: Message) -> int:
        return counting(self.counter)(message)

    def count(self, messages: Iterable[Message]) -> int:
        return count_all(counting(self.counter), messages)

    async def estimate(self, messages: Iterable[Message]) -> int:
        return self.count(messages)


def whole_counter(counter: MessageCounter) -> TokenCounter:
    """
    *counter* as a full :class:`TokenCounter`: itself when it is one, else
    one that counts a list as the sum of its messages and answers async callers
    with the same count (``exact`` is the counter's own, or False).

    >>> class Words:
    ...     name = "words"
    ...     def count_message(self, message):
    ...         return len(message.text().split())
    >>> from workingctx import Message
    >>> whole_counter(Words()).count([Message("user", "check the cert"), Message("user", "now")])
    4
    >>> counter = ApproxTokenCounter()
    >>> whole_counter(counter) is counter
    True
    """
    if isinstance(counter, TokenCounter):
        return counter
    if not isinstance(counter, MessageCounter):
        counting(counter)  # raises the TypeError that names it
    return _WholeCounter(counter)


def _default_counter() -> MessageCounter:
    return ApproxTokenCounter()


@attrs.define(eq=False)
class RunningCount:
    """
    The running token total of a growing transcript, kept as prefix sums.

    ``extend`` counts only the new messages (each count cached on its
    message), so the total after one append costs one message, whatever the
    length of the transcript. ``upto(n)`` is the count of the first ``n``
    messages, and ``truncate(n)`` forgets the rest, both without counting again.
    ``rebased`` gives the sums of a trimmed transcript without moving the
    sums it keeps: it reads them from these, through an offset.

    Args:
        counter: The counter to use; :class:`ApproxTokenCounter` by default.

    >>> from workingctx import Message
    >>> running = RunningCount()
    >>> running.extend([Message("user", "check the cert")])
    7
    >>> running.extend([Message("assistant", "It expires on 2026-08-01.")])
    17
    >>> running.total, len(running), running.upto(1)
    (17, 2, 7)
    """

    counter: MessageCounter = attrs.field(factory=_default_counter)
    # prefix sums in one machine-integer buffer: compact, and freed in one step. The sum of the first
    # n messages is _head[n] up to n = _lead (a trim's leading messages), past it _sums[n + _off] + _shift:
    # a trim reads the sums it keeps from the buffer it was told from.
    _sums: array[int] = attrs.field(init=False, factory=lambda: array("q", [0]), repr=False)
    _head: array[int] = attrs.field(init=False, factory=lambda: array("q", [0]), repr=False)
    _lead: int = attrs.field(init=False, default=0, repr=False)
    _off: int = attrs.field(init=False, default=0, repr=False)
    _shift: int = attrs.field(init=False, default=0, repr=False)
    _count: int = attrs.field(init=False, default=0, repr=False)
    _shared: bool = attrs.field(init=False, default=False, repr=False)  # another count reads _sums too

    @property
    def total(self) -> int:
        """
        The tokens of every message counted so far.
        """
        n = self._count
        return self._sums[n + self._off] + self._shift if n > self._lead else self._head[n]

    def __len__(self) -> int:
        return self._count

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, RunningCount)  # noqa: S101  # for the type checker
        return self.counter == other.counter and self._all() == other._all()

    __hash__ = None  # type: ignore[assignment]  # it grows: not hashable

    def _all(self) -> list[int]:
        upto = self.upto
        return [upto(n) for n in range(self._count + 1)]

    def _own(self) -> None:
        """
        Sums of its own, in one buffer from the first message on, before it
        writes anything but an append at the buffer's end.
        """
        if not (self._lead or self._off or self._shift or self._shared) and len(self._sums) == self._count + 1:
            return
        self._sums = array("q", self._all())
        self._head = array("q", [0])
        self._lead = self._off = self._shift = 0
        self._shared = False

    def extend(self, messages: Iterable[Message]) -> int:
        """
        Count *messages* after the ones already counted; returns the new total.

        Raises:
            TypeError: An item is not a :class:`~workingctx.Message`; nothing is added.
        """
        sequence = as_sequence(messages)
        counter = self.counter
        if type(counter) is ApproxTokenCounter:  # not a subclass: it may count its own way
            counts = approx_counts(sequence, counter.images)
        else:
            if type(counter) is TiktokenCounter:
                counter._prefetch(sequence)  # noqa: SLF001  # a batch for the counter of this package
            try:
                counts = list(map(counting(counter), sequence))
            except TypeError:
                relocate(sequence)
                raise
        if not counts:
            return self.total
        if self._count <= self._lead or len(self._sums) != self._count + self._off + 1:
            self._own()  # the buffer goes on past these sums (a count told from these appended), or starts here
        sums = self._sums
        self._count += len(counts)
        if len(counts) == 1:  # an agent's step: one new message
            sums.append(sums[-1] + counts[0])
        else:
            totals = accumulate(counts, initial=sums[-1])
            next(totals)  # the initial total, already the last sum
            sums.extend(totals)
        return sums[-1] + self._shift

    def upto(self, n: int) -> int:
        """
        The tokens of the first *n* messages counted.

        Raises:
            IndexError: *n* is negative or more than the messages counted.
        """
        if not 0 <= n <= self._count:
            msg = f"upto({n!r}) is out of range: {self._count} messages are counted"
            raise IndexError(msg)
        return self._sums[n + self._off] + self._shift if n > self._lead else self._head[n]

    def truncate(self, n: int) -> None:
        """
        Keep the counts of the first *n* messages only.

        Raises:
            IndexError: *n* is negative or more than the messages counted.
        """
        self.upto(n)
        self._own()
        del self._sums[n + 1 :]
        self._count = n

    def rebased(self, head: Iterable[Message], start: int, stop: int) -> RunningCount:
        """
        New running sums: *head* counted, then the messages counted here from
        *start* to *stop*, whose counts are read from these sums, not counted
        again (nor moved: the new sums read these ones' buffer; whichever
        appends to it second copies its own sums first).

        Raises:
            IndexError: *start* or *stop* is out of range, or *stop* is before *start*.
        """
        base = self.upto(start)
        self.upto(stop)
        if stop < start:
            msg = f"rebased(start={start!r}, stop={stop!r}): stop is before start"
            raise IndexError(msg)
        other = RunningCount(self.counter)
        other.extend(head)
        if start < self._lead or stop == start:
            # the kept sums begin among this one's leading messages (not in its buffer), or there are none
            sums = other._sums
            sums += array("q", [self.upto(n) - base + sums[-1] for n in range(start + 1, stop + 1)])
            other._count = len(sums) - 1
            return other
        lead = len(other)
        other._head = other._sums
        other._sums = self._sums
        other._lead = lead
        other._off = start + self._off - lead  # the buffer's index of this one's sum at `start`, less `lead`
        other._shift = other._head[lead] - self._sums[start + self._off]
        other._count = lead + stop - start
        self._shared = other._shared = True  # appends stay safe; a truncation copies first
        if start + self._off > 2 * (stop - start) + 64:
            other._own()  # more sums dropped than kept: the kept ones alone, so the dropped are freed
        return other

    def reset(self) -> None:
        """
        Forget every count: the total is 0 again.
        """
        self._sums = array("q", [0])
        self._head = array("q", [0])
        self._lead = self._off = self._shift = self._count = 0
        self._shared = False
