"""
What holds across the scopes: bad arguments refused when a scope is built,
WorkingContext.slice(), and budgets counting the whole request a context sends,
its prefix included.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.scopes.transcripts import house
from tests.strategies import bounded_scopes, prefixes, scope_transcripts, scope_trees
from workingctx import (
    ApproxTokenCounter,
    LastNTurns,
    Message,
    PrefixContext,
    RoleFilter,
    Since,
    TokenBudget,
    WholeExchanges,
    explain,
)
from workingctx.context import WorkingContext
from workingctx.exceptions import ScopeError
from workingctx.managers import fit
from workingctx.scopes import AllOf, AnyOf, Not, Tagged, ValidRequest, surviving_indices
from workingctx.scopes._exchanges import starts_turn
from workingctx.tokens import counting
from workingctx.validity import STRUCTURAL_RULES, check_messages


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
