"""
The LangChain adapter: messages round-trip equal, usage and ids kept,
LangChain's own fields never sent, and cross-format writes.
"""

from __future__ import annotations

import functools
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, ChatMessage, HumanMessage, SystemMessage, ToolMessage
from openai.types.chat import ChatCompletionMessageParam
from pydantic import TypeAdapter

from tests.wire_strategies import anthropic_bodies, chat_messages, json_args, names, texts
from workingctx import Message, ToolCall, WorkingContext
from workingctx.adapters import ProviderError, anthropic, langchain, openai_chat, openai_responses
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
        Without ``state``, a function message is refused and a trailing unanswered call is an error, as before.
        """
        from langchain_core.messages import FunctionMessage  # noqa: PLC0415

        with pytest.raises(ValueError, match=r"'function' message.*state=True"):
            langchain.read([FunctionMessage("42", name="f")])
        pending = AIMessage("", tool_calls=[{"name": "lookup", "args": {}, "id": "pending_1"}])
        with pytest.raises(ProviderError):
            langchain.write(langchain.read([HumanMessage("q"), pending]))

    @given(split=st.integers(0, 14), cut=st.integers(1, 5))
    def test_a_streamed_reply_is_the_message_it_adds_up_to(self, split, cut):
        """
        A request may hold a reply as streaming gave it (``AIMessageChunk``s
        summed): it reads as the AI message it adds up to, its tool calls
        parsed from their chunks and answered by the tool messages after it,
        and is written back as that message, for LangChain and every provider.
        """
        from langchain_core.messages import AIMessageChunk  # noqa: PLC0415

        text, args = "Let me look", '{"city": "Paris"}'
        pieces = [
            AIMessageChunk(text[:split], id="r"),
            AIMessageChunk(text[split:]),
            *(
                AIMessageChunk(
                    "",
                    tool_call_chunks=[
                        {"name": "f" if n == 0 else None, "args": part, "id": "c1" if n == 0 else None, "index": 0}
                    ],
                )
                for n, part in enumerate(args[i : i + cut] for i in range(0, len(args), cut))
            ),
        ]
        summed = pieces[0]
        for piece in pieces[1:]:
            summed = summed + piece
        request = [HumanMessage("weather?", id="h"), summed, ToolMessage("18C", tool_call_id="c1", id="t")]
        ctx = langchain.read(request)
        assert "assistant" == ctx.messages[1].role
        assert [("c1", "f", {"city": "Paris"})] == [
            (c.id, c.name, dict(c.arguments)) for c in ctx.messages[1].tool_calls
        ]
        assert () == langchain.check(ctx)
        back = langchain.write(ctx)
        assert AIMessage(text, id="r", tool_calls=[{"name": "f", "args": {"city": "Paris"}, "id": "c1"}]) == back[1]
        assert AIMessage is type(back[1])
        assert "18C" == openai_chat.write(ctx)["messages"][2]["content"]
        assert "tool_result" == anthropic.write(ctx)["messages"][2]["content"][0]["type"]


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

    @given(st.lists(st.tuples(st.booleans(), st.booleans(), st.text(max_size=8)), min_size=1, max_size=4))
    def test_those_a_chat_model_sends_are_calls_beside_those_it_cannot(self, shapes):
        """
        Beside invalid calls without an id or a name (which ChatAnthropic leaves out), each with
        both is a call all the same (ChatAnthropic sends it), pairing with its result; the message
        comes back equal, and a request that no longer makes one of those calls never writes it.
        """
        invalid = [
            {"name": "lookup" if named else None, "args": a, "id": f"bad_{i}" if has_id else None, "error": None}
            for i, (has_id, named, a) in enumerate(shapes)
        ]
        sent = [c["id"] for c in invalid if c["id"] and c["name"]]
        ai = AIMessage("", invalid_tool_calls=invalid, id="a1")
        results = [ToolMessage("Error: bad arguments", tool_call_id=i, status="error") for i in sent]
        state = [HumanMessage("q", id="h1"), ai, *results, HumanMessage("again", id="h2")]
        ctx = langchain.read(state)
        assert sent == [c.id for m in ctx.messages for c in m.tool_calls]
        assert state == langchain.write(ctx, state=True)
        assert set() == {p.rule for p in langchain.check(state) if p.rule in STRUCTURAL_RULES}
        (read,) = [m for m in ctx.messages if m.role == "assistant"]
        for dropped in sent:
            fewer = attrs.evolve(read, tool_calls=tuple(c for c in read.tool_calls if c.id != dropped))
            (written,) = langchain.write(WorkingContext(messages=[fewer]), state=True)
            assert [c for c in invalid if c["id"] != dropped] == [
                {k: c[k] for k in ("name", "args", "id", "error")} for c in written.invalid_tool_calls
            ]

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


words = st.from_regex(r"[a-z]{1,8}( [a-z]{1,8}){0,3}", fullmatch=True)


@functools.cache
def _chat_anthropic() -> Any:
    from langchain_anthropic import ChatAnthropic  # noqa: PLC0415

    return ChatAnthropic(model="claude-sonnet-4-6", api_key="offline")  # type: ignore[call-arg]


def _as_chatanthropic_sends(messages: list) -> tuple[Any, list, list]:
    """
    The context *messages* read as, after asserting that it round-trips equal and breaks
    no rule of LangChain or Anthropic; with the Anthropic messages workingctx writes
    (the SDK's types accept them) and those ChatAnthropic itself sends.
    """
    from anthropic.types import MessageParam  # noqa: PLC0415

    ctx = langchain.read(messages)
    assert messages == langchain.write(ctx, state=True)
    assert () == langchain.check(ctx)
    assert () == anthropic.check(ctx)
    ours = anthropic.write(ctx)["messages"]
    TypeAdapter(list[MessageParam]).validate_python(ours)
    sent = _chat_anthropic()._get_request_payload(messages)["messages"]  # noqa: SLF001  # the body ChatAnthropic sends
    return ctx, ours, sent


def _tool_results(message: dict) -> list:
    content = message["content"]
    return [] if isinstance(content, str) else [b for b in content if b.get("type") == "tool_result"]


class TestAnthropicBlocksInHumanMessages:
    """
    ChatAnthropic sends a ``tool_result`` or ``tool_use`` dict in a HumanMessage's content
    to Anthropic as it is: a result there answers its call, and a call there is refused.
    """

    @staticmethod
    @st.composite
    def transcripts(draw: st.DrawFn) -> list:
        """
        Turns whose tool results ride in a HumanMessage as ``tool_result`` dicts (text or
        blocks, errors, a ``cache_control`` on at most four, as Anthropic takes), as ChatAnthropic's users write them.
        """
        out: list = [HumanMessage(draw(words), id="h0")]
        marked = 0
        for turn in range(draw(st.integers(1, 3))):
            ids = [f"toolu_{turn}_{i}" for i in range(draw(st.integers(1, 3)))]
            calls = [{"name": draw(names), "args": draw(json_args), "id": i} for i in ids]
            out.append(AIMessage(draw(st.just("") | words), tool_calls=calls, id=f"a{turn}"))
            results: list = []
            for call_id in ids:
                result: dict = {"type": "tool_result", "tool_use_id": call_id}
                result["content"] = draw(
                    words | st.lists(st.builds(lambda t: {"type": "text", "text": t}, words), max_size=2)
                )
                if draw(st.booleans()):
                    result["is_error"] = draw(st.booleans())
                if marked < 4 and draw(st.booleans()):
                    result["cache_control"] = {"type": "ephemeral"}
                    marked += 1
                results.append(result)
            if draw(st.booleans()):
                results.append({"type": "text", "text": draw(words)})
            out.append(HumanMessage(results, id=f"h{turn + 1}"))
        out.append(AIMessage(draw(words), id="end"))
        return out

    @given(transcripts())
    def test_results_answer_their_calls_and_come_back_as_they_came(self, messages):
        """
        Such a transcript round-trips equal, breaks no rule of LangChain or Anthropic, and
        is written for Anthropic as ChatAnthropic itself sends it (the SDK's types accept it).
        """
        _, ours, sent = _as_chatanthropic_sends(messages)
        results = [_tool_results(m) for m in ours if m["role"] == "user"]
        theirs = [_tool_results(m) for m in sent if m["role"] == "user"]
        assert theirs == results

    def test_a_changed_result_is_written_as_what_it_now_is(self):
        """
        A result whose call id was changed after reading (as merging re-keys one) is written with
        the new id, never as the dict it was read from.
        """
        import attrs  # noqa: PLC0415

        messages = [
            HumanMessage("q"),
            AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "t1"}]),
            HumanMessage([{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]),
        ]
        ctx = langchain.read(messages)
        result = ctx.messages[2].content[0]
        changed = attrs.evolve(ctx.messages[2], content=(attrs.evolve(result, call_id="t2"),))
        moved = ctx.replace_tail([*ctx.messages[:2], changed])
        written = langchain.write_messages(moved.messages)
        assert [ToolMessage("ok", tool_call_id="t2")] == [m for m in written if isinstance(m, ToolMessage)]
        assert all("t1" not in str(m.content) for m in written[2:])

    def test_a_call_in_a_human_message_is_refused_and_repair_moves_it(self):
        """
        A ``tool_use`` dict in a HumanMessage, which Anthropic refuses in a user turn, breaks the
        call-not-assistant rule; repair moves it into an AIMessage's tool calls, its result after.
        """
        messages = [
            HumanMessage("q", id="h1"),
            HumanMessage([{"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}], id="h2"),
            ToolMessage("ok", tool_call_id="t1", id="r1"),
        ]
        assert ["call-not-assistant"] == [p.rule for p in langchain.check(messages)]
        with pytest.raises(ProviderError, match="call-not-assistant"):
            anthropic.write(langchain.read(messages))
        repaired = langchain.write(langchain.read(messages), repair=True)
        assert () == langchain.check(repaired)
        (ai,) = [m for m in repaired if isinstance(m, AIMessage)]
        assert [{"name": "f", "args": {"a": 1}, "id": "t1", "type": "tool_call"}] == ai.tool_calls
        assert messages == langchain.write(langchain.read(messages), state=True)


class TestLangChainBlockKeys:
    """
    Text, image and file dicts with the keys LangChain and the chat models add beside their content
    (``create_text_block``'s ``id``, ChatOpenAI's ``annotations`` and ``id``, a stream's ``index``,
    ``extras``, Anthropic's ``cache_control``) are that text or media for every format.
    """

    @staticmethod
    @st.composite
    def keyed_texts(draw: st.DrawFn) -> dict:
        block: dict = {"type": "text", "text": draw(words)}
        extra = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "id": st.just("msg_1") | st.just("lc_3a76876a"),
                    "index": st.integers(0, 3),
                    "annotations": st.just([]) | st.just([{"type": "citation", "url": "https://example.com"}]),
                    "extras": st.just({"note": "x"}),
                },
            )
        )
        if not extra:
            extra = {"cache_control": {"type": "ephemeral"}}
        return {**block, **extra}

    @given(st.lists(keyed_texts(), min_size=1, max_size=3), st.lists(keyed_texts(), min_size=1, max_size=2))
    def test_their_text_reaches_every_format_and_comes_back_as_it_came(self, asked, answered):
        """
        Such blocks round-trip equal, and each text is in the Chat Completions and Anthropic
        bodies written for them (it was a LangChain-only block, left out of both, in silence);
        five ``cache_control`` marks are refused for Anthropic, which takes four at most.
        """
        from anthropic.types import MessageParam  # noqa: PLC0415
        from langchain_core.messages import content as blocks  # noqa: PLC0415

        image = blocks.create_image_block(url="https://example.com/a.png")
        document = blocks.create_file_block(base64="JVBERi0=", mime_type="application/pdf")
        messages = [HumanMessage([*asked, image, document], id="h1"), AIMessage(answered, id="a1")]
        ctx = langchain.read(messages)
        assert messages == langchain.write(ctx, state=True)
        assert () == langchain.check(ctx)
        chat = openai_chat.write(ctx)["messages"]
        TypeAdapter(list[ChatCompletionMessageParam]).validate_python(chat)
        bodies = [chat]
        if sum("cache_control" in b for b in [*asked, *answered]) > 4:  # Anthropic takes 4 breakpoints at most
            with pytest.raises(ProviderError, match="cache-breakpoints: 5 cache breakpoints"):
                anthropic.write(ctx)
        else:
            body = anthropic.write(ctx)["messages"]
            TypeAdapter(list[MessageParam]).validate_python(body)
            bodies.append(body)
        for written in bodies:
            texts = [[b["text"] for b in m["content"] if b["type"] == "text"] for m in written]
            assert [[b["text"] for b in asked], [b["text"] for b in answered]] == texts
        assert ["image_url", "file"] == [b["type"] for b in chat[0]["content"][len(asked) :]]

    @given(st.sampled_from(["audio", "video"]), st.sampled_from(["url", "base64"]), st.data())
    def test_audio_and_video_made_by_langchain_reach_the_formats_that_take_them(self, kind, source, data):
        """
        An audio or video dict from LangChain's ``create_audio_block`` or
        ``create_video_block`` (which give it an ``id``) is that media: Gemini
        takes it, Chat Completions takes WAV or MP3 audio inline, the formats
        with no place for it refuse it by name, and LangChain gets the dict
        back as it came. It was a LangChain-only block, left out of every
        other format in silence.
        """
        from google.genai import types as gtypes  # noqa: PLC0415
        from langchain_core.messages import content as blocks  # noqa: PLC0415

        from workingctx.adapters import google  # noqa: PLC0415

        create = blocks.create_audio_block if kind == "audio" else blocks.create_video_block
        mime = "audio/wav" if kind == "audio" else "video/mp4"
        where = {"url": f"https://example.com/a.{mime[6:]}"} if source == "url" else {"base64": "UklGRg=="}
        media = create(**where, mime_type=mime)
        extra = data.draw(st.fixed_dictionaries({}, optional={"index": st.integers(0, 3), "extras": st.just({})}))
        media = {**media, **extra}
        messages = [HumanMessage([{"type": "text", "text": "what is in it?"}, media]), AIMessage("A bird.")]
        ctx = langchain.read(messages)
        assert messages == langchain.write(ctx)
        contents = google.write(ctx)["contents"]
        TypeAdapter(list[gtypes.Content]).validate_python(contents)
        (part,) = contents[0]["parts"][1:]
        assert part == (
            {"inline_data": {"data": "UklGRg==", "mime_type": mime}}
            if source == "base64"
            else {"file_data": {"file_uri": where["url"], "mime_type": mime}}
        )
        refusing = [anthropic, openai_responses]
        if (kind, source) == ("audio", "base64"):
            chat = openai_chat.write(ctx)["messages"]
            assert chat[0]["content"][1] == {
                "type": "input_audio",
                "input_audio": {"data": "UklGRg==", "format": "wav"},
            }
        else:
            refusing.append(openai_chat)
        for module in refusing:
            assert [(p.index, p.rule) for p in module.check(ctx)] == [(0, "unsendable")], module.__name__
            with pytest.raises(ProviderError, match=kind.capitalize() + "Block"):
                module.write(ctx)

    def test_an_edited_text_is_written_as_it_now_is(self):
        """
        A text changed after reading is written as plain text, never as the dict it was read from.
        """
        import attrs  # noqa: PLC0415

        ctx = langchain.read([HumanMessage([{"type": "text", "text": "old", "id": "lc_1"}])])
        (block,) = ctx.messages[0].content
        edited = ctx.replace_tail([attrs.evolve(ctx.messages[0], content=(attrs.evolve(block, text="new"),))])
        assert [HumanMessage([{"type": "text", "text": "new"}])] == langchain.write(edited)


def _tool_use_ids(messages: list) -> list:
    return [
        [b["id"] for b in m["content"] if b["type"] == "tool_use"]
        for m in messages
        if m["role"] == "assistant" and not isinstance(m["content"], str)
    ]


class TestCallsInAIContent:
    """
    A call an AIMessage holds only in its content (an Anthropic ``tool_use``, LangChain's
    ``tool_call`` block of a v1 message, a Responses ``function_call``) is a call: ChatAnthropic
    or ChatOpenAI sends it as one, so the ToolMessage after it answers it.
    """

    @staticmethod
    def _call(kind: str, call_id: str, name: str, args: dict) -> dict:
        if kind == "tool_use":
            return {"type": "tool_use", "id": call_id, "name": name, "input": args}
        return {"type": "tool_call", "id": call_id, "name": name, "args": args}

    @given(st.data())
    def test_their_results_answer_them_as_chatanthropic_sends_them(self, data):
        """
        Turns whose calls ride only in content (some in ``tool_calls`` too, as a v1 message has
        them) round-trip equal, break no rule of LangChain or Anthropic, and make the calls
        ChatAnthropic sends, each once.
        """

        messages: list = [HumanMessage(data.draw(words), id="h0")]
        for turn in range(data.draw(st.integers(1, 3))):
            kind = data.draw(st.sampled_from(["tool_use", "tool_call"]))
            ids = [f"toolu_{turn}_{i}" for i in range(data.draw(st.integers(1, 3)))]
            calls = [self._call(kind, i, data.draw(names), data.draw(json_args)) for i in ids]
            listed = [c for c in calls if data.draw(st.booleans())]
            tool_calls = [
                {"name": c["name"], "args": c.get("args", c.get("input")), "id": c["id"], "type": "tool_call"}
                for c in listed
            ]
            meta = {"output_version": "v1", "model_provider": "anthropic"} if kind == "tool_call" else {}
            text = [{"type": "text", "text": data.draw(words)}]
            messages.append(AIMessage([*text, *calls], tool_calls=tool_calls, response_metadata=meta, id=f"a{turn}"))
            messages.extend(ToolMessage(data.draw(words), tool_call_id=i, id=f"r_{i}") for i in ids)
        messages.append(AIMessage(data.draw(words), id="end"))
        ctx, ours, sent = _as_chatanthropic_sends(messages)
        assert [sorted(ids) for ids in _tool_use_ids(sent)] == [sorted(ids) for ids in _tool_use_ids(ours)]
        chat = openai_chat.write(ctx)["messages"]
        TypeAdapter(list[ChatCompletionMessageParam]).validate_python(chat)
        asked = [sorted(c["id"] for c in m["tool_calls"]) for m in chat if m.get("tool_calls")]
        assert [sorted(ids) for ids in _tool_use_ids(sent)] == asked

    def test_a_function_call_item_is_a_call_for_the_responses_api(self):
        """
        ChatOpenAI's Responses output keeps a ``function_call`` item in content; alone there it is
        still the call its ``function_call_output`` answers, and goes to OpenAI as that call.
        """
        from openai.types.responses import ResponseInputParam  # noqa: PLC0415

        item = {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": '{"a":1}', "id": "fc_1"}
        messages = [HumanMessage("q"), AIMessage([item]), ToolMessage("r", tool_call_id="call_1")]
        ctx = langchain.read(messages)
        assert () == langchain.check(ctx)
        assert messages == langchain.write(ctx, state=True)
        body = openai_responses.write(ctx)["input"]
        TypeAdapter(ResponseInputParam).validate_python(body)
        assert ["function_call", "function_call_output"] == [i.get("type") for i in body[1:]]

    @given(st.text(max_size=12), st.none() | texts, st.booleans())
    def test_a_v1_invalid_call_from_anthropic_is_the_call_chatanthropic_sends(self, args, error, answered):
        """
        An ``invalid_tool_call`` block only in a v1 AIMessage's content from
        Anthropic is a call: ChatAnthropic sends it as a ``tool_use`` with an
        empty input, so the ToolMessage after it answers it (it was a
        LangChain-only block, its result an orphan every format refused), and
        it is dangling without one. The dict comes back as it came.
        """
        invalid = {"type": "invalid_tool_call", "id": "toolu_9", "name": "lookup", "args": args, "error": error}
        meta = {"output_version": "v1", "model_provider": "anthropic"}
        messages: list = [
            HumanMessage("q", id="h0"),
            AIMessage([{"type": "text", "text": "on it"}, invalid], response_metadata=meta, id="a0"),
        ]
        if not answered:
            messages.append(HumanMessage("next", id="h1"))
            assert ["dangling-call"] == [p.rule for p in langchain.check(messages) if p.rule in STRUCTURAL_RULES]
            return
        messages += [
            ToolMessage("Error: bad arguments", tool_call_id="toolu_9", status="error", id="t0"),
            AIMessage("sorry", id="a1"),
        ]
        ctx, ours, sent = _as_chatanthropic_sends(messages)
        assert _tool_use_ids(sent) == _tool_use_ids(ours) == [["toolu_9"]]
        chat = openai_chat.write(ctx)["messages"]
        TypeAdapter(list[ChatCompletionMessageParam]).validate_python(chat)
        assert [c["id"] for m in chat for c in m.get("tool_calls") or ()] == ["toolu_9"]

    def test_an_unanswered_one_is_reported(self):
        """
        A call only in content with no result after it is dangling, as any call is; repair closes it.
        """
        messages = [
            HumanMessage("q"),
            AIMessage([{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]),
            HumanMessage("next"),
        ]
        assert ["dangling-call"] == [p.rule for p in langchain.check(messages) if p.rule in STRUCTURAL_RULES]
        repaired = langchain.write(langchain.read(messages), repair=True)
        assert ["toolu_1"] == [m.tool_call_id for m in repaired if isinstance(m, ToolMessage)]


class TestToolMessageOfToolResults:
    """
    A ToolMessage whose content is Anthropic ``tool_result`` blocks (ChatAnthropic sends these
    blocks as they are, in a user turn) answers the calls those blocks name.
    """

    @given(st.integers(1, 4), st.lists(words, min_size=4, max_size=4), st.booleans())
    def test_its_blocks_answer_their_calls(self, n, outputs, error):
        """
        Parallel results in one such ToolMessage round-trip equal, break no rule, are written for
        Anthropic as ChatAnthropic sends them and for Chat Completions one tool message each.
        """

        ids = [f"toolu_{i}" for i in range(n)]
        calls = [{"name": "f", "args": {"i": i}, "id": c} for i, c in enumerate(ids)]
        results = [{"type": "tool_result", "tool_use_id": c, "content": o} for c, o in zip(ids, outputs, strict=False)]
        if error:
            results[0]["is_error"] = True
        status = "error" if error else "success"
        messages = [
            HumanMessage("q", id="h1"),
            AIMessage("", tool_calls=calls, id="a1"),
            ToolMessage(results, tool_call_id=ids[0], status=status, artifact={"raw": 1}, id="t1"),
            AIMessage("done", id="a2"),
        ]
        ctx, ours, sent = _as_chatanthropic_sends(messages)
        assert [_tool_results(m) for m in sent if m["role"] == "user"] == [
            _tool_results(m) for m in ours if m["role"] == "user"
        ]
        chat = openai_chat.write(ctx)["messages"]
        TypeAdapter(list[ChatCompletionMessageParam]).validate_python(chat)
        assert ids == [m["tool_call_id"] for m in chat if m["role"] == "tool"]


class TestV1AnthropicThinking:
    """
    ChatAnthropic with ``output_version="v1"`` holds its thinking as a ``reasoning`` block, the
    signature in ``extras``, and sends it back as Anthropic's thinking.
    """

    @given(st.lists(st.tuples(words, names), min_size=1, max_size=3), st.booleans())
    def test_it_goes_to_anthropic_as_chatanthropic_sends_it(self, turns, indexed):
        """
        Tool turns of v1 messages with signed reasoning round-trip equal, and the Anthropic body
        written for them holds the thinking blocks ChatAnthropic sends (they were left out).
        """

        meta = {"output_version": "v1", "model_provider": "anthropic"}
        messages: list = [HumanMessage("q", id="h0")]
        for turn, (thought, name) in enumerate(turns):
            reasoning: dict = {"type": "reasoning", "reasoning": thought, "extras": {"signature": f"sig{turn}"}}
            if indexed:
                reasoning["index"] = 0
            call = {"type": "tool_call", "name": name, "args": {}, "id": f"toolu_{turn}"}
            messages.append(AIMessage(content_blocks=[reasoning, call], response_metadata=meta, id=f"a{turn}"))
            messages.append(ToolMessage("ok", tool_call_id=f"toolu_{turn}", id=f"t{turn}"))
        _, ours, sent = _as_chatanthropic_sends(messages)

        def thinking(body: list) -> list:
            return [b for m in body if m["role"] == "assistant" for b in m["content"] if b["type"] == "thinking"]

        assert thinking(sent) == thinking(ours)
        assert len(turns) == len(thinking(ours))


class TestAnthropicReplyBlocks:
    """
    Anthropic's replies hold blocks no other provider has (the tools it runs itself and their
    results, MCP calls, a text's citations). ChatAnthropic keeps them in an AIMessage's content
    and sends them back; written from an Anthropic transcript, they were left out in silence.
    """

    @staticmethod
    def _units(turn: int, text: str) -> list[list[dict]]:
        """
        The blocks of an Anthropic reply as the SDK's ``BetaMessage`` validates them, each
        call with its result: a web search, an MCP call, code execution, a cited text.
        """
        search, mcp, code = f"srvtoolu_{turn}", f"mcptoolu_{turn}", f"srvtoolu_c{turn}"
        found = {"type": "web_search_result", "url": "https://a", "title": "A", "encrypted_content": "RW5j"}
        location = {
            "type": "web_search_result_location",
            "url": "https://a",
            "title": "A",
            "encrypted_index": "RW5j",
            "cited_text": text,
        }
        ran = {"type": "code_execution_result", "stdout": text, "stderr": "", "return_code": 0, "content": []}
        return [
            [
                {"type": "server_tool_use", "id": search, "name": "web_search", "input": {"query": text}},
                {"type": "web_search_tool_result", "tool_use_id": search, "content": [found]},
            ],
            [
                {"type": "mcp_tool_use", "id": mcp, "name": "lookup", "server_name": "docs", "input": {"q": text}},
                {
                    "type": "mcp_tool_result",
                    "tool_use_id": mcp,
                    "is_error": False,
                    "content": [{"type": "text", "text": text}],
                },
            ],
            [
                {"type": "server_tool_use", "id": code, "name": "code_execution", "input": {"code": "print(1)"}},
                {"type": "code_execution_tool_result", "tool_use_id": code, "content": ran},
            ],
            [{"type": "text", "text": text, "citations": [location]}],
        ]

    @given(st.data())
    def test_chatanthropic_sends_them_again_and_no_other_format_gets_them(self, data):
        """
        An Anthropic transcript whose replies hold such blocks (dumped from the SDK's own
        ``BetaMessage``), written as LangChain messages: the Anthropic body ChatAnthropic builds
        from them holds each reply as it was, the messages round-trip equal, and the Chat
        Completions, Responses and Gemini bodies written from them are those written from the
        transcript itself (such blocks stay out of them, as before).
        """
        from anthropic.types.beta import BetaMessage  # noqa: PLC0415

        from workingctx.adapters import google  # noqa: PLC0415

        messages: list = []
        for turn in range(data.draw(st.integers(1, 3))):
            units = self._units(turn, data.draw(words))
            chosen = data.draw(st.lists(st.sampled_from(range(len(units))), min_size=1, max_size=4, unique=True))
            content = [block for i in chosen for block in units[i]]
            if data.draw(st.booleans()):
                content.append({"type": "text", "text": data.draw(words)})
            reply = BetaMessage.model_validate(
                {
                    "id": f"msg_{turn}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-6",
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                    "content": content,
                }
            )
            messages.append({"role": "user", "content": data.draw(words)})
            messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
        messages.append({"role": "user", "content": "thanks"})
        body = {"messages": messages}
        ctx = anthropic.read(body)
        written = langchain.write(ctx)
        sent = _chat_anthropic()._get_request_payload(written)["messages"]  # noqa: SLF001  # the body ChatAnthropic sends
        assert sent == messages
        back = langchain.read(written)
        assert langchain.write(back) == written
        assert () == langchain.check(back)
        assert anthropic.write(back) == body
        for module in (openai_chat, openai_responses, google):
            assert module.write(back) == module.write(ctx), module.__name__
