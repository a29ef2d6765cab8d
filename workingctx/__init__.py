"""
workingctx: an immutable working-context algebra for LLM agents.

The names here are the ones most programs need: the context, its values, the
common scopes, managers, counters and stores. The rest lives in public
submodules, each named for its concept: content blocks and references in
:mod:`workingctx.messages`, every scope and combinator in
:mod:`workingctx.scopes`, reducers in :mod:`workingctx.reducers`, errors in
:mod:`workingctx.exceptions`, checkpoints and stores in
:mod:`workingctx.persistence`, counters in :mod:`workingctx.tokens`.

>>> from workingctx import LastNTurns, Message, WorkingContext
>>> from workingctx.messages import TextBlock
>>> ctx = WorkingContext().append(Message("user", (TextBlock("hi"),)))
>>> ctx.slice(LastNTurns(1)).size()
1
"""

from __future__ import annotations

from workingctx._version import __version__
from workingctx.context import WorkingContext
from workingctx.frozen import thaw
from workingctx.journal import MutationJournal
from workingctx.managers import MessageContextManager, SummaryContextManager, TokenBudgetContextManager
from workingctx.messages import Message, ToolCall, Usage
from workingctx.persistence import Checkpoint, InMemoryStore, SQLiteStore
from workingctx.prefix import PrefixContext
from workingctx.reducers import add_messages
from workingctx.scopes import LastNTurns, RoleFilter, Since, TokenBudget, ValidRequest, WholeExchanges, explain
from workingctx.snapshot import FrozenContext
from workingctx.tokens import ApproxTokenCounter, TiktokenCounter

__all__ = [
    "ApproxTokenCounter",
    "Checkpoint",
    "FrozenContext",
    "InMemoryStore",
    "LastNTurns",
    "Message",
    "MessageContextManager",
    "MutationJournal",
    "PrefixContext",
    "RoleFilter",
    "SQLiteStore",
    "Since",
    "SummaryContextManager",
    "TiktokenCounter",
    "TokenBudget",
    "TokenBudgetContextManager",
    "ToolCall",
    "Usage",
    "ValidRequest",
    "WholeExchanges",
    "WorkingContext",
    "__version__",
    "add_messages",
    "explain",
    "thaw",
]
