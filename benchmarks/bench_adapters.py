"""
Adapter benchmarks: ``read`` + ``write`` of a 10,000-message tool-heavy
Chat Completions transcript (a user turn, an assistant turn with two parallel
calls, their two results and an answer, repeated), against LangChain's
``convert_to_messages`` + ``convert_to_openai_messages`` and pydantic-ai's
``ModelMessagesTypeAdapter`` (validate + dump of the same transcript in its own
form), measured in the same run; and ``anthropic.write`` of a request of 40
screenshots against the body LangChain's ``ChatAnthropic`` builds for it.
"""

from __future__ import annotations

import base64
import json
import random
import struct
from typing import Any

from benchmarks._harness import Table, measure
from workingctx import Message
from workingctx.adapters import anthropic, openai_chat
from workingctx.messages import ImageBlock, MediaRef, TextBlock

GROUP = "adapters"


def transcript(n: int) -> list[dict[str, Any]]:
    """
    A Chat Completions transcript of about *n* messages, every call answered.
    """
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are a build agent. Use the tools."}]
    turn = 0
    while len(out) < n:
        out.append({"role": "user", "content": f"Check service {turn} and report its certificate and load."})
        calls: list[dict[str, Any]] = [
            {
                "id": f"call_{turn}_{k}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps({"host": f"svc{turn}.internal", "port": 443 + k})},
            }
            for k, name in enumerate(("openssl_check", "load_average"))
        ]
        out.append({"role": "assistant", "content": None, "tool_calls": calls})
        out.extend(
            {
                "role": "tool",
                "tool_call_id": c["id"],
                "content": f"ok: {c['function']['name']} on svc{turn}: valid, 0.42",
            }
            for c in calls
        )
        out.append({"role": "assistant", "content": f"Service {turn}: certificate valid until 2027, load 0.42."})
        turn += 1
    return out[:n]


def screenshots(n: int, size: int = 150_000) -> list[Message]:
    """
    *n* turns, each a user message with a screenshot of *size* bytes (PNG and
    JPEG in turn, 1500x900) and a question, then the answer.
    """
    rng = random.Random(7)
    out: list[Message] = []
    for turn in range(n):
        if turn % 2:
            head = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + struct.pack(">II", 1500, 900) + b"\x08\x02\x00\x00\x00"
            mime = "image/png"
        else:
            exif = b"\xff\xe1" + struct.pack(">H", 2002) + bytes(2000)
            head = b"\xff\xd8" + exif + b"\xff\xc0\x00\x11\x08" + struct.pack(">HH", 900, 1500) + b"\x03" + bytes(9)
            mime = "image/jpeg"
        data = base64.b64encode(head + rng.randbytes(size)).decode("ascii")
        image = ImageBlock(MediaRef(kind="data", data_base64=data, mime_type=mime))
        out += [
            Message.user([image, TextBlock(f"What changed in step {turn}?")]),
            Message.assistant(f"Step {turn}: ok."),
        ]
    return out


def _pydantic_ai_messages(messages: list[dict[str, Any]]) -> Any:
    from pydantic_ai.messages import (  # noqa: PLC0415  # optional peer
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    names: dict[str, str] = {}
    out: list[Any] = []
    for m in messages:
        if m["role"] == "system":
            out.append(ModelRequest(parts=[SystemPromptPart(m["content"])]))
        elif m["role"] == "user":
            out.append(ModelRequest(parts=[UserPromptPart(m["content"])]))
        elif m["role"] == "assistant":
            parts: list[Any] = [TextPart(m["content"])] if m.get("content") else []
            for c in m.get("tool_calls") or ():
                names[c["id"]] = c["function"]["name"]
                parts.append(ToolCallPart(c["function"]["name"], c["function"]["arguments"], tool_call_id=c["id"]))
            out.append(ModelResponse(parts=parts))
        else:
            out.append(
                ModelRequest(
                    parts=[ToolReturnPart(names[m["tool_call_id"]], m["content"], tool_call_id=m["tool_call_id"])]
                )
            )
    return ModelMessagesTypeAdapter, ModelMessagesTypeAdapter.dump_python(out, mode="json")


def run(table: Table, quick: bool) -> None:
    """
    Round trips of one transcript through workingctx, LangChain and pydantic-ai.
    """
    n = 2_000 if quick else 10_000
    repeat = 3 if quick else 7
    messages = transcript(n)

    def ours() -> None:
        openai_chat.write(openai_chat.read(messages))

    assert openai_chat.write(openai_chat.read(messages)) == {"messages": messages}
    ours_seconds = measure(ours, repeat=repeat)

    try:
        from langchain_core.messages import convert_to_messages, convert_to_openai_messages  # noqa: PLC0415
    except ImportError:
        table.add(GROUP, "chat read+write", n, ours_seconds, note="langchain-core not installed")
    else:

        def lc() -> None:
            convert_to_openai_messages(convert_to_messages(messages))

        table.add(
            GROUP,
            "chat read+write",
            n,
            ours_seconds,
            baseline="langchain convert_to/from",
            baseline_seconds=measure(lc, repeat=repeat),
        )
    try:
        adapter, dumped = _pydantic_ai_messages(messages)
    except ImportError:
        table.add(GROUP, "chat read+write", n, ours_seconds, note="pydantic-ai not installed")
    else:

        def pai() -> None:
            adapter.dump_python(adapter.validate_python(dumped), mode="json")

        table.add(
            GROUP,
            "chat read+write",
            n,
            ours_seconds,
            baseline="pydantic-ai TypeAdapter",
            baseline_seconds=measure(pai, repeat=repeat),
        )

    ctx = openai_chat.read(messages)
    table.add(GROUP, "anthropic.write (cross-format)", n, measure(lambda: anthropic.write(ctx), repeat=repeat))
    _screenshots(table, repeat)
    table.add(GROUP, "request_key", n, measure(lambda: openai_chat.request_key(ctx, model="gpt-5"), repeat=repeat))


def _screenshots(table: Table, repeat: int) -> None:
    """
    ``anthropic.write`` of 40 screenshots (6 MB of base64), every image checked
    (type, size, dimensions), against the request body ``ChatAnthropic`` builds.
    """
    shots = screenshots(40)
    ours = measure(lambda: anthropic.write(shots), repeat=repeat)
    try:
        from langchain_anthropic import ChatAnthropic  # noqa: PLC0415  # optional peer
        from langchain_core.messages import AIMessage, HumanMessage  # noqa: PLC0415
    except ImportError:
        table.add(GROUP, "anthropic.write, 40 screenshots", 80, ours, note="langchain-anthropic not installed")
        return
    model = ChatAnthropic(model_name="claude-sonnet-4-5", api_key="sk-ant-benchmark", timeout=None, stop=None)  # type: ignore[call-arg]
    theirs = []
    for message in shots:
        if message.role == "assistant":
            theirs.append(AIMessage(message.text()))
            continue
        image, question = message.content
        media = image.media
        source = {"type": "base64", "media_type": media.mime_type, "data": media.data_base64}
        theirs.append(HumanMessage([{"type": "image", "source": source}, {"type": "text", "text": question.text}]))
    table.add(
        GROUP,
        "anthropic.write, 40 screenshots",
        80,
        ours,
        baseline="ChatAnthropic request body",
        baseline_seconds=measure(lambda: model._get_request_payload(theirs), repeat=repeat),  # noqa: SLF001
    )
