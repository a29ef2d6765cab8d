"""
The scope protocols, the helper that answers for either kind, and the combinators.

Every combinator works in index space: it asks each inner scope for the set of
indices it keeps, then intersects, unions or complements those sets. A
positional scope therefore keeps its meaning at any nesting depth.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeAlias, TypeGuard, runtime_checkable

import attrs

from workingctx import _checks
from workingctx.exceptions import PositionalScopeError, ScopeError

if TYPE_CHECKING:
    from workingctx.messages import Message

__all__ = [
    "MAX_SCOPE_DEPTH",
    "AllOf",
    "AnyOf",
    "ContextScope",
    "Not",
    "PositionalScope",
    "Scope",
    "is_positional",
    "surviving_indices",
]


@runtime_checkable
class ContextScope(Protocol):
    """
    A predicate scope: decides for one message at a time.

    Any object with a ``matches(message, index) -> bool`` method is a scope; it
    works with :func:`surviving_indices`, ``WorkingContext.slice`` and every
    combinator, like the built-ins do.

    >>> from workingctx import Message, RoleFilter
    >>> isinstance(RoleFilter({"user"}), ContextScope)
    True
    >>> RoleFilter({"user"}).matches(Message("user", "hi"), 0)
    True
    """

    def matches(self, message: Message, index: int) -> bool:
        """
        Whether the message at *index* is kept.
        """
        ...


@runtime_checkable
class PositionalScope(Protocol):
    """
    A positional scope: decides over the whole message list at once.

    "The last two turns" or "the newest messages that fit 4,000 tokens" is a
    property of the list, not of one message, so such a scope implements
    ``surviving_indices(messages)`` and returns the indices it keeps. Its
    ``matches()``, if it has one, raises :class:`~workingctx.exceptions.PositionalScopeError`.
    The combinators implement this hook too, so they compose positional scopes
    correctly at any depth.

    >>> from workingctx import LastNTurns, Message
    >>> isinstance(LastNTurns(1), PositionalScope)
    True
    >>> sorted(LastNTurns(1).surviving_indices([Message("user", "q0"), Message("user", "q1")]))
    [1]
    """

    def surviving_indices(self, messages: Sequence[Message]) -> frozenset[int]:
        """
        The indices of *messages* this scope keeps.
        """
        ...


Scope: TypeAlias = ContextScope | PositionalScope
"""
Any scope: a :class:`ContextScope` (a predicate) or a :class:`PositionalScope`.
Every function and combinator that takes a scope is annotated with it.
"""


_describe = _checks.described


def _not_a_scope(value: object, where: str, argument: str = "scope") -> TypeError:
    fix = (
        "a scope has a matches(message, index) method (a predicate) or a surviving_indices(messages) "
        "method (positional), such as LastNTurns(2) or RoleFilter({'user'})"
    )
    return _checks.wrong_type(value, argument, "a scope", label=where, verb="needs", fix=fix)


def _is_scope(value: object) -> TypeGuard[Scope]:
    return isinstance(value, _ScopeOps | PositionalScope | ContextScope)


def is_positional(scope: Scope) -> bool:
    """
    Whether *scope* needs the whole list to decide (so its ``matches()`` cannot answer).

    A built-in knows; any other object is positional when it has a
    ``surviving_indices`` hook.
    """
    if isinstance(scope, _ScopeOps):
        return scope.positional
    return isinstance(scope, PositionalScope)


def surviving_indices(scope: Scope, messages: Sequence[Message]) -> frozenset[int]:
    """
    The indices of *messages* that *scope* keeps, whatever kind of scope it is.

    A positional scope answers through its ``surviving_indices`` hook; a
    predicate scope is asked ``matches(message, index)`` for each message. Use
    this, not ``scope.matches``, whenever you filter a message list by hand.

    Args:
        scope: A :class:`ContextScope` or a :class:`PositionalScope`.
        messages: The messages to decide over (a list, a tuple, a context's ``messages``).

    Returns:
        The kept indices, each in ``range(len(messages))``.

    Raises:
        TypeError: *scope* is neither kind of scope.
        ScopeError: A scope of your own returned something other than indices
            of *messages*.

    >>> from workingctx import LastNTurns, Message, RoleFilter
    >>> msgs = [Message("system", "rules"), Message("user", "q0"), Message("assistant", "a0"),
    ...         Message("user", "q1"), Message("assistant", "a1")]
    >>> sorted(surviving_indices(LastNTurns(1), msgs))
    [0, 3, 4]
    >>> sorted(surviving_indices(LastNTurns(1) & ~RoleFilter({"system"}), msgs))
    [3, 4]
    """
    if isinstance(scope, _ScopeOps):
        return scope._index_set(messages)  # noqa: SLF001  # the built-in scopes' own hook, shared by their base
    hook = getattr(scope, "surviving_indices", None)
    if callable(hook):
        return _checked(scope, hook(messages), len(messages))
    matches = getattr(scope, "matches", None)
    if callable(matches):
        return frozenset(i for i, message in enumerate(messages) if matches(message, i))
    raise _not_a_scope(scope, "surviving_indices()")


def _checked(scope: object, result: object, size: int) -> frozenset[int]:
    """
    The answer of a user's positional hook, checked to be indices of the list.
    """
    if not isinstance(result, Iterable) or isinstance(result, str | bytes):
        msg = (
            f"{scope!r}.surviving_indices() returned {_describe(result)}; "
            "it must return the kept indices, such as a frozenset of ints"
        )
        raise ScopeError(msg)
    kept = frozenset(result)
    for index in kept:
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < size:
            msg = (
                f"{scope!r}.surviving_indices() returned {index!r}, which is not an index of the "
                f"{size} messages it was given; return indices in range({size})"
            )
            raise ScopeError(msg)
    return kept


def _tuple_repr(items: tuple[object, ...]) -> str:
    if len(items) == 1:
        return f"({items[0]!r},)"
    return f"({', '.join(map(repr, items))})"


def _precedence(scope: object) -> int:
    if isinstance(scope, AnyOf) and len(scope.scopes) > 1:
        return 1
    if isinstance(scope, AllOf) and len(scope.scopes) > 1:
        return 2
    return 3


def _operand(scope: object, above: int) -> str:
    text = str(scope)
    return f"({text})" if _precedence(scope) < above else text


class _ScopeOps:
    """
    The operators every built-in scope shares: ``&``, ``|`` and ``~``.

    ``a & b`` is ``AllOf((a, b))``, ``a | b`` is ``AnyOf((a, b))`` and ``~a``
    is ``Not(a)``; chains flatten (``a & b & c`` is one ``AllOf`` of three).
    ``str()`` prints a scope in that operator form, ``repr()`` as constructor
    calls.
    """

    __slots__ = ()

    positional: ClassVar[bool] = False
    """Whether the scope decides over the whole list (so ``matches()`` raises)."""

    def _index_set(self, messages: Sequence[Message]) -> frozenset[int]:
        """
        The kept indices; predicate built-ins filter by ``matches``.
        """
        matches = self.matches
        return frozenset(i for i, message in enumerate(messages) if matches(message, i))

    def matches(self, message: Message, index: int) -> bool:  # noqa: ARG002  # the protocol's signature
        """
        Whether the message at *index* is kept; predicate built-ins answer, positional ones raise.

        Raises:
            PositionalScopeError: The scope is positional; use ``surviving_indices(scope, messages)``.
        """
        raise self._refuse_matches()

    def _refuse_matches(self) -> PositionalScopeError:
        msg = (
            f"{self!r} is positional: whether a message is kept depends on the whole list, "
            "so matches(message, index) cannot answer for one message; "
            "use surviving_indices(scope, messages) or ctx.slice(scope) instead"
        )
        return PositionalScopeError(msg)

    def __and__(self, other: object) -> AllOf:
        if not _is_scope(other):
            raise _not_a_scope(other, f"{self!r} & ...")
        return AllOf((*_flat(self, AllOf), *_flat(other, AllOf)))

    def __rand__(self, other: object) -> AllOf:
        if not _is_scope(other):
            raise _not_a_scope(other, f"... & {self!r}")
        return AllOf((*_flat(other, AllOf), *_flat(self, AllOf)))

    def __or__(self, other: object) -> AnyOf:
        if not _is_scope(other):
            raise _not_a_scope(other, f"{self!r} | ...")
        return AnyOf((*_flat(self, AnyOf), *_flat(other, AnyOf)))

    def __ror__(self, other: object) -> AnyOf:
        if not _is_scope(other):
            raise _not_a_scope(other, f"... | {self!r}")
        return AnyOf((*_flat(other, AnyOf), *_flat(self, AnyOf)))

    def __invert__(self) -> Not:
        return Not(self)


def _flat(scope: Scope, kind: type[AllOf | AnyOf]) -> tuple[Scope, ...]:
    if isinstance(scope, kind) and type(scope) is kind:
        return scope.scopes
    return (scope,)


def _scope_tuple(value: Iterable[Scope]) -> tuple[Scope, ...]:
    plain = value.__class__ is tuple or value.__class__ is list  # what & and | pass: no protocol checks
    if not plain and (_is_scope(value) or isinstance(value, str | bytes) or not isinstance(value, Iterable)):
        raise _checks.wrong_type(
            value,
            "scopes",
            "a sequence of scopes",
            label="",
            verb="expected",
            fix="pass a tuple such as AllOf((LastNTurns(2), RoleFilter({'user'}))), or write a & b",
        )
    items = tuple(value)
    for position, item in enumerate(items):
        if not _is_scope(item):
            raise _not_a_scope(item, f"scopes[{position}]", f"scopes[{position}]")
    return items


MAX_SCOPE_DEPTH = 100
"""How many levels combinators (``&``, ``|``, ``~``, ``WholeExchanges``) may nest."""


def nesting(scope: object) -> int:
    """
    How many levels of combinators a scope is made of (a leaf is 1).
    """
    depth = getattr(scope, "_depth", 1)
    return depth if type(depth) is int else 1


def check_nesting(scope: object, inner: Iterable[object]) -> int:
    """
    The nesting depth of a combinator over *inner* scopes, refused beyond
    :data:`MAX_SCOPE_DEPTH` (evaluating, printing, comparing or copying a
    deeper tree would exhaust Python's recursion limit).

    Raises:
        ScopeError: The combinator would nest too deep.
    """
    depth = 1 + max((nesting(child) for child in inner), default=0)
    if depth > MAX_SCOPE_DEPTH:
        msg = (
            f"{type(scope).__name__} would nest scopes {depth} levels deep; at most {MAX_SCOPE_DEPTH} are allowed. "
            "Combine many scopes at one level instead: AllOf([a, b, c, ...]) or AnyOf([...]), "
            "or a & b & c (which flattens), rather than alternating & and | one scope at a time"
        )
        raise ScopeError(msg)
    return depth


def scope_field(where: str | None = None, *, optional: bool = False) -> Callable[[Any, Any, Any], None]:
    """
    An attrs validator: a scope (or None when *optional*); the error names
    *where* (``"Not()"``), or ``Owner(field=...)`` when *where* is None.
    """

    def validate(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if (value is None and optional) or _is_scope(value):
            return
        shown = f"{type(inst).__name__}({attribute.name}=...)" if where is None else where
        raise _not_a_scope(value, shown, attribute.name)

    return validate


_one_scope = scope_field("Not()")


class _Combination(_ScopeOps):
    """
    What AllOf and AnyOf share: positional when any inner scope is.
    """

    __slots__ = ()
    scopes: tuple[Scope, ...]

    @property
    def positional(self) -> bool:  # type: ignore[override]  # computed from the inner scopes
        """
        True when any inner scope is positional.
        """
        return any(is_positional(scope) for scope in self.scopes)


@attrs.frozen(cache_hash=True, repr=False)
class AllOf(_Combination):
    """
    Keeps the messages every inner scope keeps: the intersection of their indices.

    ``AllOf(())`` keeps everything. Positional inner scopes keep their meaning:
    the window of ``LastNTurns(2)`` is decided on the whole list, then intersected.

    Args:
        scopes: Any iterable of scopes (stored as a tuple).

    Raises:
        TypeError: *scopes* is not a sequence, or an item is not a scope.
        ScopeError: The scopes would nest more than :data:`MAX_SCOPE_DEPTH` levels.

    >>> from workingctx import LastNTurns, Message, RoleFilter
    >>> msgs = [Message("user", "q0"), Message("assistant", "a0"), Message("user", "q1")]
    >>> window_users = AllOf((LastNTurns(2), RoleFilter({"user"})))
    >>> [msgs[i].content for i in sorted(surviving_indices(window_users, msgs))]
    ['q0', 'q1']
    >>> window_users == (LastNTurns(2) & RoleFilter({"user"}))
    True
    """

    scopes: tuple[Scope, ...] = attrs.field(converter=_scope_tuple)
    _depth: int = attrs.field(init=False, default=1, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_depth", check_nesting(self, self.scopes))

    def matches(self, message: Message, index: int) -> bool:
        """
        Whether every inner scope keeps the message; only for trees of predicate scopes.

        Raises:
            PositionalScopeError: An inner scope is positional.
        """
        if self.positional:
            raise self._refuse_matches()
        return all(scope.matches(message, index) for scope in self.scopes)  # type: ignore[union-attr]  # only when none is positional

    def surviving_indices(self, messages: Sequence[Message]) -> frozenset[int]:
        """
        The intersection of the inner scopes' kept indices.
        """
        kept = frozenset(range(len(messages)))
        for scope in self.scopes:
            if not kept:
                break
            kept &= surviving_indices(scope, messages)
        return kept

    _index_set = surviving_indices

    def __repr__(self) -> str:
        return f"AllOf({_tuple_repr(self.scopes)})"

    def __str__(self) -> str:
        if len(self.scopes) < 2:
            return repr(self)
        return " & ".join(_operand(scope, 3) for scope in self.scopes)


@attrs.frozen(cache_hash=True, repr=False)
class AnyOf(_Combination):
    """
    Keeps the messages any inner scope keeps: the union of their indices.

    ``AnyOf(())`` keeps nothing.

    Args:
        scopes: Any iterable of scopes (stored as a tuple).

    Raises:
        TypeError: *scopes* is not a sequence, or an item is not a scope.
        ScopeError: The scopes would nest more than :data:`MAX_SCOPE_DEPTH` levels.

    >>> from workingctx import Message, RoleFilter, Since
    >>> msgs = [Message("system", "rules"), Message("user", "q0"), Message("user", "q1")]
    >>> sorted(surviving_indices(RoleFilter({"system"}) | Since(2), msgs))
    [0, 2]
    """

    scopes: tuple[Scope, ...] = attrs.field(converter=_scope_tuple)
    _depth: int = attrs.field(init=False, default=1, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_depth", check_nesting(self, self.scopes))

    def matches(self, message: Message, index: int) -> bool:
        """
        Whether any inner scope keeps the message; only for trees of predicate scopes.

        Raises:
            PositionalScopeError: An inner scope is positional.
        """
        if self.positional:
            raise self._refuse_matches()
        return any(scope.matches(message, index) for scope in self.scopes)  # type: ignore[union-attr]  # only when none is positional

    def surviving_indices(self, messages: Sequence[Message]) -> frozenset[int]:
        """
        The union of the inner scopes' kept indices.
        """
        kept: frozenset[int] = frozenset()
        for scope in self.scopes:
            kept |= surviving_indices(scope, messages)
        return kept

    _index_set = surviving_indices

    def __repr__(self) -> str:
        return f"AnyOf({_tuple_repr(self.scopes)})"

    def __str__(self) -> str:
        if len(self.scopes) < 2:
            return repr(self)
        return " | ".join(_operand(scope, 2) for scope in self.scopes)


@attrs.frozen(cache_hash=True, repr=False)
class Not(_ScopeOps):
    """
    Keeps the messages the inner scope drops: the complement against ``range(len(messages))``.

    ``Not(LastNTurns(2))`` keeps exactly what the window leaves out.

    Args:
        scope: Any scope.

    Raises:
        TypeError: *scope* is not a scope.
        ScopeError: The scopes would nest more than :data:`MAX_SCOPE_DEPTH` levels.

    >>> from workingctx import LastNTurns, Message
    >>> msgs = [Message("user", "q0"), Message("assistant", "a0"), Message("user", "q1")]
    >>> sorted(surviving_indices(Not(LastNTurns(1)), msgs))
    [0, 1]
    >>> str(~LastNTurns(1))
    '~LastNTurns(1)'
    """

    scope: Scope = attrs.field(validator=_one_scope)
    _depth: int = attrs.field(init=False, default=1, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_depth", check_nesting(self, (self.scope,)))

    @property
    def positional(self) -> bool:  # type: ignore[override]  # computed from the inner scope
        """
        True when the inner scope is positional.
        """
        return is_positional(self.scope)

    def matches(self, message: Message, index: int) -> bool:
        """
        Whether the inner scope drops the message; only for a predicate inner scope.

        Raises:
            PositionalScopeError: The inner scope is positional.
        """
        if self.positional:
            raise self._refuse_matches()
        return not self.scope.matches(message, index)  # type: ignore[union-attr]  # only a predicate inner scope

    def surviving_indices(self, messages: Sequence[Message]) -> frozenset[int]:
        """
        Every index the inner scope does not keep.
        """
        return frozenset(range(len(messages))) - surviving_indices(self.scope, messages)

    _index_set = surviving_indices

    def __invert__(self) -> Any:
        """
        ``~Not(s)`` is ``s`` itself (double negation).
        """
        return self.scope

    def __repr__(self) -> str:
        return f"Not({self.scope!r})"

    def __str__(self) -> str:
        return f"~{_operand(self.scope, 3)}"
