"""
The field checks shared by the values of a transcript: validators and
converters that refuse bad input with an error naming the field and the fix.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

import attrs

from workingctx import _checks
from workingctx.exceptions import InvalidMessageError
from workingctx.frozen import FrozenDict, freeze_json, is_json_payload

_str = _checks.text()
_opt_str = _checks.text(optional=True)
_opt_int = _checks.integer(optional=True, error=InvalidMessageError)
_bool = _checks.flag()
_nonempty_str = _checks.text(nonempty=True, fix="pass the id or name the provider gave", error=InvalidMessageError)


def _one_of(*choices: str | None) -> Callable[[object, attrs.Attribute[Any], object], None]:
    """
    A validator for a ``Literal`` field: exactly one of *choices* (a str, not a subclass).
    """
    return _checks.one_of(*choices, error=InvalidMessageError)


def _check_int(value: object, what: str) -> None:
    """
    Refuse anything but an int (a bool is not one) that ``str()`` can write.
    """
    _checks.check_int(value, what, error=InvalidMessageError)


def _check_number(value: object, what: str) -> None:
    """
    Refuse anything but a finite float or an int that ``str()`` can write.
    """
    _checks.check_number(value, what, fix="JSON has no NaN or infinity", error=InvalidMessageError)
    if isinstance(value, int):
        _check_int(value, what)


def _json_object(value: object, where: str) -> FrozenDict:
    """
    A payload field holding a JSON object, checked and deep-frozen (a frozen
    object already checked is kept as it is).
    """
    if type(value) is FrozenDict and is_json_payload(value):
        return value
    if not isinstance(value, Mapping):
        raise _checks.wrong_type(
            value,
            where,
            "a mapping (such as a dict)",
            fix=f"{where} is a JSON object: pass a dict, or json.loads() a JSON string first",
        )
    return cast("FrozenDict", freeze_json(value, where))


def _arguments(value: object) -> FrozenDict:
    return _json_object(value, "arguments")


def _args(value: object) -> FrozenDict:
    return _json_object(value, "args")


def _metadata(value: object) -> FrozenDict:
    return _json_object(value, "metadata")


def _error_data(value: object) -> FrozenDict | None:
    return None if value is None else _json_object(value, "data")


def _json_output(value: object) -> Any:
    return freeze_json(value, "output")


def _provider_data(value: object) -> FrozenDict:
    if not isinstance(value, Mapping):
        raise _checks.wrong_type(
            value,
            "provider_data",
            "a mapping",
            fix="key it by provider, such as {'anthropic': {'citations': [...]}}",
        )
    for key in value:
        if not isinstance(key, str):
            raise _checks.wrong_type(key, "provider_data", "provider names (str)", label="provider_data keys")
    return _json_object(value, "provider_data")


def _provider_block_data(value: object) -> FrozenDict:
    return _json_object(value, "data")


def _as_tuple(value: object, kind: type[Any] | tuple[type[Any], ...], what: str) -> tuple[Any, ...]:
    if value.__class__ is tuple and all(isinstance(item, kind) for item in value):
        return value  # a tuple of the right items, as most are
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise _checks.wrong_type(value, what, "a sequence")
    return _checks.check_items(value, what, kind, f"a {_kind_name(kind)}")


def _kind_name(kind: type[Any] | tuple[type[Any], ...]) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return kind.__name__


def _quiet_repr(self: Any) -> str:
    """
    The attrs repr, leaving out keyword-only fields at their default (caches,
    provider data, signatures), so everyday values print as they always did.
    """
    parts = []
    for field in attrs.fields(type(self)):
        value = getattr(self, field.name)
        if field.kw_only:
            factory = getattr(field.default, "factory", None)
            default = factory() if factory is not None else field.default
            if value == default:
                continue
        parts.append(f"{field.name}={value!r}")
    return f"{type(self).__name__}({', '.join(parts)})"
