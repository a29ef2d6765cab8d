"""
The journal: an append-only log with a watermark.

A child agent records what it changed; the parent absorbs the entries past the
watermark (:meth:`MutationJournal.diff`) and the child marks them committed, so
only new entries ship next time. Entries are never rewritten, which is what keeps
their attribution intact through any chain of merges.

>>> from workingctx import MutationJournal
>>> journal: MutationJournal[dict[str, object]] = MutationJournal()
>>> journal.record({"kind": "row_written", "id": 1, "agent_id": "enricher-a"})
>>> journal.has_uncommitted(), len(journal)
(True, 1)
>>> journal.mark_committed()
>>> journal.has_uncommitted()
False
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar, cast

from workingctx._canonical import entries_digest
from workingctx.frozen import freeze_json

__all__ = ["MutationJournal"]

EntryT = TypeVar("EntryT")


class MutationJournal(Generic[EntryT]):
    """
    An append-only log of entries of type ``EntryT`` with a commit watermark.

    Entries are JSON data (str, int, float, bool, None, lists and dicts with
    str keys), frozen when they are recorded: a dict becomes a read-only
    :class:`~workingctx.frozen.FrozenDict`, so an entry cannot change after the fact,
    and every snapshot and checkpoint holding it stays what it was.

    Args:
        entries: Seed entries, for a journal rebuilt from a snapshot or seeded
            by a fork. They start committed: a parent has already seen them.

    Raises:
        PayloadTypeError: An entry is not JSON data (nothing is recorded).
        PayloadError: An entry is nested too deep, contains itself, or holds
            a NaN, an infinity or an int too long to write.
    """

    __slots__ = ("_committed", "_digests", "_entries")

    def __init__(self, entries: Iterable[EntryT] = ()) -> None:
        self._entries: list[EntryT] = []
        self._add(entries)
        self._committed = len(self._entries)
        self._digests: list[str] = []

    def _seed(self) -> MutationJournal[EntryT]:
        """
        A new journal seeded with these entries, all committed: a fork's. The
        entries are frozen already, so they are shared, with their digests.
        """
        seeded: MutationJournal[EntryT] = MutationJournal.__new__(MutationJournal)
        entries = self._entries
        seeded._entries = entries[:]
        seeded._committed = len(entries)
        seeded._digests = self._digests[: len(entries)] if entries else []
        return seeded

    def _add(self, entries: Iterable[EntryT]) -> None:
        start = len(self._entries)
        frozen = [
            cast("EntryT", freeze_json(entry, f"journal entry {start + offset}"))
            for offset, entry in enumerate(entries)
        ]
        self._entries.extend(frozen)

    def record(self, entry: EntryT) -> None:
        """
        Append one entry (uncommitted until :meth:`mark_committed`), frozen.

        Raises:
            PayloadTypeError: *entry* is not JSON data; nothing is recorded.
            PayloadError: *entry* is nested too deep, contains itself, or
                holds a number JSON cannot write.
        """
        self._entries.append(cast("EntryT", freeze_json(entry, f"journal entry {len(self._entries)}")))

    def apply(self, entries: Iterable[EntryT]) -> None:
        """
        Append entries taken from another journal, as they are (never rewritten).

        The journal has no idempotency of its own: applying the same diff twice
        records it twice. :meth:`WorkingContext.merge` acknowledges what it
        applied on the other side, so merging twice does not.

        Raises:
            PayloadTypeError: An entry is not JSON data; nothing is applied.
        """
        self._add(entries)

    def diff(self) -> tuple[EntryT, ...]:
        """
        The entries recorded since the last :meth:`mark_committed`.
        """
        return tuple(self._entries[self._committed :])

    def has_uncommitted(self) -> bool:
        """
        Whether any entry was recorded since the last :meth:`mark_committed`.
        """
        return self._committed < len(self._entries)

    def mark_committed(self) -> None:
        """
        Move the watermark to the end: every entry so far has been absorbed.
        """
        self._committed = len(self._entries)

    def digest(self) -> str:
        """
        The stable digest of every entry, in order (a chain over each entry's
        canonical JSON). Entries are never rewritten, so each is hashed once,
        the first time a digest is asked for after it was recorded.
        """
        return entries_digest(self._entries, self._digests)

    def _chain(self) -> tuple[str, ...]:
        """
        The chain digest after each entry, oldest first (the last is
        :meth:`digest`): what a checkpoint store links the entries by.
        """
        self.digest()
        return tuple(self._digests)

    def _truncate(self, size: int, committed: int) -> None:
        """
        Forget the entries past *size* and move the watermark back to at most
        *committed*: undoes work that failed before anyone saw it.
        """
        # A new list: snapshots read the first entries of the old one lazily.
        self._entries = self._entries[:size]
        del self._digests[size:]
        self._committed = min(self._committed, committed, size)

    def _source(self) -> tuple[list[EntryT], int]:
        """
        The entry list and its length, for a snapshot that reads them lazily
        (the list only grows in place; anything else starts a new one).
        """
        return self._entries, len(self._entries)

    @property
    def committed(self) -> int:
        """
        The watermark: how many entries, from the oldest, are committed.
        """
        return self._committed

    def __len__(self) -> int:
        """
        The number of entries, committed or not.
        """
        return len(self._entries)

    def __iter__(self) -> Iterator[EntryT]:
        """
        Every entry, oldest first, as they were when iteration began (later records do not show).
        """
        return iter(tuple(self._entries))

    def __repr__(self) -> str:
        return f"<MutationJournal size={len(self._entries)} committed={self._committed}>"
