"""
The scratchpad of a live context: a dict that knows which notes may have changed.

Freezing, digesting and forking a context read its notes; this module makes
them cost what changed since the last call. A note holding plain JSON-like
data (dicts with str keys, lists, str, int, float, bool, None) is kept
*sealed*: as its deep-frozen copy, which nothing can change in place, with its
canonical JSON cached. A sealed note costs nothing to freeze (the frozen value
is the snapshot's) or to fork (the child shares the frozen value); the digest of
unchanged notes is kept whole. Setting a note costs that note: the value is
copied into its frozen form, and encoded at the next digest, which then hashes
the notes' text again (the digest is one sha256 over all of it, as stores keep it).

A fork shares its parent's notes instead of copying them: the notes live in
a three-level hash trie (:class:`~workingctx._notes_table.Table`) that both hold, and each copies the
few pointers on the path to a note the first time it writes there (about
3·n^(1/3) of them with n notes, some 70 at 10,000), so a fork costs the same
whatever the number of notes, a write costs that path, and nothing holds a
parent's table, so a long chain of forks keeps only what its live contexts
hold. The dict's own storage, which code such as ``json.dumps`` reads
directly, is filled only when the notes are handed out as a dict (a
context's ``scratchpad``) or read whole, then kept in step with every write.

The live-dict semantics stay: reading a sealed note through the dict (``[]``,
``get``, ``values()``, ``items()``, ``dict(notes)``...) gives a plain writable
copy in its place, once, and from then on that object *is* the note, so
``ctx.scratchpad["plan"]["steps"].append("b")`` is seen by the next freeze.
Such a note is *open*: it may change in place at any time, so every freeze
and digest reads it again (costing that note) until it is set anew. Notes
holding anything else (tuples, sets, objects of your own) are open from the
start and kept by reference, as a plain dict keeps them.

Every write refuses a value no note can keep (one that contains itself or
nests more than ``MAX_DEPTH`` levels, a NaN, an infinity, an int too long to
write), checked in the same walk that makes a sealed note's frozen copy; an
open note, which may have changed in place, is checked again at every freeze
and digest.

What gives: a plain-data value passed in (``note()``, ``update_scratchpad()``,
``notes[key] = value``) is copied, so changing the caller's own object
afterwards does not change the note; change the note through the scratchpad,
or set it again.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import math
import pickle
import threading
from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from typing import Any, Self

from workingctx._canonical import json_str, note_json, notes_json
from workingctx._notes_table import OURS, SEQ, TEXT, VALUE, Baseline, Note, Table, by_seq
from workingctx.exceptions import PayloadError
from workingctx.frozen import (
    MAX_DEPTH,
    MAX_INT_DIGITS,
    FrozenDict,
    FrozenList,
    check_kept,
    deep_freeze,
    freeze_named,
    is_json_payload,
    seal_tree,
    thaw,
)

__all__ = ["Notes", "NotesMark", "copy_notes", "is_plain"]

_SCALARS: frozenset[type] = frozenset({str, int, float, bool, type(None)})
_PLAIN: frozenset[type] = frozenset({str, bool, type(None)})
_LEAVES: frozenset[type] = frozenset({str, int, float, bool, type(None), bytes})
_CONTAINERS: frozenset[type] = frozenset({dict, list, tuple, set, frozenset, FrozenDict, FrozenList})
_MISSING = object()


def is_plain(value: Any, room: int = MAX_DEPTH) -> bool:
    """
    Whether *value* is plain data all the way down (no object of your own,
    which might define how it is copied), within :data:`MAX_DEPTH` levels
    (deeper or cyclic data is left to ``copy.deepcopy``, which handles cycles).
    """
    kind = type(value)
    if kind in _LEAVES:
        return True
    if room < 1:
        return False
    leaves = _LEAVES
    if kind is dict or kind is FrozenDict:
        return all(
            type(key) in leaves and (type(item) in leaves or is_plain(item, room - 1)) for key, item in value.items()
        )
    if kind in _CONTAINERS or isinstance(value, frozenset):  # frozen sets of a payload included
        return all(type(item) in leaves or is_plain(item, room - 1) for item in value)
    return False


def copy_notes(notes: Mapping[str, Any], copies: int = 1) -> list[dict[str, Any]]:
    """
    Independent deep copies of the notes, with ``copy.deepcopy``'s meaning.

    Plain data is pickled once and unpickled once per copy, several times
    faster than ``copy.deepcopy``; notes holding objects of your own go
    through ``copy.deepcopy``, so their ``__deepcopy__`` is honoured.

    Raises:
        PayloadError: A note is nested too deep to copy (the message names it).
    """
    plain = dict(notes)
    try:
        if all(is_plain(value) for value in plain.values()):
            data = pickle.dumps(plain, protocol=pickle.HIGHEST_PROTOCOL)
            return [pickle.loads(data) for _ in range(copies)]  # noqa: S301  # our own bytes, made just above
        return [copy.deepcopy(plain) for _ in range(copies)]
    except RecursionError:
        for key, value in plain.items():
            try:
                copy.deepcopy(value)
            except RecursionError:
                msg = (
                    f"note {key!r} is nested too deep to copy; keep notes within {MAX_DEPTH} levels "
                    "of dicts and lists, or store the deep part as a JSON string"
                )
                raise PayloadError(msg, path=f"note {key!r}") from None
        raise


def _json_tree(value: Any, room: int, seen: set[int]) -> bool:
    """
    Whether *value* is a tree of dicts with str keys, lists and JSON scalars
    (no container twice: a cycle or a shared part is not a tree), within *room* levels.
    """
    kind = type(value)
    if kind in _SCALARS:
        return True
    if (kind is not dict and kind is not list) or room < 1 or id(value) in seen:
        return False
    seen.add(id(value))
    scalars = _SCALARS
    if kind is dict:
        return all(
            type(key) is str and (type(item) in scalars or _json_tree(item, room - 1, seen))
            for key, item in value.items()
        )
    return all(type(item) in scalars or _json_tree(item, room - 1, seen) for item in value)


_INT_BOUND = 10**MAX_INT_DIGITS
_INT_LOW = -_INT_BOUND
_isfinite = math.isfinite


def _kept_number(key: str, value: Any) -> bool:
    """
    True when the number *value* can be a note; a NaN, an infinity and an int
    too long to write are refused (PayloadError naming the note).
    """
    kind = type(value)
    if (kind is float and not _isfinite(value)) or (kind is int and not _INT_LOW < value < _INT_BOUND):
        check_kept(value, f"note {key!r}")
    return True


def _frozen_tree(value: Any) -> bool:
    """
    Whether *value* is frozen JSON-like data: a frozen dict or list (which
    deep freezing returns as it is) of JSON scalars and more of the same,
    with no number a note cannot keep (a NaN, an infinity, an int too long).
    """
    kind = type(value)
    if kind in _PLAIN:
        return True
    if kind is float:
        return _isfinite(value)
    if kind is int:
        return bool(_INT_LOW < value < _INT_BOUND)
    if kind is FrozenDict:
        return is_json_payload(value) or all(type(key) is str and _frozen_tree(item) for key, item in value.items())
    if kind is FrozenList:
        return is_json_payload(value) or all(_frozen_tree(item) for item in value)
    return False


def _prepare(key: Any, value: Any, *, writable: bool = False) -> tuple[Any, bool, bool]:
    """
    A note as :class:`Notes` keeps it, ``(stored value, ours, open)``: sealed
    (a frozen copy, checked as it is made; a frozen value as it is) when it is
    JSON-like data, open otherwise (as it is, or a writable copy with *writable*).

    Raises:
        PayloadError: No note can keep *value*: it contains itself, nests more
            than :data:`MAX_DEPTH` levels, or holds a NaN, an infinity or an
            int too long to write; the message names the note's key and the path.
    """
    kind = type(value)
    if kind in _SCALARS:
        _kept_number(key, value)
        return value, False, False
    if type(key) is str:
        if kind is dict or kind is list:
            sealed = seal_tree(value, f"note {key!r}")
            if sealed is not None:
                return sealed, True, False
        elif _frozen_tree(value):
            return value, writable, False
    check_kept(value, f"note {key!r}")  # refuses a number _frozen_tree did not take, naming where
    return (thaw(value) if writable else value), False, True


def prepare_notes(notes: Iterable[tuple[Any, Any]]) -> list[tuple[Any, Any, bool, bool]]:
    """
    Every note of *notes* ready to be set by ``Notes._put_all``: all are
    checked before any is set, so a refused one changes nothing.

    Raises:
        PayloadError: No note can keep one of the values (see :func:`_prepare`).
    """
    return [(key, *_prepare(key, value)) for key, value in notes]


def _frozen_open(key: Any, value: Any) -> Any:
    """
    An open note's frozen value, after the check a write makes (it may have changed in place).
    """
    where = f"note {key!r}"
    check_kept(value, where)
    return freeze_named(value, where)


_RLock = type(threading.RLock())
"""The class of the locks ``threading.RLock()`` makes, called directly: a fork makes one."""


class NotesMark:
    """
    The notes as they were (see :meth:`Notes.mark`): a table no one writes to,
    copies of the open notes, and the open keys.
    """

    __slots__ = ("copies", "opened", "table")

    def __init__(self, table: Table, copies: dict[Any, Any], opened: set[Any]) -> None:
        self.table = table
        self.copies = copies
        self.opened = opened


# -- the scratchpad ----------------------------------------------------------------------


class Notes(dict[str, Any]):
    """
    A live context's scratchpad: a ``dict`` for every reader and writer, whose
    sealed notes cost nothing to freeze, digest or fork again (see the module).

    The notes live in a :class:`~workingctx._notes_table.Table` that forks share; the dict's own
    storage is filled only when the notes are handed out or read whole (see
    :meth:`as_dict`), then kept in step with every write.

    Args:
        notes: The first notes; with *writable*, frozen values among them read
            back as writable copies (a context rebuilt from a snapshot).
    """

    __slots__ = ("_base", "_live", "_lock", "_open", "_order", "_pairs", "_sha", "_sorted", "_states", "_table")

    def __init__(self, notes: Mapping[str, Any] | None = None, *, writable: bool = False) -> None:
        super().__init__()
        self._lock = threading.RLock()
        self._table = Table()
        # keys whose value may change in place (or is not JSON-like data): read on every freeze
        self._open: set[Any] = set()
        # whether the dict's own storage holds the notes (stored values, in order): see as_dict()
        self._live = False
        # the keys in insertion order, and sorted, while no key comes or goes (shared by forks)
        self._order: tuple[Any, ...] | None = ()
        self._sorted: tuple[Any, ...] | None = ()
        # the sorted (key, frozen value) pairs and the notes' digest, while no note is open
        self._pairs: tuple[tuple[str, Any], ...] | None = None
        self._sha: str | None = None
        # (key, its JSON, the hash state after it) for each note in key order, as last digested
        self._states: list[tuple[str, str, Any]] = []
        # the notes as a delta merge's baseline, while none changes: shared by the forks made meanwhile
        self._base: Baseline | None = None
        if notes:
            for key, value in notes.items():
                self._put(key, value, writable=writable)

    # -- the state of one note ---------------------------------------------------------

    def _put(self, key: Any, value: Any, *, writable: bool = False) -> None:
        """
        Set a note: sealed when it is JSON-like data (a frozen copy, or the
        value itself when frozen already), open otherwise (as it is, or a
        writable copy with *writable*).

        Raises:
            PayloadError: No note can keep *value* (see :func:`_prepare`); nothing changed.
        """
        if (
            type(value) in _PLAIN
            or (type(value) is float and _isfinite(value))
            or (type(value) is int and _INT_LOW < value < _INT_BOUND)
        ):  # the common case (a number that cannot be kept is refused by _prepare)
            with self._lock:  # kept short: what _set does
                if self._table.put(key, value, ours=False):
                    self._order = self._sorted = None
                if self._open:
                    self._open.discard(key)
                self._pairs = self._sha = self._base = None
                if self._live:
                    dict.__setitem__(self, key, value)
            return
        value, ours, open_ = _prepare(key, value, writable=writable)
        with self._lock:
            self._set(key, value, ours=ours, open_=open_)

    def _put_all(self, prepared: Iterable[tuple[Any, Any, bool, bool]]) -> None:
        """
        Set notes :func:`_prepare` made ready, as ``(key, value, ours, open)``.
        """
        with self._lock:
            for key, value, ours, open_ in prepared:
                self._set(key, value, ours=ours, open_=open_)

    def _set(self, key: Any, value: Any, *, ours: bool, open_: bool) -> None:
        """
        Store a note as it is (the caller holds the lock): a key already set keeps its place.
        """
        if self._table.put(key, value, ours=ours):
            self._order = self._sorted = None
        if open_:
            self._open.add(key)
        elif self._open:
            self._open.discard(key)
        self._pairs = self._sha = self._base = None
        if self._live:
            dict.__setitem__(self, key, value)

    def _remove(self, key: Any) -> Note:
        """
        Remove a note and return it (the caller holds the lock).

        Raises:
            KeyError: No note has *key*.
        """
        note = self._table.get(key)
        if note is None:
            raise KeyError(key)
        self._table.delete(key)
        self._open.discard(key)
        self._order = self._sorted = self._pairs = self._sha = self._base = None
        if self._live:
            dict.__delitem__(self, key)
        return note

    def _out(self, key: Any, note: Note) -> Any:
        """
        The note *note*, stored under *key*, as a reader gets it: a sealed copy
        of ours becomes a writable copy, which from now on is the (open) note.
        """
        if note[OURS]:
            value = thaw(note[VALUE])
            self._set(key, value, ours=False, open_=True)
            return value
        return note[VALUE]

    def _ordered(self) -> list[tuple[Any, Note]]:
        """
        The notes in insertion order (the caller holds the lock).
        """
        table = self._table
        order = self._order
        if order is None and self._live:  # the dict's storage keeps the order
            order = self._order = tuple(dict.__iter__(self))
        if order is None:
            pairs = sorted(table.items(), key=by_seq)
            self._order = tuple(key for key, _ in pairs)
            return pairs
        at = table.at
        return [(key, at(key)) for key in order]

    def _keys_sorted(self) -> tuple[Any, ...]:
        """
        The keys in sorted order (the caller holds the lock).
        """
        keys = self._sorted
        if keys is None:
            keys = self._sorted = tuple(sorted(self._table))
        return keys

    def as_dict(self) -> Notes:
        """
        These notes, with the dict's own storage filled (stored values, in
        order) and kept in step from now on: what code that reads a dict's
        storage directly (``json.dumps``, ``dict.__repr__``) sees.

        A context hands its scratchpad out through this; a fork's notes are
        not filled until then, so a fork copies nothing.
        """
        with self._lock:
            if not self._live:
                dict.clear(self)
                dict.update(self, {key: note[VALUE] for key, note in self._ordered()})
                self._live = True
            return self

    # -- dict: reading -------------------------------------------------------------------

    def __getitem__(self, key: Any) -> Any:
        with self._lock:
            note = self._table.get(key)
            if note is None:
                raise KeyError(key)
            return self._out(key, note)

    def get(self, key: Any, default: Any = None) -> Any:
        """
        The note under *key* (writable, and seen by the next freeze), or *default*.
        """
        with self._lock:
            note = self._table.get(key)
            if note is None:
                return default
            return self._out(key, note)

    def __contains__(self, key: object) -> bool:
        with self._lock:  # a table that grows changes its levels one by one
            return self._table.get(key) is not None

    def __len__(self) -> int:
        return len(self._table)

    def __iter__(self) -> Iterator[Any]:
        # Defined so that dict(notes), {**notes} and f(**notes) read each note through __getitem__.
        return dict.__iter__(self.as_dict())

    def __reversed__(self) -> Iterator[Any]:
        return dict.__reversed__(self.as_dict())

    def keys(self) -> KeysView[Any]:  # type: ignore[override]  # the keys of the filled storage
        """
        A view of the keys, in insertion order.
        """
        return dict.keys(self.as_dict())

    def values(self) -> ValuesView[Any]:  # type: ignore[override]  # a view that reads each note as [] does
        """
        A view of the notes, each read as ``notes[key]`` reads it.
        """
        return ValuesView(self)

    def items(self) -> ItemsView[Any, Any]:  # type: ignore[override]  # a view that reads each note as [] does
        """
        A view of ``(key, note)`` pairs, each note read as ``notes[key]`` reads it.
        """
        return ItemsView(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, dict):
            return NotImplemented
        theirs = other.raw() if isinstance(other, Notes) else other
        with self._lock:
            if len(theirs) != len(self._table):
                return False
            for key, note in self._table.items():
                value = dict.get(theirs, key, _MISSING)
                if value is _MISSING or not (value is note[VALUE] or value == note[VALUE]):
                    return False
            return True

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # a dict is not hashable

    def __repr__(self) -> str:
        return dict.__repr__(self.as_dict())

    def copy(self) -> dict[Any, Any]:
        """
        A plain dict of the same notes (the same objects, as ``dict.copy`` gives).
        """
        return {key: self[key] for key in list(self)}

    __copy__ = copy

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        return copy.deepcopy(self.plain(), memo)

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (self.plain(),))

    def __or__(self, other: Any) -> Any:
        if not isinstance(other, Mapping):
            return NotImplemented
        return {**self.copy(), **other}

    def __ror__(self, other: Any) -> Any:
        if not isinstance(other, Mapping):
            return NotImplemented
        return {**other, **self.copy()}

    # -- dict: writing -------------------------------------------------------------------

    def __setitem__(self, key: Any, value: Any) -> None:
        self._put(key, value)

    def __delitem__(self, key: Any) -> None:
        with self._lock:
            self._remove(key)

    def pop(self, key: Any, *default: Any) -> Any:
        """
        Remove the note under *key* and return it (writable), or *default*.
        """
        with self._lock:
            if key not in self:
                return dict.pop({}, key, *default)  # dict's own answer: the default, or KeyError
            note = self._remove(key)
            return thaw(note[VALUE]) if note[OURS] else note[VALUE]

    def popitem(self) -> tuple[Any, Any]:
        """
        Remove the newest note and return ``(key, note)``.
        """
        with self._lock:
            if not self._table:
                msg = "popitem(): dictionary is empty"
                raise KeyError(msg)
            key = next(dict.__reversed__(self.as_dict()))
            note = self._remove(key)
            return key, thaw(note[VALUE]) if note[OURS] else note[VALUE]

    def clear(self) -> None:
        """
        Remove every note.
        """
        with self._lock:
            self._table = Table()
            self._open.clear()
            self._order = self._sorted = ()
            self._pairs = self._sha = self._base = None
            dict.clear(self)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        """
        The note under *key* (writable), after setting it to *default* when missing.
        """
        with self._lock:
            if key not in self:
                self._put(key, default)
            return self[key]

    def update(self, *others: Any, **notes: Any) -> None:
        """
        Set every note of a mapping, of ``(key, value)`` pairs, or of keywords.

        Raises:
            PayloadError: No note can keep one of the values; none is set.
        """
        if len(others) > 1:
            msg = f"update expected at most 1 positional argument, got {len(others)}"
            raise TypeError(msg)
        pairs: list[tuple[Any, Any]] = []
        for other in others:
            if type(other) is dict:
                pairs.extend(other.items())
            elif isinstance(other, Mapping):
                pairs.extend((key, other[key]) for key in other)
            elif hasattr(other, "keys"):
                pairs.extend((key, other[key]) for key in other.keys())  # noqa: SIM118  # dict.update's protocol
            else:
                pairs.extend(other)
        pairs.extend(notes.items())
        self._put_all(prepare_notes(pairs))  # every note checked before any is set

    def __ior__(self, other: Any) -> Self:  # type: ignore[override]  # returns this very dict, as dict does
        self.update(other)
        return self

    # -- for the context ----------------------------------------------------------------

    def raw(self) -> dict[Any, Any]:
        """
        The notes as stored, without reading them out: sealed notes frozen,
        open ones as they are (for code that only compares or freezes them).
        """
        with self._lock:
            if self._live:
                return dict(dict.items(self))
            return {key: note[VALUE] for key, note in self._ordered()}

    def plain(self) -> dict[Any, Any]:
        """
        The notes as plain data, without reading them out: sealed copies of
        ours thawed (new objects), every other note as it is.
        """
        with self._lock:
            return {key: thaw(note[VALUE]) if note[OURS] else note[VALUE] for key, note in self._ordered()}

    def frozen(self) -> tuple[tuple[str, Any], ...]:
        """
        The notes as a snapshot holds them: ``(key, frozen value)`` pairs sorted
        by key. Sealed notes are their own frozen values; open ones are frozen now.

        Raises:
            PayloadError: An open note (changed in place since it was set) is
                one no note can keep (see :func:`_prepare`); the message names it.
        """
        with self._lock:
            pairs = self._pairs
            if pairs is not None:
                return pairs
            opened = self._open
            at = self._table.at
            items: list[tuple[str, Any]] = []
            for key in self._keys_sorted():
                value = at(key)[VALUE]
                items.append((key, _frozen_open(key, value) if key in opened else value))
            pairs = tuple(items)
            if not opened:
                self._pairs = pairs
            return pairs

    def digest(self) -> str:
        """
        The notes' digest (:func:`~workingctx.snapshot.notes_digest`): one
        sha256 over their canonical JSON, keys sorted.

        Each sealed note's JSON is cached, and so is the hash state after each
        note in key order: a changed note is encoded again, and only the notes
        from it on (in key order) are hashed again.

        Raises:
            PayloadTypeError: A note holds an object with no canonical form; the message names its key.
            PayloadError: An open note (changed in place since it was set) is
                one no note can keep (see :func:`_prepare`); the message names it.
        """
        with self._lock:
            sha = self._sha
            if sha is not None:
                return sha
            table = self._table
            opened = self._open
            for key in opened:
                check_kept(table.at(key)[VALUE], f"note {key!r}")  # changed in place since it was set?
            try:
                keys: tuple[Any, ...] | None = self._keys_sorted()
            except TypeError:  # keys of several kinds
                keys = None
            if keys is None or any(type(key) is not str for key in keys):  # written around note(): encoded whole
                return hashlib.sha256(notes_json(self.raw()).encode("utf-8", "surrogatepass")).hexdigest()
            states = self._states
            kept: list[tuple[str, str, Any]] = []
            state: Any = None
            pages, mask, shift, width = table.pages, table.mask, table.shift, table.width
            for position, key in enumerate(keys):
                index = hash(key) & mask
                note = pages[index >> shift][index & width][key]  # what table.at(key) does, inline
                text = None if key in opened else note[TEXT]
                if text is None:
                    text = note_json(key, note[VALUE])
                    if key not in opened:
                        note[TEXT] = text  # the same for every table sharing the note
                if state is None and position < len(states) and states[position][:2] == (key, text):
                    kept.append(states[position])  # the same notes so far: the same hash state
                    continue
                if state is None:
                    state = kept[-1][2].copy() if kept else hashlib.sha256(b"{")
                piece = f"{json_str(key)}:{text}" if position == 0 else f",{json_str(key)}:{text}"
                state.update(piece.encode("utf-8", "surrogatepass"))
                kept.append((key, text, state.copy()))
            self._states = kept
            final = kept[-1][2].copy() if kept else hashlib.sha256(b"{")
            final.update(b"}")
            sha = final.hexdigest()
            if not opened:
                self._sha = sha
            return sha

    def known_digest(self) -> str | None:
        """
        The notes' digest when it is known without reading a note, else None.
        """
        return self._sha

    def fork(self, *, child: bool = True) -> tuple[Notes, Mapping[str, Any]]:
        """
        The notes of a fork, and the baseline a delta merge compares them with.

        Sealed notes are shared: the fork shares this table (in O(1), whatever
        the number of notes) and copies only what it changes. Open notes are
        copied, frozen when they are JSON-like data. Without *child*, only the
        baseline is made (an empty :class:`Notes` stands for the child).

        Raises:
            PayloadError: An open note is nested too deep to copy.
        """
        with self._lock:
            if not self._open:  # every note sealed: share them all, as they are
                base = self._base
                if base is None:
                    base = self._base = Baseline(self._table)
                if not child:
                    return Notes(), base
                return self._made(Table(self._table), set(), known=True), base
            opened = self._open
            table = self._table.share()
            others: dict[Any, Any] = {}
            for key in opened:
                note = table.at(key)
                if type(key) is str and _json_tree(note[VALUE], MAX_DEPTH, set()):
                    table.set(key, [deep_freeze(note[VALUE]), note[SEQ], True, None])
                else:
                    others[key] = note
            if not others:
                base = Baseline(table)
                if not child:
                    return Notes(), base
                return self._made(Table(table), set(), known=False), base
            copies = copy_notes({key: note[VALUE] for key, note in others.items()}, 2 if child else 1)
            mine = table.share()
            for key, note in others.items():
                table.set(key, [copies[-1][key], note[SEQ], False, None])
            if not child:
                return Notes(), Baseline(table)
            for key, note in others.items():
                mine.set(key, [copies[0][key], note[SEQ], False, None])
            return self._made(mine, set(others), known=False), Baseline(table)

    def _made(self, table: Table, opened: set[Any], *, known: bool) -> Notes:
        """
        A fork's notes over *table* (the same keys as these), *opened* open;
        with *known*, the same notes as these, whose frozen pairs and digest hold.
        """
        made: Notes = Notes.__new__(Notes)
        made._lock = _RLock()
        made._table = table
        made._open = opened
        made._live = False
        made._order, made._sorted = self._order, self._sorted  # never changed, only replaced
        made._pairs, made._sha = (self._pairs, self._sha) if known else (None, None)
        made._states = self._states  # never changed, only replaced
        made._base = None
        return made

    def mark(self) -> NotesMark:
        """
        A token for :meth:`restore`: the notes as they are now, open notes copied
        (by value when they can be, otherwise kept as they are).
        """
        with self._lock:
            table = self._table.share()
            copies: dict[Any, Any] = {}
            if self._open:
                with contextlib.suppress(Exception):  # an uncopyable note: restored by key only
                    copies = copy_notes({key: table.at(key)[VALUE] for key in self._open})[0]
            return NotesMark(table, copies, set(self._open))

    def restore(self, mark: NotesMark) -> None:
        """
        Put back the notes of a :meth:`mark`.
        """
        table = mark.table.share()
        for key, value in mark.copies.items():
            note = table.at(key)
            table.set(key, [value, note[SEQ], False, None])
        with self._lock:
            self._table = table
            self._open = set(mark.opened)
            self._order = self._sorted = self._pairs = self._sha = self._base = None
            if self._live:
                self._live = False
                self.as_dict()

    def replace_all(self, notes: Mapping[str, Any]) -> None:
        """
        Make *notes* (read as stored, not read out) the only notes.

        Raises:
            PayloadError: No note can keep one of the values; nothing changed.
        """
        prepared = prepare_notes((notes.raw() if isinstance(notes, Notes) else dict(notes)).items())
        with self._lock:
            self.clear()
            self._put_all(prepared)
