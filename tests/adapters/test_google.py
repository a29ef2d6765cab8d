"""
The Gemini adapter: lossless round trips in the SDK's dump form, camelCase
input, thought signatures, id-less calls, cross-format writes and responses.
"""

from __future__ import annotations

import base64
import itertools
import json

import pytest
from anthropic.types import MessageParam
from google.genai import types as gtypes
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import TypeAdapter

from tests.wire_strategies import anthropic_bodies, chat_messages, google_bodies, responses_bodies
from workingctx import Message, ToolCall
from workingctx.adapters import anthropic, google, openai_chat, openai_responses
from workingctx.exceptions import PayloadError, PayloadTypeError, ProviderError
from workingctx.messages import ReasoningBlock

CONTENTS = TypeAdapter(list[gtypes.Content])


def valid(body):
    """
    Validate a body with the SDK's own types; the dump of what it read equals the body.
    """
    contents = CONTENTS.validate_python(body["contents"])
    assert [c.model_dump(mode="json", exclude_none=True) for c in contents] == body["contents"]
    if isinstance(body.get("system_instruction"), dict):
        gtypes.Content.model_validate(body["system_instruction"])
    return body


@given(google_bodies())
def test_round_trip_is_exact(body):
    """
    write(read(p)) == p: thought signatures, id-less calls and media untouched.
    """
    assert google.write(google.read(valid(body))) == body


@given(google_bodies())
def test_camel_case_reads_the_same(body):
    """
    The REST camelCase form of a body reads to the same context.
    """
    camel = {
        "contents": [
            c.model_dump(mode="json", by_alias=True, exclude_none=True)
            for c in CONTENTS.validate_python(body["contents"])
        ]
    }
    if "system_instruction" in body:
        camel["systemInstruction"] = gtypes.Content.model_validate(body["system_instruction"]).model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
    assert google.write(google.read(camel)) == body


@given(chat_messages(portable=True))
def test_chat_transcripts_write_valid_gemini(messages):
    """
    A Chat Completions transcript written for Gemini validates and passes the checks.
    """
    body = valid(google.write(openai_chat.read(messages)))
    assert google.check(body) == ()


@given(anthropic_bodies())
def test_anthropic_transcripts_write_valid_gemini(body):
    """
    An Anthropic transcript written for Gemini validates; the thinking is left out.
    """
    out = valid(google.write(anthropic.read(body)))
    assert not any(p.get("thought") for c in out["contents"] for p in c["parts"])


@given(responses_bodies(portable=True))
def test_responses_transcripts_write_valid_gemini(body):
    """
    A Responses transcript written for Gemini validates.
    """
    valid(google.write(openai_responses.read(body)))


@given(google_bodies(portable=True))
def test_gemini_transcripts_write_valid_elsewhere(body):
    """
    A Gemini transcript written for Anthropic and Chat validates, signatures left out.
    """
    out = anthropic.write(google.read(body))
    TypeAdapter(list[MessageParam]).validate_python(out["messages"])
    assert anthropic.check(out) == ()
    assert openai_chat.check(openai_chat.write(google.read(body))) == ()


def test_read_response_with_thought_signature():
    """
    A response's thought and call keep their signatures; usage counts thoughts as reasoning.
    """
    response = gtypes.GenerateContentResponse(
        model_version="gemini-3-pro",
        candidates=[
            gtypes.Candidate(
                content=gtypes.Content(
                    role="model",
                    parts=[
                        gtypes.Part(text="plan", thought=True, thought_signature=b"\x01\x02"),
                        gtypes.Part(
                            function_call=gtypes.FunctionCall(name="f", args={"a": 1}), thought_signature=b"\x03"
                        ),
                    ],
                )
            )
        ],
        usage_metadata=gtypes.GenerateContentResponseUsageMetadata(
            prompt_token_count=10, candidates_token_count=3, thoughts_token_count=2
        ),
    )
    message = google.read_response(response)
    assert message.content[0] == ReasoningBlock("plan", signature="AQI=", provider="google")
    assert message.usage is not None
    assert message.usage.reasoning_tokens == 2
    assert message.metadata["model"] == "gemini-3-pro"
    follow = google.write([Message.user("q"), message, Message.tool("ok", call_id=message.call_ids[0])])
    assert follow["contents"][1]["parts"][1] == {
        "function_call": {"name": "f", "args": {"a": 1}},
        "thought_signature": "Aw==",
    }
    assert follow["contents"][2]["parts"] == [{"function_response": {"name": "f", "response": {"result": "ok"}}}]
    valid(follow)


@given(chat_messages(portable=True))
def test_calls_from_other_providers_carry_the_bypass_signature(messages):
    """
    Every model turn of calls another provider made gets Google's validator
    bypass on its first call (Gemini 3 refuses unsigned call turns), and only
    there; signature_bypass=False sends them unsigned.
    """
    ctx = openai_chat.read(messages)
    contents = valid(google.write(ctx))["contents"]
    for content in contents:
        calls = [p for p in content["parts"] if "function_call" in p]
        signed = [p.get("thought_signature") for p in calls]
        assert signed == ([google.BYPASS_SIGNATURE] + [None] * (len(calls) - 1) if calls else [])
    plain = google.write(ctx, signature_bypass=False)["contents"]
    assert not any("thought_signature" in p for c in plain for p in c["parts"])


def test_gemini_own_unsigned_calls_stay_unsigned():
    """
    A call Gemini made without a signature (Gemini 2.x) goes back without one; a signed one keeps its own.
    """
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "weather?"}]},
            {"role": "model", "parts": [{"function_call": {"id": "c1", "name": "w", "args": {}}}]},
            {"role": "user", "parts": [{"function_response": {"id": "c1", "name": "w", "response": {"t": 1}}}]},
        ]
    }
    assert google.write(google.read(body)) == body
    mixed = google.read(body).append(
        Message.assistant(tool_calls=[ToolCall("c2", "w")]), Message.tool('{"t": 2}', call_id="c2")
    )
    parts = google.write(mixed)["contents"][3]["parts"]
    assert parts[0]["thought_signature"] == google.BYPASS_SIGNATURE


# -- dumps that keep unset fields as null ------------------------------------------------------


def null_filled(body, mode="json"):
    """
    *body* as the SDK dumps its objects without ``exclude_none``: every unset field a null.
    """
    out = {"contents": [c.model_dump(mode=mode) for c in CONTENTS.validate_python(body["contents"])]}
    if "system_instruction" in body:
        out["system_instruction"] = gtypes.Content.model_validate(body["system_instruction"]).model_dump(mode=mode)
    return out


@given(google_bodies(), st.sampled_from(["json", "python"]))
def test_null_filled_dumps_read_as_the_null_free_form(body, mode):
    """
    model_dump(mode="json") (or model_dump(), with bytes and enums) of a body's
    contents reads to the same messages as its null-free form, checks the same
    and writes the null-free form back.
    """
    nulls = null_filled(body, mode)
    assert google.read(nulls).assembled() == google.read(body).assembled()
    assert google.check(nulls) == google.check(body)
    assert valid(google.write(google.read(nulls))) == body


SDK_CONTENTS = [
    gtypes.Content(
        role="user",
        parts=[
            gtypes.Part(text="Describe these."),
            gtypes.Part(inline_data=gtypes.Blob(data=b"\xfb\xff\x00", mime_type="image/png")),
            gtypes.Part(inline_data=gtypes.Blob(data=b"RIFF", mime_type="audio/wav", display_name="a.wav")),
            gtypes.Part(file_data=gtypes.FileData(file_uri="https://example.com/a.pdf", mime_type="application/pdf")),
            gtypes.Part(file_data=gtypes.FileData(file_uri="gs://b/v.mp4", mime_type="video/mp4")),
        ],
    ),
    gtypes.Content(
        role="model",
        parts=[
            gtypes.Part(text="plan", thought=True, thought_signature=b"\x01\x02"),
            gtypes.Part(function_call=gtypes.FunctionCall(name="f", args={"a": None}), thought_signature=b"\x03"),
            gtypes.Part(function_call=gtypes.FunctionCall(id="c2", name="g")),
        ],
    ),
    gtypes.Content(
        role="user",
        parts=[
            gtypes.Part(function_response=gtypes.FunctionResponse(name="f", response={"r": None})),
            gtypes.Part(
                function_response=gtypes.FunctionResponse(
                    id="c2",
                    name="g",
                    parts=[
                        gtypes.FunctionResponsePart(
                            inline_data=gtypes.FunctionResponseBlob(data=b"\x89PNG", mime_type="image/png")
                        )
                    ],
                )
            ),
        ],
    ),
    gtypes.Content(
        role="model",
        parts=[
            gtypes.Part(executable_code=gtypes.ExecutableCode(code="print(2 + 2)", language="PYTHON")),
            gtypes.Part(code_execution_result=gtypes.CodeExecutionResult(outcome="OUTCOME_OK", output="4")),
            gtypes.Part(text="4, as run.", video_metadata=gtypes.VideoMetadata(fps=2)),
        ],
    ),
    gtypes.Content(parts=[gtypes.Part(text="Thanks.")]),
]


@pytest.mark.parametrize("dump", [{"mode": "json"}, {}], ids=["json", "python"])
def test_sdk_dumps_with_nulls_read_as_the_sdk_objects(dump):
    """
    Contents, a system instruction and a config dumped by the SDK with their
    nulls read as the objects themselves: text, media, thoughts, calls (a null
    id or args: Gemini sent none) and responses as typed blocks, code parts
    as provider blocks without nulls; nulls inside call arguments and function
    responses are the user's data and stay.
    """
    system = gtypes.Content(parts=[gtypes.Part(text="Be brief.")])
    config = gtypes.GenerateContentConfig(temperature=0.5, system_instruction=system)
    objects = google.read({"system_instruction": system, "contents": SDK_CONTENTS})
    dumped = [c.model_dump(**dump) for c in SDK_CONTENTS]
    for body in (
        {"system_instruction": system.model_dump(**dump), "contents": dumped},
        {"config": config.model_dump(**dump), "contents": dumped},
    ):
        ctx = google.read(body)
        assert ctx.assembled() == objects.assembled()
        assert google.check(body) == google.check(objects) == ()
    kinds = [[type(b).__name__ for b in m.content] for m in ctx.messages]
    assert kinds == [
        ["TextBlock", "ImageBlock", "AudioBlock", "DocumentBlock", "VideoBlock"],
        ["ReasoningBlock", "ToolCallBlock", "ToolCallBlock"],
        ["ToolResultBlock", "ToolResultBlock"],
        ["ProviderBlock", "ProviderBlock", "ProviderBlock"],
        ["TextBlock"],
    ]
    assert ctx.messages[1].content[1].args == {"a": None}
    assert ctx.messages[2].content[0].output == {"r": None}
    out = valid(google.write(ctx))
    assert out == {
        "system_instruction": system.model_dump(mode="json", exclude_none=True),
        "contents": [c.model_dump(mode="json", exclude_none=True) for c in SDK_CONTENTS],
    }
    assert out["contents"][-1] == {"parts": [{"text": "Thanks."}]}  # a null role: none sent


@pytest.mark.parametrize("dump", [{"mode": "json"}, {}], ids=["json", "python"])
def test_response_dumps_with_nulls_read_as_the_response(dump):
    """
    A GenerateContentResponse dumped with its nulls reads to the message the
    response object gives: same blocks, same call ids, usage, no null model.
    """
    response = gtypes.GenerateContentResponse(
        candidates=[gtypes.Candidate(content=SDK_CONTENTS[1], finish_reason="STOP")],
        usage_metadata=gtypes.GenerateContentResponseUsageMetadata(prompt_token_count=5, candidates_token_count=2),
    )
    message = google.read_response(response.model_dump(**dump))
    assert message == google.read_response(response)
    assert message.metadata == {"finish_reason": "STOP"}


# -- errors name the field at fault ------------------------------------------------------------


MODEL = {"role": "model", "parts": [{"text": "a later field"}]}
ERRORS = [
    ({"contents": [{"role": "user", "parts": {"text": "x"}}, MODEL]}, "contents[0].parts"),
    ({"contents": [{"role": "user", "parts": [["x"]]}, MODEL]}, "contents[0].parts[0]"),
    ({"contents": [5, MODEL]}, "contents[0]"),
    ({"contents": 5, "x": [1]}, "contents"),
    ({"contents": [{"role": "assistant", "parts": [{"text": "x"}]}, MODEL]}, "contents[0].role"),
    ({"system_instruction": {"parts": {"text": "s"}}, "contents": [MODEL]}, "system_instruction.parts"),
    ({"config": {"systemInstruction": {"parts": "s"}}, "contents": [MODEL]}, "config.systemInstruction.parts"),
    (
        {
            "contents": [
                {"role": "user", "parts": [{"text": "q"}]},
                {"role": "model", "parts": [{"function_call": {"id": 7, "name": "f", "args": {}}}]},
                {"role": "user", "parts": [{"function_response": {"id": 7, "name": "f", "response": {}}}]},
            ]
        },
        "contents[1].parts[0].function_call.id",
    ),
    (
        {"contents": [{"role": "user", "parts": [{"inline_data": {"data": 5, "mime_type": "image/png"}}]}, MODEL]},
        "contents[0].parts[0].inline_data.data",
    ),
    (
        {"contents": [{"role": "user", "parts": [{"inlineData": {"data": "AA==", "mimeType": 5}}]}, MODEL]},
        "contents[0].parts[0].inlineData.mimeType",
    ),
    (
        {
            "contents": [
                {"role": "user", "parts": [{"text": "q"}]},
                {"role": "model", "parts": [{"function_call": {"name": "f", "args": ["Paris"]}}]},
                MODEL,
            ]
        },
        "contents[1].parts[0].function_call.args",
    ),
    (
        {"contents": [{"role": "model", "parts": [{"functionCall": {"name": "f", "args": "Paris"}}]}, MODEL]},
        "contents[0].parts[0].functionCall.args",
    ),
]


@pytest.mark.parametrize(("body", "path"), ERRORS)
def test_errors_name_the_offending_field(body, path):
    """
    A malformed field is named by its own JSON path (as the payload spells
    it), never by a field read after it.
    """
    for reader in (google.read, google.check):
        with pytest.raises(PayloadError) as info:
            reader(body)
        assert info.value.path == path, str(info.value)


@given(google_bodies(), st.sampled_from([["x"], "x", 5]), st.sampled_from(["json", None]), st.data())
def test_a_malformed_part_is_named_by_its_path(body, bad, mode, data):
    """
    A part that is not a JSON object, anywhere in a generated body (null-filled
    or not), is the field an error names; so is a content's parts that is not a list.
    """
    body = null_filled(body, mode) if mode else body
    position = data.draw(st.integers(0, len(body["contents"]) - 1))
    parts = body["contents"][position]["parts"]
    index = data.draw(st.integers(0, len(parts) - 1))
    parts[index] = bad
    with pytest.raises(PayloadTypeError) as info:
        google.read(body)
    assert info.value.path == f"contents[{position}].parts[{index}]"
    body["contents"][position]["parts"] = {"text": "x"}
    with pytest.raises(PayloadTypeError) as info:
        google.read(body)
    assert info.value.path == f"contents[{position}].parts"


@pytest.mark.parametrize(
    "instruction",
    [gtypes.Part(text="Be brief."), ["Be brief.", gtypes.Part(text="Answer in French.")]],
    ids=["part", "list"],
)
@pytest.mark.parametrize("dump", ["exclude_none", "json", "python", "object"])
def test_a_system_instruction_of_parts_reads_as_its_text(instruction, dump):
    """
    The SDK takes a system instruction as one part or a list of parts (texts
    and parts) besides a content; read from a config, dumped or not, each reads
    as the text it holds and is written back as a content the SDK takes. One
    part read as a content with no parts: an empty system prompt, its text
    kept as an unknown field and written back where the SDK refuses it.
    """
    config = gtypes.GenerateContentConfig(system_instruction=instruction)
    dumped = {
        "exclude_none": lambda: config.model_dump(mode="json", exclude_none=True),
        "json": lambda: config.model_dump(mode="json"),
        "python": config.model_dump,
        "object": lambda: config,
    }[dump]()
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "config": dumped}
    texts = ["Be brief."] if isinstance(instruction, gtypes.Part) else ["Be brief.", "Answer in French."]
    system = google.read(body).prefix.as_messages()
    assert [texts] == [[block.text for block in m.content] for m in system]
    written = google.write(google.read(body))["system_instruction"]
    assert [{"text": text} for text in texts] == gtypes.Content.model_validate(written).model_dump(
        mode="json", exclude_none=True
    )["parts"]
    assert () == google.check(body)


class TestInlineDataBase64:
    @given(
        st.one_of(
            st.binary(max_size=12).map(lambda b: base64.b64encode(b).decode("ascii")),
            st.binary(max_size=12).map(lambda b: base64.urlsafe_b64encode(b).decode("ascii").rstrip("=")),
            st.text(alphabet="aB9+/-_= !\n.", max_size=12),
        ),
        st.booleans(),
    )
    @example(data="99_+", in_response=False)  # both alphabets at once
    @example(data="YWI==", in_response=True)  # padding past the last group's need
    def test_check_reports_what_the_sdk_refuses(self, data, in_response):
        """
        Inline data whose text the SDK's ``Blob`` refuses as base64 (so does
        the API) is an ``invalid-base64`` problem naming its path, for a
        payload and for the context read from it, in a user part or among a
        function response's parts; text the SDK decodes is none.
        """
        blob = {"inline_data": {"mime_type": "image/png", "data": data}}
        if in_response:
            response = {"id": "c1", "name": "shot", "response": {"ok": True}, "parts": [blob]}
            parts = [{"function_response": response}]
            path = "parts[0].function_response.parts[0].inline_data.data"
        else:
            parts, path = [{"text": "see"}, blob], "parts[1].inline_data.data"
        body = {
            "contents": [
                {"role": "user", "parts": [{"text": "look"}]},
                {"role": "model", "parts": [{"function_call": {"id": "c1", "name": "shot", "args": {}}}]},
                {"role": "user", "parts": parts},
            ]
        }
        try:
            gtypes.Blob.model_validate_json(json.dumps({"data": data}))
        except ValueError:
            refused = True
        else:
            refused = False
        for source in (body, google.read(body)):
            found = [p for p in google.check(source) if p.rule == "invalid-base64"]
            assert refused == bool(found)
            if refused:
                assert [2] == [p.index for p in found]
                assert path in found[0].message
        if refused:
            with pytest.raises(ProviderError, match="invalid-base64"):
                google.write(google.read(body))


_loose = st.one_of(
    st.text(min_size=1, max_size=5),
    st.builds(lambda t: {"text": t}, st.text(min_size=1, max_size=5)),
    st.builds(lambda t: gtypes.Part(text=t), st.text(min_size=1, max_size=5)),
)
_calling = st.builds(lambda n: gtypes.Part(function_call=gtypes.FunctionCall(name=f"f{n}", args={})), st.integers(0, 3))
_whole = st.builds(
    lambda role, t: gtypes.Content(role=role, parts=[gtypes.Part(text=t)]),
    st.sampled_from(["user", "model"]),
    st.text(max_size=5),
)
_nested = st.lists(st.builds(lambda t: {"text": t}, st.text(min_size=1, max_size=5)), min_size=1, max_size=2)


@given(
    contents=_loose
    | _whole
    | st.builds(lambda c: {"role": "user", "parts": [{"text": c}]}, st.text(max_size=5))
    | st.lists(_loose | _calling | _whole | _nested, min_size=1, max_size=6)
)
def test_contents_are_read_as_the_sdk_takes_them(contents):
    """
    ``contents`` may be what ``generate_content`` takes besides a list of
    contents: a string, a part, or a list mixing strings, parts (function
    calls among them), lists of parts and contents; it reads as the contents
    the SDK sends for it (its own ``t_contents``).
    """
    from google.genai import _transformers  # noqa: PLC0415  # the SDK's own reading of contents, as the oracle

    sent = [c.model_dump(mode="json", exclude_none=True) for c in _transformers.t_contents(contents)]
    assert google.read({"contents": sent}).messages == google.read({"contents": contents}).messages


@st.composite
def _split_turns(draw):
    """
    A Gemini body, and the same body as a client may have kept it: a call
    turn's thoughts apart from its calls (a model turn, then a call turn) and
    the responses to a call turn over several contents; with how many of each.
    """
    body = draw(google_bodies())
    contents: list = []
    calls_apart = responses_apart = 0
    for content in body["contents"]:
        parts = content["parts"]
        called = [p for p in parts if "function_call" in p]
        if content["role"] == "model" and called and len(called) < len(parts) and draw(st.booleans()):
            contents += [{"role": "model", "parts": parts[: -len(called)]}, {"role": "model", "parts": called}]
            calls_apart += 1
        elif content["role"] == "user" and len(parts) > 1 and "function_response" in parts[0] and draw(st.booleans()):
            cuts = sorted(draw(st.sets(st.integers(1, len(parts) - 1), min_size=1)))
            bounds = [0, *cuts, len(parts)]
            contents += [{"role": "user", "parts": parts[a:b]} for a, b in itertools.pairwise(bounds)]
            responses_apart += 1
        else:
            contents.append(content)
    return body, {**body, "contents": contents}, calls_apart, responses_apart


@given(_split_turns())
def test_turns_gemini_refuses_apart_are_problems_and_written_joined(case):
    """
    Gemini takes a call turn only after a user turn or a function response
    turn ("function call turn comes immediately after a user turn or after a
    function response turn"), and every response to a call turn in the one
    content after it ("the number of function response parts is equal to the
    number of function call parts"). A body split so is a ``call-after-model``
    problem for each call turn after a model turn and a ``split-responses``
    problem for each call turn's first content of responses; written, the
    turns are joined and nothing is lost: the body before the split, which
    the SDK takes.
    """
    body, split, calls_apart, responses_apart = case
    rules = [p.rule for p in google.check(split)]
    assert rules.count("call-after-model") == calls_apart
    assert rules.count("split-responses") == responses_apart
    assert len(rules) == calls_apart + responses_apart
    assert valid(google.write(google.read(split))) == body
    assert google.check(body) == ()


@given(google_bodies(), st.data())
def test_an_empty_text_part_is_a_problem_and_left_out(body, data):
    """
    Gemini refuses a part of empty text ("Unable to submit request because
    it has an empty text parameter"). ``check`` reports each as
    ``blank-text``, naming its content and part; ``write`` leaves it out, nothing else changed.
    """
    contents = [dict(c, parts=list(c["parts"])) for c in body["contents"]]
    chosen = data.draw(st.lists(st.integers(0, len(contents) - 1), min_size=1, max_size=3))
    for position in chosen:
        parts = contents[position]["parts"]
        parts.insert(data.draw(st.integers(0, len(parts))), {"text": ""})
    given_ = {**body, "contents": contents}
    found = [p for p in google.check(given_) if p.rule == "blank-text"]
    assert sorted(int(p.message.split("contents[")[1].split("]")[0]) for p in found) == sorted(chosen)
    assert valid(google.write(google.read(given_))) == body


def test_a_call_turn_takes_in_every_model_turn_before_it():
    """
    A call turn after several model turns (replies that each said a little)
    is written as one turn with them, which Gemini takes: joining it to the
    last alone would leave a call turn after a model turn still.
    """
    messages = [
        Message.user("start"),
        Message.assistant("one"),
        Message.assistant("two"),
        Message.assistant("three"),
        Message.assistant(tool_calls=[ToolCall("a", "f", {})]),
        Message("tool", "done", tool_call_id="a"),
    ]
    contents = valid(google.write(messages))["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert [next(iter(p)) for p in contents[1]["parts"]] == ["text", "text", "text", "function_call"]
    assert google.check(messages) == ()
