"""
The checks every public constructor and function runs on its arguments.

One place for them, in the spirit of ``attrs.validators``: each check is written
once, gives the same wording everywhere, and raises an error that keeps the
evidence (``argument``, ``value``) as attributes. The rule for the error's type:

- a value of the wrong *type* raises :class:`~workingctx.exceptions.ArgumentTypeError`
  (a ``TypeError`` and a ``WorkingCtxError``);
- a value of the right type whose *content* is wrong raises
  :class:`~workingctx.exceptions.ArgumentValueError` (a ``ValueError`` and a
  ``WorkingCtxError``), or the module's own value error when it has one
  (``error=ScopeError``, ``error=InvalidMessageError``, ...), which carries the
  same attributes.

A ``bool`` is not a count: ``True`` where an int is expected is a type error.

Plain checks (``check_*``) take the value first and return it, narrowed, so an
``__init__`` can write ``self.n = check_count(n, "n", owner="LastNTurns")``.
The attrs validators (``count()``, ``flag()``, ``text()``, ...) wrap the same
checks; their owner is the class being built.
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar

from workingctx.exceptions import ArgumentTypeError, ArgumentValueError, WorkingCtxError
from workingctx.frozen import _INT_BOUND, _INT_LOW, MAX_INT_DIGITS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    import attrs

    Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]

__all__ = [
    "aware_datetime",
    "check_count",
    "check_flag",
    "check_instance",
    "check_int",
    "check_items",
    "check_match",
    "check_number",
    "check_one_of",
    "check_str",
    "count",
    "described",
    "flag",
    "instance_of",
    "integer",
    "matches",
    "number",
    "one_of",
    "shown",
    "text",
    "wrong_type",
    "wrong_value",
]

T = TypeVar("T")

_REPR_LIMIT = 200


def shown(value: object) -> str:
    """
    ``repr(value)``, cut short when long (an int too long to write is shown by its length).
    """
    try:
        text = repr(value)
    except ValueError:  # an int past sys.get_int_max_str_digits()
        return f"<an int of more than {MAX_INT_DIGITS} digits>"
    if len(text) > _REPR_LIMIT:
        text = text[: _REPR_LIMIT - 3] + "..."
    return text


def described(value: object) -> str:
    """
    ``value!r of type name``: how every message shows an offending value (a long repr is cut).
    """
    return f"{shown(value)} of type {type(value).__name__}"


def _either(choices: tuple[object, ...]) -> str:
    """
    ``'a', 'b' or None``: the choices in words.
    """
    shown = [repr(choice) for choice in choices]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def _where(owner: str | None, argument: str, label: str | None) -> str:
    """
    How a message names the argument: *label* when given, else ``owner: argument``.
    """
    if label is not None:
        return label
    return f"{owner}: {argument}" if owner else argument


def _tail(fix: str | None) -> str:
    return f"; {fix}" if fix else ""


def wrong_type(
    value: object,
    argument: str,
    expected: str,
    *,
    owner: str | None = None,
    label: str | None = None,
    fix: str | None = None,
    verb: str = "must be",
) -> ArgumentTypeError:
    """
    The error for *argument* given *value* where *expected* (``"an int"``) goes.

    The message reads ``owner: argument must be expected, got value of type T; fix``;
    *label* replaces ``owner: argument`` and *verb* ``must be`` (``label="merge()",
    verb="takes"``).
    """
    if fix is None and isinstance(value, bool) and "int" in expected:
        fix = "a bool is not a count: pass an int"
    head = " ".join(part for part in (_where(owner, argument, label), verb, expected) if part)
    msg = f"{head}, got {described(value)}{_tail(fix)}"
    return ArgumentTypeError(msg, argument=argument, value=value, expected=expected)


def wrong_value(
    value: object,
    argument: str,
    problem: str,
    *,
    owner: str | None = None,
    label: str | None = None,
    fix: str | None = None,
    error: type[WorkingCtxError] = ArgumentValueError,
) -> WorkingCtxError:
    """
    The error for *argument* given *value* of the right type, with *problem* (``"must be 0 or more"``).
    """
    msg = f"{_where(owner, argument, label)} {problem}, got {shown(value)}{_tail(fix)}"
    return error(msg, argument=argument, value=value)


# -- plain checks ---------------------------------------------------------------------


def check_instance(
    value: object,
    argument: str,
    types: type[T] | tuple[type[T], ...],
    expected: str,
    *,
    owner: str | None = None,
    label: str | None = None,
    fix: str | None = None,
    verb: str = "must be",
) -> T:
    """
    *value* if it is an instance of *types*, else the type error.
    """
    if not isinstance(value, types):
        raise wrong_type(value, argument, expected, owner=owner, label=label, fix=fix, verb=verb)
    return value


def check_int(
    value: object,
    argument: str,
    *,
    minimum: int | None = None,
    owner: str | None = None,
    label: str | None = None,
    fix: str | None = None,
    error: type[WorkingCtxError] = ArgumentValueError,
) -> int:
    """
    *value* if it is an int (not a bool) of at least *minimum*, short enough for ``str()`` to write.
    """
    if not isinstance(value, int) or isinstance(value, bool):
        raise wrong_type(value, argument, "an int", owner=owner, label=label)
    if not _INT_LOW < value < _INT_BOUND:
        problem = f"is an int longer than {MAX_INT_DIGITS} decimal digits, which cannot be written"
        msg = f"{_where(owner, argument, label)} {problem}; use a str"
        raise error(msg, argument=argument, value=value)
    if minimum is not None and value < minimum:
        problem = "must be a positive int" if minimum == 1 else f"must be {minimum} or more"
        raise wrong_value(value, argument, problem, owner=owner, label=label, fix=fix, error=error)
    return value


def check_count(
    value: object,
    argument: str,
    *,
    owner: str | None = None,
    label: str | None = None,
    fix: str | None = None,
    error: type[WorkingCtxError] = ArgumentValueError,
) -> int:
    """
    *value* if it is a count: an int (not a bool), 0 or more.
    """
    return check_int(value, argument, minimum=0, owner=owner, label=label, fix=fix, error=error)


def check_flag(value: object, argument: str, *, owner: str | None = None, label: str | None = None) -> bool:
    """
    *value* if it is ``True`` or ``False`` (a 0 or a 1 is not a flag).
    """
    if not isinstance(value, bool):
        raise wrong_type(value, argument, "True or False", owner=owner, label=label)
    return value


def check_str(
    value: object,
    argument: str,
    *,
    nonempty: bool = False,
    owner: str | None = None,
    label: str | None = None,
    fix: str | None = None,
    error: type[WorkingCtxError] = ArgumentValueError,
) -> str:
    """
    *value* if it is a str (non-empty when *nonempty*).
    """
    if not isinstance(value, str):
        raise wrong_type(value, argument, "a non-empty str" if nonempty else "a str", owner=owner, label=label)
    if nonempty and not value:
        raise wrong_value(value, argument, "must not be empty", owner=owner, label=label, fix=fix, error=error)
    return value


def holdable_name(value: object) -> TypeGuard[str]:
    """
    Whether *value* is a non-empty str every store can hold as a name: no NUL
    (PostgreSQL's text refuses it) and no lone surrogate (it has no UTF-8 form).
    """
    if not isinstance(value, str) or not value or "\x00" in value:
        return False
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_name(value: object, argument: str, *, label: str, fix: str) -> str:
    """
    *value* if it is a name every store can hold (see :func:`holdable_name`).
    """
    if holdable_name(value):
        return value
    name = check_str(value, argument, nonempty=True, label=label, fix=fix)
    if "\x00" in name:
        raise wrong_value(value, argument, "holds NUL, which a store cannot keep in a name", label=label, fix=fix)
    problem = "holds a lone surrogate (half of a character), which has no UTF-8 form"
    raise wrong_value(value, argument, problem, label=label, fix=fix)


def check_number(
    value: object,
    argument: str,
    *,
    minimum: float | None = None,
    owner: str | None = None,
    label: str | None = None,
    fix: str | None = None,
    error: type[WorkingCtxError] = ArgumentValueError,
) -> float:
    """
    *value* if it is a finite number (an int or a float, not a bool) of at least *minimum*.
    """
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise wrong_type(value, argument, "a number (int or float)", owner=owner, label=label)
    if isinstance(value, float) and not math.isfinite(value):
        raise wrong_value(value, argument, "must be a finite number", owner=owner, label=label, fix=fix, error=error)
    if minimum is not None and value < minimum:
        raise wrong_value(value, argument, f"must be {minimum} or more", owner=owner, label=label, fix=fix, error=error)
    return value


def check_one_of(
    value: object,
    argument: str,
    choices: Iterable[str | None],
    *,
    owner: str | None = None,
    label: str | None = None,
    error: type[WorkingCtxError] = ArgumentValueError,
) -> str | None:
    """
    *value* if it is one of *choices* (a str, not a subclass, or ``None`` when allowed).
    """
    allowed = tuple(choices)
    if value is None and None in allowed:
        return None
    if type(value) is not str:
        raise wrong_type(value, argument, f"one of {_either(allowed)}", owner=owner, label=label)
    if value not in allowed:
        raise wrong_value(value, argument, f"must be one of {_either(allowed)}", owner=owner, label=label, error=error)
    return value


def check_match(
    value: object,
    argument: str,
    pattern: re.Pattern[str],
    rule: str,
    *,
    owner: str | None = None,
    label: str | None = None,
    fix: str | None = None,
    error: type[WorkingCtxError] = ArgumentValueError,
) -> str:
    """
    *value* if it is a str that *pattern* matches whole; *rule* says what it matches in words.
    """
    if not isinstance(value, str):
        raise wrong_type(value, argument, f"{rule} (a str)", owner=owner, label=label, fix=fix)
    if not pattern.fullmatch(value):
        raise wrong_value(value, argument, f"must be {rule}", owner=owner, label=label, fix=fix, error=error)
    return value


def check_items(
    values: Iterable[object],
    argument: str,
    item_type: type[T] | tuple[type[T], ...],
    noun: str,
    *,
    owner: str | None = None,
    label: str | None = None,
    fix: str | None = None,
) -> tuple[T, ...]:
    """
    *values* as a tuple if every item is an instance of *item_type*.

    A wrong item raises the type error for ``argument[position]``; *noun*
    names one item (``"a Message"``).
    """
    items: list[T] = []
    for position, item in enumerate(values):
        if not isinstance(item, item_type):
            shown = None if label is None else f"{label}[{position}]"
            raise wrong_type(item, f"{argument}[{position}]", noun, owner=owner, label=shown, fix=fix)
        items.append(item)
    return tuple(items)


# -- attrs validators ----------------------------------------------------------------


def _owner(inst: object, owner: str | None) -> str | None:
    if owner is not None or inst is None:
        return owner
    return type(inst).__name__


def integer(
    *,
    minimum: int | None = None,
    optional: bool = False,
    owner: str | None = None,
    label: str | None = None,
    fix: str | None = None,
    error: type[WorkingCtxError] = ArgumentValueError,
) -> Validator:
    """
    An attrs validator: an int (not a bool) of at least *minimum* (or ``None`` when *optional*).
    """

    def validate(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value.__class__ is int and _INT_LOW < value < _INT_BOUND and (minimum is None or value >= minimum):
            return  # the common case, without building the error's context
        if value is None and optional:
            return
        where = _owner(inst, owner)
        if not isinstance(value, int) or isinstance(value, bool):
            raise wrong_type(
                value, attribute.name, "an int or None" if optional else "an int", owner=where, label=label
            )
        check_int(value, attribute.name, minimum=minimum, owner=where, label=label, fix=fix, error=error)

    return validate


def count(
    *,
    optional: bool = False,
    owner: str | None = None,
    label: str | None = None,
    fix: str | None = None,
    error: type[WorkingCtxError] = ArgumentValueError,
) -> Validator:
    """
    An attrs validator: a count, an int (not a bool), 0 or more (or ``None`` when *optional*).
    """
    return integer(minimum=0, optional=optional, owner=owner, label=label, fix=fix, error=error)


def flag(*, owner: str | None = None, label: str | None = None) -> Validator:
    """
    An attrs validator: ``True`` or ``False``.
    """

    def validate(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is True or value is False:
            return
        check_flag(value, attribute.name, owner=_owner(inst, owner), label=label)

    return validate


def text(
    *,
    optional: bool = False,
    nonempty: bool = False,
    owner: str | None = None,
    label: str | None = None,
    fix: str | None = None,
    error: type[WorkingCtxError] = ArgumentValueError,
) -> Validator:
    """
    An attrs validator: a str (non-empty when *nonempty*; or ``None`` when *optional*).
    """

    def validate(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value.__class__ is str and (value or not nonempty):
            return  # the common case, without building the error's context
        if value is None and optional:
            return
        where = _owner(inst, owner)
        if optional and not isinstance(value, str):
            raise wrong_type(value, attribute.name, "a str or None", owner=where, label=label)
        check_str(value, attribute.name, nonempty=nonempty, owner=where, label=label, fix=fix, error=error)

    return validate


def number(
    *,
    minimum: float | None = None,
    optional: bool = False,
    owner: str | None = None,
    label: str | None = None,
    fix: str | None = None,
    error: type[WorkingCtxError] = ArgumentValueError,
) -> Validator:
    """
    An attrs validator: a finite number of at least *minimum* (or ``None`` when *optional*).
    """

    def validate(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is None and optional:
            return
        check_number(
            value, attribute.name, minimum=minimum, owner=_owner(inst, owner), label=label, fix=fix, error=error
        )

    return validate


def one_of(
    *choices: str | None,
    owner: str | None = None,
    label: str | None = None,
    error: type[WorkingCtxError] = ArgumentValueError,
) -> Validator:
    """
    An attrs validator for a ``Literal`` field: exactly one of *choices*.
    """

    accepted = frozenset(choice for choice in choices if choice is not None)

    def validate(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value.__class__ is str and value in accepted:
            return  # the common case, without building the error's context
        check_one_of(value, attribute.name, choices, owner=_owner(inst, owner), label=label, error=error)

    return validate


def aware_datetime(*, owner: str | None = None, fix: str | None = None) -> Validator:
    """
    An attrs validator: a timezone-aware ``datetime`` (a naive one is a wrong value).
    """

    def validate(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        where = _owner(inst, owner)
        if not isinstance(value, datetime):
            raise wrong_type(value, attribute.name, "a timezone-aware datetime", owner=where, fix=fix)
        if value.tzinfo is None or value.utcoffset() is None:
            raise wrong_value(value, attribute.name, "must be a timezone-aware datetime", owner=where, fix=fix)

    return validate


def matches(
    pattern: re.Pattern[str],
    rule: str,
    *,
    optional: bool = False,
    owner: str | None = None,
    fix: str | None = None,
    error: type[WorkingCtxError] = ArgumentValueError,
) -> Validator:
    """
    An attrs validator: a str *pattern* matches whole (or ``None`` when *optional*), as ``attrs.validators.matches_re``.
    """

    def validate(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is None and optional:
            return
        check_match(value, attribute.name, pattern, rule, owner=_owner(inst, owner), fix=fix, error=error)

    return validate


def instance_of(
    types: type | tuple[type, ...],
    expected: str,
    *,
    optional: bool = False,
    owner: str | None = None,
    label: str | None = None,
    fix: str | None = None,
) -> Validator:
    """
    An attrs validator: an instance of *types* (or ``None`` when *optional*), *expected* in words.
    """

    def validate(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is None and optional:
            return
        if not isinstance(value, types):
            shown = f"{expected} or None" if optional else expected
            raise wrong_type(value, attribute.name, shown, owner=_owner(inst, owner), label=label, fix=fix)

    return validate
