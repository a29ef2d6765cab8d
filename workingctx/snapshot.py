"""
Snapshots and diffs: frozen, hashable values taken from a live context.

A :class:`FrozenContext` is what :meth:`WorkingContext.freeze` returns: usable as
a dict key in one process, and as a store or cache key across processes through
its stable :meth:`~FrozenContext.digest`. A :class:`ContextDiff` says what changed
between two states. Both copy what they hold, so later writes to the live
context never change them.

>>> from workingctx import Message, WorkingContext
>>> ctx = WorkingContext().append(Message("user", "hello")).note("plan", {"steps": ["a"]})
>>> snap = ctx.freeze()
>>> hash(snap) == hash(ctx.freeze()) and snap.digest() == ctx.freeze().digest()
True
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any

import attrs

from workingctx import _checks
from workingctx._canonical import EMPTY_CHAIN, chain_step, notes_json
from workingctx.exceptions import ArgumentValueError
from workingctx.frozen import FrozenDict, check_kept, freeze_json, freeze_named
from workingctx.messages import Message
from workingctx.prefix import PrefixContext

__all__ = [
    "ContextDiff",
    "FrozenContext",
    "common_prefix_length",
    "diff_states",
    "freeze_scratchpad",
    "notes_digest",
    "snapshot_digest",
]


class Chain:
    """
    The chain digests of one growing transcript, computed lazily and shared.

    ``digests[i]`` identifies the first ``i + 1`` messages in order. A live
    context owns one chain while its tail only grows, and hands it to every
    snapshot it takes, so digests are computed once per message, whoever asks
    first. Clearing the tail starts a new chain; entries are never changed.

    A fork's chain (:meth:`share`) reads its parent's lists for the messages
    they have in common, and copies them only when it grows past them.
    """

    __slots__ = ("_limit", "_lock", "digests", "hashes")

    def __init__(self, digests: Iterable[str] = (), hashes: Iterable[int] = ()) -> None:
        self.digests: list[str] = list(digests)
        # hashes[i]: hash() of the first i + 1 messages, consistent with == (digests are stricter)
        self.hashes: list[int] = list(hashes)
        # Snapshots on several threads may extend one shared chain at once.
        self._lock = threading.Lock()
        # None: the lists are this chain's own; n: they are another chain's,
        # whose first n entries (the messages both transcripts share) are read here
        self._limit: int | None = None

    def share(self, n: int) -> Chain:
        """
        The chain of a copy of the first *n* messages, in O(1): it reads this
        chain's digests for them, and copies them the first time it grows past them.
        """
        chain: Chain = Chain.__new__(Chain)
        chain.digests = self.digests
        chain.hashes = self.hashes
        # The lock is shared too: a chain holds it only to copy or grow its
        # own lists, never while taking another lock.
        chain._lock = self._lock
        chain._limit = n if self._limit is None else min(n, self._limit)
        return chain

    def _own(self) -> None:
        """
        Make the lists this chain's own (the shared entries copied), before it grows.
        """
        with self._lock:
            limit = self._limit
            if limit is not None:
                self.digests = self.digests[:limit]
                self.hashes = self.hashes[:limit]
                self._limit = None

    def upto(self, messages: Sequence[Message], n: int) -> str:
        """
        The chain digest of ``messages[:n]``, extending the cache as needed.

        *messages* must agree with every message already chained (the caller's
        transcript is this chain's transcript, possibly longer).
        """
        limit = self._limit
        if limit is not None:
            digests = self.digests
            if n <= limit and n <= len(digests):
                return digests[n - 1] if n else EMPTY_CHAIN
            self._own()
        digests = self.digests
        if len(digests) < n:
            with self._lock:
                done = len(digests)
                previous = digests[-1] if digests else EMPTY_CHAIN
                for position in range(done, n):
                    previous = chain_step(previous, messages[position])
                    digests.append(previous)
        return digests[n - 1] if n else EMPTY_CHAIN

    def hash_upto(self, messages: Sequence[Message], n: int) -> int:
        """
        A ``hash()`` of ``messages[:n]`` that equal transcripts share, extending the cache as needed.

        Digests tell apart messages Python counts as equal (a ``1`` and a
        ``True`` in metadata), so ``__hash__`` chains the messages' own hashes.
        """
        limit = self._limit
        if limit is not None:
            hashes = self.hashes
            if n <= limit and n <= len(hashes):
                return hashes[n - 1] if n else 0
            self._own()
        hashes = self.hashes
        if len(hashes) < n:
            with self._lock:
                previous = hashes[-1] if hashes else 0
                for position in range(len(hashes), n):
                    previous = hash((previous, messages[position]))
                    hashes.append(previous)
        return hashes[n - 1] if n else 0

    def copy(self, n: int | None = None) -> Chain:
        """
        An independent chain holding the first *n* digests (all by default).
        """
        limit = self._limit
        end = limit if n is None else n if limit is None else min(n, limit)
        return Chain(self.digests[:end], self.hashes[:end])


def _messages(value: Iterable[Message]) -> tuple[Message, ...]:
    return _checks.check_items(value, "messages", Message, "a Message")


def _scratchpad(value: object) -> tuple[tuple[str, Any], ...]:
    pairs = value.items() if isinstance(value, Mapping) else value
    out: list[tuple[str, Any]] = []
    for pair in pairs:  # type: ignore[attr-defined]
        key, item = pair
        _checks.check_instance(key, "scratchpad", str, "str", label="scratchpad keys")
        where = f"note {key!r}"
        check_kept(item, where)  # what no note of a context can hold: a snapshot holds no such note either
        out.append((key, freeze_named(item, where)))
    out.sort(key=lambda kv: kv[0])
    return tuple(out)


def _journal(value: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(freeze_json(entry, f"journal entry {position}") for position, entry in enumerate(value))


_prefix = _checks.instance_of(PrefixContext, "a PrefixContext")


@attrs.frozen(eq=False, getstate_setstate=False)
class FrozenContext:
    """
    A frozen snapshot of a working context.

    Args:
        prefix: The prefix, shared with the live context (it is frozen).
        messages: The tail, as a tuple.
        scratchpad: The notes as ``(key, value)`` pairs sorted by key, values
            deep-frozen (a mapping is accepted and converted).
        journal: The journal's entries, JSON data frozen as a journal records
            them (a live journal's entries are frozen already, so a snapshot
            costs no more than copying their references).

    Equality compares every field. The hash covers the prefix, the messages and
    the scratchpad *keys* (not values, not the journal), so a snapshot whose
    notes hold dicts still hashes; equal snapshots hash equal.

    The :meth:`digest` is stricter than ``==``: it tells ``1``, ``1.0`` and
    ``True`` apart (Python counts them equal), so equal digests mean equal
    snapshots, while equal snapshots may have different digests.
    """

    prefix: PrefixContext = attrs.field(factory=PrefixContext, validator=_prefix)
    messages: tuple[Message, ...] = attrs.field(default=(), converter=_messages)
    scratchpad: tuple[tuple[str, Any], ...] = attrs.field(default=(), converter=_scratchpad)
    journal: tuple[Any, ...] = attrs.field(default=(), converter=_journal)
    _chain: Chain | None = attrs.field(default=None, alias="_chain", kw_only=True, repr=False)
    _hash: int | None = attrs.field(init=False, default=None, repr=False)
    _digest: str | None = attrs.field(init=False, default=None, repr=False)
    # the digest of the notes, when the live context it was taken from knew it
    _notes_digest: str | None = attrs.field(init=False, default=None, repr=False)
    # A live context's lists and lengths, until messages or journal are first
    # read: taking a snapshot then costs the same at every length of a run.
    _lazy: _Lazy | None = attrs.field(init=False, default=None, repr=False)

    if not TYPE_CHECKING:  # type checkers see the fields; only an unread lazy field gets here

        def __getattr__(self, name: str) -> Any:
            lazy = object.__getattribute__(self, "_lazy")
            if lazy is not None and name in ("messages", "journal"):
                items, n = lazy.messages if name == "messages" else lazy.journal
                value = tuple(items[:n])
                object.__setattr__(self, name, value)
                return value
            msg = f"{type(self).__name__!r} object has no attribute {name!r}"
            raise AttributeError(msg)

    # -- value semantics ------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, FrozenContext):
            return NotImplemented
        return (
            self.prefix == other.prefix
            and len(self.messages) == len(other.messages)
            and self.scratchpad == other.scratchpad
            and self.messages == other.messages
            and self.journal == other.journal
        )

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        if self._hash is None:
            keys = tuple(key for key, _ in self.scratchpad)
            messages, n = self._tail()  # a lazy snapshot's list: no tuple built
            chained = self._chain_for().hash_upto(messages, n)
            object.__setattr__(self, "_hash", hash((self.prefix, chained, keys)))
        return self._hash  # type: ignore[return-value]  # set just above

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.prefix, self.messages, self.scratchpad, self.journal)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        prefix, messages, scratchpad, journal = state
        for name, value in (
            ("prefix", prefix),
            ("messages", messages),
            ("scratchpad", scratchpad),
            ("journal", journal),
            ("_chain", None),
            ("_hash", None),
            ("_digest", None),
            ("_notes_digest", None),
            ("_lazy", None),
        ):
            object.__setattr__(self, name, value)

    def _tail(self) -> tuple[Sequence[Message], int]:
        """
        The messages and their number, without building the tuple of a lazy snapshot.
        """
        try:
            messages = object.__getattribute__(self, "messages")
        except AttributeError:
            return self._lazy.messages  # type: ignore[union-attr]  # unset only while lazy
        return messages, len(messages)

    # -- digests ----------------------------------------------------------------

    def _chain_for(self) -> Chain:
        if self._chain is None:
            object.__setattr__(self, "_chain", Chain())
        return self._chain  # type: ignore[return-value]  # set just above

    def chain_digest(self, n: int | None = None) -> str:
        """
        The stable digest of the first *n* messages (all by default), in order.
        """
        messages, size = self._tail()
        count = size if n is None else _checks.check_count(n, "n")
        if count > size:
            msg = f"n must be between 0 and {size}, got {n!r}"
            raise ArgumentValueError(msg, argument="n", value=n)
        return self._chain_for().upto(messages, count)

    def digest(self) -> str:
        """
        The hex sha256 of the snapshot: prefix, messages and scratchpad
        (keys and values), never the journal.

        The same in every process, on every machine and under every
        ``PYTHONHASHSEED``. Equal digests mean the same snapshot, down to the
        types of its payloads (``1``, ``1.0`` and ``True`` differ here, unlike
        under ``==``). Built on the chain of per-message digests, so
        re-freezing after an append hashes only the new message.

        Raises:
            PayloadTypeError: A note holds an object with no canonical form
                (see :func:`workingctx.snapshot.snapshot_digest`); the message
                names the note's key.
        """
        if self._digest is None:
            notes = self._notes_digest
            if notes is None:
                notes = notes_digest(dict(self.scratchpad))
            object.__setattr__(self, "_digest", digest_of_parts(self.prefix, self.chain_digest(), notes))
        return self._digest  # type: ignore[return-value]  # set just above

    @classmethod
    def _trusted(
        cls,
        prefix: PrefixContext,
        messages: tuple[Message, ...],
        scratchpad: tuple[tuple[str, Any], ...],
        journal: tuple[Any, ...],
        chain: Chain,
    ) -> FrozenContext:
        """
        Build a snapshot from parts a live context already validated and froze,
        skipping the per-message checks (freezing is then O(scratchpad)).
        """
        snapshot = object.__new__(cls)
        snapshot.__setstate__((prefix, messages, scratchpad, journal))
        object.__setattr__(snapshot, "_chain", chain)
        return snapshot

    @classmethod
    def _lazily(
        cls,
        prefix: PrefixContext,
        messages: tuple[Sequence[Message], int],
        scratchpad: tuple[tuple[str, Any], ...],
        journal: tuple[Sequence[Any], int],
        chain: Chain,
        notes_digest: str | None = None,
    ) -> FrozenContext:
        """
        Like :meth:`_trusted`, with the messages and the journal entries given
        as ``(list, n)``: the first *n* items of lists that only ever grow in
        place, read into tuples the first time the field is read. Freezing
        then costs the same at every length of a run. *notes_digest*, when
        known, is :func:`notes_digest` of the scratchpad.
        """
        snapshot = cls._trusted(prefix, (), scratchpad, (), chain)
        object.__setattr__(snapshot, "_notes_digest", notes_digest)
        object.__setattr__(snapshot, "_lazy", _Lazy(messages, journal))
        object.__delattr__(snapshot, "messages")
        object.__delattr__(snapshot, "journal")
        return snapshot

    # -- conversions ------------------------------------------------------------

    def assembled(self) -> list[Message]:
        """
        What a provider would see: the prefix rendered, then the messages.
        """
        return [*self.prefix.as_messages(), *self.messages]


class _Lazy:
    """
    Where a lazy snapshot's messages and journal entries are: ``(list, n)`` each.
    """

    __slots__ = ("journal", "messages")

    def __init__(self, messages: tuple[Sequence[Message], int], journal: tuple[Sequence[Any], int]) -> None:
        self.messages = messages
        self.journal = journal


def snapshot_digest(prefix: PrefixContext, chain: str, scratchpad: Mapping[str, Any]) -> str:
    """
    The digest of a state given its prefix, the chain digest of its tail and its notes.

    Notes are JSON data, or hold values with a built-in canonical form: attrs
    classes, dataclasses, enums, datetimes, UUIDs, Decimals, bytes, sets and
    objects with a ``model_dump()`` method. Anything else has nothing that
    identifies it the same way in every process.

    Raises:
        PayloadTypeError: A note holds an object with no canonical form; the
            message names the note's key and how to make it encodable.
    """
    return digest_of_parts(prefix, chain, notes_digest(scratchpad))


def notes_digest(scratchpad: Mapping[str, Any]) -> str:
    """
    The part of a snapshot's digest the notes give: the hex sha256 of the
    scratchpad's canonical JSON.

    Raises:
        PayloadTypeError: A note holds an object with no canonical form (the message names its key).
    """
    return hashlib.sha256(notes_json(scratchpad).encode("utf-8", "surrogatepass")).hexdigest()


def digest_of_parts(prefix: PrefixContext, chain: str, notes: str) -> str:
    """
    A snapshot's digest from its prefix, the chain digest of its tail and :func:`notes_digest` of its notes.
    """
    body = f"snapshot/v2|{prefix.digest()}|{chain}|{notes}"
    return hashlib.sha256(body.encode("ascii")).hexdigest()


def freeze_scratchpad(notes: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """
    Notes as sorted ``(key, frozen value)`` pairs, as a snapshot holds them.
    """
    return tuple(sorted(((key, freeze_named(value, f"note {key!r}")) for key, value in notes.items()), key=_first))


def _first(pair: tuple[str, Any]) -> str:
    return pair[0]


def common_prefix_length(a: FrozenContext, b: FrozenContext) -> int:
    """
    How many leading messages two requests share: the part of the next request
    a provider's prompt cache can reuse.

    Counts over the assembled requests (prefix messages, then the tail), by
    message digest: messages Python counts as equal but written differently
    (a ``1`` and a ``True`` in tool arguments) end the shared part. When
    the prefixes render the same messages, the tails are compared by binary
    search over their chain digests, so the cost grows with the log of the
    shared part; otherwise the two requests are walked until they part.

    >>> from workingctx import Message, WorkingContext
    >>> ctx = WorkingContext().append(Message("user", "q1"), Message("assistant", "a1"))
    >>> before = ctx.freeze()
    >>> after = ctx.append(Message("user", "q2")).freeze()
    >>> common_prefix_length(before, after)
    2
    """
    head_a, head_b = a.prefix.as_messages(), b.prefix.as_messages()
    if a.prefix is not b.prefix and [m.digest() for m in head_a] != [m.digest() for m in head_b]:
        # Different heads: walk both requests until they part.
        shared = 0
        for left, right in zip(chain(head_a, a.messages), chain(head_b, b.messages), strict=False):
            if left.digest() != right.digest():
                break
            shared += 1
        return shared
    # Equal heads: binary search on the tails' chains for the longest equal prefix.
    lo, hi = 0, min(len(a.messages), len(b.messages))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a.chain_digest(mid) == b.chain_digest(mid):
            lo = mid
        else:
            hi = mid - 1
    return len(head_a) + lo


def _keys(value: Iterable[str]) -> frozenset[str]:
    return frozenset(value)


@attrs.frozen(cache_hash=True)
class ContextDiff:
    """
    What changed from one state to another (``new - old``).

    Attributes:
        messages_added: Messages in the new state beyond the old one (multiset
            difference, in the new state's order).
        messages_removed: Messages of the old state missing from the new one
            (multiset difference, in the old state's order).
        scratchpad_changes: Keys added or changed, with their new values,
            deep-frozen (a copy).
        scratchpad_removed: Keys present in the old state only.
        prefix_changed: Whether the prefixes differ.
    """

    messages_added: tuple[Message, ...] = attrs.field(default=(), converter=_messages)
    messages_removed: tuple[Message, ...] = attrs.field(default=(), converter=_messages)
    scratchpad_changes: FrozenDict = attrs.field(factory=FrozenDict, converter=FrozenDict)
    scratchpad_removed: frozenset[str] = attrs.field(default=frozenset(), converter=_keys)
    prefix_changed: bool = False

    def __bool__(self) -> bool:
        return bool(
            self.messages_added
            or self.messages_removed
            or self.scratchpad_changes
            or self.scratchpad_removed
            or self.prefix_changed
        )


def _multiset_minus(left: Sequence[Message], right: Sequence[Message]) -> tuple[Message, ...]:
    remaining = Counter(right)
    out: list[Message] = []
    for message in left:
        if remaining[message] > 0:
            remaining[message] -= 1
        else:
            out.append(message)
    return tuple(out)


_MISSING = object()


def diff_states(
    new_prefix: PrefixContext,
    new_messages: Sequence[Message],
    new_scratchpad: Mapping[str, Any],
    old_prefix: PrefixContext,
    old_messages: Sequence[Message],
    old_scratchpad: Mapping[str, Any],
) -> ContextDiff:
    """
    The :class:`ContextDiff` of two states given as their parts.
    """
    changes = {key: value for key, value in new_scratchpad.items() if old_scratchpad.get(key, _MISSING) != value}
    return ContextDiff(
        messages_added=_multiset_minus(new_messages, old_messages),
        messages_removed=_multiset_minus(old_messages, new_messages),
        scratchpad_changes=FrozenDict(changes),
        scratchpad_removed=frozenset(key for key in old_scratchpad if key not in new_scratchpad),
        prefix_changed=new_prefix != old_prefix,
    )
