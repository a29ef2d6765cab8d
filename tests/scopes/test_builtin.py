"""
The built-in scopes LastNTurns, RoleFilter, Tagged, Since and Newest: what each
keeps of a transcript, and the values they are built from.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.scopes.transcripts import call, house, house_ctx, kept
from tests.strategies import positional_scopes, predicate_scopes, scope_transcripts, scope_trees, transcripts
from workingctx import LastNTurns, Message, RoleFilter, Since
from workingctx.exceptions import PositionalScopeError, ScopeError
from workingctx.messages import ToolResultBlock
from workingctx.scopes import AllOf, Newest, Not, surviving_indices


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


class TestValues:
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
