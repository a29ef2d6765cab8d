"""
What providers send, read and written back: call ids reused across
exchanges, Gemini calls without ids, and recorded shapes the providers
accepted (an Anthropic system turn, an assistant turn first, a Gemini reply
cut with no parts, consecutive call turns answered by one turn, a Responses
continuation, an OpenAI refusal). Every payload is in the shape the
provider's SDK types give, and every written payload is validated by them.
"""

from __future__ import annotations

import pytest
from anthropic.types import Message as AnthropicMessage
from google.genai import types as gtypes
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import ChatCompletion

from tests.adapters.sdk import ANTHROPIC, CHAT, GEMINI, RESPONSES, VALID
from tests.wire_strategies import chat_messages
from workingctx import Message, ToolCall, WorkingContext
from workingctx.adapters import anthropic, google, langchain, openai_chat, openai_responses
from workingctx.exceptions import ProviderError
from workingctx.messages import ToolResultBlock

UNIQUE = (anthropic, google, openai_responses)


def _chat_call(call_id: str, city: str) -> dict:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "weather", "arguments": f'{{"city":"{city}"}}'}}
        ],
    }


# An OpenAI-compatible server numbers its calls call_0, call_1, ... in every response.
REUSED = {
    "messages": [
        {"role": "system", "content": "You report the weather."},
        {"role": "user", "content": "Weather in Paris?"},
        _chat_call("call_0", "Paris"),
        {"role": "tool", "tool_call_id": "call_0", "content": "18C"},
        {"role": "assistant", "content": "18C in Paris."},
        {"role": "user", "content": "And Oslo?"},
        _chat_call("call_0", "Oslo"),
        {"role": "tool", "tool_call_id": "call_0", "content": "4C"},
    ]
}


def _ids(body: dict, module) -> tuple[list[str], list[str]]:
    """
    (call ids, result ids) of a written body, in order.
    """
    calls: list[str] = []
    results: list[str] = []
    if module is anthropic:
        for m in body["messages"]:
            for b in m["content"] if isinstance(m["content"], list) else ():
                if b["type"] == "tool_use":
                    calls.append(b["id"])
                elif b["type"] == "tool_result":
                    results.append(b["tool_use_id"])
    elif module is google:
        for c in body["contents"]:
            for p in c["parts"]:
                if "function_call" in p:
                    calls.append(p["function_call"]["id"])
                elif "function_response" in p:
                    results.append(p["function_response"]["id"])
    else:
        for item in body["input"]:
            if item.get("type") == "function_call":
                calls.append(item["call_id"])
            elif item.get("type") == "function_call_output":
                results.append(item["call_id"])
    return calls, results


class TestReusedIds:
    def test_chat_reads_and_writes_back_equal(self):
        """
        A Chat transcript whose two exchanges both use call_0 reads, and writes back equal with no problem.
        """
        CHAT.validate_python(REUSED["messages"])
        ctx = openai_chat.read(REUSED)
        assert REUSED == openai_chat.write(ctx)
        assert () == openai_chat.check(ctx)
        assert () == openai_chat.check(REUSED)

    def test_langchain_keeps_the_ids_as_they_are(self):
        """
        LangChain messages are no request: the reused ids go there and back unchanged.
        """
        ctx = openai_chat.read(REUSED)
        messages = langchain.write(ctx)
        assert ["call_0", "call_0"] == [m.tool_call_id for m in messages if m.type == "tool"]
        assert () == langchain.check(ctx)
        assert REUSED == openai_chat.write(langchain.read(messages))

    @pytest.mark.parametrize("module", UNIQUE, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
    def test_formats_needing_unique_ids_rekey_the_later_call(self, module):
        """
        Anthropic, Gemini and Responses get the later call (and its result) as
        call_0-2 (fresh_call_id), the same in every write; the request is valid.
        """
        ctx = openai_chat.read(REUSED)
        body = module.write(ctx)
        VALID[module](body)
        assert (["call_0", "call_0-2"], ["call_0", "call_0-2"]) == _ids(body, module)
        assert body == module.write(openai_chat.read(REUSED))
        assert () == module.check(body)
        assert () == module.check(ctx)

    def test_a_payload_that_reuses_ids_is_checked_for_what_the_provider_refuses(self):
        """
        An Anthropic, Responses or Gemini payload giving two calls one id is a
        reused-call-id problem as it stands; read and written, it is re-keyed and valid.
        """
        body = anthropic.write(openai_chat.read(REUSED))
        body["messages"][-2]["content"][0]["id"] = "call_0"
        body["messages"][-1]["content"][0]["tool_use_id"] = "call_0"
        assert ["reused-call-id"] == [p.rule for p in anthropic.check(body)]
        assert anthropic.write(anthropic.read(body)) == anthropic.write(openai_chat.read(REUSED))
        for module in (openai_responses, google):
            written = module.write(openai_chat.read(REUSED))
            assert () == module.check(written)
            as_sent = module.write(module.read(written))  # re-keyed again: one id per call
            assert as_sent == written
        items = openai_responses.write(openai_chat.read(REUSED))["input"]
        for item in items:
            if item.get("call_id") == "call_0-2":
                item["call_id"] = "call_0"
        assert ["reused-call-id"] == [p.rule for p in openai_responses.check(items)]
        contents = google.write(openai_chat.read(REUSED))["contents"]
        for content in contents:
            for part in content["parts"]:
                for key in ("function_call", "function_response"):
                    if part.get(key, {}).get("id") == "call_0-2":
                        part[key]["id"] = "call_0"
        assert ["reused-call-id"] == [p.rule for p in google.check(contents)]

    def test_read_response_maps_a_rekeyed_id_back(self):
        """
        Given the context, an id in the reply that write gave a re-keyed call is the context's own id again.
        """
        ctx = openai_chat.read({"messages": REUSED["messages"][:-1]})  # the second call_0 waits for its result
        reply = AnthropicMessage.model_validate(
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "tool_use", "id": "call_0-2", "name": "weather", "input": {"city": "Oslo"}}],
                "stop_reason": "tool_use",
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 5},
            }
        )
        assert ("call_0",) == anthropic.read_response(reply, context=ctx).call_ids
        assert ("call_0-2",) == anthropic.read_response(reply).call_ids
        responses_reply = {
            "output": [{"type": "function_call", "call_id": "call_0-2", "name": "weather", "arguments": "{}"}]
        }
        assert ("call_0",) == openai_responses.read_response(responses_reply, context=ctx).call_ids
        gemini_reply = gtypes.GenerateContentResponse(
            candidates=[
                gtypes.Candidate(
                    content=gtypes.Content(
                        role="model", parts=[gtypes.Part(function_call=gtypes.FunctionCall(id="call_0-2", name="f"))]
                    )
                )
            ]
        )
        assert ("call_0",) == google.read_response(gemini_reply, context=ctx).call_ids


def _gemini_reply(*calls: tuple[str, dict], finish: str = "STOP") -> dict:
    """
    A GenerateContentResponse whose function calls carry no id, as the SDK dumps it.
    """
    response = gtypes.GenerateContentResponse(
        candidates=[
            gtypes.Candidate(
                finish_reason=finish,
                content=gtypes.Content(
                    role="model",
                    parts=[gtypes.Part(function_call=gtypes.FunctionCall(name=n, args=a)) for n, a in calls],
                ),
            )
        ],
        model_version="gemini-2.5-flash",
    )
    return response.model_dump(mode="json", exclude_none=True)


class TestGeminiIds:
    CITIES = ("Paris", "Oslo", "Lima", "Pune", "Kyiv")

    def _loop(self, *, with_context: bool, same_reply: bool = False) -> WorkingContext:
        ctx = WorkingContext(messages=[Message.system("You report the weather."), Message.user("Weather, please.")])
        for turn, city in enumerate(self.CITIES):
            reply = _gemini_reply(("weather", {"city": "Paris" if same_reply else city}), ("time", {"turn": turn}))
            message = google.read_response(reply, context=ctx) if with_context else google.read_response(reply)
            ctx = ctx.append(message)
            for call_id in message.call_ids:
                ctx = ctx.append(Message.tool(f"{city}: fine", call_id=call_id))
            body = google.write(ctx)  # the request of the next turn
            GEMINI.validate_python(body["contents"])
            assert all("id" not in p.get("function_call", {}) for c in body["contents"] for p in c["parts"])
        return ctx

    def test_a_five_turn_loop_with_context_never_repeats_an_id(self):
        """
        Five replies whose calls carry no id, each read with the context: ten calls, ten ids, numbered on.
        """
        ctx = self._loop(with_context=True)
        ids = [i for m in ctx.messages for i in m.call_ids]
        assert [f"gemini-call-{n}" for n in range(1, 11)] == ids
        for module in (anthropic, openai_chat, openai_responses, google):
            VALID[module](module.write(ctx))
            assert () == module.check(ctx)

    def test_without_context_ids_follow_the_content(self):
        """
        Without the context, different replies give different ids; the same
        reply twice gives its id twice, a reused id every writer handles.
        """
        ctx = self._loop(with_context=False)
        ids = [i for m in ctx.messages for i in m.call_ids]
        assert len(ids) == len(set(ids)) == 10
        again = self._loop(with_context=False, same_reply=True)
        assert () == anthropic.check(again)
        calls, results = _ids(anthropic.write(again), anthropic)
        assert len(set(calls)) == 10
        assert calls == results


class TestRecordedShapes:
    def test_anthropic_system_turn_inside_messages(self):
        """
        A system message inside messages (the SDK's SystemMessageParam) reads,
        writes back equal, takes a follow-up turn, and moves to the nearest shape elsewhere.
        """
        body = {
            "system": "You are a careful assistant.",
            "messages": [
                {"role": "user", "content": "Summarise the log."},
                {"role": "assistant", "content": "It shows two restarts."},
                {"role": "system", "content": "The user is an operator; be precise."},
                {"role": "user", "content": "When?"},
            ],
        }
        ANTHROPIC.validate_python(body["messages"])
        ctx = anthropic.read(body)
        assert body == anthropic.write(ctx)
        assert () == anthropic.check(body)
        follow = ctx.fork().append(Message.assistant("At 09:12 and 09:40.")).append(Message.user("Why?"))
        ANTHROPIC.validate_python(anthropic.write(follow)["messages"])
        assert {"role": "system", "content": "The user is an operator; be precise."} in openai_chat.write(ctx)[
            "messages"
        ]
        contents = google.write(ctx)["contents"]
        assert "<system>The user is an operator; be precise.</system>" in str(contents)

    def test_anthropic_assistant_turn_first(self):
        """
        An assistant greeting first, which Anthropic accepted: reads, writes back equal, takes a follow-up turn.
        """
        body = {
            "messages": [
                {"role": "assistant", "content": "Hello! How can I help?"},
                {"role": "user", "content": "Disk usage?"},
            ]
        }
        ctx = anthropic.read(body)
        assert body == anthropic.write(ctx)
        follow = ctx.fork().append(Message.assistant("41% used.")).append(Message.user("Thanks"))
        ANTHROPIC.validate_python(anthropic.write(follow)["messages"])
        assert ["first-not-user"] == [p.rule for p in google.check(ctx)]

    @pytest.mark.parametrize("finish", ["MAX_TOKENS", "SAFETY"])
    @pytest.mark.parametrize("parts", [None, [{"text": ""}]])
    def test_gemini_reply_with_nothing_in_it(self, finish, parts):
        """
        A reply cut with no parts (or one empty text part) reads as an empty
        message with its finish reason; the writer leaves it out, as it sends
        nothing, and the conversation goes on.
        """
        reply = {
            "candidates": [
                {"finish_reason": finish, "content": {"role": "model", **({} if parts is None else {"parts": parts})}}
            ],
            "model_version": "gemini-2.5-flash",
        }
        gtypes.GenerateContentResponse.model_validate(reply)
        ctx = WorkingContext(messages=[Message.user("Tell me a story.")])
        message = google.read_response(reply, context=ctx)
        assert finish == message.metadata["finish_reason"]
        ctx = ctx.append(message).append(Message.user("Go on."))
        body = google.write(ctx)
        GEMINI.validate_python(body["contents"])
        assert [{"role": "user", "parts": [{"text": "Tell me a story."}, {"text": "Go on."}]}] == body["contents"]
        for module in (anthropic, openai_chat, openai_responses):
            VALID[module](module.write(ctx))
            assert () == module.check(ctx)
        sent = "" if parts is None else [{"type": "text", "text": ""}]  # Chat takes an empty text
        assert {"role": "assistant", "content": sent} == openai_chat.write(ctx)["messages"][1]

    def test_consecutive_call_turns_then_one_results_turn(self):
        """
        Two assistant turns with one call each, then one user turn with both
        results: reads, writes back equal (repair too, keeping both results),
        takes a follow-up turn; Chat gets one assistant message with both calls.
        """
        body = {
            "messages": [
                {"role": "user", "content": "Weather in Paris and Oslo?"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "toolu_a", "name": "weather", "input": {"city": "Paris"}}],
                },
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "toolu_b", "name": "weather", "input": {"city": "Oslo"}}],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "18C"},
                        {"type": "tool_result", "tool_use_id": "toolu_b", "content": "4C"},
                    ],
                },
            ]
        }
        ANTHROPIC.validate_python(body["messages"])
        ctx = anthropic.read(body)
        assert body == anthropic.write(ctx)
        assert body == anthropic.write(ctx, repair=True)
        assert () == anthropic.check(body)
        follow = ctx.fork().append(Message.assistant("18C and 4C.")).append(Message.user("Thanks"))
        ANTHROPIC.validate_python(anthropic.write(follow)["messages"])
        chat = openai_chat.write(ctx)["messages"]
        CHAT.validate_python(chat)
        assert ["user", "assistant", "tool", "tool"] == [m["role"] for m in chat]
        assert ["toolu_a", "toolu_b"] == [c["id"] for c in chat[1]["tool_calls"]]
        for module in (openai_responses, google):
            VALID[module](module.write(ctx))
            assert () == module.check(ctx)
        gemini = google.write(ctx)
        assert gemini == google.write(google.read(gemini))

    def test_responses_continuation_starts_with_results(self):
        """
        A request continuing a stored response (previous_response_id) whose
        input starts with function_call_output items reads and writes back
        equal; another format refuses it naming the stored response, and
        repair=True does not throw the results away.
        """
        body = {
            "previous_response_id": "resp_68af4030592c81938ec0a5fbab4a3e9f",
            "input": [
                {"type": "function_call_output", "call_id": "call_Pq7w", "output": "18C"},
                {"type": "function_call_output", "call_id": "call_Zx3k", "output": "4C"},
            ],
        }
        RESPONSES.validate_python(body["input"])
        ctx = openai_responses.read(body)
        assert body == openai_responses.write(ctx)
        assert () == openai_responses.check(body)
        reply = {
            "output": [
                {
                    "type": "message",
                    "role": "assistant",
                    "id": "msg_1",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "18C and 4C.", "annotations": []}],
                }
            ]
        }
        follow = ctx.fork().append(openai_responses.read_response(reply)).append(Message.user("Thanks"))
        written = openai_responses.write(follow)
        RESPONSES.validate_python(written["input"])
        assert body["previous_response_id"] == written["previous_response_id"]
        for repair in (False, True):
            with pytest.raises(ProviderError, match="resp_68af4030592c81938ec0a5fbab4a3e9f") as info:
                anthropic.write(ctx, repair=repair)
            assert {"continued-result"} == {p.rule for p in info.value.problems}
            assert "repair=True" not in str(info.value)

    def test_openai_refusal(self):
        """
        A refusal reply (content null, refusal text) reads as the assistant's
        text: Chat writes it back as it came and takes the next turn; Anthropic
        and Gemini send it as text, never dropped.
        """
        completion = ChatCompletion.model_validate(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-4o-2024-08-06",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": None, "refusal": "I can't help with that."},
                    }
                ],
            }
        )
        ctx = WorkingContext(messages=[Message.user("Pick the lock.")])
        reply = openai_chat.read_response(completion)
        assert reply == openai_chat.read_response(completion, context=ctx)  # every adapter takes the context
        ctx = ctx.append(reply).append(Message.user("Then explain locks."))
        body = openai_chat.write(ctx)
        CHAT.validate_python(body["messages"])
        assert {"role": "assistant", "content": None, "refusal": "I can't help with that."} == body["messages"][1]
        assert body == openai_chat.write(openai_chat.read(body))
        turns = anthropic.write(ctx)["messages"]
        ANTHROPIC.validate_python(turns)
        assert {"role": "assistant", "content": "I can't help with that."} == turns[1]
        assert {"role": "model", "parts": [{"text": "I can't help with that."}]} == google.write(ctx)["contents"][1]


def test_results_in_one_turn_for_calls_in_two_are_no_misplaced_result():
    """
    The tool rules take consecutive call turns as one exchange; results split from their calls are still misplaced.
    """
    both = Message("user", [ToolResultBlock("a", "1"), ToolResultBlock("b", "2")])
    one = Message.assistant(tool_calls=[ToolCall("a", "f")])
    two = Message.assistant(tool_calls=[ToolCall("b", "f")])
    assert () == anthropic.check([Message.user("q"), one, two, both])
    assert {"dangling-call", "misplaced-result"} <= {
        p.rule for p in anthropic.check([Message.user("q"), one, Message.user("x"), two, both])
    }


def _numbered_per_response(messages: list[dict]) -> list[dict]:
    """
    *messages* with each assistant message's calls renamed call_0, call_1, ... (and
    their tool messages with them), as OpenAI-compatible servers number them.
    """
    out: list[dict] = []
    names: dict[str, str] = {}
    for message in messages:
        renamed = message
        if message.get("tool_calls"):
            names = {c["id"]: f"call_{k}" for k, c in enumerate(message["tool_calls"])}
            renamed = {**message, "tool_calls": [{**c, "id": names[c["id"]]} for c in message["tool_calls"]]}
        elif message["role"] == "tool":
            renamed = {**message, "tool_call_id": names[message["tool_call_id"]]}
        out.append(renamed)
    return out


def _pairing(messages: list[Message]) -> list[tuple[int, str]]:
    """
    For each result in order: the position (among all calls) of the latest earlier call with its id, and its name.
    """
    calls: list[str] = []
    latest: dict[str, int] = {}
    out: list[tuple[int, str]] = []
    for message in messages:
        out.extend((latest[call_id], calls[latest[call_id]]) for call_id in message.result_ids)
        blocks = () if isinstance(message.content, str) else message.content
        for call in [*message.tool_calls, *(b for b in blocks if hasattr(b, "args"))]:
            latest[call.id] = len(calls)
            calls.append(call.name)
    return out


@given(chat_messages(portable=True))
def test_ids_reused_in_every_response_write_to_every_format(messages):
    """
    A transcript numbering its calls call_0, call_1 in every response writes
    back equal to Chat; every other format gets unique ids (or refuses only a
    turn rule), and reading that request back pairs every result with the same call.
    """
    reused = _numbered_per_response(messages)
    ctx = openai_chat.read(reused)
    assert {"messages": reused} == openai_chat.write(ctx)
    assert () == tuple(p for p in openai_chat.check(ctx) if p.rule.endswith("call-id"))
    for module in UNIQUE:
        problems = module.check(ctx)
        if problems:  # a turn rule of that format, never an id
            assert not {p.rule for p in problems} & {"reused-call-id", "duplicate-call-id", "misplaced-result"}
            continue
        body = module.write(ctx)
        VALID[module](body)
        calls, results = _ids(body, module)
        assert len(calls) == len(set(calls)) == len(results)
        back = module.read(body).assembled()
        assert _pairing(ctx.assembled()) == _pairing(back)


@given(
    st.lists(
        st.lists(
            st.tuples(st.sampled_from(["weather", "time"]), st.sampled_from(["Paris", "Oslo"])), min_size=1, max_size=3
        ),
        min_size=1,
        max_size=8,
    )
)
def test_a_gemini_tool_loop_read_with_its_context_never_repeats_an_id(replies):
    """
    Any run of replies whose calls carry no id (the same reply again included),
    each read with the context and answered, gives every call its own id.
    """
    ctx = WorkingContext(messages=[Message.user("Go.")])
    for calls in replies:
        message = google.read_response(_gemini_reply(*((n, {"city": c}) for n, c in calls)), context=ctx)
        ctx.append(message, *(Message.tool("ok", call_id=i) for i in message.call_ids))
    ids = [i for m in ctx.messages for i in m.call_ids]
    assert sum(len(calls) for calls in replies) == len(ids) == len(set(ids))
    GEMINI.validate_python(google.write(ctx)["contents"])
