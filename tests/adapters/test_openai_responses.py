"""
The Responses adapter: lossless round trips validated by the SDK's own types,
reasoning replayed only to OpenAI, cross-format writes and responses.
"""

from __future__ import annotations

import copy
import typing

import pytest
import typing_extensions
from anthropic.types import MessageParam
from hypothesis import given
from hypothesis import strategies as st
from openai.types.responses import Response, ResponseInputItemParam, ResponseInputParam
from pydantic import TypeAdapter

from tests.wire_strategies import anthropic_bodies, chat_messages, client_call_examples, responses_bodies
from workingctx import Message, MessageContextManager, TokenBudgetContextManager, WorkingContext
from workingctx.adapters import anthropic, openai_chat, openai_responses
from workingctx.exceptions import ProviderError
from workingctx.messages import ReasoningBlock, TextBlock, ToolResultBlock
from workingctx.validity import check_messages

INPUT = TypeAdapter(ResponseInputParam)
LIMIT = 10_485_760  # the longest string OpenAI takes in a request


def valid(body):
    """
    Validate a body's input with the SDK's own param type; return it.
    """
    if not isinstance(body["input"], str):
        INPUT.validate_python(body["input"])
    return body


@given(responses_bodies())
def test_round_trip_is_exact(body):
    """
    write(read(p)) == p: encrypted reasoning, item ids, argument text, parts, all untouched.
    """
    assert openai_responses.write(openai_responses.read(valid(body))) == body


@given(chat_messages(portable=True))
def test_chat_transcripts_write_valid_responses(messages):
    """
    A Chat Completions transcript written as Responses input validates and passes the checks.
    """
    body = valid(openai_responses.write(openai_chat.read(messages)))
    assert openai_responses.check(body) == ()


@given(anthropic_bodies())
def test_anthropic_transcripts_write_valid_responses_without_thinking(body):
    """
    Anthropic thinking never reaches OpenAI; the rest validates.
    """
    out = valid(openai_responses.write(anthropic.read(body)))
    assert all(item.get("type") != "reasoning" for item in out["input"] if isinstance(item, dict))


@given(responses_bodies(portable=True))
def test_responses_transcripts_write_valid_anthropic(body):
    """
    A Responses transcript written for Anthropic validates (encrypted reasoning dropped).
    """
    out = anthropic.write(openai_responses.read(body))
    TypeAdapter(list[MessageParam]).validate_python(out["messages"])
    assert anthropic.check(out) == ()


def _item_ids(body):
    return [item["id"] for item in body["input"] if isinstance(item, dict) and "id" in item]


@given(
    st.one_of(
        anthropic_bodies().map(anthropic.read),
        chat_messages(portable=True).map(openai_chat.read),
        responses_bodies().map(openai_responses.read),
    ),
    st.none() | st.integers(0, 3),
)
def test_every_item_id_in_a_request_is_its_own(ctx, turns):
    """
    OpenAI refuses input holding two items with one id ("Duplicate item
    found"): the output messages written from another format's text (each
    given an id, which the output message type requires) take ids no other
    item holds, also after a trim, and keep them when read back and written again.
    """
    if turns is not None:
        MessageContextManager(max_messages=turns).trim_context(ctx)
    body = valid(openai_responses.write(ctx))
    ids = _item_ids(body)
    assert len(ids) == len(set(ids))
    assert openai_responses.write(openai_responses.read(body)) == body


def test_a_message_written_from_elsewhere_never_takes_an_id_read_with_the_transcript():
    """
    An id chosen for an output message written from another format's text is
    not one an item of the transcript already holds.
    """
    read = openai_responses.read(
        [
            {"role": "user", "content": "hi"},
            {"type": "message", "id": "msg_3", "role": "assistant", "status": "completed", "content": []},
        ]
    )
    messages = [*read.messages, Message.user("and?"), Message("assistant", (TextBlock("more"),))]
    ids = _item_ids(valid(openai_responses.write(messages)))
    assert ids[0] == "msg_3"
    assert ids[1].startswith("msg_")
    assert len(ids) == len(set(ids)) == 2


def _id_required() -> dict[str, bool]:
    """
    For each input item type of the SDK that has an ``id``, whether its param type requires it.
    """
    required = {}
    for param in typing.get_args(ResponseInputItemParam):
        hints = typing_extensions.get_type_hints(param, include_extras=True)
        if "id" in hints:
            kinds = [a for a in typing.get_args(typing.get_args(hints["type"])[0]) if isinstance(a, str)]
            for kind in kinds or typing.get_args(hints["type"]):
                required[kind] = typing.get_origin(hints["id"]) is typing_extensions.Required
    return required


ID_REQUIRED = _id_required()


def test_the_items_whose_id_may_go_are_those_the_sdk_leaves_it_optional_in():
    """
    ``write`` sends a repeated id's later item without it only for an item
    type whose SDK param type leaves the id out: checked against every type.
    """
    assert {kind for kind, required in ID_REQUIRED.items() if not required} == openai_responses.ID_OPTIONAL
    assert ID_REQUIRED["reasoning"]
    assert ID_REQUIRED["message"]  # an output message needs its id


def _held_twice(items):
    """
    The ids two items of *items* hold (a local shell call's output names its call by ``id``).
    """
    seen, twice = set(), set()
    for item in items:
        ident = item.get("id")
        if isinstance(ident, str) and item.get("type") != "local_shell_call_output":
            (twice if ident in seen else seen).add(ident)
    return twice


@st.composite
def repeated_item_ids(draw):
    """
    A Responses body, and that body with items holding one id: its turns
    from some user message on sent again (concatenated histories), or one
    item given the id of another.
    """
    original = draw(responses_bodies())
    body = copy.deepcopy(original)
    if isinstance(body["input"], str):
        body["input"] = [{"role": "user", "content": body["input"]}]
    items = body["input"]
    if draw(st.booleans()):
        starts = [i for i, item in enumerate(items) if item.get("role") == "user"]
        start = draw(st.sampled_from(starts))
        body["input"] = [*items, *copy.deepcopy(items[start:])]
        return original, body
    kinds = set(ID_REQUIRED) - {"mcp_approval_request", "local_shell_call_output"}  # whose id is a call id
    holders = [i for i, item in enumerate(items) if item.get("type") in kinds]
    if len(holders) >= 2:
        first, later = sorted(draw(st.lists(st.sampled_from(holders), min_size=2, max_size=2, unique=True)))
        ident = items[first].get("id", "item_1")
        items[first] = {**items[first], "id": ident}
        items[later] = {**items[later], "id": ident}
    return original, body


@given(repeated_item_ids())
def test_no_request_holds_two_items_with_one_id(bodies):
    """
    OpenAI refuses an input holding two items with one id ("Duplicate item
    found with id ...", as concatenated histories make): ``check`` on such a
    payload reports each (``duplicate-item-id``), and every request ``write``
    sends holds each id once, validated by the SDK's own types. A later item
    whose id its type leaves optional goes without it, a later output message
    takes a ``msg_`` id of its own; an item that needs its id (reasoning, an
    item a reasoning item is paired with by its id) is refused, naming the id
    and the fix. A body without a repeated id is written back byte for byte.
    """
    original, body = bodies
    assert not _held_twice(valid(original)["input"] if not isinstance(original["input"], str) else [])
    assert openai_responses.check(original) == ()
    assert openai_responses.write(openai_responses.read(original)) == original
    valid(body)
    twice = _held_twice(body["input"])
    assert {i for p in openai_responses.check(body) if p.rule == "duplicate-item-id" for i in p.ids} == twice
    ctx = openai_responses.read(body)
    try:
        out, refused = openai_responses.write(ctx), ()
    except ProviderError as error:
        out, refused = None, error.problems
    if out is None:
        for problem in refused:
            assert problem.rule == "duplicate-item-id"
            assert set(problem.ids) <= twice
            assert repr(problem.ids[0]) in problem.message
            assert "leave out one of the two items" in problem.message
        assert openai_responses.check(ctx) == refused
        reasoned = any(item.get("type") == "reasoning" for item in body["input"])
        assert reasoned or any(ID_REQUIRED.get(item.get("type"), False) for item in body["input"])
        return
    assert refused == ()
    valid(out)
    assert not _held_twice(out["input"])
    assert openai_responses.check(out) == ()
    assert openai_responses.write(openai_responses.read(out)) == out


def test_a_repeated_reasoning_item_is_refused_naming_its_id():
    """
    A reasoning item's id goes with its encrypted content, and the call after
    it is paired with it by its own id: a history holding that turn twice is
    refused, naming both places, the id and the fix; a repeated call without
    reasoning goes without its id, which its type leaves optional.
    """
    turn = [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "1"},
    ]
    body = {"input": [{"role": "user", "content": "go"}, *turn, {"role": "user", "content": "again"}, *turn]}
    problems = [p for p in openai_responses.check(body) if p.rule != "reused-call-id"]  # write re-keys it
    assert [(p.index, p.rule, p.ids) for p in problems] == [
        (4, "duplicate-item-id", ("rs_1",)),
        (4, "duplicate-item-id", ("fc_1",)),
    ]
    assert "input[1] and input[5]" in problems[0].message
    with pytest.raises(ProviderError, match=r"input\[1\] \(written from message 1\) and input\[5\]") as raised:
        openai_responses.write(openai_responses.read(body))
    assert "'rs_1'" in str(raised.value)
    assert "leave out one of the two items" in str(raised.value)
    plain = [item for item in body["input"] if item.get("type") != "reasoning"]
    out = valid(openai_responses.write(openai_responses.read(plain)))["input"]
    assert [item.get("id") for item in out if item.get("type") == "function_call"] == ["fc_1", None]
    assert openai_responses.write(openai_responses.read(out))["input"] == out


def test_reasoning_round_trips_and_stays_with_openai():
    """
    A reasoning item keeps its encrypted content; Anthropic and Chat never see it.
    """
    items = [
        {"role": "user", "content": "q"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "s"}],
            "encrypted_content": "gAAA",
        },
        {"role": "assistant", "content": "a"},
    ]
    ctx = openai_responses.read(items)
    block = ctx.messages[1].content[0]
    assert isinstance(block, ReasoningBlock)
    assert (block.encrypted, block.provider) == ("gAAA", "openai")
    assert openai_responses.write(ctx)["input"] == items
    assert "gAAA" not in str(anthropic.write(ctx)) + str(openai_chat.write(ctx))


def test_read_response():
    """
    A Response object gives reasoning, text and calls in order, usage and the model.
    """
    response = Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "model": "gpt-5",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": [
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_1",
                    "name": "f",
                    "arguments": '{"a":1}',
                    "status": "completed",
                },
            ],
            "usage": {
                "input_tokens": 50,
                "output_tokens": 5,
                "total_tokens": 55,
                "input_tokens_details": {"cached_tokens": 40, "cache_write_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 2},
            },
        }
    )
    message = openai_responses.read_response(response)
    assert message.call_ids == ("call_1",)
    assert message.usage is not None
    assert message.usage.reasoning_tokens == 2
    follow = openai_responses.write([Message.user("q"), message, Message.tool("ok", call_id="call_1")])
    assert follow["input"][1]["encrypted_content"] == "gAAA"
    valid(follow)


def test_documents_and_errors_from_anthropic():
    """
    A base64 document is sent as the data URL the Responses API takes, an error
    result says so in its output, and raw file data read from Responses goes back as it came.
    """
    body = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "read"},
                    {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}},
                ],
            },
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": True}],
            },
        ]
    }
    items = openai_responses.write(anthropic.read(body))["input"]
    TypeAdapter(ResponseInputParam).validate_python(items)
    assert items[0]["content"][1] == {"type": "input_file", "file_data": "data:application/pdf;base64,JVBE"}
    assert items[2] == {"type": "function_call_output", "call_id": "t1", "output": "error: boom"}
    raw = {"input": [{"role": "user", "content": [{"type": "input_file", "file_data": "JVBE", "filename": "a.pdf"}]}]}
    assert openai_responses.write(openai_responses.read(raw)) == raw


# -- calls the client runs in kinds of their own ---------------------------------------------

_ANSWER = {
    "custom_tool_call": ("custom_tool_call_output", "call_id"),
    "computer_call": ("computer_call_output", "call_id"),
    "local_shell_call": ("local_shell_call_output", "id"),
    "shell_call": ("shell_call_output", "call_id"),
    "apply_patch_call": ("apply_patch_call_output", "call_id"),
    "mcp_approval_request": ("mcp_approval_response", "approval_request_id"),
    "function_call": ("function_call_output", "call_id"),
}


def _unpaired(items):
    """
    The ids of the calls in *items* that no later item answers, and of the answers no earlier call asks for.
    """
    asked: dict[str, str] = {}
    wrong = []
    for item in items:
        kind = item.get("type")
        if kind in _ANSWER:
            asked[item["id" if kind == "mcp_approval_request" else "call_id"]] = _ANSWER[kind][0]
        for answer, field in _ANSWER.values():
            if kind == answer and asked.pop(item[field], None) != kind:
                wrong.append(item[field])
    return wrong + list(asked)


@pytest.mark.parametrize("pair", client_call_examples("call_9"), ids=lambda pair: pair[0]["type"])
def test_client_calls_are_answered_by_their_own_items(pair):
    """
    A computer, custom tool, shell, patch call or MCP approval request is a
    call its output item answers: the pair reads valid and round-trips exactly;
    either one alone is refused, and a repair leaves it out, as for a function call.
    """
    call, output = pair
    user, thanks = {"role": "user", "content": "go"}, {"role": "user", "content": "thanks"}
    body = valid({"input": [user, call, output, thanks]})
    messages = openai_responses.read_messages(body)
    assert [m.role for m in messages] == ["user", "assistant", "user", "user"]
    assert messages[1].call_ids == ("call_9",)
    assert messages[2].result_ids == ("call_9",)
    assert check_messages(messages) == ()
    assert openai_responses.write(openai_responses.read(body)) == body
    first, asking, answering, last = messages
    for alone, rule in (([first, answering, last], "orphan-result"), ([first, asking, last], "dangling-call")):
        assert rule in {p.rule for p in check_messages(alone)}
        with pytest.raises(ProviderError, match=rule):
            openai_responses.write(alone)
        assert openai_responses.write(alone, repair=True) == {"input": [user, thanks]}


@pytest.mark.parametrize("pair", client_call_examples("call_9"), ids=lambda pair: pair[0]["type"])
@pytest.mark.parametrize("form", ["tool message", "result block"])
def test_a_tool_result_is_sent_only_for_a_call_it_answers(pair, form):
    """
    A tool result (a tool message, or a result block in a user message)
    answering a call of the client's own kind is sent as that kind's output
    where a tool result is one (a custom tool call's); where only an output
    item of the call's kind answers it (a computer, shell or patch call, an
    MCP approval), the request is refused as ``result-kind``, naming the
    message and the call, instead of sending a function_call_output OpenAI refuses.
    """
    call, _ = pair
    result = (
        Message.tool("done", call_id="call_9")
        if form == "tool message"
        else Message("user", (ToolResultBlock("call_9", "done"),))
    )
    messages = [*openai_responses.read_messages({"input": [{"role": "user", "content": "go"}, call]}), result]
    problems = openai_responses.check(messages)
    if call["type"] == "custom_tool_call":
        assert problems == ()
        items = valid(openai_responses.write(messages))["input"]
        assert items[2] == {"type": "custom_tool_call_output", "call_id": "call_9", "output": "done"}
        assert _unpaired(items) == []
        return
    assert [(p.index, p.rule, p.ids) for p in problems] == [(2, "result-kind", ("call_9",))]
    assert call["type"] in problems[0].message
    with pytest.raises(ProviderError, match="result-kind"):
        openai_responses.write(messages, repair=True)


_FUNCTION_PAIR = (
    {"type": "function_call", "call_id": "call_9", "name": "lookup", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_9", "output": "done"},
)


@pytest.mark.parametrize("asking", [_FUNCTION_PAIR, *client_call_examples("call_9")], ids=lambda p: p[0]["type"])
@pytest.mark.parametrize("answering", [_FUNCTION_PAIR, *client_call_examples("call_9")], ids=lambda p: p[1]["type"])
def test_an_output_item_answers_only_a_call_of_its_kind(asking, answering):
    """
    An output item naming a call of another kind (a ``custom_tool_call_output``
    for a ``function_call``, ...) is refused as ``result-kind`` naming the
    output's message and the call, as OpenAI refuses it, repair or not; an
    output of the call's own kind is sent as it came. A ``function_call_output``
    reads as a tool message, which answers a custom tool call as its own output.
    """
    call, output = asking[0], answering[1]
    body = valid({"input": [{"role": "user", "content": "go"}, call, output, {"role": "user", "content": "ok"}]})
    problems = [(p.index, p.rule, p.ids) for p in openai_responses.check(openai_responses.read(body))]
    if (call["type"], output["type"]) == ("custom_tool_call", "function_call_output"):
        assert problems == []
        written = valid(openai_responses.write(openai_responses.read(body)))["input"]
        assert written[2] == {"type": "custom_tool_call_output", "call_id": "call_9", "output": "done"}
        return
    if call["type"] == _OUTPUT_KIND[output["type"]]:
        assert problems == []
        assert openai_responses.write(openai_responses.read(body)) == body
        return
    assert (2, "result-kind", ("call_9",)) in problems
    for repair in (False, True):
        with pytest.raises(ProviderError, match="result-kind"):
            openai_responses.write(openai_responses.read(body), repair=repair)


_OUTPUT_KIND = {output: call for call, (output, _) in _ANSWER.items()}


@given(responses_bodies(), st.integers(0, 4000), st.integers(0, 8))
def test_trimmed_transcripts_keep_each_call_with_its_answer(body, budget, turns):
    """
    Property: however a transcript holding calls of every kind is trimmed (by
    tokens or by turns), each call the request keeps has its answer and each
    answer its call; the request is written without repair and is valid for the SDK.
    """
    for manager in (TokenBudgetContextManager(budget + 1), MessageContextManager(max_messages=turns)):
        ctx = WorkingContext(messages=openai_responses.read_messages(body))
        manager.trim_context(ctx)
        written = valid(openai_responses.write(ctx.messages))
        items = written["input"] if isinstance(written["input"], list) else []
        assert _unpaired(items) == []


@pytest.mark.parametrize("execution", ["client", "server"])
def test_a_tool_search_is_a_call_only_when_the_client_runs_it(execution):
    """
    A ``tool_search_call`` the client runs waits for its ``tool_search_output``;
    one the server ran is answered already, and asks for nothing.
    """
    call = {"type": "tool_search_call", "call_id": "ts_1", "arguments": {"query": "sql"}, "execution": execution}
    output = {"type": "tool_search_output", "call_id": "ts_1", "tools": [], "execution": execution}
    body = valid({"input": [{"role": "user", "content": "find a tool"}, call, output]})
    messages = openai_responses.read_messages(body)
    ids = ("ts_1",) if execution == "client" else ()
    assert (messages[1].call_ids, messages[2].result_ids) == (ids, ids)
    assert check_messages(messages) == ()
    assert openai_responses.write(openai_responses.read(body)) == body


def test_a_reused_client_call_id_is_written_under_a_fresh_name():
    """
    A custom tool call that reuses an answered call's id is written, with its
    output, under a fresh name, as a function call is: each id once per request.
    """
    items = []
    for n in range(2):
        items += [
            {"role": "user", "content": f"q{n}"},
            {"type": "custom_tool_call", "call_id": "call_0", "name": "sql", "input": f"SELECT {n}"},
            {"type": "custom_tool_call_output", "call_id": "call_0", "output": str(n)},
        ]
    written = valid(openai_responses.write(openai_responses.read({"input": items})))["input"]
    assert [i.get("call_id") for i in written] == [None, "call_0", "call_0", None, "call_0-2", "call_0-2"]
    assert [{k: v for k, v in i.items() if k != "call_id"} for i in written] == [
        {k: v for k, v in i.items() if k != "call_id"} for i in items
    ]


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


@pytest.mark.parametrize(
    ("call", "kind"),
    [
        (lambda i: {"type": "function_call", "call_id": i, "name": "f", "arguments": "{}"}, "function_call_output"),
        (lambda i: {"type": "custom_tool_call", "call_id": i, "name": "grep", "input": "x"}, "custom_tool_call_output"),
    ],
    ids=["function", "custom"],
)
def test_repair_closes_a_call_that_reuses_an_answered_id(call, kind):
    """
    A call id is a local name: ``call_0`` answered, then asked anew and left
    unanswered, is unanswered on its second use. ``repair=True`` closes (or,
    for a call of the provider's own kind, leaves out) that call, whether
    it ends the request or more follows.
    """
    answer = {"type": kind, "call_id": "call_0", "output": "y"}
    for tail in ([], [_user("q3")]):
        items = [_user("q1"), call("call_0"), answer, _user("q2"), call("call_0"), *tail]
        TypeAdapter(ResponseInputParam).validate_python(items)
        ctx = openai_responses.read(items)
        body = openai_responses.write(ctx, repair=True)
        TypeAdapter(ResponseInputParam).validate_python(body["input"])
        assert openai_responses.check(openai_responses.read(body)) == ()
        for target in (openai_chat, anthropic):
            target.write(ctx, repair=True)


def test_repair_leaves_out_the_reasoning_of_a_call_it_leaves_out():
    """
    OpenAI refuses a reasoning item with nothing after it: when ``repair=True``
    leaves out an unanswered call of the provider's own kind, the reasoning
    before it goes too.
    """
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}
    items = [_user("q"), reasoning, {"type": "custom_tool_call", "call_id": "c1", "name": "grep", "input": "x"}]
    TypeAdapter(ResponseInputParam).validate_python(items)
    body = openai_responses.write(openai_responses.read(items), repair=True)
    assert body["input"] == [_user("q")]


@pytest.mark.parametrize("role", ["user", "tool"])
def test_an_answer_built_by_hand_is_written_as_its_own_item(role):
    """
    A custom tool call's output held in a message built by hand (not read
    from Responses) is written as the item it is, not as a content part nor
    left out; text beside it follows as a message of its own.
    """
    from workingctx.messages import ProviderBlock, TextBlock  # noqa: PLC0415

    call = ProviderBlock(
        "openai_responses", {"type": "custom_tool_call", "call_id": "c1", "name": "grep", "input": "x"}
    )
    output = {"type": "custom_tool_call_output", "call_id": "c1", "output": "y"}
    tail = (TextBlock("and now?"),) if role == "user" else ()
    messages = [
        Message("user", "go"),
        Message("assistant", (call,)),
        Message(role, (ProviderBlock("openai_responses", output), *tail)),
    ]
    body = openai_responses.write(messages)
    TypeAdapter(ResponseInputParam).validate_python(body["input"])
    assert body["input"][2] == output
    if tail:
        assert body["input"][3] == {"role": "user", "content": [{"type": "input_text", "text": "and now?"}]}
    assert openai_responses.check(openai_responses.read(body)) == ()


@pytest.mark.parametrize("length", [64, 65, 120])
@pytest.mark.parametrize("example", range(len(client_call_examples("c"))))
def test_call_ids_longer_than_openai_takes_are_written_within_its_limit(length, example):
    """
    OpenAI refuses an input item's ``call_id`` of more than 64 characters:
    every kind of call and its output, read with such an id, are written with
    one 64-character name (in the key each item names it by); a payload
    holding one is a ``check`` problem.
    """
    call_id = ("call_" + "x9" * 60)[:length]
    call, output = client_call_examples(call_id)[example]
    if call.get("id", call_id) != call_id:  # an item id of its own (cu_..., lsh_...), within the limit
        call = {**call, "id": call["id"][:60]}
    body = {"input": [{"role": "user", "content": "go"}, call, output]}
    flagged = {i for p in openai_responses.check(body) if p.rule == "id-length" for i in p.ids}
    assert flagged == ({call_id} if length > openai_responses.ID_LIMIT else set())
    ctx = openai_responses.read(body)
    assert openai_responses.check(ctx) == ()
    items = openai_responses.write(ctx)["input"]
    TypeAdapter(ResponseInputParam).validate_python(items)
    keys = {
        "local_shell_call_output": "id",
        "mcp_approval_request": "id",
        "mcp_approval_response": "approval_request_id",
    }
    named = [item[keys.get(item["type"], "call_id")] for item in items[1:]]
    assert named[0] == named[1]
    assert named[0] == call_id if length <= openai_responses.ID_LIMIT else len(named[0]) == openai_responses.ID_LIMIT
    assert openai_responses.check({"input": items}) == ()


@given(responses_bodies(), st.sampled_from([False, True, None]), st.data())
def test_a_reasoning_item_sent_by_its_id_alone_with_store_false_is_a_problem(body, store, data):
    """
    With ``"store": false`` OpenAI keeps no item, so a reasoning item sent by
    its id without its ``encrypted_content`` cannot be found ("Item with id
    'rs_...' not found. Items are not persisted when `store` is set to
    false"; vercel/ai #7543, openai-agents-python #919): ``check`` on the body
    names each one, at the message read from it. Its encrypted content, or
    ``store`` left true, is what that request needs.
    """
    body = copy.deepcopy(body)
    if isinstance(body["input"], str):
        body["input"] = [{"role": "user", "content": body["input"]}]
    bare: list[str] = []
    for number, item in enumerate(body["input"]):
        if item.get("type") == "reasoning" and data.draw(st.booleans()):
            item.pop("encrypted_content", None)
            item["id"] = item.get("id") or f"rs_{number}"
            bare.append(item["id"])
        elif item.get("type") == "reasoning" and "encrypted_content" not in item:
            item["encrypted_content"] = "gAAAAB"
    if store is not None:
        body["store"] = store
    found = [p for p in openai_responses.check(valid(body)) if p.rule == "unstored-reasoning"]
    assert [p.ids for p in found] == ([(ident,) for ident in bare] if store is False else [])
    messages = openai_responses.read_messages(body)
    for problem in found:
        assert any(isinstance(block, ReasoningBlock) for block in messages[problem.index].content)
    assert [p.rule for p in openai_responses.check(body) if p.rule != "unstored-reasoning"] == [
        p.rule for p in openai_responses.check({**body, "store": True})
    ]


# -- text longer than OpenAI takes -----------------------------------------------------------------


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


@pytest.mark.parametrize("call_id", [[], {"a": 1}, 5, None])
def test_an_output_item_kept_as_it_came_is_written_back_whatever_its_call_id_holds(call_id):
    """
    A function call the reader keeps as the provider's own item (its call id
    is not text, its arguments are missing) goes back as it came, instead of
    failing the write.
    """
    item = {"type": "function_call", "call_id": call_id, "name": "lookup"}
    response = {"id": "resp_1", "object": "response", "model": "gpt-5", "output": [item]}
    body = openai_responses.write([Message("user", "go"), openai_responses.read_response(response)])
    assert [item] == body["input"][1:]
