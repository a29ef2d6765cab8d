"""
explain(): the kept and dropped messages of a scope, the tokens it saves and
where the prompt cache breaks.
"""

from __future__ import annotations

import pytest

from tests.scopes.transcripts import house
from workingctx import LastNTurns, Message, PrefixContext, Since, explain
from workingctx.context import WorkingContext
from workingctx.scopes import ScopeReport


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
