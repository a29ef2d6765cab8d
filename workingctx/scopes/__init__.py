"""
Scopes: which messages of a transcript to keep.

A scope is either a *predicate* (``matches(message, index) -> bool``, decided
one message at a time) or *positional* (``surviving_indices(messages)``,
decided over the whole list, such as "the last two turns"). The combinators
``AllOf``, ``AnyOf`` and ``Not`` (and the operators ``&``, ``|``, ``~``) work
on the sets of kept indices, so positional scopes keep their meaning at any
depth. :func:`surviving_indices` answers for either kind, and
``WorkingContext.slice(scope)`` builds a context from its answer.

>>> from workingctx import Message
>>> from workingctx.scopes import LastNTurns, RoleFilter, surviving_indices
>>> msgs = [Message("system", "House rules.")]
>>> for i in range(3):
...     msgs += [Message("user", f"q{i}"), Message("assistant", f"a{i}")]
>>> scope = LastNTurns(2) & ~RoleFilter({"system"})
>>> print(scope)
LastNTurns(2) & ~RoleFilter({'system'})
>>> [msgs[i].content for i in sorted(surviving_indices(scope, msgs))]
['q1', 'a1', 'q2', 'a2']
"""

from workingctx.scopes._algebra import (
    MAX_SCOPE_DEPTH,
    AllOf,
    AnyOf,
    ContextScope,
    Not,
    PositionalScope,
    Scope,
    surviving_indices,
)
from workingctx.scopes._budget import TokenBudget
from workingctx.scopes._builtin import LastNTurns, Newest, RoleFilter, Since, Tagged
from workingctx.scopes._explain import ScopeReport, explain
from workingctx.scopes._tools import CompletedToolSequences, PendingCalls, ValidRequest, WholeExchanges

__all__ = [
    "MAX_SCOPE_DEPTH",
    "AllOf",
    "AnyOf",
    "CompletedToolSequences",
    "ContextScope",
    "LastNTurns",
    "Newest",
    "Not",
    "PendingCalls",
    "PositionalScope",
    "RoleFilter",
    "Scope",
    "ScopeReport",
    "Since",
    "Tagged",
    "TokenBudget",
    "ValidRequest",
    "WholeExchanges",
    "explain",
    "surviving_indices",
]

# Every class and function above is defined in a private module: say where users
# import it from, so reprs, docs and pickles name ``workingctx.scopes`` and a
# stored scope still loads after the private modules move.
for _name in __all__:
    _value = globals()[_name]
    if getattr(_value, "__module__", "").startswith(f"{__name__}._"):
        _value.__module__ = __name__
del _name, _value
