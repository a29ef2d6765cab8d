"""
workingctx.integrations.pydantic_ai: trim_history as pydantic-ai's ProcessHistory
capability, with pydantic-ai's own message types, TestModel and FunctionModel, offline.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import subprocess
import sys
import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    BinaryContent,
    DocumentUrl,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    RetryFeedbackPart,
    RetryInfo,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    repair_messages,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RequestUsage

from tests.stores import ROOT
from workingctx import (
    LastNTurns,
    Message,
    MessageContextManager,
    RoleFilter,
    Since,
    SummaryContextManager,
    TokenBudget,
    TokenBudgetContextManager,
    ToolCall,
    WorkingContext,
)
from workingctx.exceptions import ArgumentTypeError
from workingctx.integrations._window import CallNames, Window
from workingctx.integrations.pydantic_ai import to_workingctx, trim_history
from workingctx.validity import check_messages

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def tokens(messages: list[ModelMessage]) -> int:
    return WorkingContext(messages=to_workingctx(messages)).count_tokens()


def problems(messages: list[ModelMessage]) -> list[str]:
    """
    What a model would refuse: a tool return with no call before it, a call
    never answered, a first message that is not the user's request.
    """
    found: list[str] = []
    # pydantic-ai's pairing (repair_messages): a return answers the oldest open call with its id, and a
    # call reusing the id of open calls from an earlier response leaves those never answered
    open_calls: dict[str, list[int]] = {}
    for index, message in enumerate(messages):
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                waiting = open_calls.setdefault(part.tool_call_id, [])
                if waiting and waiting[-1] != index:
                    found.append(f"call {part.tool_call_id!r} of message {waiting[-1]} never answered")
                    waiting.clear()
                waiting.append(index)
            elif isinstance(part, ToolReturnPart):
                if not open_calls.get(part.tool_call_id):
                    found.append(f"{index}: return for {part.tool_call_id!r} answers no open call")
                else:
                    open_calls[part.tool_call_id].pop(0)
    found.extend(f"call {c!r} never answered" for c, waiting in sorted(open_calls.items()) for _ in waiting)
    first = messages[0] if messages else None
    if not isinstance(first, ModelRequest):
        found.append("the history does not start with a request")
    else:
        opening = list(itertools.takewhile(lambda m: isinstance(m, ModelRequest), messages))  # sent as one
        speakers = [p for m in opening for p in m.parts if not isinstance(p, SystemPromptPart)]
        if not speakers or not isinstance(speakers[0], UserPromptPart):
            found.append(f"the first request opens with {speakers[:1]!r}, not the user's prompt")
    if messages and not isinstance(messages[-1], ModelRequest):
        found.append("the history does not end with a request")
    return found


# -- histories as pydantic-ai keeps them ------------------------------------------------------


@st.composite
def histories(draw: Any, max_turns: int = 6) -> list[ModelMessage]:
    """
    A valid, tool-heavy pydantic-ai history ending in a request: each turn a
    prompt, then steps of (thinking, parallel tool calls with usage) answered
    by returns or retries, maybe an answer refused and its feedback, then a
    text answer. Call ids are reused across turns, as TestModel reuses them.
    """
    messages: list[ModelMessage] = []
    system = [SystemPromptPart("Be brief.", timestamp=T0)] if draw(st.booleans()) else []
    turns = draw(st.integers(1, max_turns))
    for turn in range(turns):
        prompt = UserPromptPart(draw(st.text(min_size=1, max_size=30)) + f" #{turn}", timestamp=T0)
        pending: list[Any] = []
        messages.append(ModelRequest(parts=[*(system if turn == 0 else []), prompt], timestamp=T0))
        for _ in range(draw(st.integers(0, 3))):
            names = draw(st.lists(st.sampled_from(["weather", "time", "news"]), min_size=1, max_size=3, unique=True))
            parts: list[Any] = []
            if draw(st.booleans()):
                parts.append(ThinkingPart(draw(st.text(max_size=40)), signature="sig", provider_name="anthropic"))
            parts += [ToolCallPart(n, {"city": draw(st.text(max_size=12))}, tool_call_id=f"call_{n}") for n in names]
            usage = RequestUsage(input_tokens=draw(st.integers(0, 999)), output_tokens=7)
            messages.append(ModelResponse(parts=parts, usage=usage, model_name="m", timestamp=T0))
            pending = [
                ToolReturnPart(
                    n,
                    draw(st.text(max_size=50)),
                    tool_call_id=f"call_{n}",
                    timestamp=T0,
                    outcome=draw(st.sampled_from(["success", "retried", "failed"])),
                )
                for n in names
            ]
            messages.append(ModelRequest(parts=pending, timestamp=T0))
        if draw(st.integers(0, 3)) == 0:  # an answer pydantic-ai refused, and its feedback
            messages.append(ModelResponse(parts=[TextPart(draw(st.text(max_size=40)))], model_name="m", timestamp=T0))
            feedback = RetryFeedbackPart(draw(st.text(max_size=40)), retry=RetryInfo(cause="validation_error"))
            messages.append(ModelRequest(parts=[feedback], timestamp=T0))
        if turn < turns - 1:
            messages.append(ModelResponse(parts=[TextPart(draw(st.text(max_size=60)))], model_name="m", timestamp=T0))
    return repair_messages(messages)  # how pydantic-ai hands a history over: already clean


@st.composite
def broken_histories(draw: Any) -> list[ModelMessage]:
    """
    A history with up to three parts or messages lost (returns without calls, calls never answered),
    ending in a request, as a broken store or another processor could hand it over.
    """
    history = draw(histories())
    out: list[ModelMessage] = []
    for message in history:
        parts = [p for p in message.parts if draw(st.integers(0, 9)) > 0]
        if parts and draw(st.integers(0, 9)) > 0:
            out.append(dataclasses.replace(message, parts=parts))
    if not out or not isinstance(out[-1], ModelRequest):
        out.append(ModelRequest(parts=[UserPromptPart("And now?", timestamp=T0)], timestamp=T0))
    return out


def trimmers() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.integers(40, 600).map(TokenBudgetContextManager),
        st.integers(2, 12).map(MessageContextManager),
        st.integers(1, 4).map(LastNTurns),
        st.integers(40, 400).map(TokenBudget),
        st.just(~RoleFilter({"tool"})),
        st.just(Since(0)),
    )


BROKEN_TRIMMERS = [
    TokenBudgetContextManager(40),
    TokenBudgetContextManager(10_000),
    MessageContextManager(2),
    LastNTurns(1),
    TokenBudget(40),
    ~RoleFilter({"tool"}),
]


def _call(name: str) -> ToolCallPart:
    return ToolCallPart(name, {"city": "Oslo"}, tool_call_id=f"call_{name}")


def _return(name: str) -> ToolReturnPart:
    return ToolReturnPart(name, "rain", tool_call_id=f"call_{name}", timestamp=T0)


class TestConstruction:
    @pytest.mark.parametrize("value", [42, "LastNTurns(3)", None, TokenBudgetContextManager])
    def test_wrong_type_refused(self, value):
        """
        What is neither a manager nor a scope is refused at construction, naming the parameter.
        """
        with pytest.raises(TypeError, match="manager_or_scope must be") as info:
            trim_history(value)
        assert isinstance(info.value, ArgumentTypeError)
        assert "manager_or_scope" == info.value.argument

    def test_import_is_lazy(self):
        """
        Importing this module imports no pydantic-ai.
        """
        code = "import sys, workingctx.integrations.pydantic_ai; print('pydantic_ai' in sys.modules)"
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, env={"PYTHONPATH": "."}
        )
        assert "False" == out.stdout.strip()


class TestProcessor:
    @settings(max_examples=60, deadline=None)
    @given(history=histories(), trimmer=trimmers())
    def test_repair_has_nothing_to_do(self, history, trimmer):
        """
        Over random tool-heavy histories and any manager or scope, pydantic-ai's own repair leaves the
        output unchanged; the output is valid, ends in the request in flight, and is made of the very
        objects given (a request kept in part holds the very parts).
        """
        assert repair_messages(history) == history
        out = run(trim_history(trimmer)(list(history)))
        assert repair_messages(out) == out
        assert [] == problems(out)
        assert out[-1].parts[-1] is history[-1].parts[-1]
        given_parts = {id(p) for m in history for p in m.parts}
        for message in out:
            if isinstance(message, ModelResponse):
                assert any(message is m for m in history)
            else:
                assert all(id(p) in given_parts for p in message.parts)

    @settings(max_examples=40, deadline=None)
    @given(history=histories(), budget=st.integers(60, 600))
    def test_fits_the_budget(self, history, budget):
        """
        With a token budget manager the output fits the budget, unless the messages always kept do not.
        """
        manager = TokenBudgetContextManager(budget)
        out = run(trim_history(manager)(list(history)))
        if not manager.last_trim.over_budget:
            assert tokens(out) <= budget

    @settings(max_examples=30, deadline=None)
    @given(history=histories())
    def test_nothing_cut_is_lossless(self, history):
        """
        When nothing needs cutting, the output is the input: the very objects, usage, thinking,
        calls and returns untouched, and it serializes to the same JSON.
        """
        out = run(trim_history(TokenBudgetContextManager(10**9))(list(history)))
        assert len(history) == len(out)
        assert all(a is b for a, b in zip(history, out, strict=True))
        assert ModelMessagesTypeAdapter.dump_json(history) == ModelMessagesTypeAdapter.dump_json(out)

    def test_sync_and_ctx_forms_are_not_needed(self):
        """
        The processor is an async function of the messages alone, the form ProcessHistory runs directly.
        """
        processor = trim_history(LastNTurns(1))
        assert asyncio.iscoroutinefunction(processor)
        assert ["messages"] == list(processor.__code__.co_varnames[: processor.__code__.co_argcount])

    def test_a_history_opening_with_a_response_opens_with_the_prompt(self):
        """
        A history handed over with a response first, whose call is answered
        after the user's prompt: the response and the return that answers it
        are left out, and the output opens with the prompt.
        """
        history: list[ModelMessage] = [
            ModelResponse(parts=[ToolCallPart("weather", {"city": "Oslo"}, tool_call_id="call_weather")], timestamp=T0),
            ModelRequest(parts=[UserPromptPart("q", timestamp=T0)], timestamp=T0),
            ModelRequest(parts=[ToolReturnPart("weather", "rain", tool_call_id="call_weather", timestamp=T0)]),
        ]
        out = run(trim_history(TokenBudgetContextManager(40))(list(history)))
        assert [history[1]] == out
        assert [] == problems(out)
        assert repair_passes_idle(history, out)

    @settings(max_examples=60, deadline=None)
    @given(history=broken_histories(), trimmer=trimmers())
    def test_broken_history_never_passed_on(self, history, trimmer):
        """
        Whatever a broken history lost, the output is valid (the user's prompt first when there is one)
        and leaves pydantic-ai's repair passes nothing to do.
        """
        out = run(trim_history(trimmer)(list(history)))
        found = problems(out)
        if not any(isinstance(p, UserPromptPart) for m in history for p in m.parts):  # no prompt can come first
            found = [p for p in found if "not the user's prompt" not in p and "not start with" not in p]
        assert [] == found
        assert repair_passes_idle(history, out)

    @pytest.mark.parametrize("trimmer", BROKEN_TRIMMERS, ids=repr)
    def test_an_in_flight_request_of_broken_returns_leaves_the_prompt(self, trimmer, caplog):
        """
        An orphan return first, then a response whose calls are answered only after the user's prompt,
        and a request in flight holding only such a return: every exchange is broken and dropped
        whole (logged), and what is left is the user's prompt, the very request, under any budget.
        """
        history: list[ModelMessage] = [
            ModelRequest(parts=[_return("weather")], timestamp=T0),
            ModelResponse(parts=[_call("weather"), _call("news")], model_name="m", timestamp=T0),
            ModelRequest(parts=[UserPromptPart("What is the weather like in Oslo today?", timestamp=T0)]),
            ModelRequest(parts=[_return("weather")], timestamp=T0),
        ]
        with caplog.at_level(logging.WARNING, logger="workingctx.integrations.pydantic_ai"):
            out = run(trim_history(trimmer)(list(history)))
        assert 1 == len(out)
        assert out[0] is history[2]
        assert [] == problems(out)
        assert repair_passes_idle(history, out)
        assert repair_messages(out) == out
        assert "message 0: orphan-result" in caplog.text
        assert "message 1: dangling-call" in caplog.text

    @pytest.mark.parametrize("trimmer", BROKEN_TRIMMERS, ids=repr)
    def test_an_in_flight_request_emptied_after_a_response_stays_empty(self, trimmer):
        """
        A response first whose call is answered by the request in flight, after the user's prompt and
        an answer: the request in flight loses its only part and stays, empty, as pydantic-ai's own
        repair keeps it; the prompt and the answer before it are the very objects.
        """
        history: list[ModelMessage] = [
            ModelResponse(parts=[_call("weather")], model_name="m", timestamp=T0),
            ModelRequest(parts=[UserPromptPart("What is the weather like in Oslo today?", timestamp=T0)]),
            ModelResponse(parts=[TextPart("It rains.")], model_name="m", timestamp=T0),
            ModelRequest(parts=[_return("weather")], timestamp=T0),
        ]
        out = run(trim_history(trimmer)(list(history)))
        assert 3 == len(out)
        assert out[0] is history[1]
        assert out[1] is history[2]
        assert isinstance(out[2], ModelRequest)
        assert [] == out[2].parts
        assert [] == problems(out)
        assert repair_passes_idle(history, out)
        assert repair_messages(out) == out

    @pytest.mark.parametrize("trimmer", BROKEN_TRIMMERS, ids=repr)
    def test_prompts_the_repair_brings_together_are_one_request(self, trimmer):
        """
        A response first whose call is answered between two prompts: the return goes with the
        response, and the two prompts, now next to each other, are one request holding the very parts
        (the newest alone, the very request, when the trimmer keeps one turn).
        """
        history: list[ModelMessage] = [
            ModelResponse(parts=[_call("time")], model_name="m", timestamp=T0),
            ModelRequest(parts=[UserPromptPart("What time is it in Oslo?", timestamp=T0)], timestamp=T0),
            ModelRequest(parts=[_return("time")], timestamp=T0),
            ModelRequest(parts=[UserPromptPart("And the weather?", timestamp=T0)], timestamp=T0),
        ]
        out = run(trim_history(trimmer)(list(history)))
        prompts = [history[1].parts[0], history[3].parts[0]]
        assert 1 == len(out)
        assert out[0].parts[-1] is prompts[1]  # the newest prompt, always kept
        if len(out[0].parts) == 2:  # the earlier prompt, when the trimmer keeps it, in the same request
            assert out[0].parts[0] is prompts[0]
        else:
            assert out[0] is history[3]
        assert [] == problems(out)
        assert repair_passes_idle(history, out)
        assert repair_messages(out) == out

    @settings(max_examples=60, deadline=None)
    @given(history=broken_histories(), budget=st.integers(40, 600))
    def test_broken_history_fits_the_budget_with_the_newest_prompt(self, history, budget):
        """
        A broken history trimmed by a token budget manager fits the budget unless the messages always
        kept do not, and the newest user prompt is always kept (the very part).
        """
        manager = TokenBudgetContextManager(budget)
        out = run(trim_history(manager)(list(history)))
        if not manager.last_trim.over_budget:
            assert tokens(out) <= budget
        prompts = [p for m in history for p in m.parts if isinstance(p, UserPromptPart)]
        if prompts:
            assert any(p is prompts[-1] for m in out for p in m.parts)

    @pytest.mark.parametrize("joined", [True, False])
    def test_the_window_repairs_before_it_cuts(self, joined, caplog):
        """
        The window every integration trims drops a broken exchange before the manager cuts: a cut
        that left out the prompt between a call and its misplaced result would join the two halves.
        """
        messages = [
            Message("tool", "rain", tool_call_id="call_weather"),
            Message("assistant", tool_calls=(ToolCall("call_weather", "weather"), ToolCall("call_news", "news"))),
            Message("user", "What is the weather like in Oslo today?"),
            Message("tool", "rain", tool_call_id="call_weather"),
        ]
        log = logging.getLogger("workingctx.integrations.pydantic_ai")
        window = Window(TokenBudgetContextManager(40), log, joined=joined)
        with caplog.at_level(logging.WARNING, logger=log.name):
            kept = run(window.trim(messages, sendable=True))
        assert [messages[2]] == kept
        assert "misplaced-result" in caplog.text

    @pytest.mark.usefixtures("fast_switching")
    @pytest.mark.parametrize("trimmer", [LastNTurns(1000), TokenBudgetContextManager(10**6)], ids=["scope", "manager"])
    def test_one_processor_in_many_threads(self, trimmer):
        """
        One processor (one agent) serving runs in four threads, each with its own event loop (as
        run_sync makes them): every call gets back its own history, never another run's, never an error.
        """
        processor = trim_history(trimmer)
        wrong: list[tuple[str, int]] = []
        errors: list[BaseException] = []

        def work(tag: str) -> None:
            async def calls() -> None:
                history: list[ModelMessage] = []
                for k in range(150):
                    history = [*history, ModelRequest(parts=[UserPromptPart(f"{tag}{k}", timestamp=T0)])]
                    out = await processor(list(history))
                    if out != history:
                        wrong.append((tag, k))
                    history = [*history, ModelResponse(parts=[TextPart(f"{tag}.{k}")], timestamp=T0)]

            try:
                run(calls())
            except BaseException as error:  # reported to the test
                errors.append(error)

        threads = [threading.Thread(target=work, args=(tag,)) for tag in "ABCD"]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [] == errors
        assert [] == wrong

    def test_runs_as_the_capability(self):
        """
        The processor runs as ProcessHistory's own function (pydantic-ai reads its signature at run time).
        """
        agent = Agent(TestModel(), capabilities=[ProcessHistory(trim_history(LastNTurns(1)))])
        history: list[ModelMessage] = []
        for turn in range(3):
            history = run(agent.run(f"turn {turn}", message_history=history)).all_messages()
        prompts = [p.content for m in history for p in m.parts if isinstance(p, UserPromptPart)]
        assert ["turn 2"] == prompts  # the run's history is what the processor kept

    def test_orphan_is_repaired_and_logged(self, caplog):
        """
        A history handed over broken (a return whose call is nowhere) reaches the model without the
        orphan, and the repair is logged.
        """
        history: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart("q", timestamp=T0)], timestamp=T0),
            ModelResponse(parts=[TextPart("a")], model_name="m", timestamp=T0),
            ModelRequest(
                parts=[ToolReturnPart("weather", "18C", tool_call_id="gone", timestamp=T0), UserPromptPart("next")],
                timestamp=T0,
            ),
        ]
        with caplog.at_level(logging.WARNING, logger="workingctx.integrations.pydantic_ai"):
            out = run(trim_history(MessageContextManager(20))(history))
        assert [] == problems(out)
        assert repair_messages(out) == out
        assert ["q", "a", "next"] == [p.content for m in out for p in m.parts]
        assert "orphan-result" in caplog.text

    @pytest.mark.parametrize("trimmer", [MessageContextManager(20), LastNTurns(3)], ids=["manager", "scope"])
    @pytest.mark.parametrize(
        ("ids", "answered"),
        [
            (("call_a", "call_b"), ("call_a", "call_b")),
            (("call_a", "call_b"), ("call_b",)),
            (("call_w", "call_w"), ("call_w",)),
        ],
        ids=["both-answered", "first-pending", "reused-id"],
    )
    def test_joined_call_turns_are_a_broken_exchange(self, trimmer, ids, answered, caplog):
        """
        Two responses in a row that only call, then one request with returns, are one exchange (a
        trailing one may wait for results) for workingctx, but pydantic-ai needs each response's calls
        answered by the next request: the first response is dropped whole with its returns and logged,
        the second stays with its return, and pydantic-ai's repair has nothing to do.
        """
        call_a = ToolCallPart("weather", {"city": "Oslo"}, tool_call_id=ids[0])
        call_b = ToolCallPart("weather", {"city": "Rome"}, tool_call_id=ids[1])
        returns = [ToolReturnPart("weather", f"{i}C", tool_call_id=i, timestamp=T0) for i in answered]
        history: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart("q", timestamp=T0)], timestamp=T0),
            ModelResponse(parts=[call_a], model_name="m", timestamp=T0),
            ModelResponse(parts=[call_b], model_name="m", timestamp=T0),
            ModelRequest(parts=returns, timestamp=T0),
        ]
        names = CallNames()  # reused ids get local names, as the window gives them
        local = [names.rename(m) for m in to_workingctx(history)]
        assert () == check_messages(local, allow_pending=True)  # one exchange for workingctx
        if answered != ids:  # the shapes pydantic-ai itself would repair (answer the first call)
            assert not repair_passes_idle(history, history)
        with caplog.at_level(logging.WARNING, logger="workingctx.integrations.pydantic_ai"):
            out = run(trim_history(trimmer)(list(history)))
        assert repair_passes_idle(history, out)
        assert repair_messages(out) == out
        assert [] == problems(out)
        assert 3 == len(out)
        assert out[0] is history[0]
        assert out[1] is history[2]
        assert [returns[-1]] == out[2].parts
        assert out[2].parts[0] is returns[-1]
        assert "message 1: dangling-call" in caplog.text

    def test_summary_goes_into_a_request(self):
        """
        A system prompt the manager adds (a summary) is sent inside a request, never as a request of its own.
        """

        async def summarize(messages, *, prompt, max_tokens):  # noqa: ARG001  # the Summarizer protocol
            return "Earlier: the user asked about the weather."

        history = [*run(_scripted_history(8)), ModelRequest(parts=[UserPromptPart("And tomorrow?")])]
        manager = SummaryContextManager(summarize, max_messages=6, keep_recent=3)
        out = run(trim_history(manager)(history))
        assert repair_messages(out) == out
        assert [] == problems(out)
        summaries = [p for m in out for p in m.parts if isinstance(p, SystemPromptPart) and "Earlier" in p.content]
        assert 1 == len(summaries)


async def _scripted_history(turns: int) -> list[ModelMessage]:
    agent = Agent(FunctionModel(_scripted), system_prompt="Be brief.")
    agent.tool_plain(weather)
    history: list[ModelMessage] = []
    for turn in range(turns):
        history = (await agent.run(f"turn {turn}", message_history=history)).all_messages()
    return history


# -- end to end --------------------------------------------------------------------------------


def weather(city: str) -> str:
    """
    The weather in a city.
    """
    return f"{city}: 18C, light wind from the west, " + "clear skies " * 6


def _scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:  # noqa: ARG001  # FunctionModel's
    """
    FunctionModel's script: a prompt gets two parallel calls, their returns one more call, then the answer.
    """
    last = messages[-1]
    returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
    step = sum(1 for m in messages if isinstance(m, ModelResponse))
    if not returns:
        parts: list[Any] = [ThinkingPart("Which cities?", signature="s")]
        parts += [ToolCallPart("weather", {"city": f"city {step}.{k}"}, tool_call_id=f"w{k}") for k in range(2)]
        return ModelResponse(parts=parts, usage=RequestUsage(input_tokens=100, output_tokens=20))
    if len(returns) == 2:
        return ModelResponse(parts=[ToolCallPart("weather", {"city": "Rome"}, tool_call_id="w0")])
    return ModelResponse(parts=[TextPart(f"All sunny (step {step}). " * 3)])


class Answer(BaseModel):
    city: str
    celsius: int


class Recorder:
    """
    Wraps a processor: keeps what it was given and gave back each time, to check pydantic-ai's repair on it.
    """

    def __init__(self, processor: Any) -> None:
        self.processor = processor
        self.calls: list[tuple[list[ModelMessage], list[ModelMessage]]] = []

    async def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        given = list(messages)
        out = await self.processor(messages)
        self.calls.append((given, out))
        return out


def meet(first: ModelMessage, second: ModelMessage, a: ModelMessage, b: ModelMessage) -> bool:
    """
    Whether *first* ends with a part of *a* and *second* starts with a part of *b* (or is *b*).
    """
    ends = bool(first.parts) and any(first.parts[-1] is p for p in a.parts)
    starts = second is b or (bool(second.parts) and any(second.parts[0] is p for p in b.parts))
    return (ends or first is a) and starts


def repair_passes_idle(handed: list[ModelMessage], out: list[ModelMessage]) -> bool:
    """
    Whether pydantic-ai's repair passes (orphaned returns dropped, dangling calls answered) have nothing
    to do on *out*, and the only join its merge pass would make is of two requests that pydantic-ai
    itself handed over in a row (a new prompt after a history ending in tool returns).
    """
    from pydantic_ai.messages import (  # noqa: PLC0415  # the repair passes repair_messages runs, one by one
        _drop_orphaned_tool_results,
        _repair_dangling_tool_calls,
    )

    if _drop_orphaned_tool_results(out) is not out:
        return False
    if _repair_dangling_tool_calls(out, repair_last_response=True) is not out:
        return False
    for first, second in itertools.pairwise(out):
        if isinstance(first, ModelRequest) and isinstance(second, ModelRequest):
            pairs = itertools.pairwise(handed)
            if not any(meet(first, second, a, b) for a, b in pairs):
                return False
    return True


TURNS = 22


class TestEndToEnd:
    def test_function_model(self, capsys):
        """
        22 turns with FunctionModel, three tool calls a turn in two steps: every model request is valid,
        user-first, within the budget, needed no repair; the history the application keeps
        (each run's new messages) is complete.
        """
        budget = 700
        received: list[list[ModelMessage]] = []

        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            received.append(list(messages))
            return _scripted(messages, info)

        recorder = Recorder(trim_history(TokenBudgetContextManager(budget)))
        agent = Agent(FunctionModel(model), system_prompt="Be brief.", capabilities=[ProcessHistory(recorder)])
        agent.tool_plain(weather)
        history: list[ModelMessage] = []
        kept: list[ModelMessage] = []
        for turn in range(TURNS):
            result = run(agent.run(f"Weather, turn {turn}?", message_history=history))
            history = result.all_messages()
            kept += result.new_messages()
        for messages in received:
            assert [] == problems(messages)
            assert tokens(messages) <= budget
        assert all(repair_messages(out) == out for _, out in recorder.calls)
        calls = [p for m in kept for p in m.parts if isinstance(p, ToolCallPart)]
        returns = [p for m in kept for p in m.parts if isinstance(p, ToolReturnPart)]
        prompts = [p.content for m in kept for p in m.parts if isinstance(p, UserPromptPart)]
        assert [f"Weather, turn {t}?" for t in range(TURNS)] == prompts
        assert 3 * TURNS == len(calls) == len(returns)
        assert max(len(m) for m in received) < len(kept)  # trimmed: the model never got the whole history
        # between cuts each request continues the one before (the provider's prompt cache keeps hitting)
        cuts = sum(1 for a, b in itertools.pairwise(received) if b[: len(a)] != a)
        assert 0 < cuts <= len(received) // 4
        with capsys.disabled():
            print(
                f"\n[FunctionModel] {TURNS} turns, {len(calls)} tool calls, {len(received)} model requests, {cuts} cuts"
            )

    def test_test_model(self, capsys):
        """
        22 turns with TestModel, a structured output (an output tool call every turn, under the same
        call id every time) and a function tool: every processed history is valid, left pydantic-ai's
        repair passes nothing to do, fits the budget; the history the application keeps is complete.
        """
        budget = 400
        recorder = Recorder(trim_history(TokenBudgetContextManager(budget)))
        agent = Agent(
            TestModel(), output_type=Answer, system_prompt="Be brief.", capabilities=[ProcessHistory(recorder)]
        )
        agent.tool_plain(weather)
        history: list[ModelMessage] = []
        kept: list[ModelMessage] = []
        for turn in range(TURNS):
            result = run(agent.run(f"Weather, turn {turn}? " * 4, message_history=history))
            assert isinstance(result.output, Answer)
            history = result.all_messages()
            kept += result.new_messages()
        for handed, out in recorder.calls:
            assert repair_passes_idle(handed, out)
            assert [] == problems(out)
            assert tokens(out) <= budget
        calls = [p for m in kept for p in m.parts if isinstance(p, ToolCallPart)]
        returns = [p for m in kept for p in m.parts if isinstance(p, ToolReturnPart)]
        assert len(calls) == len(returns) >= TURNS + 1
        assert TURNS == sum(1 for m in kept for p in m.parts if isinstance(p, UserPromptPart))
        assert len(history) < len(kept)
        with capsys.disabled():
            print(f"\n[TestModel] {TURNS} turns, {len(calls)} tool calls, {len(recorder.calls)} model requests")


class TestPartsOfTheirOwn:
    """
    The parts pydantic-ai keeps for itself, prompts a tool enqueues, content
    objects and summaries: each where pydantic-ai would have it.
    """

    def test_bookkeeping_parts_are_no_turn(self):
        """
        Instructions and tool availability recorded in a request ride with its
        prompt or return: no request the trim keeps holds them alone, and a
        turn count does not count them.
        """
        from pydantic_ai.messages import InstructionBaselinePart, ToolAvailabilityDeltaPart  # noqa: PLC0415

        history: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart("What is 2+2?"), InstructionBaselinePart(instructions=[])]),
            ModelResponse(parts=[_call("add")]),
            ModelRequest(parts=[_return("add"), ToolAvailabilityDeltaPart(tools_added=["news"])]),
            ModelResponse(parts=[TextPart("4")]),
            ModelRequest(parts=[UserPromptPart("And 3+3?")]),
        ]
        for trimmer in (MessageContextManager(2), LastNTurns(2), LastNTurns(1)):
            out = run(trim_history(trimmer)(list(history)))
            requests = [m for m in out if isinstance(m, ModelRequest)]
            assert all(any(isinstance(p, UserPromptPart | ToolReturnPart) for p in r.parts) for r in requests)
            assert isinstance(out[0].parts[0], UserPromptPart)
        assert run(trim_history(LastNTurns(2))(list(history))) == history

    def test_a_prompt_a_tool_enqueued_between_returns_keeps_the_exchange(self):
        """
        A prompt a tool enqueued right after its return, between two returns
        of parallel calls, breaks no exchange: everything is kept, as it is.
        """
        history: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart("weather in Oslo and Rome?")]),
            ModelResponse(parts=[_call("oslo"), _call("rome")]),
            ModelRequest(parts=[_return("oslo"), UserPromptPart("note: metric"), _return("rome")]),
        ]
        out = run(trim_history(TokenBudgetContextManager(100_000))(list(history)))
        assert all(a is b for a, b in zip(out, history, strict=True))

    def test_text_content_counts_as_its_text(self):
        """
        ``TextContent`` in a prompt counts as the text it holds, so a budget
        cuts a history of long ones.
        """
        from pydantic_ai.messages import TextContent  # noqa: PLC0415

        history: list[ModelMessage] = []
        for turn in range(5):
            history.append(ModelRequest(parts=[UserPromptPart([f"part {turn}", TextContent("lorem ipsum " * 2000)])]))
            history.append(ModelResponse(parts=[TextPart(f"answer {turn}")]))
        history.append(ModelRequest(parts=[UserPromptPart("last")]))
        out = run(trim_history(TokenBudgetContextManager(1000))(list(history)))
        assert len(out) < len(history)

    def test_what_a_part_of_their_own_sends_counts(self):
        """
        A summary the application stored in a request (a ``CompactionPart``,
        sent to the model as text) counts against the budget with the prompt
        it rides with: a budget far smaller than it leaves it out.
        """
        from pydantic_ai.messages import CompactionPart  # noqa: PLC0415

        summary = CompactionPart(content="Earlier we discussed the weather in many cities. " * 300)
        history: list[ModelMessage] = [
            ModelRequest(parts=[summary, UserPromptPart("And Oslo?")]),
            ModelResponse(parts=[TextPart("Rain.")]),
            ModelRequest(parts=[UserPromptPart("And Bergen?")]),
        ]
        out = run(trim_history(TokenBudgetContextManager(500))(list(history)))
        assert out == history[-1:]

    def test_a_summary_follows_the_system_prompt(self):
        """
        The summary a manager makes goes after the request's system prompt, as
        the manager places it, not in front of it.
        """

        async def summarizer(messages: list[Message], *, prompt: str, max_tokens: int) -> str:  # noqa: ARG001
            return f"SUMMARY of {len(messages)} messages"

        history: list[ModelMessage] = [
            ModelRequest(parts=[SystemPromptPart("You are a weather bot."), UserPromptPart("Weather in Oslo?")]),
            ModelResponse(parts=[_call("weather")]),
            ModelRequest(parts=[_return("weather")]),
            ModelResponse(parts=[TextPart("Rain.")]),
            ModelRequest(parts=[UserPromptPart("And Bergen?")]),
        ]
        out = run(trim_history(SummaryContextManager(summarizer, max_messages=4, keep_recent=2))(list(history)))
        first = [getattr(p, "content", None) for p in out[0].parts]
        assert first[0] == "You are a weather bot."
        assert first[1].startswith("SUMMARY")


class TestFeedbackOnARefusedResponse:
    """
    The feedback pydantic-ai sends when it refuses a response (an output that
    does not validate) answers that response: it is never taken for the
    user's turn, so a trim keeps the question, the response and the feedback.
    """

    def test_a_retried_output_keeps_the_question(self):
        """
        A run whose first answer fails validation: the retry request the model
        gets under LastNTurns(1) still holds the user's question, and the
        answer it refused before the feedback.
        """
        received: list[list[ModelMessage]] = []

        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            received.append(list(messages))
            if len(received) == 1:
                return ModelResponse(parts=[TextPart("It is sunny in Oslo.")])
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"city": "Oslo", "celsius": 18})])

        trim = ProcessHistory(trim_history(LastNTurns(1)))
        agent = Agent(FunctionModel(model), output_type=Answer, capabilities=[trim])
        result = run(agent.run("Weather in Oslo, as JSON?"))
        assert result.output == Answer(city="Oslo", celsius=18)
        retry = received[1]  # FunctionModel hands the feedback over as a prompt of its own
        assert [ModelRequest, ModelResponse, ModelRequest] == [type(m) for m in retry]
        assert retry[0].parts[0].content == "Weather in Oslo, as JSON?"
        assert retry[1].parts == [TextPart("It is sunny in Oslo.")]

    @pytest.mark.parametrize("trimmer", BROKEN_TRIMMERS)
    def test_feedback_is_kept_with_the_response_it_answers(self, trimmer):
        """
        Under every trimmer, a request of feedback is sent after the response it
        answers and the user's question before them: pydantic-ai's own feedback,
        and a retry stored by an older pydantic-ai (a ``retry-prompt`` naming no tool).
        """
        stored = b'[{"kind": "request", "parts": [{"part_kind": "retry-prompt", "content": "Use the tool."}]}]'
        feedbacks = [
            ModelRequest(parts=[RetryFeedbackPart("Invalid JSON", retry=RetryInfo(cause="validation_error"))]),
            ModelMessagesTypeAdapter.validate_json(stored)[0],
        ]
        for feedback in feedbacks:
            history: list[ModelMessage] = [
                ModelRequest(parts=[SystemPromptPart("Be brief."), UserPromptPart("Weather in Oslo?")]),
                ModelResponse(parts=[_call("weather")]),
                ModelRequest(parts=[_return("weather")]),
                ModelResponse(parts=[TextPart("Rain in Oslo.")]),
                ModelRequest(parts=[UserPromptPart("As JSON, please.")]),
                ModelResponse(parts=[TextPart("Rain.")]),
                feedback,
            ]
            out = run(trim_history(trimmer)(list(history)))
            assert [] == problems(out)
            assert out[-2:] == history[-2:]
            before = [p.content for m in out[:-2] for p in m.parts if isinstance(p, UserPromptPart)]
            assert before[-1:] == ["As JSON, please."]


def _paused(text: str) -> ModelResponse:
    """
    A response whose turn the provider paused mid-flight (Anthropic's ``pause_turn``, here during
    a web search it runs itself), as pydantic-ai records it for the run that resumes it.
    """
    search = NativeToolCallPart("web_search", {"query": text}, tool_call_id="srvtoolu_1", provider_name="anthropic")
    return ModelResponse(
        parts=[TextPart(f"Searching for {text}."), search],
        model_name="claude",
        provider_name="anthropic",
        provider_response_id="msg_1",
        state="suspended",
    )


class TestAPausedTurn:
    @settings(max_examples=80, deadline=None)
    @given(history=histories(), trimmer=trimmers(), words=st.integers(0, 400))
    def test_a_paused_turn_is_kept_with_its_request(self, history, trimmer, words):
        """
        A history ending in a turn the provider paused is being resumed: pydantic-ai requires the
        processed history to end in that very response, so every trimmer keeps it, and the user's
        question it continues, as the request in flight is kept otherwise; the rest is as valid
        as ever.
        """
        paused = _paused("Oslo weather " * words)  # over the budget of some trimmers
        out = run(trim_history(trimmer)([*history, paused]))
        assert out[-1] is paused
        prompts = [p for m in history for p in m.parts if isinstance(p, UserPromptPart)]
        assert prompts[-1] in [p for m in out for p in m.parts]
        assert ["the history does not end with a request"] == problems(out)

    def test_a_run_resumes_a_paused_turn_under_a_tight_scope(self):
        """
        End to end: a run resuming a paused turn, under a scope whose budget the turn alone
        exceeds, continues it (the model gets the question and the paused response) rather
        than failing on a history that no longer ends in it.
        """
        received: list[list[ModelMessage]] = []

        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:  # noqa: ARG001
            received.append(list(messages))
            return ModelResponse(parts=[TextPart("It rains in Oslo.")])

        history: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart("Hello " * 50)]),
            ModelResponse(parts=[TextPart("Hi " * 50)], model_name="claude"),
            ModelRequest(parts=[UserPromptPart("Weather in Oslo?")]),
            _paused("Oslo weather " * 20),
        ]
        agent = Agent(FunctionModel(model), capabilities=[ProcessHistory(trim_history(TokenBudget(10)))])
        result = run(agent.run(message_history=history))
        assert "It rains in Oslo." == result.output
        assert [history[2:]] == received


def _nested(depth: int) -> dict[str, Any]:
    args: dict[str, Any] = {"city": "Oslo"}
    for _ in range(depth):
        args = {"city": "Oslo", "more": args}
    return args


@pytest.mark.parametrize(
    ("args", "call_id", "name"),
    [
        ('{"city": "Oslo", "days": NaN}', "w0", "weather"),  # pydantic-ai reads NaN in a model's JSON
        ({"city": "Oslo", "days": float("inf")}, "w0", "weather"),
        (_nested(150), "w0", "weather"),
        ({"city": "Oslo"}, "", "weather"),  # a server that gives no call id
        ({"city": "Oslo"}, "w0", ""),  # a tool with no name: pydantic-ai asks the model again
    ],
    ids=["nan-text", "inf", "deep", "empty-id", "empty-name"],
)
def test_any_call_pydantic_ai_runs_is_trimmed_not_refused(args, call_id, name):
    """
    A call pydantic-ai itself runs (or retries), whatever its arguments, id or tool name, never stops
    the run in the processor: three turns with a small budget run to the end, every request
    valid and within the budget once the odd exchange is cut.
    """
    odd = iter([ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=call_id)])])
    received: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        received.append(list(messages))
        reply = next(odd, None)
        return reply if reply is not None else _scripted(messages, info)

    agent = Agent(
        FunctionModel(model),
        retries=3,
        capabilities=[ProcessHistory(trim_history(TokenBudgetContextManager(300)))],
    )
    agent.tool_plain(weather)
    history: list[ModelMessage] = []
    kept: list[ModelMessage] = []
    for turn in range(3):
        result = run(agent.run(f"Weather, turn {turn}?", message_history=history))
        history, kept = result.all_messages(), [*kept, *result.new_messages()]
    assert 3 == sum(1 for m in kept for p in m.parts if isinstance(p, UserPromptPart))
    for messages in received:
        assert [] == problems(messages)
    assert all(tokens(messages) <= 300 for messages in received[2:])


@pytest.mark.parametrize(
    "media",
    [
        ImageUrl("https://example.com/chart.png"),
        BinaryContent(b"\x89PNG\r\n\x1a\n" + bytes(64), media_type="image/png"),
        DocumentUrl("https://example.com/report.pdf"),
        BinaryContent(b"RIFF" + bytes(64), media_type="audio/wav"),
    ],
    ids=["image-url", "binary-image", "document-url", "binary-audio"],
)
def test_media_in_a_prompt_counts_as_media(media):
    """
    An image (765 tokens when its size is unknown), a document page (1,500) or audio (960 for 30s)
    in the user's prompt counts as workingctx counts that media, not as its kind's name: with a
    budget of two of them, no request carries three.
    """
    received: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:  # noqa: ARG001
        received.append(list(messages))
        return ModelResponse(parts=[TextPart("Seen.")])

    one = WorkingContext(messages=to_workingctx([ModelRequest(parts=[UserPromptPart([media])])])).count_tokens()
    budget = 2 * one + 100
    agent = Agent(FunctionModel(model), capabilities=[ProcessHistory(trim_history(TokenBudgetContextManager(budget)))])
    history: list[ModelMessage] = []
    for turn in range(6):
        history = run(agent.run([f"What is in this, turn {turn}?", media], message_history=history)).all_messages()
    media_sent = [
        sum(1 for m in r for p in m.parts if isinstance(p, UserPromptPart) and media in p.content) for r in received
    ]
    assert 6 == len(media_sent)
    assert 2 == max(media_sent)
    assert one > 700
    assert all(tokens(r) <= budget for r in received)


def test_a_screenshot_a_tool_returns_counts_as_an_image():
    """
    A tool returning an image (a screenshot) counts as the image, not as a few tokens of text: with a
    budget of about two images, no request carries three.
    """
    shot = BinaryContent(b"\x89PNG\r\n\x1a\n" + bytes(64), media_type="image/png")
    received: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:  # noqa: ARG001
        received.append(list(messages))
        if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart("The page shows a chart.")])
        step = len(received)
        return ModelResponse(parts=[ToolCallPart("screenshot", {}, tool_call_id=f"s{step}")])

    agent = Agent(FunctionModel(model), capabilities=[ProcessHistory(trim_history(TokenBudgetContextManager(1_700)))])

    @agent.tool_plain
    def screenshot() -> BinaryContent:
        """Take a screenshot of the page."""
        return shot

    history: list[ModelMessage] = []
    for turn in range(5):
        history = run(agent.run(f"What is on the page, turn {turn}?", message_history=history)).all_messages()
    shots = [sum(1 for m in r for p in m.parts if isinstance(p, ToolReturnPart)) for r in received]
    assert 10 == len(shots)
    assert 2 == max(shots)


# -- call ids shared by several calls ----------------------------------------------------------

SHARED_IDS = ["", "call_0", "call_0-2", "pydantic-ai-empty-call-id", "pydantic-ai-empty-call-id-2"]
"""The empty id a server without ids gives, ``call_0`` as OpenAI-compatible servers number each
response's calls, and ids named like workingctx's own local names for them."""


@st.composite
def shared_id_histories(draw: Any) -> list[ModelMessage]:
    """
    A valid history whose calls share ids, within one response too, each response's calls answered
    by the next request in their order (pydantic-ai pairs a return with the oldest open call of its
    id), ending in a request.
    """
    messages: list[ModelMessage] = []
    for turn in range(draw(st.integers(1, 4))):
        messages.append(ModelRequest(parts=[UserPromptPart(f"Weather, turn {turn}?", timestamp=T0)], timestamp=T0))
        for step in range(draw(st.integers(0, 3))):
            ids = draw(st.lists(st.sampled_from(SHARED_IDS), min_size=1, max_size=3))
            calls = [ToolCallPart("weather", {"city": f"{turn}.{step}.{k}"}, tool_call_id=i) for k, i in enumerate(ids)]
            messages.append(ModelResponse(parts=calls, model_name="m", timestamp=T0))
            returns = [ToolReturnPart("weather", f"{k}C", tool_call_id=i, timestamp=T0) for k, i in enumerate(ids)]
            messages.append(ModelRequest(parts=returns, timestamp=T0))
        messages.append(ModelResponse(parts=[TextPart(f"Answer {turn}.")], model_name="m", timestamp=T0))
    messages.append(ModelRequest(parts=[UserPromptPart("And now?", timestamp=T0)], timestamp=T0))
    return messages


def _no_ids(turn: int) -> list[ModelMessage]:
    """
    A turn whose response makes two calls without ids, answered in their order.
    """
    calls = [ToolCallPart("weather", {"city": city}, tool_call_id="") for city in ("Oslo", "Rome")]
    return [
        ModelRequest(parts=[UserPromptPart(f"Weather, turn {turn}?", timestamp=T0)], timestamp=T0),
        ModelResponse(parts=calls, model_name="m", timestamp=T0),
        ModelRequest(parts=[ToolReturnPart("weather", f"{c}C", tool_call_id="", timestamp=T0) for c in "12"]),
        ModelResponse(parts=[TextPart(f"Answer {turn}.")], model_name="m", timestamp=T0),
    ]


class TestSharedCallIds:
    @settings(max_examples=60, deadline=None)
    @given(history=shared_id_histories())
    def test_nothing_cut_keeps_every_exchange(self, history):
        """
        Calls sharing an id (none, or a server's ``call_0``, twice in one response) each pair with
        their return as pydantic-ai pairs them: when nothing needs cutting, nothing is dropped, and
        what comes back is the very objects with the very ids.
        """
        assert repair_messages(history) == history  # valid for pydantic-ai
        assert [] == problems(history)
        for trimmer in (TokenBudgetContextManager(10**9), Since(0)):
            out = run(trim_history(trimmer)(list(history)))
            assert len(history) == len(out)
            assert all(a is b for a, b in zip(history, out, strict=True))

    @settings(max_examples=60, deadline=None)
    @given(history=shared_id_histories(), trimmer=trimmers())
    def test_any_trim_pairs_calls_as_pydantic_ai(self, history, trimmer):
        """
        Whatever a manager or scope cuts of such a history, no return is kept for a call cut away,
        pydantic-ai's repair has nothing to do, and every part is the very one given.
        """
        out = run(trim_history(trimmer)(list(history)))
        assert [] == problems(out)
        assert repair_messages(out) == out
        assert out[-1] is history[-1]
        given_parts = {id(p) for m in history for p in m.parts}
        assert all(id(p) in given_parts for m in out for p in m.parts)

    def test_two_calls_without_ids_in_one_response(self, caplog):
        """
        Two calls without ids in one response are two exchanges, each answered by its return in
        order: kept, nothing logged; a cut that drops the first turn keeps the second whole.
        """
        history = [*_no_ids(0), *_no_ids(1), ModelRequest(parts=[UserPromptPart("And now?", timestamp=T0)])]
        with caplog.at_level(logging.WARNING, logger="workingctx.integrations.pydantic_ai"):
            out = run(trim_history(MessageContextManager(100))(list(history)))
            assert all(a is b for a, b in zip(history, out, strict=True))
            assert len(history) == len(out)
            cut = run(trim_history(LastNTurns(2))(list(history)))
        assert "" == caplog.text
        assert all(a is b for a, b in zip(history[4:], cut, strict=True))
        assert len(history) - 4 == len(cut)

    def test_a_return_named_like_the_stand_in_answers_no_call_without_an_id(self, caplog):
        """
        A return whose id is the local name workingctx would give an empty id answers no call here
        (pydantic-ai drops it as orphaned): it alone is dropped, and the call without an id keeps
        its return.
        """
        orphan = ToolReturnPart("weather", "3C", tool_call_id="pydantic-ai-empty-call-id", timestamp=T0)
        history: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart("Weather?", timestamp=T0)], timestamp=T0),
            ModelResponse(parts=[ToolCallPart("weather", {"city": "Oslo"}, tool_call_id="")], timestamp=T0),
            ModelRequest(parts=[ToolReturnPart("weather", "1C", tool_call_id="", timestamp=T0), orphan]),
        ]
        with caplog.at_level(logging.WARNING, logger="workingctx.integrations.pydantic_ai"):
            out = run(trim_history(MessageContextManager(100))(list(history)))
        assert repair_messages(history) == out
        assert out[:2] == history[:2]
        assert [history[2].parts[0]] == out[2].parts
        assert "message 3: orphan-result" in caplog.text

    def test_a_run_continues_a_history_of_calls_without_ids(self):
        """
        End to end: a run given a history whose response made two calls without ids sends the
        model that history whole, and the new prompt.
        """
        received: list[list[ModelMessage]] = []

        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:  # noqa: ARG001
            received.append(list(messages))
            return ModelResponse(parts=[TextPart("Still 1C and 2C.")])

        history = [*_no_ids(0), *_no_ids(1)]
        processor = trim_history(TokenBudgetContextManager(10**6))
        agent = Agent(FunctionModel(model), capabilities=[ProcessHistory(processor)])
        result = run(agent.run("And now?", message_history=history))
        assert 1 == len(received)
        assert history == received[0][:-1]
        assert [] == problems(received[0])
        assert history == result.all_messages()[: len(history)]
