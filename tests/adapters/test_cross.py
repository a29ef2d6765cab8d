"""
Cross-format pairs: a transcript read with one adapter and written with
another keeps what the target can carry. Roles and text, tool calls with
their arguments, each result paired with its call, and every piece of media
survive (written, validated by the target SDK's types, and read back).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic.types import MessageParam
from google.genai import types as gtypes
from hypothesis import assume, given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputParam
from pydantic import TypeAdapter

from tests.wire_strategies import (
    anthropic_bodies,
    b64,
    chat_messages,
    google_bodies,
    json_args,
    names,
    responses_bodies,
    solid,
)
from workingctx.adapters import ProviderError, anthropic, google, langchain, openai_chat, openai_responses
from workingctx.adapters._common import parse_data_url, repair_messages
from workingctx.frozen import thaw
from workingctx.messages import (
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    ProviderBlock,
    ReasoningBlock,
    TextBlock,
    ToolCall,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)

VALIDATORS = {
    openai_chat: lambda body: TypeAdapter(list[ChatCompletionMessageParam]).validate_python(body["messages"]),
    openai_responses: lambda body: (
        TypeAdapter(ResponseInputParam).validate_python(body["input"]) if isinstance(body["input"], list) else None
    ),
    anthropic: lambda body: TypeAdapter(list[MessageParam]).validate_python(body["messages"]),
    google: lambda body: TypeAdapter(list[gtypes.Content]).validate_python(body["contents"]),
}
_MEDIA = (ImageBlock, AudioBlock, VideoBlock, DocumentBlock)


def _token(media: Any) -> str:
    """
    Where a media reference's bytes are: URL, file id, or the base64 itself (standard alphabet).
    """
    if media.kind == "url":
        return media.url
    if media.kind == "file_id":
        return media.file_id
    data = media.data_base64
    inline = parse_data_url(data)
    if inline is not None:
        data = inline[1]
    return data.replace("-", "+").replace("_", "/")


def _outcome(value: Any, is_error: bool = False) -> tuple[Any, bool]:
    """
    A result's output as plain data, and whether it is an error (a flag, or
    text that says so, as formats without the flag send it).
    """
    if isinstance(value, str) and value.startswith("error: "):
        return _result(value.removeprefix("error: ")), True
    return _result(value), is_error


def _result(value: Any) -> Any:
    """
    A result's output as plain data: JSON text decoded, Gemini's ``{"result": ...}`` wrapper removed.
    """
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return value
        return _result(decoded) if isinstance(decoded, dict) else value
    if isinstance(value, dict) and set(value) == {"result"}:
        return _result(value["result"])
    return value


def essence(ctx: Any) -> dict[str, Any]:
    """
    What must survive a trip between formats: the text of each role in order,
    the calls (id, name, arguments), each call's result, and the media.
    """
    texts: list[tuple[str, str]] = []
    calls: list[tuple[str, str, Any]] = []
    results: dict[str, Any] = {}
    media: list[str] = []
    for message in ctx.assembled():
        calls.extend((c.id, c.name, thaw(c.arguments)) for c in message.tool_calls)
        content = message.content
        if message.role == "tool":
            text = content if isinstance(content, str) else "".join(b.text for b in content if isinstance(b, TextBlock))
            results[message.tool_call_id] = _outcome(text)
            if not isinstance(content, str):
                media.extend(_token(b.media) for b in content if isinstance(b, _MEDIA))
            continue
        if isinstance(content, str):
            if content:
                texts.append((message.role, content))
            continue
        for block in content:
            if isinstance(block, TextBlock) and block.text:
                texts.append((message.role, block.text))
            elif isinstance(block, ToolCallBlock):
                calls.append((block.id, block.name, thaw(block.args)))
            elif isinstance(block, ToolResultBlock):
                output = block.output_text() if block.content else thaw(block.output)
                results[block.call_id] = _outcome(output, block.is_error)
                media.extend(_token(b.media) for b in block.content if isinstance(b, _MEDIA))
            elif isinstance(block, _MEDIA):
                media.append(_token(block.media))
    return {"texts": texts, "calls": calls, "results": results, "media": sorted(media)}


def _same(before: dict[str, Any], after: dict[str, Any]) -> None:
    """
    Assert that *after* keeps everything of *before*; a document known only
    by URL may arrive as a text naming it (Chat Completions has no URL file part).
    """
    assert after["calls"] == before["calls"]
    assert after["results"] == before["results"]
    assert {c[0] for c in before["calls"]} == set(after["results"])
    named = [t for _, t in after["texts"] if t.startswith("[document: ")]
    assert [t for t in after["texts"] if not t[1].startswith("[document: ")] == before["texts"]
    missing = list(before["media"])
    for token in after["media"]:
        missing.remove(token)
    assert all(any(token in text for text in named) for token in missing)


@st.composite
def langchain_transcripts(draw: st.DrawFn) -> list[Any]:
    """
    LangChain messages every provider accepts: solid text, image URLs and
    standard media blocks, parallel calls, results with text.
    """
    out: list[Any] = []
    if draw(st.booleans()):
        out.append(SystemMessage(draw(solid)))
    counter = 0
    media = st.sampled_from(
        [
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
            {"type": "file", "url": "https://example.com/a.pdf", "mime_type": "application/pdf"},
        ]
    ) | b64.map(lambda d: {"type": "image", "base64": d, "mime_type": "image/png"})
    for _ in range(draw(st.integers(1, 3))):
        parts = [{"type": "text", "text": draw(solid)}, *draw(st.lists(media, max_size=2))]
        out.append(HumanMessage(draw(solid) if draw(st.booleans()) else parts))
        for _ in range(draw(st.integers(0, 2))):
            ids = [f"call_{counter + i}" for i in range(draw(st.integers(1, 3)))]
            counter += len(ids)
            calls = [{"name": draw(names), "args": draw(json_args), "id": i} for i in ids]
            out.append(AIMessage(draw(st.just("") | solid), tool_calls=calls))
            out.extend(ToolMessage(draw(solid), tool_call_id=i) for i in ids)
        out.append(AIMessage(draw(solid)))
    return out


PAIRS = [
    ("responses", "chat", responses_bodies(portable=True), openai_responses, openai_chat),
    ("gemini", "responses", google_bodies(portable=True), google, openai_responses),
    ("langchain", "anthropic", langchain_transcripts(), langchain, anthropic),
    ("langchain", "gemini", langchain_transcripts(), langchain, google),
    ("langchain", "responses", langchain_transcripts(), langchain, openai_responses),
    ("chat", "gemini", chat_messages(portable=True), openai_chat, google),
    ("anthropic", "responses", anthropic_bodies(), anthropic, openai_responses),
    ("gemini", "anthropic", google_bodies(portable=True), google, anthropic),
]


@pytest.mark.parametrize(
    ("source", "reader", "target"),
    [pytest.param(strategy, reader, target, id=f"{a}-to-{b}") for a, b, strategy, reader, target in PAIRS],
)
def test_a_transcript_keeps_its_essence_across_formats(source, reader, target):
    """
    X.write(Y.read(p)) validates with X's SDK types, X.check finds nothing, and
    reading it back keeps roles, text, calls, results paired with their calls, and media.
    """

    @given(source)
    def check(payload):
        """One generated transcript, through the pair."""
        ctx = reader.read(payload)
        body = target.write(ctx)
        VALIDATORS[target](body)
        assert target.check(body) == ()
        _same(essence(ctx), essence(target.read(body)))

    check()


def test_essence_notices_a_loss():
    """
    The comparison fails when a result, a call, a text or an image is lost.
    """
    body = {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "u"}}],
            },
            {
                "role": "assistant",
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c", "content": "r"},
        ]
    }
    before = essence(openai_chat.read(body))
    for change in (
        lambda b: b["messages"][0]["content"].pop(),
        lambda b: b["messages"][0]["content"].pop(0),
        lambda b: b["messages"][2].update(content="other"),
        lambda b: b["messages"][1]["tool_calls"][0]["function"].update(arguments='{"a": 1}'),
    ):
        changed = json.loads(json.dumps(body))
        change(changed)
        with pytest.raises(AssertionError):
            _same(before, essence(openai_chat.read(changed)))
    _same(before, essence(openai_chat.read(body)))


def _custom_call(call_id: str) -> dict[str, Any]:
    return {"type": "custom_tool_call", "call_id": call_id, "name": "grep", "input": "x"}


def _custom_output(call_id: str) -> dict[str, Any]:
    return {"type": "custom_tool_call_output", "call_id": call_id, "output": "y"}


def test_a_responses_custom_call_is_no_call_where_it_is_left_out():
    """
    Written to Anthropic or Gemini a Responses custom tool call and its output
    are left out (also by LangChain), so they are no call and no result there: a
    request that ends with such a call, or holds its output alone, is sent as
    it is, and so is one whose custom output stands between a function call
    and its result (the message holding it is not sent at all).
    """
    user, answer = {"role": "user", "content": "go"}, {"role": "assistant", "content": "done"}
    pending = [user, _custom_call("c1"), _custom_output("c1"), answer, user, _custom_call("c2")]
    orphan = [user, _custom_output("zz"), answer, user]
    for items in (pending, orphan):
        TypeAdapter(ResponseInputParam).validate_python(items)
        ctx = openai_responses.read(items)
        for target in (anthropic, google):
            VALIDATORS[target](target.write(ctx))
        langchain.write(ctx)
    function_call = {"type": "function_call", "call_id": "f1", "name": "f", "arguments": "{}"}
    between = [user, function_call, _custom_call("c1"), _custom_output("c1")]
    between += [{"type": "function_call_output", "call_id": "f1", "output": "r"}, answer, user]
    TypeAdapter(ResponseInputParam).validate_python(between)
    ctx = openai_responses.read(between)
    for target in (anthropic, google):
        body = target.write(ctx)
        VALIDATORS[target](body)
        assert target.check(ctx) == ()
        assert "grep" not in json.dumps(body)
        assert target.write(ctx, repair=True) == body
    written = langchain.write(ctx)
    assert [type(m).__name__ for m in written] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
        "HumanMessage",
    ]
    assert langchain.check(ctx) == ()


# Blocks each format leaves out: another provider's reasoning and items, by whose they are.
_FOREIGN = [
    ("anthropic", ReasoningBlock("weighing it", signature="c2ln", provider="anthropic")),
    ("anthropic", ProviderBlock("anthropic", {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"})),
    ("google", ReasoningBlock("a thought", signature="c2ln", provider="google")),
    ("google", ProviderBlock("google", {"executable_code": {"language": "PYTHON", "code": "print(1)"}})),
    (
        "openai",
        ReasoningBlock(
            "a plan",
            provider="openai",
            provider_data={"openai_responses": {"item": {"type": "reasoning", "id": "rs_1", "summary": []}}},
        ),
    ),
    ("openai_custom", ProviderBlock("openai_responses", _custom_call("cc_1"))),
    ("openai_custom", ProviderBlock("openai_responses", _custom_output("cc_1"))),
    (
        "openai_responses",
        ProviderBlock("openai_responses", {"type": "web_search_call", "id": "ws_1", "status": "completed"}),
    ),
    ("langchain", ProviderBlock("langchain", {"type": "non_standard", "value": {"kind": "x"}})),
]
# The blocks each format writes as its own, by whose they are ("openai_custom": custom tool calls and outputs).
_OWN = {
    openai_chat: {"openai_chat", "openai_custom"},
    openai_responses: {"openai", "openai_responses", "openai_custom"},
    anthropic: {"anthropic"},
    google: {"google"},
    langchain: {"anthropic", "langchain"},
}


@pytest.mark.parametrize("target", list(_OWN), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_a_message_a_format_leaves_out_changes_nothing_it_writes(target):
    """
    A user or assistant message holding only blocks a format leaves out is not
    sent: inserted anywhere after the leading system messages of a valid
    transcript (between a call and its result included), the format writes
    the same request, and finds nothing wrong.
    """
    foreign = [block for owner, block in _FOREIGN if owner not in _OWN[target]]

    @given(langchain_transcripts(), st.data())
    def check(transcript, data):
        """One transcript, with messages the target leaves out inserted."""
        messages = list(langchain.read(transcript).assembled())
        inserted = list(messages)
        head = next(i for i, m in enumerate(messages) if m.role != "system")
        for _ in range(data.draw(st.integers(1, 4))):
            blocks = data.draw(st.lists(st.sampled_from(foreign), min_size=1, max_size=3))
            role = data.draw(st.sampled_from(["user", "assistant"]))
            inserted.insert(data.draw(st.integers(head, len(inserted))), Message(role, tuple(blocks)))
        assert target.write(inserted) == target.write(messages)
        assert target.check(inserted) == ()

    check()


def test_a_message_left_out_between_two_calling_turns_keeps_them_one_exchange():
    """
    Assistant turns that only call, one right after another, are one exchange
    whose results follow them all; a message the format leaves out between
    them does not split it.
    """
    plain = [
        Message("user", "weather in Oslo and Rome?"),
        Message("assistant", tool_calls=(ToolCall("call_a", "weather", {"city": "Oslo"}),)),
        Message("assistant", tool_calls=(ToolCall("call_b", "weather", {"city": "Rome"}),)),
        Message("tool", "rain", tool_call_id="call_a"),
        Message("tool", "sun", tool_call_id="call_b"),
        Message("assistant", "Rain in Oslo, sun in Rome."),
    ]
    for target, owners in _OWN.items():
        foreign = next(block for owner, block in _FOREIGN if owner not in owners)
        inserted = [*plain[:2], Message("assistant", (foreign,)), *plain[2:]]
        assert target.check(inserted) == (), target
        assert target.write(inserted) == target.write(plain), target


@pytest.mark.parametrize("target", list(_OWN), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_a_transcript_with_messages_left_out_has_the_problems_it_has_without_them(target):
    """
    Messages a format leaves out, inserted into a broken transcript (some of
    its messages dropped), change none of the problems the format finds: the
    same rules at the same messages (each index counted in the list that
    holds them), naming the same calls.
    """
    foreign = [block for owner, block in _FOREIGN if owner not in _OWN[target]]

    @given(langchain_transcripts(), st.data())
    def check(transcript, data):
        """One transcript, broken, with messages the target leaves out inserted."""
        messages = list(langchain.read(transcript).assembled())
        head = next(i for i, m in enumerate(messages) if m.role != "system")
        kept = [m for i, m in enumerate(messages) if i < head or data.draw(st.integers(0, 3), label=f"keep {i}")]
        inserted: list[Message | None] = list(kept)
        for _ in range(data.draw(st.integers(1, 4))):
            blocks = data.draw(st.lists(st.sampled_from(foreign), min_size=1, max_size=3))
            role = data.draw(st.sampled_from(["user", "assistant"]))
            inserted.insert(data.draw(st.integers(head, len(inserted))), Message(role, tuple(blocks)))
        origin, at = {}, 0
        for position, message in enumerate(inserted):
            if any(message is m for m in kept):
                origin[position] = at
                at += 1

        def found(problems, where):
            return sorted(
                (
                    (p.rule, -1 if p.index is None else where.get(p.index, "a message left out"), p.ids)
                    for p in problems
                ),
                key=repr,
            )

        assert found(target.check(inserted), origin) == found(target.check(kept), {i: i for i in range(len(kept))})

    check()


def test_a_skipped_first_message_leaves_the_problems_where_they_are():
    """
    A message left out at the very start is walked past: the problems of the
    messages after it keep their own positions.
    """
    for target, owners in _OWN.items():
        foreign = next(block for owner, block in _FOREIGN if owner not in owners)
        messages = [
            Message("assistant", (foreign,)),
            Message("assistant", tool_calls=(ToolCall("c1", "weather", {}),)),
            Message("user", "and Rome?"),
        ]
        problems = [(p.index, p.rule) for p in target.check(messages) if p.rule == "dangling-call"]
        assert problems == [(1, "dangling-call")], target


def test_reasoning_in_a_user_message_is_not_sent_to_responses():
    """
    Responses sends reasoning only as an item of the assistant's run: a user
    message holding only reasoning is not sent, not even as an empty message.
    """
    plan = next(block for owner, block in _FOREIGN if owner == "openai")
    plain = [Message("user", "hi"), Message("assistant", "ok")]
    inserted = [plain[0], Message("user", (plan,)), plain[1]]
    assert openai_responses.write(inserted) == openai_responses.write(plain)
    assert openai_responses.check(inserted) == ()


def _chat_calls(messages: list[dict[str, Any]]) -> tuple[list[Any], dict[str, Any]]:
    """
    The calls of Chat Completions messages, sorted (the kinds keep each
    message's own order, formats order them differently), each as (id, kind,
    name, what it was given), and each result's text by call id.
    """
    calls = []
    for message in messages:
        for call in message.get("tool_calls") or ():
            if call["type"] == "custom":
                calls.append((call["id"], "custom", call["custom"]["name"], call["custom"]["input"]))
            else:
                function = call["function"]
                calls.append((call["id"], "function", function["name"], json.loads(function["arguments"])))
    results = {}
    for message in messages:
        if message["role"] == "tool":
            content = message["content"]
            results[message["tool_call_id"]] = content if isinstance(content, str) else [p["text"] for p in content]
    return sorted(calls, key=repr), results


def _flat(results: dict[str, Any]) -> dict[str, str]:
    return {i: r if isinstance(r, str) else "".join(r) for i, r in results.items()}


@given(chat_messages(portable=True, custom=True))
def test_chat_custom_tool_calls_cross_to_responses_and_back(messages):
    """
    Written to Responses, a Chat custom tool call is a ``custom_tool_call``
    and its tool message a ``custom_tool_call_output`` (function calls and
    their outputs stay what they are); read back and written to Chat, every
    call and result is there again.
    """
    body = openai_responses.write(openai_chat.read(messages))
    VALIDATORS[openai_responses](body)
    assert openai_responses.check(body) == ()
    kinds = {i["call_id"]: i["type"] for i in body["input"] if "call_id" in i}
    customs = {i for i, kind, _, _ in _chat_calls(messages)[0] if kind == "custom"}
    assert {i for i, kind in kinds.items() if kind == "custom_tool_call_output"} == customs
    back = openai_chat.write(openai_responses.read(body))
    VALIDATORS[openai_chat](back)
    before, after = _chat_calls(messages), _chat_calls(back["messages"])
    assert after[0] == before[0]
    assert _flat(after[1]) == _flat(before[1])


@pytest.mark.parametrize("target", [anthropic, google, langchain], ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_chat_custom_tool_calls_are_left_out_with_their_results_elsewhere(target):
    """
    Anthropic, Gemini and LangChain have no custom tool: a Chat custom call is
    left out with its tool message, as a Responses one is with its output,
    and the request is valid without them (function calls and text all kept).
    """

    @given(chat_messages(portable=True, custom=True))
    def check(messages):
        """One transcript with custom calls, to the target."""
        ctx = openai_chat.read(messages)
        assert target.check(ctx) == ()
        written = target.write(ctx)
        if target is not langchain:
            VALIDATORS[target](written)
        kept = essence(target.read(written))
        functions = [c for c in _chat_calls(messages)[0] if c[1] == "function"]
        assert sorted(c[0] for c in kept["calls"]) == sorted(c[0] for c in functions)
        assert set(kept["results"]) == {c[0] for c in functions}
        assert kept["texts"] == essence(ctx)["texts"]

    check()


def test_a_responses_custom_call_is_written_to_chat_as_a_custom_tool_call():
    """
    Read from Responses, a custom tool call and its output are the nearest
    Chat Completions shapes: a ``custom`` tool call and a tool message
    (text parts for a list of input_text); reused ids re-keyed for Responses
    keep pairing the call with its output.
    """
    user = {"role": "user", "content": "go"}
    listed = {"type": "custom_tool_call_output", "call_id": "call_0", "output": [{"type": "input_text", "text": "2"}]}
    items = [user, _custom_call("call_0"), _custom_output("call_0"), user, _custom_call("call_0"), listed, user]
    TypeAdapter(ResponseInputParam).validate_python(items)
    ctx = openai_responses.read(items)
    written = openai_chat.write(ctx)
    VALIDATORS[openai_chat](written)
    custom = {"id": "call_0", "type": "custom", "custom": {"name": "grep", "input": "x"}}
    assert written["messages"][1:3] == [
        {"role": "assistant", "content": None, "tool_calls": [custom]},
        {"role": "tool", "tool_call_id": "call_0", "content": "y"},
    ]
    assert written["messages"][5] == {
        "role": "tool",
        "tool_call_id": "call_0",
        "content": [{"type": "text", "text": "2"}],
    }
    assert openai_chat.check(ctx) == ()
    # read from Chat, the second exchange reuses the answered id: Responses re-keys the call and its result
    again = openai_responses.write(openai_chat.read(written))
    VALIDATORS[openai_responses](again)
    pairs = [(i["type"], i["call_id"]) for i in again["input"] if "call_id" in i]
    assert pairs[:2] == [("custom_tool_call", "call_0"), ("custom_tool_call_output", "call_0")]
    assert pairs[2][0] == "custom_tool_call"
    assert pairs[3] == ("custom_tool_call_output", pairs[2][1])
    assert pairs[2][1] != "call_0"


def test_a_responses_custom_output_with_an_image_is_named_for_chat():
    """
    A tool message takes text only: a custom tool's output holding an image is
    an ``unsendable`` problem for Chat, never dropped in silence.
    """
    image = {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"}
    output = {"type": "custom_tool_call_output", "call_id": "c1", "output": [image]}
    items = [{"role": "user", "content": "go"}, _custom_call("c1"), output]
    TypeAdapter(ResponseInputParam).validate_python(items)
    problems = openai_chat.check(openai_responses.read(items))
    assert [(p.index, p.rule) for p in problems] == [(2, "unsendable")]
    assert "custom tool's output" in problems[0].message


@pytest.mark.parametrize("target", [anthropic, google, langchain], ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_answer_of_a_left_out_custom_call_is_left_out_with_it(target):
    """
    Where a Chat custom tool call is left out, so is whatever answers it: a
    result block in a user message (its other content stays), a tool message
    that carries another call's result besides (that result stays), and a
    repeated answer, which ``repair`` keeps as a real result. Each request is
    valid as Chat sends it and as the target does.
    """
    chat = [
        {"role": "user", "content": "count, and the weather"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "custom", "custom": {"name": "sql", "input": "SELECT 1"}},
                {"id": "f1", "type": "function", "function": {"name": "weather", "arguments": "{}"}},
            ],
        },
    ]
    asked = openai_chat.read_messages(chat)
    block_answer = [*asked, Message("user", (ToolResultBlock("c1", "42"), ToolResultBlock("f1", "rain")))]
    carried = [*asked, Message("tool", (ToolResultBlock("f1", "rain"),), tool_call_id="c1")]
    answer = [Message("tool", "42", tool_call_id="c1"), Message("tool", "rain", tool_call_id="f1")]
    repeated = [*asked, *answer, Message("tool", "42", tool_call_id="c1")]
    for messages in (block_answer, carried):
        assert openai_chat.check(messages) == ()
        assert target.check(messages) == ()
        written = target.write(messages)
        if target is not langchain:
            VALIDATORS[target](written)
        kept = essence(target.read(written))
        assert [c[0] for c in kept["calls"]] == ["f1"]
        assert set(kept["results"]) == {"f1"}
    assert [p.rule for p in openai_chat.check(repeated)] == ["duplicate-result"]
    written = target.write(repeated, repair=True)
    assert target.check(repeated) == ()
    if target is not langchain:
        VALIDATORS[target](written)


_IDS = st.sampled_from(["a", "b", "c"])


@st.composite
def _step(draw: st.DrawFn) -> Message:
    """
    One message of a transcript mixing function calls with custom tool calls
    (as Chat Completions reads them), answered by tool messages, result blocks
    or ``custom_tool_call_output`` items, in any order or not at all.
    """
    kind = draw(st.sampled_from(["user", "assistant", "calls", "calls", "tool", "tool", "block", "output"]))
    if kind == "user":
        return Message("user", "u")
    if kind == "assistant":
        return Message("assistant", "t")
    if kind == "calls":
        asked = draw(st.lists(st.tuples(st.booleans(), _IDS), min_size=1, max_size=3, unique_by=lambda c: c[1]))
        text = (TextBlock("s"),) if draw(st.booleans()) else ()
        customs = tuple(ProviderBlock("openai_responses", _custom_call(i)) for custom, i in asked if custom)
        calls = tuple(ToolCall(i, "f", {}) for custom, i in asked if not custom)
        return Message("assistant", (*text, *customs), tool_calls=calls)
    call_id = draw(_IDS)
    if kind == "tool":
        return Message("tool", "r", tool_call_id=call_id)
    if kind == "block":
        return Message("user", (ToolResultBlock(call_id, "r"),))
    return Message("user", (ProviderBlock("openai_responses", _custom_output(call_id)),))


def test_a_custom_call_left_out_keeps_its_message_in_the_calls_before_it():
    """
    A text and a custom tool call in the assistant message right after a function
    call, their results after both: Chat sends it, and so do the formats that leave
    the custom call out, its message's text joined to the turn of the call before
    it (Anthropic and Gemini join consecutive turns of a role), never refused as a
    dangling call.
    """
    messages = [
        Message.user("start"),
        Message("assistant", (), tool_calls=(ToolCall("b", "f", {}),)),
        Message("assistant", (TextBlock("s"), ProviderBlock("openai_responses", _custom_call("a")))),
        Message.tool("r", call_id="a"),
        Message.tool("r", call_id="b"),
    ]
    assert openai_chat.check(messages) == ()
    for target in (anthropic, google, langchain):
        assert target.check(messages) == (), target.__name__
        written = target.write(messages)
        if target is not langchain:
            VALIDATORS[target](written)
    turns = anthropic.write(messages)["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert [b["type"] for b in turns[1]["content"]] == ["tool_use", "text"]


@given(st.lists(_step(), max_size=7))
def test_check_is_empty_exactly_when_write_succeeds_with_custom_calls(steps):
    """
    For every format, with custom tool calls among function calls, reused ids
    and missing, misplaced or repeated answers: ``check`` finds nothing
    exactly when ``write`` sends, and ``repair=True`` sends what its repair
    leaves valid (a custom output answers only custom calls here). What Chat
    Completions sends, the formats that leave custom calls out send too.
    """
    messages = [Message.user("start"), *steps]
    functions = {c.id for m in messages for c in m.tool_calls}
    outputs = {b.answers for m in messages for b in m.content if isinstance(b, ProviderBlock)}
    assume(not functions & outputs)
    for target in (openai_chat, openai_responses, anthropic, google, langchain):
        for repair in (False, True):
            sent = repair_messages(messages) if repair else messages
            problems = target.check(sent)
            if target in (anthropic, google, langchain) and openai_chat.check(sent) == ():
                assert problems == (), target.__name__
            if problems:
                with pytest.raises(ProviderError):
                    target.write(messages, repair=repair)
                continue
            written = target.write(messages, repair=repair)
            if target is not langchain:
                VALIDATORS[target](written)
