"""
The built-in leaf scopes: ``LastNTurns``, ``RoleFilter``, ``Tagged`` and ``Since``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from workingctx import _checks
from workingctx.exceptions import ScopeError
from workingctx.messages import ROLES
from workingctx.scopes._algebra import _ScopeOps
from workingctx.scopes._exchanges import starts_turn

if TYPE_CHECKING:
    from collections.abc import Sequence

    from workingctx.messages import Message

__all__ = ["LastNTurns", "RoleFilter", "Since", "Tagged"]


def _count(what: str, fix: str) -> Any:
    return _checks.count(owner=what, fix=fix, error=ScopeError)


@attrs.frozen(cache_hash=True, repr=False)
class LastNTurns(_ScopeOps):
    """
    Keeps the last *n* turns, plus every system message. Positional.

    A turn starts at a user message and runs up to the next one. The messages
    before the first user message (a greeting, say) belong to the first turn,
    so when the list holds *n* turns or fewer, everything is kept.
    ``LastNTurns(0)`` keeps only the system messages. A user message that
    carries tool results answers a call and does not start a turn.

    Args:
        n: How many turns to keep, 0 or more.

    Raises:
        TypeError: *n* is not an int.
        ScopeError: *n* is negative.

    >>> from workingctx import Message
    >>> msgs = [Message("system", "House rules.")]
    >>> for i in range(3):
    ...     msgs += [Message("user", f"q{i}"), Message("assistant", f"a{i}")]
    >>> from workingctx.scopes import surviving_indices
    >>> [msgs[i].content for i in sorted(surviving_indices(LastNTurns(1), msgs))]
    ['House rules.', 'q2', 'a2']
    """

    positional: ClassVar[bool] = True

    n: int = attrs.field(validator=_count("LastNTurns(n)", "use LastNTurns(0) to keep only the system messages"))

    def matches(self, message: Message, index: int) -> bool:  # noqa: ARG002  # the protocol's signature
        """
        Always raises: a window is a property of the whole list.

        Raises:
            PositionalScopeError: Always; use ``surviving_indices(scope, messages)``.
        """
        raise self._refuse_matches()

    def surviving_indices(self, messages: Sequence[Message]) -> frozenset[int]:
        """
        The indices of every system message and of the last *n* turns.
        """
        size = len(messages)
        cut = self._window_start(messages)
        kept = [i for i in range(cut) if messages[i].role == "system"]
        kept.extend(range(cut, size))
        return frozenset(kept)

    _index_set = surviving_indices

    def _window_start(self, messages: Sequence[Message]) -> int:
        if self.n == 0:
            return len(messages)
        seen = 0
        for i in range(len(messages) - 1, -1, -1):
            if starts_turn(messages[i]):
                seen += 1
                if seen == self.n:
                    # The opening messages belong to the first turn: keep them
                    # when the window reaches back to it.
                    return i if any(starts_turn(messages[j]) for j in range(i - 1, -1, -1)) else 0
        return 0

    def __repr__(self) -> str:
        return f"LastNTurns({self.n!r})"


def _roles(given: object) -> frozenset[str]:
    value = (given,) if isinstance(given, str) else given
    if not isinstance(value, Iterable):
        raise _checks.wrong_type(
            value,
            "roles",
            "roles",
            label="RoleFilter",
            verb="needs",
            fix="pass a set such as RoleFilter({'user', 'assistant'})",
        )
    roles = frozenset(value)
    unknown = sorted(repr(role) for role in roles if role not in ROLES)
    if unknown:
        msg = (
            f"RoleFilter got unknown role(s) {', '.join(unknown)}; a role is one of "
            "'system', 'user', 'assistant' or 'tool' (exact, lower case)"
        )
        raise ScopeError(msg, argument="roles", value=given)
    return roles


@attrs.frozen(cache_hash=True, repr=False)
class RoleFilter(_ScopeOps):
    """
    Keeps the messages whose role is one of *roles*.

    Args:
        roles: Any iterable of roles (stored as a frozenset); a single role
            string is accepted as one role.

    Raises:
        TypeError: *roles* is not iterable.
        ScopeError: A role is not ``"system"``, ``"user"``, ``"assistant"`` or ``"tool"``.

    >>> from workingctx import Message
    >>> RoleFilter(["user", "assistant"])
    RoleFilter({'assistant', 'user'})
    >>> RoleFilter({"tool"}).matches(Message("tool", "42", tool_call_id="c1"), 3)
    True
    """

    roles: frozenset[str] = attrs.field(converter=_roles)

    def matches(self, message: Message, index: int) -> bool:  # noqa: ARG002  # the protocol's signature
        """
        Whether the message's role is one of the roles.
        """
        return message.role in self.roles

    def _index_set(self, messages: Sequence[Message]) -> frozenset[int]:
        roles = self.roles
        return frozenset(i for i, message in enumerate(messages) if message.role in roles)

    def __repr__(self) -> str:
        inner = ", ".join(repr(role) for role in sorted(self.roles))
        return f"RoleFilter({{{inner}}})" if inner else "RoleFilter(frozenset())"


def _tag(_inst: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str):
        raise _checks.wrong_type(value, "tag", "the name to match as a str", label="Tagged(tag)", verb="needs")


@attrs.frozen(cache_hash=True, repr=False)
class Tagged(_ScopeOps):
    """
    Keeps the messages whose ``name`` equals *tag*.

    Args:
        tag: The name to match, such as a tool's name or a speaker's.

    Raises:
        TypeError: *tag* is not a str.

    >>> from workingctx import Message
    >>> Tagged("lookup").matches(Message("tool", "cert expired", name="lookup"), 0)
    True
    """

    tag: str = attrs.field(validator=_tag)

    def matches(self, message: Message, index: int) -> bool:  # noqa: ARG002  # the protocol's signature
        """
        Whether the message's name equals the tag.
        """
        return message.name == self.tag

    def _index_set(self, messages: Sequence[Message]) -> frozenset[int]:
        tag = self.tag
        return frozenset(i for i, message in enumerate(messages) if message.name == tag)

    def __repr__(self) -> str:
        return f"Tagged({self.tag!r})"


@attrs.frozen(cache_hash=True, repr=False)
class Since(_ScopeOps):
    """
    Keeps the messages at *index* and after.

    Args:
        index: The first index kept, 0 or more; past the end keeps nothing.

    Raises:
        TypeError: *index* is not an int.
        ScopeError: *index* is negative.

    >>> from workingctx import Message
    >>> from workingctx.scopes import surviving_indices
    >>> msgs = [Message("user", "q0"), Message("assistant", "a0"), Message("user", "q1")]
    >>> sorted(surviving_indices(Since(1), msgs))
    [1, 2]
    """

    index: int = attrs.field(
        validator=_count("Since(index)", "count from the start of the tail, as len(ctx.messages) does")
    )

    def matches(self, message: Message, index: int) -> bool:  # noqa: ARG002  # the protocol's signature
        """
        Whether *index* is at or after the scope's index.
        """
        return index >= self.index

    def _index_set(self, messages: Sequence[Message]) -> frozenset[int]:
        return frozenset(range(self.index, len(messages)))

    def __repr__(self) -> str:
        return f"Since({self.index!r})"
