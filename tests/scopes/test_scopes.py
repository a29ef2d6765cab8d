"""
Tests for workingctx.scopes: the protocols, the built-in scopes, the algebra
of their combinators, tool-pair integrity, the token budget, explain() and
WorkingContext.slice().
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.strategies import (
    block_transcripts,
    bounded_scopes,
    positional_scopes,
    predicate_scopes,
    prefixes,
    scope_transcripts,
    scope_trees,
    transcripts,
)
from workingctx import (
    ApproxTokenCounter,
    LastNTurns,
    Message,
    PrefixContext,
    RoleFilter,
    Since,
    TokenBudget,
    ToolCall,
    WholeExchanges,
    explain,
)
from workingctx.context import WorkingContext
from workingctx.exceptions import PositionalScopeError, ScopeError
from workingctx.managers import BudgetCut, fit
from workingctx.messages import ReasoningBlock, ToolResultBlock
from workingctx.scopes import (
    AllOf,
    AnyOf,
    CompletedToolSequences,
    ContextScope,
    Newest,
    Not,
    PendingCalls,
    PositionalScope,
    ScopeReport,
    Tagged,
    ValidRequest,
    surviving_indices,
)
from workingctx.scopes._exchanges import _merged_units, exchange_units, is_reasoning_only, starts_turn
from workingctx.tokens import counting
from workingctx.validity import STRUCTURAL_RULES, check_messages


def house() -> list[Message]:
    """
    The reference's transcript: a system message and three question/answer turns.
    """
    out = [Message("system", "House rules.")]
    for i in range(3):
        out += [Message("user", f"q{i}"), Message("assistant", f"a{i}")]
    return out


def house_ctx() -> WorkingContext:
    ctx = WorkingContext()
    ctx.append(Message("system", "House rules."))
    for i in range(3):
        ctx.append(Message("user", f"q{i}"), Message("assistant", f"a{i}"))
    return ctx


def kept(scope: Any, messages: list[Message]) -> list[Any]:
    return [messages[i].content for i in sorted(surviving_indices(scope, messages))]


def call(call_id: str, name: str = "lookup") -> ToolCall:
    return ToolCall(call_id, name, {"q": call_id})


def links(messages: list[Message]) -> list[tuple[int, int]]:
    """
    Every pair of indices that must stay together, found the slow, obvious way:
    a result and the latest earlier call with its id; a reasoning-only
    assistant message and the calling message right after it.
    """
    out = []
    for p, message in enumerate(messages):
        for answered in message.result_ids:
            callers = [q for q in range(p) if answered in messages[q].call_ids]
            if callers:
                out.append((callers[-1], p))
        if message.call_ids and p > 0 and is_reasoning_only(messages[p - 1]):
            out.append((p - 1, p))
    return out


def units(messages: list[Message]) -> list[int]:
    """
    The component of each index under links(), by repeated relabelling.
    """
    label = list(range(len(messages)))
    pairs = links(messages)
    changed = True
    while changed:
        changed = False
        for a, b in pairs:
            low = min(label[a], label[b])
            if label[a] != low or label[b] != low:
                label[a] = label[b] = low
                changed = True
    return label


def orphans(messages: list[Message]) -> set[int]:
    return {
        p
        for p, m in enumerate(messages)
        if any(not any(a in messages[q].call_ids for q in range(p)) for a in m.result_ids)
    }


def budget_oracle(scope: TokenBudget, messages: list[Message]) -> frozenset[int]:
    """
    The budget scope's answer by brute force: try every cut.
    """
    n = len(messages)
    counter = scope.counter or ApproxTokenCounter()
    counts = [counter.count_message(m) for m in messages]
    system = {i for i, m in enumerate(messages) if m.role == "system"} if scope.include_system else set()
    pairs = links(messages)

    def whole(c: int) -> bool:
        return not any(a < c <= b for a, b in pairs)

    def cost(c: int) -> int:
        return sum(counts[i] for i in system) + sum(counts[i] for i in range(c, n) if i not in system)

    def on_user(c: int) -> bool:
        if c in (0, n):
            return True
        rest = [m for m in messages[c:] if m.role != "system"]
        return bool(rest) and starts_turn(rest[0])

    fitting = [c for c in range(n + 1) if whole(c) and cost(c) <= scope.max_tokens]
    any_cut = min(fitting, default=n)
    user_cut = min((c for c in fitting if on_user(c)), default=n)
    if scope.start_on == "exchange":
        cut = any_cut
    elif scope.start_on == "user_only" or user_cut < n:
        cut = user_cut
    else:
        cut = any_cut
    return frozenset(system | set(range(cut, n)))


def assert_whole(messages: list[Message], kept_set: frozenset[int]) -> None:
    """
    No kept result without its call, no kept call without its later results,
    no reasoning-only message apart from its call, no orphan kept.
    """
    for a, b in links(messages):
        assert (a in kept_set) == (b in kept_set), (a, b, sorted(kept_set))
    assert not (orphans(messages) & kept_set)


class TestBuiltinsOnOneTranscript:
    def test_last_turn(self):
        """
        LastNTurns(1) keeps the system message and the last turn.
        """
        assert ["House rules.", "q2", "a2"] == [m.content for m in house_ctx().slice(LastNTurns(1)).messages]

    def test_not_tool_keeps_all(self):
        """
        Not(RoleFilter({"tool"})) keeps all seven messages of a transcript without tools.
        """
        assert len(house_ctx().slice(Not(RoleFilter(frozenset({"tool"})))).messages) == 7

    def test_last_two_turns(self):
        """
        LastNTurns(2) keeps the system message and the last two turns.
        """
        assert ["House rules.", "q1", "a1", "q2", "a2"] == [
            m.content for m in house_ctx().slice(LastNTurns(2)).messages
        ]

    def test_window_without_system(self):
        """
        A window intersected with a role complement keeps the window and drops the system message.
        """
        inside = AllOf((LastNTurns(2), Not(RoleFilter(frozenset({"system"})))))
        assert ["q1", "a1", "q2", "a2"] == [m.content for m in house_ctx().slice(inside).messages]

    def test_window_users(self):
        """
        A window intersected with the user role keeps the two user messages of the window, not six.
        """
        scope = AllOf((LastNTurns(2), RoleFilter(frozenset({"user"}))))
        assert ["q1", "q2"] == [m.content for m in house_ctx().slice(scope).messages]

    def test_not_window_is_complement(self):
        """
        Not(LastNTurns(2)) keeps exactly what the window drops, not nothing.
        """
        messages = house()
        assert ["q0", "a0"] == kept(Not(LastNTurns(2)), messages)
        assert surviving_indices(Not(LastNTurns(2)), messages) == frozenset(range(7)) - surviving_indices(
            LastNTurns(2), messages
        )

    def test_plain_lists(self):
        """
        surviving_indices works on plain lists, with the same answers as slice.
        """
        assert ["House rules.", "q2", "a2"] == kept(LastNTurns(1), house())
        assert ["q1", "a1", "q2", "a2"] == kept(LastNTurns(2) & ~RoleFilter({"system"}), house())


class TestProtocols:
    def test_builtins_are_scopes(self):
        """
        Predicate built-ins are ContextScopes; positional ones are PositionalScopes.
        """
        assert isinstance(RoleFilter({"user"}), ContextScope)
        assert not isinstance(RoleFilter({"user"}), PositionalScope)
        for scope in (LastNTurns(1), TokenBudget(10), CompletedToolSequences(), WholeExchanges(Since(0))):
            assert isinstance(scope, PositionalScope)

    @pytest.mark.parametrize(
        "scope",
        [
            LastNTurns(1),
            TokenBudget(10),
            CompletedToolSequences(),
            WholeExchanges(Since(0)),
            Newest(2),
            PendingCalls(),
            ValidRequest(Since(0)),
            BudgetCut(10),
            AllOf((RoleFilter({"user"}), LastNTurns(1))),
            AnyOf((Since(1), Not(LastNTurns(1)))),
            Not(Not(LastNTurns(1))),
        ],
    )
    def test_positional_matches_raises(self, scope):
        """
        matches() on a positional scope, or on a tree holding one, raises PositionalScopeError naming it.
        """
        with pytest.raises(PositionalScopeError, match=r"positional.*surviving_indices\(scope, messages\)") as info:
            scope.matches(Message("user", "q"), 0)
        assert repr(scope) in str(info.value)
        assert isinstance(info.value, TypeError)

    @given(scope_trees(positional=False), transcripts())
    def test_predicate_tree_matches_equals_indices(self, scope, messages):
        """
        For a predicate-only tree, surviving_indices equals filtering by matches.
        """
        expected = frozenset(i for i, m in enumerate(messages) if scope.matches(m, i))
        assert expected == surviving_indices(scope, messages)

    def test_user_predicate(self):
        """
        A class of one's own with matches() works with surviving_indices, combinators and operators.
        """

        class Short:
            def matches(self, message, _index):
                return len(message.text()) < 3

        assert isinstance(Short(), ContextScope)
        assert ["q1", "a1", "q2", "a2"] == kept(LastNTurns(2) & Short(), house())
        assert ["q1", "a1", "q2", "a2"] == kept(Short() & LastNTurns(2), house())
        assert AllOf((Short(), LastNTurns(2))).positional
        assert not AllOf((Short(), Since(2))).positional
        assert AllOf((Short(), Since(2))).matches(Message("user", "q0"), 2)

    def test_user_positional(self):
        """
        A class of one's own with a surviving_indices hook is positional, and composes.
        """

        class Newest:
            def surviving_indices(self, messages):
                return {len(messages) - 1} if messages else set()

        assert isinstance(Newest(), PositionalScope)
        assert ["a2"] == kept(Newest(), house())
        assert ["House rules.", "q0", "a0", "q1", "a1", "q2"] == kept(~AllOf((Newest(),)), house())
        with pytest.raises(PositionalScopeError):
            Not(Newest()).matches(Message("user", "q"), 0)

    @pytest.mark.parametrize("answer", [{7}, {-1}, {"1"}, {True}, "01", 3])
    def test_user_positional_bad_answer(self, answer):
        """
        A positional hook returning something other than indices of the list raises ScopeError naming it.
        """

        class Bad:
            def surviving_indices(self, _messages):
                return answer

        with pytest.raises(ScopeError, match=r"surviving_indices\(\) returned"):
            surviving_indices(Bad(), house())

    @pytest.mark.parametrize("value", [None, 3, "user", lambda _m, _i: True, {"user"}])
    def test_not_a_scope(self, value):
        """
        An object that is neither kind of scope is refused with a TypeError naming it.
        """
        with pytest.raises(TypeError, match="needs a scope, got") as info:
            surviving_indices(value, house())
        assert repr(value) in str(info.value)
        with pytest.raises(TypeError, match="needs a scope"):
            house_ctx().slice(value)


class TestLastNTurns:
    def test_opening_messages_join_the_first_turn(self):
        """
        Messages before the first user message belong to the first turn.
        """
        messages = [Message("system", "s"), Message("assistant", "hello"), *house()[1:]]
        assert ["s", "hello", "q0", "a0", "q1", "a1", "q2", "a2"] == kept(LastNTurns(3), messages)
        assert ["s", "q1", "a1", "q2", "a2"] == kept(LastNTurns(2), messages)
        assert ["s", "hello"] == kept(LastNTurns(1), messages[:2])

    def test_fewer_turns_than_n_keeps_all(self):
        """
        With n turns or fewer, everything is kept.
        """
        assert len(kept(LastNTurns(10), house())) == 7
        assert [] == kept(LastNTurns(3), [])

    def test_zero_keeps_system(self):
        """
        LastNTurns(0) keeps only the system messages, wherever they are.
        """
        messages = [*house(), Message("system", "late rule"), Message("user", "q3")]
        assert ["House rules.", "late rule"] == kept(LastNTurns(0), messages)

    def test_system_messages_anywhere(self):
        """
        Every system message is kept, also one in the middle of a dropped turn.
        """
        messages = house()
        messages.insert(2, Message("system", "mid"))
        assert ["House rules.", "mid", "q2", "a2"] == kept(LastNTurns(1), messages)

    def test_tool_result_user_message_is_no_turn(self):
        """
        A user message carrying tool results answers a call; it does not start a turn.
        """
        messages = [
            Message("user", "q0"),
            Message("assistant", "a0"),
            Message("user", "q1"),
            Message("assistant", tool_calls=(call("c1"),)),
            Message("user", (ToolResultBlock("c1", "42"),)),
            Message("assistant", "a1"),
        ]
        assert [2, 3, 4, 5] == sorted(surviving_indices(LastNTurns(1), messages))


class TestLaws:
    @given(scope_trees(), scope_trees(), scope_transcripts())
    def test_de_morgan(self, a, b, messages):
        """
        ~(a & b) keeps what ~a | ~b keeps, and ~(a | b) what ~a & ~b keeps.
        """
        assert surviving_indices(~(a & b), messages) == surviving_indices(~a | ~b, messages)
        assert surviving_indices(Not(AnyOf((a, b))), messages) == surviving_indices(AllOf((Not(a), Not(b))), messages)

    @given(scope_trees(), scope_transcripts())
    def test_double_negation_and_idempotence(self, s, messages):
        """
        Not(Not(s)) keeps what s keeps; s & s and s | s do too.
        """
        expected = surviving_indices(s, messages)
        assert expected == surviving_indices(Not(Not(s)), messages)
        assert expected == surviving_indices(s & s, messages)
        assert expected == surviving_indices(s | s, messages)

    @given(scope_trees(), scope_trees(), scope_trees(), scope_transcripts())
    def test_commutative_associative(self, a, b, c, messages):
        """
        & and | are commutative and associative.
        """
        for op in (AllOf, AnyOf):
            assert surviving_indices(op((a, b)), messages) == surviving_indices(op((b, a)), messages)
            left = op((op((a, b)), c))
            right = op((a, op((b, c))))
            assert surviving_indices(left, messages) == surviving_indices(right, messages)

    @given(scope_trees(), scope_transcripts())
    def test_complement(self, s, messages):
        """
        s | ~s keeps everything and s & ~s nothing.
        """
        assert frozenset(range(len(messages))) == surviving_indices(s | ~s, messages)
        assert frozenset() == surviving_indices(s & ~s, messages)

    @given(scope_trees(), scope_transcripts(broken=True))
    def test_indices_in_range(self, s, messages):
        """
        Every scope keeps only indices of the list, on any transcript.
        """
        assert surviving_indices(s, messages) <= frozenset(range(len(messages)))

    def test_empty_combinators(self):
        """
        AllOf(()) keeps everything; AnyOf(()) keeps nothing.
        """
        assert len(kept(AllOf(()), house())) == 7
        assert [] == kept(AnyOf(()), house())


class TestOperators:
    def test_build_combinators(self):
        """
        &, | and ~ build AllOf, AnyOf and Not; chains flatten; ~Not(s) is s.
        """
        a, b, c = LastNTurns(1), RoleFilter({"user"}), Tagged("x")
        assert AllOf((a, b)) == a & b
        assert AnyOf((a, b)) == a | b
        assert Not(a) == ~a
        assert AllOf((a, b, c)) == a & b & c
        assert AnyOf((a, b, c)) == a | (b | c)
        assert a is ~~a

    @pytest.mark.parametrize("other", [3, "user", None, [LastNTurns(1)]])
    def test_non_scope_operand(self, other):
        """
        & and | with a non-scope raise a TypeError naming the value, on either side.
        """
        for build in (lambda: LastNTurns(1) & other, lambda: other | Since(2), lambda: RoleFilter({"user"}) | other):
            with pytest.raises(TypeError, match="needs a scope") as info:
                build()
            assert repr(other) in str(info.value)

    def test_str_is_an_expression(self):
        """
        str() prints the operator form with the parentheses it needs; repr() the constructors.
        """
        scope = (LastNTurns(2) | Since(3)) & ~(RoleFilter({"user", "system"}) | Tagged("x"))
        assert "(LastNTurns(2) | Since(3)) & ~(RoleFilter({'system', 'user'}) | Tagged('x'))" == str(scope)
        assert (
            "AllOf((AnyOf((LastNTurns(2), Since(3))), Not(AnyOf((RoleFilter({'system', 'user'}), Tagged('x'))))))"
            == repr(scope)
        )
        assert "AllOf((Since(1),))" == str(AllOf((Since(1),)))


class TestValues:
    @given(scope_trees())
    def test_round_trips(self, scope):
        """
        Scopes pickle, deep-copy and eval(repr()) to equal values with equal hashes.
        """
        names: dict[str, Any] = {"WholeExchanges": WholeExchanges}
        names |= {
            cls.__name__: cls
            for cls in (
                AllOf,
                AnyOf,
                Not,
                LastNTurns,
                RoleFilter,
                Tagged,
                Since,
                TokenBudget,
                CompletedToolSequences,
                Newest,
                PendingCalls,
                ValidRequest,
            )
        }
        for copied in (pickle.loads(pickle.dumps(scope)), copy.deepcopy(scope), eval(repr(scope), names)):  # noqa: S307  # repr is constructor syntax
            assert scope == copied
            assert hash(scope) == hash(copied)

    def test_frozen(self):
        """
        Scopes cannot be changed in place.
        """
        scope = LastNTurns(2)
        with pytest.raises(AttributeError):
            scope.n = 3  # type: ignore[misc]

    def test_role_filter_inputs(self):
        """
        RoleFilter accepts any iterable of roles, or one role string, and stores a frozenset.
        """
        assert RoleFilter(["user", "tool"]) == RoleFilter(frozenset({"tool", "user"}))
        assert RoleFilter("user").roles == frozenset({"user"})
        assert isinstance(RoleFilter(("user",)).roles, frozenset)


class TestBadInput:
    @pytest.mark.parametrize(
        ("build", "error", "pattern"),
        [
            (lambda: LastNTurns(-1), ScopeError, r"LastNTurns\(n\): n must be 0 or more, got -1"),
            (lambda: LastNTurns("2"), TypeError, r"n must be an int, got '2' of type str"),
            (lambda: LastNTurns(True), TypeError, r"got True of type bool"),  # noqa: FBT003  # the bad input
            (lambda: LastNTurns(2.0), TypeError, r"got 2.0 of type float"),
            (lambda: Since(-3), ScopeError, r"Since\(index\): index must be 0 or more, got -3"),
            (lambda: RoleFilter({"bot"}), ScopeError, r"unknown role\(s\) 'bot'"),
            (lambda: RoleFilter(3), TypeError, r"RoleFilter needs roles, got 3"),
            (lambda: Tagged(3), TypeError, r"got 3 of type int"),
            (lambda: AllOf(LastNTurns(2)), TypeError, r"expected a sequence of scopes, got LastNTurns\(2\)"),
            (lambda: AnyOf((LastNTurns(2), 7)), TypeError, r"scopes\[1\] needs a scope, got 7"),
            (lambda: Not("user"), TypeError, r"Not\(\) needs a scope, got 'user'"),
            (lambda: WholeExchanges(3), TypeError, r"WholeExchanges\(\) needs a scope, got 3"),
            (lambda: WholeExchanges(Since(0), mode="both"), ScopeError, r"got 'both'"),
            (lambda: TokenBudget(-1), ScopeError, r"max_tokens\) must be 0 or more, got -1"),
            (lambda: TokenBudget("9"), TypeError, r"got '9' of type str"),
            (lambda: TokenBudget(9, counter=object()), TypeError, r"count_message"),
            (lambda: TokenBudget(9, start_on="human"), ScopeError, r"got 'human'"),
            (lambda: TokenBudget(9, include_system="no"), TypeError, r"include_system=...\) must be True or False"),
        ],
    )
    def test_refused_at_construction(self, build, error, pattern):
        """
        Bad arguments are refused when the scope is built, with a message naming the value.
        """
        with pytest.raises(error, match=pattern):
            build()


class TestCompletedToolSequences:
    def test_complete_and_pending(self):
        """
        A call with its results and final answer is complete; one waiting for its answer is not.
        """
        messages = [
            Message("user", "q"),
            Message("assistant", tool_calls=(call("c1"), call("c2"))),
            Message("tool", "r1", tool_call_id="c1"),
            Message("tool", "r2", tool_call_id="c2"),
            Message("assistant", "answer"),
            Message("user", "q2"),
            Message("assistant", tool_calls=(call("c3"),)),
            Message("tool", "r3", tool_call_id="c3"),
        ]
        assert [1, 2, 3, 4] == sorted(surviving_indices(CompletedToolSequences(), messages))

    def test_missing_result_is_incomplete(self):
        """
        A final answer given before every call was answered leaves the sequence incomplete.
        """
        messages = [
            Message("assistant", tool_calls=(call("c1"), call("c2"))),
            Message("tool", "r1", tool_call_id="c1"),
            Message("assistant", "answer"),
        ]
        assert frozenset() == surviving_indices(CompletedToolSequences(), messages)

    def test_chained_reasoning_and_untagged(self):
        """
        Chained calls, a reasoning-only message before the call and an id-less tool message join the sequence.
        """
        messages = [
            Message("user", "q"),
            Message("assistant", (ReasoningBlock("think"),)),
            Message("assistant", tool_calls=(call("c1"),)),
            Message("tool", "r1", tool_call_id="c1"),
            Message("tool", "extra", name="lookup"),
            Message("assistant", tool_calls=(call("c2"),)),
            Message("tool", "r2", tool_call_id="c2"),
            Message("assistant", "answer"),
            Message("user", "thanks"),
        ]
        assert [1, 2, 3, 4, 5, 6, 7] == sorted(surviving_indices(CompletedToolSequences(), messages))

    def test_interrupted_by_user(self):
        """
        A user message before the final answer ends the sequence incomplete.
        """
        messages = [
            Message("assistant", tool_calls=(call("c1"),)),
            Message("tool", "r1", tool_call_id="c1"),
            Message("user", "never mind"),
            Message("assistant", "ok"),
        ]
        assert frozenset() == surviving_indices(CompletedToolSequences(), messages)

    @given(scope_transcripts())
    def test_removing_keeps_pairs(self, messages):
        """
        Removing completed sequences from a valid transcript never splits an exchange.
        """
        assert_whole(messages, surviving_indices(~CompletedToolSequences(), messages))


class TestWholeExchanges:
    def transcript(self) -> list[Message]:
        return [
            Message("user", "q"),
            Message("assistant", (ReasoningBlock("think"),)),
            Message("assistant", tool_calls=(call("c1"), call("c2"))),
            Message("tool", "r1", tool_call_id="c1"),
            Message("tool", "r2", tool_call_id="c2"),
            Message("assistant", "answer"),
        ]

    def test_expand_adds_partners(self):
        """
        expand adds the call, its other results and its reasoning to a kept result.
        """
        scope = WholeExchanges(Since(4) & ~Since(5))
        assert [1, 2, 3, 4] == sorted(surviving_indices(scope, self.transcript()))

    def test_drop_removes_partial(self):
        """
        drop removes an exchange the inner scope kept only part of.
        """
        scope = WholeExchanges(Since(2), mode="drop")
        assert [5] == sorted(surviving_indices(scope, self.transcript()))
        assert [1, 2, 3, 4, 5] == sorted(surviving_indices(WholeExchanges(Since(1), mode="drop"), self.transcript()))

    def test_pending_call_kept(self):
        """
        A call at the end still waiting for results is kept as it is, in both modes.
        """
        messages = [*self.transcript(), Message("assistant", tool_calls=(call("c9"),))]
        for mode in ("expand", "drop"):
            assert 6 in surviving_indices(WholeExchanges(Since(6), mode=mode), messages)

    def test_orphan_dropped(self):
        """
        A result whose call is not in the list is dropped in both modes; an id-less tool message is its own unit.
        """
        messages = [Message("tool", "lost", tool_call_id="gone"), Message("tool", "note", name="lookup")]
        for mode in ("expand", "drop"):
            assert [1] == sorted(surviving_indices(WholeExchanges(Since(0), mode=mode), messages))

    def test_one_message_answering_two_exchanges(self):
        """
        A message answering calls of two assistant messages joins both exchanges into one.
        """
        messages = [
            Message("assistant", tool_calls=(call("c1"),)),
            Message("assistant", tool_calls=(call("c2"),)),
            Message("user", (ToolResultBlock("c1", "r1"), ToolResultBlock("c2", "r2"))),
            Message("assistant", "done"),
        ]
        assert [0, 1, 2] == sorted(surviving_indices(WholeExchanges(Since(1) & ~Since(2)), messages))
        assert [3] == sorted(surviving_indices(WholeExchanges(Since(1), mode="drop"), messages))

    @given(st.one_of(scope_transcripts(broken=True), block_transcripts(broken=True)))
    def test_labelling_matches_union_find(self, messages):
        """
        The one-pass exchange labelling agrees with union-find on every transcript.
        """
        assert _merged_units(messages) == exchange_units(messages)

    @given(scope_trees(), st.sampled_from(["expand", "drop"]), block_transcripts(broken=True))
    def test_integrity_with_result_blocks(self, inner, mode, messages):
        """
        Integrity holds when results arrive as blocks, several to a message.
        """
        assert_whole(messages, surviving_indices(WholeExchanges(inner, mode=mode), messages))

    @given(scope_trees(), st.sampled_from(["expand", "drop"]), scope_transcripts(broken=True))
    def test_integrity(self, inner, mode, messages):
        """
        Any scope wrapped in WholeExchanges keeps no result without its call, no call without its
        later results, no reasoning apart from its call; expand only adds, drop only removes.
        """
        inner_set = surviving_indices(inner, messages)
        result = surviving_indices(WholeExchanges(inner, mode=mode), messages)
        assert_whole(messages, result)
        unit = units(messages)
        tainted = {i for i in range(len(messages)) if unit[i] in {unit[o] for o in orphans(messages)}}
        if mode == "drop":
            assert result <= inner_set
        else:
            assert inner_set - tainted <= result
            assert all(any(unit[i] == unit[j] for j in inner_set) for i in result - inner_set)

    @given(scope_trees(), scope_transcripts())
    def test_slice_integrity(self, inner, messages):
        """
        A slice through the integrity scope holds whole exchanges only.
        """
        ctx = WorkingContext(messages=messages)
        sliced = list(ctx.slice(WholeExchanges(inner)).messages)
        assert not orphans(sliced)
        asked = [a for m in sliced for a in m.call_ids]
        answered_in_input = {a for m in messages for a in m.result_ids}
        answered_in_slice = [a for m in sliced for a in m.result_ids]
        for a in asked:
            assert (a in answered_in_input) == (a in answered_in_slice)


class TestWholeExchangesDropsBrokenExchanges:
    def test_a_call_whose_results_never_come_is_dropped_mid_transcript(self):
        """
        mode="drop" drops a call whose results do not follow it before other
        messages; mode="expand" keeps it, as the inner scope chose it.
        """
        messages = [
            Message("user", "q0"),
            Message("assistant", tool_calls=(call("c1"),)),
            Message("user", "q1"),
            Message("assistant", "a1"),
        ]
        assert [0, 2, 3] == sorted(surviving_indices(WholeExchanges(Since(0), mode="drop"), messages))
        assert [0, 1, 2, 3] == sorted(surviving_indices(WholeExchanges(Since(0)), messages))

    def test_a_call_missing_one_of_its_results_goes_with_the_results_it_has(self):
        """
        An exchange with one result of two dropped whole in drop mode; the same
        exchange pending at the end is kept.
        """
        exchange = [
            Message("assistant", tool_calls=(call("c1"), call("c2"))),
            Message("tool", "r1", tool_call_id="c1"),
        ]
        mid = [Message("user", "q0"), *exchange, Message("user", "q1")]
        assert [0, 3] == sorted(surviving_indices(WholeExchanges(Since(0), mode="drop"), mid))
        end = [Message("user", "q0"), *exchange]
        assert [0, 1, 2] == sorted(surviving_indices(WholeExchanges(Since(0), mode="drop"), end))

    @given(scope_trees(), st.one_of(scope_transcripts(broken=True), block_transcripts(broken=True)))
    def test_drop_keeps_no_dangling_call(self, inner, messages):
        """
        Property: what mode="drop" keeps has no call left without its results
        before other kept messages (the rules' dangling-call), and is whole.
        """
        kept = sorted(surviving_indices(WholeExchanges(inner, mode="drop"), messages))
        sub = [messages[i] for i in kept]
        assert "dangling-call" not in [p.rule for p in check_messages(sub, provider=None)]
        assert_whole(messages, frozenset(kept))


class TestNewest:
    def test_the_newest_of_another_scope(self):
        """
        Newest(n, scope) keeps the n highest indices the scope keeps; Newest(n) the last n messages.
        """
        messages = house()
        assert [5, 6] == sorted(surviving_indices(Newest(2), messages))
        assert [4, 6] == sorted(surviving_indices(Newest(2, ~RoleFilter({"system", "user"}) | Since(6)), messages))
        assert [0, 1, 2, 3, 4, 5, 6] == sorted(surviving_indices(Newest(50), messages))
        assert [] == sorted(surviving_indices(Newest(0, RoleFilter({"user"})), messages))
        assert [3, 5] == sorted(surviving_indices(Newest(2, RoleFilter({"user"})), messages))

    def test_prints_and_composes(self):
        """
        Newest prints as a constructor call and in operator form, and composes with &, | and ~.
        """
        scope = Newest(3, ~RoleFilter({"system"}))
        assert "Newest(3, Not(RoleFilter({'system'})))" == repr(scope)
        assert "Newest(3)" == repr(Newest(3))
        assert "~Newest(3, ~RoleFilter({'system'})) | Since(2)" == str(~scope | Since(2))
        assert [0] == sorted(surviving_indices(~Newest(6), house()))
        assert Newest(3) == Newest(3, AllOf(()))
        with pytest.raises(PositionalScopeError, match="positional"):
            Newest(1).matches(Message("user", "q"), 0)

    @pytest.mark.parametrize(
        ("make", "error", "match"),
        [
            (lambda: Newest(-1), ScopeError, r"Newest\(n\): n must be 0 or more, got -1"),
            (lambda: Newest("2"), TypeError, r"n must be an int, got '2'"),
            (lambda: Newest(True), TypeError, r"n must be an int, got True"),  # noqa: FBT003  # a bool on purpose
            (lambda: Newest(2, 3), TypeError, r"Newest\(n, scope\) needs a scope, got 3"),
        ],
    )
    def test_bad_input(self, make, error, match):
        """
        A bad count or a non-scope is refused, naming the value.
        """
        with pytest.raises(error, match=match):
            make()

    @given(st.integers(0, 8), scope_trees(), scope_transcripts(broken=True))
    def test_is_the_tail_of_the_inner_answer(self, n, inner, messages):
        """
        Property: Newest(n, s) is the n largest indices of s, a subset of s, of
        size min(n, |s|).
        """
        inner_set = surviving_indices(inner, messages)
        kept = surviving_indices(Newest(n, inner), messages)
        assert kept <= inner_set
        assert len(kept) == min(n, len(inner_set))
        assert all(i < j for i in inner_set - kept for j in kept)


class TestPendingCalls:
    @given(transcripts())
    def test_the_waiting_exchange_at_the_end(self, messages):
        """
        Property: on a valid transcript, PendingCalls keeps a suffix that the
        rules call pending at the end, and nothing when nothing waits.
        """
        kept = sorted(surviving_indices(PendingCalls(), messages))
        rules = [p.rule for p in check_messages(messages, provider=None)]
        if "pending-at-end" in rules:
            assert kept
            assert kept == list(range(kept[0], len(messages)))
            assert messages[kept[0]].call_ids or is_reasoning_only(messages[kept[0]])
        else:
            assert [] == kept


class TestValidRequest:
    @given(scope_trees(), st.booleans(), st.one_of(scope_transcripts(broken=True), block_transcripts(broken=True)))
    def test_what_it_keeps_is_a_valid_request(self, inner, user_first, messages):
        """
        Property: ValidRequest keeps every system message, and what it keeps
        breaks no tool rule; with user_first, its first non-system message is
        a user turn whenever one is kept or comes before it.
        """
        scope = ValidRequest(inner, user_first=user_first)
        kept = sorted(surviving_indices(scope, messages))
        sub = [messages[i] for i in kept]
        assert {i for i, m in enumerate(messages) if m.role == "system"} <= set(kept)
        rules = {p.rule for p in check_messages(sub, provider=None)}
        assert not rules & set(STRUCTURAL_RULES)
        assert (kept, scope.repair(messages)[1]) == scope.repair(messages)
        others = [i for i in kept if messages[i].role != "system"]
        if user_first and others:
            reachable = [i for i in range(len(messages)) if starts_turn(messages[i]) and (i < others[0] or i in kept)]
            assert not reachable or starts_turn(messages[others[0]])

    def test_reports_what_it_repaired(self):
        """
        repair() names the rules it enforced; an already valid request needs none.
        """
        messages = [
            Message("user", "q"),
            Message("tool", "lost", tool_call_id="gone"),
            Message("assistant", "a"),
        ]
        assert ([0, 2], ["orphan-result"]) == ValidRequest(Since(0)).repair(messages)
        assert ([0, 2], []) == ValidRequest(Since(0)).repair(messages, [0, 2])
        assert "ValidRequest(Since(0), user_first=False)" == repr(ValidRequest(Since(0), user_first=False))

    def test_bad_input(self):
        """
        A non-scope or a non-bool flag is refused.
        """
        with pytest.raises(TypeError, match=r"ValidRequest\(\) needs a scope, got 3"):
            ValidRequest(3)
        with pytest.raises(TypeError, match=r"user_first=...\) must be True or False, got 1"):
            ValidRequest(Since(0), user_first=1)


class TestTokenBudget:
    def transcript(self) -> list[Message]:
        return [
            Message("system", "Be brief."),
            Message("user", "What is the weather in Oslo, and should I bring an umbrella today?"),
            Message("assistant", tool_calls=(ToolCall("c1", "weather", {"city": "Oslo"}),)),
            Message("tool", "rain, 9 degrees", tool_call_id="c1"),
            Message("assistant", "Rain: bring one."),
        ]

    def test_keeps_what_fits(self):
        """
        Everything that fits is kept; a tight budget keeps the newest whole exchange and the system message.
        """
        messages = self.transcript()
        total = ApproxTokenCounter().count(messages)
        assert frozenset(range(5)) == surviving_indices(TokenBudget(total), messages)
        assert [0, 2, 3, 4] == sorted(surviving_indices(TokenBudget(total - 1), messages))
        assert [0, 4] == sorted(surviving_indices(TokenBudget(15), messages))
        assert [0] == sorted(surviving_indices(TokenBudget(0), messages))

    def test_start_on(self):
        """
        start_on="user" falls back to whole exchanges when no turn fits; "user_only" keeps only the system then.
        """
        messages = self.transcript()
        assert [0, 2, 3, 4] == sorted(surviving_indices(TokenBudget(50, start_on="user"), messages))
        assert [0] == sorted(surviving_indices(TokenBudget(50, start_on="user_only"), messages))
        more = [*messages, Message("user", "And tomorrow?"), Message("assistant", "Sun.")]
        assert [0, 5, 6] == sorted(surviving_indices(TokenBudget(50, start_on="user"), more))
        assert [0, 2, 3, 4, 5, 6] == sorted(surviving_indices(TokenBudget(50), more))

    def test_system_over_budget(self):
        """
        When the system messages alone exceed the budget, only they are kept.
        """
        assert [0] == sorted(surviving_indices(TokenBudget(1), self.transcript()))
        assert [] == sorted(surviving_indices(TokenBudget(1, include_system=False), self.transcript()))

    def test_reasoning_stays_with_call(self):
        """
        A reasoning-only message before a call is never cut from it.
        """
        messages = [
            Message("user", "q"),
            Message("assistant", (ReasoningBlock("x" * 40),)),
            Message("assistant", tool_calls=(call("c1"),)),
            Message("tool", "r1", tool_call_id="c1"),
            Message("assistant", "done"),
        ]
        budget = ApproxTokenCounter().count(messages[2:])
        assert [4] == sorted(surviving_indices(TokenBudget(budget), messages))
        assert [1, 2, 3, 4] == sorted(surviving_indices(TokenBudget(budget + 14), messages))

    def test_orphan_does_not_block(self):
        """
        A result whose call is not in the list does not stop the budget from keeping what is before it.
        """
        messages = [
            Message("user", "q0"),
            Message("assistant", "a0"),
            Message("tool", "lost", tool_call_id="gone"),
            Message("user", "q1"),
            Message("assistant", "a1"),
        ]
        assert [0, 1, 2, 3, 4] == sorted(surviving_indices(TokenBudget(1000), messages))
        assert [1, 2, 3, 4] == sorted(
            surviving_indices(TokenBudget(ApproxTokenCounter().count(messages[1:])), messages)
        )

    def test_uses_cached_counts(self):
        """
        Counts are taken once per message: asking again counts nothing new, and only what is reached is counted.
        """
        calls = []

        class Spy:
            name = "spy"

            def count_message(self, message):
                calls.append(message)
                return len(message.text()) + 4

        messages = [Message("system", "rules")] + [Message("user", f"q{i}") for i in range(100)]
        scope = TokenBudget(50, counter=Spy())
        first = surviving_indices(scope, messages)
        assert len(calls) < 20
        calls.clear()
        assert first == surviving_indices(scope, messages)
        assert [] == calls

    @given(
        scope_transcripts(broken=True),
        st.integers(0, 400),
        st.sampled_from(["exchange", "user", "user_only"]),
        st.booleans(),
    )
    def test_matches_oracle(self, messages, budget, start_on, include_system):
        """
        The budget keeps exactly the longest fitting suffix of whole exchanges a brute-force search finds.
        """
        scope = TokenBudget(budget, start_on=start_on, include_system=include_system)
        assert budget_oracle(scope, messages) == surviving_indices(scope, messages)

    @given(block_transcripts(broken=True), st.integers(0, 400), st.sampled_from(["exchange", "user", "user_only"]))
    def test_matches_oracle_with_result_blocks(self, messages, budget, start_on):
        """
        The budget agrees with the brute-force search when results arrive as blocks.
        """
        scope = TokenBudget(budget, start_on=start_on)
        assert budget_oracle(scope, messages) == surviving_indices(scope, messages)

    @given(scope_transcripts(), st.integers(0, 400), st.sampled_from(["exchange", "user", "user_only"]))
    def test_fits_and_whole(self, messages, budget, start_on):
        """
        The output fits (unless the system messages alone do not), is a system set plus a suffix, and is whole.
        """
        result = surviving_indices(TokenBudget(budget, start_on=start_on), messages)
        counter = ApproxTokenCounter()
        system = {i for i, m in enumerate(messages) if m.role == "system"}
        tokens = sum(counter.count_message(messages[i]) for i in result)
        assert tokens <= budget or result == system
        assert system <= result
        rest = sorted(result - system)
        if rest:
            assert [i for i in range(rest[0], len(messages)) if i not in system] == rest
        assert_whole(messages, result)

    @given(scope_transcripts(), st.integers(0, 400))
    def test_user_start_never_empty_when_an_exchange_fits(self, messages, budget):
        """
        With start_on="user", the budget keeps more than the system messages whenever the newest
        whole exchange fits, and its tail starts on a user turn whenever one fits.
        """
        system = {i for i, m in enumerate(messages) if m.role == "system"}
        loose = surviving_indices(TokenBudget(budget), messages) - system
        strict = surviving_indices(TokenBudget(budget, start_on="user_only"), messages) - system
        result = surviving_indices(TokenBudget(budget, start_on="user"), messages) - system
        assert bool(result) == bool(loose)
        if strict:
            assert strict == result


class TestExplain:
    def test_report(self):
        """
        explain() reports the kept and dropped indices, the tokens saved and where the cache breaks.
        """
        report = explain(LastNTurns(1), house())
        assert isinstance(report, ScopeReport)
        assert (0, 5, 6) == report.kept
        assert (1, 2, 3, 4) == report.dropped
        assert 31 == report.kept_tokens + report.saved_tokens
        assert 1 == report.cache_break
        assert 7 == report.cached_tokens
        assert str(report).startswith("LastNTurns(1) keeps 3 of 7 messages: 0, 5-6\ndrops 4: 1-4\n")

    def test_nothing_dropped_and_context(self):
        """
        explain() accepts a context; with nothing dropped the cached prefix is intact.
        """
        ctx = WorkingContext(prefix=PrefixContext(system_prompt="p"), messages=house())
        report = explain(Since(0), ctx)
        assert report.cache_break is None
        assert report.cached_tokens == report.kept_tokens
        assert "intact" in str(report)
        assert 7 == len(ctx.messages)

    def test_prefix_stays_cached_when_the_tail_breaks_first(self):
        """
        On a context, a break at the first tail message still leaves the prefix
        cached: the report counts the prefix's tokens and says so, never "the 0
        tokens before it"; on a bare list nothing stays cached.
        """
        ctx = WorkingContext(prefix=PrefixContext(system_prompt="Stay terse."), messages=house()[1:])
        report = explain(Since(1), ctx)
        assert 0 == report.cache_break
        assert 0 == report.cached_tokens
        assert ctx.counter.count(ctx.prefix.as_messages()) == report.prefix_tokens > 0
        assert str(report).endswith(f"breaks at message 0; the prefix ({report.prefix_tokens} tokens) stays cached")
        bare = explain(Since(1), list(ctx.messages))
        assert 0 == bare.prefix_tokens
        assert str(bare).endswith("breaks at message 0; nothing stays cached")
        later = explain(~Since(4), ctx)
        total = later.cached_tokens + later.prefix_tokens
        assert str(later).endswith(
            f"the {total} tokens before it stay cached, the prefix's {later.prefix_tokens} included"
        )

    def test_bad_input(self):
        """
        explain() names a value that is not a transcript, or an item that is not a message.
        """
        with pytest.raises(TypeError, match="needs a sequence of messages or a context, got 42"):
            explain(LastNTurns(1), 42)
        with pytest.raises(TypeError, match="got 'hi' of type str at position 1"):
            explain(LastNTurns(1), [Message("user", "q"), "hi"])


class TestSlice:
    def test_private_copy(self):
        """
        A slice is a new private context with the parent's prefix; writes to it never reach the parent.
        """
        prefix = PrefixContext(system_prompt="p")
        ctx = WorkingContext(prefix=prefix, messages=house(), shared=True)
        ctx.note("k", {"v": 1})
        part = ctx.slice(LastNTurns(1))
        part.append(Message("user", "q3"))
        assert 7 == len(ctx.messages)
        assert part.prefix is prefix
        assert not part.shared
        assert {"v": 1} == part.get("k")

    @given(scope_trees(), scope_transcripts())
    def test_slice_is_surviving_indices(self, scope, messages):
        """
        slice(scope) holds exactly the messages surviving_indices names, in order.
        """
        ctx = WorkingContext(messages=messages)
        expected = [messages[i] for i in sorted(surviving_indices(scope, messages))]
        assert expected == list(ctx.slice(scope).messages)


@given(predicate_scopes() | positional_scopes(), transcripts())
def test_builtin_predicates_fast_path(scope, messages):
    """
    A built-in predicate's own index path equals filtering by matches.
    """
    if scope.positional:
        with pytest.raises(PositionalScopeError):
            scope.matches(messages[0] if messages else Message("user", "q"), 0)
    else:
        assert frozenset(i for i, m in enumerate(messages) if scope.matches(m, i)) == surviving_indices(scope, messages)


class TestTokenBudgetFromTheTailView:
    @given(
        st.one_of(transcripts(), block_transcripts(broken=True), scope_transcripts(broken=True)),
        st.integers(0, 400),
        st.sampled_from(["exchange", "user", "user_only"]),
    )
    def test_tail_view_gives_the_plain_list_answer(self, transcript, budget, start_on):
        """
        A context's tail view (running sums, system positions, clean cuts)
        answers exactly as the plain list does.
        """
        scope = TokenBudget(budget, start_on=start_on)
        ctx = WorkingContext(messages=transcript)
        assert surviving_indices(scope, transcript) == surviving_indices(scope, ctx.tail_view())

    @given(transcripts(), transcripts(), st.integers(0, 300))
    def test_an_older_view_still_answers_for_its_length(self, first, more, budget):
        """
        A view taken before more messages arrived answers for the messages it
        saw, even after the context's index has grown past them.
        """
        scope = TokenBudget(budget, start_on="user")
        ctx = WorkingContext(messages=first)
        view = ctx.tail_view()
        ctx.extend(more)
        ctx.tail_view()
        assert surviving_indices(scope, first) == surviving_indices(scope, view)


class TestDeepNesting:
    def test_alternating_operators_refused_clearly(self):
        """
        Building 5,000 alternating & and | scopes one at a time raises
        ScopeError saying how to combine them flat, never RecursionError.
        """
        from workingctx.scopes import RoleFilter, Since  # noqa: PLC0415

        def build(steps: int) -> Any:
            scope: Any = RoleFilter({"user"})
            for step in range(steps):
                scope = (scope & Since(0)) if step % 2 else (scope | RoleFilter({"tool"}))
            return scope

        with pytest.raises(ScopeError, match=r"nest scopes 101 levels deep.*AllOf\(\[a, b, c"):
            build(5_000)

    def test_deepest_allowed_tree_works_everywhere(self):
        """
        A tree exactly MAX_SCOPE_DEPTH levels deep (&, |, ~ and WholeExchanges
        alternating) slices, explains, prints, hashes, compares, pickles and copies.
        """
        from workingctx.scopes import (  # noqa: PLC0415
            MAX_SCOPE_DEPTH,
            LastNTurns,
            RoleFilter,
            Since,
            WholeExchanges,
            explain,
        )
        from workingctx.scopes._algebra import nesting  # noqa: PLC0415

        scope: Any = RoleFilter({"user"})
        wrappers = [
            lambda s: s & Since(0),
            lambda s: s | RoleFilter({"tool"}),
            lambda s: ~s,
            WholeExchanges,
            lambda s: s | LastNTurns(3),
        ]
        step = 0
        while nesting(scope) < MAX_SCOPE_DEPTH:
            scope = wrappers[step % len(wrappers)](scope)
            step += 1
        assert MAX_SCOPE_DEPTH == nesting(scope)
        messages = [Message("user", "q"), Message("assistant", "a")] * 3
        kept = WorkingContext(messages=messages).slice(scope).size()
        assert kept == len(surviving_indices(scope, messages))
        assert explain(scope, messages) is not None
        assert repr(scope)
        assert str(scope)
        assert scope == copy.deepcopy(scope) == pickle.loads(pickle.dumps(scope))
        assert hash(scope) == hash(copy.deepcopy(scope))
        with pytest.raises(ScopeError, match="at most 100"):
            WholeExchanges(scope)


SUPPORT_PROMPT = (
    "You are the support agent for Acme Cloud. Answer from the product docs and cite the page you used. "
    "Never promise refunds or credits. Hand billing disputes to a human. Keep answers short and concrete. "
    "Ask for the project id when it is missing. Use metric units."
)


def support_ctx() -> WorkingContext:
    """
    The issue's context: a 69-token prefix and six turns of a support chat.
    """
    ctx = WorkingContext(prefix=PrefixContext(system_prompt=SUPPORT_PROMPT))
    for _ in range(6):
        ctx.append(
            Message("user", ("How do I rotate the API key without downtime? " * 5)[:82]),
            Message("assistant", ("Create a second key, deploy it, then revoke the first in Settings. " * 5)[:193]),
        )
    return ctx


def request_tokens(prefix: PrefixContext, kept: Any, counter: Any = None) -> int:
    """
    The tokens of a request as a budget with *counter* counts them: the prefix, then the kept messages.
    """
    count = counting(counter)
    return sum(count(m) for m in prefix.as_messages()) + sum(count(m) for m in kept)


class TestBudgetsCountTheRequest:
    def test_the_issues_slice_fits_300_with_its_69_token_prefix(self):
        """
        ctx.slice(LastNTurns(4) & TokenBudget(300)) on a context with a
        69-token prefix is a request of at most 300 tokens (it was 349, and
        started with an assistant message, when the budget left the prefix out).
        """
        ctx = support_ctx()
        assert 69 == ApproxTokenCounter().count(ctx.prefix.as_messages())
        sliced = ctx.slice(LastNTurns(4) & TokenBudget(300))
        assert sliced.count_tokens() <= 300
        assert 300 - 69 < request_tokens(ctx.prefix, sliced.messages) + 57  # the next turn would not fit
        bare = [ctx.messages[i] for i in sorted(surviving_indices(LastNTurns(4) & TokenBudget(300), ctx.messages))]
        assert 349 == request_tokens(ctx.prefix, bare)  # a bare list counts only its messages
        assert "assistant" == bare[0].role

    def test_valid_request_and_fit_make_the_request(self):
        """
        ValidRequest(...) through a context is a valid request within the
        budget, starting with a user message; fit(ctx, n) gives one too.
        """
        ctx = support_ctx()
        for sliced in (ctx.slice(ValidRequest(LastNTurns(4) & TokenBudget(300))), fit(ctx, 300)):
            assert sliced.count_tokens() <= 300
            assert "user" == sliced.messages[0].role
            assert () == check_messages(sliced.assembled())

    def test_explain_on_a_context_decides_as_the_slice_does(self):
        """
        explain(scope, ctx) keeps what ctx.slice(scope) keeps, and so does a
        snapshot of it; the report still counts the prefix apart.
        """
        ctx = support_ctx()
        scope = LastNTurns(4) & TokenBudget(300)
        sliced = ctx.slice(scope)
        for source in (ctx, ctx.freeze()):
            report = explain(scope, source)
            assert list(sliced.messages) == [ctx.messages[i] for i in report.kept]
            assert 69 == report.prefix_tokens

    def test_the_tail_view_carries_the_prefix(self):
        """
        ctx.tail_view() carries the prefix's messages for a budget to count; a bare list has none.
        """
        ctx = support_ctx()
        assert tuple(ctx.prefix.as_messages()) == ctx.tail_view().prefix_messages
        assert surviving_indices(TokenBudget(300), ctx.tail_view()) < surviving_indices(TokenBudget(300), ctx.messages)

    def test_a_prefix_over_the_budget_leaves_only_system_messages(self):
        """
        When the prefix alone is over the budget, the slice keeps the system messages and nothing else.
        """
        ctx = support_ctx().append(Message("system", "Be brief."))
        assert ["system"] == [m.role for m in ctx.slice(TokenBudget(50)).messages]

    @given(
        data=st.data(),
        prefix=prefixes,
        messages=scope_transcripts(),
        max_tokens=st.integers(0, 150),
        start_on=st.sampled_from(["exchange", "user", "user_only"]),
        include_system=st.booleans(),
    )
    def test_a_slice_through_a_bounded_composition_never_exceeds_the_budget(
        self, data, prefix, messages, max_tokens, start_on, include_system
    ):
        """
        Through any composition a TokenBudget(n) bounds (itself, & with any
        scope, the wrappers that only take away), the slice's request is at
        most n tokens as that budget counts, whenever the prefix and the
        system messages it always keeps fit.
        """
        budget = TokenBudget(max_tokens, start_on=start_on, include_system=include_system)
        scope = data.draw(bounded_scopes(budget))
        ctx = WorkingContext(prefix=prefix, messages=messages)
        systems = [m for m in messages if m.role == "system"]
        # ValidRequest keeps every system message, even those a budget counting them like others left out
        assume(include_system or not systems or "ValidRequest" not in repr(scope))
        assume(request_tokens(prefix, systems) <= max_tokens)
        sliced = ctx.slice(scope)
        assert request_tokens(prefix, sliced.messages) <= max_tokens
        assert sorted(explain(scope, ctx).kept) == sorted(surviving_indices(scope, ctx.tail_view()))

    @given(
        prefix=prefixes,
        messages=scope_transcripts(),
        turns=st.integers(1, 5),
        max_tokens=st.integers(0, 400),
    )
    def test_valid_request_keeps_the_budget_when_the_window_holds_a_user_turn(
        self, prefix, messages, turns, max_tokens
    ):
        """
        ValidRequest(LastNTurns(k) & TokenBudget(n)), the way to make a
        request, gives a valid one; it is within n whenever the budget's
        window holds a user turn (otherwise the newest one comes in over it:
        a request needs one).
        """
        ctx = WorkingContext(prefix=prefix, messages=messages)
        systems = [m for m in messages if m.role == "system"]
        assume(request_tokens(prefix, systems) <= max_tokens)
        inner = LastNTurns(turns) & TokenBudget(max_tokens)
        sliced = ctx.slice(ValidRequest(inner))
        problems = check_messages(list(sliced.messages), allow_pending=True)  # the tail: the prefix is yours
        assert [] == [p.rule for p in problems if p.rule in STRUCTURAL_RULES]
        if any(starts_turn(m) for m in messages):  # a user turn to start with
            assert "first-not-user" not in [p.rule for p in problems]
        window = surviving_indices(inner, ctx.tail_view())
        if any(starts_turn(messages[i]) for i in window):
            assert request_tokens(prefix, sliced.messages) <= max_tokens
