"""
The rules and repairs every wire format shares: tool-exchange problems and
``repair_messages``, the errors that advise ``repair=True``, text holding a lone
surrogate (``unencodable-text``) and OpenAI's longest string (``text-length``).
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import anthropic as anthropic_sdk
import httpx
import httpx2
import openai as openai_sdk
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.adapters.sdk import CHAT, RESPONSES, VALID
from tests.wire_strategies import chat_messages, responses_bodies
from workingctx import Message, PrefixContext, ToolCall, WorkingContext
from workingctx.adapters import ProviderError, _common, anthropic, google, langchain, openai_chat, openai_responses
from workingctx.adapters._common import (
    REPAIRED,
    check_messages,
    expect_list,
    expect_mapping,
    messages_of,
    repair_messages,
)
from workingctx.messages import ImageBlock, MediaRef, TextBlock, ToolCallBlock, ToolResultBlock
from workingctx.validity import RULES

LIMIT = 10_485_760

WRITERS = (openai_chat, openai_responses, anthropic, google, langchain)


# -- tool-exchange rules, repair and plain data ----------------------------------------------------


def test_shared_rules_and_repair():
    """
    Duplicate results are problems, a reused call id too for a provider that needs unique ids;
    repair drops orphan result blocks inside a user turn.
    """
    twice = [
        Message.assistant(tool_calls=[ToolCall("a", "f")]),
        Message.tool("1", call_id="a"),
        Message.tool("2", call_id="a"),
        Message.assistant(tool_calls=[ToolCall("a", "f")]),
        Message.tool("3", call_id="a"),
    ]
    assert {p.rule for p in check_messages(twice)} == {"duplicate-result"}
    assert {p.rule for p in check_messages(twice, provider="anthropic")} == {"duplicate-result", "reused-call-id"}
    stray = [
        Message.user("q"),
        Message("user", [ToolResultBlock("nowhere", "x"), TextBlock("hi")]),
        Message("user", [ToolResultBlock("gone")]),
    ]
    repaired = repair_messages(stray)
    assert repaired == [Message.user("q"), Message("user", [TextBlock("hi")])]
    assert check_messages([Message.assistant(tool_calls=[ToolCall("p", "f")])], allow_pending=True) == ()


def test_plain_data_errors_name_the_value():
    """
    Wrong shapes raise TypeError naming the value and what was expected.
    """
    with pytest.raises(TypeError, match="Message values, got 'x'"):
        messages_of(["x"])
    with pytest.raises(TypeError, match="got 5 of type int"):
        messages_of(5)
    with pytest.raises(TypeError, match="messages must be a list"):
        expect_list({"a": 1}, "messages")
    with pytest.raises(TypeError, match="must be a JSON object"):
        expect_mapping([1], "a part")


# -- errors that advise repair=True ----------------------------------------------------------------


# One context per rule: those repair=True fixes, and those it does not.
REPAIR_CASES = {
    "orphan-result": [Message.user("q"), Message.tool("stray", call_id="nowhere"), Message.user("go on")],
    "dangling-call": [
        Message.user("q"),
        Message.assistant(tool_calls=[ToolCall("c1", "deploy")]),
        Message.user("status?"),
    ],
    "pending-at-end": [Message.user("q"), Message.assistant(tool_calls=[ToolCall("c1", "deploy")])],
    "unencodable-text": [Message.user("cut inside an emoji \ud83d"), Message.assistant("ok"), Message.user("go on")],
    "call-not-assistant": [
        Message.user([TextBlock("q"), ToolCallBlock("c1", "deploy", {"env": "prod"})]),
        Message.tool("deployed", call_id="c1"),
        Message.user("go on"),
    ],
}
NOT_REPAIRED = {
    "misplaced-result": [
        Message.user("q"),
        Message.assistant(tool_calls=[ToolCall("c1", "f")]),
        Message.user("wait"),
        Message.tool("late", call_id="c1"),
    ],
    "duplicate-result": [
        Message.user("q"),
        Message.assistant(tool_calls=[ToolCall("c1", "f")]),
        Message.tool("one", call_id="c1"),
        Message.tool("two", call_id="c1"),
    ],
    "duplicate-call-id": [
        Message.user("q"),
        Message.assistant(tool_calls=[ToolCall("c1", "f"), ToolCall("c1", "g")]),
        Message.tool("one", call_id="c1"),
    ],
    "result-without-id": [Message.user("q"), Message("tool", "loose")],
}


class TestRepairAdvice:
    """
    Every problem whose error advises repair=True is one repair=True fixes, and repair keeps every real result.
    """

    def test_the_repaired_rules_are_the_advised_ones(self):
        """
        The cases cover every rule repair fixes.
        """
        assert set(REPAIR_CASES) == REPAIRED

    @pytest.mark.parametrize("rule", sorted(REPAIR_CASES))
    @pytest.mark.parametrize(
        "module", [openai_chat, openai_responses, anthropic, google, langchain], ids=lambda m: m.__name__
    )
    def test_advised_repair_fixes(self, module, rule):
        """
        The error names the rule and advises repair=True; repair=True then writes a request with no problem.
        """
        ctx = WorkingContext(messages=REPAIR_CASES[rule])
        with pytest.raises(ProviderError, match="pass repair=True") as info:
            module.write(ctx)
        assert rule in {p.rule for p in info.value.problems}
        body = module.write(ctx, repair=True)
        if module in VALID:
            VALID[module](body)
        assert () == module.check(body)

    @pytest.mark.parametrize("rule", sorted(NOT_REPAIRED))
    def test_no_advice_where_repair_does_not_fix(self, rule):
        """
        A problem repair does not fix is refused without advising it, and repair keeps every result.
        """
        messages = NOT_REPAIRED[rule]
        with pytest.raises(ProviderError) as info:
            openai_chat.write(messages)
        assert rule in {p.rule for p in info.value.problems}
        assert "repair=True" not in str(info.value)
        results = [m for m in messages if m.role == "tool"]
        assert all(m in repair_messages(messages) for m in results)


# -- text that cannot be encoded -------------------------------------------------------------------

LONE = "\ud83d"  # the first half of an emoji such as U+1F600, cut in two


def encoded(body: Any) -> bytes:
    """
    The bytes an SDK sends for *body*: httpx's JSON encoding, as the OpenAI and
    Anthropic clients encode it through httpx2 (the Gemini client escapes the
    surrogate instead, handing the server an escape that is no character).
    """
    return httpx.Request("POST", "https://example.invalid", json=body).content


def wire(module: Any, source: Any, **options: Any) -> Any:
    """
    The payload *module* writes, as JSON data (LangChain messages through their dumps).
    """
    written = module.write(source, **options)
    if module is langchain:
        return [m.model_dump() for m in written]
    return written


def surrogate_contexts() -> list[tuple[str, Any, int, str]]:
    """
    (where, context, message index, field) with a lone surrogate in each place a provider receives text.
    """
    user = Message("user", "hi")
    call = Message("assistant", tool_calls=[ToolCall("c1", "lookup", {"q": "ok"})])
    result = Message("tool", "done", tool_call_id="c1")
    return [
        ("text", [Message("user", f"cut {LONE}")], 0, "content"),
        (
            "system",
            WorkingContext(prefix=PrefixContext(grounding=(Message("system", f"Be {LONE}"),)), messages=[user]),
            0,
            "content",
        ),
        ("block", [Message("user", [TextBlock("a"), TextBlock(f"b{LONE}")])], 0, "content[1].text"),
        (
            "arguments",
            [user, Message("assistant", tool_calls=[ToolCall("c1", "lookup", {"q": f"x{LONE}"})]), result],
            1,
            "tool_calls[0].arguments['q']",
        ),
        (
            "call block",
            [user, Message("assistant", [ToolCallBlock("c1", "lookup", {"q": f"x{LONE}"})]), result],
            1,
            "content[0].args['q']",
        ),
        ("result", [user, call, Message("tool", f"rows: {LONE}", tool_call_id="c1")], 2, "content"),
        (
            "result block",
            [user, call, Message("user", [ToolResultBlock("c1", f"{LONE}!")])],
            2,
            "content[0].output",
        ),
        ("name", [Message("user", "hi", name=f"ann{LONE}")], 0, "name"),
        ("tool name", [user, Message("assistant", tool_calls=[ToolCall("c1", f"f{LONE}")]), result], 1, "tool_calls"),
    ]


PLACES = surrogate_contexts()


class TestUnencodableText:
    def test_the_sdk_fails_on_it_and_sends_the_repaired_request(self):
        """
        The provider SDKs really fail to send a lone surrogate (the request is
        never built), and send the repaired request (through a transport that
        answers as the provider would).
        """
        sent: list[bytes] = []

        def answer(reply: dict[str, Any]) -> httpx2.Client:
            def handle(request: httpx2.Request) -> httpx2.Response:
                sent.append(request.content)
                return httpx2.Response(200, json=reply)

            return httpx2.Client(transport=httpx2.MockTransport(handle))

        chat_reply = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-4o",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
        }
        messages_reply = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        openai_client = openai_sdk.OpenAI(api_key="k", max_retries=0, http_client=answer(chat_reply))
        anthropic_client = anthropic_sdk.Anthropic(api_key="k", max_retries=0, http_client=answer(messages_reply))
        source = [Message("user", f"cut {LONE}")]
        raw = {"messages": [{"role": "user", "content": f"cut {LONE}"}]}

        with pytest.raises(UnicodeEncodeError, match="surrogates not allowed"):
            openai_client.chat.completions.create(model="gpt-4o", **raw)
        with pytest.raises(UnicodeEncodeError, match="surrogates not allowed"):
            anthropic_client.messages.create(model="claude-sonnet-4-5", max_tokens=8, **raw)
        assert [] == sent

        openai_client.chat.completions.create(model="gpt-4o", **openai_chat.write(source, repair=True))
        anthropic_client.messages.create(
            model="claude-sonnet-4-5", max_tokens=8, **anthropic.write(source, repair=True)
        )
        assert 2 == len(sent)
        assert all("cut \ufffd".encode() in body for body in sent)

    @pytest.mark.parametrize("module", WRITERS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
    @pytest.mark.parametrize(("where", "source", "index", "field"), PLACES, ids=[p[0] for p in PLACES])
    def test_check_names_it_write_refuses_and_repair_replaces_it(self, module, where, source, index, field):
        """
        Wherever a provider receives it, the surrogate is a problem naming the
        message, the field and the offset; write refuses it; repair=True puts
        U+FFFD in its place and the payload encodes.
        """
        problems = [p for p in module.check(source) if p.rule == "unencodable-text"]

        assert [index] == [p.index for p in problems], where
        assert problems[0].message.startswith(field), problems[0].message
        assert "at character" in problems[0].message
        assert "repair=True" in problems[0].message
        with pytest.raises(ProviderError, match="unencodable-text"):
            module.write(source)
        if (where in {"name", "tool name"} and module is openai_chat) or (where == "tool name" and module is anthropic):
            # U+FFFD is not in a name OpenAI or Anthropic takes either
            with pytest.raises(ProviderError, match="name-format"):
                wire(module, source, repair=True)
            return
        payload = wire(module, source, repair=True)
        if where != "name" or module is langchain:  # the formats that send a message's name
            assert "\ufffd" in json.dumps(payload, ensure_ascii=False)
        assert encoded(payload)

    @given(
        text=st.text(max_size=20),
        at=st.integers(0, 20),
        half=st.sampled_from(["\ud83d", "\ude00", "\udfff", "\ud800"]),
    )
    def test_the_offset_is_the_character_position(self, text, at, half):
        """
        The offset named is the surrogate's position in the text, and the
        repaired text is the text with U+FFFD at that position.
        """
        at = min(at, len(text))
        cut = text[:at] + half + text[at:]

        (problem,) = openai_chat.check([Message("user", cut)])
        body = openai_chat.write([Message("user", cut)], repair=True)

        assert f"at character {at} " in problem.message
        assert text[:at] + "\ufffd" + text[at:] == body["messages"][0]["content"]
        assert encoded(body)

    def test_a_wire_payload_is_checked_as_read(self):
        """
        check() of a wire payload names the surrogate too (a file as recorded).
        """
        messages = [{"role": "user", "content": "ok"}, {"role": "assistant", "content": f"cut {LONE}"}]

        assert [(1, "unencodable-text")] == [(p.index, p.rule) for p in openai_chat.check(messages)]
        assert [(1, "unencodable-text")] == [(p.index, p.rule) for p in anthropic.check({"messages": messages})]

    def test_repair_keeps_the_call_consistent(self):
        """
        A call whose exact text holds the surrogate is repaired in its text and
        its arguments alike; one whose text spelled it as an escape is sent
        from the repaired arguments.
        """
        literal = ToolCall("c1", "f", arguments_json=f'{{"q": "x{LONE}"}}')
        escaped = ToolCall("c2", "f", arguments_json='{"q": "y\\ud83d"}')
        source = [
            Message("user", "go"),
            Message("assistant", tool_calls=[literal, escaped]),
            Message("tool", "1", tool_call_id="c1"),
            Message("tool", "2", tool_call_id="c2"),
        ]

        calls = openai_chat.write(source, repair=True)["messages"][1]["tool_calls"]

        assert ['{"q": "x\ufffd"}', '{"q":"y\ufffd"}'] == [c["function"]["arguments"] for c in calls]

    def test_the_rule_is_described(self):
        """
        The rule is one of RULES, applied for every provider.
        """
        description, providers = RULES["unencodable-text"]

        assert "lone surrogate" in description
        assert {"openai", "anthropic", "gemini"} == providers


@pytest.mark.parametrize("module", WRITERS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_inline_media_is_searched_for_surrogates_too(module):
    """
    Inline media's text is checked like any other text (ASCII base64 is passed
    over without being copied): a lone surrogate in it is an ``unencodable-text`` problem naming it.
    """
    image = ImageBlock(MediaRef(kind="data", data_base64="iVBORw0K\ud83d", mime_type="image/png"))
    found = [p for p in module.check([Message.user([image, TextBlock("what is it?")])]) if p.rule == "unencodable-text"]
    assert [0] == [p.index for p in found]
    assert "media.data_base64 holds the lone surrogate '\\ud83d' at character 8" in found[0].message


@pytest.mark.parametrize("module", WRITERS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
@pytest.mark.parametrize("length", [10, 256, 257, 100_000])
def test_long_text_is_searched_for_surrogates_too(module, length):
    """
    Long text (a tool's log) is checked like short text (long ASCII text is
    passed over without being copied): a lone surrogate at its end is named at its offset.
    """
    text = "x" * length + "\ud83d"
    found = [p for p in module.check([Message.user([TextBlock(text)])]) if p.rule == "unencodable-text"]
    assert [0] == [p.index for p in found]
    assert f"at character {length}" in found[0].message


# -- text longer than OpenAI takes -----------------------------------------------------------------


Text = tuple[str, Callable[[str], None]]  # where a text is, and how to set it


def _texts(fields: dict[str, Any], where: str) -> Iterator[Text]:
    """
    Each text of a written message or item (content, parts, output, arguments, input), with a setter.
    """
    for key in ("content", "output", "refusal", "arguments", "input"):
        value = fields.get(key)
        if isinstance(value, str):
            yield f"{where}.{key}", lambda text, f=fields, k=key: f.__setitem__(k, text)
        elif isinstance(value, list):
            for number, part in enumerate(value):
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    yield f"{where}.{key}[{number}].text", lambda text, p=part: p.__setitem__("text", text)
    for number, call in enumerate(fields.get("tool_calls") or ()):
        function = call.get("function") or call.get("custom")
        key = "arguments" if "function" in call else "input"
        yield (
            f"{where}.tool_calls[{number}].{'function' if 'function' in call else 'custom'}.{key}",
            lambda text, f=function, k=key: f.__setitem__(k, text),
        )


def _longest(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return max(map(_longest, value.values()), default=0)
    if isinstance(value, list):
        return max(map(_longest, value), default=0)
    return 0


@contextlib.contextmanager
def _limit(value: int) -> Iterator[None]:
    """
    The limit both formats check set to a small one, so properties run on small texts.
    """
    with mock.patch.object(_common, "TEXT_LIMIT", value), mock.patch.object(openai_responses, "TEXT_LIMIT", value):
        yield


@given(chat_messages(), st.data())
def test_one_chat_text_past_the_limit_is_the_one_problem(messages, data):
    """
    Property: in a Chat Completions payload whose texts all fit, one text made
    one character longer than the limit is reported once, at its message, by
    its path; as long as the limit, nothing is.
    """
    places = [(p, where) for p, m in enumerate(messages) for where, _ in _texts(m, f"messages[{p}]")]
    if not places:
        return
    position, where = data.draw(st.sampled_from(places))
    size = max(1, _longest(messages))
    for length, expected in ((size, []), (size + 1, [(position, where)])):
        changed = copy.deepcopy(messages)
        setter = next(s for w, s in _texts(changed[position], f"messages[{position}]") if w == where)
        setter("x" * length)
        with _limit(size):
            found = [p for p in openai_chat.check(changed) if p.rule == "text-length"]
        assert [(p.index, p.message.split(" holds ")[0]) for p in found] == expected


@given(responses_bodies(), st.data())
def test_one_responses_text_past_the_limit_is_the_one_problem(body, data):
    """
    Property: the same for a Responses body: a message's text, a call's
    output, arguments and input.
    """
    items = [] if isinstance(body.get("input"), str) else body.get("input", [])
    places = [(n, where) for n, item in enumerate(items) for where, _ in _texts(item, f"input[{n}]")]
    if not places:
        return
    number, where = data.draw(st.sampled_from(places))
    size = max(1, _longest(body))
    for length, expected in ((size, []), (size + 1, [where])):
        changed = copy.deepcopy(body)
        setter = next(s for w, s in _texts(changed["input"][number], f"input[{number}]") if w == where)
        setter("x" * length)
        with _limit(size):
            found = [p for p in openai_responses.check(changed) if p.rule == "text-length"]
        assert [p.message.split(" holds ")[0] for p in found] == expected


def test_a_tool_output_past_ten_mebibytes_is_refused_naming_it_and_the_fix():
    """
    A tool's output of 10,485,761 characters (a recursive listing, a log) is
    refused by both formats before sending, naming where it goes; one of
    10,485,760 is written, a body the SDK's types take.
    """
    call = ToolCall("call_1", "list_files", {"path": "."})

    def run(output: str) -> WorkingContext:
        return WorkingContext(
            messages=[
                Message("user", "What is in the repository?"),
                Message("assistant", tool_calls=(call,)),
                Message("tool", output, tool_call_id="call_1"),
            ]
        )

    CHAT.validate_python(openai_chat.write(run("x" * LIMIT))["messages"])
    RESPONSES.validate_python(openai_responses.write(run("x" * LIMIT))["input"])
    too_long = run("x" * (LIMIT + 1))
    with pytest.raises(ProviderError, match=r"messages\[2\]\.content holds 10,485,761 characters") as chat:
        openai_chat.write(too_long)
    with pytest.raises(ProviderError, match=r"input\[2\]\.output holds 10,485,761 characters") as responses:
        openai_responses.write(too_long)
    for refused in (chat.value, responses.value):
        assert "text-length" in str(refused)
        assert "at most 10,485,760" in str(refused)
        assert "cut it" in str(refused)
    assert [p.index for p in openai_chat.check(too_long) if p.rule == "text-length"] == [2]
