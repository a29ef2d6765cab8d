"""
The scope protocols, surviving_indices(), and the combinators AllOf, AnyOf and
Not: their operators, their laws, their values and how deep they may nest.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from hypothesis import given

from tests.scopes.transcripts import house, house_ctx, kept
from tests.strategies import scope_transcripts, scope_trees, transcripts
from workingctx import LastNTurns, Message, RoleFilter, Since, TokenBudget, WholeExchanges
from workingctx.context import WorkingContext
from workingctx.exceptions import PositionalScopeError, ScopeError
from workingctx.managers import BudgetCut
from workingctx.scopes import (
    AllOf,
    AnyOf,
    CompletedToolSequences,
    ContextScope,
    Newest,
    Not,
    PendingCalls,
    PositionalScope,
    Tagged,
    ValidRequest,
    surviving_indices,
)


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
