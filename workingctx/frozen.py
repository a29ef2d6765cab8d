"""
Deep freezing: read-only payloads that still look and compare like plain data.

:func:`deep_freeze` turns dicts into :class:`FrozenDict`, lists into
:class:`FrozenList` and sets into frozensets, at every depth. :func:`thaw` is the
exact inverse. Any other leaf, including your own objects, passes through by
identity: it is never copied or reconstructed.

>>> from workingctx import thaw
>>> from workingctx.frozen import deep_freeze
>>> plan = deep_freeze({"steps": ["a", "b"]})
>>> plan
{'steps': ['a', 'b']}
>>> plan == {"steps": ["a", "b"]}
True
>>> plan["steps"].append("c")
Traceback (most recent call last):
...
workingctx.exceptions.FrozenPayloadError: this payload belongs to a frozen value and cannot be mutated in place. ...
>>> thaw(plan)["steps"].append("c")
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn, TypeVar, cast

from workingctx.exceptions import FrozenPayloadError, PayloadError, PayloadTypeError

__all__ = [
    "FROZEN_PAYLOAD_MESSAGE",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "FrozenDict",
    "FrozenList",
    "deep_freeze",
    "freeze_json",
    "thaw",
]

FROZEN_PAYLOAD_MESSAGE = (
    "this payload belongs to a frozen value and cannot be mutated in place. "
    "Take a writable copy with workingctx.thaw(value) (every depth) "
    "or dict(value) / list(value) (top level only), change that, and store it again."
)

MAX_DEPTH = 100
"""How many levels of dicts and lists a payload may nest (deeper, or cyclic, is refused)."""

MAX_INT_DIGITS = 4300
"""The longest int a payload may hold, in decimal digits: Python's default ``str()`` limit."""

# The bounds every int check of the package compares with (the low one negated once:
# negating a 4,300-digit int is not free).
_INT_BOUND = 10**MAX_INT_DIGITS
_INT_LOW = -_INT_BOUND
_PAYLOAD = "the payload"

_T = TypeVar("_T")


def _refuse(*_args: object, **_kwargs: object) -> NoReturn:
    raise FrozenPayloadError(FROZEN_PAYLOAD_MESSAGE)


class FrozenDict(dict[Any, Any]):
    """
    A read-only dict whose values are frozen too.

    It is a ``dict`` for every reader (``isinstance``, ``==``, ``repr``,
    ``json.dumps``), hashable when its values are, and every mutator raises
    :class:`~workingctx.exceptions.FrozenPayloadError`.

    >>> FrozenDict({"a": [1]}) == {"a": [1]}
    True
    """

    # _height: levels of dicts and lists, itself included; _json: checked to be JSON data
    __slots__ = ("_hash", "_height", "_json")

    def __init__(self, items: Mapping[Any, Any] | Iterable[tuple[Any, Any]] = (), /) -> None:
        source = items.items() if isinstance(items, Mapping) else items
        frozen: dict[Any, Any] = {}
        height = 0
        try:
            for key, value in source:
                item = _freeze(value, MAX_DEPTH - 1)
                frozen[key] = item
                if type(item) in _FROZEN:
                    height = max(height, item._height)
        except _Refused as exc:
            raise exc.error(_PAYLOAD) from None
        dict.__init__(self, frozen)
        self._hash: int | None = None
        self._height = height + 1
        self._json = False

    def __hash__(self) -> int:  # type: ignore[override]  # dict declares __hash__ = None
        if self._hash is None:
            self._hash = hash(frozenset(self.items()))
        return self._hash

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def copy(self) -> dict[Any, Any]:
        """
        Return a plain, writable top-level copy (nested values stay frozen).
        """
        return dict(self)

    __setitem__ = _refuse
    __delitem__ = _refuse
    __ior__ = _refuse
    clear = _refuse
    pop = _refuse
    popitem = _refuse
    setdefault = _refuse
    update = _refuse


class FrozenList(list[Any]):
    """
    A read-only list whose items are frozen too.

    It is a ``list`` for every reader (``isinstance``, ``==``, ``repr``,
    ``json.dumps``), hashable when its items are, and every mutator raises
    :class:`~workingctx.exceptions.FrozenPayloadError`.

    >>> FrozenList([1, {"a": 2}]) == [1, {"a": 2}]
    True
    """

    __slots__ = ("_hash", "_height", "_json")

    def __init__(self, items: Iterable[Any] = (), /) -> None:
        frozen: list[Any] = []
        height = 0
        try:
            for value in items:
                item = _freeze(value, MAX_DEPTH - 1)
                frozen.append(item)
                if type(item) in _FROZEN:
                    height = max(height, item._height)
        except _Refused as exc:
            raise exc.error(_PAYLOAD) from None
        list.__init__(self, frozen)
        self._hash: int | None = None
        self._height = height + 1
        self._json = False

    def __hash__(self) -> int:  # type: ignore[override]  # list declares __hash__ = None
        if self._hash is None:
            self._hash = hash(tuple(self))
        return self._hash

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))

    def copy(self) -> list[Any]:
        """
        Return a plain, writable top-level copy (nested items stay frozen).
        """
        return list(self)

    __setitem__ = _refuse
    __delitem__ = _refuse
    __iadd__ = _refuse
    __imul__ = _refuse
    append = _refuse
    clear = _refuse
    extend = _refuse
    insert = _refuse
    pop = _refuse
    remove = _refuse
    reverse = _refuse
    sort = _refuse


class _FrozenSet(frozenset[Any]):
    """
    The frozen form of a ``set``: a frozenset that remembers it was a set, so
    :func:`thaw` can give a set back while a user's own frozenset stays one.
    """

    __slots__ = ("_height",)
    _height: int

    def __repr__(self) -> str:
        return repr(frozenset(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_set, (frozenset(self),))


def _rebuild_set(items: frozenset[Any]) -> _FrozenSet:
    return cast("_FrozenSet", _freeze(set(items), MAX_DEPTH))


_FROZEN: frozenset[type] = frozenset({FrozenDict, FrozenList, _FrozenSet})


def _new_dict(items: dict[Any, Any], height: int, *, json: bool) -> FrozenDict:
    made = FrozenDict.__new__(FrozenDict)
    dict.update(made, items)
    made._hash = None
    made._height = height
    made._json = json
    return made


def _new_list(items: list[Any], height: int, *, json: bool) -> FrozenList:
    made = FrozenList.__new__(FrozenList)
    list.extend(made, items)
    made._hash = None
    made._height = height
    made._json = json
    return made


EMPTY_JSON_OBJECT: FrozenDict = _new_dict({}, 1, json=True)
"""The empty JSON object, frozen and checked: a shared default."""


# -- refusals -------------------------------------------------------------------------


class _Refused(Exception):  # noqa: N818  # internal: always turned into a PayloadError
    """
    A payload was refused; the frames it passes through add their step of the path.
    """

    def __init__(self, problem: str, *, kind: type[PayloadError] = PayloadError, deepest: int | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.kind = kind
        self.deepest = deepest
        self.steps: list[str] = []
        self.containers: list[int] = []

    def step(self, container: object, step: str) -> _Refused:
        self.steps.append(step)
        self.containers.append(id(container))
        return self

    def error(self, where: str) -> PayloadError:
        steps = self.steps[::-1]
        containers = self.containers[::-1]
        if self.deepest is None:
            path = where + "".join(steps)
            return self.kind(f"{path} {self.problem}", path=path, problem=self.problem)
        first: dict[int, int] = {}
        for position, container in enumerate([*containers, self.deepest]):
            if container in first:
                path = where + "".join(steps[:position])
                again = where + "".join(steps[: first[container]])
                problem = (
                    f"is {again or 'the top'} again: the payload contains itself (a cycle); a payload is a tree "
                    "of JSON-like data: store a copy without the cycle, or ids that refer to the shared part"
                )
                return self.kind(f"{path} {problem}", path=path, problem=problem)
            first[container] = position
        shown = "".join(steps[:6]) + ("..." if len(steps) > 6 else "")
        path = where + shown
        problem = (
            f"is nested more than {MAX_DEPTH} levels deep (dicts, lists and sets); "
            "flatten it, or store the deep part as a JSON string"
        )
        return self.kind(f"{path} {problem}", path=path, problem=problem)


def _show(value: object) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} of type {type(value).__name__}"


def _too_deep(value: object) -> _Refused:
    return _Refused("", deepest=id(value))


def _check_number(value: Any) -> None:
    """
    Refuse a float that is not finite and an int too long for ``str()``.
    """
    if isinstance(value, float):
        if not math.isfinite(value):
            msg = f"is {value!r}, which JSON cannot hold; store None or a string such as {str(value)!r} instead"
            raise _Refused(msg)
    elif not _INT_LOW < value < _INT_BOUND:
        msg = (
            f"is an int of {value.bit_length()} bits, longer than {MAX_INT_DIGITS} decimal digits "
            "(Python's str() limit); store it as a string"
        )
        raise _Refused(msg)


# -- deep freezing ---------------------------------------------------------------------


def deep_freeze(value: _T) -> _T:  # the TypeVar keeps the caller's annotation
    """
    Return a read-only version of *value*, frozen at every depth.

    dict → :class:`FrozenDict`, list → :class:`FrozenList`, set → frozenset,
    tuple → :class:`FrozenList` too (payloads are JSON-like: a tuple comes back
    from :func:`thaw` as a list, as it would through JSON). Already frozen payloads and every other
    leaf are returned as they are (same object).

    Args:
        value: Any value; typically JSON-like data.

    Returns:
        The frozen value. Its type is reported as the input's so callers keep
        their annotations; at run time it is the frozen counterpart.

    Raises:
        PayloadError: *value* nests dicts, lists and sets more than
            :data:`MAX_DEPTH` levels deep, or contains itself.
    """
    try:
        return cast("_T", _freeze(value, MAX_DEPTH))
    except _Refused as exc:
        raise exc.error(_PAYLOAD) from None


def freeze_named(value: _T, where: str) -> _T:
    """
    :func:`deep_freeze`, with errors naming *value* as *where* (``"note 'plan'"``).
    """
    try:
        return cast("_T", _freeze(value, MAX_DEPTH))
    except _Refused as exc:
        raise exc.error(where) from None


def _freeze(value: Any, room: int) -> Any:
    """
    Freeze *value*, which may open at most *room* more levels of containers.
    """
    kind = type(value)
    if kind in _FROZEN:
        if value._height > room:
            raise _too_deep(value)
        return value
    if isinstance(value, dict):
        if room < 1:
            raise _too_deep(value)
        items: dict[Any, Any] = {}
        height = 0
        for key, item in value.items():
            try:
                frozen = _freeze(item, room - 1)
            except _Refused as exc:
                raise exc.step(value, f"[{key!r}]") from None
            items[key] = frozen
            if type(frozen) in _FROZEN and frozen._height > height:
                height = frozen._height
        return _new_dict(items, height + 1, json=False)
    if isinstance(value, list) or kind is tuple:
        if room < 1:
            raise _too_deep(value)
        out: list[Any] = []
        height = 0
        for index, item in enumerate(value):
            try:
                frozen = _freeze(item, room - 1)
            except _Refused as exc:
                raise exc.step(value, f"[{index}]") from None
            out.append(frozen)
            if type(frozen) in _FROZEN and frozen._height > height:
                height = frozen._height
        return _new_list(out, height + 1, json=False)
    if isinstance(value, set):
        if room < 1:
            raise _too_deep(value)
        members = []
        height = 0
        for item in value:
            try:
                frozen = _freeze(item, room - 1)
            except _Refused as exc:
                raise exc.step(value, f"{{{item!r}}}") from None
            members.append(frozen)
            if type(frozen) in _FROZEN and frozen._height > height:
                height = frozen._height
        made = _FrozenSet(members)
        made._height = height + 1
        return made
    return value


def check_kept(value: Any, where: str) -> None:
    """
    Refuse what no note can keep, named as *where* (``"note 'plan'"``): a
    value that contains itself or nests more than :data:`MAX_DEPTH` levels of
    dicts, lists, tuples and sets, or holds (there, keys included) a NaN, an
    infinity or an int longer than :data:`MAX_INT_DIGITS` digits. Objects of
    your own are not looked into.

    Raises:
        PayloadError: The message gives the path and the fix.
    """
    try:
        _check(value, MAX_DEPTH)
    except _Refused as exc:
        raise exc.error(where) from None


def _check(value: Any, room: int) -> None:
    kind = type(value)
    if kind is str or value is None or kind is bool:
        return
    if kind is int or kind is float:
        _check_number(value)
        return
    if (kind is FrozenDict or kind is FrozenList) and value._json:  # checked when it was built
        if value._height > room:
            raise _too_deep(value)
        return
    if isinstance(value, dict):
        if room < 1:
            raise _too_deep(value)
        for key, item in value.items():
            try:
                if type(key) is not str:
                    _check(key, room - 1)
                _check(item, room - 1)
            except _Refused as exc:
                raise exc.step(value, f"[{key!r}]") from None
    elif isinstance(value, list | tuple):
        if room < 1:
            raise _too_deep(value)
        for index, item in enumerate(value):
            try:
                _check(item, room - 1)
            except _Refused as exc:
                raise exc.step(value, f"[{index}]") from None
    elif isinstance(value, set | frozenset):
        if room < 1:
            raise _too_deep(value)
        for item in value:
            try:
                _check(item, room - 1)
            except _Refused as exc:
                raise exc.step(value, f"{{{item!r}}}") from None
    elif isinstance(value, int | float) and not isinstance(value, bool):  # an IntEnum, a numpy float
        _check_number(value)


_OPEN: Any = object()
"""What :func:`_seal` returns for a value that is not a tree of plain JSON data."""


def seal_tree(value: dict[str, Any] | list[Any], where: str) -> Any:
    """
    The frozen, checked copy of *value* (a dict or a list) when it is a tree
    of dicts with str keys, lists and JSON scalars within :data:`MAX_DEPTH`
    levels, built as :func:`freeze_json` builds it; else None. One walk copies,
    checks the numbers and measures the height, so the copy is never walked
    again to be checked.

    Raises:
        PayloadError: It holds a NaN, an infinity or an int longer than
            :data:`MAX_INT_DIGITS` digits; the message names it from *where*.
    """
    try:
        sealed = _seal(value, MAX_DEPTH, set())
    except _Refused as exc:
        raise exc.error(where) from None
    return None if sealed is _OPEN else sealed


def _seal(value: Any, room: int, seen: set[int]) -> Any:
    """
    :func:`seal_tree` within *room* levels, :data:`_OPEN` for what is not a
    tree (a container met twice, another type, a key that is not a str). A
    container is copied once, into its frozen form; one holding containers is
    first copied to put their frozen forms in their places.
    """
    if room < 1 or id(value) in seen:
        return _OPEN
    seen.add(id(value))
    low, bound = _INT_LOW, _INT_BOUND
    height = 0
    is_dict = type(value) is dict
    placed: Any = None  # a copy of *value* with frozen containers in their places, once one is met
    for where, item in value.items() if is_dict else enumerate(value):
        if is_dict and type(where) is not str:
            return _OPEN
        kind = type(item)
        if kind is str or item is None or kind is bool:
            continue
        if kind is int:
            if not low < item < bound:
                raise _number(item).step(value, f"[{where!r}]")
        elif kind is float:
            if not math.isfinite(item):
                raise _number(item).step(value, f"[{where!r}]")
        elif kind is dict or kind is list:
            try:
                frozen = _seal(item, room - 1, seen)
            except _Refused as exc:
                raise exc.step(value, f"[{where!r}]") from None
            if frozen is _OPEN:
                return _OPEN
            height = max(height, frozen._height)
            if placed is None:
                placed = dict(value) if is_dict else list(value)
            placed[where] = frozen
        else:
            return _OPEN
    if is_dict:
        return _new_dict(value if placed is None else placed, height + 1, json=True)
    return _new_list(value if placed is None else placed, height + 1, json=True)


def _number(value: float) -> _Refused:
    """
    The refusal of a number no payload can hold (its problem, without a path yet).
    """
    try:
        _check_number(value)
    except _Refused as exc:
        return exc
    raise AssertionError(value)  # pragma: no cover  # only called for such a number


# -- JSON payloads -----------------------------------------------------------------------


def freeze_json(value: Any, where: str = "the payload") -> Any:
    """
    Check that *value* is JSON data a store can keep, and return it deep-frozen.

    JSON data is str, int, float, bool and None, lists (tuples become lists)
    and mappings with str keys, nested at most :data:`MAX_DEPTH` levels; floats
    are finite and ints at most :data:`MAX_INT_DIGITS` digits long. Subclasses
    of str, int and float (such as enums) become the plain type, so a value
    read back from JSON has the same types. This is the check every payload of
    a value (tool arguments, outputs, metadata, journal entries) goes through
    when the value is built.

    Args:
        value: The payload.
        where: How error messages name it, such as ``"metadata"``.

    Returns:
        The payload, frozen (:class:`FrozenDict`, :class:`FrozenList` and scalars).

    Raises:
        PayloadTypeError: Something in it is not JSON data (a set, a key that
            is not a str, an object of your own); the message gives its path.
        PayloadError: It is nested too deep or contains itself, or holds a
            NaN, an infinity or an int too long to write.

    >>> freeze_json({"n": 1, "tags": ("a", "b")})
    {'n': 1, 'tags': ['a', 'b']}
    >>> freeze_json({"when": float("nan")}, "metadata")
    Traceback (most recent call last):
    ...
    workingctx.exceptions.PayloadError: metadata['when'] is nan, which JSON cannot hold; ...
    """
    kind = type(value)
    if kind is str or value is None or kind is bool:
        return value
    if (kind is FrozenDict or kind is FrozenList) and value._json:
        return value
    try:
        return _json(value, MAX_DEPTH)
    except _Refused as exc:
        raise exc.error(where) from None


def is_json_payload(value: object) -> bool:
    """
    Whether *value* was built by :func:`freeze_json` (or is a JSON scalar).
    """
    kind = type(value)
    if kind is FrozenDict or kind is FrozenList:
        return cast("FrozenDict | FrozenList", value)._json
    return kind is str or value is None or kind is bool or kind is int or kind is float


def _json(value: Any, room: int) -> Any:
    kind = type(value)
    if kind is str or value is None or kind is bool:
        return value
    if kind is int or kind is float:
        _check_number(value)
        return value
    if (kind is FrozenDict or kind is FrozenList) and value._json:
        if value._height > room:
            raise _too_deep(value)
        return value
    if isinstance(value, Mapping):
        if room < 1:
            raise _too_deep(value)
        items: dict[str, Any] = {}
        height = 0
        for key, item in value.items():
            name = key if type(key) is str else _json_key(value, key)
            try:
                frozen = _json(item, room - 1)
            except _Refused as exc:
                raise exc.step(value, f"[{name!r}]") from None
            items[name] = frozen
            if (type(frozen) is FrozenDict or type(frozen) is FrozenList) and frozen._height > height:
                height = frozen._height
        return _new_dict(items, height + 1, json=True)
    if isinstance(value, list | tuple):
        if room < 1:
            raise _too_deep(value)
        out: list[Any] = []
        height = 0
        for index, item in enumerate(value):
            try:
                frozen = _json(item, room - 1)
            except _Refused as exc:
                raise exc.step(value, f"[{index}]") from None
            out.append(frozen)
            if (type(frozen) is FrozenDict or type(frozen) is FrozenList) and frozen._height > height:
                height = frozen._height
        return _new_list(out, height + 1, json=True)
    return _json_scalar(value)


def _json_key(container: object, key: object) -> str:
    if isinstance(key, str):
        return str.__str__(key)
    msg = f"has the key {_show(key)}; JSON object keys are str: convert the key with str()"
    raise _Refused(msg, kind=PayloadTypeError).step(container, "")


def _json_scalar(value: Any) -> Any:
    """
    A subclass of a JSON scalar (an enum, a str subclass) as its plain value;
    anything else is refused.
    """
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        plain = int(value)
        _check_number(plain)
        return plain
    if isinstance(value, float):
        number = float(value)
        _check_number(number)
        return number
    hint = "list(it) or sorted(it)" if isinstance(value, set | frozenset) else "a dict of its fields"
    msg = (
        f"is {_show(value)}, which is not JSON data; a payload holds only str, int, float, bool, None, "
        f"lists and dicts with str keys: store a plain-data projection of it, such as {hint}"
    )
    raise _Refused(msg, kind=PayloadTypeError)


# -- thawing ---------------------------------------------------------------------------


def thaw(value: _T) -> _T:
    """
    Return a plain, writable copy of a frozen payload, at every depth.

    The exact inverse of :func:`deep_freeze`: ``thaw(deep_freeze(x)) == x`` and
    the result has the same container types as *x*. Plain dicts and lists are
    copied too, so the result never aliases the input's containers. Other
    leaves pass through by identity.
    """
    return cast("_T", _thaw(value))


def _thaw(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _thaw(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_thaw(item) for item in value]
    if type(value) is tuple:
        return tuple(_thaw(item) for item in value)
    if isinstance(value, set | _FrozenSet):
        return {_thaw(item) for item in value}
    return value
