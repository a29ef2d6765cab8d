"""
How a reader of provider payloads fails: with the library's errors, each
naming the JSON path of the offending field and the fix, never with a bare
``KeyError``, ``TypeError``, ``AttributeError``, ``ValueError`` or ``IndexError``.

One mechanism serves every reader: :func:`wire_errors` wraps an entry point
(an adapter's ``read``, ``write``, ``check``, ``read_response``,
``request_key``; the ``Usage.from_*`` readers). The common path costs
nothing. When an error escapes, the call runs once more on the same payload
seen through :class:`_Seen` views, which remember each field read and its
path; the field the reader was at when it failed (the missing key, the value
the error names, or the last one read) is the path the error reports.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ParamSpec, TypeVar

from workingctx.exceptions import PayloadError, PayloadTypeError, ProviderError, WorkingCtxError

__all__ = ["wire_errors"]

P = ParamSpec("P")
R = TypeVar("R")

_MISSING = object()
_active: contextvars.ContextVar[bool] = contextvars.ContextVar("workingctx_wire_active", default=False)


class _Trail:
    """
    The fields a reader read, in order: (path, value) pairs.
    """

    __slots__ = ("steps",)

    def __init__(self) -> None:
        self.steps: list[tuple[str, Any, Any]] = []  # (path, value as stored, value as handed out)

    def seen(self, value: Any, path: str) -> Any:
        """
        *value* as the reader gets it: JSON objects and lists as views that record what is read.
        """
        if type(value) is dict:
            return _SeenDict(value, path, self)
        if type(value) is list:
            return _SeenList(value, path, self)
        return value

    def read(self, path: str, value: Any) -> Any:
        shown = self.seen(value, path)
        self.steps.append((path, value, shown))
        return shown


def _key_path(path: str, key: Any) -> str:
    if isinstance(key, str) and key.isidentifier():
        return f"{path}.{key}" if path else key
    return f"{path}[{key!r}]"


class _SeenDict(dict[Any, Any]):
    """
    A JSON object of the payload that records each field read through it.
    """

    __slots__ = ("_path", "_trail")

    def __init__(self, data: dict[Any, Any], path: str, trail: _Trail) -> None:
        super().__init__(data)
        self._path = path
        self._trail = trail

    def __getitem__(self, key: Any) -> Any:
        path = _key_path(self._path, key)
        if not dict.__contains__(self, key):
            self._trail.steps.append((path, _MISSING, _MISSING))
        return self._trail.read(path, dict.__getitem__(self, key))

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if dict.__contains__(self, key) else default

    def pop(self, key: Any, *default: Any) -> Any:
        if dict.__contains__(self, key):
            value = self[key]
            dict.pop(self, key)
            return value
        return dict.pop(self, key, *default)

    def __iter__(self) -> Iterator[Any]:  # so that dict(view) and {**view} read through __getitem__
        return dict.__iter__(self)

    def items(self) -> Any:
        return [(key, self[key]) for key in dict.__iter__(self)]

    def values(self) -> Any:
        return [self[key] for key in dict.__iter__(self)]


class _SeenList(list[Any]):
    """
    A JSON list of the payload that records each item read through it.
    """

    __slots__ = ("_path", "_trail")

    def __init__(self, data: list[Any], path: str, trail: _Trail) -> None:
        super().__init__(data)
        self._path = path
        self._trail = trail

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        position = index + len(self) if isinstance(index, int) and index < 0 else index
        path = f"{self._path}[{position}]"
        if not isinstance(index, int) or not -len(self) <= index < len(self):
            self._trail.steps.append((path, _MISSING, _MISSING))
        return self._trail.read(path, list.__getitem__(self, index))

    def __iter__(self) -> Iterator[Any]:
        for position in range(len(self)):
            yield self[position]


def _plain(value: Any) -> Any:
    """
    SDK objects (pydantic models) as the JSON data the readers take from them.
    """
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        try:
            return dump(mode="json", exclude_none=True)
        except Exception:  # noqa: BLE001  # not an SDK model after all: read as it is
            return value
    if type(value) is list:
        return [_plain(item) for item in value]
    return value


def _offender(error: BaseException, trail: _Trail) -> tuple[str, Any] | None:
    """
    (path, value) of the field a failed reader was at: the key it missed, the
    value the error names, or the last field it read.
    """
    steps = trail.steps
    if not steps:
        return None
    if isinstance(error, KeyError | IndexError):
        for path, value, _shown in reversed(steps):
            if value is _MISSING:
                return path, _MISSING
    named = getattr(error, "value", _MISSING)
    if named is not _MISSING and named is not None:
        for path, value, shown in reversed(steps):
            if named is value or named is shown:
                return path, value
    path, value, _shown = steps[-1]
    return path, value


def _described(value: Any) -> str:
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} of type {type(value).__name__}"


def _translated(error: BaseException, where: str, found: tuple[str, Any] | None, label: str) -> WorkingCtxError:
    """
    The library's error for *error*, raised while reading the field *found* of a *label* payload.
    """
    kind = PayloadTypeError if isinstance(error, TypeError | AttributeError) else PayloadError
    path, value = found if found is not None else (where, _MISSING)
    path = path or where
    if isinstance(error, KeyError | IndexError) and value is _MISSING:
        problem = f"is missing; {label} payloads have it here: add it as the provider's API reference shows"
    elif isinstance(error, WorkingCtxError):
        problem = f"cannot be read: {error}"
    else:
        shown = "" if value is _MISSING else f"is {_described(value)}, which "
        problem = (
            f"{shown}cannot be read as {label} data ({type(error).__name__}: {error}); "
            "give this field the type and shape the provider's API reference shows"
        )
    message = f"{path} {problem}" if path else f"the {label} payload {problem}"
    translated = kind(message, path=path, problem=problem)
    if value is not _MISSING:
        translated.argument, translated.value = path, value
    return translated


def wire_errors(label: str, root: str = "") -> Callable[[Callable[P, R]], Callable[P, R]]:
    """
    Make an entry point that reads a *label* payload (its first argument) raise
    only the library's errors, each with the JSON path of the field it failed
    at (from *root*, the name of a payload given as a bare list) and the fix.

    :class:`~workingctx.exceptions.ProviderError` (a refusal with its
    problems) passes through unchanged, as does an error about another
    argument (``cache=``, ``store=``); an entry point called by another leaves
    its failure to the outer one, which knows the whole payload; any other
    error becomes a :class:`~workingctx.exceptions.PayloadError` (a
    :class:`~workingctx.exceptions.PayloadTypeError` for a value of the wrong
    type), chained to the original.
    """

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        names = list(inspect.signature(function).parameters)
        at = 1 if names[:1] in (["cls"], ["self"]) else 0  # where the payload is: after the class of a classmethod
        others = frozenset(names[at + 1 :])

        @functools.wraps(function)
        def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
            if _active.get():  # called by another entry point: that one locates the failure in its payload
                return function(*args, **kwargs)
            token = _active.set(True)
            try:
                return function(*args, **kwargs)
            except ProviderError:
                raise
            except Exception as error:  # every failure of a reader is located, then raised as the library's
                if isinstance(error, WorkingCtxError) and error.argument in others:
                    raise
                found = _locate(function, error, args, kwargs, root, at)
                if isinstance(error, WorkingCtxError) and found is None:
                    raise
                raise _translated(error, root, found, label) from error
            finally:
                _active.reset(token)

        return guarded

    return decorate


def _locate(
    function: Callable[..., Any],
    error: BaseException,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    root: str,
    at: int,
) -> tuple[str, Any] | None:
    """
    Run *function* again on its payload seen through views, and find where it fails as it did.
    """
    if len(args) <= at:
        return None
    trail = _Trail()
    payload = _plain(args[at])
    seen = trail.seen(payload, root if type(payload) is list else "")
    if seen is payload:
        return None
    try:
        function(*args[:at], seen, *args[at + 1 :], **kwargs)
    except Exception as again:  # noqa: BLE001  # the same failure, seen: its place is what is wanted
        if type(again) is type(error):
            return _offender(again, trail)
    return None
