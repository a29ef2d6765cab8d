"""
The table a scratchpad keeps its notes in: a map that forks share.

A :class:`Table` maps keys to notes (see :data:`Note`) in a hash trie of
three levels that tables share in O(1) and copy on write, path by path: a
fork of a scratchpad shares its parent's table, and the first write to a
place copies the few pointers on the path to it, never the notes. A
:class:`Baseline` is a read-only view of a table as it was (what a delta
merge compares a fork's notes with).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import Any, TypeAlias

__all__ = ["OURS", "SEQ", "SEQUENCE", "TEXT", "VALUE", "Baseline", "Note", "Table", "by_seq"]

SEQUENCE = itertools.count()
"""Insertion numbers: a note set under a new key is numbered after every note that exists."""


Note: TypeAlias = list[Any]
"""
One note as a :class:`Table` holds it, ``[value, seq, ours, text]``: its
stored value, its insertion number (the dict's order), whether it is a sealed
copy of ours (read back as a writable copy), and its canonical JSON once a
digest encoded it (else None). A list, the cheapest object to make per write.

Forks share notes, so a note never changes once set, but for its text: a
cache of what the (key, value) pair encodes to, the same for every holder.
"""
VALUE, SEQ, OURS, TEXT = 0, 1, 2, 3


def by_seq(pair: tuple[Any, Note]) -> int:
    """
    The insertion number of a ``(key, note)`` pair: what sorts notes in the dict's order.
    """
    return int(pair[1][SEQ])


class Table:
    """
    A map from keys to notes (:data:`Note`) that forks share: a hash trie of three
    levels, a root list of pages, pages of buckets, buckets (dicts) of notes.

    With n notes there are about n^(2/3) buckets (a power of two), in about
    n^(1/3) pages of about n^(1/3) buckets, each holding about n^(1/3) notes.
    Sharing is O(1): the two tables then hold the same root, and a table
    copies the root, a page and a bucket the first time it writes to them (it
    owns what it copied until it is shared again). A write therefore copies
    about 3·n^(1/3) pointers at most (some 70 at 10,000 notes), whatever the
    chain of forks behind it; a read is a hash, two indexes and a dict lookup.
    Nothing refers to the table it was shared from, so memory is what the
    live tables hold.
    """

    __slots__ = ("mask", "own_buckets", "own_pages", "pages", "shift", "size", "width")

    pages: list[list[dict[Any, Note]]]
    mask: int  # the bits of a key's hash that pick its bucket
    shift: int  # a bucket's page: its index shifted by this
    width: int  # a bucket's place in its page: its index masked by this
    size: int
    # the pages and the buckets this table copied since it was shared; None: the root is shared too
    own_pages: set[int] | None
    own_buckets: set[int]

    def __init__(self, shared: Table | None = None) -> None:
        """
        An empty table, or one sharing the notes of *shared* (see :meth:`share`).
        """
        if shared is None:
            self._spread([{}])
        else:
            self.pages, self.mask, self.shift, self.width = shared.pages, shared.mask, shared.shift, shared.width
            self.size = shared.size
            self.own_pages = None  # (own_buckets is set by the first write, and read only after it)
            shared.own_pages = None

    def _spread(self, buckets: list[dict[Any, Note]]) -> None:
        """
        Hold *buckets* (a power of two of them, all this table's own) in pages.
        """
        bits = len(buckets).bit_length() - 1
        shift = (bits + 1) // 2
        width = 1 << shift
        self.pages = [buckets[at : at + width] for at in range(0, len(buckets), width)]
        self.mask = len(buckets) - 1
        self.shift = shift
        self.width = width - 1  # a mask: a bucket's place in its page
        self.size = sum(map(len, buckets))
        self.own_pages = set(range(len(self.pages)))
        self.own_buckets = set(range(len(buckets)))

    def __len__(self) -> int:
        return self.size

    def get(self, key: Any) -> Note | None:
        index = hash(key) & self.mask
        return self.pages[index >> self.shift][index & self.width].get(key)

    def at(self, key: Any) -> Note:
        """
        The note under *key*, one the table holds.
        """
        index = hash(key) & self.mask
        return self.pages[index >> self.shift][index & self.width][key]

    def _buckets(self) -> Iterator[dict[Any, Note]]:
        for page in self.pages:
            yield from page

    def items(self) -> Iterator[tuple[Any, Note]]:
        for bucket in self._buckets():
            yield from bucket.items()

    def __iter__(self) -> Iterator[Any]:
        for bucket in self._buckets():
            yield from bucket

    def share(self) -> Table:
        """
        A table of the same notes, in O(1); from now on neither writes to what they share.
        """
        return Table(self)

    def _bucket(self, index: int) -> dict[Any, Note]:
        """
        The bucket at *index*, this table's own (copied, with its page and
        the root, when they were shared).
        """
        at = index >> self.shift
        place = index & self.width
        pages = self.own_pages
        if pages is None:  # the first write since the table was shared
            root = self.pages = self.pages[:]
            page = root[at] = root[at][:]
            bucket = page[place] = page[place].copy()
            self.own_pages = {at}
            self.own_buckets = {index}
            return bucket
        page = self.pages[at]
        if at not in pages:
            page = self.pages[at] = page[:]
            pages.add(at)
        if index in self.own_buckets:
            return page[place]
        bucket = page[place] = page[place].copy()
        self.own_buckets.add(index)
        return bucket

    def set(self, key: Any, note: Note) -> None:
        bucket = self._bucket(hash(key) & self.mask)
        if key not in bucket:
            self._added(bucket, key, note)
            return
        bucket[key] = note

    def put(self, key: Any, value: Any, *, ours: bool) -> bool:
        """
        Set *value* under *key* (a key already set keeps its place), and say whether the key is new.
        """
        index = hash(key) & self.mask
        if self.own_pages is not None and index in self.own_buckets:
            bucket = self.pages[index >> self.shift][index & self.width]
        else:
            bucket = self._bucket(index)
        old = bucket.get(key)
        if old is not None:
            bucket[key] = [value, old[SEQ], ours, None]
            return False
        self._added(bucket, key, [value, next(SEQUENCE), ours, None])
        return True

    def _added(self, bucket: dict[Any, Note], key: Any, note: Note) -> None:
        """
        Put a note under a new *key* into *bucket*, one of this table's own.
        """
        bucket[key] = note
        self.size += 1
        if self.size > 2 * (self.mask + 1) * (self.width + 1):
            self._grow()

    def delete(self, key: Any) -> None:
        """
        Raises:
            KeyError: No note has *key*.
        """
        index = hash(key) & self.mask
        if key not in self.pages[index >> self.shift][index & self.width]:
            raise KeyError(key)
        del self._bucket(index)[key]
        self.size -= 1

    def _grow(self) -> None:
        """
        Spread the notes over twice as many buckets (all this table's own).
        """
        count = 2 * (self.mask + 1)
        mask = count - 1
        buckets: list[dict[Any, Note]] = [{} for _ in range(count)]
        for key, note in self.items():
            buckets[hash(key) & mask][key] = note
        self._spread(buckets)


class Baseline(Mapping[Any, Any]):
    """
    The notes of *table* as they are now, for a delta merge to compare with:
    a read-only mapping of stored values over a table that shares *table*'s
    notes and is never written to.
    """

    __slots__ = ("_table",)

    def __init__(self, table: Table) -> None:
        self._table = Table(table)

    def __getitem__(self, key: Any) -> Any:
        note = self._table.get(key)
        if note is None:
            raise KeyError(key)
        return note[VALUE]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)
