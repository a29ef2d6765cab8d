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

from workingctx.scopes._exchanges import call_ids, is_reasoning_only, result_ids, starts_turn
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
    ``blocked_by[c]`` is the index of the first message that makes ``c`` split
    an exchange (:data:`NEVER` if none does), so the answer for the transcript's
    first ``n`` messages is ``blocked_by[c] >= n``: an index taken when the
    transcript was longer still answers for a shorter view of it.

    Each cut is marked at most once (the first message that blocks it is the
    lowest), and cuts already marked are skipped, so indexing costs the same
    per message however many results answer one call.

    Attributes:
        size: How many messages are indexed.
        blocked_by: One entry per cut, ``0`` to ``size``.
        turn_start: ``turn_start[i]`` is 1 when message ``i`` opens a user turn.
        turns: The indices of the messages that open a user turn, ascending.
        walk: The provider rules' state after the indexed messages
            (see :mod:`workingctx.validity`).
    """

    __slots__ = ("_call_at", "_next", "blocked_by", "size", "turn_start", "turns", "walk")

    def __init__(self) -> None:
        self.size = 0
        self.blocked_by = array("q", [NEVER])
        self.turn_start = bytearray()
        self.turns = array("q")
        self._call_at: dict[str, int] = {}
        # _next[c] leads (through a chain that finds are shortening) to the first cut >= c not marked yet
        self._next = array("q", [0, 1])
        self.walk = RuleState()

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
        Mark every cut from *start* to *stop* that no earlier message blocks as blocked by *by*.
        """
        blocked_by, following = self.blocked_by, self._next
        cut = self._unmarked(start)
        while cut <= stop:
            blocked_by[cut] = by
            following[cut] = cut + 1
            cut = self._unmarked(cut + 1)

    def update(self, messages: Sequence[Message]) -> None:
        """
        Index the messages past ``size``; *messages* must extend the ones indexed.
        """
        call_at = self._call_at
        walk = self.walk
        for j in range(self.size, len(messages)):
            message = messages[j]
            for answered in result_ids(message):
                asked = call_at.get(answered)
                if asked is not None:
                    # Every cut between the call and this answer splits the exchange.
                    self._block(asked + 1, j, j)
            calls = call_ids(message)
            if calls:
                if j > 0 and is_reasoning_only(messages[j - 1]):
                    self._block(j, j, j)
                for call in calls:
                    call_at[call] = j
            self.blocked_by.append(NEVER)
            self._next.append(j + 2)
            opens = starts_turn(message)
            self.turn_start.append(opens)
            if opens:
                self.turns.append(j)
            walk.feed(message)
        self.size = max(self.size, len(messages))

    def first_cut(self, start: int, n: int, *, user_turn: bool) -> int:
        """
        The first cut at or after *start* that splits no exchange of the first
        *n* messages (and opens a user turn, with *user_turn*); *n* if none.
        """
        blocked_by, turn_start = self.blocked_by, self.turn_start
        for cut in range(start, n):
            if blocked_by[cut] >= n and (not user_turn or cut == 0 or turn_start[cut]):
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
        """
        size = self.size
        if not 0 <= start <= size or len(rest) != size - start or self.blocked_by[start] < size:
            return None
        walk = self.walk.rebased(head, rest, start, dropped)
        if walk is None:
            return None
        index = TailIndex()
        index.update(head)  # system messages that neither call nor answer: nothing is blocked
        shift = len(head) - start
        # Each cut, its blocker, its chain to the first cut not marked yet (see
        # _unmarked) and each turn and call, moved; a list becomes an array in one pass.
        index.blocked_by += array("q", [b if b == NEVER else b + shift for b in self.blocked_by[start + 1 : size + 1]])
        del index._next[len(head) :]
        index._next += array("q", [c + shift for c in self._next[start : size + 2]])
        index.turn_start += self.turn_start[start:size]
        turns = self.turns
        index.turns += array("q", [t + shift for t in turns[bisect.bisect_left(turns, start) :]])
        index._call_at = {call: at + shift for call, at in self._call_at.items() if at >= start}  # head calls none
        index.walk = walk
        index.size = len(head) + len(rest)
        return index
