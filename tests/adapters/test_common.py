"""
OpenAI refuses a string longer than 10,485,760 characters in a request's text
("Invalid 'messages[5].content': string too long. Expected a string with
maximum length 10485760", ``string_above_max_length``), as a tool's output can
be: ``check`` and ``write`` of both OpenAI formats report it as ``text-length``.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputParam
from pydantic import TypeAdapter

from tests.wire_strategies import chat_messages, responses_bodies
from workingctx import Message, ToolCall, WorkingContext
from workingctx.adapters import ProviderError, _common, openai_chat, openai_responses

LIMIT = 10_485_760
CHAT = TypeAdapter(list[ChatCompletionMessageParam])
INPUT = TypeAdapter(ResponseInputParam)

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
    INPUT.validate_python(openai_responses.write(run("x" * LIMIT))["input"])
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


def test_long_instructions_and_a_long_input_text_are_refused_by_responses():
    """
    The instructions and a bare input text are strings of the request too.
    """
    body = {"instructions": "y" * (LIMIT + 1), "input": "hello"}
    assert [p.message.split(" holds ")[0] for p in openai_responses.check(body) if p.rule == "text-length"] == [
        "instructions"
    ]
    body = {"input": "z" * (LIMIT + 1)}
    assert [p.message.split(" holds ")[0] for p in openai_responses.check(body) if p.rule == "text-length"] == ["input"]
