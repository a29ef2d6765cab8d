"""
The public API: a small front door, public submodules for the rest, every
public class named by the module users import it from, and pickles that name
public modules only (and still load when written by an earlier version).
"""

from __future__ import annotations

import importlib
import pickle
import pickletools
import pkgutil
import re
import threading
import warnings
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import workingctx
from tests.strategies import (
    annotation_refs,
    blocks,
    media_refs,
    messages,
    prefixes,
    scope_trees,
    tool_calls,
    usages,
    working_contexts,
)
from workingctx import (
    ApproxTokenCounter,
    Checkpoint,
    LastNTurns,
    Message,
    MutationJournal,
    PrefixContext,
    RoleFilter,
    Since,
    TiktokenCounter,
    TokenBudget,
    ToolCall,
    Usage,
    WholeExchanges,
    WorkingContext,
    cache,
    explain,
    history,
    managers,
    pricing,
    validity,
)
from workingctx.exceptions import CheckpointError
from workingctx.frozen import FrozenDict, FrozenList, deep_freeze
from workingctx.messages import (
    AnnotationBlock,
    AnnotationRef,
    AudioBlock,
    CacheBreakpoint,
    DataBlock,
    DocumentBlock,
    ErrorBlock,
    ImageBlock,
    MediaRef,
    ProviderBlock,
    ReasoningBlock,
    RemoteToolCallBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)
from workingctx.persistence import CheckpointInfo, ContextInfo, Listing
from workingctx.reducers import ToolResult
from workingctx.scopes import AllOf, AnyOf, CompletedToolSequences, Newest, Not, PendingCalls, Tagged, ValidRequest
from workingctx.serialization import to_json
from workingctx.tokens import RunningCount


def _public_modules() -> list[str]:
    names = [info.name for info in pkgutil.walk_packages(workingctx.__path__, "workingctx.")]
    return ["workingctx", *(name for name in names if not any(part.startswith("_") for part in name.split(".")))]


PUBLIC_MODULES = _public_modules()


def _public_classes() -> dict[type, list[str]]:
    """Every class a public module exports, with the modules exporting it."""
    classes: dict[type, list[str]] = {}
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        for attr in module.__all__:
            value = getattr(module, attr)
            if isinstance(value, type) and value.__module__.startswith("workingctx"):
                classes.setdefault(value, []).append(name)
    return classes


PUBLIC_CLASSES = _public_classes()


def _is_public(module: str) -> bool:
    return module in PUBLIC_MODULES


# -- the front door -----------------------------------------------------------------


class TestFrontDoor:
    def test_about_twenty_five_names(self):
        """
        The top level names what most programs need first, sorted, and nothing else.
        """
        assert len(workingctx.__all__) <= 25
        assert sorted(workingctx.__all__) == workingctx.__all__
        for name in ("WorkingContext", "Message", "ToolCall", "PrefixContext", "FrozenContext", "LastNTurns"):
            assert name in workingctx.__all__

    def test_every_top_level_name_imports_without_a_warning(self):
        """
        The names in ``__all__`` are real attributes: reading them warns about nothing.
        """
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for name in workingctx.__all__:
                assert getattr(workingctx, name) is not None

    @pytest.mark.parametrize(
        ("module", "names"),
        [
            ("workingctx.messages", ["TextBlock", "ImageBlock", "ToolResultBlock", "MediaRef", "ContentBlock"]),
            ("workingctx.reducers", ["add_messages", "replace_messages", "ToolResult"]),
            ("workingctx.exceptions", ["WorkingCtxError", "MergeError", "CheckpointError"]),
            ("workingctx.scopes", ["AllOf", "Not", "LastNTurns", "surviving_indices", "explain"]),
            ("workingctx.persistence", ["Checkpoint", "SQLiteStore", "PostgresStore", "rehydrate"]),
        ],
    )
    def test_public_submodules_hold_the_rest(self, module, names):
        """
        Content blocks, reducers, errors, scopes and stores each have one public module.
        """
        exported = importlib.import_module(module).__all__
        assert set(names) <= set(exported)


# -- top-level names ------------------------------------------------------------------


class TestTopLevelNames:
    @pytest.mark.parametrize("name", ["TextBlock", "MergeError", "AllOf", "rehydrate", "deep_freeze"])
    def test_a_name_of_a_submodule_is_not_a_top_level_name(self, name):
        """
        A name that lives in a submodule is imported from there: the top level
        does not know it, and says so by name.
        """
        assert name not in workingctx.__all__
        assert not hasattr(workingctx, name)
        with pytest.raises(ImportError, match=name):
            exec(f"from workingctx import {name}", {})  # noqa: S102

    def test_an_unknown_name_is_an_attribute_error(self):
        """
        A name that never existed is refused as before, naming it.
        """
        with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
            workingctx.NoSuchThing  # noqa: B018
        with pytest.raises(ImportError, match="NoSuchThing"):
            exec("from workingctx import NoSuchThing", {})  # noqa: S102

    def test_submodules_import_as_before(self):
        """
        ``from workingctx import history`` (a submodule, not a moved name) does not warn.
        """
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            exec("from workingctx import history, scopes, validity", {})  # noqa: S102


# -- module paths -----------------------------------------------------------------------


class TestModulePaths:
    @pytest.mark.parametrize("cls", sorted(PUBLIC_CLASSES, key=lambda c: f"{c.__module__}.{c.__qualname__}"), ids=str)
    def test_a_public_class_names_a_public_module_that_exports_it(self, cls):
        """
        ``__module__`` is a public module (no private part) holding the class under its
        name, so reprs, docs and pickles name the import path users know.
        """
        assert _is_public(cls.__module__), cls.__module__
        module = importlib.import_module(cls.__module__)
        assert getattr(module, cls.__qualname__) is cls
        assert cls.__qualname__ in module.__all__

    def test_scope_functions_name_their_public_module(self):
        """
        The scope functions say ``workingctx.scopes`` too.
        """
        from workingctx.scopes import surviving_indices  # noqa: PLC0415

        assert "workingctx.scopes" == explain.__module__ == surviving_indices.__module__


# -- pickles ------------------------------------------------------------------------------


def _recorded_modules(data: bytes) -> set[str]:
    """The workingctx modules a pickle names (for STACK_GLOBAL and GLOBAL alike)."""
    found = set()
    for _op, arg, _pos in pickletools.genops(data):
        if isinstance(arg, str):
            for word in arg.split(" "):
                if re.fullmatch(r"workingctx(\.\w+)*", word):
                    found.add(word)
    return found


def _context() -> WorkingContext:
    ctx = WorkingContext(prefix=PrefixContext("Be brief."), limit=1000)
    ctx.append(Message.user("cert?"), Message.assistant(tool_calls=[ToolCall("c1", "openssl", {"host": "a"})]))
    ctx.append(Message.tool("notAfter=2026-08-01", call_id="c1"), Message.assistant("It expires in August."))
    ctx.note("ticket", {"id": "ENG-1", "tags": ["cert"]})
    ctx.journal.record({"kind": "checked"})
    return ctx


def _history_pieces() -> list[Any]:
    ctx = WorkingContext(record=True).append(Message.user("plan the trip"))
    child = ctx.fork()
    child.append(Message.assistant("Oslo."))
    ctx.merge(child, mode="union")
    ctx.note("plan", ["a"])
    ctx.slice(LastNTurns(1))
    ctx.finish("done")
    entries = list(ctx.history)
    return entries + [entry.content for entry in entries]


@attrs.frozen
class Summarize:
    """A summarizer that is a value, so the manager holding it has a repr to paste back."""

    async def __call__(self, messages: Any) -> str:
        return f"{len(messages)} messages"


def _examples() -> list[Any]:
    ctx = _context()
    snap = ctx.freeze()
    later = ctx.fork().append(Message.user("and the key?")).freeze()
    media = MediaRef(url="https://example.com/a.png", mime_type="image/png", width=16, height=16)
    plan = cache.plan(ctx, provider="anthropic", model="claude-sonnet-4-6")
    values: list[Any] = [
        ctx.prefix,
        snap,
        ctx.diff(later),
        Checkpoint.capture(ctx, metadata={"run": 1}),
        CheckpointInfo("c" * 64, None, datetime(2026, 1, 1, tzinfo=UTC), 4, "d" * 64),
        Listing(
            [CheckpointInfo("c" * 64, None, datetime(2026, 1, 1, tzinfo=UTC), 4, "d" * 64)],
            damaged={"e" * 64: CheckpointError("the checkpoint row does not match its seal", path="$")},
        ),
        ContextInfo(
            "run-1",
            "plan the trip",
            datetime(2026, 1, 1, tzinfo=UTC),
            datetime(2026, 1, 2, tzinfo=UTC),
            turn=1,
            finished=False,
            parent_id=None,
            entries=3,
        ),
        Message("assistant", "hi", name="bot", id="m1", metadata={"k": [1]}, usage=Usage(3, 4)),
        ToolCall("c1", "lookup", {"q": "x"}),
        Usage(input_tokens=10, output_tokens=2, cache_read_tokens=5),
        TextBlock("hi", (AnnotationRef(url="https://example.com"),), cache=CacheBreakpoint("1h")),
        ImageBlock(media, alt_text="a dot", detail="low"),
        AudioBlock(MediaRef(kind="file_id", file_id="f1"), transcript="hello"),
        VideoBlock(MediaRef(url="https://example.com/v.mp4"), thumbnail=media),
        DocumentBlock(MediaRef(url="https://example.com/a.pdf"), text="page one"),
        DataBlock("application/json", data_base64="e30="),
        ErrorBlock("boom", code="E1", data={"retry": False}),
        ProviderBlock("openai", {"type": "web_search_call"}),
        ReasoningBlock("thinking", signature="sig"),
        RemoteToolCallBlock("r1", "search", {"q": "x"}),
        ToolCallBlock("c2", "lookup", {"q": "y"}),
        ToolResultBlock("c2", "found", status="completed"),
        AnnotationBlock("citation", (AnnotationRef(url="https://example.com", title="Example"),)),
        AnnotationRef(file_id="f1", page=2),
        CacheBreakpoint("5m"),
        media,
        deep_freeze({"a": [1, {"b": 2}]}),
        FrozenList([1, 2]),
        FrozenDict({"x": 1}),
        ToolResult("done", state={"units": "metric"}),
        ApproxTokenCounter(images="anthropic"),
        RunningCount(),
        LastNTurns(2),
        RoleFilter({"system"}),
        Since(1),
        Tagged("keep"),
        TokenBudget(100, start_on="user"),
        WholeExchanges(~CompletedToolSequences(), mode="drop"),
        CompletedToolSequences(),
        AllOf((LastNTurns(1), Since(0))),
        AnyOf((Tagged("a"), Tagged("b"))),
        Not(RoleFilter({"tool"})),
        Newest(2, Tagged("keep")),
        PendingCalls(),
        ValidRequest(LastNTurns(1), user_first=False),
        explain(LastNTurns(1), ctx),
        managers.TrimReport(kept=3, dropped=1, repaired=("orphan",)),
        managers.MessageContextManager(10, pin=Tagged("keep")),
        managers.TokenBudgetContextManager(1000, low_watermark=800),
        managers.BudgetCut(100, pin=Tagged("keep")),
        managers.SummaryContextManager(Summarize(), max_messages=20, keep_recent=4),
        pricing.Price(Decimal(3), Decimal(15)),
        validity.Problem(1, "orphan_result", "a result without a call", ("c9",)),
        plan,
        *plan.breakpoints,
        cache.RULES["anthropic"],
        cache.report(snap, later, provider="anthropic", model="claude-sonnet-4-6"),
        cache.Breakpoint(message=1, block=0, ttl="5m", tokens=1024),
        history.ContextChange("slice", to=2),
        history.ErrorInfo("ValueError", "boom", during="tool"),
        history.Forked("run-1", "run-2", call="c1"),
        history.Kept(0, 2),
        *_history_pieces(),
    ]
    sim = cache.simulate(list(later.messages), provider="anthropic", model="claude-sonnet-4-6")
    return [*values, sim, *sim.requests]


# Public classes whose instances are not values to pickle, and why.
NOT_VALUES = {
    "workingctx.context.WorkingContext": "live and lockable: it pickles through freeze(), a FrozenContext",
    "workingctx.context.ContextLock": "a lock",
    "workingctx.context.TailView": "a view of a live context",
    "workingctx.history.recorder.NotesEdit": "a live edit of a context's notes",
    "workingctx.integrations.langgraph.ContextSaver": "a LangGraph checkpointer: holds a store",
    "workingctx.history.recorder.Recorder": "the live recorder of a context",
    "workingctx.integrations.langchain.ContextMiddleware": "live middleware: remembers recent conversations",
    "workingctx.integrations.langchain.SummarizingMiddleware": "live middleware of an agent",
    "workingctx.integrations.langchain.SummaryState": "an agent's state schema (a TypedDict)",
    "workingctx.journal.MutationJournal": "live and mutable: it pickles through FrozenContext.journal",
    "workingctx.managers.BaseContextManager": "an abstract base",
    "workingctx.managers.Summarizer": "a protocol",
    "workingctx.media.MediaStore": "a protocol",
    "workingctx.media.FileMediaStore": "a store: holds a directory",
    "workingctx.media.InMemoryMediaStore": "a store",
    "workingctx.persistence.media.SQLiteMediaStore": "a store: holds a connection",
    "workingctx.persistence.histories.ContextStore": "a protocol",
    "workingctx.integrations.openai_agents.ContextSession": "a session: holds a store and a live window",
    "workingctx.persistence.stores.CheckpointStore": "a protocol",
    "workingctx.persistence.memory.InMemoryStore": "a store",
    "workingctx.persistence.postgres.PostgresStore": "a store: holds a connection pool",
    "workingctx.persistence.redis.RedisStore": "a store: holds a connection",
    "workingctx.persistence.sqlite.SQLiteStore": "a store: holds a connection",
    "workingctx.scopes.ContextScope": "a protocol",
    "workingctx.scopes.PositionalScope": "a protocol",
    "workingctx.tokens.MessageCounter": "a protocol",
    "workingctx.tokens.TokenCounter": "a protocol",
    "workingctx.tokens.TiktokenCounter": "holds a tokenizer; rebuilt from its encoding name",
}


def _path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _same(a: Any, b: Any) -> bool:
    if type(a).__eq__ is object.__eq__:  # not a value (yet): compare the state pickled
        return type(a) is type(b) and a.__getstate__() == b.__getstate__()
    return bool(a == b)


class TestPickles:
    def test_every_public_value_has_an_example(self):
        """
        Every public class is pickled below, or listed with the reason it is not a value.
        """
        pickled = {_path(type(value)) for value in _examples()}
        errors = {_path(cls) for cls in PUBLIC_CLASSES if issubclass(cls, BaseException)}
        missing = {_path(cls) for cls in PUBLIC_CLASSES} - pickled - errors - set(NOT_VALUES)
        assert not missing, f"add an example of each to _examples() or a reason to NOT_VALUES: {sorted(missing)}"

    @pytest.mark.parametrize("protocol", [2, 4, pickle.HIGHEST_PROTOCOL])
    def test_every_public_value_pickles_under_public_modules_and_loads(self, protocol):
        """
        Each value's pickle names only public modules, its own class's among them,
        and loads back to an equal value.
        """
        for value in _examples():
            data = pickle.dumps(value, protocol=protocol)
            recorded = _recorded_modules(data)
            assert type(value).__module__ in recorded, (value, recorded)
            assert all(_is_public(module) for module in recorded), (value, recorded)
            assert _same(value, pickle.loads(data)), value

    @pytest.mark.parametrize("cls", sorted(PUBLIC_CLASSES, key=_path), ids=_path)
    def test_every_public_class_pickles_by_its_public_path(self, cls):
        """
        A pickle naming the class (as any pickle of an instance does, errors and
        stores included) records its public module, and loads back to the class.
        """
        data = pickle.dumps(cls)
        assert {cls.__module__} == _recorded_modules(data)
        assert pickle.loads(data) is cls

    @given(st.one_of(blocks, messages(), usages, prefixes, scope_trees()))
    def test_generated_values_pickle_under_public_modules(self, value):
        """
        Any block, message, usage, prefix or scope tree names public modules only.
        """
        data = pickle.dumps(value)
        assert all(_is_public(module) for module in _recorded_modules(data))
        assert value == pickle.loads(data)


# Scopes as pickled by earlier versions, which named the private modules that
# define them (workingctx.scopes._algebra, ._builtin, ._budget, ._tools).
OLD_SCOPE_PICKLES = {
    "(LastNTurns(2) & ~RoleFilter({'system'})) | Since(3) | Tagged('keep')": (
        b"\x80\x04\x95#\x01\x00\x00\x00\x00\x00\x00\x8c\x1aworkingctx.scopes._algebra\x94\x8c\x05AnyOf\x94\x93"
        b"\x94)\x81\x94}\x94(\x8c\x06scopes\x94h\x00\x8c\x05AllOf\x94\x93\x94)\x81\x94}\x94(h\x05\x8c\x1awork"
        b"ingctx.scopes._builtin\x94\x8c\nLastNTurns\x94\x93\x94)\x81\x94}\x94\x8c\x01n\x94K\x02sbh\x00\x8c\x03"
        b"Not\x94\x93\x94)\x81\x94}\x94(\x8c\x05scope\x94h\n\x8c\nRoleFilter\x94\x93\x94)\x81\x94}\x94\x8c\x05"
        b"roles\x94(\x8c\x06system\x94\x91\x94sb\x8c\x06_depth\x94K\x02ub\x86\x94h\x1cK\x03ubh\n\x8c\x05Since"
        b"\x94\x93\x94)\x81\x94}\x94\x8c\x05index\x94K\x03sbh\n\x8c\x06Tagged\x94\x93\x94)\x81\x94}\x94\x8c\x03"
        b"tag\x94\x8c\x04keep\x94sb\x87\x94h\x1cK\x04ub."
    ),
    "WholeExchanges(TokenBudget(100, start_on='user'), mode='drop')": (
        b"\x80\x04\x95\xca\x00\x00\x00\x00\x00\x00\x00\x8c\x18workingctx.scopes._tools\x94\x8c\x0eWholeExchanges"
        b"\x94\x93\x94)\x81\x94}\x94(\x8c\x05scope\x94\x8c\x19workingctx.scopes._budget\x94\x8c\x0bTokenBudget"
        b"\x94\x93\x94)\x81\x94}\x94(\x8c\nmax_tokens\x94Kd\x8c\x07counter\x94N\x8c\x08start_on\x94\x8c\x04user"
        b"\x94\x8c\x0einclude_system\x94\x88ub\x8c\x04mode\x94\x8c\x04drop\x94\x8c\x06_depth\x94K\x02ub."
    ),
    "WholeExchanges(~CompletedToolSequences())": (
        b"\x80\x04\x95\xb0\x00\x00\x00\x00\x00\x00\x00\x8c\x18workingctx.scopes._tools\x94\x8c\x0eWholeExchanges"
        b"\x94\x93\x94)\x81\x94}\x94(\x8c\x05scope\x94\x8c\x1aworkingctx.scopes._algebra\x94\x8c\x03Not\x94\x93"
        b"\x94)\x81\x94}\x94(h\x05h\x00\x8c\x16CompletedToolSequences\x94\x93\x94)\x81\x94}\x94b\x8c\x06_depth"
        b"\x94K\x02ub\x8c\x04mode\x94\x8c\x06expand\x94h\x0fK\x03ub."
    ),
}


class TestOldPickles:
    @pytest.mark.parametrize("source", sorted(OLD_SCOPE_PICKLES))
    def test_scopes_pickled_under_private_paths_still_load(self, source):
        """
        A scope stored by an earlier version loads, equal to the same scope built now,
        and pickles again under ``workingctx.scopes``.
        """
        loaded = pickle.loads(OLD_SCOPE_PICKLES[source])
        expected = eval(source, vars(importlib.import_module("workingctx.scopes")))  # noqa: S307
        assert expected == loaded
        assert {"workingctx.scopes"} == _recorded_modules(pickle.dumps(loaded))

    def test_a_loaded_old_scope_still_selects(self):
        """
        The loaded scope is a working scope, not only an equal-looking value.
        """
        loaded = pickle.loads(OLD_SCOPE_PICKLES["WholeExchanges(~CompletedToolSequences())"])
        ctx = _context()
        expected = ctx.slice(WholeExchanges(~CompletedToolSequences()))
        assert list(expected.messages) == list(ctx.slice(loaded).messages)


def test_stored_checkpoints_name_no_module():
    """
    Checkpoints are stored as JSON that names no module, so moving a module
    cannot break a stored checkpoint.
    """
    text = to_json(Checkpoint.capture(_context(), metadata={"scope": repr(LastNTurns(2))}))
    assert "workingctx" not in text


# -- reprs ----------------------------------------------------------------------------------


def _names() -> dict[str, Any]:
    """Every public name, as a user who imported them all would paste a repr back."""
    names: dict[str, Any] = {
        "Decimal": Decimal,
        "datetime": importlib.import_module("datetime"),
        "Summarize": Summarize,
    }
    for module in PUBLIC_MODULES:
        imported = importlib.import_module(module)
        names.update((name, getattr(imported, name)) for name in imported.__all__)
    return names


def _evaluated(text: str) -> Any:
    return eval(text, _names())  # noqa: S307  # a repr that looks like a call must be one


def _live_objects(tmp_path: Any) -> list[Any]:
    from workingctx.media import FileMediaStore, InMemoryMediaStore  # noqa: PLC0415
    from workingctx.persistence import (  # noqa: PLC0415
        InMemoryStore,
        SQLiteMediaStore,
        SQLiteStore,
    )

    ctx = _context()
    recorded = WorkingContext(record=True).append(Message.user("hi"))
    return [
        ctx,
        ctx.journal,
        ctx.tail_view(),
        ctx.lock,
        MutationJournal(),
        recorded._history,  # noqa: SLF001  # a recorder is reached only through its context
        InMemoryStore(),
        SQLiteStore(":memory:"),
        SQLiteStore(tmp_path / "keyed.db", key=b"k" * 32),
        InMemoryMediaStore(),
        FileMediaStore(tmp_path / "media"),
        SQLiteMediaStore(tmp_path / "media.db"),
        TiktokenCounter(),
        ctx.edit_notes(),
    ]


class TestReprs:
    def test_a_value_repr_that_looks_like_a_call_is_one(self):
        """
        Every public value's repr is a constructor call that builds an equal value
        from the public names (or, for a mapping or list, its literal).
        """
        for value in _examples():
            text = repr(value)
            assert not text.startswith("<"), text
            assert _same(value, _evaluated(text)), text

    def test_live_objects_say_what_they_are_between_angle_brackets(self, tmp_path):
        """
        Contexts, journals, views, locks, recorders, note edits, counters holding a
        tokenizer and stores are not values: their repr is ``<Type field=value ...>``,
        never something that looks like a call.
        """
        for thing in _live_objects(tmp_path):
            text = repr(thing)
            assert re.fullmatch(rf"<{type(thing).__name__}( \w+=[^<>]*)*>", text, re.DOTALL), text

    def test_the_journal_repr(self):
        """
        The journal's repr gives its size and how much of it is committed.
        """
        journal = MutationJournal(["a"])
        journal.record("b")
        assert "<MutationJournal size=2 committed=1>" == repr(journal)

    def test_a_keyed_store_repr_hides_the_key(self, tmp_path):
        """
        A keyed SQLite store says it is keyed, and never shows the key.
        """
        from workingctx.persistence import SQLiteStore  # noqa: PLC0415

        with SQLiteStore(tmp_path / "k.db", key=b"s3cret-key-of-32-bytes-at-least!") as store:
            assert "keyed=True" in repr(store)
            assert "s3cret" not in repr(store)

    @given(
        st.one_of(
            blocks,
            messages(),
            usages,
            prefixes,
            tool_calls,
            media_refs,
            annotation_refs,
            scope_trees(),
            working_contexts().map(lambda ctx: ctx.freeze()),
        )
    )
    def test_generated_values_eval_back_from_their_repr(self, value):
        """
        eval(repr(x)) == x for any generated block, message, usage, prefix, call,
        reference, scope tree and snapshot.
        """
        assert value == _evaluated(repr(value))


# -- errors ---------------------------------------------------------------------------------


def _error_examples() -> list[BaseException]:
    from workingctx import exceptions as e  # noqa: PLC0415

    problem = validity.Problem(1, "orphan_result", "a result without a call", ("c9",))
    return [
        e.WorkingCtxError("refused"),
        e.ArgumentTypeError("limit must be an int", argument="limit", value="3", expected="int"),
        e.ArgumentValueError("limit must be >= 0", argument="limit", value=-1),
        e.CacheRuleError("unknown provider", argument="provider", value="acme"),
        e.FrozenPayloadError("frozen"),
        e.InvalidMessageError("unknown role", argument="role", value="System"),
        e.PayloadError("too deep", path="['a']"),
        e.PayloadTypeError("not JSON", path="['b']", problem="a set"),
        e.ScopeError("n must be >= 0", argument="n", value=-2),
        e.PositionalScopeError("positional"),
        e.MergeError("refused", ids=["c1"]),
        e.ProviderError("broken", problems=[problem], provider="anthropic"),
        e.HistoryError("not recorded"),
        e.FinishedError("finished"),
        e.PendingCallsError("pending", calls=("c1",)),
        e.SerializationError("bad", path="$.role"),
        e.PricingError("no price", argument="model", value="gpt-9"),
        e.CheckpointError("damaged", path="$.messages[0]"),
        e.MediaError("missing", ref=MediaRef(kind="file_id", file_id="f1"), reason="gone"),
        e.HeadConflictError("lost", thread="t", expected=None, actual="a"),
        e.StoreUnavailableError("down"),
    ]


def _error_state(error: BaseException) -> tuple[Any, ...]:
    attributes = {name: getattr(error, name) for name in dir(error) if not name.startswith("_")}
    attributes.pop("with_traceback", None)
    attributes.pop("add_note", None)
    return (type(error), error.args, str(error), attributes)


class TestErrors:
    def test_every_public_error_has_an_example(self):
        """
        Every error class of the public API is checked below.
        """
        errors = {cls for cls in PUBLIC_CLASSES if issubclass(cls, BaseException)}
        assert errors == {type(error) for error in _error_examples()}

    def test_an_error_repr_is_the_call_that_builds_it(self):
        """
        An error's repr names its message and the attributes it keeps (the refused
        argument and value, paths, ids, problems), as the call that builds the same error.
        """
        for error in _error_examples():
            assert _error_state(error) == _error_state(_evaluated(repr(error))), repr(error)
        assert "ArgumentTypeError('limit must be an int', argument='limit', value='3', expected='int')" == repr(
            _error_examples()[1]
        )

    def test_an_error_pickles_with_the_attributes_it_keeps(self):
        """
        An error crosses a process boundary under ``workingctx.exceptions`` with its
        message and every attribute, the refused argument and value included.
        """
        for error in _error_examples():
            data = pickle.dumps(error)
            assert {"workingctx.exceptions"} <= _recorded_modules(data)
            assert _error_state(error) == _error_state(pickle.loads(data)), repr(error)

    def test_an_unpicklable_refused_value_does_not_stop_the_error(self):
        """
        A refused value that cannot be pickled (a lock) is left behind; the error,
        its message and the argument's name still cross.
        """
        from workingctx.exceptions import ArgumentTypeError  # noqa: PLC0415

        error = ArgumentTypeError("lock is not a str", argument="name", value=threading.Lock(), expected="str")
        copied = pickle.loads(pickle.dumps(error))
        assert (str(error), "name", None, "str") == (str(copied), copied.argument, copied.value, copied.expected)
