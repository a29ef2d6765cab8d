"""
The provider's cache as a simulation sees it: entries by request identity, each
gone once older than its lifetime, and what each request reads, writes and pays again.
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
from collections.abc import Callable, Sequence
from decimal import Decimal

import attrs

from workingctx import _checks
from workingctx.cache._layout import (
    TOKENS_OF,
    Layout,
    Position,
    bisect_right,
    chain_modulus,
    chain_power,
    chain_root,
    chained_through,
)
from workingctx.cache._plan import CachePlan, marked_positions
from workingctx.cache._rules import TTL, CacheRules
from workingctx.exceptions import CacheRuleError
from workingctx.messages import Message

__all__ = ["SentPrefixes", "Served", "SimulatedCache", "checked_seconds", "seen_before"]

_FOREVER = 10**15  # seconds; anything longer is taken for a mistake


def checked_seconds(value: object, what: str) -> float:
    """
    *value* as a number of seconds: finite and not negative.
    """
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise _checks.wrong_type(value, what, "a number of seconds")
    number: int | float | Decimal = value
    finite = number.is_finite() if isinstance(number, Decimal) else isinstance(number, int) or math.isfinite(number)
    if not finite or not 0 <= number < _FOREVER:
        msg = f"{what} must be a finite, non-negative number of seconds (below 10**15), got {value!r}"
        raise CacheRuleError(msg, argument=what, value=value)
    return float(number)


@attrs.define
class _Entry:
    """
    One cache entry: the tokens it holds, its lifetime, and when it was last written or read.
    """

    tokens: int
    ttl: TTL
    used: float


@attrs.frozen
class Served:
    """
    What one request read and wrote, and what it paid again.
    """

    read: int
    written_5m: int
    written_1h: int
    missed: int  # tokens a live entry held that no breakpoint's lookback reached
    expired: int  # tokens an expired entry held beyond what was read
    known: int = 0  # tokens of the longest prefix an earlier request to the cache sent


@attrs.define
class SimulatedCache:
    """
    The provider's cache as a simulation sees it: entries by request identity,
    each gone once it is older than its lifetime (a read renews it).
    """

    rules: CacheRules
    minimum: int
    entries: dict[str, _Entry] = attrs.Factory(dict)
    # keep every prefix sent: what Served.known says, and the walk's bound (a report of two requests needs neither)
    prefixes: bool = attrs.field(default=True, kw_only=True)
    # the chain values of the messages whose blocks hold entries (a key is its
    # message's chain key, the hex form of its chain value, ":" and the block),
    # for a walk to skip the others
    _heads: set[int] = attrs.field(factory=set, init=False, repr=False, eq=False)
    # every prefix a request sent: an entry's key names a prefix sent, so a
    # request's messages past the longest prefix sent before hold no entry
    # (unless the cache was given entries of its own)
    _sent: SentPrefixes | None = attrs.field(init=False, repr=False, eq=False)
    _given: bool = attrs.field(default=False, init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        self._given = bool(self.entries)
        self._sent = SentPrefixes() if self.prefixes else None  # defined below
        for key in self.entries:
            self._hold(key)

    def _hold(self, key: str) -> None:
        # only a layout's own keys (the hex form of a chain value) are ever
        # looked for by chain value: keys of another form are skipped
        head = key.rpartition(":")[0]
        if head.startswith("0x"):
            try:
                value = int(head, 16)
            except ValueError:
                return
            if hex(value) == head:
                self._heads.add(value)

    def _write(self, key: str, entry: _Entry) -> None:
        self.entries[key] = entry
        self._hold(key)

    def _live(self, key: str, now: float) -> _Entry | None:
        entry = self.entries.get(key)
        if entry is None or now - entry.used > self.rules.lifetimes[entry.ttl]:
            return None
        return entry

    def _keep(self, key: str, tokens: int, ttl: TTL, now: float) -> None:
        """
        Write the entry of *key*, holding *tokens*, for *ttl*, or renew the
        live one there for its own lifetime (renewing is not billed, so it
        does not lengthen the entry).
        """
        entry = self._live(key, now)
        if entry is not None:
            entry.used = now
        else:
            self._write(key, _Entry(tokens, ttl, now))

    def _beyond(self, layout: Sequence[Position], read: int, now: float, bound: int | None) -> tuple[int, int]:
        """
        The tokens of the longest live entry of *layout* and of the longest
        expired one after it, where they exceed *read* (else 0): all a
        request's misses depend on. Tokens never decrease along a layout, so
        the positions holding more than *read* are its end, found by a binary
        search, and the walk over them goes back from the end and stops at the
        first live entry. (Which positions hold entries is not a prefix of the
        layout, only marked positions are written, so no search finds them.)
        """
        entries, lifetimes = self.entries, self.rules.lifetimes
        past = bisect_right(layout, read, TOKENS_OF)
        expired = 0
        if isinstance(layout, Layout):
            return self._beyond_heads(layout, past, now, layout.message_count if bound is None else bound)
        for position in itertools.islice(reversed(layout), len(layout) - past):
            if position.key in entries:
                entry = entries[position.key]
                if now - entry.used <= lifetimes[entry.ttl]:
                    return position.tokens, expired
                expired = expired or position.tokens
        return 0, expired

    def _beyond_heads(self, layout: Layout, past: int, now: float, bound: int) -> tuple[int, int]:
        """
        :meth:`_beyond` over a :class:`Layout`, whose positions after *past*
        are read from its lists, and only where their message's chain value
        holds an entry (none, most often, after a cut: a set intersection
        says so), of its first *bound* messages (past them none holds one).
        """
        size, run, every = len(layout), layout._run, layout.message_count
        count = min(every, bound)
        if past >= size or layout.message_at(past) >= count:
            return 0, 0
        first = layout.message_at(past)
        values = run.values_between(first, count)
        held = self._heads.intersection(values)
        if not held:
            return 0, 0
        entries, lifetimes, token = self.entries, self.rules.lifetimes, layout.token
        messages, blocks, base = run.messages, run.blocks, run.message_base
        expired = 0
        for m in range(count - 1, first - 1, -1):
            if values[m - first] not in held:
                continue
            head = hex(values[m - first])
            # the message's positions: its blocks, in order
            low = bisect.bisect_left(messages, m - base, past, size)
            end = bisect.bisect_left(messages, m + 1 - base, low, size)
            for i in range(end - 1, low - 1, -1):
                entry = entries.get(f"{head}:{blocks[i]}")
                if entry is not None:
                    if now - entry.used <= lifetimes[entry.ttl]:
                        return token(i), expired
                    expired = expired or token(i)
        return 0, expired

    def send(self, request: CachePlan, now: float = 0.0) -> Served:
        """
        Serve *request* at *now* (seconds since the run began).
        """
        layout = request._layout
        if not layout:
            return Served(0, 0, 0, 0, 0)
        known, depth = self._sent.sent(layout) if self._sent is not None else (0, None)
        # past the longest prefix sent before, no message holds an entry
        bound = None if self._given else depth
        if not self.rules.explicit:
            return attrs.evolve(self._implicit(layout, now), known=known)
        # each marked position with its key and tokens made (marked_positions made them)
        marks = [(i, p, ttl) for i, p, ttl in marked_positions(request) if p.tokens >= self.minimum]
        key, tokens = _readers(layout)
        read = 0
        hit: str | None = None
        # A layout's position can hold an entry only where its message's chain value
        # holds one (see _heads), within the bound: the others are passed without making their keys.
        heads = self._heads
        laid, last = (
            (layout, layout.message_count if bound is None else bound) if isinstance(layout, Layout) else (None, 0)
        )
        for at, mark, _ttl in marks:
            # Each breakpoint looks back for the nearest live entry; the longest found is read.
            for j in range(at, max(at - self.rules.lookback_blocks, -1), -1):
                if laid is not None:
                    m = laid.message_at(j)
                    if m >= last or laid._run.value(m) not in heads:
                        continue
                found = mark.key if j == at else key(j)
                if self._live(found, now) is not None:
                    if tokens(j) > read:
                        read, hit = tokens(j), found
                    break
        reachable, expired = self._beyond(layout, read, now, bound)
        end = max((p.tokens for _i, p, _ttl in marks), default=0)
        end_1h = max((p.tokens for _i, p, ttl in marks if ttl == "1h"), default=0)
        written_1h = max(0, end_1h - read)
        written = max(0, end - read)
        if hit is not None:
            self.entries[hit].used = now
        for _i, p, ttl in marks:
            self._keep(p.key, p.tokens, ttl, now)
        return Served(
            read,
            written - written_1h,
            written_1h,
            max(0, reachable - read),
            max(0, expired - max(read, reachable)),
            known,
        )

    def _implicit(self, layout: Sequence[Position], now: float) -> Served:
        # Every implicit request keeps all its positions, and a position's key
        # names the whole request up to it: a request holding a key holds the
        # keys before it. So the keys of a layout the cache holds are a prefix
        # of it, and so are the live ones (each was used at least as recently
        # as any after it): two binary searches find them, where the longest
        # live one is what is shared and the longest held one what expired.
        entries = self.entries
        key, tokens = _readers(layout)
        held = _prefix_where(len(layout), lambda i: key(i) in entries)
        live = _prefix_where(held, lambda i: self._live(key(i), now) is not None)
        shared = tokens(live - 1) if live else 0
        expired = tokens(held - 1) if held > live else 0
        read = 0
        if shared >= self.minimum:
            read = shared - (shared - self.minimum) % self.rules.step_tokens
        for i in range(live):  # renewed, each for its own lifetime
            entries[key(i)].used = now
        for i in range(live, len(layout)):
            self._write(key(i), _Entry(tokens(i), "5m", now))
        return Served(read, 0, 0, 0, max(0, expired - max(read, shared)))


def seen_before(layout: Sequence[Position], seen: set[int]) -> int:
    """
    The tokens of the longest prefix of *layout* an earlier request sent, and
    add its messages to *seen*, which holds those of every earlier layout.
    A position's key names the request up to it, so what *seen* holds of
    *layout* is a prefix of it (see :meth:`SimulatedCache._implicit`), found
    by a binary search, and only the messages after it are new.

    A request holds whole messages, and the blocks of a message share the
    chain key of the request through it, so *seen* holds one value per
    message: the chain value of the request through it, of which the chain
    key is the hex form (a run's replay may send millions of prefixes; a
    key per block would hold gigabytes). It may hold those of messages
    without a position too: a chain value names the whole request up to its
    message, so no position of another message has it.
    """
    if isinstance(layout, Layout):
        run = layout._run
        value, message, size = run.value, layout.message_at, len(layout)
        held = _prefix_where(size, lambda i: value(message(i)) in seen)
        if held < size:
            seen.update(run.values_between(message(held), layout.message_count))  # the messages after the held prefix
        return layout.token(held - 1) if held else 0
    held = _prefix_where(len(layout), lambda i: _chain_value(layout[i].key) in seen)
    seen.update({_chain_value(position.key) for position in layout[held:]})
    return layout[held - 1].tokens if held else 0


class _Edge:
    """
    An edge of :class:`SentPrefixes`' tree: the messages from *start* to
    *end* of the requests that go through it, whose chain values are read
    from pieces of the tree's list of messages (see :meth:`SentPrefixes._value`),
    and the node where requests part after it (None: one request, or several
    each a prefix of the longest, ends here).
    """

    __slots__ = ("child", "end", "pieces", "start", "starts")

    def __init__(self, start: int, end: int, pieces: list[tuple[int, int, int]]) -> None:
        self.start = start
        self.end = end
        self.pieces = pieces  # (first message, index in the tree's list of messages, lift), by first message
        self.starts = [piece[0] for piece in pieces]
        self.child: dict[int, _Edge] | None = None


class SentPrefixes:
    """
    Every prefix an earlier request of a run sent, for :func:`seen_before`'s
    answer without a chain value kept per message of every request: a tree
    of the requests sent (a path per request, parting where requests part),
    with the chain values along each edge read, in one arithmetic step,
    from a list of the messages sent, each kept once.

    The list holds every message object the tree has met, in the order it
    met them, and the chain values ``C`` of that list as one request. A run
    of a request's messages from message *a* that is a run of the list from
    index *j* has the chain values ``V(m) = (V(a - 1) - C(j - 1)) * B**(m - a + 1)
    + C(j + m - a) mod P`` (see :func:`~workingctx.cache._layout.lay_out`): an
    edge keeps one ``(a, j, lift)`` piece per such run, so a request cut at
    the front and grown at the end costs a piece or two, not a value per message.

    A chain value names the whole request up to its message, so the tree's
    edges leaving a node are told apart by the chain value of their first
    message, and along an edge a request goes on with it while their chain
    values agree, found by a binary search. Requests laid out otherwise than
    as a :class:`~workingctx.cache._layout.Layout` (a plan unpickled from an
    earlier version) are answered by :func:`seen_before` over the values of
    every prefix sent, which the tree then hands over.
    """

    __slots__ = ("_at", "_chain", "_last", "_messages", "_root", "_seen")

    def __init__(self) -> None:
        self._root: dict[int, _Edge] = {}
        self._messages: list[Message] = []
        self._chain: list[int] = []
        self._at: dict[int, int] = {}  # id of a message of the list -> its index there
        self._seen: set[int] | None = None
        # the run and message count of the last request, when it ended a path, and that path's last edge
        self._last: tuple[object, int, _Edge] | None = None

    def sent(self, layout: Sequence[Position]) -> tuple[int, int | None]:
        """
        The tokens of the longest prefix of *layout* an earlier request sent
        (what :func:`seen_before` gives), and how many messages that prefix
        holds (None when it is not told: after a request laid out otherwise
        than as a :class:`~workingctx.cache._layout.Layout`); and add
        *layout*'s prefixes.
        """
        if not layout:
            return 0, None
        if self._seen is None and not isinstance(layout, Layout):
            self._seen = self._every_value()
        if self._seen is not None:
            return seen_before(layout, self._seen), None
        assert isinstance(layout, Layout)  # noqa: S101  # told above
        run, count = layout._run, layout.message_count
        value = run.value
        last, self._last = self._last, None
        if last is not None and last[0] is run and last[1] <= count:
            # The request holds the last one (a run's lists only grow in place), which ended a
            # path of the tree: no earlier request goes on past it, so the request parts there.
            _, depth, ended = last
            if depth < count:
                self._extend(ended, self._pieces(layout, depth), count)
            self._last = (run, count, ended)
            held = bisect.bisect_left(run.messages, depth - run.message_base, 0, len(layout))
            return (layout.token(held - 1) if held else 0), depth
        edges, depth = self._root, 0
        while True:
            edge = edges.get(value(depth)) if depth < count else None
            if edge is None:
                if depth < count:
                    edges[value(depth)] = leaf = _Edge(depth, count, self._pieces(layout, depth))
                    self._last = (run, count, leaf)
                break
            top = min(edge.end, count)
            low, high = depth + 1, top  # values agree at depth (the edge's key) and are searched after it
            while low < high:
                middle = (low + high) // 2
                if self._value(edge, middle) == value(middle):
                    low = middle + 1
                else:
                    high = middle
            depth = low
            if depth < edge.end:  # the request parts from the edge inside it (or ends there)
                if depth < count:
                    leaf = _Edge(depth, count, self._pieces(layout, depth))
                    self._split(edge, depth, value(depth), leaf)
                    self._last = (run, count, leaf)
                break
            if edge.child is not None:
                edges = edge.child
                continue
            if depth < count:  # the request goes on past the last request through the edge
                self._extend(edge, self._pieces(layout, depth), count)
                self._last = (run, count, edge)
            break
        held = bisect.bisect_left(run.messages, depth - run.message_base, 0, len(layout))
        return (layout.token(held - 1) if held else 0), depth

    def _value(self, edge: _Edge, message: int) -> int:
        """
        The chain value through *message* of the requests through *edge*.
        """
        first, at, lift = edge.pieces[bisect.bisect_right(edge.starts, message) - 1]
        return (lift * chain_power(message - first + 1) + self._chain[at + message - first]) % chain_modulus()

    def _split(self, edge: _Edge, depth: int, key: int, other: _Edge) -> None:
        """
        Part *edge* at message *depth*: its messages from there on go on in a new edge, beside *other*.
        """
        rest = _Edge(depth, edge.end, edge.pieces)
        rest.starts, rest.child = edge.starts, edge.child  # the pieces are shared: each edge reads its own messages
        edge.end = depth
        edge.child = {self._value(rest, depth): rest, key: other}

    def _extend(self, edge: _Edge, pieces: list[tuple[int, int, int]], count: int) -> None:
        """
        Lengthen the last edge of a path by *pieces*, up to message *count*.
        """
        first, at, lift = pieces[0]
        last_first, last_at, last_lift = edge.pieces[-1]
        if at == last_at + first - last_first and lift == last_lift * chain_power(first - last_first) % chain_modulus():
            pieces = pieces[1:]  # the list's run goes on: the last piece reads it
        edge.pieces += pieces
        edge.starts += [piece[0] for piece in pieces]
        edge.end = count

    def _pieces(self, layout: Layout, start: int) -> list[tuple[int, int, int]]:
        """
        The pieces of the list of messages *layout*'s messages from *start* on
        are, each with its lift; messages not in the list yet are added to it
        at its end. Each run of the list is found without a Python call per
        message (a cut request is one run, then the messages it added).
        """
        run, count = layout._run, layout.message_count
        sources, messages, at_of = run.sources, self._messages, self._at
        pieces: list[tuple[int, int, int]] = []
        previous = -2
        m = start
        while m < count:
            message = sources[m]
            index = at_of.get(id(message))
            if index is None:
                index, length = self._add(message), 1
            else:
                more = min(count - m, len(messages) - index) - 1  # how far the list could go on with the request
                length = 1 + next(
                    itertools.compress(
                        itertools.count(),
                        map(operator.is_not, sources[m + 1 : m + 1 + more], messages[index + 1 : index + 1 + more]),
                    ),
                    more,
                )
            if index != previous + 1:
                pieces.append((m, index, self._lift(run.value, m, index)))
            previous = index + length - 1
            m += length
        return pieces

    def _add(self, message: Message) -> int:
        index = len(self._messages)
        self._chain.append(chained_through(self._chain[-1] if index else chain_root(), message))
        self._messages.append(message)
        self._at[id(message)] = index
        return index

    def _lift(self, value: Callable[[int], int], first: int, at: int) -> int:
        before = value(first - 1) if first else chain_root()
        return (before - (self._chain[at - 1] if at else chain_root())) % chain_modulus()

    def _every_value(self) -> set[int]:
        """
        The chain value through every message of every request the tree holds.
        """
        seen: set[int] = set()
        stack = [self._root]
        while stack:
            for edge in stack.pop().values():
                seen.update(self._value(edge, m) for m in range(edge.start, edge.end))
                if edge.child is not None:
                    stack.append(edge.child)
        return seen


def _chain_value(key: str) -> int:
    """
    The chain value of the request up to the position of *key* (see :func:`~workingctx.cache._layout.lay_out`).
    """
    return int(key.rpartition(":")[0], 16)


def _readers(layout: Sequence[Position]) -> tuple[Callable[[int], str], Callable[[int], int]]:
    """
    The key and the tokens of the position at an index of *layout*: read
    from a :class:`Layout`'s lists, without making the position.
    """
    if isinstance(layout, Layout):
        return layout.key, layout.token
    return (lambda i: layout[i].key), (lambda i: layout[i].tokens)


def _prefix_where(size: int, holds: Callable[[int], bool]) -> int:
    """
    The length of the longest prefix of ``range(size)`` where *holds* is
    true, for a *holds* that is true up to some index and false from there on.
    """
    low, high = 0, size
    while low < high:
        middle = (low + high) // 2
        if holds(middle):
            low = middle + 1
        else:
            high = middle
    return low
