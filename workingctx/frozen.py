"""
Deep freezing: read-only payloads that still look and compare like plain data.

:func:`deep_freeze` turns dicts into :class:`FrozenDict`, lists into
:class:`FrozenList` and sets into frozensets, at every depth. :func:`thaw` is the
exact inverse. Any other leaf, including your own objects, passes through by
identity: it is never copied or reconstructed.

>>> from workingctx import deep_freeze, thaw
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

from collections.abc import Hashable, Iterable, Mapping
from typing import Any, NoReturn, TypeVar, cast

from workingctx.exceptions import FrozenPayloadError

__all__ = ["FROZEN_PAYLOAD_MESSAGE", "FrozenDict", "FrozenList", "deep_freeze", "thaw"]

FROZEN_PAYLOAD_MESSAGE = (
    "this payload belongs to a frozen value and cannot be mutated in place. "
    "Take a writable copy with workingctx.thaw(value) (every depth) "
    "or dict(value) / list(value) (top level only), change that, and store it again."
)

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

    __slots__ = ("_hash",)

    def __init__(self, items: Mapping[Any, Any] | Iterable[tuple[Any, Any]] = (), /) -> None:
        source = items.items() if isinstance(items, Mapping) else items
        dict.__init__(self, ((key, deep_freeze(value)) for key, value in source))
        self._hash: int | None = None

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

    __slots__ = ("_hash",)

    def __init__(self, items: Iterable[Any] = (), /) -> None:
        list.__init__(self, (deep_freeze(item) for item in items))
        self._hash: int | None = None

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

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(frozenset(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_FrozenSet, (frozenset(self),))


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
    """
    return cast("_T", _freeze(value))


def _freeze(value: Any) -> Any:
    kind = type(value)
    if kind is FrozenDict or kind is FrozenList or kind is _FrozenSet:
        return value
    if isinstance(value, dict):
        return FrozenDict(value)
    if isinstance(value, list):
        return FrozenList(value)
    if kind is tuple:
        return FrozenList(value)
    if isinstance(value, set):
        return _FrozenSet(_freeze(item) for item in value)
    return value


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


def is_hashable(value: object) -> bool:
    """
    Tell whether *value* can be hashed (a frozen payload with an unhashable
    leaf cannot).
    """
    if not isinstance(value, Hashable):
        return False
    try:
        hash(value)
    except TypeError:
        return False
    return True
