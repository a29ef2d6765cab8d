"""
No bare exceptions: every adapter path (read, read_response, check, write,
request_key; the Usage.from_* readers) fails only with the library's errors,
each naming the JSON path of the offending field and the fix, whatever shape
a payload comes in. Valid payloads of each format are mutated (a field dropped,
retyped to another JSON type, truncated or nulled) and only
:class:`~workingctx.exceptions.WorkingCtxError` may escape; a payload that
reads still writes, or is refused with :class:`~workingctx.ProviderError`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.wire_strategies import anthropic_bodies, chat_messages, google_bodies, responses_bodies
from workingctx import Usage
from workingctx.adapters import ProviderError, anthropic, google, langchain, openai_chat, openai_responses
from workingctx.exceptions import PayloadError, PayloadTypeError, WorkingCtxError

Path = tuple[Any, ...]

# -- mutations ----------------------------------------------------------------------------------------

OTHER_TYPES: list[Any] = [None, True, 0, -1, 1.5, "", "x", [], {}, [1], {"a": 1}, ["x"], [{}]]


def paths(value: Any, prefix: Path = ()) -> list[Path]:
    """
    The path of every field and item of a JSON value (the value itself excluded).
    """
    found: list[Path] = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found.append((*prefix, key))
        found.extend(paths(item, (*prefix, key)))
    return found


def at(value: Any, path: Path) -> Any:
    for key in path:
        value = value[key]
    return value


@st.composite
def mutated(draw: st.DrawFn, payloads: st.SearchStrategy[Any]) -> tuple[Any, list[str]]:
    """
    A valid payload with one to three mutations, and what was done (for the failure report).
    """
    payload = copy.deepcopy(draw(payloads))
    done: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        found = paths(payload)
        if not found:
            break
        path = draw(st.sampled_from(found))
        parent, key = at(payload, path[:-1]), path[-1]
        value = parent[key]
        kinds = ["drop", "retype", "null"]
        if isinstance(value, str | list) and value:
            kinds.append("truncate")
        kind = draw(st.sampled_from(kinds))
        if kind == "drop":
            del parent[key]
        elif kind == "null":
            parent[key] = None
        elif kind == "truncate":
            parent[key] = value[: draw(st.integers(0, len(value) - 1))]
        else:
            parent[key] = copy.deepcopy(draw(st.sampled_from([v for v in OTHER_TYPES if type(v) is not type(value)])))
        done.append(f"{kind} {list(path)}")
    return payload, done


# -- what must hold ----------------------------------------------------------------------------------


def library_errors_only(call: Callable[[], Any], done: list[str]) -> Any:
    """
    The result of *call*, or None when it raised one of the library's errors,
    which then names a path when it was a payload it could not read.
    """
    try:
        return call()
    except WorkingCtxError as error:
        refused: WorkingCtxError | None = error
    except Exception as error:  # the property: nothing else escapes
        pytest.fail(f"{type(error).__name__} escaped after {done}: {error}")
    if isinstance(refused, PayloadError) and not isinstance(refused.__cause__, WorkingCtxError):
        assert refused.path, (done, refused)  # a failure of the reader itself: located, with its fix
    return None


def reads_then_writes(module: Any, payload: Any, done: list[str]) -> None:
    """
    Reading gives a context or a library error, and leaves the payload as it
    was; a context writes or is refused with ProviderError; check and
    request_key raise nothing else either.
    """
    before = copy.deepcopy(payload)
    library_errors_only(lambda: module.check(payload), done)
    ctx = library_errors_only(lambda: module.read(payload), done)
    assert before == payload
    if ctx is None:
        return
    try:
        module.write(ctx)
        module.request_key(ctx, model="m")
    except ProviderError:
        pass
    except Exception as error:  # the property
        pytest.fail(f"write of a payload that read raised {type(error).__name__} after {done}: {error}")
    library_errors_only(lambda: module.check(ctx), done)


@given(mutated(chat_messages()))
def test_chat_payloads(case):
    """
    A mutated Chat Completions transcript reads, writes and checks with library errors only.
    """
    payload, done = case
    reads_then_writes(openai_chat, payload, done)
    reads_then_writes(openai_chat, {"model": "gpt-4o", "messages": payload}, done)


@given(mutated(anthropic_bodies()))
def test_anthropic_payloads(case):
    """
    A mutated Anthropic Messages body reads, writes and checks with library errors only.
    """
    payload, done = case
    reads_then_writes(anthropic, payload, done)


@given(mutated(responses_bodies()))
def test_responses_payloads(case):
    """
    A mutated Responses body reads, writes and checks with library errors only.
    """
    payload, done = case
    reads_then_writes(openai_responses, payload, done)


@given(mutated(google_bodies()))
def test_google_payloads(case):
    """
    A mutated Gemini body reads, writes and checks with library errors only.
    """
    payload, done = case
    reads_then_writes(google, payload, done)


@given(mutated(chat_messages()))
def test_langchain_payloads(case):
    """
    Mutated OpenAI-style message dicts (which LangChain converts) read, write
    and check with library errors only.
    """
    payload, done = case
    reads_then_writes(langchain, payload, done)


# -- responses ----------------------------------------------------------------------------------------


@st.composite
def chat_responses(draw: st.DrawFn) -> dict[str, Any]:
    assistant = next(m for m in reversed(draw(chat_messages())) if m["role"] == "assistant")
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": "stop", "message": assistant}],
        "usage": {
            "prompt_tokens": 12,
            "completion_tokens": 3,
            "total_tokens": 15,
            "prompt_tokens_details": {"cached_tokens": 4},
            "completion_tokens_details": {"reasoning_tokens": 1},
        },
    }


@st.composite
def anthropic_responses(draw: st.DrawFn) -> dict[str, Any]:
    body = draw(anthropic_bodies())
    turn = next((m for m in reversed(body["messages"]) if m["role"] == "assistant"), body["messages"][-1])
    content = turn["content"] if isinstance(turn["content"], list) else [{"type": "text", "text": turn["content"]}]
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 10,
            "output_tokens": 2,
            "cache_read_input_tokens": 5,
            "cache_creation_input_tokens": 3,
            "cache_creation": {"ephemeral_5m_input_tokens": 1, "ephemeral_1h_input_tokens": 2},
        },
    }


@st.composite
def responses_responses(draw: st.DrawFn) -> dict[str, Any]:
    body = draw(responses_bodies())
    items = body["input"] if isinstance(body["input"], list) else []
    output = [i for i in items if i.get("type") in {"reasoning", "function_call"} or i.get("role") == "assistant"]
    return {
        "id": "resp_1",
        "object": "response",
        "model": "gpt-5",
        "output": output,
        "usage": {
            "input_tokens": 10,
            "output_tokens": 2,
            "input_tokens_details": {"cached_tokens": 3},
            "output_tokens_details": {"reasoning_tokens": 1},
        },
    }


@st.composite
def google_responses(draw: st.DrawFn) -> dict[str, Any]:
    body = draw(google_bodies())
    turn = next(c for c in reversed(body["contents"]) if c["role"] == "model")
    return {
        "candidates": [{"content": turn, "finish_reason": "STOP"}],
        "usage_metadata": {"prompt_token_count": 10, "candidates_token_count": 2, "cached_content_token_count": 4},
        "model_version": "gemini-2.5-flash",
    }


RESPONSES = [
    (openai_chat, chat_responses()),
    (anthropic, anthropic_responses()),
    (openai_responses, responses_responses()),
    (google, google_responses()),
]


@pytest.mark.parametrize(("module", "responses"), RESPONSES, ids=lambda v: getattr(v, "__name__", "")[19:])
@given(data=st.data())
def test_read_response(module, responses, data):
    """
    A mutated response reads to a message or fails with a library error, and
    the message then writes as the next turn or is refused with ProviderError.
    """
    payload, done = data.draw(mutated(responses))
    message = library_errors_only(lambda: module.read_response(payload), done)
    if message is None:
        return
    try:
        module.write([*_user(), message])
    except ProviderError:
        pass
    except Exception as error:  # the property
        pytest.fail(f"write of a response that read raised {type(error).__name__} after {done}: {error}")


def _user() -> list[Any]:
    from workingctx import Message  # noqa: PLC0415

    return [Message("user", "go")]


USAGES = [
    (Usage.from_openai, {"prompt_tokens": 12, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 4}}),
    (
        Usage.from_anthropic,
        {"input_tokens": 1, "output_tokens": 2, "cache_creation": {"ephemeral_1h_input_tokens": 1}},
    ),
    (Usage.from_google, {"prompt_token_count": 10, "candidates_token_count": 2, "thoughts_token_count": 1}),
    (Usage.from_langchain, {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6, "input_token_details": {}}),
]


@pytest.mark.parametrize(("reader", "usage"), USAGES, ids=lambda v: getattr(v, "__name__", ""))
@given(data=st.data())
def test_usage_readers(reader, usage, data):
    """
    A mutated usage reads or fails with a library error.
    """
    payload, done = data.draw(mutated(st.just(usage)))
    library_errors_only(lambda: reader(payload), done)


# -- the listed cases -----------------------------------------------------------------------------------


CASES = [
    (
        openai_chat.read,
        [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"type": "function", "function": {}}]}],
        PayloadError,
        "messages[1].tool_calls[0].id is missing",
    ),
    (
        anthropic.read,
        [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}],
        PayloadError,
        "messages[0].content[0].tool_use_id is missing",
    ),
    (
        anthropic.read,
        [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]},
        ],
        PayloadError,
        "messages[1].content[0].id is missing",
    ),
    (
        anthropic.read,
        [{"role": "user", "content": "x"}, {"role": "assistant", "content": [{"type": "thinking", "signature": "s"}]}],
        PayloadError,
        "messages[1].content[0].thinking is missing",
    ),
    (
        openai_responses.read,
        [{"role": "user", "content": "x"}, {"type": "function_call", "call_id": "c", "arguments": "{}"}],
        PayloadError,
        "input[1].name is missing",
    ),
    (
        openai_responses.read,
        [{"role": "user", "content": "x"}, {"type": "reasoning", "id": "rs_1", "summary": "thought"}],
        PayloadTypeError,
        "input[1].summary",
    ),
    (
        google.read,
        {"contents": [{"role": "user", "parts": ["x"]}]},
        PayloadTypeError,
        r"contents[0].parts[0] cannot be read: a part must be a JSON object",
    ),
    (Usage.from_openai, {"prompt_tokens": "5"}, PayloadTypeError, "prompt_tokens cannot be read"),
]


@pytest.mark.parametrize(("reader", "payload", "kind", "text"), CASES)
def test_the_listed_cases_name_their_field(reader, payload, kind, text):
    """
    Each malformed payload of the issue's list is refused by one library error
    naming the field's JSON path and what to do.
    """
    with pytest.raises(kind) as info:
        reader(payload)

    assert str(info.value).startswith(text)
    assert info.value.path == text.split(" ", 1)[0]
    assert "API reference" in str(info.value) or "must be" in str(info.value)
