"""
Tests for workingctx.integrations.langchain: LangChain v1 agents, end to end and
offline, with LangChain's own fake chat model and with ChatAnthropic answering
from an httpx2 transport that records every request body.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import attrs
import httpx2
import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from hypothesis import given
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest, ModelResponse
from langchain_anthropic import ChatAnthropic
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field, TypeAdapter

from tests.strategies import scope_transcripts
from workingctx import (
    ApproxTokenCounter,
    MessageContextManager,
    PrefixContext,
    SummaryContextManager,
    TokenBudgetContextManager,
    WorkingContext,
)
from workingctx.adapters import anthropic as anthropic_adapter
from workingctx.adapters import langchain as adapter
from workingctx.cache import RULES, plan, simulate
from workingctx.integrations.langchain import ContextMiddleware, SummarizingMiddleware
from workingctx.managers import SUMMARY_NAME
from workingctx.validity import STRUCTURAL_RULES, check_messages

SYSTEM = "You look things up with the lookup tool and answer in one sentence."
TURNS = 24
MAX_TOKENS, LOW = 1_500, 1_000


@tool
def lookup(key: str) -> str:
    """Look up a key in the catalogue."""
    return f"{key}: " + " ".join(f"entry-{key}-{i}" for i in range(24))


def script(turns: int) -> list[list[AIMessage]]:
    """
    The model's replies, turn by turn: one to three rounds of one to three
    parallel lookups, then an answer.
    """
    out: list[list[AIMessage]] = []
    for t in range(turns):
        replies = [
            AIMessage(
                "",
                tool_calls=[
                    {"name": "lookup", "args": {"key": f"k{t}-{r}-{c}"}, "id": f"call_{t}_{r}_{c}"}
                    for c in range(1 + (t + r) % 3)
                ],
            )
            for r in range(1 + t % 3)
        ]
        replies.append(AIMessage(f"Answer {t}: found it."))
        out.append(replies)
    return out


class ToolCallingFake(GenericFakeChatModel):
    """
    LangChain's generic fake chat model, able to take tools, recording what each call receives.
    """

    received: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingFake:  # noqa: ARG002
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.received.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def _fake(turns: int) -> ToolCallingFake:
    replies: Iterator[AIMessage] = iter([reply for turn in script(turns) for reply in turn])
    return ToolCallingFake(messages=replies)


def _run(middleware: list[Any], turns: int = TURNS, *, use_async: bool = False) -> tuple[ToolCallingFake, list[Any]]:
    """
    *turns* user turns through a create_agent agent with a checkpointer; the
    fake model and the thread's stored messages.
    """
    model = _fake(turns)
    agent = create_agent(model, [lookup], system_prompt=SYSTEM, middleware=middleware, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "run"}}
    for t in range(turns):
        question = {"messages": [HumanMessage(f"Question {t}: what does the catalogue say?")]}
        if use_async:
            asyncio.run(agent.ainvoke(question, config))
        else:
            agent.invoke(question, config)
    return model, agent.get_state(config).values["messages"]


def _shape(message: BaseMessage) -> tuple[Any, ...]:
    """
    What a stored message says, without the ids LangGraph gives it.
    """
    calls = [(c["name"], c["args"], c["id"]) for c in getattr(message, "tool_calls", [])]
    return (message.type, message.content, calls, getattr(message, "tool_call_id", None))


def _problems(received: list[BaseMessage]) -> tuple[Any, ...]:
    return check_messages(adapter.read(received).assembled(), provider="anthropic")


def _tokens(received: list[BaseMessage]) -> int:
    return ApproxTokenCounter().count(adapter.read(received).assembled())


@pytest.fixture(scope="module")
def baseline() -> list[Any]:
    """
    The stored messages of the same run without the middleware.
    """
    return _run([])[1]


class TestContextMiddlewareEndToEnd:
    @pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
    def test_every_call_is_valid_fits_and_the_state_is_complete(self, baseline, use_async):
        """
        24 turns, 72 model calls and 96 tool calls through create_agent: every model call gets a
        valid, user-first request within the manager's budget, the manager cuts, and
        the stored state holds every message, as the run without the middleware does.
        """
        manager = TokenBudgetContextManager(MAX_TOKENS, low_watermark=LOW)
        model, stored = _run([ContextMiddleware(manager)], use_async=use_async)
        assert [_shape(m) for m in baseline] == [_shape(m) for m in stored]
        calls = sum(len(m.tool_calls) for m in stored if isinstance(m, AIMessage))
        assert (TURNS, 96, 96, 72) == (
            sum(isinstance(m, HumanMessage) for m in stored),
            calls,
            sum(isinstance(m, ToolMessage) for m in stored),
            len(model.received),
        )
        for received in model.received:
            assert () == _problems(received)
            assert received[0] == SystemMessage(SYSTEM)
            assert isinstance(received[1], HumanMessage)
            assert _tokens(received) <= MAX_TOKENS
            assert all(any(m is s or m == s for s in stored) for m in received[1:])
        assert len(model.received[-1]) - 1 < len(stored) - 1  # the manager cut
        shortest = min(len(r) for r in model.received[TURNS:])
        assert shortest < max(len(r) for r in model.received)

    def test_requests_only_grow_between_cuts(self):
        """
        Between two cuts each request begins with the whole request before it
        (what keeps the provider's prompt cache hitting).
        """
        model, _ = _run([ContextMiddleware(TokenBudgetContextManager(MAX_TOKENS, low_watermark=LOW))], turns=12)
        cuts = 0
        for before, after in zip(model.received, model.received[1:], strict=False):
            if after[: len(before)] != before:
                cuts += 1
        assert 0 < cuts < len(model.received) // 4

    def test_a_restarted_middleware_sends_the_same_request(self):
        """
        A middleware that never saw the conversation replays it and sends what
        the one that saw every call sends.
        """
        manager = TokenBudgetContextManager(MAX_TOKENS, low_watermark=LOW)
        model, stored = _run([ContextMiddleware(manager)], turns=10)
        fresh = ContextMiddleware(TokenBudgetContextManager(MAX_TOKENS, low_watermark=LOW))
        last = stored[: len(stored) - 1]  # the state when the last answer was asked for
        sent = _call(fresh, last, system_message=SystemMessage(SYSTEM))
        assert model.received[-1] == [sent.system_message, *sent.messages]


def _call(middleware: Any, messages: list[BaseMessage], *, model: Any = None, **fields: Any) -> Any:
    """
    The request *middleware* hands the model for the state's *messages*.
    """
    seen: list[ModelRequest[Any]] = []

    def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
        seen.append(request)
        return ModelResponse(result=[AIMessage("ok")])

    middleware.wrap_model_call(ModelRequest(model=model or _fake(1), messages=messages, **fields), handler)
    return seen[0]


class TestBadInput:
    def test_an_orphaned_tool_message_is_left_out_and_logged(self, caplog):
        """
        A tool message whose call is nowhere (a history from an older version) never
        reaches the model; the warning names the rule; the state is not changed.
        """
        state = [
            HumanMessage("q1", id="h1"),
            ToolMessage("stale", tool_call_id="gone", id="t0"),
            AIMessage("a1", id="a1"),
            HumanMessage("q2", id="h2"),
        ]
        copy = [m.model_copy() for m in state]
        with caplog.at_level(logging.WARNING, logger="workingctx.integrations.langchain"):
            sent = _call(ContextMiddleware(MessageContextManager(10)), state)
        assert ["h1", "a1", "h2"] == [m.id for m in sent.messages]
        assert "orphan-result" in caplog.text
        assert copy == state

    def test_a_state_ending_in_a_pending_call_is_closed_and_logged(self, caplog):
        """
        A state ending in a call that was never answered is sent with the call closed by
        an error result (write(repair=True)), never as it is.
        """
        state = [
            HumanMessage("q1", id="h1"),
            AIMessage("", tool_calls=[{"name": "lookup", "args": {"key": "x"}, "id": "c1"}], id="a1"),
        ]
        with caplog.at_level(logging.WARNING, logger="workingctx.integrations.langchain"):
            sent = _call(ContextMiddleware(TokenBudgetContextManager(1_000)), state)
        assert "pending-at-end" in caplog.text
        assert isinstance(sent.messages[-1], ToolMessage)
        assert "c1" == sent.messages[-1].tool_call_id
        assert () == _problems(sent.messages)
        assert 2 == len(state)

    def test_a_reused_call_id_keeps_both_exchanges(self, caplog):
        """
        Two exchanges under one call id (a server numbering its calls call_0 in every
        reply) are two calls: both are sent, as the state holds them, and nothing is logged.
        """

        def exchange(n: int) -> list[BaseMessage]:
            call = {"name": "lookup", "args": {"key": f"k{n}"}, "id": "call_0"}
            return [
                HumanMessage(f"q{n}", id=f"h{n}"),
                AIMessage("", tool_calls=[call], id=f"a{n}"),
                ToolMessage(f"r{n}", tool_call_id="call_0", id=f"t{n}"),
            ]

        state = [*exchange(1), AIMessage("done", id="d1"), *exchange(2)]
        with caplog.at_level(logging.WARNING, logger="workingctx.integrations.langchain"):
            sent = _call(ContextMiddleware(TokenBudgetContextManager(1_000)), state)
        assert state == sent.messages
        assert "" == caplog.text

    def test_results_in_a_human_message_answer_their_calls(self, caplog):
        """
        Tool results held as Anthropic ``tool_result`` dicts in a HumanMessage, which
        ChatAnthropic sends as they are, answer their calls: the state is sent as it is,
        with no result added for a call it already answers, and nothing is logged.
        """
        call = {"name": "lookup", "args": {"key": "k"}, "id": "toolu_1"}
        state = [
            HumanMessage("q1", id="h1"),
            AIMessage("", tool_calls=[call], id="a1"),
            HumanMessage([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "r1"}], id="h2"),
            AIMessage("done", id="a2"),
            HumanMessage("q2", id="h3"),
        ]
        with caplog.at_level(logging.WARNING, logger="workingctx.integrations.langchain"):
            sent = _call(ContextMiddleware(TokenBudgetContextManager(1_000)), state)
        assert state == sent.messages
        assert "" == caplog.text

    def test_streaming_chunks_in_the_state_are_read(self):
        """
        The state may hold a streamed reply as a chunk; it is sent as the message it adds up to.
        """
        from langchain_core.messages import AIMessageChunk  # noqa: PLC0415

        state = [HumanMessage("q1", id="h1"), AIMessageChunk("a1", id="a1"), HumanMessage("q2", id="h2")]
        sent = _call(ContextMiddleware(MessageContextManager(10)), state)
        assert ["q1", "a1", "q2"] == [m.text for m in sent.messages]

    @pytest.mark.parametrize(
        ("value", "match"),
        [
            ("30000", r"manager=\.\.\.\) must be a workingctx context manager, got '30000' of type str"),
            (None, r"must be a workingctx context manager, got None"),
        ],
    )
    def test_a_manager_of_the_wrong_type_is_refused(self, value, match):
        """
        The error names the parameter, shows the value and its type, and the fix.
        """
        with pytest.raises(TypeError, match=match) as info:
            ContextMiddleware(value)
        assert "manager" == info.value.argument

    def test_a_summary_manager_points_to_the_summarizing_middleware(self):
        """
        A summary manager needs its summary kept in the state: the error says which middleware does it.
        """

        async def summarize(messages: Any, *, prompt: str, max_tokens: int) -> str:  # noqa: ARG001
            return "s"

        with pytest.raises(TypeError, match="use SummarizingMiddleware") as info:
            ContextMiddleware(SummaryContextManager(summarize))
        assert "manager" == info.value.argument

    def test_a_wrong_cache_setting_is_refused(self):
        """
        cache takes 'auto' or False.
        """
        with pytest.raises(ValueError, match=r"cache must be 'auto' .* or False \(none\), got True") as info:
            ContextMiddleware(MessageContextManager(), cache=True)  # type: ignore[arg-type]
        assert "cache" == info.value.argument

    def test_a_summarizer_of_the_wrong_type_is_refused(self):
        """
        SummarizingMiddleware names the summarizer parameter.
        """
        with pytest.raises(TypeError, match=r"summarizer=\.\.\.") as info:
            SummarizingMiddleware("gpt-5")  # type: ignore[arg-type]
        assert "summarizer" == info.value.argument


class TestAnyHistory:
    @given(scope_transcripts(broken=True), st.integers(0, 400), st.booleans())
    def test_the_request_is_valid_and_the_state_untouched(self, transcript, budget, fresh):
        """
        For any history, broken ones included (orphaned results, calls that lost
        results, a pending call at the end, system messages between turns): the model
        gets every tool result after its call and every call answered, the user's
        message first when there is one, every call and result under an id the
        state gives it (never one workingctx renamed it to), and the state is not
        changed, whether the middleware saw the conversation grow or reads it afresh.
        """
        state = adapter.write_messages(transcript)
        copy = [m.model_copy(deep=True) for m in state]
        middleware = ContextMiddleware(TokenBudgetContextManager(budget, low_watermark=budget // 2))
        if not fresh:
            for end in range(len(state)):
                _call(middleware, state[:end], system_message=SystemMessage(SYSTEM))
        sent = _call(middleware, state, system_message=SystemMessage(SYSTEM))
        assert copy == state
        problems = check_messages(adapter.read(sent.messages).assembled())
        assert [] == [p for p in problems if p.rule in {*STRUCTURAL_RULES, "pending-at-end"}]
        if any(isinstance(m, HumanMessage) for m in state):
            assert isinstance(next(m for m in sent.messages if not isinstance(m, SystemMessage)), HumanMessage)
        assert _call_ids(sent.messages) <= _call_ids(state)


def _call_ids(messages: list[BaseMessage]) -> set[str]:
    """
    The ids of the calls and results of LangChain *messages*.
    """
    calls = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    return calls | {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}


def test_importing_workingctx_imports_no_framework():
    """
    ``import workingctx`` (and its LangChain adapter) imports neither LangChain nor LangGraph.
    """
    code = (
        "import sys, workingctx, workingctx.adapters.langchain, workingctx.integrations; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'langchain', 'langchain_core', 'langgraph'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "[]" == out.stdout.strip()


# -- Anthropic: the request bodies ChatAnthropic sends ----------------------------------------


ANTHROPIC_MODEL = "claude-sonnet-4-6"
LONG_SYSTEM = "Catalogue rules, section by section. " * 160  # about 1,450 tokens: above the model's minimum


def _anthropic_reply(reply: AIMessage, n: int) -> dict[str, Any]:
    """
    The Messages API response for one of the script's replies.
    """
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.content}] if reply.content else []
    content += [{"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"]} for c in reply.tool_calls]
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": ANTHROPIC_MODEL,
        "content": content,
        "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


@pytest.fixture
def anthropic_bodies(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """
    ChatAnthropic answering from an httpx2 transport that records each request body
    and answers with the script's next reply: no network.
    """
    from langchain_anthropic import chat_models  # noqa: PLC0415

    replies = iter([reply for turn in script(TURNS) for reply in turn])
    bodies: list[dict[str, Any]] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(request.content))
        return httpx2.Response(200, json=_anthropic_reply(next(replies), len(bodies)))

    def client(**kwargs: Any) -> httpx2.Client:
        return httpx2.Client(transport=httpx2.MockTransport(answer), base_url=kwargs["base_url"])

    monkeypatch.setattr(chat_models, "_get_default_httpx_client", client)
    return bodies


def _breakpoints(body: dict[str, Any]) -> list[tuple[int, int]]:
    """
    (message, block) of every cache_control in the body, the system being message -1.
    """
    system = body.get("system")
    found = [(-1, k) for k, b in enumerate(system if isinstance(system, list) else []) if "cache_control" in b]
    for i, message in enumerate(body["messages"]):
        content = message["content"]
        if isinstance(content, list):
            found += [(i, k) for k, b in enumerate(content) if "cache_control" in b]
    return found


class TestAnthropicRequests:
    def test_bodies_are_valid_with_planned_breakpoints(self, anthropic_bodies):
        """
        24 turns through create_agent and ChatAnthropic: every request body is what
        the Anthropic SDK's own types accept, starts with a user turn, carries at
        most four breakpoints (the system prompt and the end of the request, none
        below the model's minimum), and fits the manager's budget.
        """
        model = ChatAnthropic(model=ANTHROPIC_MODEL, api_key="offline", max_retries=0)  # type: ignore[call-arg]
        manager = TokenBudgetContextManager(MAX_TOKENS + 1_500, low_watermark=LOW + 1_500)
        agent = create_agent(model, [lookup], system_prompt=LONG_SYSTEM, middleware=[ContextMiddleware(manager)])
        state: dict[str, Any] = {"messages": []}
        for t in range(TURNS):
            state = agent.invoke({"messages": [*state["messages"], HumanMessage(f"Question {t}?")]})
        assert 72 == len(anthropic_bodies)
        params = TypeAdapter(MessageCreateParamsNonStreaming)
        minimum = RULES["anthropic"].minimum_for(ANTHROPIC_MODEL)
        counter = ApproxTokenCounter()
        for body in anthropic_bodies:
            params.validate_python(body)
            sent = anthropic_adapter.read(body).assembled()
            assert () == check_messages(sent, provider="anthropic")
            assert "user" == body["messages"][0]["role"]
            points = _breakpoints(body)
            assert (-1, 0) in points
            assert len(body["messages"]) - 1 == max(m for m, _ in points)
            assert 2 <= len(points) <= 4
            assert all(counter.count(sent[: m + 2]) >= minimum for m, _ in points)
            assert counter.count(sent) <= manager.max_tokens

    def test_no_breakpoints_without_cache(self, anthropic_bodies):
        """
        cache=False: the bodies carry no cache_control.
        """
        model = ChatAnthropic(model=ANTHROPIC_MODEL, api_key="offline", max_retries=0)  # type: ignore[call-arg]
        middleware = ContextMiddleware(TokenBudgetContextManager(MAX_TOKENS + 1_500), cache=False)
        agent = create_agent(model, [lookup], system_prompt=LONG_SYSTEM, middleware=[middleware])
        agent.invoke({"messages": [HumanMessage("Question 0?")]})
        assert anthropic_bodies
        assert all(not _breakpoints(b) and "cache_control" not in b for b in anthropic_bodies)

    def test_caching_the_request_asks_for_itself_is_left_alone(self):
        """
        A request that already carries a breakpoint gets none from the middleware:
        the four-breakpoint limit stays the caller's to keep.
        """
        model = ChatAnthropic(model=ANTHROPIC_MODEL, api_key="offline")  # type: ignore[call-arg]
        system = SystemMessage([{"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral"}}])
        sent = _call(
            ContextMiddleware(MessageContextManager(10)), [HumanMessage("q")], model=model, system_message=system
        )
        assert sent.system_message is system
        assert [HumanMessage("q")] == sent.messages

    def test_other_models_get_no_breakpoints(self):
        """
        cache='auto' marks only Anthropic chat models' requests.
        """
        sent = _call(
            ContextMiddleware(MessageContextManager(10)), [HumanMessage("q")], system_message=SystemMessage("s")
        )
        assert [HumanMessage("q")] == sent.messages
        assert SystemMessage("s") == sent.system_message


def _tool_heavy_state(turns: int) -> list[BaseMessage]:
    """
    The whole state of a run of the script: questions, calls, results, answers.
    """
    state: list[BaseMessage] = []
    for t, replies in enumerate(script(turns)):
        state.append(HumanMessage(f"Question {t}: what does the catalogue say?"))
        for reply in replies:
            state.append(reply)
            state += [ToolMessage(lookup.invoke(c["args"]), tool_call_id=c["id"]) for c in reply.tool_calls]
    return state


def _parallel_state(turns: int, calls: int, *, trailing: str | None = None) -> list[BaseMessage]:
    """
    A state of *turns* questions, each answered after one round of *calls*
    parallel lookups; with *trailing*, each question ends in a text block of it.
    """
    state: list[BaseMessage] = []
    for t in range(turns):
        ask = [{"name": "lookup", "args": {"key": f"k{t}-{c}"}, "id": f"call_{t}_{c}"} for c in range(calls)]
        text = f"Question {t}: look everything up."
        question = HumanMessage(text if trailing is None else [text, {"type": "text", "text": trailing}])
        state += [question, AIMessage("", tool_calls=ask)]
        state += [ToolMessage(lookup.invoke(c["args"]), tool_call_id=c["id"]) for c in ask]
        state.append(AIMessage(f"Answer {t}: found it all."))
    return state


class AnthropicBodies:
    """
    A simulate() manager whose request is the body ChatAnthropic builds from the
    middleware's request, read back (with the breakpoints it carries).
    """

    def __init__(self, state: list[BaseMessage], manager: Any, middleware: Any = None) -> None:
        self.state = state
        self.calls = (i for i, m in enumerate(state) if isinstance(m, AIMessage))
        self.middleware = middleware or ContextMiddleware(manager)
        self.model = ChatAnthropic(model=ANTHROPIC_MODEL, api_key="offline")  # type: ignore[call-arg]
        self.bodies: list[dict[str, Any]] = []

    def trim_context(self, ctx: Any) -> Any:
        end = next(self.calls)

        def capture(request: ModelRequest[Any]) -> ModelResponse[Any]:
            sent = [request.system_message, *request.messages]
            self.bodies.append(request.model._get_request_payload(sent))  # noqa: SLF001  # the body it would send
            return ModelResponse(result=[self.state[end]])

        request = ModelRequest(model=self.model, messages=self.state[:end], system_message=SystemMessage(LONG_SYSTEM))
        self.middleware.wrap_model_call(request, capture)
        return ctx.replace_tail(anthropic_adapter.read(self.bodies[-1]).assembled())


def _as_sent(ctx: Any, _previous: Any) -> Any:
    """
    The plan of a request with no breakpoint but those its blocks carry.
    """
    return attrs.evolve(plan(ctx, provider="anthropic", model=ANTHROPIC_MODEL), breakpoints=())


class TestCacheEconomics:
    def test_the_middlewares_requests_read_from_cache(self):
        """
        40 tool-heavy turns behind a 1,450-token system prompt in a 6,000-token window,
        as ChatAnthropic request bodies replayed by simulate(): over 90% of input tokens
        are read from the cache, and the input cost is as close to the best any plan
        reaches (12% over it here, with a cut every few turns) as workingctx's own plan()
        gets without LangChain. ``python -m benchmarks middleware`` measures the cache
        benchmark's 300 turns: 98.8% read, 3.4% over the best.
        """
        state = _tool_heavy_state(40)
        bodies = AnthropicBodies(state, TokenBudgetContextManager(6_000, low_watermark=4_500))
        turns = adapter.read(state).assembled()
        sim = simulate(turns, provider="anthropic", model=ANTHROPIC_MODEL, manager=bodies, cache=_as_sent)
        assert len(bodies.bodies) == len(sim.requests) == sum(isinstance(m, AIMessage) for m in state)
        manager = TokenBudgetContextManager(6_000, low_watermark=4_500)
        context = WorkingContext(prefix=PrefixContext(system_prompt=LONG_SYSTEM))
        planned = simulate(turns, provider="anthropic", model=ANTHROPIC_MODEL, manager=manager, context=context)
        assert sim.cached_share >= 0.9
        over_best = sim.input_cost / sim.best_input_cost
        assert over_best <= planned.input_cost / planned.best_input_cost * 101 / 100
        assert max(len(_breakpoints(b)) for b in bodies.bodies) <= 4
        assert 0 == sim.lookback_misses

    @pytest.mark.parametrize("kind", ["context", "summarizing"])
    def test_many_parallel_calls_still_read_what_the_request_before_wrote(self, kind):
        """
        Rounds of twelve parallel calls add over twenty blocks between two
        requests, past Anthropic's lookback: each request still carries a
        breakpoint where the one before it wrote its end, so none misses the
        cache for it, with either middleware (each plans with its previous plan).
        """
        state = _parallel_state(4, 12)
        middleware: Any = (
            ContextMiddleware(TokenBudgetContextManager(50_000))
            if kind == "context"
            else SummarizingMiddleware(_summarize, max_messages=1_000)
        )
        bodies = AnthropicBodies(state, None, middleware)
        turns = adapter.read(state).assembled()
        sim = simulate(turns, provider="anthropic", model=ANTHROPIC_MODEL, manager=bodies, cache=_as_sent)
        assert len(bodies.bodies) == len(sim.requests) == 8
        assert 0 == sim.lookback_misses

    def test_a_breakpoint_chatanthropic_would_drop_is_never_counted_on(self):
        """
        Questions ending in a blank text block, which ChatAnthropic leaves out
        with any breakpoint on it: the request does not count on that entry
        being written, so the next one keeps the breakpoint that was, and the
        cache is read across twelve parallel calls per round.
        """
        state = _parallel_state(4, 12, trailing="\n")
        bodies = AnthropicBodies(state, TokenBudgetContextManager(50_000))
        turns = adapter.read(state).assembled()
        sim = simulate(turns, provider="anthropic", model=ANTHROPIC_MODEL, manager=bodies, cache=_as_sent)
        assert 0 == sim.lookback_misses
        assert all(len(_breakpoints(b)) >= 2 for b in bodies.bodies[1:])


PNG = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
"""A one-pixel PNG as a data URL."""


@pytest.mark.parametrize("kind", ["context", "summarizing"])
def test_a_breakpoint_on_an_image_url_block_reaches_the_body(kind):
    """
    A question ending in an image in OpenAI's ``image_url`` shape, through
    ChatAnthropic's own formatting of the middleware's request: the breakpoint
    the plan puts on the image is in the body, on the very image block sent
    without one; and the next request carries it again, with its own end.
    """
    model = ChatAnthropic(model=ANTHROPIC_MODEL, api_key="offline")  # type: ignore[call-arg]
    middleware: Any = (
        ContextMiddleware(TokenBudgetContextManager(50_000))
        if kind == "context"
        else SummarizingMiddleware(_summarize, max_messages=1_000)
    )

    def question(n: int) -> HumanMessage:
        image = {"type": "image_url", "image_url": {"url": PNG}}
        return HumanMessage([{"type": "text", "text": f"What does chart {n} show?"}, image], id=f"h{n}")

    def body(state: list[BaseMessage]) -> dict[str, Any]:
        sent = _call(middleware, state, model=model, system_message=SystemMessage(LONG_SYSTEM))
        return model._get_request_payload([sent.system_message, *sent.messages])  # noqa: SLF001  # what it sends

    first = body([question(1)])
    assert [(-1, 0), (0, 1)] == _breakpoints(first)
    plain = model._get_request_payload([SystemMessage(LONG_SYSTEM), question(1)])  # noqa: SLF001
    image = dict(first["messages"][0]["content"][1])
    assert {"type": "ephemeral", "ttl": "5m"} == image.pop("cache_control")
    assert plain["messages"][0]["content"][1] == image
    TypeAdapter(MessageCreateParamsNonStreaming).validate_python(first)
    second = body([question(1), AIMessage("A rising line.", id="a1"), question(2)])
    assert [(-1, 0), (0, 1), (2, 1)] == _breakpoints(second)


# -- summarizing ---------------------------------------------------------------------------------


async def _summarize(messages: Any, *, prompt: str, max_tokens: int) -> str:  # noqa: ARG001
    return f"Earlier: {len(messages)} messages, the last {messages[-1].text()[:20]!r}."


class TestSummarizingMiddleware:
    @pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
    def test_summary_in_the_state_messages_untouched(self, baseline, use_async):
        """
        24 turns: the model gets the system prompt, the running summary and the newest
        messages, always valid; the summary is kept in the state beside the complete messages.
        """
        middleware = SummarizingMiddleware(_summarize, max_messages=16, keep_recent=6)
        model, stored = _run([middleware], use_async=use_async)
        assert [_shape(m) for m in baseline] == [_shape(m) for m in stored]
        summarized = 0
        for received in model.received:
            assert () == _problems(received)
            assert received[0] == SystemMessage(SYSTEM)
            if isinstance(received[1], SystemMessage):
                assert SUMMARY_NAME == received[1].name
                assert received[1].text.startswith("Earlier: ")
                summarized += 1
                assert isinstance(received[2], HumanMessage)
            else:
                assert isinstance(received[1], HumanMessage)
            assert len(received) <= 2 + 16 + 3
        assert summarized > len(model.received) // 2

    def test_a_chat_model_summarizes(self):
        """
        A LangChain chat model as the summarizer, asked with the prompt and the
        transcript; the new summary comes back as a state update beside the reply,
        and the next call sends it with the messages it kept.
        """
        summarizer = ToolCallingFake(messages=iter([AIMessage("The user asked twice.")] * 5))
        middleware = SummarizingMiddleware(summarizer, max_messages=6, keep_recent=2)
        state = [HumanMessage(f"q{i}", id=f"h{i}") if i % 2 == 0 else AIMessage(f"a{i}", id=f"a{i}") for i in range(7)]
        sent: list[Any] = []

        def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
            sent.append(request)
            return ModelResponse(result=[AIMessage("ok")])

        result = middleware.wrap_model_call(ModelRequest(model=_fake(1), messages=state), handler)
        assert isinstance(result, ExtendedModelResponse)
        record = result.command.update["workingctx_summary"]
        assert "The user asked twice." == record["summary"]
        assert (7, "h6") == (record["through"], record["last_id"])
        assert "q0" in summarizer.received[0][1].text
        assert [SUMMARY_NAME, "h4", "a5", "h6"] == [sent[0].messages[0].name, *(m.id for m in sent[0].messages[1:])]
        later = [*state, AIMessage("a7", id="a7"), HumanMessage("q8", id="h8")]
        request = ModelRequest(model=_fake(1), messages=later, state={"messages": later, "workingctx_summary": record})
        assert isinstance(middleware.wrap_model_call(request, handler), ModelResponse)
        assert [None, "h4", "a5", "h6", "a7", "h8"] == [m.id for m in sent[1].messages]
        assert "The user asked twice." == sent[1].messages[0].content


@pytest.mark.parametrize("kind", ["chat", "function"])
def test_a_chat_or_function_message_in_the_state_is_read_not_refused(kind):
    """
    A runtime's state may hold a ``ChatMessage`` or a ``FunctionMessage``: the
    middleware reads it as state, and the model gets a request.
    """
    from langchain_core.messages import ChatMessage, FunctionMessage  # noqa: PLC0415

    odd = ChatMessage(role="user", content="hi") if kind == "chat" else FunctionMessage(name="f", content="42")
    state = [HumanMessage("start"), AIMessage("ok"), odd, HumanMessage("and now?")]
    request = _call(ContextMiddleware(TokenBudgetContextManager(10_000)), state)
    assert request.messages[-1].text == "and now?"


def test_the_summary_is_not_streamed_to_the_user():
    """
    The summarizer's reply is tagged so that LangGraph leaves it out of what
    the agent streams (``stream_mode="messages"``): only the agent's own replies are streamed.
    """
    summarizer = ToolCallingFake(messages=iter([AIMessage("SECRET-SUMMARY")] * 50))
    model = ToolCallingFake(messages=iter([AIMessage(f"answer {i}") for i in range(10)]))
    middleware = SummarizingMiddleware(summarizer, max_messages=4, keep_recent=2)
    agent = create_agent(model, [lookup], system_prompt=SYSTEM, middleware=[middleware], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "streamed"}}
    streamed = []
    for turn in range(4):
        for chunk, _meta in agent.stream({"messages": [HumanMessage(f"q{turn}")]}, config, stream_mode="messages"):
            streamed.append(getattr(chunk, "text", ""))
    assert summarizer.received
    assert not any("SECRET-SUMMARY" in text for text in streamed)


# -- summarizing from sync code ------------------------------------------------------------------


class _FirstLoop:
    """
    What an async client made on first use holds, as ChatAnthropic's (a cached
    ``AsyncAnthropic`` over an httpx connection pool) does: a connection bound to
    the event loop it was opened in. Used from another loop, or once that loop
    is closed, it fails as the real one does.
    """

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None

    async def send(self) -> None:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        reply = self.loop.create_future()
        self.loop.call_soon(reply.set_result, None)  # RuntimeError("Event loop is closed") once it is
        await reply  # RuntimeError: attached to a different loop


class LoopBoundChat(ToolCallingFake):
    """
    A fake chat model whose async path goes through a client bound to the first event loop it ran in.
    """

    connection: Any = Field(default_factory=_FirstLoop)

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        await self.connection.send()
        return self._generate(messages, *args, **kwargs)


def _summarizing_run(middleware: SummarizingMiddleware, turns: int, *, in_loop: bool) -> dict[str, Any]:
    """
    *turns* sync ``invoke`` calls of a create_agent agent, made *in_loop* inside
    a running event loop (as a notebook cell or an async app calling sync code
    does) or in plain sync code; the thread's state.
    """
    model = _fake(turns)
    agent = create_agent(model, [lookup], system_prompt=SYSTEM, middleware=[middleware], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "sync"}}

    async def in_a_running_loop() -> None:
        for t in range(turns):
            agent.invoke({"messages": [HumanMessage(f"Question {t}?")]}, config)

    if in_loop:
        asyncio.run(in_a_running_loop())
    else:
        for t in range(turns):
            agent.invoke({"messages": [HumanMessage(f"Question {t}?")]}, config)
    values: dict[str, Any] = agent.get_state(config).values
    return values


@pytest.mark.parametrize("in_loop", [False, True], ids=["sync", "sync-in-a-running-loop"])
class TestSummarizingFromSyncCode:
    def test_a_chat_model_summarizes_every_time(self, caplog, in_loop):
        """
        Sync invoke, in plain code and inside a running event loop, with a chat
        model whose async client is bound to the first loop it ran in: every
        summary is asked with the model's sync API, none fails, and each is kept.
        """
        summarizer = LoopBoundChat(messages=iter([AIMessage(f"Summary {i}.") for i in range(50)]))
        middleware = SummarizingMiddleware(summarizer, max_messages=6, keep_recent=2)
        with caplog.at_level(logging.ERROR, logger="workingctx.managers"):
            values = _summarizing_run(middleware, 6, in_loop=in_loop)
        summaries = len(summarizer.received)
        assert summaries >= 3
        assert "" == caplog.text
        assert [f"Summary {i}." for i in range(summaries)] == values["workingctx_summary"]["summary"].split("\n\n")

    def test_an_async_summarizer_runs_in_one_loop(self, caplog, in_loop):
        """
        A workingctx async summarizer bound to the first loop it ran in, called
        from sync invoke, in plain code and inside a running loop: every call
        runs in the same long-lived loop and succeeds.
        """
        connection = _FirstLoop()
        calls: list[int] = []

        async def summarize(messages: Any, *, prompt: str, max_tokens: int) -> str:  # noqa: ARG001
            await connection.send()
            calls.append(len(messages))
            return f"Summary {len(calls) - 1}."

        middleware = SummarizingMiddleware(summarize, max_messages=6, keep_recent=2)
        with caplog.at_level(logging.ERROR, logger="workingctx.managers"):
            values = _summarizing_run(middleware, 6, in_loop=in_loop)
        assert len(calls) >= 3
        assert "" == caplog.text
        assert [f"Summary {i}." for i in range(len(calls))] == values["workingctx_summary"]["summary"].split("\n\n")


# -- the repair path ------------------------------------------------------------------------------


def _sendable_text(received: list[BaseMessage]) -> str:
    """
    What an SDK encodes of a request: UnicodeEncodeError on a lone surrogate, as the provider SDKs raise.
    """
    dumped = json.dumps([m.model_dump() for m in received], ensure_ascii=False, default=str)
    dumped.encode("utf-8")
    return dumped


@pytest.mark.parametrize("kind", ["context", "summarizing"])
def test_a_lone_surrogate_is_replaced_and_logged_never_sent(kind, caplog):
    """
    A question cut inside an emoji (a lone surrogate) in the agent's state,
    through create_agent, with a summary made and without: every request the
    model gets can be encoded, carries U+FFFD in the surrogate's place, and the
    warning names the rule.
    """
    summarizer = ToolCallingFake(messages=iter([AIMessage(f"Summary {i}.") for i in range(20)]))
    middleware: Any = (
        ContextMiddleware(TokenBudgetContextManager(2_000))
        if kind == "context"
        else SummarizingMiddleware(summarizer, max_messages=4, keep_recent=2)
    )
    model = _fake(4)
    agent = create_agent(model, [lookup], system_prompt=SYSTEM, middleware=[middleware], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "cut"}}
    with caplog.at_level(logging.WARNING, logger="workingctx.integrations.langchain"):
        for t in range(4):
            agent.invoke({"messages": [HumanMessage(f"Question {t} \ud83d")]}, config)
    assert 4 <= len(model.received)
    for received in model.received:
        assert "\ud83d" not in _sendable_text(received)
        assert any("\ufffd" in m.text for m in received if isinstance(m, HumanMessage))
    assert "unencodable-text" in caplog.text
    if kind == "summarizing":
        assert summarizer.received
        assert all("\ud83d" not in _sendable_text(r) for r in summarizer.received)
        assert any(isinstance(m, SystemMessage) and m.name == SUMMARY_NAME for m in model.received[-1])


@pytest.mark.parametrize("kind", ["context", "summarizing"])
def test_a_repaired_request_keeps_the_states_call_ids(kind, caplog):
    """
    A history whose calls reuse one id (an OpenAI-compatible server numbers them
    call_0 in every reply), ending in the second, never answered, through
    create_agent: the call is closed with an error result, and the model sees
    the ids the state holds, the call and its error result both under call_0.
    """

    def call(n: int) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": "lookup", "args": {"key": f"k{n}"}, "id": "call_0"}], id=f"a{n}")

    history = [
        HumanMessage("q1", id="h1"),
        call(1),
        ToolMessage("r1", tool_call_id="call_0", id="t1"),
        AIMessage("done", id="d1"),
        HumanMessage("q2", id="h2"),
        call(2),  # never answered: the app stopped before its tool ran
    ]
    middleware: Any = (
        ContextMiddleware(TokenBudgetContextManager(2_000))
        if kind == "context"
        else SummarizingMiddleware(_summarize, max_messages=30)
    )
    model = ToolCallingFake(messages=iter([AIMessage("Back to q2.")]))
    agent = create_agent(model, [lookup], middleware=[middleware])
    with caplog.at_level(logging.WARNING, logger="workingctx.integrations.langchain"):
        agent.invoke({"messages": history})
    received = model.received[-1]
    assert "pending-at-end" in caplog.text
    assert ["h1", "a1", "t1", "d1", "h2", "a2", None] == [m.id for m in received]
    assert ["call_0", "call_0"] == [c["id"] for m in received if isinstance(m, AIMessage) for c in m.tool_calls]
    closed = received[6]
    assert isinstance(closed, ToolMessage)
    assert ("call_0", "error: this tool call was not answered") == (closed.tool_call_id, closed.content)


@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
def test_an_invalid_tool_call_is_sent_with_the_result_the_agent_gave_it(use_async, caplog):
    """
    A reply whose call arguments did not parse (an invalid tool call) is answered by create_agent
    with an error result; ChatAnthropic and ChatOpenAI send the call, so the next request keeps
    the result after it (never a call without its result), and nothing is logged as broken.
    """
    cut = {"name": "lookup", "args": '{"key": "x', "id": "call_cut", "error": "cut off", "type": "invalid_tool_call"}
    replies = iter([AIMessage("", invalid_tool_calls=[cut]), AIMessage("Fixed."), AIMessage("Done.")])
    model = ToolCallingFake(messages=replies)
    middleware = ContextMiddleware(TokenBudgetContextManager(2_000))
    agent = create_agent(model, [lookup], middleware=[middleware], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "cut"}}
    with caplog.at_level(logging.WARNING, logger="workingctx.integrations.langchain"):
        for question in ("q1", "q2"):
            if use_async:
                asyncio.run(agent.ainvoke({"messages": [HumanMessage(question)]}, config))
            else:
                agent.invoke({"messages": [HumanMessage(question)]}, config)
    last = model.received[-1]
    assert ["human", "ai", "tool", "human"] == [m.type for m in last]
    assert "call_cut" == last[2].tool_call_id
    assert () == _problems(last)
    assert "" == caplog.text


def test_an_invalid_tool_call_beside_one_without_an_id_keeps_its_result():
    """
    A reply with two invalid tool calls, one without an id: create_agent answers the one with an
    id, and ChatAnthropic sends it as a ``tool_use`` block (the other it leaves out), so the
    request keeps that result after it; the body ChatAnthropic writes of it breaks no rule.
    """
    cut = {"name": "lookup", "args": '{"key": "x', "id": "call_cut", "error": "cut off", "type": "invalid_tool_call"}
    lost = {"name": "lookup", "args": '{"ke', "id": None, "error": "cut off", "type": "invalid_tool_call"}
    replies = iter([AIMessage("", invalid_tool_calls=[cut, lost]), AIMessage("Fixed."), AIMessage("Done.")])
    model = ToolCallingFake(messages=replies)
    agent = create_agent(model, [lookup], middleware=[ContextMiddleware(TokenBudgetContextManager(2_000))])
    state = agent.invoke({"messages": [HumanMessage("q1")]})
    agent.invoke({"messages": [*state["messages"], HumanMessage("q2")]})
    last = model.received[-1]
    assert ["human", "ai", "tool", "human"] == [m.type for m in last]
    assert "call_cut" == last[2].tool_call_id
    chat = ChatAnthropic(model=ANTHROPIC_MODEL, api_key="offline")  # type: ignore[call-arg]
    body = chat._get_request_payload(last)  # noqa: SLF001  # the body it would send
    assert () == anthropic_adapter.check(body)


def _deep(levels: int) -> dict[str, Any]:
    args: dict[str, Any] = {"key": "k"}
    for _ in range(levels):
        args = {"key": "k", "more": args}
    return args


_NOT_JSON = {
    "artifact-bytes": ToolMessage("r", tool_call_id="c1", artifact=b"\x89PNG", id="t1"),
    "artifact-set": ToolMessage("r", tool_call_id="c1", artifact={"rows": {1, 2}, 3: object()}, id="t1"),
    "nan-result-metadata": ToolMessage("r", tool_call_id="c1", response_metadata={"score": float("nan")}, id="t1"),
}
_NOT_JSON_CALLS = {
    "nan-args": {"key": "k", "limit": float("nan")},
    "inf-args": {"key": "k", "limit": float("-inf")},
    "deep-args": _deep(150),
    "deeper-than-python-prints": _deep(3_000),
}


@pytest.mark.parametrize("kind", [*_NOT_JSON, *_NOT_JSON_CALLS])
@pytest.mark.parametrize("middleware", ["context", "summarizing"])
def test_what_json_cannot_hold_is_sent_as_the_state_holds_it(kind, middleware, caplog):
    """
    LangChain keeps any Python object as a tool's artifact and NaN or deep nesting in a call's
    arguments, and sends them as they are (the artifact never): the request is the state's own
    messages, nothing is refused or logged, and a pending call with such arguments is still
    closed under its own id.
    """
    args = _NOT_JSON_CALLS.get(kind, {"key": "k"})
    result = _NOT_JSON.get(kind, ToolMessage("r", tool_call_id="c1", id="t1"))
    call = AIMessage("", tool_calls=[{"name": "lookup", "args": args, "id": "c1"}], id="a1")
    state = [HumanMessage("q1", id="h1"), call, result, AIMessage("a1", id="a2"), HumanMessage("q2", id="h2")]
    if middleware == "context":
        made: Any = ContextMiddleware(TokenBudgetContextManager(100_000))
    else:
        made = SummarizingMiddleware(_summary, max_messages=3, keep_recent=2)
    with caplog.at_level(logging.WARNING, logger="workingctx.integrations.langchain"):
        sent = _call(made, state)
    if middleware == "context":
        assert all(a is b for a, b in zip(sent.messages, state, strict=True))
    else:  # the summary of the exchange, then the question before it and the newest messages
        assert "2 messages" == sent.messages[0].content
        assert all(a is b for a, b in zip(sent.messages[1:], [state[0], *state[3:]], strict=True))
    assert "" == caplog.text
    pending = [HumanMessage("q1", id="h1"), call]
    with caplog.at_level(logging.WARNING, logger="workingctx.integrations.langchain"):
        closed = _call(ContextMiddleware(TokenBudgetContextManager(100_000)), pending)
    assert closed.messages[1] is call
    assert "c1" == closed.messages[2].tool_call_id
    assert "pending-at-end" in caplog.text


async def _summary(messages: Any, *, prompt: str, max_tokens: int) -> str:  # noqa: ARG001
    return f"{len(messages)} messages"


def test_a_tool_artifact_of_any_object_keeps_the_agent_running():
    """
    A tool with response_format="content_and_artifact" may return any object as its artifact,
    which the state keeps and no chat model sends: the next turns run, each request valid.
    """

    @tool(response_format="content_and_artifact")
    def fetch(url: str) -> tuple[str, Any]:
        """Fetch a page."""
        return f"page {url}", {"raw": b"\x89PNG", "rows": {1, 2}}

    call = AIMessage("", tool_calls=[{"name": "fetch", "args": {"url": "u"}, "id": "c1"}])
    model = ToolCallingFake(messages=iter([call, AIMessage("Read it."), AIMessage("Still read.")]))
    middleware = ContextMiddleware(TokenBudgetContextManager(2_000))
    agent = create_agent(model, [fetch], middleware=[middleware], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "artifact"}}
    for question in ("q1", "q2"):
        agent.invoke({"messages": [HumanMessage(question)]}, config)
    assert ["human", "ai", "tool", "ai", "human"] == [m.type for m in model.received[-1]]
    assert ("c1", b"\x89PNG") == (model.received[-1][2].tool_call_id, model.received[-1][2].artifact["raw"])


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 6) | st.floats(allow_nan=False) | st.sampled_from(["h1", "a1", "h2"]),
    lambda inner: st.lists(inner, max_size=3),
    max_leaves=6,
)


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "through": st.just(2) | _JSON_VALUES,  # mostly matching the state: the rest is then read
            "last_id": st.just("a1") | _JSON_VALUES,
            "kept": _JSON_VALUES | st.text(max_size=3),
            "summary": _JSON_VALUES | st.text(max_size=5),
        },
    )
)
def test_a_summary_record_it_did_not_write_loses_no_message(record):
    """
    A summary record in the state of another shape (an older version's checkpoint, an
    update_state by hand) is left out, never raised on: a message the request leaves out is
    always one a summary in the request covers.
    """
    state = [HumanMessage("q1", id="h1"), AIMessage("a1", id="a1"), HumanMessage("q2", id="h2")]
    sent = _call(
        SummarizingMiddleware(_summary, max_messages=30),
        state,
        state={"messages": state, "workingctx_summary": record},
    )
    summarized = [m for m in sent.messages if isinstance(m, SystemMessage)]
    if not summarized:
        assert state == sent.messages
