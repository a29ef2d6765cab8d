"""
``TailIndex``: where a growing transcript may be cut, kept up to date one message at a time.

A context keeps one for its tail so that positional scopes such as
:class:`~workingctx.TokenBudget` and the context managers can find the cut
they need, and know whether the transcript is valid, without walking the
whole transcript: each message is examined once, when it is first indexed.
"""

from __future__ import annotations

import bisect
from array import array
from typing import TYPE_CHECKING

from workingctx.scopes._exchanges import is_reasoning_only
from workingctx.validity import RuleState

if TYPE_CHECKING:
    from collections.abc import Sequence

    from workingctx.messages import Message

__all__ = ["TailIndex"]

NEVER = 1 << 62
"""``blocked_by`` of a cut that no message blocks."""


class TailIndex:
    """
    The cut points, turns and provider-rule state of a transcript that only grows.

    A *cut* ``c`` keeps the messages from index ``c`` on. It splits an exchange
    when a kept message answers a call made before ``c``, or when ``c`` separates
    a call from the reasoning-only assistant message just before it.
    :meth:`blocker` of ``c`` is the index of the first message that makes ``c``
    split an exchange (:data:`NEVER` if none does), so the answer for the
    transcript's first ``n`` messages is ``blocker(c) >= n``: an index taken
    when the transcript was longer still answers for a shorter view of it.

    Each cut is marked at most once (the first message that blocks it is the
    lowest), and cuts already marked are skipped, so indexing costs the same
    per message however many results answer one call.

    A trim that keeps a few system messages and then the newest messages gets
    its index from the old one by :meth:`rebased`, which moves nothing: the
    new index reads the old one's arrays from the first message kept on (the
    arrays are *stored* positions, a message keeps its stored position while
    the trims drop the ones before it), and copies them only when the
    messages dropped outnumber the ones kept, so a trim on every turn costs
    the same however long the window.

    Attributes:
        size: How many messages are indexed.
        walk: The provider rules' state after the indexed messages
            (see :mod:`workingctx.validity`).
    """

    __slots__ = ("_base", "_blocked", "_call_at", "_lead", "_next", "_opens", "_turns", "size", "walk")

    def __init__(self) -> None:
        self.size = 0
        # Message i >= _lead is stored at i - _lead + _base; the first _lead
        # messages are system messages that neither call nor answer, not stored.
        self._lead = 0
        self._base = 0
        self._blocked = array("q", [NEVER])  # per stored cut: the stored index of its first blocker
        self._opens = bytearray()  # per stored message: 1 when it opens a user turn
        self._turns = array("q")  # the stored indices of the messages that open a user turn, ascending
        self._call_at: dict[str, int] = {}  # a call's id: the stored index of its message
        # _next[c] leads (through a chain that finds are shortening) to the first stored cut >= c not marked yet
        self._next = array("q", [0, 1])
        self.walk = RuleState()

    @property
    def _end(self) -> int:
        """The stored index past the last message indexed."""
        return self.size - self._lead + self._base

    def blocker(self, cut: int) -> int:
        """
        The index of the first message that makes *cut* split an exchange, :data:`NEVER` if none does.
        """
        if cut < self._lead:  # a cut among the leading system messages: they call nothing
            return NEVER
        by = self._blocked[cut - self._lead + self._base]
        # a mark past this index's messages is another index's (one this index's arrays were handed to)
        return NEVER if by >= self._end else by - self._base + self._lead

    def opens_turn(self, i: int) -> bool:
        """
        Whether message *i* opens a user turn.
        """
        return i >= self._lead and bool(self._opens[i - self._lead + self._base])

    def turn_count(self) -> int:
        """
        How many of the indexed messages open a user turn.
        """
        turns = self._turns
        return bisect.bisect_left(turns, self._end) - bisect.bisect_left(turns, self._base)

    def positions(self) -> tuple[list[int], bytes, list[int], dict[str, int], list[int]]:
        """
        The index as it answers, in the transcript's positions (a copy, to
        compare two indexes): each cut's blocker, each message's turn flag,
        the messages opening a turn, each call's message, and each cut's
        next cut not marked yet.
        """
        size, base, end = self.size, self._base, self._end
        shift = self._lead - base
        blockers = [self.blocker(c) for c in range(size + 1)]
        opens = bytes(self._lead) + bytes(self._opens[base:end])
        turns = [t + shift for t in self._turns if base <= t < end]
        calls = {call: at + shift for call, at in self._call_at.items() if base <= at < end}
        unmarked = list(range(size + 1))
        for c in range(size - 1, -1, -1):
            if blockers[c] < size:
                unmarked[c] = unmarked[c + 1]
        return blockers, opens, turns, calls, unmarked

    def _unmarked(self, cut: int) -> int:
        following = self._next
        root = cut
        while following[root] != root:
            root = following[root]
        while following[cut] != root:
            following[cut], cut = root, following[cut]
        return root

    def _block(self, start: int, stop: int, by: int) -> None:
        """
        Mark every stored cut from *start* to *stop* that no earlier message blocks as blocked by *by*.
        """
        blocked_by, following = self._blocked, self._next
        cut = self._unmarked(start)
        while cut <= stop:
            blocked_by[cut] = by
            following[cut] = cut + 1
            cut = self._unmarked(cut + 1)

    def _own(self) -> None:
        """
        Arrays of this index's own, before it writes: the stored messages it
        indexed, from its first on, with none of the marks that messages
        another index stored after them left.
        """
        base, end = self._base, self._end
        blocked = array("q", [NEVER if b >= end else b - base for b in self._blocked[base : end + 1]])
        # a cut's chain leads to the next cut not marked: each unmarked cut leads to itself
        following = array("q", [c if b == NEVER else c + 1 for c, b in enumerate(blocked)])
        following.append(len(blocked))
        self._blocked, self._next = blocked, following
        self._opens = self._opens[base:end]
        self._turns = array("q", [t - base for t in self._turns if base <= t < end])
        self._call_at = {call: at - base for call, at in self._call_at.items() if base <= at < end}
        self._base = 0

    def update(self, messages: Sequence[Message]) -> None:
        """
        Index the messages past ``size``; *messages* must extend the ones indexed.
        """
        if self.size >= len(messages):
            return
        if len(self._opens) != self._end:
            self._own()  # the arrays go on past this index's messages: another index told from it wrote them
        call_at, base = self._call_at, self._base
        walk, blocked_by, following, opens, turns = self.walk, self._blocked, self._next, self._opens, self._turns
        shift = base - self._lead  # a message's stored index less its index
        ids_of, feed = walk.ids_of, walk.feed
        for j in range(self.size, len(messages)):
            message = messages[j]
            at = j + shift
            # the ids the rules' walk reads too, repeats included: read once for both
            ids = results, calls = ids_of(message)
            for answered in results:
                asked = call_at.get(answered)
                if asked is not None and asked >= base:
                    # Every cut between the call and this answer splits the exchange.
                    self._block(asked + 1, at, at)
            if calls:
                if j > 0 and is_reasoning_only(messages[j - 1]):
                    self._block(at, at, at)
                for call in calls:
                    call_at[call] = at
            blocked_by.append(NEVER)
            following.append(at + 2)
            opens_turn = message.role == "user" and not results  # a user message that answers no call
            opens.append(opens_turn)
            if opens_turn:
                turns.append(at)
            feed(message, ids)
        self.size = len(messages)

    def first_cut(self, start: int, n: int, *, user_turn: bool) -> int:
        """
        The first cut at or after *start* that splits no exchange of the first
        *n* messages (and opens a user turn, with *user_turn*); *n* if none.
        """
        lead = self._lead
        if start < lead:
            if not user_turn or start == 0:
                return min(n, start)
            start = lead
        shift = self._base - lead
        blocked_by, opens, bound = self._blocked, self._opens, n + shift
        for cut in range(start, n):
            stored = cut + shift
            if blocked_by[stored] >= bound and (not user_turn or cut == 0 or opens[stored]):
                return cut
        return n

    def rebased(
        self, head: Sequence[Message], rest: Sequence[Message], start: int, dropped: Sequence[Message] | None = None
    ) -> TailIndex | None:
        """
        The index of *head* followed by *rest*, the messages indexed here from
        *start* on, told from this one without walking *rest* again (a trim
        that keeps the system messages and the newest messages); None when it
        cannot be told so (then index them).

        It can when *start* splits no exchange, the transcript indexed here
        breaks no provider rule, and *head* holds only system messages that
        neither call nor answer (see :meth:`RuleState.rebased`): every link
        between messages of *rest* (a result to its call, a call to the
        reasoning before it) is then the same, moved by ``len(head) - start``.
        *dropped*, the messages indexed here before *start*, saves a pass over
        *rest* when given (see :meth:`RuleState.rebased`).

        The new index reads this one's arrays: whichever of the two indexes
        more messages second copies them first (see :meth:`_own`).
        """
        size = self.size
        if not 0 <= start <= size or len(rest) != size - start or self.blocker(start) < size:
            return None
        walk = self.walk.rebased(head, rest, start, dropped)
        if walk is None:
            return None
        index = TailIndex()
        if start < self._lead:  # rest begins among this index's leading messages, which it does not store
            index.update([*head, *rest])
            return index
        index.walk = walk
        index.size = len(head) + len(rest)
        index._lead = len(head)  # system messages that neither call nor answer: nothing is blocked
        stored = start - self._lead + self._base
        index._base = stored
        index._blocked, index._next, index._opens = self._blocked, self._next, self._opens
        # the calls in a dict of its own (a C-level copy): a call id indexed again would move this one's
        index._turns, index._call_at = self._turns, self._call_at.copy()
        if stored > 2 * len(rest) + 64:
            # more messages dropped than kept: the kept ones' arrays alone, so the dropped are freed
            index._own()
        return index
