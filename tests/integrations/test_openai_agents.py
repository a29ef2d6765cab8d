"""
workingctx.integrations.openai_agents: ContextSession and input_filter, with
the Agents SDK's own types and runner, and a scripted model offline.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
from agents import (
    Agent,
    ModelResponse,
    RunConfig,
    Runner,
    SQLiteSession,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.memory import Session, SessionABC, SessionSettings
from agents.models.interface import Model
from agents.run_config import CallModelData, ModelInputData
from agents.run_internal.items import drop_orphan_function_calls
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.responses import (
    ResponseCustomToolCall,
    ResponseFunctionToolCall,
    ResponseInputItemParam,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_function_tool_call import CallerProgram
from openai.types.responses.response_output_item import Program, ProgramOutput
from pydantic import TypeAdapter

from tests.stores import ROOT, Stores, kind_params
from workingctx import (
    ApproxTokenCounter,
    InMemoryStore,
    LastNTurns,
    MessageContextManager,
    SummaryContextManager,
    TokenBudgetContextManager,
)
from workingctx.adapters import openai_responses
from workingctx.exceptions import ArgumentTypeError, PayloadError, PayloadTypeError
from workingctx.integrations.openai_agents import ContextSession, input_filter

set_tracing_disabled(True)

_ITEM = TypeAdapter(ResponseInputItemParam)


@pytest.fixture(params=kind_params())
def stores(request, tmp_path):
    made = Stores(request.param, tmp_path)
    yield made
    made.close()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# -- item shapes, as the SDK stores them (to_input_item(): model_dump(exclude_unset=True)) ---------


def user(text: str) -> dict[str, Any]:
    return {"content": text, "role": "user"}


def reasoning(n: int) -> dict[str, Any]:
    return ResponseReasoningItem(id=f"rs_{n}", summary=[], type="reasoning", encrypted_content=f"gAAAA{n}").model_dump(
        exclude_unset=True
    )


def call(call_id: str, n: int = 0, args: dict[str, Any] | None = None) -> dict[str, Any]:
    return ResponseFunctionToolCall(
        arguments=json.dumps(args or {"city": "Paris", "n": n}),
        call_id=call_id,
        name="weather",
        type="function_call",
        id=f"fc_{n}_{call_id}",  # OpenAI refuses two items with one id: parallel calls have their own
        status="completed",
    ).model_dump(exclude_unset=True)


def output(call_id: str, text: str = "18C") -> dict[str, Any]:
    return {"call_id": call_id, "output": text, "type": "function_call_output"}


def custom_call(call_id: str, n: int = 0) -> dict[str, Any]:
    return ResponseCustomToolCall(
        call_id=call_id, input=f"SELECT {n}", name="sql", type="custom_tool_call", id=f"ctc_{n}_{call_id}"
    ).model_dump(exclude_unset=True)


def custom_output(call_id: str, text: str = "1") -> dict[str, Any]:
    return {"call_id": call_id, "output": text, "type": "custom_tool_call_output"}


def answer(n: int, text: str = "It is 18C.") -> dict[str, Any]:
    return ResponseOutputMessage(
        id=f"msg_{n}",
        content=[ResponseOutputText(annotations=[], text=text, type="output_text", logprobs=[])],
        role="assistant",
        status="completed",
        type="message",
    ).model_dump(exclude_unset=True)


@st.composite
def turns(draw: Any, max_turns: int = 6) -> list[dict[str, Any]]:
    """
    A tool-heavy conversation as Responses items: each turn a question, then
    rounds of (reasoning, one or more function calls, their outputs), then an answer.
    """
    items: list[dict[str, Any]] = []
    counter = 0
    for turn in range(draw(st.integers(1, max_turns))):
        items.append(user(draw(st.text(min_size=1, max_size=30)) + f" #{turn}"))
        for _ in range(draw(st.integers(0, 2))):
            counter += 1
            calls = [f"call_{counter}_{k}" for k in range(draw(st.integers(1, 3)))]
            if draw(st.booleans()):
                items.append(reasoning(counter))
            custom = [draw(st.integers(0, 3)) == 0 for _ in calls]  # a custom tool's call, in a kind of its own
            items.extend(custom_call(c, counter) if k else call(c, counter) for c, k in zip(calls, custom, strict=True))
            items.extend(
                (custom_output if k else output)(c, draw(st.text(max_size=40)))
                for c, k in zip(calls, custom, strict=True)
            )
        counter += 1
        items.append(answer(counter, draw(st.text(min_size=1, max_size=60))))
    return items


@st.composite
def broken_turns(draw: Any) -> list[dict[str, Any]]:
    """
    A conversation with up to three items lost: outputs without calls, calls without outputs, no question.
    """
    items = draw(turns())
    lost = draw(st.sets(st.integers(0, len(items) - 1), max_size=3))
    return [item for position, item in enumerate(items) if position not in lost]


def ordered(items: list[Any]) -> list[Any]:
    """
    *items* with every dict's key order made visible, so equality checks it too.
    """

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return [(k, walk(v)) for k, v in value.items()]
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk(items)


def problems(items: list[Any], instructions: str | None = None) -> list[str]:
    """
    What a model would refuse in *items*: an output with no call before it, a
    call with no output after it, a first non-system item that is not the user's.
    """
    found: list[str] = []
    calls: set[str] = set()
    answered: set[str] = set()
    for index, item in enumerate(items):
        kind = item.get("type")
        if kind in {"function_call", "custom_tool_call"}:
            calls.add(item["call_id"])
        elif kind in {"function_call_output", "custom_tool_call_output"}:
            if item["call_id"] not in calls:
                found.append(f"{index}: orphaned output {item['call_id']}")
            answered.add(item["call_id"])
    found.extend(f"unanswered call {c}" for c in sorted(calls - answered))
    firsts = [i for i in items if i.get("role") not in {"system", "developer"}]
    if firsts and firsts[0].get("role") != "user":
        found.append(f"first item is {firsts[0]!r}, not the user's")
    body = {"input": items} if instructions is None else {"instructions": instructions, "input": items}
    found.extend(f"{p.index}: {p.rule}" for p in openai_responses.check(body))
    return found


def tokens(items: list[Any], instructions: str | None) -> int:
    return openai_responses.read({"instructions": instructions, "input": items}).count_tokens()


# -- the protocol --------------------------------------------------------------------------


class TestProtocol:
    def test_is_a_session(self):
        """
        ContextSession satisfies the SDK's runtime-checkable Session protocol without subclassing SessionABC.
        """
        session = ContextSession("s")
        assert isinstance(session, Session)
        assert not isinstance(session, SessionABC)
        assert session.session_id == "s"
        assert session.session_settings is None

    def test_settings_limit(self):
        """
        The SDK's SessionSettings(limit=...) applies when get_items is given no limit.
        """
        session = ContextSession("s", session_settings=SessionSettings(limit=2))
        items = [user("a"), answer(1), user("b"), answer(2)]
        run(session.add_items(items))
        assert items[2:] == run(session.get_items())
        assert items == run(session.get_items(limit=10))

    @pytest.mark.parametrize(
        ("kwargs", "name"),
        [
            ({"session_id": ""}, "session_id"),
            ({"session_id": 42}, "session_id"),
            ({"session_id": "s", "store": {}}, "store"),
            ({"session_id": "s", "manager": LastNTurns(2)}, "manager"),
            ({"session_id": "s", "manager": 8000}, "manager"),
        ],
    )
    def test_wrong_types_refused(self, kwargs, name):
        """
        A session id, store or manager of the wrong type is refused at construction, naming the parameter.
        """
        with pytest.raises(TypeError, match=name) as info:
            ContextSession(**kwargs)
        assert isinstance(info.value, ArgumentTypeError)
        assert name == info.value.argument

    @pytest.mark.parametrize(("items", "name"), [("hi", "items"), ([user("ok"), 42], "items[1]")])
    def test_items_not_items_refused(self, items, name):
        """
        add_items refuses what is not a list of items, naming the offending one, and stores nothing.
        """
        session = ContextSession("s")
        with pytest.raises(TypeError, match=re.escape(name)) as info:
            run(session.add_items(items))
        assert name == info.value.argument
        assert [] == run(session.get_items())

    @pytest.mark.parametrize(
        ("value", "error"),
        [
            (float("nan"), PayloadError),
            (float("inf"), PayloadError),
            (10**5000, PayloadError),
            ({1, 2}, PayloadTypeError),
            (b"bytes", PayloadTypeError),
            ({1: "int key"}, PayloadTypeError),
        ],
        ids=["nan", "inf", "huge-int", "set", "bytes", "int-key"],
    )
    def test_item_not_json_refused(self, value, error, stores):
        """
        An item holding what JSON cannot is refused with an error naming the item and the place in
        it, and nothing of the batch is written, on every store.
        """
        store = stores.new()
        session = ContextSession("s", store)
        run(session.add_items([user("kept")]))
        with pytest.raises(error, match=re.escape("items[1]['extra']")) as info:
            run(session.add_items([user("ok"), {"content": "x", "role": "user", "extra": value}]))
        assert "items[1]['extra']" == info.value.path
        assert [user("kept")] == run(ContextSession("s", stores.again(store)).get_items())

    def test_cyclic_item_refused(self):
        """
        An item that contains itself is refused, naming the item, and nothing is written.
        """
        session = ContextSession("s")
        item: dict[str, Any] = {"content": "x", "role": "user"}
        item["self"] = item
        with pytest.raises(PayloadError, match=re.escape("items[0]")):
            run(session.add_items([item]))
        assert [] == run(session.get_items())

    def test_filter_wrong_manager_refused(self):
        """
        input_filter refuses what is not a manager, naming the parameter.
        """
        with pytest.raises(TypeError, match="manager must be a workingctx context manager"):
            input_filter(LastNTurns(3))  # type: ignore[arg-type]

    def test_import_is_lazy(self):
        """
        Importing workingctx (and this module) imports neither the Agents SDK nor pydantic-ai.
        """
        code = (
            "import sys, workingctx, workingctx.integrations.openai_agents;"
            "print(sorted(m for m in ('agents', 'pydantic_ai', 'openai') if m in sys.modules))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, env={"PYTHONPATH": "."}
        )
        assert "[]" == out.stdout.strip()


# -- items come back as added ---------------------------------------------------------------


class TestItems:
    @settings(max_examples=25, deadline=None)
    @given(items=turns(), cut=st.integers(0, 100))
    def test_round_trip_memory(self, items, cut):
        """
        Items added in any batches come back equal, keys in their order, and valid for the SDK's own item type.
        """
        for item in items:
            _ITEM.validate_python(item)
        session = ContextSession("s")
        cut = cut % (len(items) + 1)
        run(session.add_items(items[:cut]))
        run(session.add_items(items[cut:]))
        got = run(session.get_items())
        assert ordered(items) == ordered(got)

    def test_round_trip_reopened(self, stores):
        """
        On every store, a session opened again on the same storage gives back the very items.
        """
        items = [
            user("Weather in Paris?"),
            reasoning(1),
            call("call_1", 1),
            call("call_2", 1),
            output("call_1"),
            output("call_2", "windy"),
            answer(2),
            {"role": "developer", "content": "Prefer metric."},
            user("And Rome?"),
        ]
        store = stores.new()
        session = ContextSession("s", store)
        run(session.add_items(items[:3]))
        run(session.add_items(items[3:]))
        again = ContextSession("s", stores.again(store))
        assert ordered(items) == ordered(run(again.get_items()))
        assert ordered(items[-3:]) == ordered(run(again.get_items(limit=3)))
        assert ordered(items[-4:]) == ordered(run(again.get_items(limit=4)))  # the newest four, as the SDK's sessions

    def test_returned_items_are_copies(self):
        """
        Changing what get_items returned changes nothing stored.
        """
        session = ContextSession("s")
        run(session.add_items([user("hi")]))
        run(session.get_items())[0]["content"] = "changed"
        assert [user("hi")] == run(session.get_items())

    def test_pop_and_clear(self, stores):
        """
        pop_item removes the newest item, also from inside a run of output items; clear_session empties it.
        """
        store = stores.new()
        session = ContextSession("s", store)
        items = [user("q"), reasoning(1), call("call_1", 1)]
        run(session.add_items(items))
        assert items[-1] == run(session.pop_item())
        assert items[:2] == run(session.get_items())
        run(session.add_items([call("call_9", 9)]))
        assert [*items[:2], call("call_9", 9)] == run(ContextSession("s", stores.again(store)).get_items())
        run(session.clear_session())
        assert [] == run(session.get_items())
        assert run(session.pop_item()) is None
        run(session.add_items([user("again")]))
        assert [user("again")] == run(ContextSession("s", stores.again(store)).get_items())

    def test_sessions_share_a_store(self):
        """
        Two sessions in one store keep their own items.
        """
        a = ContextSession("a")
        b = ContextSession("b", a.store)
        run(a.add_items([user("for a")]))
        run(b.add_items([user("for b")]))
        assert [user("for a")] == run(a.get_items())
        assert [user("for b")] == run(b.get_items())

    def test_two_writers_lose_nothing(self, stores):
        """
        Two handles on one session writing in turn (each with a stale head) lose no item.
        """
        store = stores.new()
        first = ContextSession("s", store)
        second = ContextSession("s", stores.again(store))
        run(first.add_items([user("1")]))
        run(second.add_items([answer(1)]))
        run(first.add_items([user("2")]))
        assert [user("1"), answer(1), user("2")] == run(second.get_items())

    def test_concurrent_writers_lose_nothing(self, stores):
        """
        Writers on two handles of one session, adding at once from worker threads, lose no item:
        the one that loses the race for the head applies its items again.
        """
        store = stores.new()
        handles = [ContextSession("s", store), ContextSession("s", stores.again(store))]

        async def write() -> None:
            await asyncio.gather(*(handles[n % 2].add_items([user(f"m{n}")]) for n in range(12)))

        run(write())
        got = run(ContextSession("s", stores.again(store)).get_items())
        assert sorted(f"m{n}" for n in range(12)) == sorted(item["content"] for item in got)

    @settings(max_examples=25, deadline=None)
    @given(items=turns(), limit=st.integers(1, 40))
    def test_limit_gives_the_newest_items_as_the_sdks_own_session(self, items, limit):
        """
        get_items(limit) gives the newest *limit* items, exactly what the SDK's own SQLiteSession
        gives for the same items: the runner rewinds a retried turn by comparing that tail.
        """
        session = ContextSession("s")
        sdk = SQLiteSession("s")
        run(session.add_items(items))
        run(sdk.add_items(items))
        got = run(session.get_items(limit=limit))
        assert items[-limit:] == got
        assert run(sdk.get_items(limit=limit)) == got
        sdk.close()

    def test_orphan_in_store_is_left_out_and_logged(self, caplog):
        """
        A stored history that is broken (an output whose call is nowhere) is never passed on: logged, left out.
        """
        session = ContextSession("s")
        run(session.add_items([user("q"), output("call_404"), answer(1)]))
        with caplog.at_level(logging.WARNING, logger="workingctx.integrations.openai_agents"):
            got = run(session.get_items())
        assert [user("q"), answer(1)] == got
        assert "answer no call" in caplog.text


# -- races: other handles, other threads --------------------------------------------------------


class Meddling:
    """
    A checkpoint store that runs *meddle* once, right before its first call of
    *method* goes through: another writer acting between a session's read of
    the head and its use of it, made certain.
    """

    def __init__(self, store: Any, method: str, meddle: Callable[[], Any]) -> None:
        self.store = store
        self._method = method
        self._meddle: Callable[[], Any] | None = meddle

    def _maybe(self, name: str) -> None:
        if name == self._method and self._meddle is not None:
            meddle, self._meddle = self._meddle, None
            meddle()

    def save(self, checkpoint: Any, *, thread: str | None = None) -> str:
        self._maybe("save")
        return self.store.save(checkpoint, thread=thread)  # type: ignore[no-any-return]

    def head(self, thread: str) -> str | None:
        return self.store.head(thread)  # type: ignore[no-any-return]

    def load(self, checkpoint_id: str) -> Any:
        self._maybe("load")
        return self.store.load(checkpoint_id)

    def list(self) -> Any:
        return self.store.list()

    def delete(self, checkpoint_id: str) -> None:
        self.store.delete(checkpoint_id)

    def lineage(self, checkpoint_id: str) -> Any:
        return self.store.lineage(checkpoint_id)


def in_threads(count: int, work: Callable[[int], Any]) -> list[BaseException]:
    """
    Run *work(n)* for n in range(*count*), each in a thread of its own; the errors they raised.
    """
    errors: list[BaseException] = []

    def target(n: int) -> None:
        try:
            work(n)
        except BaseException as error:  # reported to the test
            errors.append(error)

    threads = [threading.Thread(target=target, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


class TestRaces:
    def test_a_writer_racing_a_clear_never_brings_back_what_was_cleared(self, stores):
        """
        A handle that read the head, then lost it to another handle's clear_session, saves its items
        after nothing: the history cleared does not come back with them.
        """
        store = stores.new()
        first = ContextSession("s", store)
        run(first.add_items([user("old 1"), answer(1), user("old 2")]))
        second = ContextSession("s", Meddling(stores.again(store), "save", lambda: run(first.clear_session())))
        run(second.add_items([user("new")]))
        assert [user("new")] == run(ContextSession("s", stores.again(store)).get_items())
        assert [user("new")] == run(first.get_items())

    def test_a_reader_racing_a_clear_reads_what_is_left(self, stores):
        """
        A handle that read the head, then lost the checkpoint it names to another handle's
        clear_session, reads what is left: nothing, not an error.
        """
        store = stores.new()
        first = ContextSession("s", store)
        run(first.add_items([user("old"), answer(1)]))
        second = ContextSession("s", Meddling(stores.again(store), "load", lambda: run(first.clear_session())))
        assert [] == run(second.get_items())
        run(second.add_items([user("new")]))
        assert [user("new")] == run(first.get_items())

    def test_clear_then_add_on_every_store(self, stores):
        """
        After clear_session the session is empty on every handle, pop_item finds nothing, and new
        items are all it holds; clearing an empty session changes nothing.
        """
        store = stores.new()
        session = ContextSession("s", store)
        run(session.clear_session())
        run(session.add_items([user("a"), answer(1)]))
        run(session.clear_session())
        run(session.clear_session())
        again = ContextSession("s", stores.again(store))
        assert [] == run(again.get_items())
        assert run(again.pop_item()) is None
        run(again.add_items([user("b")]))
        assert [user("b")] == run(session.get_items())

    def test_a_cancelled_add_holds_the_session_until_its_write_ends(self):
        """
        add_items cancelled while its worker thread writes (a run's timeout) raises CancelledError only
        once the write has ended, and a get_items waiting meanwhile sees the items it wrote.
        """
        entered, release = threading.Event(), threading.Event()

        def stall() -> None:
            entered.set()
            release.wait(10)

        session = ContextSession("s", Meddling(InMemoryStore(), "save", stall))

        async def scenario() -> tuple[bool, list[Any]]:
            adding = asyncio.ensure_future(session.add_items([user("q")]))
            await asyncio.to_thread(entered.wait, 10)
            adding.cancel()
            reading = asyncio.ensure_future(session.get_items())
            await asyncio.sleep(0.05)
            early = reading.done() or adding.done()
            release.set()
            with pytest.raises(asyncio.CancelledError):
                await adding
            return early, await reading

        early, got = run(scenario())
        assert not early
        assert [user("q")] == got

    @pytest.mark.usefixtures("fast_switching")
    def test_one_session_in_many_threads(self):
        """
        One session with a manager, used from four threads each running its own event loop (as
        Runner.run_sync does): no item is lost, and every get_items is a valid, duplicate-free view.
        """
        session = ContextSession("s", manager=TokenBudgetContextManager(10**6))
        seen: list[list[Any]] = []

        def work(n: int) -> None:
            async def turns() -> None:
                for k in range(15):
                    await session.add_items([user(f"q{n}.{k}"), answer(n * 100 + k, f"a{n}.{k}")])
                    seen.append(await session.get_items())

            run(turns())

        errors = in_threads(4, work)
        assert [] == errors
        for items in seen:
            texts = [json.dumps(i, sort_keys=True) for i in items]
            assert len(texts) == len(set(texts))
            assert [] == problems(items)
        got = run(ContextSession("s", session.store).get_items())
        assert 4 * 15 * 2 == len(got)
        assert len(got) == len(run(session.get_items()))

    @pytest.mark.usefixtures("fast_switching")
    def test_one_filter_in_many_threads(self):
        """
        One input_filter (one RunConfig) serving runs in four threads, each with its own event loop:
        every call gets back its own items, never another run's, never an error.
        """
        trim = input_filter(TokenBudgetContextManager(10**6))
        wrong: list[tuple[int, int]] = []

        def work(n: int) -> None:
            async def calls() -> None:
                items: list[Any] = []
                for k in range(40):
                    items = [*items, user(f"q{n}.{k}"), answer(n * 100 + k, f"a{n}.{k}")]
                    out = await trim(_data(items))
                    if out.input != items:
                        wrong.append((n, k))

            run(calls())

        errors = in_threads(4, work)
        assert [] == errors
        assert [] == wrong


# -- a manager -------------------------------------------------------------------------------


class TestManager:
    @settings(max_examples=25, deadline=None)
    @given(items=turns(max_turns=8), budget=st.integers(60, 400))
    def test_trimmed_valid_and_store_keeps_everything(self, items, budget):
        """
        With a manager, get_items is a valid request within the budget (when its newest exchange fits),
        made of the very items added, while the store keeps every item.
        """
        manager = TokenBudgetContextManager(budget)
        session = ContextSession("s", manager=manager)
        run(session.add_items(items))
        got = run(session.get_items())
        assert [] == problems(got)
        assert all(any(ordered([g]) == ordered([i]) for i in items) for g in got)
        assert got == [i for i in items if i in got]  # in their order
        if not manager.last_trim.over_budget:
            assert tokens(got, None) <= budget
        assert ordered(items) == ordered(run(ContextSession("s", session.store).get_items()))

    def test_summary_is_an_item(self):
        """
        A summary the manager writes comes first as a system item (written by the adapter), then a valid
        window; the store keeps every item.
        """

        async def summarize(messages, *, prompt, max_tokens):  # noqa: ARG001  # the Summarizer protocol
            return "Earlier: weather questions."

        session = ContextSession("s", manager=SummaryContextManager(summarize, max_messages=8, keep_recent=4))
        items = []
        for n in range(4):
            items += [user(f"q{n}"), call(f"call_{n}", n), output(f"call_{n}"), answer(n)]
        run(session.add_items(items))
        got = run(session.get_items())
        assert {"role": "system", "content": "Earlier: weather questions."} == got[0]
        assert [] == problems(got)
        assert got[1:] == items[len(items) - len(got) + 1 :]
        assert items == run(ContextSession("s", session.store).get_items())

    def test_bad_history_is_repaired_and_logged(self, caplog):
        """
        A manager never passes on a broken exchange: the orphaned output goes, with a warning.
        """
        session = ContextSession("s", manager=MessageContextManager(50))
        run(session.add_items([user("q"), output("call_404"), answer(1), user("next")]))
        with caplog.at_level(logging.WARNING, logger="workingctx.integrations.openai_agents"):
            got = run(session.get_items())
        assert [user("q"), answer(1), user("next")] == got
        assert "orphan-result" in caplog.text


# -- the input filter -------------------------------------------------------------------------


def _data(items: list[Any], instructions: str | None = "Be brief.") -> CallModelData[Any]:
    agent = Agent(name="a")
    return CallModelData(model_data=ModelInputData(input=items, instructions=instructions), agent=agent, context=None)


class TestInputFilterProviderCalls:
    """
    Calls the client runs in kinds of their own, in the shapes the Agents SDK writes.
    """

    @staticmethod
    def _custom(call_id: str) -> list[dict[str, Any]]:
        return [
            {"type": "custom_tool_call", "call_id": call_id, "name": "grep", "input": "x"},
            {"type": "custom_tool_call_output", "call_id": call_id, "output": "y"},
        ]

    def test_a_reused_custom_call_id_keeps_the_later_exchange(self):
        """
        A custom call's id used again (as OpenAI-compatible servers do with
        ``call_0``) names another call: its exchange is kept, as a function call's is.
        """
        call, output = self._custom("call_0")
        items = [{"role": "user", "content": "go"}, call, {"role": "user", "content": "stop"}, call, output]
        out = run(input_filter(TokenBudgetContextManager(10_000))(_data(items)))
        assert [item.get("type", item.get("role")) for item in out.input] == [
            "user",
            "user",
            "custom_tool_call",
            "custom_tool_call_output",
        ]

    def test_a_local_shell_output_with_a_call_id_answers_its_call(self):
        """
        The Agents SDK writes a local shell call's output with ``call_id`` (the
        API's type names it ``id``): either answers the call, so the exchange is kept.
        """
        action = {"type": "exec", "command": ["ls"], "env": {}}
        call = {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_1", "status": "completed", "action": action}
        for field in ("call_id", "id"):
            output = {"type": "local_shell_call_output", field: "call_1", "output": "a b"}
            items = [{"role": "user", "content": "list"}, call, output]
            out = run(input_filter(TokenBudgetContextManager(10_000))(_data(items)))
            assert out.input == items, field
            assert openai_responses.check(openai_responses.read(items)) == ()


def test_get_items_leaves_out_outputs_that_name_their_call_by_another_field():
    """
    A local shell output names its call by ``id`` and an MCP approval
    response by ``approval_request_id``: stored without their call, they are
    left out of ``get_items()`` as a function call's output is.
    """
    items = [
        {"role": "user", "content": "a"},
        {"type": "local_shell_call_output", "id": "call_9", "output": "x"},
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True},
        {"role": "user", "content": "b"},
    ]

    async def stored() -> list[Any]:
        session = ContextSession("orphans")
        await session.add_items(items)
        return await session.get_items()

    assert run(stored()) == [items[0], items[3]]


class TestKindsTheAdapterDoesNotKnow:
    """
    Items of kinds the adapter does not read (a programmatic tool call's
    ``program`` and ``program_output``, a kind the API adds later) ride with
    the item before them: never the user's turn, never parted from the
    reasoning and calls they sit among, and given back exactly as added.
    """

    @staticmethod
    def programmatic() -> list[dict[str, Any]]:
        program = Program(
            id="pg_1", call_id="prog_1", code="sum(sales(s) for s in range(40))", fingerprint="fp", type="program"
        )
        caller = CallerProgram(type="program", caller_id="prog_1")
        sales = ResponseFunctionToolCall(
            id="fc_1", call_id="call_1", name="sales", arguments='{"s": 0}', type="function_call", caller=caller
        )
        result = ProgramOutput(id="po_1", call_id="prog_1", result="4000", status="completed", type="program_output")
        return [
            user("Sum the sales of all 40 stores, please."),
            reasoning(1),
            program.model_dump(exclude_unset=True),
            sales.model_dump(exclude_unset=True),
            output("call_1", "100"),
            result.model_dump(exclude_unset=True),
            answer(2, "The total is 4000."),
        ]

    @staticmethod
    def kept_whole(items: list[Any]) -> bool:
        """
        Whether every program output, and every call a program made, has its program before it.
        """
        programs: set[str] = set()
        for item in items:
            if item.get("type") == "program":
                programs.add(item["call_id"])
            owner = item["call_id"] if item.get("type") == "program_output" else item.get("caller", {}).get("caller_id")
            if owner is not None and owner not in programs:
                return False
        return True

    def test_a_cut_never_opens_at_an_item_of_a_kind_unknown(self):
        """
        A budget that cannot hold a programmatic exchange keeps the user's
        question first (the program's output never stands for it), and a
        program's output and calls only with the program.
        """
        items = [*self.programmatic(), user("And the average?")]
        manager = TokenBudgetContextManager(100, counter=ApproxTokenCounter())
        data = CallModelData(
            model_data=ModelInputData(input=items, instructions="sys"), agent=Agent(name="a"), context=None
        )
        sent = run(input_filter(manager)(data)).input
        assert [] == problems(sent, "sys")
        assert self.kept_whole(sent)

        async def trimmed() -> list[Any]:
            session = ContextSession("programs", manager=TokenBudgetContextManager(100, counter=ApproxTokenCounter()))
            await session.add_items(items[:-1])
            return await session.get_items()

        got = run(trimmed())
        assert [] == problems(got)
        assert self.kept_whole(got)

    def test_a_later_kind_after_the_question_does_not_take_its_place(self):
        """
        An item of a kind unknown right after the question is kept with it: the
        cut keeps the question, never the unknown item in its place.
        """
        screenshot = {"type": "computer_screenshot", "image_url": "data:image/png;base64,AAAA"}
        items = [
            user("Take a screenshot."),
            {"type": "future_kind", "id": "fk_1"},
            {
                "type": "computer_call",
                "id": "cu_1",
                "call_id": "cc_1",
                "action": {"type": "screenshot"},
                "pending_safety_checks": [],
                "status": "completed",
            },
            {"type": "computer_call_output", "call_id": "cc_1", "output": screenshot},
            answer(1, "Done."),
        ]
        manager = TokenBudgetContextManager(60, counter=ApproxTokenCounter())
        data = CallModelData(
            model_data=ModelInputData(input=items, instructions="sys"), agent=Agent(name="a"), context=None
        )
        assert run(input_filter(manager)(data)).input == [items[0], items[1], items[4]]

    @pytest.mark.parametrize("manager", [None, TokenBudgetContextManager(100_000)])
    def test_given_back_exactly_however_they_were_added(self, manager):
        items = [*self.programmatic(), {"type": "future_kind", "id": "fk_1"}, user("And the average?")]

        async def stored(batches: list[list[dict[str, Any]]]) -> list[Any]:
            session = ContextSession("programs", manager=manager)
            for batch in batches:
                await session.add_items(batch)
            return await session.get_items()

        assert ordered(run(stored([items]))) == ordered(items)
        assert ordered(run(stored([[item] for item in items]))) == ordered(items)


class TestInputFilter:
    @settings(max_examples=25, deadline=None)
    @given(items=turns(max_turns=8), budget=st.integers(80, 400))
    def test_output_valid_and_the_same_objects(self, items, budget):
        """
        The filter's output is a valid request within the budget, made of the very item objects given.
        """
        manager = TokenBudgetContextManager(budget)
        out = run(input_filter(manager)(_data(items)))
        assert isinstance(out, ModelInputData)
        assert "Be brief." == out.instructions
        assert [] == problems(out.input, out.instructions)
        ids = {id(i) for i in items}
        assert all(id(i) in ids for i in out.input)
        if not manager.last_trim.over_budget:
            assert tokens(out.input, out.instructions) <= budget

    @settings(max_examples=40, deadline=None)
    @given(items=broken_turns(), budget=st.sampled_from([150, 10**6]))
    def test_broken_input_never_passed_on(self, items, budget):
        """
        Whatever items a broken input lost, what the filter passes on is a valid request (user first
        when there is a user message at all), and any broken exchange is reported on the module's logger.
        """
        logs: list[str] = []
        handler = logging.Handler()
        handler.emit = lambda record: logs.append(record.getMessage())  # type: ignore[method-assign]
        log = logging.getLogger("workingctx.integrations.openai_agents")
        log.addHandler(handler)
        try:
            out = run(input_filter(TokenBudgetContextManager(budget))(_data(items)))
        finally:
            log.removeHandler(handler)
        found = problems(out.input, out.instructions)
        if not any(i.get("role") == "user" for i in items):  # no question at all: none can come first
            found = [p for p in found if "not the user's" not in p]
        assert [] == found
        if [p for p in problems(items) if "orphaned" in p or "unanswered" in p]:
            assert logs

    def test_orphan_is_dropped_and_logged(self, caplog):
        """
        An input that arrives broken reaches the model repaired, and the repair is logged.
        """
        items = [user("q"), output("call_404"), answer(1), user("next")]
        with caplog.at_level(logging.WARNING, logger="workingctx.integrations.openai_agents"):
            out = run(input_filter(MessageContextManager(50))(_data(items)))
        assert [user("q"), answer(1), user("next")] == out.input
        assert "orphan-result" in caplog.text

    def test_pending_call_at_the_end_is_left_out(self, caplog):
        """
        An input that ends in a call without its output is not sent so: that exchange is left out, logged.
        """
        items = [user("q"), reasoning(1), call("call_1", 1)]
        with caplog.at_level(logging.WARNING, logger="workingctx.integrations.openai_agents"):
            out = run(input_filter(TokenBudgetContextManager(10_000))(_data(items)))
        assert [user("q")] == out.input
        assert "without results (call_1)" in caplog.text


# -- call ids shared by several calls ------------------------------------------------------------

SHARED_IDS = ["", "call_0", "call_1", "openai-agents-function_call:"]
"""The empty id an OpenAI-compatible server may give, ``call_0`` as such servers number each
response's calls, and an id named like workingctx's local name for the empty one."""


@st.composite
def shared_id_turns(draw: Any, lost: int = 0) -> list[dict[str, Any]]:
    """
    A conversation whose calls reuse ids from turn to turn, the empty one included, and across
    kinds (a function call and a custom tool call under one id), each round's outputs after its
    calls in any order, as the SDK writes them; with *lost*, up to that many items lost.
    """
    items: list[dict[str, Any]] = []
    counter = 0
    for turn in range(draw(st.integers(1, 5))):
        items.append(user(f"Weather, turn {turn}?"))
        for _ in range(draw(st.integers(0, 2))):
            counter += 1
            kinds = st.sampled_from([(call, output), (custom_call, custom_output)])
            made = draw(st.lists(st.tuples(kinds, st.sampled_from(SHARED_IDS)), min_size=1, max_size=3, unique=True))
            items.extend(ask(c, counter) for (ask, _), c in made)
            items.extend(draw(st.permutations([answer_(c, f"{counter}C") for (_, answer_), c in made])))
        counter += 1
        items.append(answer(counter))
    gone = draw(st.sets(st.integers(0, len(items) - 1), max_size=lost))
    return [item for position, item in enumerate(items) if position not in gone]


_ANSWERED_BY = {"function_call_output": "function_call", "custom_tool_call_output": "custom_tool_call"}


def pairing_problems(items: list[Any]) -> list[str]:
    """
    An output no call of its kind waits for before it, a call no output answers: as the SDK pairs
    them (by the call's kind and its id, the empty one too), each call answered once.
    """
    found: list[str] = []
    waiting: dict[tuple[str, str], int] = {}
    for index, item in enumerate(items):
        kind = item.get("type")
        if kind in _ANSWERED_BY.values():
            waiting[kind, item["call_id"]] = waiting.get((kind, item["call_id"]), 0) + 1
        elif kind in _ANSWERED_BY:
            key = (_ANSWERED_BY[kind], item["call_id"])
            if not waiting.get(key):
                found.append(f"{index}: {kind} {item['call_id']!r} answers no call")
            else:
                waiting[key] -= 1
    found.extend(f"{k} {c!r} unanswered" for (k, c), n in waiting.items() for _ in range(n))
    return found


class TestSharedCallIds:
    def test_a_call_with_an_empty_id_keeps_its_output(self, caplog):
        """
        A call with an empty id (the SDK keeps the id an OpenAI-compatible server gives) is answered
        by its output: the exchange is kept whole, nothing logged, and the items are the very ones.
        """
        items = [user("q"), call("", 1), output(""), answer(2), user("next")]
        with caplog.at_level(logging.WARNING, logger="workingctx.integrations.openai_agents"):
            out = run(input_filter(TokenBudgetContextManager(10_000))(_data(items)))
        assert "" == caplog.text
        assert len(items) == len(out.input)
        assert all(a is b for a, b in zip(items, out.input, strict=True))

    @settings(max_examples=40, deadline=None)
    @given(items=shared_id_turns(), turns_kept=st.integers(1, 4))
    def test_reused_ids_trim_to_a_valid_input(self, items, turns_kept):
        """
        Calls reusing ids across turns, the empty one included: with nothing to cut every item is
        passed on; whatever a manager cuts, each output kept answers a call kept, no call is left
        unanswered, the SDK's own pruning of orphans has nothing to do, and the items are the very ones.
        """
        whole = run(input_filter(TokenBudgetContextManager(10**6))(_data(items)))
        assert all(a is b for a, b in zip(items, whole.input, strict=True))
        assert len(items) == len(whole.input)
        out = run(input_filter(MessageContextManager(turns_kept))(_data(items))).input
        assert [] == pairing_problems(out)
        assert drop_orphan_function_calls(list(out), output_pruning_indexes=set(range(len(out)))) == out
        ids = {id(i) for i in items}
        assert all(id(i) in ids for i in out)

    @settings(max_examples=40, deadline=None)
    @given(items=shared_id_turns(lost=3), budget=st.sampled_from([150, 10**6]))
    def test_a_broken_input_pairs_outputs_with_calls_of_their_kind(self, items, budget):
        """
        Whatever items such a conversation lost, each output passed on answers a call of its own
        kind passed on, as the SDK pairs them, and the SDK's own pruning has nothing to do.
        """
        out = run(input_filter(TokenBudgetContextManager(budget))(_data(items))).input
        assert [] == pairing_problems(out)
        assert drop_orphan_function_calls(list(out), output_pruning_indexes=set(range(len(out)))) == out

    def test_an_output_of_another_kind_does_not_answer_a_call(self):
        """
        A custom tool call's output under the id of a function call (its own call lost) answers no
        call here, as the SDK pairs them: it alone is left out, and the function call keeps its output.
        """
        items = [user("q"), call("call_1", 1), custom_output("call_1"), output("call_1"), answer(2), user("next")]
        out = run(input_filter(TokenBudgetContextManager(10_000))(_data(items))).input
        assert [items[0], items[1], items[3], items[4], items[5]] == out
        assert all(any(o is i for i in items) for o in out)

    @settings(max_examples=20, deadline=None)
    @given(items=shared_id_turns())
    def test_a_session_gives_back_reused_ids_whole(self, items):
        """
        A session with a manager that needs no cut gives back every item of such a conversation.
        """

        async def stored() -> list[Any]:
            session = ContextSession("shared", manager=TokenBudgetContextManager(10**6))
            await session.add_items(items)
            return await session.get_items()

        assert ordered(run(stored())) == ordered(items)


# -- end to end: the SDK's runner with a scripted model ---------------------------------------------


class ScriptedModel(Model):
    """
    An Agents SDK model that answers from a script, offline: a question gets a
    reasoning item and one or two function calls, a tool output gets either
    another call or the answer. It records what each call received.
    """

    def __init__(self) -> None:
        self.received: list[tuple[str | None, list[Any]]] = []
        self.calls = 0

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],  # noqa: A002  # the SDK's parameter name
        *args: Any,  # noqa: ARG002  # the rest of the SDK's signature: settings, tools, ...
        **kwargs: Any,  # noqa: ARG002
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else json.loads(json.dumps(input))
        self.received.append((system_instructions, items))
        n = len(self.received)
        asked = sum(1 for i in reversed(items) if i.get("type") == "function_call_output")
        if items[-1].get("type") != "function_call_output" or (asked < 3 and n % 3 == 0):
            count = 1 + n % 2
            self.calls += count
            out: list[Any] = [ResponseReasoningItem(id=f"rs_{n}", summary=[], type="reasoning", encrypted_content="e")]
            out += [
                ResponseFunctionToolCall(
                    arguments=json.dumps({"city": f"city {n}.{k}"}),
                    call_id=f"call_{n}_{k}",
                    name="weather",
                    type="function_call",
                    id=f"fc_{n}_{k}",
                    status="completed",
                )
                for k in range(count)
            ]
        else:
            text = ResponseOutputText(annotations=[], text=f"answer {n} " * 12, type="output_text")
            out = [
                ResponseOutputMessage(
                    id=f"msg_{n}", content=[text], role="assistant", status="completed", type="message"
                )
            ]
        return ModelResponse(output=out, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@function_tool
def weather(city: str) -> str:
    """
    The weather in a city.
    """
    return f"{city}: 18C, light wind from the west, " + "clear skies " * 8


TURNS = 24


class TestEndToEnd:
    @pytest.mark.parametrize("where", ["session", "filter"])
    def test_long_run(self, where, stores, capsys):
        """
        24 turns with tools through Runner.run: every model call receives a valid request (each tool
        output answers a call before it, the user speaks first) within the manager's budget, and the
        session's store holds every item of the run.
        """
        budget = 900
        model = ScriptedModel()
        agent = Agent(name="weather", instructions="Answer with the weather.", model=model, tools=[weather])
        store = stores.new()
        manager = TokenBudgetContextManager(budget, counter=ApproxTokenCounter())
        if where == "session":
            session = ContextSession("run", store, manager=manager)
            config = RunConfig()
        else:
            session = ContextSession("run", store)
            config = RunConfig(call_model_input_filter=input_filter(manager))
        finals = []
        for turn in range(TURNS):
            result = run(Runner.run(agent, f"Weather, turn {turn}?", session=session, run_config=config))
            finals.append(result.final_output)
        for instructions, items in model.received:
            assert [] == problems(items, instructions)
            assert items[0] == {"content": items[0]["content"], "role": "user"}
            if where == "filter":
                assert tokens(items, instructions) <= budget
            else:  # a session trims the history a run starts from; the run's own items come on top of it
                start = max(i for i, item in enumerate(items) if item.get("role") == "user")
                assert tokens(items[:start], None) <= budget
        if where == "session":  # what the session hands the runner fits the budget
            assert tokens(run(session.get_items()), None) <= budget
        stored = run(ContextSession("run", stores.again(store)).get_items())
        questions = [i for i in stored if i.get("role") == "user"]
        assert [f"Weather, turn {t}?" for t in range(TURNS)] == [q["content"] for q in questions]
        assert model.calls == sum(1 for i in stored if i.get("type") == "function_call")
        assert model.calls == sum(1 for i in stored if i.get("type") == "function_call_output")
        assert [] == problems(stored)
        assert TURNS == len(finals)
        assert max(len(items) for _, items in model.received) < len(stored)  # trimmed: never the whole history
        # between cuts each request continues the one before (the provider's prompt cache keeps hitting)
        cuts = sum(1 for (_, a), (_, b) in itertools.pairwise(model.received) if b[: len(a)] != a)
        assert 0 < cuts <= len(model.received) // 4
        with capsys.disabled():
            print(
                f"\n[{where}/{stores.kind}] {TURNS} turns, {model.calls} tool calls, "
                f"{len(model.received)} model calls, {cuts} cuts"
            )
