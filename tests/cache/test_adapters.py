"""
Tests for cache plans written by the adapters: Anthropic breakpoints, OpenAI cache keys.
"""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from workingctx import Message, PrefixContext, ToolCall, WorkingContext
from workingctx.adapters import anthropic, openai_chat, openai_responses
from workingctx.cache import plan, prompt_cache_key
from workingctx.exceptions import CacheRuleError
from workingctx.messages import CacheBreakpoint, TextBlock

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


def _strip(value: object) -> object:
    """
    A written request without its cache_control markers, its system field always as text blocks.
    """
    if isinstance(value, dict) and isinstance(value.get("system"), str):
        value = {**value, "system": [{"type": "text", "text": value["system"]}]}
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _marks(body: dict[str, object]) -> list[str]:
    """
    Where a written Anthropic request has cache_control: the paths of the blocks.
    """
    found: list[str] = []

    def walk(value: object, path: str) -> None:
        if isinstance(value, dict):
            if "cache_control" in value:
                found.append(path)
            for k, v in value.items():
                walk(v, f"{path}.{k}")
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]")

    walk(body, "$")
    return found


class TestPrefixHint:
    def _hinted(self, **fields: object) -> WorkingContext:
        prefix = PrefixContext(system_prompt="Runbook. " * 50, cache_hint=True, **fields)  # type: ignore[arg-type]
        return WorkingContext(prefix=prefix, messages=[Message.user("Why is shard 7 slow?")])

    def test_anthropic_marks_the_end_of_the_prefix(self):
        """
        A prefix with cache_hint=True gets one breakpoint, on its last block, when no cache is named;
        without the hint, or with cache=False, the request has none.
        """
        ctx = self._hinted(grounding=(Message.system("Shard map: 7 -> eu-west."),))
        body = anthropic.write(ctx)
        assert ["$.system[1]"] == _marks(body)
        assert {"type": "ephemeral"} == body["system"][1]["cache_control"]
        assert [] == _marks(anthropic.write(ctx, cache=False))
        plain = WorkingContext(prefix=PrefixContext(system_prompt="Runbook. " * 50), messages=ctx.messages)
        assert [] == _marks(anthropic.write(plain))
        assert _strip(body) == _strip(anthropic.write(ctx, cache=False))
        assert ["$.system[1]"] == _marks(anthropic.write(ctx.freeze()))
        assert () == anthropic.check(ctx)

    def test_anthropic_plan_wins_and_marks_are_kept(self):
        """
        A plan or "auto" replaces the hint; a prefix holding a breakpoint already gets no second one.
        """
        ctx = self._hinted()
        made = plan(ctx, provider="anthropic", model=MODEL)
        assert anthropic.write(ctx, cache=made) == anthropic.write(
            WorkingContext(prefix=attrs.evolve(ctx.prefix, cache_hint=False), messages=ctx.messages), cache=made
        )
        auto = anthropic.write(ctx, cache="auto")
        assert ["$"] == _marks(auto)  # the top-level automatic breakpoint alone
        marked = Message("system", (TextBlock("Shard map.", cache=CacheBreakpoint("1h")),))
        held = self._hinted(grounding=(marked,), schema_block="{}")
        assert ["$.system[1]"] == _marks(anthropic.write(held))

    def test_request_key_follows_the_mark(self):
        """
        request_key is the key of what write sends: the hint's breakpoint is part of it.
        """
        ctx = self._hinted()
        unhinted = WorkingContext(prefix=attrs.evolve(ctx.prefix, cache_hint=False), messages=ctx.messages)
        assert anthropic.request_key(ctx) != anthropic.request_key(unhinted)
        assert anthropic.request_key(ctx) == anthropic.request_key(ctx.freeze())

    @pytest.mark.parametrize("adapter", [openai_chat, openai_responses])
    def test_openai_sets_the_cache_key(self, adapter):
        """
        A hinted prefix sets prompt_cache_key as cache=True does; cache=False leaves it out.
        """
        ctx = self._hinted()
        assert adapter.write(ctx, cache=True)["prompt_cache_key"] == adapter.write(ctx)["prompt_cache_key"]
        assert "prompt_cache_key" not in adapter.write(ctx, cache=False)
        assert "mine" == adapter.write(ctx, cache="mine")["prompt_cache_key"]

    @given(
        system=st.none() | st.text(max_size=20),
        grounding=st.lists(st.text(max_size=20), max_size=3),
        schema=st.none() | st.text(max_size=20),
    )
    def test_hint_adds_at_most_one_mark_and_nothing_else(self, system, grounding, schema):
        """
        For any prefix, the hinted request differs from the unmarked one by at most one
        cache_control, inside the system field, on a block with text beyond whitespace.
        """
        prefix = PrefixContext(
            system_prompt=system,
            grounding=tuple(Message.system(text) for text in grounding),
            schema_block=schema,
            cache_hint=True,
        )
        ctx = WorkingContext(prefix=prefix, messages=[Message.user("go")])
        problems = anthropic.check(ctx)
        unhinted = WorkingContext(prefix=attrs.evolve(prefix, cache_hint=False), messages=ctx.messages)
        assert problems == anthropic.check(unhinted)  # the mark brings no problem of its own
        if problems:  # blank system text: refused with or without the mark
            return
        body, bare = anthropic.write(ctx), anthropic.write(ctx, cache=False)
        assert _strip(body) == _strip(bare)
        marks = _marks(body)
        texts = [m.text() for m in prefix.as_messages()]
        assert len(marks) == (1 if any(t.strip() for t in texts) else 0)
        for path in marks:
            assert path.startswith("$.system[")
            index = int(path[len("$.system[") : -1])
            assert body["system"][index]["text"].strip()
