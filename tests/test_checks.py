"""
Every public constructor refuses bad arguments by one rule: a wrong type raises an
error that is both a ``TypeError`` and a ``WorkingCtxError``, a wrong value one that
is both a ``ValueError`` and a ``WorkingCtxError``; the error keeps the argument's
name and the refused value, and nothing is created or changed.
"""

from __future__ import annotations

import math
import pickle
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from workingctx import Message, ToolCall, Usage, WorkingContext
from workingctx._checks import check_count, check_items, check_match, check_number, check_one_of, check_str, count, flag
from workingctx.cache import RULES, Breakpoint, cache_blocks
from workingctx.exceptions import ArgumentTypeError, ArgumentValueError, WorkingCtxError
from workingctx.history import ContextChange, Entry, Forked, Kept, NotesChange, Started
from workingctx.managers import MessageContextManager, SummaryContextManager, TokenBudgetContextManager
from workingctx.media import store_ref
from workingctx.messages import CacheBreakpoint, MediaRef, TextBlock
from workingctx.persistence import Checkpoint, InMemoryStore, PostgresStore, RedisStore, SQLiteStore, rehydrate
from workingctx.prefix import PrefixContext
from workingctx.pricing import Price, add_price, cost
from workingctx.reducers import ToolResult, add_messages, append_items
from workingctx.scopes import AllOf, LastNTurns, Not, RoleFilter, Since, Tagged, TokenBudget, WholeExchanges, explain
from workingctx.snapshot import FrozenContext
from workingctx.tokens import TiktokenCounter, estimate_message_tokens, image_tokens
from workingctx.validity import check_messages

if TYPE_CHECKING:
    from collections.abc import Callable


async def _summarize(messages: object, *, prompt: str, max_tokens: int) -> str:  # noqa: ARG001  # the protocol's signature
    return "summary"


def _rules(**changes: Any) -> object:
    return attrs.evolve(RULES["anthropic"], **changes)


SNAP = WorkingContext(messages=[Message("user", "hi")]).freeze()
NOW = datetime(2026, 1, 1, tzinfo=UTC)
NAIVE = datetime(2026, 1, 1)  # noqa: DTZ001  # the naive time refused
TYPE = "type"
VALUE = "value"

# (what is built, the argument, a refused value, "type" or "value")
CASES: list[tuple[str, Callable[[Any], object], str, object, str]] = [
    ("WorkingContext(limit=)", lambda v: WorkingContext(limit=v), "limit", "3", TYPE),
    ("WorkingContext(limit=)", lambda v: WorkingContext(limit=v), "limit", True, TYPE),
    ("WorkingContext(limit=)", lambda v: WorkingContext(limit=v), "limit", 2.5, TYPE),
    ("WorkingContext(limit=)", lambda v: WorkingContext(limit=v), "limit", -1, VALUE),
    ("WorkingContext(shared=)", lambda v: WorkingContext(shared=v), "shared", 1, TYPE),
    ("WorkingContext(record=)", lambda v: WorkingContext(record=v), "record", "yes", TYPE),
    ("WorkingContext(prefix=)", lambda v: WorkingContext(prefix=v), "prefix", "You are terse.", TYPE),
    ("WorkingContext(scratchpad=)", lambda v: WorkingContext(scratchpad=v), "scratchpad", [("a", 1)], TYPE),
    ("WorkingContext(messages=)", lambda v: WorkingContext(messages=v), "messages", Message("user", "x"), TYPE),
    ("WorkingContext(messages=)", lambda v: WorkingContext(messages=[v]), "messages[0]", "hi", TYPE),
    ("WorkingContext(id=)", lambda v: WorkingContext(id=v), "id", "run-1", VALUE),
    ("Usage(input_tokens=)", lambda v: Usage(input_tokens=v), "input_tokens", -1, VALUE),
    ("Usage(input_tokens=)", lambda v: Usage(input_tokens=v), "input_tokens", True, TYPE),
    ("Usage(output_tokens=)", lambda v: Usage(output_tokens=v), "output_tokens", "8", TYPE),
    ("Usage(reasoning_tokens=)", lambda v: Usage(reasoning_tokens=v), "reasoning_tokens", 10**5000, VALUE),
    (
        "Usage.from_cache_writes()",
        lambda v: Usage.from_cache_writes(cache_write_5m_tokens=v),
        "cache_write_5m_tokens",
        -2,
        VALUE,
    ),
    ("Message(role)", lambda v: Message(v, "x"), "role", "System", VALUE),
    ("Message(role)", lambda v: Message(v, "x"), "role", 3, TYPE),
    ("Message(content)", lambda v: Message("user", v), "content", 42, TYPE),
    ("Message(name=)", lambda v: Message("user", "x", name=v), "name", 7, TYPE),
    ("Message(delta=)", lambda v: Message("user", "x", delta=v), "delta", 1, TYPE),
    ("Message(id=)", lambda v: Message("user", "x", id=v), "id", True, TYPE),
    ("ToolCall(id)", lambda v: ToolCall(v, "f", {}), "id", "", VALUE),
    ("ToolCall(name)", lambda v: ToolCall("c1", v, {}), "name", None, TYPE),
    ("ToolCall(arguments)", lambda v: ToolCall("c1", "f", v), "arguments", '{"q": 1}', TYPE),
    ("CacheBreakpoint(ttl)", CacheBreakpoint, "ttl", "2h", VALUE),
    ("CacheBreakpoint(ttl)", CacheBreakpoint, "ttl", 5, TYPE),
    ("MediaRef(kind=)", lambda v: MediaRef(kind=v, url="x"), "kind", "ftp", VALUE),
    ("MediaRef(width=)", lambda v: MediaRef(url="x", width=v), "width", 1.5, TYPE),
    ("TextBlock(text)", TextBlock, "text", b"hi", TYPE),
    ("TextBlock(cache=)", lambda v: TextBlock("hi", cache=v), "cache", "5m", TYPE),
    ("Checkpoint(id=)", lambda v: Checkpoint(id=v, snapshot=SNAP, created_at=NOW), "id", "", VALUE),
    ("Checkpoint(id=)", lambda v: Checkpoint(id=v, snapshot=SNAP, created_at=NOW), "id", 7, TYPE),
    ("Checkpoint(snapshot=)", lambda v: Checkpoint(id="c", snapshot=v, created_at=NOW), "snapshot", {}, TYPE),
    ("Checkpoint(created_at=)", lambda v: Checkpoint(id="c", snapshot=SNAP, created_at=v), "created_at", NAIVE, VALUE),
    ("Checkpoint(created_at=)", lambda v: Checkpoint(id="c", snapshot=SNAP, created_at=v), "created_at", 0.0, TYPE),
    ("Checkpoint(parent=)", lambda v: Checkpoint(id="c", snapshot=SNAP, created_at=NOW, parent=v), "parent", "", VALUE),
    ("Checkpoint.capture(parent=)", lambda v: Checkpoint.capture(WorkingContext(), parent=v), "parent", "", VALUE),
    ("Checkpoint.capture(parent=)", lambda v: Checkpoint.capture(WorkingContext(), parent=v), "parent", 3, TYPE),
    (
        "Checkpoint.capture(metadata=)",
        lambda v: Checkpoint.capture(WorkingContext(), metadata=v),
        "metadata",
        [1],
        TYPE,
    ),
    ("Checkpoint.capture(source)", Checkpoint.capture, "source", "ctx", TYPE),
    ("rehydrate(checkpoint)", rehydrate, "checkpoint", None, TYPE),
    ("PrefixContext(system_prompt=)", lambda v: PrefixContext(system_prompt=v), "system_prompt", 1, TYPE),
    ("PrefixContext(cache_hint=)", lambda v: PrefixContext(cache_hint=v), "cache_hint", "yes", TYPE),
    ("PrefixContext(grounding=)", lambda v: PrefixContext(grounding=v), "grounding", "text", TYPE),
    ("PrefixContext(grounding=)", lambda v: PrefixContext(grounding=[v]), "grounding[0]", "text", TYPE),
    ("FrozenContext(prefix=)", lambda v: FrozenContext(prefix=v), "prefix", None, TYPE),
    ("FrozenContext(messages=)", lambda v: FrozenContext(messages=[v]), "messages[0]", 1, TYPE),
    ("FrozenContext.chain_digest(n)", SNAP.chain_digest, "n", -1, VALUE),
    ("FrozenContext.chain_digest(n)", SNAP.chain_digest, "n", "1", TYPE),
    ("LastNTurns(n)", LastNTurns, "n", -1, VALUE),
    ("LastNTurns(n)", LastNTurns, "n", True, TYPE),
    ("LastNTurns(n)", LastNTurns, "n", "2", TYPE),
    ("Since(index)", Since, "index", -3, VALUE),
    ("Since(index)", Since, "index", 1.0, TYPE),
    ("RoleFilter(roles)", RoleFilter, "roles", 3, TYPE),
    ("RoleFilter(roles)", RoleFilter, "roles", "bot", VALUE),
    ("Tagged(tag)", Tagged, "tag", None, TYPE),
    ("TokenBudget(max_tokens)", TokenBudget, "max_tokens", -1, VALUE),
    ("TokenBudget(max_tokens)", TokenBudget, "max_tokens", False, TYPE),
    ("TokenBudget(counter=)", lambda v: TokenBudget(9, counter=v), "counter", "approx", TYPE),
    ("TokenBudget(start_on=)", lambda v: TokenBudget(9, start_on=v), "start_on", "human", VALUE),
    ("TokenBudget(start_on=)", lambda v: TokenBudget(9, start_on=v), "start_on", 1, TYPE),
    ("TokenBudget(include_system=)", lambda v: TokenBudget(9, include_system=v), "include_system", "no", TYPE),
    ("WholeExchanges(scope)", WholeExchanges, "scope", 3, TYPE),
    ("WholeExchanges(mode=)", lambda v: WholeExchanges(LastNTurns(1), mode=v), "mode", "keep", VALUE),
    ("WholeExchanges(mode=)", lambda v: WholeExchanges(LastNTurns(1), mode=v), "mode", None, TYPE),
    ("Not(scope)", Not, "scope", "x", TYPE),
    ("AllOf(scopes)", AllOf, "scopes", LastNTurns(1), TYPE),
    ("AllOf(scopes)", lambda v: AllOf((LastNTurns(1), v)), "scopes[1]", 3, TYPE),
    ("explain(messages)", lambda v: explain(LastNTurns(1), v), "messages", 3, TYPE),
    ("explain(messages)", lambda v: explain(LastNTurns(1), [v]), "messages[0]", "hi", TYPE),
    ("Entry(turn)", lambda v: Entry("user", Message("user", "x"), v, NOW), "turn", -1, VALUE),
    ("Entry(turn)", lambda v: Entry("user", Message("user", "x"), v, NOW), "turn", True, TYPE),
    ("Entry(at)", lambda v: Entry("user", Message("user", "x"), 0, v), "at", NAIVE, VALUE),
    ("Entry(kind)", lambda v: Entry(v, Message("user", "x"), 0, NOW), "kind", "nope", VALUE),
    ("Entry(content)", lambda v: Entry("user", v, 0, NOW), "content", "x", TYPE),
    ("Kept(start)", lambda v: Kept(v, 3), "start", -1, VALUE),
    ("Kept(stop)", lambda v: Kept(3, v), "stop", 1, VALUE),
    ("Started(id)", Started, "id", "a b", VALUE),
    ("Started(id)", Started, "id", 3, TYPE),
    ("Forked(parent)", lambda v: Forked(v, "b"), "parent", 3, TYPE),
    ("NotesChange(values)", NotesChange, "values", [1], TYPE),
    ("ContextChange(tail)", lambda v: ContextChange("trim", [v]), "tail[0]", "x", TYPE),
    ("ctx.note(value)", lambda v: WorkingContext(record=True).note("k", v), "k", {1, 2}, TYPE),
    ("ctx.note(value)", lambda v: WorkingContext(record=True).note("k", v), "k", math.nan, VALUE),
    ("InMemoryStore.save(checkpoint)", InMemoryStore().save, "checkpoint", "ckpt", TYPE),
    ("InMemoryStore.load(id)", InMemoryStore().load, "checkpoint_id", 3, TYPE),
    ("InMemoryStore.head(thread)", InMemoryStore().head, "thread", "", VALUE),
    ("InMemoryStore.head(thread)", InMemoryStore().head, "thread", None, TYPE),
    ("SQLiteStore(timeout=)", lambda v: SQLiteStore(":memory:", timeout=v), "timeout", -1, VALUE),
    ("SQLiteStore(timeout=)", lambda v: SQLiteStore(":memory:", timeout=v), "timeout", "5", TYPE),
    ("SQLiteStore(synchronous=)", lambda v: SQLiteStore(":memory:", synchronous=v), "synchronous", "FAST", VALUE),
    ("SQLiteStore(read_only=)", lambda v: SQLiteStore(":memory:", read_only=v), "read_only", 1, TYPE),
    ("SQLiteStore(key=)", lambda v: SQLiteStore(":memory:", key=v), "key", b"short", VALUE),
    ("SQLiteStore(key=)", lambda v: SQLiteStore(":memory:", key=v), "key", 12345, TYPE),
    ("PostgresStore(schema=)", lambda v: PostgresStore("postgresql://h/db", schema=v), "schema", "Bad Name", VALUE),
    ("PostgresStore(schema=)", lambda v: PostgresStore("postgresql://h/db", schema=v), "schema", 3, TYPE),
    ("PostgresStore(pool_size=)", lambda v: PostgresStore("postgresql://h/db", pool_size=v), "pool_size", 0, VALUE),
    ("RedisStore(namespace=)", lambda v: RedisStore("redis://h", namespace=v), "namespace", "a b", VALUE),
    ("RedisStore(timeout=)", lambda v: RedisStore("redis://h", timeout=v), "timeout", True, TYPE),
    ("RedisStore(timeout=)", lambda v: RedisStore("redis://h", timeout=v), "timeout", 0, VALUE),
    ("MessageContextManager(max_messages)", MessageContextManager, "max_messages", -1, VALUE),
    ("MessageContextManager(max_messages)", MessageContextManager, "max_messages", True, TYPE),
    ("MessageContextManager(max_messages)", MessageContextManager, "max_messages", "10", TYPE),
    (
        "MessageContextManager(remove_tool_msgs=)",
        lambda v: MessageContextManager(remove_tool_msgs=v),
        "remove_tool_msgs",
        1,
        TYPE,
    ),
    ("MessageContextManager(pin=)", lambda v: MessageContextManager(pin=v), "pin", "task", TYPE),
    ("TokenBudgetContextManager(max_tokens)", TokenBudgetContextManager, "max_tokens", -1, VALUE),
    ("TokenBudgetContextManager(max_tokens)", TokenBudgetContextManager, "max_tokens", 100.0, TYPE),
    (
        "TokenBudgetContextManager(low_watermark=)",
        lambda v: TokenBudgetContextManager(100, low_watermark=v),
        "low_watermark",
        200,
        VALUE,
    ),
    (
        "TokenBudgetContextManager(counter=)",
        lambda v: TokenBudgetContextManager(100, counter=v),
        "counter",
        "approx",
        TYPE,
    ),
    ("SummaryContextManager(summarizer)", SummaryContextManager, "summarizer", "summarize", TYPE),
    (
        "SummaryContextManager(keep_recent=)",
        lambda v: SummaryContextManager(_summarize, keep_recent=v),
        "keep_recent",
        -1,
        VALUE,
    ),
    (
        "SummaryContextManager(token_budget=)",
        lambda v: SummaryContextManager(_summarize, token_budget=v),
        "token_budget",
        "6000",
        TYPE,
    ),
    (
        "SummaryContextManager(summary_prompt=)",
        lambda v: SummaryContextManager(_summarize, summary_prompt=v),
        "summary_prompt",
        3,
        TYPE,
    ),
    ("Price(input)", lambda v: Price(v, 1), "input", -1, VALUE),
    ("Price(output)", lambda v: Price(1, v), "output", True, TYPE),
    ("Price(cache_read=)", lambda v: Price(1, 1, cache_read=v), "cache_read", "nan", VALUE),
    (
        "Price(long_context_above=)",
        lambda v: Price(1, 1, long_context_above=v, long_context=Price(2, 2)),
        "long_context_above",
        0,
        VALUE,
    ),
    ("Price(long_context=)", lambda v: Price(1, 1, long_context_above=5, long_context=v), "long_context", 3, TYPE),
    ("cost(model)", lambda v: cost(v, Usage()), "model", None, TYPE),
    ("cost(model)", lambda v: cost(v, Usage()), "model", " ", VALUE),
    ("cost(usage)", lambda v: cost("gpt-4o", v), "usage", {"input_tokens": 1}, TYPE),
    ("add_price(price)", lambda v: add_price("mine", v), "price", 1.0, TYPE),
    ("CacheRules(max_breakpoints)", lambda v: _rules(max_breakpoints=v), "max_breakpoints", -1, VALUE),
    ("CacheRules(max_breakpoints)", lambda v: _rules(max_breakpoints=v), "max_breakpoints", True, TYPE),
    ("CacheRules(lookback_blocks)", lambda v: _rules(lookback_blocks=v), "lookback_blocks", 0, VALUE),
    ("CacheRules(minimum_tokens)", lambda v: _rules(minimum_tokens=v), "minimum_tokens", [1], TYPE),
    ("CacheRules(minimum_tokens)", lambda v: _rules(minimum_tokens={"m": v}), "minimum_tokens['m']", -5, VALUE),
    ("CacheRules(lifetimes=)", lambda v: _rules(lifetimes={"5m": v}), "lifetimes['5m']", 0, VALUE),
    ("Breakpoint(tokens)", lambda v: Breakpoint(0, 0, "5m", v), "tokens", -1, VALUE),
    ("cache_blocks(message)", cache_blocks, "message", "hi", TYPE),
    ("image_tokens(rule=)", lambda v: image_tokens(10, 10, rule=v), "rule", "bing", VALUE),
    ("image_tokens(rule=)", lambda v: image_tokens(10, 10, rule=v), "rule", 3, TYPE),
    ("TiktokenCounter(encoding)", TiktokenCounter, "encoding", 3.5, TYPE),
    ("estimate_message_tokens(messages)", lambda v: estimate_message_tokens([v]), "messages[0]", "hi", TYPE),
    ("ToolResult(is_error=)", lambda v: ToolResult("ok", is_error=v), "is_error", "yes", TYPE),
    ("ToolResult(state=)", lambda v: ToolResult("ok", state=v), "state", [1], TYPE),
    ("add_messages(left)", lambda v: add_messages(v, []), "left", Message("user", "x"), TYPE),
    ("append_items(new)", lambda v: append_items([], v), "new", "abc", TYPE),
    ("store_ref(data)", lambda v: store_ref(v, "image/png"), "data", "base64", TYPE),
    ("store_ref(mime_type)", lambda v: store_ref(b"x", v), "mime_type", "png", VALUE),
    ("store_ref(filename=)", lambda v: store_ref(b"x", "image/png", filename=v), "filename", 3, TYPE),
    ("check_messages(messages)", check_messages, "messages", "hi", TYPE),
    ("check_messages(messages)", lambda v: check_messages([v]), "messages[0]", {"role": "user"}, TYPE),
    (
        "MessageContextManager().trim_context(ctx)",
        MessageContextManager().trim_context,
        "ctx",
        [Message("user", "x")],
        TYPE,
    ),
]

SECRETS = {"key"}  # arguments whose value is a secret: named by the error, never shown or kept
IDS = [f"{c[0]}-{c[4]}-{i}" for i, c in enumerate(CASES)]


def _assert_refused(error: BaseException, argument: str, value: object, kind: str) -> None:
    assert isinstance(error, WorkingCtxError)
    if kind == TYPE:
        assert isinstance(error, TypeError)
        assert not isinstance(error, ValueError)
    else:
        assert isinstance(error, ValueError)
        assert not isinstance(error, TypeError)
    assert argument == error.argument
    if argument in SECRETS:
        assert error.value is None
        assert repr(value) not in str(error)
        assert repr(value) not in repr(error)
        return
    assert value is error.value
    if not (isinstance(value, int) and abs(value) > 10**100):
        assert repr(value)[:40] in str(error)


class TestEveryConstructor:
    @pytest.mark.parametrize(("build", "argument", "value", "kind"), [c[1:] for c in CASES], ids=IDS)
    def test_refused_by_the_rule(self, build: Callable[[Any], object], argument: str, value: object, kind: str) -> None:
        """
        A wrong type is a TypeError, a wrong value a ValueError, both WorkingCtxErrors
        that keep the argument and the value, and the message shows the value.
        """
        with pytest.raises(WorkingCtxError) as caught:
            build(value)
        _assert_refused(caught.value, argument, value, kind)

    @pytest.mark.parametrize(("build", "argument", "value", "kind"), [c[1:] for c in CASES], ids=IDS)
    def test_error_pickles_with_its_evidence(
        self, build: Callable[[Any], object], argument: str, value: object, kind: str
    ) -> None:
        """
        The error survives a pickle round trip with its argument and value.
        """
        with pytest.raises(WorkingCtxError) as caught:
            build(value)
        if kind == VALUE and isinstance(value, int) and abs(value) > 10**100:
            return  # an int too long to write cannot be pickled by the error's text either way
        copy = pickle.loads(pickle.dumps(caught.value))  # our own bytes
        assert type(caught.value) is type(copy)
        assert str(caught.value) == str(copy)
        assert argument == copy.argument
        if argument not in SECRETS:
            assert value == copy.value or (value != value and copy.value != copy.value)  # noqa: PLR0124  # NaN


class TestCountsRefuseBool:
    @given(st.booleans())
    def test_context_limit(self, value: bool) -> None:  # the refused value
        """
        True and False are not counts: a limit refuses them as a type.
        """
        with pytest.raises(ArgumentTypeError, match="a bool is not a count"):
            WorkingContext(limit=value)

    @given(st.booleans())
    def test_usage_counts(self, value: bool) -> None:  # the refused value
        """
        Every Usage count refuses a bool as a type.
        """
        for field in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
            with pytest.raises(ArgumentTypeError) as caught:
                Usage(**{field: value})
            assert field == caught.value.argument


class TestCheckCount:
    @given(st.integers(min_value=0))
    def test_accepts_counts(self, value: int) -> None:
        """
        Any int of 0 or more is a count, returned as it is.
        """
        assert value == check_count(value, "n")

    @given(st.integers(max_value=-1))
    def test_negative_is_a_value_error(self, value: int) -> None:
        """
        A negative int is a wrong value, named with the fix.
        """
        with pytest.raises(ArgumentValueError, match=r"n must be 0 or more, got -\d+; count up") as caught:
            check_count(value, "n", fix="count up")
        assert value == caught.value.value

    @given(st.one_of(st.booleans(), st.floats(), st.text(), st.none(), st.lists(st.integers())))
    def test_non_int_is_a_type_error(self, value: object) -> None:
        """
        Anything but an int (a bool included) is a wrong type.
        """
        with pytest.raises(ArgumentTypeError) as caught:
            check_count(value, "n", owner="Thing")
        assert "n" == caught.value.argument
        assert caught.value.value is value
        assert str(caught.value).startswith("Thing: n must be an int, got ")

    def test_domain_error_class(self) -> None:
        """
        A module's own value error can carry the evidence instead.
        """
        from workingctx.exceptions import ScopeError  # noqa: PLC0415  # only here

        with pytest.raises(ScopeError) as caught:
            check_count(-1, "n", error=ScopeError)
        assert ("n", -1) == (caught.value.argument, caught.value.value)


class TestOtherChecks:
    @given(st.sampled_from([math.nan, math.inf, -math.inf]))
    def test_number_must_be_finite(self, value: float) -> None:
        """
        NaN and the infinities are wrong values.
        """
        with pytest.raises(ArgumentValueError, match="finite"):
            check_number(value, "x")

    def test_number_refuses_bool(self) -> None:
        """
        A bool is not a number.
        """
        with pytest.raises(ArgumentTypeError):
            check_number(True, "x")  # noqa: FBT003  # the refused value

    def test_str_nonempty(self) -> None:
        """
        An empty str is a wrong value when a non-empty one is needed; a non-str a wrong type.
        """
        assert "a" == check_str("a", "id", nonempty=True)
        with pytest.raises(ArgumentValueError, match="id must not be empty"):
            check_str("", "id", nonempty=True)
        with pytest.raises(ArgumentTypeError, match="id must be a non-empty str, got 3 of type int"):
            check_str(3, "id", nonempty=True)

    def test_one_of(self) -> None:
        """
        A choice is exactly one of the listed strs.
        """
        assert check_one_of(None, "ttl", ("5m", "1h", None)) is None
        with pytest.raises(ArgumentValueError, match="ttl must be one of '5m', '1h' or None, got '2h'"):
            check_one_of("2h", "ttl", ("5m", "1h", None))

    def test_match(self) -> None:
        """
        A str the pattern matches whole passes; another str is a wrong value, a non-str a wrong type.
        """
        pattern = re.compile(r"[a-z]{1,3}")
        assert "ab" == check_match("ab", "name", pattern, "1 to 3 letters")
        with pytest.raises(ArgumentValueError, match="name must be 1 to 3 letters, got 'abcd'"):
            check_match("abcd", "name", pattern, "1 to 3 letters")
        with pytest.raises(ArgumentTypeError, match=r"name must be 1 to 3 letters \(a str\), got 1 of type int"):
            check_match(1, "name", pattern, "1 to 3 letters")

    def test_items_name_the_position(self) -> None:
        """
        A wrong item is named by its position.
        """
        with pytest.raises(ArgumentTypeError) as caught:
            check_items([1, "x"], "values", int, "an int")
        assert ("values[1]", "x") == (caught.value.argument, caught.value.value)

    def test_long_repr_is_cut(self) -> None:
        """
        A huge value is shown cut short, not whole.
        """
        with pytest.raises(ArgumentTypeError) as caught:
            check_count("x" * 10_000, "n")
        assert len(str(caught.value)) < 400

    def test_validators_name_the_class(self) -> None:
        """
        The attrs validators name the class being built.
        """
        import attrs  # noqa: PLC0415  # only here

        @attrs.frozen
        class Box:
            size: int = attrs.field(validator=count())
            open: bool = attrs.field(default=False, validator=flag())

        with pytest.raises(ArgumentValueError, match="Box: size must be 0 or more, got -1"):
            Box(-1)
        with pytest.raises(ArgumentTypeError, match="Box: open must be True or False, got 1 of type int"):
            Box(1, 1)  # type: ignore[arg-type]


class TestNothingChanges:
    def test_refused_mutators_leave_the_context(self) -> None:
        """
        A refused extend, update_scratchpad or merge changes nothing.
        """
        ctx = WorkingContext(messages=[Message("user", "hi")], scratchpad={"a": 1})
        before = ctx.freeze()
        with pytest.raises(ArgumentTypeError) as caught:
            ctx.extend([Message("user", "x"), "oops"])  # type: ignore[list-item]
        assert "oops" == caught.value.value
        with pytest.raises(ArgumentTypeError):
            ctx.update_scratchpad({"b": 2, 3: 4})  # type: ignore[dict-item]
        with pytest.raises(ArgumentTypeError):
            ctx.merge("other")  # type: ignore[arg-type]
        assert before == ctx.freeze()


# Every count a public constructor takes: (what, build). A count is an int (not a
# bool) of 0 or more; anything else is refused by the one rule.
COUNTS: list[tuple[str, Callable[[Any], object]]] = [
    ("WorkingContext(limit=)", lambda v: WorkingContext(limit=v)),
    ("Usage(input_tokens=)", lambda v: Usage(input_tokens=v)),
    ("Usage(output_tokens=)", lambda v: Usage(output_tokens=v)),
    ("Usage(cache_read_tokens=)", lambda v: Usage(cache_read_tokens=v)),
    ("Usage(cache_write_tokens=)", lambda v: Usage(cache_write_tokens=v)),
    ("Usage(reasoning_tokens=)", lambda v: Usage(reasoning_tokens=v)),
    ("LastNTurns(n)", LastNTurns),
    ("Since(index)", Since),
    ("TokenBudget(max_tokens)", TokenBudget),
    ("MessageContextManager(max_messages)", MessageContextManager),
    ("TokenBudgetContextManager(max_tokens)", TokenBudgetContextManager),
    ("SummaryContextManager(keep_recent=)", lambda v: SummaryContextManager(_summarize, keep_recent=v)),
    ("SummaryContextManager(max_summary_tokens=)", lambda v: SummaryContextManager(_summarize, max_summary_tokens=v)),
    ("Entry(turn)", lambda v: Entry("user", Message("user", "x"), v, NOW)),
    ("Kept(start)", lambda v: Kept(v, 10**6)),
    ("CacheRules(max_breakpoints)", lambda v: _rules(max_breakpoints=v)),
    ("CacheRules(default_minimum)", lambda v: _rules(default_minimum=v)),
    ("Breakpoint(message)", lambda v: Breakpoint(v, 0, "5m", 0)),
    ("Breakpoint(tokens)", lambda v: Breakpoint(0, 0, "5m", v)),
]

# Every flag: True or False, nothing else (not 0 or 1, not "yes").
FLAGS: list[tuple[str, Callable[[Any], object]]] = [
    ("WorkingContext(shared=)", lambda v: WorkingContext(shared=v)),
    ("WorkingContext(record=)", lambda v: WorkingContext(record=v)),
    ("Message(delta=)", lambda v: Message("user", "x", delta=v)),
    ("PrefixContext(cache_hint=)", lambda v: PrefixContext(cache_hint=v)),
    ("TokenBudget(include_system=)", lambda v: TokenBudget(9, include_system=v)),
    ("MessageContextManager(remove_tool_msgs=)", lambda v: MessageContextManager(remove_tool_msgs=v)),
    ("ToolResult(is_error=)", lambda v: ToolResult("ok", is_error=v)),
    ("SQLiteStore(read_only=)", lambda v: SQLiteStore(":memory:", read_only=v)),
]

NOT_INTS = st.one_of(
    st.booleans(),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.binary(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.decimals(allow_nan=False, allow_infinity=False),
)
NOT_FLAGS = st.one_of(
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.lists(st.booleans(), max_size=2),
)


def _refused(build: Callable[[Any], object], value: object, builtin: type[Exception]) -> WorkingCtxError:
    with pytest.raises(WorkingCtxError) as caught:
        build(value)
    error = caught.value
    assert isinstance(error, builtin)
    assert not isinstance(error, ValueError if builtin is TypeError else TypeError)
    assert error.value is value or (value != value and error.value != error.value)  # noqa: PLR0124  # NaN
    return error


class TestSweep:
    @pytest.mark.parametrize(("what", "build"), COUNTS, ids=[c[0] for c in COUNTS])
    @given(value=NOT_INTS)
    def test_a_count_refuses_every_non_int(self, what: str, build: Callable[[Any], object], value: object) -> None:
        """
        A count given a bool, a float, a str, bytes, a list or a Decimal raises
        a TypeError that is a WorkingCtxError, naming the argument and keeping the value.
        """
        error = _refused(build, value, TypeError)
        assert error.argument is not None
        assert error.argument in what

    @pytest.mark.parametrize(("what", "build"), COUNTS, ids=[c[0] for c in COUNTS])
    @given(value=st.integers(max_value=-1))
    def test_a_count_refuses_every_negative_int(self, what: str, build: Callable[[Any], object], value: int) -> None:
        """
        A negative count raises a ValueError that is a WorkingCtxError, keeping the value.
        """
        error = _refused(build, value, ValueError)
        assert error.argument is not None
        assert error.argument in what

    @pytest.mark.parametrize(("what", "build"), FLAGS, ids=[c[0] for c in FLAGS])
    @given(value=NOT_FLAGS)
    def test_a_flag_refuses_everything_but_a_bool(
        self, what: str, build: Callable[[Any], object], value: object
    ) -> None:
        """
        A flag given anything but True or False (0 and 1 included) raises a
        TypeError that is a WorkingCtxError, naming the argument and keeping the value.
        """
        error = _refused(build, value, TypeError)
        assert error.argument is not None
        assert error.argument in what


class TestNothingIsSaved:
    def test_refused_saves_leave_the_store(self) -> None:
        """
        A save refused for a bad argument writes nothing.
        """
        store = InMemoryStore()
        checkpoint = Checkpoint.capture(WorkingContext(messages=[Message("user", "hi")]))
        with pytest.raises(ArgumentTypeError):
            store.save(checkpoint, thread=3)  # type: ignore[arg-type]
        with pytest.raises(ArgumentValueError):
            store.save(checkpoint, thread="")
        with pytest.raises(ArgumentTypeError):
            store.save("checkpoint")  # type: ignore[arg-type]
        assert [] == list(store.list())

    def test_refused_notes_leave_a_recorded_context(self) -> None:
        """
        A note refused for its value changes neither the notes nor the history.
        """
        ctx = WorkingContext(record=True).note("a", 1)
        notes, history = dict(ctx.scratchpad), len(ctx.history)
        with pytest.raises(ArgumentTypeError):
            ctx.note("b", {1, 2})
        with pytest.raises(ArgumentValueError):
            ctx.note("b", [math.inf])
        assert notes == dict(ctx.scratchpad)
        assert history == len(ctx.history)
