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
from collections.abc import ItemsView, Iterable, Iterator, Mapping, ValuesView
from typing import Any, Self, TypeAlias

from workingctx._canonical import json_str, note_json, notes_json
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


NotesMark: TypeAlias = tuple[dict[Any, Any], set[Any], set[Any], dict[str, str]]
"""The notes as they were (see :meth:`Notes.mark`): stored values, keys of ours, open keys, digests."""


def _first(pair: tuple[str, Any]) -> str:
    return pair[0]


class Notes(dict[str, Any]):
    """
    A live context's scratchpad: a ``dict`` for every reader and writer, whose
    sealed notes cost nothing to freeze, digest or fork again (see the module).

    Args:
        notes: The first notes; with *writable*, frozen values among them read
            back as writable copies (a context rebuilt from a snapshot).
    """

    __slots__ = ("_base", "_digests", "_lock", "_open", "_ours", "_pairs", "_sha", "_states")

    def __init__(self, notes: Mapping[str, Any] | None = None, *, writable: bool = False) -> None:
        super().__init__()
        self._lock = threading.RLock()
        # keys whose value may change in place (or is not JSON-like data): read on every freeze
        self._open: set[str] = set()
        # keys whose sealed value is a frozen copy of ours: read back as a writable copy
        self._ours: set[str] = set()
        # the canonical JSON of each sealed note, by key
        self._digests: dict[str, str] = {}
        # the sorted (key, frozen value) pairs and the notes' digest, while no note is open
        self._pairs: tuple[tuple[str, Any], ...] | None = None
        self._sha: str | None = None
        # (key, its JSON, the hash state after it) for each note in key order, as last digested
        self._states: list[tuple[str, str, Any]] = []
        # the notes as a plain dict, while every note is sealed: a fork's
        # baseline, shared by every fork until a note changes (never changed itself)
        self._base: dict[str, Any] | None = None
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
            with self._lock:  # kept short
                dict.__setitem__(self, key, value)
                self._ours.discard(key)
                self._open.discard(key)
                self._digests.pop(key, None)
                self._pairs = self._sha = self._base = None
            return
        value, ours, open_ = _prepare(key, value, writable=writable)
        with self._lock:
            dict.__setitem__(self, key, value)
            self._mark(key, ours=ours, open_=open_)

    def _put_all(self, prepared: Iterable[tuple[Any, Any, bool, bool]]) -> None:
        """
        Set notes :func:`_prepare` made ready, as ``(key, value, ours, open)``.
        """
        with self._lock:
            for key, value, ours, open_ in prepared:
                dict.__setitem__(self, key, value)
                self._mark(key, ours=ours, open_=open_)

    def _mark(self, key: Any, *, ours: bool, open_: bool) -> None:
        if ours:
            self._ours.add(key)
        else:
            self._ours.discard(key)
        if open_:
            self._open.add(key)
        else:
            self._open.discard(key)
        self._digests.pop(key, None)
        self._pairs = self._sha = self._base = None

    def _forget(self, key: Any) -> None:
        self._ours.discard(key)
        self._open.discard(key)
        self._digests.pop(key, None)
        self._pairs = self._sha = self._base = None

    def _out(self, key: Any, value: Any) -> Any:
        """
        *value*, stored under *key*, as a reader gets it: a sealed copy of ours
        becomes a writable copy, which from now on is the (open) note.
        """
        if key in self._ours:
            value = thaw(value)
            dict.__setitem__(self, key, value)
            self._mark(key, ours=False, open_=True)
        return value

    # -- dict: reading -------------------------------------------------------------------

    def __getitem__(self, key: Any) -> Any:
        with self._lock:
            return self._out(key, dict.__getitem__(self, key))

    def get(self, key: Any, default: Any = None) -> Any:
        """
        The note under *key* (writable, and seen by the next freeze), or *default*.
        """
        with self._lock:
            if dict.__contains__(self, key):
                return self._out(key, dict.__getitem__(self, key))
            return default

    def __iter__(self) -> Iterator[Any]:
        # Defined so that dict(notes), {**notes} and f(**notes) read each note through __getitem__.
        return dict.__iter__(self)

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

    def copy(self) -> dict[Any, Any]:
        """
        A plain dict of the same notes (the same objects, as ``dict.copy`` gives).
        """
        return {key: self[key] for key in list(dict.keys(self))}

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
            dict.__delitem__(self, key)
            self._forget(key)

    def pop(self, key: Any, *default: Any) -> Any:
        """
        Remove the note under *key* and return it (writable), or *default*.
        """
        with self._lock:
            if not dict.__contains__(self, key):
                return dict.pop(self, key, *default)
            value = dict.pop(self, key)
            if key in self._ours:
                value = thaw(value)
            self._forget(key)
            return value

    def popitem(self) -> tuple[Any, Any]:
        """
        Remove the newest note and return ``(key, note)``.
        """
        with self._lock:
            key, value = dict.popitem(self)
            if key in self._ours:
                value = thaw(value)
            self._forget(key)
            return key, value

    def clear(self) -> None:
        """
        Remove every note.
        """
        with self._lock:
            dict.clear(self)
            self._open.clear()
            self._ours.clear()
            self._digests.clear()
            self._pairs = self._sha = self._base = None

    def setdefault(self, key: Any, default: Any = None) -> Any:
        """
        The note under *key* (writable), after setting it to *default* when missing.
        """
        with self._lock:
            if not dict.__contains__(self, key):
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
            return dict(dict.items(self))

    def plain(self) -> dict[Any, Any]:
        """
        The notes as plain data, without reading them out: sealed copies of
        ours thawed (new objects), every other note as it is.
        """
        with self._lock:
            ours = self._ours
            return {key: thaw(value) if key in ours else value for key, value in dict.items(self)}

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
            items = [(key, _frozen_open(key, value) if key in opened else value) for key, value in dict.items(self)]
            items.sort(key=_first)
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
            opened = self._open
            for key in opened:
                check_kept(dict.__getitem__(self, key), f"note {key!r}")  # changed in place since it was set?
            if any(type(key) is not str for key in dict.keys(self)):  # written around note(): encoded whole
                return hashlib.sha256(notes_json(self.raw()).encode("utf-8", "surrogatepass")).hexdigest()
            known = self._digests
            states = self._states
            kept: list[tuple[str, str, Any]] = []
            state: Any = None
            for position, key in enumerate(sorted(dict.keys(self))):
                value = dict.__getitem__(self, key)
                cached = None if key in opened else known.get(key)
                if cached is None:
                    cached = note_json(key, value)
                    if key not in opened:
                        known[key] = cached
                text = cached
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

    def fork(self, *, child: bool = True) -> tuple[Notes, dict[str, Any]]:
        """
        The notes of a fork, and the baseline a delta merge compares them with.

        Sealed notes are shared, frozen (a fork of unchanged notes costs the
        number of keys, not their size); open notes are copied, frozen when
        they are JSON-like data. Without *child*, only the baseline is made
        (an empty :class:`Notes` stands for the child).

        Raises:
            PayloadError: An open note is nested too deep to copy.
        """
        with self._lock:
            if not self._open:  # every note sealed: share them all, as they are
                shared = self._base
                if shared is None:
                    shared = self._base = dict(dict.items(self))
                if not child:
                    return Notes(), shared
                made: Notes = Notes.__new__(Notes)
                dict.update(made, shared)
                made._lock = threading.RLock()
                made._open = set()
                made._ours = set(self._ours)
                made._digests = dict(self._digests)
                made._pairs, made._sha = self._pairs, self._sha
                made._states = self._states  # never changed, only replaced
                made._base = shared  # the same notes, until one changes
                return made, shared
            made = Notes()
            base: dict[str, Any] = {}
            others: dict[str, Any] = {}
            order: list[Any] = []
            for key, value in dict.items(self):
                order.append(key)
                if key not in self._open:
                    base[key] = value
                elif type(key) is str and _json_tree(value, MAX_DEPTH, set()):
                    base[key] = deep_freeze(value)
                else:
                    others[key] = value
            copies = copy_notes(others, 2 if child else 1) if others else [{}, {}]
            base.update(copies[-1])
            if not child:
                return made, {key: base[key] for key in order}
            theirs = copies[0]
            for key in order:
                if key in others:
                    dict.__setitem__(made, key, theirs[key])
                    made._open.add(key)
                else:
                    dict.__setitem__(made, key, base[key])
                    if key in self._ours or key in self._open:
                        made._ours.add(key)
            made._digests = {key: digest for key, digest in self._digests.items() if key not in made._open}
            if not made._open:
                made._pairs, made._sha = self._pairs, self._sha
            return made, {key: base[key] for key in order}

    def mark(self) -> NotesMark:
        """
        A token for :meth:`restore`: the notes as they are now, open notes copied
        (by value when they can be, otherwise kept as they are).
        """
        with self._lock:
            stored = dict(dict.items(self))
            opened = {key: stored[key] for key in self._open}
            if opened:
                with contextlib.suppress(Exception):  # an uncopyable note: restored by key only
                    stored.update(copy_notes(opened)[0])
            return stored, set(self._ours), set(self._open), dict(self._digests)

    def restore(self, mark: NotesMark) -> None:
        """
        Put back the notes of a :meth:`mark`.
        """
        stored, ours, opened, digests = mark
        with self._lock:
            dict.clear(self)
            dict.update(self, stored)
            self._ours, self._open, self._digests = set(ours), set(opened), dict(digests)
            self._pairs = self._sha = self._base = None

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
