"""
The LangChain adapter: messages round-trip equal, usage and ids kept,
LangChain's own fields never sent, and cross-format writes.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, ChatMessage, HumanMessage, SystemMessage, ToolMessage
from openai.types.chat import ChatCompletionMessageParam
from pydantic import TypeAdapter

from tests.wire_strategies import anthropic_bodies, chat_messages, json_args, names, texts
from workingctx import Message, ToolCall
from workingctx.adapters import ProviderError, anthropic, langchain, openai_chat
from workingctx.validity import STRUCTURAL_RULES


@st.composite
def langchain_messages(draw: st.DrawFn) -> list:
    """
    LangChain transcripts: ids, parallel tool calls, usage and response metadata, error results.
    """
    out: list = []
    if draw(st.booleans()):
        out.append(SystemMessage(draw(texts)))
    counter = 0
    for turn in range(draw(st.integers(1, 3))):
        content = draw(
            texts | st.lists(texts | st.builds(lambda t: {"type": "text", "text": t}, texts), min_size=1, max_size=2)
        )
        out.append(HumanMessage(content, id=draw(st.none() | st.just(f"h{turn}"))))
        for _ in range(draw(st.integers(0, 2))):
            ids = [f"call_{counter + i}" for i in range(draw(st.integers(1, 3)))]
            counter += len(ids)
            calls = [{"name": draw(names), "args": draw(json_args), "id": i} for i in ids]
            usage = draw(st.none() | st.just({"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}))
            out.append(
                AIMessage(
                    draw(texts),
                    tool_calls=calls,
                    usage_metadata=usage,
                    response_metadata=draw(
                        st.just({}) | st.just({"model_name": "gpt-5", "finish_reason": "tool_calls"})
                    ),
                )
            )
            out.extend(
                ToolMessage(draw(texts), tool_call_id=i, status=draw(st.sampled_from(["success", "error"])))
                for i in ids
            )
        out.append(AIMessage(draw(texts), id=f"a{turn}"))
    return out


@given(langchain_messages())
def test_round_trip_is_equal(messages):
    """
    write(read(msgs)) == msgs for LangChain's own message objects.
    """
    assert langchain.write(langchain.read(messages)) == messages


@given(chat_messages())
def test_openai_dicts_through_langchain_match_langchain(messages):
    """
    A Chat Completions transcript written as LangChain messages validates as OpenAI messages again.
    """
    written = langchain.write(openai_chat.read(messages))
    assert all(type(m).__name__ in {"SystemMessage", "HumanMessage", "AIMessage", "ToolMessage"} for m in written)
    back = openai_chat.write(langchain.read(written))
    TypeAdapter(list[ChatCompletionMessageParam]).validate_python(back["messages"])


@given(anthropic_bodies())
def test_anthropic_transcripts_round_trip_through_langchain(body):
    """
    An Anthropic transcript survives LangChain: thinking blocks and signatures come back for Anthropic.
    """
    ctx = anthropic.read(body)
    again = anthropic.write(langchain.read(langchain.write(ctx)))
    assert anthropic.check(again) == ()
    thinking = [
        b
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] in {"thinking", "redacted_thinking"}
    ]
    written = [
        b
        for m in again["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] in {"thinking", "redacted_thinking"}
    ]
    assert written == thinking


def test_request_key_ignores_langchain_metadata():
    """
    Message ids and response metadata never change the key; content does.
    """
    a = [HumanMessage("hi", id="1"), AIMessage("yo", response_metadata={"model_name": "x"})]
    b = [HumanMessage("hi", id="2"), AIMessage("yo")]
    assert langchain.request_key(langchain.read(a)) == langchain.request_key(langchain.read(b))
    assert langchain.request_key(langchain.read(a)) != langchain.request_key(langchain.read([HumanMessage("hi!")]))


def test_dicts_are_converted_and_unknown_types_refused():
    """
    Plain dicts go through convert_to_messages; a ChatMessage is refused with a hint.
    """
    ctx = langchain.read([{"role": "user", "content": "hi"}])
    assert ctx.messages == (Message.user("hi"),)
    with pytest.raises(ValueError, match="system, human, ai and tool"):
        langchain.read([ChatMessage("x", role="critic")])
    with pytest.raises(TypeError, match="list of LangChain messages"):
        langchain.read("hello")


def test_write_checks_and_repairs():
    """
    An unanswered call raises; repair closes it with an error ToolMessage.
    """
    messages = [Message.user("q"), Message.assistant(tool_calls=[ToolCall("c1", "f")]), Message.user("next")]
    with pytest.raises(ProviderError):
        langchain.write(messages)
    repaired = langchain.write(messages, repair=True)
    assert isinstance(repaired[2], ToolMessage)
    assert repaired[2].tool_call_id == "c1"


def test_read_response():
    """
    An AIMessage reply gives usage (cache reads apart) and the model name.
    """
    reply = AIMessage(
        "done",
        response_metadata={"model_name": "claude-sonnet-4-6"},
        usage_metadata={
            "input_tokens": 120,
            "output_tokens": 5,
            "total_tokens": 125,
            "input_token_details": {"cache_read": 100},
        },
    )
    message = langchain.read_response(reply)
    assert message.usage is not None
    assert (message.usage.input_tokens, message.usage.cache_read_tokens) == (20, 100)
    assert message.metadata["model"] == "claude-sonnet-4-6"
    with pytest.raises(ValueError, match="takes an AIMessage"):
        langchain.read_response(HumanMessage("x"))


class TestState:
    """
    ``read(..., state=True)`` and ``write(..., state=True)``: a runtime's state, never refused.
    """

    @given(langchain_messages())
    def test_round_trip(self, messages):
        """
        Any transcript, with a trailing call whose result has not run yet, comes back equal.
        """
        pending = AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": "x"}, "id": "pending_1"}], id="last")
        state = [*messages, pending]
        assert state == langchain.write(langchain.read(state, state=True), state=True)

    def test_other_kinds_kept_whole(self):
        """
        Streaming chunks, chat, function and remove messages are read, and written back as their own class.
        """
        from langchain_core.messages import AIMessageChunk, FunctionMessage, RemoveMessage  # noqa: PLC0415

        state = [
            HumanMessage("hi", id="h"),
            AIMessageChunk("Let", id="c", tool_call_chunks=[{"name": "f", "args": '{"a"', "id": "x", "index": 0}]),
            ChatMessage("note", role="critic", id="n"),
            FunctionMessage("42", name="f", id="fn"),
            RemoveMessage(id="h"),
        ]
        back = langchain.write(langchain.read(state, state=True), state=True)
        assert state == back
        assert [type(m) for m in state] == [type(m) for m in back]

    def test_request_mode_still_checks(self):
        """
        Without ``state``, a chunk is refused and a trailing unanswered call is an error, as before.
        """
        from langchain_core.messages import AIMessageChunk  # noqa: PLC0415

        with pytest.raises(ValueError, match="AIMessageChunk"):
            langchain.read([AIMessageChunk("x")])
        pending = AIMessage("", tool_calls=[{"name": "lookup", "args": {}, "id": "pending_1"}])
        with pytest.raises(ProviderError):
            langchain.write(langchain.read([HumanMessage("q"), pending]))


class TestInvalidToolCalls:
    """
    LangChain's invalid tool calls (arguments that did not parse) are calls: ChatAnthropic sends each
    as a ``tool_use`` block and ChatOpenAI as a tool call, so each needs its result as any call does.
    """

    @given(
        st.lists(st.text(max_size=12) | st.none(), min_size=1, max_size=3),
        st.lists(json_args, max_size=2),
        st.none() | texts,
        st.booleans(),
    )
    def test_they_round_trip_and_pair_with_their_results(self, args, good, error, answered):
        """
        An AIMessage with valid and invalid calls comes back equal, reads as every one of its calls, and is
        valid exactly when each call, invalid ones included, has its result.
        """
        valid = [{"name": "lookup", "args": a, "id": f"ok_{i}", "type": "tool_call"} for i, a in enumerate(good)]
        invalid = [
            {"name": "lookup", "args": a, "id": f"bad_{i}", "error": error, "type": "invalid_tool_call"}
            for i, a in enumerate(args)
        ]
        ai = AIMessage("", tool_calls=valid, invalid_tool_calls=invalid, id="a1")
        ids = [c["id"] for c in [*valid, *invalid]]
        state = [HumanMessage("q", id="h1"), ai]
        if answered:
            state += [ToolMessage("Error: bad arguments", tool_call_id=i, status="error") for i in ids]
        state.append(HumanMessage("again", id="h2"))
        ctx = langchain.read(state)
        assert ids == [c.id for m in ctx.messages for c in m.tool_calls]
        assert state == langchain.write(ctx, state=True)
        rules = {p.rule for p in langchain.check(state) if p.rule in STRUCTURAL_RULES}
        assert (set() if answered else {"dangling-call"}) == rules

    def test_one_without_an_id_stays_langchain_data(self):
        """
        An invalid call with no id, which no chat model sends, is kept as LangChain's field, as before.
        """
        ai = AIMessage("", invalid_tool_calls=[{"name": None, "args": "{", "id": None, "error": None}])
        (message,) = langchain.read([ai]).messages
        assert () == message.tool_calls
        assert [ai] == langchain.write(langchain.read([ai]), state=True)


@given(langchain_messages())
def test_messages_as_their_dumps_read_the_same(messages):
    """
    LangChain messages given as their model_dump() dicts read as the messages do.
    """
    assert langchain.read(messages).assembled() == langchain.read([m.model_dump() for m in messages]).assembled()


def test_an_error_names_the_message_it_is_in():
    """
    A call's arguments past the nesting limit, in the second of four messages with ids, are
    reported at that message's call, never at a field of another message.
    """
    args: dict = {"key": "k"}
    for _ in range(150):
        args = {"more": args}
    messages = [
        HumanMessage("q1", id="h1"),
        AIMessage("", tool_calls=[{"name": "lookup", "args": args, "id": "c1"}], id="a1"),
        ToolMessage("r", tool_call_id="c1", id="t1"),
        HumanMessage("q2", id="h2"),
    ]
    with pytest.raises(ValueError, match="nested more than 100 levels") as info:
        langchain.read(messages)
    assert str(info.value).startswith("messages[1].tool_calls[0].args.more")
