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

import importlib
import warnings
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:  # the names below still import, with a DeprecationWarning (see __getattr__)
    from workingctx.exceptions import CacheRuleError as CacheRuleError
    from workingctx.exceptions import CheckpointError as CheckpointError
    from workingctx.exceptions import FrozenPayloadError as FrozenPayloadError
    from workingctx.exceptions import HeadConflictError as HeadConflictError
    from workingctx.exceptions import InvalidMessageError as InvalidMessageError
    from workingctx.exceptions import MediaError as MediaError
    from workingctx.exceptions import MergeError as MergeError
    from workingctx.exceptions import PayloadError as PayloadError
    from workingctx.exceptions import PayloadTypeError as PayloadTypeError
    from workingctx.exceptions import PositionalScopeError as PositionalScopeError
    from workingctx.exceptions import PricingError as PricingError
    from workingctx.exceptions import ProviderError as ProviderError
    from workingctx.exceptions import ScopeError as ScopeError
    from workingctx.exceptions import SerializationError as SerializationError
    from workingctx.exceptions import StoreUnavailableError as StoreUnavailableError
    from workingctx.exceptions import WorkingCtxError as WorkingCtxError
    from workingctx.frozen import FrozenDict as FrozenDict
    from workingctx.frozen import FrozenList as FrozenList
    from workingctx.frozen import deep_freeze as deep_freeze
    from workingctx.managers import BaseContextManager as BaseContextManager
    from workingctx.managers import Summarizer as Summarizer
    from workingctx.managers import TrimReport as TrimReport
    from workingctx.messages import AnnotationBlock as AnnotationBlock
    from workingctx.messages import AnnotationRef as AnnotationRef
    from workingctx.messages import AudioBlock as AudioBlock
    from workingctx.messages import CacheBreakpoint as CacheBreakpoint
    from workingctx.messages import ContentBlock as ContentBlock
    from workingctx.messages import DataBlock as DataBlock
    from workingctx.messages import DocumentBlock as DocumentBlock
    from workingctx.messages import ErrorBlock as ErrorBlock
    from workingctx.messages import ImageBlock as ImageBlock
    from workingctx.messages import MediaRef as MediaRef
    from workingctx.messages import ProviderBlock as ProviderBlock
    from workingctx.messages import ReasoningBlock as ReasoningBlock
    from workingctx.messages import RemoteToolCallBlock as RemoteToolCallBlock
    from workingctx.messages import Role as Role
    from workingctx.messages import TextBlock as TextBlock
    from workingctx.messages import ToolCallBlock as ToolCallBlock
    from workingctx.messages import ToolResultBlock as ToolResultBlock
    from workingctx.messages import VideoBlock as VideoBlock
    from workingctx.persistence import CheckpointInfo as CheckpointInfo
    from workingctx.persistence import CheckpointStore as CheckpointStore
    from workingctx.persistence import PostgresStore as PostgresStore
    from workingctx.persistence import RedisStore as RedisStore
    from workingctx.persistence import rehydrate as rehydrate
    from workingctx.reducers import ToolResult as ToolResult
    from workingctx.reducers import add_messages_to as add_messages_to
    from workingctx.reducers import append_items as append_items
    from workingctx.reducers import remove_tool_messages as remove_tool_messages
    from workingctx.reducers import replace_messages as replace_messages
    from workingctx.reducers import replace_value as replace_value
    from workingctx.scopes import AllOf as AllOf
    from workingctx.scopes import AnyOf as AnyOf
    from workingctx.scopes import CompletedToolSequences as CompletedToolSequences
    from workingctx.scopes import ContextScope as ContextScope
    from workingctx.scopes import Not as Not
    from workingctx.scopes import PositionalScope as PositionalScope
    from workingctx.scopes import ScopeReport as ScopeReport
    from workingctx.scopes import Tagged as Tagged
    from workingctx.scopes import surviving_indices as surviving_indices
    from workingctx.snapshot import ContextDiff as ContextDiff
    from workingctx.snapshot import common_prefix_length as common_prefix_length
    from workingctx.tokens import RunningCount as RunningCount
    from workingctx.tokens import TokenCounter as TokenCounter
    from workingctx.tokens import estimate_message_tokens as estimate_message_tokens

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

# Names this module exported before the front door was narrowed, and the public
# module each lives in. They still import from here, with a DeprecationWarning,
# until the next release removes them.
_MOVED: dict[str, str] = {
    "CacheRuleError": "exceptions",
    "CheckpointError": "exceptions",
    "FrozenPayloadError": "exceptions",
    "HeadConflictError": "exceptions",
    "InvalidMessageError": "exceptions",
    "MediaError": "exceptions",
    "MergeError": "exceptions",
    "PayloadError": "exceptions",
    "PayloadTypeError": "exceptions",
    "PositionalScopeError": "exceptions",
    "PricingError": "exceptions",
    "ProviderError": "exceptions",
    "ScopeError": "exceptions",
    "SerializationError": "exceptions",
    "StoreUnavailableError": "exceptions",
    "WorkingCtxError": "exceptions",
    "FrozenDict": "frozen",
    "FrozenList": "frozen",
    "deep_freeze": "frozen",
    "BaseContextManager": "managers",
    "Summarizer": "managers",
    "TrimReport": "managers",
    "AnnotationBlock": "messages",
    "AnnotationRef": "messages",
    "AudioBlock": "messages",
    "CacheBreakpoint": "messages",
    "ContentBlock": "messages",
    "DataBlock": "messages",
    "DocumentBlock": "messages",
    "ErrorBlock": "messages",
    "ImageBlock": "messages",
    "MediaRef": "messages",
    "ProviderBlock": "messages",
    "ReasoningBlock": "messages",
    "RemoteToolCallBlock": "messages",
    "Role": "messages",
    "TextBlock": "messages",
    "ToolCallBlock": "messages",
    "ToolResultBlock": "messages",
    "VideoBlock": "messages",
    "CheckpointInfo": "persistence",
    "CheckpointStore": "persistence",
    "PostgresStore": "persistence",
    "RedisStore": "persistence",
    "rehydrate": "persistence",
    "ToolResult": "reducers",
    "add_messages_to": "reducers",
    "append_items": "reducers",
    "remove_tool_messages": "reducers",
    "replace_messages": "reducers",
    "replace_value": "reducers",
    "AllOf": "scopes",
    "AnyOf": "scopes",
    "CompletedToolSequences": "scopes",
    "ContextScope": "scopes",
    "Not": "scopes",
    "PositionalScope": "scopes",
    "ScopeReport": "scopes",
    "Tagged": "scopes",
    "surviving_indices": "scopes",
    "ContextDiff": "snapshot",
    "common_prefix_length": "snapshot",
    "RunningCount": "tokens",
    "TokenCounter": "tokens",
    "estimate_message_tokens": "tokens",
}


def __getattr__(name: str) -> object:
    """
    A name moved to a submodule, with a DeprecationWarning saying where.
    """
    module = _MOVED.get(name)
    if module is None:
        msg = f"module 'workingctx' has no attribute {name!r}"
        raise AttributeError(msg, name=name, obj=__name__)
    warnings.warn(
        f"importing {name} from workingctx is deprecated and will stop working in the next release: "
        f"use `from workingctx.{module} import {name}`",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(f"workingctx.{module}"), name)
