"""
Tests for cache plans written by the adapters: Anthropic breakpoints, OpenAI cache keys.
"""

from __future__ import annotations

import pytest

from workingctx import Message, PrefixContext, ToolCall, WorkingContext
from workingctx.adapters import anthropic, openai_chat, openai_responses
from workingctx.cache import plan, prompt_cache_key
from workingctx.exceptions import CacheRuleError

MODEL = "claude-sonnet-4-6"


def _ctx() -> WorkingContext:
    ctx = WorkingContext(prefix=PrefixContext(system_prompt="Runbook. " * 2_000))
    calls = [ToolCall("c1", "grep_logs", {"shard": 1}), ToolCall("c2", "grep_logs", {"shard": 2})]
    return ctx.append(
        Message.user("Why is shard 7 slow? " * 300),
        Message.assistant("Checking.", tool_calls=calls),
        Message.tool("3 warnings", call_id="c1"),
        Message.tool("no errors", call_id="c2"),
    )


class TestAnthropic:
    def test_plan_written_as_cache_control(self):
        """
        A plan's breakpoints reach the wire on exactly their blocks, with their TTLs.
        """
        ctx = _ctx()
        made = plan(ctx, provider="anthropic", model=MODEL)
        assert [(0, 0, "1h"), (4, 0, "5m")] == [(b.message, b.block, b.ttl) for b in made.breakpoints]
        body = anthropic.write(ctx, cache=made)
        assert [{"type": "ephemeral", "ttl": "1h"}] == [b.get("cache_control") for b in body["system"]]
        results = body["messages"][-1]["content"]
        assert ["c1", "c2"] == [b["tool_use_id"] for b in results]
        assert "cache_control" not in results[0]
        assert [{"type": "text", "text": "no errors", "cache_control": {"type": "ephemeral", "ttl": "5m"}}] == results[
            1
        ]["content"]
        assert "cache_control" not in body

    def test_only_marks_differ(self):
        """
        Writing with a plan changes nothing but the cache_control markers.
        """
        ctx = _ctx()
        plain = anthropic.write(ctx)
        marked = anthropic.write(ctx, cache=plan(ctx, provider="anthropic", model=MODEL))

        def strip(value: object) -> object:
            if isinstance(value, dict):
                return {k: strip(v) for k, v in value.items() if k != "cache_control"}
            if isinstance(value, list):
                return [strip(v) for v in value]
            return value

        results = marked["messages"][-1]["content"]
        results[1]["content"] = results[1]["content"][0]["text"]
        assert strip(plain["messages"]) == strip(marked["messages"])
        assert plain["system"] == marked["system"][0]["text"]

    def test_auto_and_automatic_plans(self):
        """
        cache="auto" and a plan asking for the automatic breakpoint set the top-level cache_control.
        """
        ctx = _ctx()
        assert {"type": "ephemeral"} == anthropic.write(ctx, cache="auto")["cache_control"]
        automatic = plan(ctx, provider="anthropic", model=MODEL, automatic=True)
        body = anthropic.write(ctx, cache=automatic)
        assert {"type": "ephemeral"} == body["cache_control"]

    def test_plan_for_another_provider_refused(self):
        """
        An OpenAI plan cannot be written as Anthropic breakpoints.
        """
        ctx = _ctx()
        with pytest.raises(ValueError, match="provider='anthropic'"):
            anthropic.write(ctx, cache=plan(ctx, provider="openai", model="gpt-5"))


class TestOpenAI:
    @pytest.mark.parametrize("adapter", [openai_chat, openai_responses])
    def test_prompt_cache_key(self, adapter):
        """
        cache=True, a plan or a str set prompt_cache_key; nothing is set without cache.
        """
        ctx = _ctx()
        expected = f"workingctx-{ctx.prefix.digest()[:32]}"
        assert expected == adapter.write(ctx, cache=True)["prompt_cache_key"]
        assert expected == adapter.write(ctx, cache=plan(ctx, provider="openai", model="gpt-5"))["prompt_cache_key"]
        assert "mine" == adapter.write(ctx, cache="mine")["prompt_cache_key"]
        assert "prompt_cache_key" not in adapter.write(ctx)
        assert expected == adapter.write(ctx.freeze(), cache=True)["prompt_cache_key"]

    def test_same_prefix_same_key(self):
        """
        Contexts sharing a prefix share the key, whatever their tails.
        """
        one, two = _ctx(), _ctx().append(Message.user("more"))
        assert prompt_cache_key(one) == prompt_cache_key(two)
        other = WorkingContext(prefix=PrefixContext(system_prompt="Another runbook."))
        assert prompt_cache_key(other) != prompt_cache_key(one)

    def test_bad_cache(self):
        """
        cache=True without a prefix, an Anthropic plan, or another kind of value is refused.
        """
        ctx = _ctx()
        with pytest.raises(TypeError, match="derives prompt_cache_key from the prefix"):
            openai_chat.write(ctx.assembled(), cache=True)
        with pytest.raises(CacheRuleError, match="provider='openai'"):
            openai_chat.write(ctx, cache=plan(ctx, provider="anthropic", model=MODEL))
        with pytest.raises(TypeError, match="a str key or a CachePlan"):
            openai_responses.write(ctx, cache=3)
