"""
The turn and text rules each wire format enforces on write: what the provider
would reject is refused, naming the message and the fix, and ``check`` says
the same; what every provider accepts is written everywhere.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.wire_strategies import anthropic_bodies, blanks, chat_messages, google_bodies, responses_bodies, solid
from workingctx import Message, ToolCall, WorkingContext
from workingctx.adapters import ProviderError, anthropic, google, langchain, openai_chat, openai_responses
from workingctx.messages import TextBlock

WRITERS = (openai_chat, openai_responses, anthropic, google, langchain)
# the rules a transcript valid for OpenAI can still break for Anthropic or Gemini
TURN_RULES = {"blank-text", "trailing-whitespace", "first-not-user", "no-user-message", "empty", "empty-content"}


def refused(module, source, **options):
    """
    The problems of the ProviderError that module.write raises for source (failing if it writes).
    """
    with pytest.raises(ProviderError) as info:
        module.write(source, **options)
    return info.value.problems


@given(anthropic_bodies(), solid)
def test_anthropic_refuses_an_assistant_turn_first(body, text):
    """
    A transcript that starts with an assistant turn is refused, naming that message; check agrees.
    """
    bad = {**body, "messages": [{"role": "assistant", "content": text}, *body["messages"]]}
    ctx = anthropic.read(bad)
    problems = refused(anthropic, ctx)
    first = len(ctx.assembled()) - len(bad["messages"])
    assert [(p.index, p.rule) for p in problems] == [(first, "first-not-user")]
    assert "user turn first" in problems[0].message
    assert anthropic.check(ctx) == problems
    assert [p.rule for p in anthropic.check(bad)] == ["first-not-user"]


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
    assert [p.rule for p in anthropic.check(body)] == ["blank-text"]


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
    ctx.append(Message.user("go on"))
    assert anthropic.write(ctx)["messages"][-2] == last


@given(google_bodies(), solid)
def test_gemini_refuses_a_model_turn_first(body, text):
    """
    A model turn first is refused for Gemini, naming it; a content without parts too.
    """
    bad = {**body, "contents": [{"role": "model", "parts": [{"text": text}]}, *body["contents"]]}
    ctx = google.read(bad)
    first = len(ctx.assembled()) - len(bad["contents"])
    problems = refused(google, ctx)
    assert [(p.index, p.rule) for p in problems] == [(first, "first-not-user")]
    assert google.check(ctx) == problems
    empty = {**body, "contents": [*body["contents"], {"role": "user", "parts": []}]}
    assert [p.rule for p in google.check(empty)] == ["empty-content"]
    assert [p.rule for p in refused(google, google.read(empty))] == ["empty-content"]


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
    The error names the context message behind a bad turn, and the repair hint only when repair helps.
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
    assert "message 1: first-not-user: the Anthropic turn messages[0] (written from message(s) 1)" in text
    assert "message 2: blank-text" in text
    assert "message 3: pending-at-end" in text
    assert "pass repair=True" in text
    with pytest.raises(ProviderError) as info:
        google.write(ctx.fork().append(Message.tool("ok", call_id="c1")))
    assert [p.rule for p in info.value.problems] == ["first-not-user"]
    assert "pass repair=True" not in str(info.value)
    assert isinstance(info.value, ValueError)
