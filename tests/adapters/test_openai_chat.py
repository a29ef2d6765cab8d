"""
The Chat Completions adapter: lossless round trips validated by the SDK's own
types, checks, repair, request keys and responses.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionCustomToolParam,
    ChatCompletionMessage,
    ChatCompletionMessageCustomToolCall,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
)
from openai.types.chat.chat_completion import Choice
from openai.types.chat.chat_completion_message_custom_tool_call import Custom
from openai.types.chat.chat_completion_message_function_tool_call import Function
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from pydantic import TypeAdapter

from tests.wire_strategies import chat_messages
from workingctx import Message, MessageContextManager, TokenBudgetContextManager, ToolCall, WorkingContext
from workingctx.adapters import ProviderError, openai_chat
from workingctx.messages import ProviderBlock, TextBlock
from workingctx.serialization import from_json, to_json
from workingctx.validity import check_messages

MESSAGES = TypeAdapter(list[ChatCompletionMessageParam])


def valid(messages):
    """
    Validate *messages* with the SDK's own param types; return them.
    """
    MESSAGES.validate_python(messages)
    return messages


@given(chat_messages())
def test_round_trip_is_exact(messages):
    """
    write(read(p)) == p for every generated transcript the SDK accepts.
    """
    body = {"messages": valid(messages)}
    assert openai_chat.write(openai_chat.read(body)) == body


@given(chat_messages())
def test_round_trip_through_a_snapshot_and_json(messages):
    """
    A context read from the wire survives freezing and JSON and writes the same payload.
    """
    ctx = openai_chat.read(valid(messages))
    back = from_json(to_json(ctx.freeze()), type(ctx.freeze()))
    assert openai_chat.write(back) == {"messages": messages}


def test_developer_role_and_null_content():
    """
    A developer message lands in the prefix as a system message that is sent back as developer.
    """
    ctx = openai_chat.read([{"role": "developer", "content": "be brief"}, {"role": "user", "content": "hi"}])
    assert [m.role for m in ctx.prefix.grounding] == ["system"]
    assert openai_chat.write(ctx)["messages"][0] == {"role": "developer", "content": "be brief"}


def test_argument_text_byte_for_byte():
    """
    Argument strings are sent back exactly as the model wrote them.
    """
    raw = '{ "b" : 1,\n  "a": [1, 2] }'
    body = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": raw}}],
        },
        {"role": "tool", "tool_call_id": "c", "content": "ok"},
    ]
    out = openai_chat.write(openai_chat.read(body))["messages"]
    assert out[1]["tool_calls"][0]["function"]["arguments"] == raw


def test_write_raises_every_problem_and_repair_fixes_them():
    """
    An orphan result and an unanswered call are both listed; repair=True drops and closes them.
    """
    messages = [
        Message.user("go"),
        Message("tool", "stray", tool_call_id="nowhere"),
        Message.assistant(tool_calls=[ToolCall("c1", "f")]),
        Message.user("next"),
    ]
    with pytest.raises(ProviderError) as info:
        openai_chat.write(WorkingContext(messages=messages))
    rules = sorted(p.rule for p in info.value.problems)
    assert rules == ["dangling-call", "orphan-result"]
    assert isinstance(info.value, ValueError)
    assert openai_chat.check(messages) == info.value.problems
    out = valid(openai_chat.write(WorkingContext(messages=messages), repair=True)["messages"])
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "user"]
    assert out[2]["tool_call_id"] == "c1"
    assert openai_chat.check(openai_chat.read(out)) == ()


def test_request_key_ignores_what_is_not_sent():
    """
    Ids, metadata, usage and notes never change the key; content and fields do.
    """
    a = WorkingContext(messages=[Message.user("hi", id="a1")]).note("k", 1)
    b = WorkingContext(messages=[Message("user", "hi", id="b2", metadata={"x": 1})])
    assert a.digest() != b.digest()
    assert openai_chat.request_key(a, model="gpt-5") == openai_chat.request_key(b, model="gpt-5")
    assert openai_chat.request_key(a, model="gpt-5") != openai_chat.request_key(a, model="gpt-5-mini")
    assert openai_chat.request_key(a) != openai_chat.request_key(WorkingContext(messages=[Message.user("hi!")]))


def test_read_response_from_sdk_object():
    """
    A ChatCompletion object gives the assistant message, its usage and the model.
    """
    completion = ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-5",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
                        ],
                    },
                }
            ],
            "usage": {
                "prompt_tokens": 120,
                "completion_tokens": 8,
                "total_tokens": 128,
                "prompt_tokens_details": {"cached_tokens": 100},
                "completion_tokens_details": {"reasoning_tokens": 5},
            },
        }
    )
    message = openai_chat.read_response(completion)
    assert message.tool_calls[0].arguments == {"a": 1}
    assert message.usage is not None
    assert (message.usage.input_tokens, message.usage.cache_read_tokens, message.usage.reasoning_tokens) == (20, 100, 5)
    assert message.metadata["model"] == "gpt-5"


# -- custom tool calls ---------------------------------------------------------------------

REQUEST = TypeAdapter(CompletionCreateParamsNonStreaming)
GRAMMAR_TOOL = ChatCompletionCustomToolParam(
    type="custom", custom={"name": "sql", "description": "Runs one SQL query", "format": {"type": "text"}}
)


def request(body):
    """
    Validate *body* as a whole Chat Completions request declaring the custom tool; return it.
    """
    REQUEST.validate_python({"model": "gpt-5", "tools": [GRAMMAR_TOOL], **body})
    return body


def custom_call(call_id, text="SELECT 1"):
    return ChatCompletionMessageCustomToolCall(
        id=call_id, type="custom", custom=Custom(name="sql", input=text)
    ).model_dump(mode="json")


def function_call(call_id):
    return ChatCompletionMessageFunctionToolCall(
        id=call_id, type="function", function=Function(name="weather", arguments='{"city": "Oslo"}')
    ).model_dump(mode="json")


@given(chat_messages(custom=True))
def test_custom_tool_calls_round_trip_exactly(messages):
    """
    Transcripts whose assistants call custom tools beside functions (their
    input free text) are written back as they were read, through a snapshot
    and JSON too.
    """
    body = {"messages": valid(messages)}
    ctx = openai_chat.read(body)
    assert request(openai_chat.write(ctx)) == body
    back = from_json(to_json(ctx.freeze()), type(ctx.freeze()))
    assert openai_chat.write(back) == body


def test_a_custom_tool_call_is_read_as_the_responses_custom_call_and_pairs_with_its_result():
    """
    A custom tool call is the Responses ``custom_tool_call`` workingctx holds
    OpenAI's custom calls as: a call with an id, answered by its tool message,
    in order with the function calls beside it and the text before them.
    """
    messages = [
        {"role": "user", "content": "How many users, and the weather?"},
        {"role": "assistant", "content": "Looking.", "tool_calls": [custom_call("call_a"), function_call("call_b")]},
        {"role": "tool", "tool_call_id": "call_a", "content": "42"},
        {"role": "tool", "tool_call_id": "call_b", "content": "rain"},
        {"role": "assistant", "content": "42 users; rain."},
    ]
    ctx = openai_chat.read(valid(messages))
    asking = ctx.messages[1]
    assert asking.content[0] == TextBlock("Looking.")
    assert asking.content[1] == ProviderBlock(
        "openai_responses", {"type": "custom_tool_call", "call_id": "call_a", "name": "sql", "input": "SELECT 1"}
    )
    assert [c.id for c in asking.tool_calls] == ["call_b"]
    assert asking.call_ids == ("call_b", "call_a")
    assert check_messages(list(ctx.assembled())) == ()
    assert request(openai_chat.write(ctx)) == {"messages": messages}
    assert openai_chat.check(messages) == ()


def test_a_custom_tool_call_without_its_result_is_pending_or_dangling():
    """
    The validity rules treat a custom call as a call: unanswered at the end it
    is pending (and write refuses it), with messages after it it dangles.
    """
    asking = {"role": "assistant", "content": None, "tool_calls": [custom_call("call_a")]}
    pending = openai_chat.read([{"role": "user", "content": "count"}, asking])
    assert check_messages(pending.messages, allow_pending=True) == ()
    assert [(p.rule, p.ids) for p in check_messages(pending.messages)] == [("pending-at-end", ("call_a",))]
    with pytest.raises(ProviderError, match="pending-at-end"):
        openai_chat.write(pending)
    dangling = [{"role": "user", "content": "count"}, asking, {"role": "user", "content": "well?"}]
    assert [(p.index, p.rule) for p in openai_chat.check(dangling)] == [(1, "dangling-call")]
    assert [(p.rule, p.ids) for p in check_messages(openai_chat.read(dangling).messages)] == [
        ("dangling-call", ("call_a",))
    ]
    orphan = [{"role": "user", "content": "count"}, {"role": "tool", "tool_call_id": "call_a", "content": "42"}]
    assert [p.rule for p in openai_chat.check(orphan)] == ["orphan-result"]


def test_read_response_keeps_custom_tool_calls():
    """
    A completion whose message calls a custom tool gives an assistant message
    holding the call, in order with the function calls; with their results
    appended they are written back as the API sent them.
    """
    completion = ChatCompletion(
        id="chatcmpl-1",
        object="chat.completion",
        created=0,
        model="gpt-5",
        choices=[
            Choice(
                index=0,
                finish_reason="tool_calls",
                message=ChatCompletionMessage(
                    role="assistant",
                    content=None,
                    tool_calls=[
                        ChatCompletionMessageCustomToolCall.model_validate(custom_call("call_a")),
                        ChatCompletionMessageFunctionToolCall.model_validate(function_call("call_b")),
                    ],
                ),
            )
        ],
    )
    message = openai_chat.read_response(completion)
    assert message.metadata["model"] == "gpt-5"
    ctx = WorkingContext(messages=[Message.user("count, and the weather")]).append(message)
    assert [(p.rule, p.ids) for p in check_messages(list(ctx.assembled()))] == [
        ("pending-at-end", ("call_b", "call_a"))
    ]
    ctx = ctx.append(Message("tool", "42", tool_call_id="call_a"), Message("tool", "rain", tool_call_id="call_b"))
    written = request(openai_chat.write(ctx))["messages"]
    # the SDK object leaves its null content out, and so does the message written from it
    assert written[1] == {"role": "assistant", "tool_calls": [custom_call("call_a"), function_call("call_b")]}
    assert written[2:] == [
        {"role": "tool", "tool_call_id": "call_a", "content": "42"},
        {"role": "tool", "tool_call_id": "call_b", "content": "rain"},
    ]


def test_a_malformed_custom_tool_call_is_named():
    """
    A custom call without its name or input text is refused with what it lacks and its shape.
    """
    broken = {"id": "call_a", "type": "custom", "custom": {"name": "sql"}}
    with pytest.raises(ValueError, match=r"custom tool call needs an id, a name and an input text") as info:
        openai_chat.read([{"role": "assistant", "content": None, "tool_calls": [broken]}])
    assert '"custom": {"name"' in str(info.value)


def test_merged_siblings_reusing_a_custom_call_id_are_rekeyed_with_their_results():
    """
    Two forks whose custom calls share an id merge with the second call and
    its tool message renamed together, and the merge writes as a valid request.
    """

    def exchange(text):
        asking = {"role": "assistant", "content": None, "tool_calls": [custom_call("dup", text)]}
        answer = {"role": "tool", "tool_call_id": "dup", "content": text}
        return openai_chat.read([{"role": "user", "content": text}, asking, answer]).messages

    parent = WorkingContext(messages=[Message.user("start"), Message("assistant", "ok")])
    one = parent.fork().append(*exchange("1"), Message("assistant", "1"))
    two = parent.fork().append(*exchange("2"), Message("assistant", "2"))
    parent.merge(one, mode="delta").merge(two, mode="delta")
    written = request(openai_chat.write(parent))["messages"]
    calls = [(c["id"], c["custom"]["input"]) for m in written for c in m.get("tool_calls", ())]
    results = [(m["tool_call_id"], m["content"]) for m in written if m["role"] == "tool"]
    assert calls == results == [("dup", "1"), ("dup-2", "2")]


def test_fields_of_a_custom_call_beside_its_own_are_kept():
    """
    Keys a custom call carries beside id, type and custom (and its ``custom``
    beside name and input), as OpenAI-compatible servers add them, go back as they came.
    """
    odd = {**custom_call("call_a"), "index": 0}
    odd["custom"] = {**odd["custom"], "format": "text"}
    messages = [
        {"role": "user", "content": "count"},
        {"role": "assistant", "content": "", "tool_calls": [function_call("call_b"), odd]},
        {"role": "tool", "tool_call_id": "call_b", "content": "rain"},
        {"role": "tool", "tool_call_id": "call_a", "content": "42"},
    ]
    assert openai_chat.write(openai_chat.read(messages)) == {"messages": messages}


@given(chat_messages(custom=True), st.integers(0, 4000), st.integers(0, 8))
def test_trimmed_transcripts_keep_each_custom_call_with_its_result(messages, budget, turns):
    """
    However a transcript with custom tool calls is trimmed (by tokens or by
    turns), each call kept has its tool message and each tool message its
    call: the request is written without repair, and the SDK takes it.
    """
    for manager in (TokenBudgetContextManager(budget + 1), MessageContextManager(max_messages=turns)):
        ctx = WorkingContext(messages=openai_chat.read_messages(messages))
        manager.trim_context(ctx)
        written = valid(openai_chat.write(ctx)["messages"])
        asked = [c["id"] for m in written for c in m.get("tool_calls") or ()]
        assert [m["tool_call_id"] for m in written if m["role"] == "tool"] == asked


class TestAssistantTurnsJoined:
    """
    An assistant message right after one that calls is the same exchange for the
    rules (Anthropic and Gemini join consecutive turns), so Chat Completions, which
    wants a call's results right after the message making it, gets them as one.
    """

    def test_text_and_calls_after_a_call_join_its_message(self):
        """
        A second assistant message with text and a call: one Chat message holding
        both calls, the text, then the results.
        """
        messages = [
            Message.user("start"),
            Message("assistant", "first", tool_calls=(ToolCall("b", "f", {}),)),
            Message("assistant", (TextBlock("then"),), tool_calls=(ToolCall("a", "g", {}),)),
            Message.tool("ra", call_id="a"),
            Message.tool("rb", call_id="b"),
        ]
        assert openai_chat.check(messages) == ()
        written = valid(openai_chat.write(messages)["messages"])
        assert [m["role"] for m in written] == ["user", "assistant", "tool", "tool"]
        assert [c["id"] for c in written[1]["tool_calls"]] == ["b", "a"]
        assert written[1]["content"] == [{"type": "text", "text": "first"}, {"type": "text", "text": "then"}]

    def test_a_message_whose_only_call_is_left_out_joins_the_call_before_it(self):
        """
        A Responses computer call, which Chat leaves out, in the assistant message
        after a function call: its text joins the call's message, the result after both.
        """
        computer = {
            "type": "computer_call",
            "call_id": "c",
            "id": "cu_1",
            "action": {"type": "screenshot"},
            "pending_safety_checks": [],
            "status": "completed",
        }
        messages = [
            Message.user("start"),
            Message("assistant", (), tool_calls=(ToolCall("b", "f", {}),)),
            Message("assistant", (TextBlock("looking"), ProviderBlock("openai_responses", computer))),
            Message.tool("rb", call_id="b"),
        ]
        assert openai_chat.check(messages) == ()
        written = valid(openai_chat.write(messages)["messages"])
        assert [m["role"] for m in written] == ["user", "assistant", "tool"]
        assert written[1]["content"] == [{"type": "text", "text": "looking"}]


long_ids = st.text(st.characters(codec="utf-8"), min_size=1, max_size=90)


@given(ids=st.lists(long_ids, min_size=1, max_size=4, unique=True), again=st.booleans())
def test_call_ids_longer_than_openai_takes_are_written_within_its_limit(ids, again):
    """
    OpenAI refuses a tool call id of more than 40 characters
    (``string_above_max_length``): such an id is written under a 40-character
    name, the same for the call and its result and in every request, and
    distinct ids stay distinct; an id within the limit is written as it is.
    A payload holding such an id is a ``check`` problem.
    """
    ctx = WorkingContext()
    ctx.append(Message("user", "go"))
    ctx.append(Message("assistant", "", tool_calls=[ToolCall(i, "f", {}) for i in ids]))
    ctx.extend(Message("tool", f"r{n}", tool_call_id=i) for n, i in enumerate(ids))
    if again:  # a second exchange reusing the ids
        ctx.append(Message("assistant", "", tool_calls=[ToolCall(i, "g", {}) for i in ids]))
        ctx.extend(Message("tool", f"s{n}", tool_call_id=i) for n, i in enumerate(ids))
    assert openai_chat.check(ctx) == ()
    body = openai_chat.write(ctx)
    assert body == openai_chat.write(ctx)
    messages = valid(body["messages"])
    calls = [c["id"] for m in messages for c in m.get("tool_calls") or ()]
    results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert calls == results
    assert all(len(i) <= openai_chat.ID_LIMIT for i in calls)
    written = dict(zip([c.id for m in ctx.messages for c in m.tool_calls], calls, strict=True))
    assert all(new == old for old, new in written.items() if len(old) <= openai_chat.ID_LIMIT)
    assert len(set(written.values())) == len(ids)
    assert openai_chat.check(body) == ()
    raw = openai_chat.write(ctx)
    for m in raw["messages"]:
        for c in m.get("tool_calls") or ():
            c["id"] = next(old for old, new in written.items() if new == c["id"])
        if m["role"] == "tool":
            m["tool_call_id"] = next(old for old, new in written.items() if new == m["tool_call_id"])
    flagged = {i for p in openai_chat.check(raw) if p.rule == "id-length" for i in p.ids}
    assert flagged == {i for i in ids if len(i) > openai_chat.ID_LIMIT}


@given(speaker=st.text(max_size=70), function=st.text(min_size=1, max_size=70))
def test_names_openai_refuses_are_problems_naming_them(speaker, function):
    """
    OpenAI takes a speaker's name and a called function's name only as 1 to
    64 letters, digits, ``_`` and ``-`` (``invalid_value`` otherwise): each
    other name is a ``name-format`` problem naming where it is, and ``write``
    refuses it; names it takes are written as they are.
    """
    ctx = WorkingContext(
        messages=[
            Message("user", "go", name=speaker),
            Message("assistant", "", tool_calls=[ToolCall("c1", function, {})]),
            Message("tool", "done", tool_call_id="c1"),
        ]
    )
    refused = {
        where
        for where, name in (("messages[0].name", speaker), ("messages[1].tool_calls[0].function.name", function))
        if not openai_chat.NAME_PATTERN.fullmatch(name)
    }
    problems = [p for p in openai_chat.check(ctx) if p.rule == "name-format"]
    assert {p.message.split(" is ")[0] for p in problems} == refused
    if refused:
        with pytest.raises(ProviderError, match="name-format"):
            openai_chat.write(ctx)
    else:
        messages = valid(openai_chat.write(ctx)["messages"])
        assert messages[0]["name"] == speaker
        assert messages[1]["tool_calls"][0]["function"]["name"] == function


@given(chat_messages(), st.data())
def test_an_empty_tool_calls_list_is_a_problem_and_left_out(messages, data):
    """
    OpenAI refuses an assistant message whose ``tool_calls`` is an empty list
    ("Invalid 'messages[1].tool_calls': empty array"), which is what the
    SDK's ``parse()`` gives for a reply that calls nothing. ``check`` reports
    each as ``empty-calls``; ``write`` leaves the list out, nothing else changed.
    """
    replies = [i for i, m in enumerate(messages) if m["role"] == "assistant" and not m.get("tool_calls")]
    chosen = data.draw(st.sets(st.sampled_from(replies)) if replies else st.just(set()))
    given_ = [{**m, "tool_calls": []} if i in chosen else m for i, m in enumerate(messages)]
    problems = openai_chat.check(valid(given_))
    assert sorted(p.index for p in problems if p.rule == "empty-calls") == sorted(chosen)
    assert openai_chat.write(openai_chat.read(given_)) == {"messages": messages}


def test_a_reply_from_the_sdk_parse_is_sent_without_its_empty_tool_calls():
    """
    The reply ``client.chat.completions.parse`` returns carries ``tool_calls=[]``;
    appended to the history as it comes, it is sent without them.
    """
    reply = ChatCompletionMessage(role="assistant", content='{"sky": "blue"}', tool_calls=[])
    history = [{"role": "user", "content": "What color is the sky?"}, reply, {"role": "user", "content": "And grass?"}]
    assert [p.rule for p in openai_chat.check(history)] == ["empty-calls"]
    sent = valid(openai_chat.write(openai_chat.read(history))["messages"])
    assert sent[1] == {"role": "assistant", "content": '{"sky": "blue"}'}
