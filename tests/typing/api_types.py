"""
Type-checked, never executed: the public API's types as a user sees them.

``mypy --strict tests/typing`` runs in CI; a wrong annotation in workingctx
shows up here as an error.
"""

from __future__ import annotations

from typing import Any, assert_type

from workingctx import (
    ApproxTokenCounter,
    FrozenContext,
    LastNTurns,
    Message,
    MessageContextManager,
    MutationJournal,
    PrefixContext,
    RoleFilter,
    TokenBudget,
    TokenBudgetContextManager,
    ToolCall,
    ValidRequest,
    WorkingContext,
    thaw,
)
from workingctx.context import TailView
from workingctx.frozen import FrozenDict, deep_freeze
from workingctx.managers import fit
from workingctx.reducers import add_messages_to
from workingctx.scopes import surviving_indices
from workingctx.snapshot import ContextDiff, common_prefix_length
from workingctx.tokens import estimate_message_tokens


async def check_context() -> None:
    ctx = WorkingContext(prefix=PrefixContext(system_prompt="s"))
    assert_type(ctx.append(Message("user", "hi")), WorkingContext)
    assert_type(ctx.note("k", {"a": [1]}), WorkingContext)
    assert_type(ctx.messages, tuple[Message, ...])
    assert_type(ctx.scratchpad, dict[str, Any])
    assert_type(ctx.fork(), WorkingContext)
    assert_type(ctx.merge(ctx.fork(), mode="delta"), WorkingContext)
    assert_type(ctx.freeze(), FrozenContext)
    assert_type(ctx.diff(ctx.freeze()), ContextDiff)
    assert_type(await ctx.tokens(), int)
    assert_type(ctx.count_tokens(), int)
    assert_type(ctx.digest(), str)
    assert_type(await ctx.apply_locked(lambda c: c.size()), int)
    assert_type(ctx.journal, MutationJournal[Any])
    assert_type(ctx.replace_tail(ctx.messages), WorkingContext)
    assert_type(ctx.tail_view(), TailView)
    assert_type(ctx.slice(LastNTurns(2) & ~RoleFilter({"system"})), WorkingContext)
    assert_type(ctx.slice(ValidRequest(LastNTurns(2) & TokenBudget(300))), WorkingContext)
    assert_type(ctx.tail_view().prefix_messages, tuple[Message, ...])
    assert_type(surviving_indices(TokenBudget(100), ctx.tail_view()), frozenset[int])
    assert_type(TokenBudgetContextManager(1000).trim_context(ctx), WorkingContext)
    assert_type(await MessageContextManager(10).atrim_context(ctx), WorkingContext)
    assert_type(add_messages_to(ctx, Message("user", "x")), WorkingContext)


def check_values() -> None:
    call = ToolCall("c1", "f", {"a": 1})
    assert_type(call.arguments, FrozenDict)
    assert_type(call.arguments_parsed, bool)
    message = Message.assistant(tool_calls=[call])
    assert_type(message.call_ids, tuple[str, ...])
    assert_type(message.text(), str)
    assert_type(deep_freeze({"a": [1]}), dict[str, list[int]])
    assert_type(thaw([1, 2]), list[int])
    snap = WorkingContext().freeze()
    assert_type(common_prefix_length(snap, snap), int)
    assert_type(WorkingContext.from_snapshot(snap), WorkingContext)
    assert_type(estimate_message_tokens([message]), int)
    assert_type(ApproxTokenCounter().count([message]), int)
    journal: MutationJournal[dict[str, int]] = MutationJournal()
    assert_type(journal.diff(), tuple[dict[str, int], ...])


async def check_media() -> None:
    from workingctx.media import (  # noqa: PLC0415
        FileMediaStore,
        InMemoryMediaStore,
        MediaStore,
        image_size,
        resolve_media,
        store_ref,
    )
    from workingctx.messages import MediaRef  # noqa: PLC0415
    from workingctx.persistence import SQLiteMediaStore  # noqa: PLC0415
    from workingctx.tokens import image_tokens  # noqa: PLC0415

    store: MediaStore = FileMediaStore("media")
    memory: MediaStore = InMemoryMediaStore()
    sqlite: MediaStore = SQLiteMediaStore(":memory:")
    ref = store.put(b"x", "image/png", filename="x.png")
    assert_type(ref, MediaRef)
    assert_type(memory.get(ref), bytes)
    assert_type(sqlite.has(ref), bool)
    assert_type(store_ref(b"x", "image/png"), MediaRef)
    assert_type(image_size(b"x"), tuple[int, int] | None)
    message = await Message.with_image(b"x", "image/png", store, text="look", detail="low")
    assert_type(message, Message)
    assert_type(await Message.with_file("a.pdf", store), Message)
    assert_type(resolve_media([message], store), list[Message])
    assert_type(resolve_media([message], store, upload=lambda _ref, _data: "file-1"), list[Message])
    assert_type(image_tokens(10, 10, rule="anthropic", detail="high"), int)
    assert_type(ApproxTokenCounter(images="anthropic").count([message]), int)


def check_checkpoint_stores() -> None:
    from workingctx import Checkpoint, SQLiteStore  # noqa: PLC0415  # kept beside the checks that use them
    from workingctx.exceptions import HeadConflictError  # noqa: PLC0415
    from workingctx.persistence import (  # noqa: PLC0415
        CheckpointInfo,
        CheckpointStore,
        ContextInfo,
        ContextStore,
        Listing,
        PostgresStore,
        RedisStore,
    )

    checkpoint = Checkpoint.capture(WorkingContext())
    stores: list[CheckpointStore] = [
        SQLiteStore(":memory:"),
        PostgresStore("postgresql://127.0.0.1/db", schema="s"),
        RedisStore("redis://127.0.0.1:6379/0", namespace="n"),
    ]
    for store in stores:
        assert_type(store.save(checkpoint, thread="t"), str)
        assert_type(store.head("t"), str | None)
        assert_type(store.lineage(checkpoint.id), list[CheckpointInfo])
    listing = SQLiteStore(":memory:").list()
    assert_type(listing, Listing[CheckpointInfo])
    assert_type(listing.damaged, FrozenDict)
    assert_type(RedisStore("redis://127.0.0.1").list_contexts(), Listing[ContextInfo])
    contexts: list[ContextStore] = [PostgresStore("postgresql://127.0.0.1/db"), RedisStore("redis://127.0.0.1")]
    assert_type(contexts[0].load_context("run"), WorkingContext)
    conflict = HeadConflictError("lost", thread="t", expected=None, actual="a")
    assert_type(conflict.actual, str | None)


def check_validity() -> None:
    from workingctx.validity import Problem, check_messages  # noqa: PLC0415  # the public submodule

    problems = check_messages([Message("user", "hi")], provider="anthropic", allow_pending=True)
    assert_type(problems, tuple[Problem, ...])
    assert_type(problems[0].index, int | None)
    assert_type(problems[0].ids, tuple[str, ...])


def check_subagents() -> None:
    from workingctx import ToolCall  # noqa: PLC0415  # kept beside the checks that use them
    from workingctx.managers import TrimReport  # noqa: PLC0415
    from workingctx.scopes import Tagged  # noqa: PLC0415

    ctx = WorkingContext()
    assert_type(ctx.pending_calls, tuple[ToolCall, ...])
    assert_type(ctx.fork(for_call="c1"), WorkingContext)
    assert_type(ctx.parent_call_id, str | None)
    assert_type(ctx.merge(ctx.fork(for_call="c1"), mode="result", result="done"), WorkingContext)
    assert_type(fit(ctx, 1000, pin=Tagged("task")), WorkingContext)
    manager = TokenBudgetContextManager(1000, pin=Tagged("task"))
    assert_type(manager.last_trim, TrimReport | None)


def check_seams() -> None:
    """
    A scope and a counter are typed: anything else is a type error (each line
    below must be rejected; ``warn_unused_ignores`` fails the run if it is not).
    """
    from workingctx.scopes import Scope, WholeExchanges, explain  # noqa: PLC0415  # beside the checks
    from workingctx.tokens import MessageCounter, RunningCount, TiktokenCounter, counting  # noqa: PLC0415

    msgs = [Message("user", "hi")]
    scope: Scope = LastNTurns(1) & ~RoleFilter({"system"})
    assert_type(surviving_indices(scope, msgs), frozenset[int])
    surviving_indices(42, msgs)  # type: ignore[arg-type]
    surviving_indices("LastNTurns(1)", msgs)  # type: ignore[arg-type]
    WholeExchanges(42)  # type: ignore[arg-type]
    explain(None, msgs)  # type: ignore[arg-type]

    counters: list[MessageCounter] = [ApproxTokenCounter(), TiktokenCounter()]
    assert_type(counting(counters[0])(msgs[0]), int)
    assert_type(RunningCount(counters[1]).extend(msgs), int)
    TokenBudget(100, counter=counters[0])
    assert_type(WorkingContext(counter=counters[0]).count_tokens(), int)
    TokenBudget(100, counter=len)  # type: ignore[arg-type]
    TokenBudgetContextManager(1000, counter="approx")  # type: ignore[arg-type]
    explain(scope, msgs, counter=object())  # type: ignore[arg-type]


def check_argument_errors() -> None:
    """
    The evidence an argument error keeps is typed on every error.
    """
    from workingctx.exceptions import ArgumentTypeError, ArgumentValueError, ScopeError  # noqa: PLC0415

    wrong_type = ArgumentTypeError("limit must be an int", argument="limit", value="3", expected="an int")
    assert_type(wrong_type.argument, str | None)
    assert_type(wrong_type.value, object)
    assert_type(wrong_type.expected, str)
    assert_type(ArgumentValueError("limit must be 0 or more", argument="limit", value=-1).argument, str | None)
    assert_type(ScopeError("n must be 0 or more", argument="n", value=-1).value, object)
    WorkingContext(limit="3")  # type: ignore[arg-type]
