"""
TokenBudget: the longest suffix of whole exchanges that fits, from a plain list
or a context's tail view, counting only the messages it reaches.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.scopes.transcripts import assert_whole, call, links
from tests.strategies import block_transcripts, scope_transcripts, transcripts
from tests.tokens.counts import cached
from workingctx import ApproxTokenCounter, Message, TokenBudget, ToolCall
from workingctx.context import WorkingContext
from workingctx.messages import ReasoningBlock
from workingctx.scopes import surviving_indices
from workingctx.scopes._exchanges import starts_turn


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


class TestColdBudget:
    def test_cold_slice_counts_only_the_kept_suffix(self):
        """
        A context built from messages never counted, sliced by a budget, counts
        only the suffix it walks; once the context is counted, the running sums
        give the same slice.
        """
        from workingctx import TokenBudget, WorkingContext  # noqa: PLC0415

        messages = [Message("system", "rules")] + [Message("user", f"question {i}") for i in range(300)]
        ctx = WorkingContext(messages=messages)

        cold = ctx.slice(TokenBudget(100))

        assert 1 < cold.size() < 30
        assert None is cached(messages[150], "approx")
        assert None is not cached(messages[-1], "approx")
        assert None is not cached(messages[0], "approx")  # system messages are counted first
        ctx.count_tokens()
        assert cold.messages == ctx.slice(TokenBudget(100)).messages
