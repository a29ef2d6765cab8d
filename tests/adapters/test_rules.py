"""
The turn and text rules each wire format enforces on write: what the provider
would reject is refused, naming the message and the fix, and ``check`` says
the same; what every provider accepts is written everywhere.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import calls_moved_back
from tests.wire_strategies import anthropic_bodies, blanks, chat_messages, google_bodies, responses_bodies, solid
from workingctx import Message, ToolCall, WorkingContext
from workingctx.adapters import ProviderError, anthropic, google, langchain, openai_chat, openai_responses
from workingctx.messages import (
    AudioBlock,
    DataBlock,
    DocumentBlock,
    ImageBlock,
    MediaRef,
    TextBlock,
    ToolResultBlock,
    VideoBlock,
)


def b64encode_text(data: bytes) -> str:
    """
    Base64 text of *data*.
    """
    return base64.b64encode(data).decode("ascii")


WRITERS = (openai_chat, openai_responses, anthropic, google, langchain)
# the rules a transcript valid for OpenAI can still break for Anthropic or Gemini
TURN_RULES = {
    "blank-text",
    "trailing-whitespace",
    "first-not-user",
    "no-user-message",
    "empty",
    "empty-content",
    "unsendable",
}


def refused(module, source, **options):
    """
    The problems of the ProviderError that module.write raises for source (failing if it writes).
    """
    with pytest.raises(ProviderError) as info:
        module.write(source, **options)
    return info.value.problems


@given(anthropic_bodies(), solid)
def test_anthropic_takes_an_assistant_turn_first(body, text):
    """
    A transcript that starts with an assistant turn (recorded traffic Anthropic
    accepted: a greeting first) reads, writes back equal and has no problem.
    """
    first = {**body, "messages": [{"role": "assistant", "content": text}, *body["messages"]]}
    ctx = anthropic.read(first)
    assert first == {**body, **anthropic.write(ctx)}
    assert () == anthropic.check(ctx)
    assert () == anthropic.check(first)


@given(anthropic_bodies(), blanks.filter(bool), st.data())
def test_anthropic_refuses_blank_text(body, blank, data):
    """
    A whitespace-only text in a user turn is refused, naming the message (an
    empty one is left out, its neighbours joined, as it sends nothing).
    """
    users = [i for i, m in enumerate(body["messages"]) if m["role"] == "user" and isinstance(m["content"], str)]
    if not users:
        body["messages"][0] = {"role": "user", "content": "q"}
        users = [0]
    at = data.draw(st.sampled_from(users))
    body["messages"][at] = {"role": "user", "content": blank}
    ctx = anthropic.read(body)
    offset = len(ctx.assembled()) - len(body["messages"])
    problems = refused(anthropic, ctx)
    assert [(p.index, p.rule) for p in problems] == [(offset + at, "blank-text")]
    assert "only whitespace" in str(problems[0])
    assert anthropic.check(ctx) == problems
    assert [(p.index, p.rule) for p in anthropic.check(body)] == [(offset + at, "blank-text")]  # the body's too


@given(anthropic_bodies(), st.sampled_from([" ", "\n", "\t\n"]))
def test_anthropic_refuses_a_prefill_ending_in_whitespace(body, space):
    """
    The final assistant turn (a prefill) ending with whitespace is refused; the same text earlier is fine.
    """
    last = body["messages"][-1]
    if isinstance(last["content"], str):
        last["content"] += space
    else:
        last["content"][-1]["text"] += space
    ctx = anthropic.read(body)
    problems = refused(anthropic, ctx)
    assert [(p.index, p.rule) for p in problems] == [(len(ctx.assembled()) - 1, "trailing-whitespace")]
    assert "strip the trailing whitespace" in str(problems[0])
    assert [(p.index, p.rule) for p in anthropic.check(body)] == [(len(ctx.assembled()) - 1, "trailing-whitespace")]
    ctx.append(Message.user("go on"))
    assert anthropic.write(ctx)["messages"][-2] == last


@given(google_bodies(), solid)
def test_gemini_refuses_a_model_turn_first(body, text):
    """
    A model turn first is refused for Gemini, naming it; a content without parts
    is refused in a payload, and left out by write (it sends nothing).
    """
    bad = {**body, "contents": [{"role": "model", "parts": [{"text": text}]}, *body["contents"]]}
    ctx = google.read(bad)
    first = len(ctx.assembled()) - len(bad["contents"])
    problems = refused(google, ctx)
    assert [(p.index, p.rule) for p in problems] == [(first, "first-not-user")]
    assert google.check(ctx) == problems
    empty = {**body, "contents": [*body["contents"], {"role": "user", "parts": []}]}
    last = len(google.read(empty).assembled()) - 1  # a payload's problems at the positions of what it reads to
    assert [(p.index, p.rule) for p in google.check(empty)] == [(last, "empty-content")]
    assert google.write(google.read(empty)) == google.write(google.read(body))


@given(chat_messages())
def test_openai_transcripts_write_for_every_format_or_are_refused_alike(messages):
    """
    Any valid Chat Completions transcript writes for every format, or is refused
    only for a turn rule of that format, and check() reports exactly what write raised.
    """
    ctx = openai_chat.read(messages)
    assert openai_chat.write(ctx) == {"messages": messages}
    for module in (anthropic, google):
        problems = module.check(ctx)
        if problems:
            assert {p.rule for p in problems} <= TURN_RULES
            assert refused(module, ctx) == problems
        else:
            module.write(ctx)


@given(chat_messages(portable=True) | responses_bodies(portable=True).map(openai_responses.read))
def test_portable_transcripts_write_everywhere(source):
    """
    What every provider accepts is written by every format without a problem.
    """
    ctx = source if isinstance(source, WorkingContext) else openai_chat.read(source)
    for module in WRITERS:
        module.write(ctx)
        assert module.check(ctx) == ()


@given(chat_messages(portable=True), st.data())
def test_a_call_in_a_user_message_is_refused_everywhere_and_repair_moves_it(messages, data):
    """
    The calls of a call-only assistant message written into the user message
    before it: every format refuses the request naming that message and the
    call ids (none writes a call where its API refuses it, or drops it), and
    ``repair=True`` writes the calls in an assistant message right after it,
    with every result still answering its call.
    """
    ctx = openai_chat.read(messages)
    msgs = ctx.assembled()
    moved = calls_moved_back(data.draw, msgs, ("user",))
    if moved is None:
        return
    tail, at = moved
    caller = msgs[at + 1]
    damaged = ctx.replace_tail(tail[len(msgs) - len(ctx.messages) :])  # the prefix's messages come first
    for module in WRITERS:
        problems = module.check(damaged)
        assert [(p.index, p.ids) for p in problems if p.rule == "call-not-assistant"] == [(at, caller.call_ids)]
        assert refused(module, damaged) == problems
        if {p.rule for p in problems} - {"call-not-assistant"}:
            continue  # a turn rule of the format the original breaks too
        body = module.write(damaged, repair=True)
        back = module.read(body).assembled()
        assert module.check(back) == ()
        asked = [i for m in back for i in m.call_ids]
        assert asked == [i for m in msgs for i in m.call_ids]
        assert [m.role for m in back if set(m.call_ids) & set(caller.call_ids)] == ["assistant"]


@pytest.mark.parametrize("module", [openai_chat, openai_responses, anthropic, google])
def test_nothing_to_send_is_refused(module):
    """
    No message at all is refused by every format; system messages alone by Anthropic and Gemini only.
    """
    assert [p.rule for p in refused(module, [])] == ["empty"]
    ctx = WorkingContext(messages=[Message.system("rules")])
    if module in (anthropic, google):
        assert [p.rule for p in refused(module, ctx)] == ["empty"]
    else:
        module.write(ctx)


def test_errors_name_the_message_and_the_fix():
    """
    The error names the context message behind a bad turn, and advises
    repair=True only when repair makes the request sendable.
    """
    ctx = WorkingContext(
        messages=[
            Message.system("rules"),
            Message.assistant("Hello!"),
            Message.user([TextBlock("  ")]),
            Message.assistant(tool_calls=[ToolCall("c1", "f")]),
        ]
    )
    with pytest.raises(ProviderError) as info:
        anthropic.write(ctx)
    text = str(info.value)
    assert "message 2: blank-text: the Anthropic turn messages[1] (written from message(s) 2)" in text
    assert "message 3: pending-at-end" in text
    assert "pass repair=True" not in text  # repair closes the call, but the blank text needs you
    fixable = ctx.replace_tail([m for m in ctx.messages if m.content != (TextBlock("  "),)])
    with pytest.raises(ProviderError, match="pass repair=True"):
        anthropic.write(fixable)
    assert () == anthropic.check(anthropic.write(fixable, repair=True))
    with pytest.raises(ProviderError) as info:
        google.write(ctx.fork().append(Message.tool("ok", call_id="c1")))
    assert [p.rule for p in info.value.problems] == ["first-not-user"]
    assert "pass repair=True" not in str(info.value)
    assert isinstance(info.value, ValueError)


# -- media: carried, or refused by name; store references keyed by their sha256 ---------

_sources = st.one_of(
    st.builds(lambda d: {"kind": "data", "data_base64": d}, st.binary(min_size=3, max_size=12).map(b64encode_text)),
    st.just({"kind": "url", "url": "https://example.com/media.bin"}),
    st.just({"kind": "file_id", "file_id": "file-media42"}),
)
_kinds = st.sampled_from(
    [
        (ImageBlock, ["image/png", "image/jpeg", None]),
        (AudioBlock, ["audio/wav", "audio/mpeg", "audio/ogg", None]),
        (VideoBlock, ["video/mp4", None]),
        (DocumentBlock, ["application/pdf", None]),
    ]
)


@st.composite
def media_blocks(draw: st.DrawFn) -> Any:
    """
    An image, audio, video or document block, by URL, file id or inline bytes.
    """
    kind, mimes = draw(_kinds)
    return kind(MediaRef(**draw(_sources), mime_type=draw(st.sampled_from(mimes))))


def token(block: Any) -> str:
    """
    What of a media block must reach the wire: its URL, file id or bytes.
    """
    media = block.media
    return {"url": media.url, "file_id": media.file_id, "data": media.data_base64}[media.kind]


def placed(block: Any, where: str) -> tuple[WorkingContext, int]:
    """
    A valid context holding *block* in a system, user, assistant or tool message, or inside a result; and its index.
    """
    call = Message.assistant("calling", tool_calls=[ToolCall("c1", "shot")])
    messages = [
        Message.system([TextBlock("rules"), block] if where == "system" else "rules"),
        Message.user([TextBlock("look"), block] if where == "user" else "look"),
        Message.assistant([TextBlock("seen"), block]) if where == "assistant" else Message.assistant("seen"),
        Message.user("now call"),
        call,
        Message("tool", [TextBlock("done"), block], tool_call_id="c1")
        if where == "tool"
        else Message.user([ToolResultBlock("c1", content=[TextBlock("done"), block])])
        if where == "result"
        else Message.tool("done", call_id="c1"),
        Message.user("thanks"),
    ]
    index = {"system": 0, "user": 1, "assistant": 2, "tool": 5, "result": 5}[where]
    return WorkingContext(messages=messages), index


@given(media_blocks(), st.sampled_from(["system", "user", "assistant", "tool", "result"]))
def test_media_is_carried_or_refused_by_name(block, where):
    """
    Every format sends a media block's URL, file id or bytes, or refuses the
    request naming the message that holds it: nothing is dropped in silence.
    """
    ctx, index = placed(block, where)
    wanted = token(block)
    for module in WRITERS:
        problems = module.check(ctx)
        if problems:
            assert {(p.index, p.rule) for p in problems} == {(index, "unsendable")}, module.__name__
            assert refused(module, ctx) == problems
            assert type(block).__name__ in problems[0].message
        else:
            sent = str(module.write(ctx))
            assert wanted in sent or wanted.replace("+", "-").replace("/", "_") in sent, module.__name__


def test_what_each_format_refuses():
    """
    Image file ids and audio other than wav and mp3 for Chat, audio and video for Anthropic and Responses,
    media of unknown MIME type for Gemini.
    """
    ogg = AudioBlock(MediaRef(kind="data", data_base64="T2dnUw==", mime_type="audio/ogg"))
    mpeg = AudioBlock(MediaRef(kind="data", data_base64="SUQz", mime_type="audio/mpeg"))
    by_id = ImageBlock(MediaRef(kind="file_id", file_id="file-9"))
    video = VideoBlock(MediaRef(kind="url", url="https://example.com/v.mp4", mime_type="video/mp4"))
    expected = {
        openai_chat: {ogg, by_id, video},
        openai_responses: {ogg, mpeg, video},
        anthropic: {ogg, mpeg, video},
        google: {by_id},  # Gemini needs a MIME type, and a bare file id names none
        langchain: set(),
    }
    for module, refused_blocks in expected.items():
        for block in (ogg, mpeg, by_id, video):
            ctx, _ = placed(block, "user")
            assert bool(module.check(ctx)) == (block in refused_blocks), (module.__name__, block)
    sent = openai_chat.write(placed(mpeg, "user")[0])["messages"][1]["content"][1]
    assert sent == {"type": "input_audio", "input_audio": {"data": "SUQz", "format": "mp3"}}


def test_request_key_stands_a_store_reference_by_its_sha256():
    """
    request_key works for store references without reading the store: equal
    for equal bytes (whatever store holds them), different for other bytes.
    """
    from workingctx.media import InMemoryMediaStore  # noqa: PLC0415

    one, two = InMemoryMediaStore(), InMemoryMediaStore()
    png = b"\x89PNG\r\n\x1a\n" + b"a" * 10

    def ctx(ref):
        """A context showing one stored image."""
        return WorkingContext(messages=[Message.user([TextBlock("see"), ImageBlock(ref)])])

    same_a, same_b = ctx(one.put(png, "image/png")), ctx(two.put(png, "image/png"))
    other = ctx(one.put(png + b"b", "image/png"))
    for module in WRITERS:
        key = module.request_key(same_a, model="m")
        assert key == module.request_key(same_b, model="m") == module.request_key(same_a.fork(), model="m")
        assert key != module.request_key(other, model="m")
        with pytest.raises(ProviderError, match="unresolved-media"):
            module.write(same_a)
    two.delete(same_b.messages[0].content[1].media)
    assert openai_chat.request_key(same_b) == openai_chat.request_key(same_a)


def test_low_level_writers_never_drop_a_store_reference():
    """
    The unchecked writers raise on a store reference instead of leaving it out.
    """
    from workingctx.media import InMemoryMediaStore  # noqa: PLC0415

    ref = InMemoryMediaStore().put(b"%PDF-1.4", "application/pdf")
    messages = [Message.user([TextBlock("read"), DocumentBlock(ref)])]
    for write in (
        openai_chat.write_messages,
        anthropic.write_messages,
        google.write_contents,
        langchain.write_messages,
    ):
        with pytest.raises(ProviderError, match="were not resolved"):
            write(messages)


@given(
    st.sampled_from(
        [
            DataBlock("application/x-trace", data_base64="AAAA"),
            DataBlock("application/x-trace", media=MediaRef(url="https://example.com/trace.bin")),
        ]
    ),
    st.sampled_from(["system", "user", "assistant", "tool", "result"]),
)
def test_data_blocks_are_refused_by_name(block, where):
    """
    No format has a part for a generic data block, inline or by reference: each refuses
    the request naming the message that holds it, never drops it in silence.
    """
    ctx, index = placed(block, where)
    for module in WRITERS:
        problems = module.check(ctx)
        assert {(p.index, p.rule) for p in problems} == {(index, "unsendable")}, module.__name__
        assert refused(module, ctx) == problems
        assert "DataBlock" in problems[0].message
