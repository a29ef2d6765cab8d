"""
``workingctx.integrations.langgraph.ContextSaver``: LangGraph's conformance
suite on every store, real graphs driven by LangChain's fake chat models,
retention, bad input and concurrent writers.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import itertools
import json
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import _messages_delta_reducer
from langgraph.types import Command, Send, interrupt
from pydantic import BaseModel

from tests import sqlite_rows
from tests.stores import PERSISTENT, Raw, Stores, kind_params, server_address
from workingctx import Checkpoint, InMemoryStore, Message, SQLiteStore, WorkingContext
from workingctx.exceptions import CheckpointError
from workingctx.integrations import langgraph as langgraph_module
from workingctx.integrations.langgraph import ContextSaver, _checkpoint_key, _convert, _log_name, _writes_name
from workingctx.serialization import from_json

ROOT = Path(__file__).resolve().parents[2]
FIRST_LAYOUT = ROOT / "tests" / "data" / "langgraph-first-layout.json"


class Reason(enum.StrEnum):
    STOP = "stop"


class Count(enum.IntEnum):
    ONE = 1


class Step(BaseModel):
    """
    A model a graph's state may hold in a list: not a message, though it has a ``type``.
    """

    type: str
    query: str


class ToolModel(GenericFakeChatModel):
    """
    LangChain's generic fake chat model, able to be bound to tools (``create_agent`` binds them).
    """

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:  # noqa: ARG002  # the fake answers from its script
        return self


def _one_node(state: Any, node: Callable[..., Any]) -> Any:
    """
    A graph of *state* whose one node, named as its function, runs after the start.
    """
    graph = StateGraph(state)
    graph.add_node(node.__name__, node)
    graph.add_edge(START, node.__name__)
    return graph


def _asks_then_edits_in_place() -> Any:
    """
    A graph whose node ``ask`` calls a tool for Paris and whose node ``review``
    edits that call's arguments in place (to Lyon) and returns the message to
    replace itself by id.
    """

    def ask(state: MessagesState) -> dict[str, Any]:  # noqa: ARG001  # the node ignores the state
        call = {"name": "weather", "args": {"city": "Paris"}, "id": "c1"}
        return {"messages": [AIMessage("", id="a1", tool_calls=[call])]}

    def review(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        last.tool_calls[0]["args"]["city"] = "Lyon"
        return {"messages": [last]}

    graph = StateGraph(MessagesState)
    graph.add_node("ask", ask)
    graph.add_node("review", review)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", "review")
    return graph


def config(thread: str, **more: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, **more}}


def chat_graph(saver: ContextSaver, replies: list[str]) -> Any:
    """
    A one-node ``StateGraph(MessagesState)`` whose node asks a fake chat model.
    """
    model = GenericFakeChatModel(messages=iter(replies))

    def chat(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("chat", chat)
    graph.add_edge(START, "chat")
    return graph.compile(checkpointer=saver)


def link_count(kind: str, store: Any) -> int:
    """
    How many transcript links a SQLite or PostgreSQL store holds.
    """
    if kind == "sqlite":
        with contextlib.closing(sqlite_rows.connect(store.path)) as db:
            return int(db.execute("SELECT count(*) FROM message_links").fetchone()[0])
    import psycopg  # noqa: PLC0415  # only with a PostgreSQL server

    with psycopg.connect(server_address("postgres")) as conn:
        query = f'SELECT count(*) FROM "{store.schema}".message_links'  # noqa: S608  # the test's own schema
        found = conn.execute(query).fetchone()  # type: ignore[arg-type]
        return int(found[0]) if found is not None else 0


def put_checkpoint(
    saver: ContextSaver, thread: str, messages: list[Any], parent: str | None = None, **extra: Any
) -> Any:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": messages, **extra}
    cfg = config(thread, checkpoint_ns="")
    if parent is not None:
        cfg["configurable"]["checkpoint_id"] = parent
    return saver.put(cfg, checkpoint, {"source": "loop", "step": len(messages)}, {})


# -- conformance ------------------------------------------------------------------------


class TestConformance:
    def test_full_suite(self, stores: Stores):
        """
        LangGraph's conformance suite passes in full, base and extended
        capabilities (delete_for_runs, copy_thread, prune), on every store.
        """

        @checkpointer_test(name=f"ContextSaver({stores.kind})")
        async def factory() -> AsyncIterator[ContextSaver]:
            yield ContextSaver(stores.new())

        report = asyncio.run(validate(factory))
        failures = {name: result.failures for name, result in report.results.items() if not result.passed}
        assert {} == failures
        assert report.passed_all_base()
        assert report.passed_all()
        assert {cap.value for cap in ALL_CAPABILITIES} == {
            name for name, result in report.results.items() if result.detected and result.passed
        }


# -- what is stored -----------------------------------------------------------------------


class TestTranscript:
    def test_each_message_stored_once(self, persistent: Stores):
        """
        Checkpointing every turn of a run stores each message once: the store
        holds as many messages as the run has, not the sum of every checkpoint's.
        """
        store = persistent.new()
        saver = ContextSaver(store)
        messages: list[Any] = []
        parent = None
        for turn in range(12):
            messages = [
                *messages,
                HumanMessage(f"question {turn}", id=f"h{turn}"),
                AIMessage(f"answer {turn}", id=f"a{turn}"),
            ]
            parent = put_checkpoint(saver, "t", messages, parent)["configurable"]["checkpoint_id"]
        assert 24 == Raw(persistent.kind, store).message_count()
        assert messages == saver.get_tuple(config("t")).checkpoint["channel_values"]["messages"]
        assert 12 == len(list(saver.list(config("t"))))

    def test_runtime_state_is_never_refused(self, stores: Stores):
        """
        What a runtime's state holds between steps (a trailing call whose
        result has not run yet, a streaming chunk, a system message) is kept
        and comes back equal, as the same classes.
        """
        saver = ContextSaver(stores.new())
        messages = [
            SystemMessage("Be brief.", id="s"),
            HumanMessage("Weather in Paris?", id="h"),
            AIMessageChunk(
                "Let me", id="c", tool_call_chunks=[{"name": "weather", "args": '{"ci', "id": "x", "index": 0}]
            ),
            AIMessage("", id="a", tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "call_1"}]),
        ]
        saved = put_checkpoint(saver, "t", messages)
        back = saver.get_tuple(saved).checkpoint["channel_values"]["messages"]
        assert messages == back
        assert [type(m) for m in messages] == [type(m) for m in back]

    def test_other_values_use_the_serializer(self, stores: Stores):
        """
        A channel named ``messages`` that does not hold LangChain messages, and
        every other channel, go through LangGraph's serializer and come back equal.
        """
        saver = ContextSaver(stores.new())
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {
            "messages": "not a list",
            "plan": {"steps": [1, 2]},
            "when": datetime(2026, 1, 1, tzinfo=UTC),
        }
        saved = saver.put(config("t", checkpoint_ns=""), checkpoint, {"source": "input", "step": -1}, {})
        assert checkpoint["channel_values"] == saver.get_tuple(saved).checkpoint["channel_values"]

    def test_metadata_that_is_not_json(self, stores: Stores):
        """
        Metadata JSON cannot carry (a datetime) comes back equal, and can still be filtered on.
        """
        saver = ContextSaver(stores.new())
        checkpoint = empty_checkpoint()
        when = datetime(2026, 1, 1, tzinfo=UTC)
        saved = saver.put(config("t", checkpoint_ns=""), checkpoint, {"source": "loop", "step": 1, "when": when}, {})
        assert when == saver.get_tuple(saved).metadata["when"]
        assert 1 == len(list(saver.list(config("t"), filter={"when": when})))
        assert 0 == len(list(saver.list(config("t"), filter={"when": datetime.now(UTC)})))

    def test_a_message_edited_in_place_is_stored_as_edited(self, stores: Stores):
        """
        A message whose field was set again in place (the same object, as a
        node that edits the last message and returns it to replace itself
        does) is stored as it is now.
        """
        saver = ContextSaver(stores.new())
        messages = [HumanMessage("a", id="1"), AIMessage("b", id="2")]
        parent = put_checkpoint(saver, "t", messages)["configurable"]["checkpoint_id"]
        messages[1].content = "b, edited"
        put_checkpoint(saver, "t", list(messages), parent)
        stored = saver.get_tuple(config("t")).checkpoint["channel_values"]["messages"]
        assert "b, edited" == stored[1].content
        first = saver.get_tuple(config("t", checkpoint_ns="", checkpoint_id=parent)).checkpoint
        assert "b" == first["channel_values"]["messages"][1].content

    @pytest.mark.parametrize("new", [1.0, True, Count.ONE], ids=["float", "bool", "enum"])
    def test_a_value_edited_in_place_to_an_equal_one_of_another_type_is_stored(self, stores: Stores, new: Any):
        """
        A message field edited in place from ``1`` to a value equal to it of
        another type (``1.0``, ``True``, an int enum) is a change: the new
        checkpoint holds the new type, read by this saver and by a new one, as
        LangGraph's own saver gives it back.
        """
        store = stores.new()
        found = []
        for saver in (ContextSaver(store), InMemorySaver()):
            messages = [HumanMessage("a", id="1"), AIMessage("b", id="2", response_metadata={"n": 1})]
            parent = None
            for version in (1, 2):
                checkpoint = empty_checkpoint()
                checkpoint["channel_values"] = {"messages": list(messages)}
                checkpoint["channel_versions"] = versions = {"messages": version}
                where = config("t", checkpoint_ns="", **({} if parent is None else {"checkpoint_id": parent}))
                saved = saver.put(where, checkpoint, {"source": "loop", "step": version}, versions)
                parent = saved["configurable"]["checkpoint_id"]
                messages[1].response_metadata["n"] = new
            readers = [saver, ContextSaver(stores.again(store))] if isinstance(saver, ContextSaver) else [saver]
            for reader in readers:
                value = reader.get_tuple(config("t")).checkpoint["channel_values"]["messages"][1].response_metadata
                found.append((type(value["n"]), value["n"]))
        assert [(type(new), new)] * 3 == found

    def test_messages_sharing_a_field_are_converted_once(self, stores: Stores, monkeypatch: pytest.MonkeyPatch):
        """
        Messages that share a field's dict (a shallow copy of another, as a
        node may return) are read unchanged by the next put, which converts
        only the message it adds.
        """
        saver = ContextSaver(stores.new())
        first = AIMessage("b", id="2", response_metadata={"model": "m"})
        messages = [HumanMessage("a", id="1"), first, first.model_copy(update={"id": "3"})]
        parent = put_checkpoint(saver, "t", messages)["configurable"]["checkpoint_id"]
        converted: list[int] = []
        monkeypatch.setattr(langgraph_module, "_convert", lambda items: converted.append(len(items)) or _convert(items))
        put_checkpoint(saver, "t", [*messages, HumanMessage("c", id="4")], parent)
        assert [1] == converted

    def test_a_state_changed_by_its_reader_is_read_as_stored(self, stores: Stores):
        """
        Messages a reader of the state edits in place never change what a
        later read returns: it gives the checkpoint as it was stored.
        """
        saver = ContextSaver(stores.new())
        put_checkpoint(saver, "t", [HumanMessage("a", id="1"), AIMessage("b", id="2")])
        first = saver.get_tuple(config("t")).checkpoint["channel_values"]["messages"]
        first[1].content = "edited by a reader"
        again = saver.get_tuple(config("t")).checkpoint["channel_values"]["messages"]
        assert ["a", "b"] == [m.content for m in again]

    def test_a_value_equal_to_json_but_of_another_type_keeps_its_type(self, stores: Stores):
        """
        A message holding an enum (equal to the str or int JSON gives back)
        comes back holding the enum, as LangGraph's own saver gives it.
        """
        store = stores.new()
        saver, reference = ContextSaver(store), InMemorySaver()
        metadata = {"finish_reason": Reason.STOP, "choices": Count.ONE}
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": [AIMessage("done", id="1", response_metadata=metadata)]}
        checkpoint["channel_versions"] = versions = {"messages": 1}
        found = []
        for each, reader in ((saver, lambda: ContextSaver(stores.again(store))), (reference, lambda: reference)):
            saved = each.put(config("t", checkpoint_ns=""), checkpoint, {"source": "input", "step": -1}, versions)
            back = reader().get_tuple(saved).checkpoint["channel_values"]["messages"][0].response_metadata
            found.append({key: type(value) for key, value in back.items()})
        assert [{"finish_reason": Reason, "choices": Count}] * 2 == found

    def test_an_encrypting_serializer_keeps_every_message_encrypted(self, persistent: Stores):
        """
        With LangGraph's ``EncryptedSerializer`` the messages of the state and
        of the writes go through it like every other value: the store holds
        no message, and a fresh saver reads them back equal.
        """

        class Flip:
            def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
                return "flip", bytes(b ^ 0x5A for b in plaintext)

            def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
                assert "flip" == ciphername
                return bytes(b ^ 0x5A for b in ciphertext)

        store = persistent.new()
        serde = EncryptedSerializer(Flip())
        saver = ContextSaver(store, serde=serde)
        messages = [HumanMessage("my password is hunter2", id="1"), AIMessage("noted", id="2")]
        saved = put_checkpoint(saver, "t", messages, __start__={"messages": messages[:1]})
        saver.put_writes(saved, [("messages", [AIMessage("a secret write", id="3")])], "task")
        assert 0 == Raw(persistent.kind, store).message_count()
        loaded = ContextSaver(persistent.again(store), serde=serde).get_tuple(saved)
        assert messages == loaded.checkpoint["channel_values"]["messages"]
        assert [("task", "messages", [AIMessage("a secret write", id="3")])] == loaded.pending_writes

    def test_a_change_deep_inside_a_message_is_stored(self, stores: Stores):
        """
        A node that edits a tool call's arguments in place and returns the
        message to replace itself by id: the new checkpoint holds the edit and
        the one before it does not, as in LangGraph's own saver.
        """

        def cities(saver: Any) -> list[tuple[int, list[str]]]:
            app = _asks_then_edits_in_place().compile(checkpointer=saver)
            app.invoke({"messages": [HumanMessage("weather?", id="h")]}, config("t"), durability="sync")
            return [
                (state.metadata["step"], [m.tool_calls[0]["args"]["city"] for m in state.values["messages"][1:]])
                for state in app.get_state_history(config("t"))
            ]

        assert [(2, ["Lyon"]), (1, ["Paris"]), (0, []), (-1, [])] == cities(InMemorySaver())
        assert cities(InMemorySaver()) == cities(ContextSaver(stores.new()))

    def test_a_reader_changing_a_message_deep_inside_never_changes_the_checkpoint(self, stores: Stores):
        """
        A reader (or the writer, after its put) changing a message's content
        blocks or metadata in place never changes what a later read returns.
        """
        saver = ContextSaver(stores.new())
        messages = [
            HumanMessage([{"type": "text", "text": "a"}], id="1"),
            AIMessage("b", id="2", response_metadata={"model": "m"}),
        ]
        put_checkpoint(saver, "t", messages)
        expected = repr(messages)
        messages[1].response_metadata["model"] = "changed by the writer"
        assert expected == repr(saver.get_tuple(config("t")).checkpoint["channel_values"]["messages"])
        read = saver.get_tuple(config("t")).checkpoint["channel_values"]["messages"]
        read[0].content.append({"type": "text", "text": "added by a reader"})
        read[1].response_metadata["extra"] = "added by a reader"
        assert expected == repr(saver.get_tuple(config("t")).checkpoint["channel_values"]["messages"])

    def test_a_resumed_run_adds_only_its_new_messages(self, stores: Stores, monkeypatch: pytest.MonkeyPatch):
        """
        After a read of the thread's newest checkpoint (as a run starts), a put
        continuing it converts only the messages added, and so does the put
        after a read of that one.
        """
        store = stores.new()
        put_checkpoint(ContextSaver(store), "t", [HumanMessage("a", id="1"), AIMessage("b", id="2")])
        saver = ContextSaver(stores.again(store))
        converted: list[int] = []
        monkeypatch.setattr(langgraph_module, "_convert", lambda items: converted.append(len(items)) or _convert(items))
        latest = saver.get_tuple(config("t"))
        grown = [*latest.checkpoint["channel_values"]["messages"], HumanMessage("c", id="3")]
        saved = put_checkpoint(saver, "t", grown, latest.config["configurable"]["checkpoint_id"])
        latest = saver.get_tuple(config("t"))
        assert grown == latest.checkpoint["channel_values"]["messages"]
        more = [*latest.checkpoint["channel_values"]["messages"], AIMessage("d", id="4")]
        put_checkpoint(saver, "t", more, saved["configurable"]["checkpoint_id"])
        assert [1, 1] == converted
        assert more == saver.get_tuple(config("t")).checkpoint["channel_values"]["messages"]

    def test_messages_in_writes_share_the_transcript(self, persistent: Stores):
        """
        Messages a task writes (and a graph's input carries) are stored once
        with the transcript, and come back equal in the pending writes.
        """
        store = persistent.new()
        saver = ContextSaver(store)
        human, ai = HumanMessage("hi", id="1"), AIMessage("hello", id="2")
        saved = put_checkpoint(saver, "t", [human, ai], __start__={"messages": [human]})
        saver.put_writes(saved, [("messages", [ai]), ("other", {"n": 3}), ("__start__", {"messages": [human]})], "task")
        assert 2 == Raw(persistent.kind, store).message_count()
        loaded = ContextSaver(persistent.again(store)).get_tuple(saved)
        assert [
            ("task", "messages", [ai]),
            ("task", "other", {"n": 3}),
            ("task", "__start__", {"messages": [human]}),
        ] == (loaded.pending_writes)
        assert {"messages": [human]} == loaded.checkpoint["channel_values"]["__start__"]

    def test_put_again_keeps_the_thread_in_order(self, stores: Stores):
        """
        Putting an older checkpoint again replaces it where it is: the thread
        lists every checkpoint once, newest first, and its newest stays newest.
        """
        saver = ContextSaver(stores.new())
        first = put_checkpoint(saver, "t", [HumanMessage("a", id="1")])
        second = put_checkpoint(saver, "t", [HumanMessage("a", id="1")], first["configurable"]["checkpoint_id"])
        checkpoint = saver.get_tuple(first).checkpoint
        checkpoint["channel_values"]["messages"] = [HumanMessage("a, again", id="1")]
        saver.put(config("t", checkpoint_ns=""), checkpoint, {"source": "update", "step": 0}, {})
        ids = [t.config["configurable"]["checkpoint_id"] for t in saver.list(config("t"))]
        assert [second["configurable"]["checkpoint_id"], first["configurable"]["checkpoint_id"]] == ids
        assert second["configurable"]["checkpoint_id"] == saver.get_tuple(config("t")).checkpoint["id"]
        again = saver.get_tuple(first)
        assert "a, again" == again.checkpoint["channel_values"]["messages"][0].content

    def test_the_newest_checkpoint_is_the_greatest_id_whoever_put_it(self, stores: Stores):
        """
        Two savers on one store: when one puts a checkpoint after the other's
        (the head), but with a smaller id (made earlier, put later), both
        read the greatest id as the thread's newest, as LangGraph's savers do.
        """
        store = stores.new()
        first, second, reference = ContextSaver(store), ContextSaver(stores.again(store)), InMemorySaver()
        for saver, checkpoint_id in ((second, "2"), (first, "1")):
            for each in (saver, reference):
                checkpoint = empty_checkpoint()
                checkpoint["id"] = checkpoint_id
                each.put(config("t", checkpoint_ns=""), checkpoint, {"source": "loop", "step": 0}, {})
        newest = [s.get_tuple(config("t")).checkpoint["id"] for s in (reference, first, second)]
        assert ["2", "2", "2"] == newest

    def test_a_saver_that_never_read_the_thread_puts_an_older_checkpoint_again(self, stores: Stores):
        """
        A saver that never read the thread puts one of its older checkpoints
        again: it is replaced where it is, as LangGraph's saver does; the
        thread keeps every checkpoint, in order, and its newest stays newest.
        """

        def put(saver: Any, checkpoint_id: str, parent: str | None, text: str) -> None:
            checkpoint = empty_checkpoint()
            checkpoint["id"] = checkpoint_id
            checkpoint["channel_values"] = {"messages": [HumanMessage(text, id="1")]}
            checkpoint["channel_versions"] = versions = {"messages": f"{checkpoint_id}.{text}"}  # one blob each
            cfg = config("t", checkpoint_ns="", **({} if parent is None else {"checkpoint_id": parent}))
            saver.put(cfg, checkpoint, {"source": "loop", "step": 0}, versions)

        def thread(saver: Any) -> list[tuple[str, str]]:
            found = saver.list(config("t"))
            return [(t.checkpoint["id"], t.checkpoint["channel_values"]["messages"][0].content) for t in found]

        store = stores.new()
        first, reference = ContextSaver(store), InMemorySaver()
        for saver in (reference, first):
            put(saver, "1", None, "a")
            put(saver, "2", "1", "b")
            put(saver, "3", "2", "c")
        again = ContextSaver(stores.again(store))
        put(reference, "2", "1", "again")
        put(again, "2", "1", "again")
        assert [("3", "c"), ("2", "again"), ("1", "a")] == thread(reference)
        assert thread(reference) == thread(ContextSaver(stores.again(store)))
        assert "3" == again.get_tuple(config("t")).checkpoint["id"]

    def test_copy_thread_twice(self, stores: Stores):
        """
        Copying a thread again leaves the copy as it was: each checkpoint once, in order.
        """
        saver = ContextSaver(stores.new())
        first = put_checkpoint(saver, "src", [HumanMessage("a", id="1")])
        put_checkpoint(saver, "src", [HumanMessage("a", id="1")], first["configurable"]["checkpoint_id"])
        saver.copy_thread("src", "dst")
        saver.copy_thread("src", "dst")
        src = [t.config["configurable"]["checkpoint_id"] for t in saver.list(config("src"))]
        assert src == [t.config["configurable"]["checkpoint_id"] for t in saver.list(config("dst"))]

    def test_a_message_changed_in_place_is_stored_as_it_is(self, stores: Stores):
        """
        A put after the list was rebuilt (a message replaced by id, as
        LangGraph's reducer does) stores the new transcript, not the cached one.
        """
        saver = ContextSaver(stores.new())
        first = [HumanMessage("a", id="1"), AIMessage("b", id="2")]
        parent = put_checkpoint(saver, "t", first)["configurable"]["checkpoint_id"]
        second = [HumanMessage("a", id="1"), AIMessage("b, edited", id="2")]
        put_checkpoint(saver, "t", second, parent)
        assert second == saver.get_tuple(config("t")).checkpoint["channel_values"]["messages"]
        first_config = config("t", checkpoint_ns="", checkpoint_id=parent)
        assert first == saver.get_tuple(first_config).checkpoint["channel_values"]["messages"]

    @pytest.mark.parametrize("kind", kind_params(("sqlite", "postgres")))
    def test_writes_share_the_links_of_the_next_checkpoint(self, scratch_dir: Path, kind: str):
        """
        The messages a task writes continue its checkpoint's transcript, so
        the next checkpoint, which holds them in the same order, shares their
        links: the store holds one link per message, however many writes.
        """
        made = Stores(kind, scratch_dir)
        try:
            store = made.new()
            saver = ContextSaver(store)
            messages: list[Any] = []
            parent = None
            for turn in range(4):
                messages = [*messages, HumanMessage(f"question {turn}", id=f"h{turn}")]
                saved = put_checkpoint(saver, "t", messages, parent)
                reply = AIMessage(f"answer {turn}", id=f"a{turn}")
                saver.put_writes(saved, [("messages", [reply]), ("plan", {"turn": turn})], f"task-{turn}")
                messages = [*messages, reply]
                parent = put_checkpoint(saver, "t", messages, saved["configurable"]["checkpoint_id"])
                parent = parent["configurable"]["checkpoint_id"]
                expected = [(f"task-{turn}", "messages", [reply]), (f"task-{turn}", "plan", {"turn": turn})]
                assert expected == saver.get_tuple(saved).pending_writes
                assert expected == ContextSaver(made.again(store)).get_tuple(saved).pending_writes
            assert 8 == Raw(kind, store).message_count()
            assert 8 == link_count(kind, store)
        finally:
            made.close()

    def test_writes_put_before_their_checkpoint_wait_for_its_transcript(self, scratch_dir: Path):
        """
        LangGraph puts a checkpoint once the one before it is saved, and may
        put a task's writes first, from another thread: the writes wait for
        the checkpoint's transcript, and share its links.
        """
        made = Stores("sqlite", scratch_dir)
        try:
            store = made.new()
            saver = ContextSaver(store)
            first = put_checkpoint(saver, "t", [HumanMessage("q0", id="h0")])
            checkpoints = [empty_checkpoint(), empty_checkpoint()]
            held = [HumanMessage("q0", id="h0"), AIMessage("a0", id="a0")]
            checkpoints[0]["channel_values"] = {"messages": held}
            checkpoints[1]["channel_values"] = {"messages": [*held, HumanMessage("q1", id="h1")]}
            saving, release = threading.Event(), threading.Event()
            save = store.save

            def slow_save(checkpoint: Any, **kwargs: Any) -> Any:
                if checkpoint.id == _checkpoint_key("t", "", checkpoints[0]["id"]):
                    saving.set()
                    release.wait(10)
                return save(checkpoint, **kwargs)

            store.save = slow_save

            def puts() -> None:  # as LangGraph's background thread: each put once the one before is saved
                parent = first
                for checkpoint in checkpoints:
                    parent = saver.put(parent, checkpoint, {"source": "loop", "step": 1}, {})

            putter = threading.Thread(target=puts)
            putter.start()
            assert saving.wait(10)
            second = config("t", checkpoint_ns="", checkpoint_id=checkpoints[1]["id"])
            reply = AIMessage("a1", id="a1")
            writer = threading.Thread(target=saver.put_writes, args=(second, [("messages", [reply])], "task"))
            writer.start()
            time.sleep(0.05)  # the writes wait: the put before their checkpoint's is under way
            release.set()
            putter.join(10)
            writer.join(10)
            assert [("task", "messages", [reply])] == ContextSaver(made.again(store)).get_tuple(second).pending_writes
            third = empty_checkpoint()
            third["channel_values"] = {"messages": [*checkpoints[1]["channel_values"]["messages"], reply]}
            saver.put(second, third, {"source": "loop", "step": 2}, {})
            assert 4 == Raw("sqlite", store).message_count()
            assert 4 == link_count("sqlite", store)  # the writes continued the second checkpoint, as the third does
        finally:
            made.close()

    def test_writes_for_a_checkpoint_never_put_do_not_wait(self, stores: Stores):
        """
        Writes to a checkpoint this saver is not putting are stored at once,
        even right after a put, and read back.
        """
        saver = ContextSaver(stores.new())
        first = put_checkpoint(saver, "t", [HumanMessage("q", id="h")])
        for checkpoint_id in (first["configurable"]["checkpoint_id"], empty_checkpoint()["id"]):
            target = config("t", checkpoint_ns="", checkpoint_id=checkpoint_id)
            put_checkpoint(saver, "t", [HumanMessage("q", id="h")], first["configurable"]["checkpoint_id"])
            start = time.monotonic()
            saver.put_writes(target, [("messages", [AIMessage("a", id="a")])], "task")
            assert time.monotonic() - start < 1.0
        assert [("task", "messages", [AIMessage("a", id="a")])] == saver.get_tuple(first).pending_writes

    def test_pending_writes_are_read_from_the_store_once(self, stores: Stores):
        """
        A record of pending writes is read from the store once per saver (it
        never changes): the saver that wrote it never loads it, another loads
        it at its first read only.
        """
        store = stores.new()
        saver = ContextSaver(store)
        messages = [HumanMessage("question", id="h")]
        saved = put_checkpoint(saver, "t", messages)
        reply = AIMessage("answer", id="a")
        saver.put_writes(saved, [("messages", [reply])], "task")
        other = ContextSaver(stores.again(store))
        loaded: list[str] = []
        for target in {id(s.store): s.store for s in (saver, other)}.values():
            load = target.load

            def counted(key: str, load: Any = load) -> Any:
                loaded.append(key)
                return load(key)

            target.load = counted
        key = _checkpoint_key("t", "", saved["configurable"]["checkpoint_id"])
        for reader, records in ((saver, 0), (other, 1), (other, 0), (saver, 0)):
            loaded.clear()
            assert [("task", "messages", [reply])] == reader.get_tuple(saved).pending_writes
            assert records == len([k for k in loaded if k != key])

    def test_bookkeeping_comes_back_equal(self, stores: Stores):
        """
        A checkpoint's id, time, versions and other channels come back as
        they were put, whether JSON carries them or not.
        """
        saver = ContextSaver(stores.new())
        for ts, seen in (
            ("2026-01-01T00:00:00+00:00", {"node": {"messages": 1}}),
            ("2026-01-01T02:00:00+02:00", {"node": {"messages": "00000002.0.5"}}),
            ("2026-01-01T00:00:00Z", {"node": {"messages": datetime(2026, 1, 1, tzinfo=UTC)}}),  # not JSON
            ("not a time", {}),
        ):
            checkpoint = empty_checkpoint()
            checkpoint["ts"] = ts
            checkpoint["versions_seen"] = seen
            checkpoint["channel_versions"] = {"messages": 3, "plan": 1}
            checkpoint["channel_values"] = {"messages": [HumanMessage("hi", id="1")], "plan": {"steps": [1]}}
            saved = saver.put(config("b", checkpoint_ns=""), checkpoint, {"source": "input", "step": -1}, {})
            assert checkpoint == saver.get_tuple(saved).checkpoint
            assert checkpoint == ContextSaver(stores.again(saver.store)).get_tuple(saved).checkpoint

    def test_values_a_transcript_cannot_hold_use_the_serializer(self, stores: Stores):
        """
        Messages holding what JSON cannot (bytes in a tool's artifact or in
        ``additional_kwargs``, NaN in ``response_metadata``, a key that is not
        a str), and lists of other models with a ``type`` field, are put and
        written without error and come back as LangGraph's own saver gives them.
        """
        store = stores.new()
        saver, reference = ContextSaver(store), InMemorySaver()
        call = {"name": "f", "args": {"a": 1}, "id": "c1"}
        values: dict[str, Any] = {
            "messages": [
                AIMessage("", id="1", tool_calls=[call], additional_kwargs={"raw": b"\x00\xff"}),
                ToolMessage("done", tool_call_id="c1", id="2", artifact={"png": b"\x89PNG", "n": 1.5}),
                AIMessage("ok", id="3", response_metadata={"logprob": float("-inf"), "score": float("nan")}),
                AIMessage("ok", id="4", additional_kwargs={1: "int key"}),
            ],
            "steps": [Step(type="search", query="q")],
        }
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = values
        checkpoint["channel_versions"] = versions = dict.fromkeys(values, 1)
        writes = [("messages", values["messages"][:1]), ("steps", values["steps"])]
        found = []
        for each, reader in ((saver, lambda: ContextSaver(stores.again(store))), (reference, lambda: reference)):
            saved = each.put(config("t", checkpoint_ns=""), checkpoint, {"source": "input", "step": -1}, versions)
            each.put_writes(saved, writes, "task")
            loaded = reader().get_tuple(saved)
            found.append(repr((loaded.checkpoint["channel_values"], loaded.pending_writes)))  # repr: NaN is not NaN
        assert found[1] == found[0]
        assert repr(values) in found[0]


def first_layout(store: Any) -> dict[str, Any]:
    """
    Fill *store* with what an earlier ContextSaver wrote (the fixture), and
    return what that saver's ``list()`` gave for each thread.
    """
    data = json.loads(FIRST_LAYOUT.read_text(encoding="utf-8"))
    for item in data["checkpoints"]:
        store.save(from_json(json.dumps(item), Checkpoint))
    for thread, head in data["heads"].items():
        store.save(store.load(head), thread=thread)
    expected: dict[str, Any] = data["expected"]
    return expected


def summary(value: Any) -> Any:
    """
    A value as the fixture describes it: messages as ``[type, content, id]``, anything else by its repr.
    """
    if isinstance(value, list) and value and all(isinstance(m, BaseMessage) for m in value):
        return [[m.type, m.content, m.id] for m in value]
    if isinstance(value, dict) and value and all(isinstance(v, list) for v in value.values()):
        return {k: summary(v) for k, v in value.items()}
    return repr(value)


def listed(saver: ContextSaver, thread: str) -> list[dict[str, Any]]:
    return [
        {
            "id": t.config["configurable"]["checkpoint_id"],
            "parent": None if t.parent_config is None else t.parent_config["configurable"]["checkpoint_id"],
            "ts": t.checkpoint["ts"],
            "metadata": t.metadata,
            "values": {k: summary(v) for k, v in sorted(t.checkpoint["channel_values"].items())},
            "versions": t.checkpoint["channel_versions"],
            "writes": [[task, channel, summary(value)] for task, channel, value in t.pending_writes],
        }
        for t in saver.list(config(thread, checkpoint_ns=""))
    ]


class TestFirstLayout:
    def test_reads_what_the_first_layout_wrote(self, stores: Stores):
        """
        A store an earlier ContextSaver wrote (each record of pending writes a
        transcript of its own, every checkpoint serialized whole) reads as
        that saver read it: checkpoints, metadata and pending writes.
        """
        store = stores.new()
        expected = first_layout(store)
        saver = ContextSaver(stores.again(store))
        for thread, tuples in expected.items():
            assert tuples == listed(saver, thread)

    def test_continues_copies_and_deletes_the_first_layout(self, stores: Stores):
        """
        A thread of the first layout continues, resumes from its interrupt,
        takes new writes beside its old ones, is copied, and is deleted
        whole, with every message only it held.
        """
        store = stores.new()
        expected = first_layout(store)
        saver = ContextSaver(stores.again(store))
        saver.copy_thread("chat", "copy")
        assert expected["chat"] == listed(saver, "copy")
        out = chat_graph(saver, ["Berlin."]).invoke({"messages": [HumanMessage("And Germany?")]}, config("chat"))
        assert ["Hi", "Hello!", "Capital of France?", "Paris.", "And Germany?", "Berlin."] == [
            m.content for m in out["messages"]
        ]

        def ask(_state: MessagesState) -> dict[str, Any]:
            return {"messages": [AIMessage(f"approved: {interrupt('approve?')}")]}

        gate = StateGraph(MessagesState)
        gate.add_node("ask", ask)
        gate.add_edge(START, "ask")
        done = gate.compile(checkpointer=saver).invoke(Command(resume="yes"), config("gate"))
        assert ["deploy", "approved: yes"] == [m.content for m in done["messages"]]
        oldest = config("chat", checkpoint_ns="", checkpoint_id=expected["chat"][-1]["id"])
        before = saver.get_tuple(oldest).pending_writes
        saver.put_writes(oldest, [("messages", [HumanMessage("late", id="late")])], "late-task")
        late = ("late-task", "messages", [HumanMessage("late", id="late")])
        after = ContextSaver(stores.again(store)).get_tuple(oldest).pending_writes
        assert sorted(map(repr, [*before, late])) == sorted(map(repr, after))
        for thread in ("chat", "gate", "copy"):
            saver.delete_thread(thread)
        assert [] == list(store.list())
        if stores.kind != "memory":
            assert 0 == Raw(stores.kind, store).message_count()


# -- end to end --------------------------------------------------------------------------


class TestGraphs:
    def test_state_survives_reopening_the_store(self, scratch_dir: Path):
        """
        A ``StateGraph(MessagesState)`` checkpointed in a SQLite file continues
        where it stopped after the store is closed and opened again.
        """
        path = scratch_dir / "graph.db"
        store = SQLiteStore(path)
        graph = chat_graph(ContextSaver(store), ["Hello!", "Paris."])
        graph.invoke({"messages": [HumanMessage("Hi")]}, config("chat"))
        graph.invoke({"messages": [HumanMessage("Capital of France?")]}, config("chat"))
        before = graph.get_state(config("chat")).values["messages"]
        store.close()

        reopened = SQLiteStore(path)
        try:
            graph = chat_graph(ContextSaver(reopened), ["Berlin."])
            assert before == graph.get_state(config("chat")).values["messages"]
            out = graph.invoke({"messages": [HumanMessage("And of Germany?")]}, config("chat"))
            assert ["Hi", "Hello!", "Capital of France?", "Paris.", "And of Germany?", "Berlin."] == [
                m.content for m in out["messages"]
            ]
        finally:
            reopened.close()

    def test_history_walks_back_and_a_fork_branches(self, stores: Stores):
        """
        ``get_state_history`` walks every checkpoint back, newest first; resuming
        from an older checkpoint starts a branch whose parent is that
        checkpoint, and the main line stays in the history.
        """
        saver = ContextSaver(stores.new())
        graph = chat_graph(saver, ["one", "two", "branch"])
        graph.invoke({"messages": [HumanMessage("first")]}, config("h"))
        graph.invoke({"messages": [HumanMessage("second")]}, config("h"))
        history = list(graph.get_state_history(config("h")))
        # each turn: its input, then the model's reply; the first also starts from an empty state
        assert [4, 3, 2, 2, 1, 0] == [len(state.values.get("messages", [])) for state in history]
        assert all(
            newer.parent_config["configurable"]["checkpoint_id"] == older.config["configurable"]["checkpoint_id"]
            for newer, older in itertools.pairwise(history)
        )
        (after_first,) = [state for state in history if state.metadata["step"] == 1]  # the first reply
        out = graph.invoke({"messages": [HumanMessage("other")]}, after_first.config)
        assert ["first", "one", "other", "branch"] == [m.content for m in out["messages"]]
        state = graph.get_state(config("h"))
        walk = []
        cursor = state
        while cursor.parent_config is not None:
            walk.append(cursor.parent_config["configurable"]["checkpoint_id"])
            cursor = graph.get_state(cursor.parent_config)
        assert after_first.config["configurable"]["checkpoint_id"] in walk
        assert (
            len(list(graph.get_state_history(config("h")))) == len(history) + 3
        )  # the branch's input, its start step and the reply; the main line stays

    def test_interrupt_resumes_after_reopening(self, scratch_dir: Path):
        """
        A graph interrupted for a human's answer resumes with ``Command(resume=...)``
        from a new saver over the same SQLite file.
        """

        def ask(_state: MessagesState) -> dict[str, Any]:
            answer = interrupt("approve?")
            return {"messages": [AIMessage(f"approved: {answer}")]}

        def build(saver: ContextSaver) -> Any:
            graph = StateGraph(MessagesState)
            graph.add_node("ask", ask)
            graph.add_edge(START, "ask")
            return graph.compile(checkpointer=saver)

        path = scratch_dir / "interrupt.db"
        store = SQLiteStore(path)
        first = build(ContextSaver(store)).invoke({"messages": [HumanMessage("deploy")]}, config("i"))
        assert "approve?" == first["__interrupt__"][0].value
        store.close()
        reopened = SQLiteStore(path)
        try:
            out = build(ContextSaver(reopened)).invoke(Command(resume="yes"), config("i"))
            assert ["deploy", "approved: yes"] == [m.content for m in out["messages"]]
        finally:
            reopened.close()

    def test_create_agent_with_a_tool(self, stores: Stores):
        """
        LangChain's ``create_agent`` with a tool, driven by a fake chat model,
        checkpointed by ContextSaver: the call, its result and the answer are
        kept, and the next turn continues the thread.
        """
        from langchain.agents import create_agent  # noqa: PLC0415  # LangChain's agents load slowly

        def weather(city: str) -> str:
            """The weather in a city."""
            return f"18C in {city}"

        model = ToolModel(
            messages=iter(
                [
                    AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "call_1"}]),
                    AIMessage("It is 18C in Paris."),
                    AIMessage("You asked about Paris."),
                ]
            )
        )
        saver = ContextSaver(stores.new())
        agent = create_agent(model, [weather], system_prompt="Be brief.", checkpointer=saver)
        agent.invoke({"messages": [HumanMessage("Weather in Paris?")]}, config("agent"))
        out = agent.invoke({"messages": [HumanMessage("What did I ask?")]}, config("agent"))
        assert [HumanMessage, AIMessage, ToolMessage, AIMessage, HumanMessage, AIMessage] == [
            type(m) for m in out["messages"]
        ]
        assert "18C in Paris" == out["messages"][2].content
        stored = saver.get_tuple(config("agent")).checkpoint["channel_values"]["messages"]
        assert out["messages"] == stored

    def test_a_read_state_is_the_readers_own(self, stores: Stores):
        """
        The messages ``invoke`` returned and those a ``get_state`` read are the
        caller's own, as with LangGraph's own saver: another read, and a later
        run whose node edits a message in place, change none of them.
        """

        def cities(saver: Any) -> list[str]:
            app = _asks_then_edits_in_place().compile(checkpointer=saver, interrupt_before=["review"])
            out = app.invoke({"messages": [HumanMessage("weather?", id="h")]}, config("t"))
            read = app.get_state(config("t")).values["messages"]
            app.invoke(None, config("t"))
            again, other = (app.get_state(config("t")).values["messages"] for _ in range(2))
            other[-1].tool_calls[0]["args"]["city"] = "Nice"
            return [m[-1].tool_calls[0]["args"]["city"] for m in (out["messages"], read, again)]

        assert ["Paris", "Paris", "Lyon"] == cities(InMemorySaver())
        assert cities(InMemorySaver()) == cities(ContextSaver(stores.new()))

    def test_every_read_has_its_own_nested_values(self, stores: Stores):
        """
        A read's messages share no dict or list with another read's: an edit
        deep inside one (its LangChain kwargs, an extra field) leaves the other
        and every later read as they were.
        """

        def reply(state: MessagesState) -> dict[str, Any]:  # noqa: ARG001  # the node ignores the state
            return {"messages": [AIMessage("hi", id="a1", additional_kwargs={"k": [1]}, note={"tags": ["x"]})]}

        graph = StateGraph(MessagesState)
        graph.add_node("reply", reply)
        graph.add_edge(START, "reply")
        app = graph.compile(checkpointer=ContextSaver(stores.new()))
        app.invoke({"messages": [HumanMessage("hello", id="h")]}, config("t"))
        first, second = (app.get_state(config("t")).values["messages"][-1] for _ in range(2))
        first.additional_kwargs["k"].append(2)
        first.note["tags"].append("y")
        for message in (second, app.get_state(config("t")).values["messages"][-1]):
            assert ({"k": [1]}, {"tags": ["x"]}) == (message.additional_kwargs, message.note)

    def test_parallel_nodes(self, stores: Stores):
        """
        Two nodes of one step write at once (their pending writes race for the
        checkpoint's record): both writes are kept, and the step's state holds both replies.
        """
        saver = ContextSaver(stores.new())

        def left(state: MessagesState) -> dict[str, Any]:
            return {"messages": [AIMessage("left", id=f"l{len(state['messages'])}")]}

        def right(state: MessagesState) -> dict[str, Any]:
            return {"messages": [AIMessage("right", id=f"r{len(state['messages'])}")]}

        builder = StateGraph(MessagesState)
        builder.add_node("left", left)
        builder.add_node("right", right)
        builder.add_edge(START, "left")
        builder.add_edge(START, "right")
        graph = builder.compile(checkpointer=saver)
        for turn in range(3):
            graph.invoke({"messages": [HumanMessage(f"go {turn}", id=f"go{turn}")]}, config("p"))
        contents = [m.content for m in graph.get_state(config("p")).values["messages"]]
        assert ["go 0", "left", "right", "go 1", "left", "right", "go 2", "left", "right"] == contents
        before_step = [t for t in saver.list(config("p")) if t.metadata["step"] in {0, 3, 6}]
        assert 3 == len(before_step)
        for tuple_ in before_step:  # the writes both tasks put to the checkpoint before their step
            writers = {task for task, channel, _ in tuple_.pending_writes if channel == "messages"}
            assert 2 == len(writers)

    def test_async_graph(self, stores: Stores):
        """
        The async methods drive a graph run with ``ainvoke``.
        """
        saver = ContextSaver(stores.new())
        graph = chat_graph(saver, ["async hello"])

        async def run() -> Any:
            await graph.ainvoke({"messages": [HumanMessage("hi")]}, config("a"))
            return await graph.aget_state(config("a"))

        assert ["hi", "async hello"] == [m.content for m in asyncio.run(run()).values["messages"]]


# -- the same as LangGraph's own saver -----------------------------------------------------


def seen(app: Any, cfg: dict[str, Any]) -> list[Any]:
    """
    What a user sees of a thread: each state of its history, newest first,
    without the ids and times each saver makes (a parent is its place in the history).
    """
    history = list(app.get_state_history(cfg))
    ids = [state.config["configurable"]["checkpoint_id"] for state in history]
    return [
        (
            state.values,
            state.next,
            {key: sorted(value) if key == "parents" else value for key, value in state.metadata.items()},
            [(task.name, [i.value for i in task.interrupts], task.result) for task in state.tasks],
            None if state.parent_config is None else ids.index(state.parent_config["configurable"]["checkpoint_id"]),
        )
        for state in history
    ]


def same_as_langgraph(stores: Stores, build: Any, drive: Any) -> None:
    """
    ``drive(app)`` gives the same results, and leaves the same history, with
    ContextSaver as with LangGraph's ``InMemorySaver``.
    """
    found = []
    for saver in (InMemorySaver(), ContextSaver(stores.new())):
        app = build(saver)
        found.append((drive(app), seen(app, config("t"))))
    assert found[0] == found[1]


def reply(state: dict[str, Any]) -> dict[str, Any]:  # no state class: it serves every graph's state
    count = len(state["messages"])
    return {"messages": [AIMessage(f"reply {count}", id=f"r{count}")]}


class TestSameAsLangGraph:
    def test_a_subgraph_interrupted_edited_and_resumed(self, stores: Stores):
        """
        A subgraph's checkpoints (their own namespace) seen through
        ``get_state(subgraphs=True)``, edited with ``update_state`` and resumed.
        """

        def inner(state: MessagesState) -> dict[str, Any]:
            answer = interrupt("inner?")
            return {"messages": [AIMessage(f"inner: {answer}", id=f"in{len(state['messages'])}")]}

        def build(saver: Any) -> Any:
            sub = StateGraph(MessagesState)
            sub.add_node("inner", inner)
            sub.add_edge(START, "inner")
            graph = StateGraph(MessagesState)
            graph.add_node("sub", sub.compile())
            graph.add_node("reply", reply)
            graph.add_edge(START, "sub")
            graph.add_edge("sub", "reply")
            return graph.compile(checkpointer=saver)

        def drive(app: Any) -> Any:
            app.invoke({"messages": [HumanMessage("go", id="g")]}, config("t"))
            task = app.get_state(config("t"), subgraphs=True).tasks[0]
            inside = [task.state.values, task.state.next, [i.value for i in task.state.interrupts]]
            app.update_state(task.state.config, {"messages": [HumanMessage("edited inside", id="e")]})
            edited = app.get_state(config("t"), subgraphs=True).tasks[0].state.values
            return inside, edited, app.invoke(Command(resume="yes"), config("t"))

        same_as_langgraph(stores, build, drive)

    def test_fan_out_and_parallel_interrupts_resumed_together(self, stores: Stores):
        """
        ``Send`` tasks and a parallel node writing messages in one step, two
        of them interrupted, resumed at once by interrupt id.
        """

        def worker(state: dict[str, Any]) -> dict[str, Any]:
            answer = interrupt(f"about {state['topic']}?")
            return {"messages": [AIMessage(f"{state['topic']}: {answer}", id=f"w{state['topic']}")]}

        def build(saver: Any) -> Any:
            graph = StateGraph(MessagesState)
            graph.add_node("worker", worker)
            graph.add_node("reply", reply)
            graph.add_conditional_edges(START, lambda _: [Send("worker", {"topic": t}) for t in "ab"], ["worker"])
            graph.add_edge(START, "reply")
            return graph.compile(checkpointer=saver)

        def drive(app: Any) -> Any:
            first = app.invoke({"messages": [HumanMessage("go", id="g")]}, config("t"))
            answers = {i.id: f"yes to {i.value}" for i in app.get_state(config("t")).interrupts}
            return sorted(i.value for i in first["__interrupt__"]), app.invoke(Command(resume=answers), config("t"))

        same_as_langgraph(stores, build, drive)

    def test_edits_removals_and_a_fork(self, stores: Stores):
        """
        ``update_state`` replacing a message by id, removing one, as a node;
        then a run from an older checkpoint, which forks the thread.
        """

        def build(saver: Any) -> Any:
            return _one_node(MessagesState, reply).compile(checkpointer=saver)

        def drive(app: Any) -> Any:
            app.invoke({"messages": [HumanMessage("hi", id="h1")]}, config("t"))
            app.update_state(config("t"), {"messages": [AIMessage("replaced", id="r1")]}, as_node="reply")
            app.update_state(config("t"), {"messages": [RemoveMessage(id="h1")]})
            app.invoke({"messages": [HumanMessage("again", id="h2")]}, config("t"))
            older = list(app.get_state_history(config("t")))[-3].config
            return app.invoke({"messages": [HumanMessage("fork", id="h3")]}, older)

        same_as_langgraph(stores, build, drive)

    @pytest.mark.parametrize("durability", ["sync", "async", "exit"])
    def test_durability_and_stream_modes(self, stores: Stores, durability: str):
        """
        Every ``durability``, streamed as values, updates and message chunks
        (a fake chat model's reply, with tool calls and usage).
        """

        def build(saver: Any) -> Any:
            model = ToolModel(
                messages=iter(
                    [
                        AIMessage("Asking", id="a1", tool_calls=[{"name": "w", "args": {"city": "Paris"}, "id": "c1"}]),
                        AIMessage(
                            "Sunny in Paris",
                            id="a2",
                            usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
                        ),
                    ]
                )
            )

            def chat(state: MessagesState) -> dict[str, Any]:
                return {"messages": [model.invoke(state["messages"])]}

            return _one_node(MessagesState, chat).compile(checkpointer=saver)

        def drive(app: Any) -> Any:
            chunks = []
            for text in ("weather?", "and now?"):
                stream = app.stream(
                    {"messages": [HumanMessage(text, id=text)]},
                    config("t"),
                    stream_mode=["values", "updates", "messages"],
                    durability=durability,
                )
                for mode, payload in stream:
                    chunks.append((mode, payload[0] if mode == "messages" else payload))
            return chunks

        same_as_langgraph(stores, build, drive)

    def test_a_delta_channel(self, stores: Stores):
        """
        A ``DeltaChannel`` rebuilt from the writes of the checkpoints before
        (LangGraph's ``get_delta_channel_history``), across a fork.
        """
        channel = DeltaChannel(_messages_delta_reducer, snapshot_frequency=2)
        state = TypedDict("State", {"messages": Annotated[list[AnyMessage], channel]})  # noqa: UP013  # see above

        def build(saver: Any) -> Any:
            return _one_node(state, reply).compile(checkpointer=saver)

        def drive(app: Any) -> Any:
            for turn in range(3):
                app.invoke({"messages": [HumanMessage(f"turn {turn}", id=f"t{turn}")]}, config("t"))
            older = list(app.get_state_history(config("t")))[3].config
            return app.invoke({"messages": [HumanMessage("fork", id="f")]}, older)

        same_as_langgraph(stores, build, drive)


# -- retention ---------------------------------------------------------------------------


class TestRetention:
    def test_prune_frees_what_only_pruned_checkpoints_used(self, persistent: Stores):
        """
        ``prune(keep_latest)`` removes the older checkpoints and the messages
        only they held; a message the kept checkpoint holds stays.
        """
        store = persistent.new()
        saver = ContextSaver(store)
        raw = Raw(persistent.kind, store)
        parent = None
        for turn in range(5):  # a run whose transcript is trimmed each turn: old messages leave it
            messages = [HumanMessage("system rules", id="rules"), HumanMessage(f"turn {turn}", id=f"t{turn}")]
            parent = put_checkpoint(saver, "p", messages, parent)["configurable"]["checkpoint_id"]
        put_checkpoint(saver, "other", [HumanMessage("system rules", id="rules")])
        assert 6 == raw.message_count()
        saver.prune(["p"], strategy="keep_latest")
        assert 2 == raw.message_count()  # "rules" (shared with the kept and the other thread) and "turn 4"
        assert [parent] == [t.config["configurable"]["checkpoint_id"] for t in saver.list(config("p"))]
        assert 1 == len(list(saver.list(config("other"))))
        saver.prune(["p", "other"], strategy="delete")
        assert 0 == raw.message_count()

    @pytest.mark.parametrize(("frequency", "prunes"), [(100, False), (1, True)])
    def test_prune_keeps_what_a_delta_channel_is_rebuilt_from(self, stores: Stores, frequency: int, prunes: bool):
        """
        A ``DeltaChannel`` stores its value only every *frequency* updates:
        LangGraph rebuilds it from the checkpoints before. ``keep_latest``
        refuses a thread whose newest checkpoint needs them, as LangGraph's
        ``PostgresSaver`` does, and leaves it whole; once the newest holds
        the channel's value, it prunes.
        """
        channel = DeltaChannel(_messages_delta_reducer, snapshot_frequency=frequency)
        # a class body's annotations are strings here (``from __future__ import annotations``): no local names
        state = TypedDict("State", {"messages": Annotated[list[AnyMessage], channel]})  # noqa: UP013

        saver = ContextSaver(stores.new())
        graph = StateGraph(state)
        graph.add_node("reply", reply)
        graph.add_edge(START, "reply")
        app = graph.compile(checkpointer=saver)
        for turn in range(2):
            app.invoke({"messages": [HumanMessage(f"turn {turn}", id=f"t{turn}")]}, config("d"))
        expected = ["turn 0", "reply 1", "turn 1", "reply 3"]
        refused = pytest.raises(NotImplementedError, match="before it: d; nothing was pruned")
        with contextlib.nullcontext() if prunes else refused:
            saver.prune(["d"], strategy="keep_latest")
        assert (1 if prunes else 6) == len(list(saver.list(config("d"))))
        assert expected == [m.content for m in app.get_state(config("d")).values["messages"]]

    def test_prune_drops_the_namespaces_of_subgraph_calls_it_prunes(self, stores: Stores):
        """
        Each call of a subgraph has a namespace of its own: ``keep_latest``
        drops it whole with the checkpoint the call started from, as
        LangGraph's ``PostgresSaver`` does, and keeps the newest of the call
        still under way (interrupted here), which then resumes.
        """

        def inner(state: MessagesState) -> dict[str, Any]:
            count = len(state["messages"])
            answer = interrupt("inner?") if count > 4 else "auto"
            return {"messages": [AIMessage(f"inner: {answer}", id=f"in{count}")]}

        sub = StateGraph(MessagesState)
        sub.add_node("inner", inner)
        sub.add_edge(START, "inner")
        graph = StateGraph(MessagesState)
        graph.add_node("sub", sub.compile())
        graph.add_edge(START, "sub")
        saver = ContextSaver(stores.new())
        app = graph.compile(checkpointer=saver)
        for turn in range(3):
            app.invoke({"messages": [HumanMessage(f"turn {turn}", id=f"t{turn}")]}, config("s"))
        saver.prune(["s"], strategy="keep_latest")
        kept = [
            (t.config["configurable"]["checkpoint_ns"].split(":")[0], t.metadata["step"])
            for t in saver.list(config("s"))
        ]
        assert [("", 6), ("sub", 0)] == sorted(kept)
        out = app.invoke(Command(resume="yes"), config("s"))
        assert ["turn 0", "inner: auto", "turn 1", "inner: auto", "turn 2", "inner: yes"] == [
            m.content for m in out["messages"]
        ]

    def test_ids_given_as_one_str_are_refused(self, stores: Stores):
        """
        ``prune`` and ``delete_for_runs`` take lists of ids, as LangGraph's
        savers do: one str is refused with the fix, not read as its characters.
        """
        saver = ContextSaver(stores.new())
        for thread in ("a", "b", "ab"):
            put_checkpoint(saver, thread, [HumanMessage(thread, id=thread)])
        with pytest.raises(TypeError, match=r"got the str 'ab'; pass \['ab'\]"):
            saver.prune("ab", strategy="delete")
        with pytest.raises(TypeError, match=r"got the str 'ab'; pass \['ab'\]"):
            saver.delete_for_runs("ab")
        assert {"a", "b", "ab"} == {t.config["configurable"]["thread_id"] for t in saver.list(None)}

    def test_delete_threads_before_a_date(self, stores: Stores):
        """
        ``delete_threads_before(when)`` drops the threads whose newest
        checkpoint is older than *when*, and keeps the others whole.
        """
        saver = ContextSaver(stores.new())
        old, new = datetime(2025, 1, 1, tzinfo=UTC), datetime.now(UTC)
        for thread, when in (("old", old), ("new", new)):
            checkpoint = empty_checkpoint()
            checkpoint["ts"] = when.isoformat()
            checkpoint["channel_values"] = {"messages": [HumanMessage(thread, id=thread)]}
            saver.put(config(thread, checkpoint_ns=""), checkpoint, {"source": "input", "step": -1}, {})
        assert ["old"] == saver.delete_threads_before(new - timedelta(days=1))
        assert saver.get_tuple(config("old")) is None
        assert saver.get_tuple(config("new")) is not None

    def test_delete_threads_before_needs_an_aware_datetime(self):
        """
        A naive datetime is refused with the fix.
        """
        with pytest.raises(TypeError, match="timezone-aware"):
            ContextSaver(InMemoryStore()).delete_threads_before(datetime(2026, 1, 1))  # noqa: DTZ001  # the bad input


# -- bad input ---------------------------------------------------------------------------


class TestBadInput:
    def test_foreign_checkpoint_where_one_is_expected(self, stores: Stores):
        """
        A store thread holding a checkpoint ContextSaver did not write raises
        CheckpointError naming the LangGraph thread; nothing is written.
        """
        store = stores.new()
        foreign = Checkpoint.capture(WorkingContext().append(Message("user", "not langgraph")))
        store.save(foreign, thread=_log_name("t", ""))
        saver = ContextSaver(store)
        count = len(store.list())
        with pytest.raises(CheckpointError, match=r"thread 't'.*not a LangGraph checkpoint"):
            saver.get_tuple(config("t"))
        with pytest.raises(CheckpointError, match="thread 't'"):
            put_checkpoint(saver, "t", [], parent="nope")
        assert count == len(store.list())

    def test_foreign_record_under_a_checkpoint_key(self, stores: Stores):
        """
        A checkpoint whose record does not hold what ContextSaver writes raises
        CheckpointError naming the thread and the id.
        """
        store = stores.new()
        saver = ContextSaver(store)
        saved = put_checkpoint(saver, "t", [HumanMessage("hi", id="1")])
        checkpoint_id = saved["configurable"]["checkpoint_id"]
        key = _checkpoint_key("t", "", checkpoint_id)
        kept = store.load(key)
        store.save(
            Checkpoint(
                id=key,
                snapshot=WorkingContext().freeze(),
                created_at=kept.created_at,
                parent=kept.parent,
                metadata=kept.metadata,
            )
        )
        with pytest.raises(CheckpointError, match=f"checkpoint '{checkpoint_id}' of LangGraph thread 't'"):
            saver.get_tuple(saved)

    def test_a_write_the_serializer_cannot_read(self, stores: Stores):
        """
        A pending write stored under a type the serializer does not know
        raises CheckpointError naming the thread and the checkpoint id, from
        every read, not the serializer's own error.
        """
        store = stores.new()
        saver = ContextSaver(store)
        saved = put_checkpoint(saver, "t", [HumanMessage("hi", id="1")])
        checkpoint_id = saved["configurable"]["checkpoint_id"]
        name = _writes_name("t", "", checkpoint_id)
        ctx = WorkingContext()
        ctx.note("langgraph", {"task_id": "task", "task_path": "", "writes": [[0, "x", "no such type", "AAAA"]]})
        store.save(Checkpoint.capture(ctx), thread=name)
        count = len(store.list())
        fresh = ContextSaver(stores.again(store))
        match = f"checkpoint '{checkpoint_id}' of LangGraph thread 't'"
        with pytest.raises(CheckpointError, match=match):
            fresh.get_tuple(saved)
        with pytest.raises(CheckpointError, match=match):
            fresh.get_tuple(config("t"))
        with pytest.raises(CheckpointError, match=match):
            list(fresh.list(config("t")))
        assert count == len(store.list())

    def test_copy_thread_refuses_a_foreign_record_and_copies_nothing(self, stores: Stores):
        """
        A source thread whose writes hold a checkpoint ContextSaver did not
        write: copy_thread raises CheckpointError naming the thread and the
        checkpoint id, and copies nothing, not even the checkpoints before it.
        """
        store = stores.new()
        saver = ContextSaver(store)
        first = put_checkpoint(saver, "src", [HumanMessage("a", id="1")])
        saver.put_writes(first, [("x", 1)], "task")
        second = put_checkpoint(saver, "src", [HumanMessage("a", id="1")], first["configurable"]["checkpoint_id"])
        checkpoint_id = second["configurable"]["checkpoint_id"]
        foreign = Checkpoint.capture(WorkingContext().append(Message("user", "not langgraph")))
        store.save(foreign, thread=_writes_name("src", "", checkpoint_id))
        count = len(store.list())
        with pytest.raises(CheckpointError, match=f"checkpoint '{checkpoint_id}' of LangGraph thread 'src'"):
            ContextSaver(stores.again(store)).copy_thread("src", "dst")
        assert count == len(store.list())
        assert [] == list(saver.list(config("dst")))

    def test_damaged_transcript(self, persistent: Stores):
        """
        A stored message rewritten behind the store's back fails its digest on
        load: CheckpointError naming the thread and the checkpoint id.
        """
        store = persistent.new()
        saver = ContextSaver(store)
        saved = put_checkpoint(saver, "t", [HumanMessage("hi", id="1"), AIMessage("hello", id="2")])
        digest = Message("assistant", "hello", id="2").digest()
        Raw(persistent.kind, store).rewrite_message(digest, '{"role":"assistant","content":"forged","id":"2"}')
        checkpoint_id = saved["configurable"]["checkpoint_id"]
        with pytest.raises(CheckpointError, match=f"checkpoint '{checkpoint_id}' of LangGraph thread 't'"):
            ContextSaver(persistent.again(store)).get_tuple(saved)

    def test_missing_checkpoint_id(self, stores: Stores):
        """
        Reading a checkpoint id the thread does not hold gives None (LangGraph's
        contract); continuing from one raises CheckpointError naming the thread
        and the id, and writes nothing.
        """
        store = stores.new()
        saver = ContextSaver(store)
        put_checkpoint(saver, "t", [HumanMessage("hi", id="1")])
        assert saver.get_tuple(config("t", checkpoint_ns="", checkpoint_id="missing")) is None
        count = len(store.list())
        with pytest.raises(
            CheckpointError, match=r"parent checkpoint 'missing' is not in the thread.*thread 't'|thread 't'.*'missing'"
        ):
            put_checkpoint(saver, "t", [HumanMessage("hi", id="1")], parent="missing")
        assert count == len(store.list())

    def test_not_a_store(self):
        """
        ContextSaver takes a workingctx store, and says so.
        """
        with pytest.raises(TypeError, match="workingctx checkpoint store"):
            ContextSaver({})  # type: ignore[arg-type]

    def test_unknown_prune_strategy(self):
        """
        An unknown prune strategy is refused with the two known ones.
        """
        with pytest.raises(ValueError, match="'keep_latest' or 'delete'"):
            ContextSaver(InMemoryStore()).prune(["t"], strategy="oldest")


# -- concurrency ---------------------------------------------------------------------------


class TestConcurrentWriters:
    @pytest.mark.parametrize("kind", kind_params(("postgres", "redis")))
    def test_writers_on_one_thread_lose_nothing(self, kind: str, scratch_dir: Path):
        """
        Four savers, each on its own connection, put checkpoints to one thread
        at once: every checkpoint is listed, none lost.
        """
        made = Stores(kind, scratch_dir)
        try:
            store = made.new()
            savers = [ContextSaver(made.again(store)) for _ in range(4)]
            errors: list[BaseException] = []

            def write(number: int, saver: ContextSaver) -> None:
                try:
                    for step in range(10):
                        put_checkpoint(saver, "shared", [HumanMessage(f"{number}-{step}", id=f"{number}-{step}")])
                except BaseException as exc:  # reported by the test
                    errors.append(exc)

            _on_threads(write, savers)
            assert [] == errors
            assert 40 == len(list(ContextSaver(made.again(store)).list(config("shared"))))
        finally:
            made.close()

    @pytest.mark.parametrize("kind", kind_params(("postgres", "redis")))
    def test_writers_of_one_checkpoint_lose_nothing(self, kind: str, scratch_dir: Path):
        """
        Four savers, each on its own connection, put the writes of their tasks
        to one checkpoint at once (the saver that put it continues its
        transcript, the others cannot): every write is kept.
        """
        made = Stores(kind, scratch_dir)
        try:
            store = made.new()
            savers = [ContextSaver(made.again(store)) for _ in range(4)]
            saved = put_checkpoint(savers[0], "shared", [HumanMessage("go", id="go")])
            errors: list[BaseException] = []

            def write(number: int, saver: ContextSaver) -> None:
                try:
                    for step in range(5):
                        reply = AIMessage(f"{number}-{step}", id=f"{number}-{step}")
                        saver.put_writes(saved, [("messages", [reply]), ("n", step)], f"task-{number}-{step}")
                except BaseException as exc:  # reported by the test
                    errors.append(exc)

            _on_threads(write, savers)
            assert [] == errors
            writes = ContextSaver(made.again(store)).get_tuple(saved).pending_writes
            assert {f"task-{n}-{step}" for n in range(4) for step in range(5)} == {task for task, _, _ in writes}
            assert 40 == len(writes)
        finally:
            made.close()

    @pytest.mark.usefixtures("fast_switching")
    @pytest.mark.parametrize("kind", kind_params(PERSISTENT))
    def test_tasks_writing_through_one_saver_take_turns(
        self, kind: str, scratch_dir: Path, monkeypatch: pytest.MonkeyPatch
    ):
        """
        Sixteen tasks of one step put their writes to one checkpoint at once
        through one saver (LangGraph runs a step's tasks in parallel): they
        take turns, so none races another for the head of the checkpoint's
        writes and each saves at its first try. (Racing, each round had one
        winner: the last of many tasks ran out of tries, and its writes were lost.)
        """
        monkeypatch.setattr(langgraph_module, "_RETRIES", 1)
        made = Stores(kind, scratch_dir)
        try:
            store = made.new()
            saver = ContextSaver(store)
            saved = put_checkpoint(saver, "t", [HumanMessage("go", id="go")])
            start = threading.Barrier(16)
            errors: list[BaseException] = []

            def write(number: int, saver: ContextSaver) -> None:
                start.wait()
                try:
                    saver.put_writes(saved, [("n", number)], f"task-{number}")
                except BaseException as exc:  # reported by the test
                    errors.append(exc)

            _on_threads(write, [saver] * 16)
            assert [] == errors
            writes = ContextSaver(made.again(store)).get_tuple(saved).pending_writes
            assert {(f"task-{n}", n) for n in range(16)} == {(task, value) for task, _, value in writes}
        finally:
            made.close()

    @pytest.mark.parametrize("kind", kind_params())
    def test_writes_of_a_checkpoint_another_saver_wrote_to_are_continued(self, kind: str, scratch_dir: Path):
        """
        A saver that never read a checkpoint's writes puts more of them (as
        if they were the first): the record another saver stored stays, and
        the new one continues it.
        """
        made = Stores(kind, scratch_dir)
        try:
            store = made.new()
            first, second = ContextSaver(store), ContextSaver(made.again(store))
            saved = put_checkpoint(first, "t", [HumanMessage("go", id="go")])
            first.put_writes(saved, [("messages", [AIMessage("one", id="one")])], "task-1")
            second.put_writes(saved, [("n", 2)], "task-2")
            first.put_writes(saved, [("n", 3)], "task-3")
            writes = ContextSaver(made.again(store)).get_tuple(saved).pending_writes
            assert ["task-1", "task-2", "task-3"] == [task for task, _, _ in writes]
            assert [AIMessage("one", id="one")] == writes[0][2]
            assert [2, 3] == [value for _, _, value in writes[1:]]
        finally:
            made.close()


# -- packaging ---------------------------------------------------------------------------


def test_import_workingctx_does_not_import_langgraph():
    """
    ``import workingctx`` (and its integrations package) never imports LangGraph.
    """
    code = "import sys, workingctx, workingctx.integrations; print('langgraph' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert "False" == out.stdout.strip()


def _on_threads(write: Any, savers: list[ContextSaver]) -> None:
    """
    ``write(number, saver)`` for each saver, all on threads of their own at once; back when all are done.
    """
    threads = [threading.Thread(target=write, args=(n, s)) for n, s in enumerate(savers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
