"""
Hypothesis strategies for provider wire payloads: valid transcripts in each
format's supported subset (every call answered, ids unique, a user turn first),
for the adapters' round-trip and cross-format properties.

Each payload is one its own provider accepts. With ``portable=True`` the
OpenAI strategies also keep to what every provider accepts (no empty or
blank text where Anthropic and Gemini want text, no trailing whitespace in a
final assistant message, no audio), so their transcripts write for every
format; :data:`blanks` gives the texts some providers refuse.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import strategies as st

from workingctx.messages import image_type

texts = st.text(max_size=20)
# text every provider accepts as content: not empty, no whitespace at either end
solid = st.text(min_size=1, max_size=20).map(str.strip).filter(bool)
blanks = st.sampled_from(["", " ", "\n", "\t ", "  \n"])
names = st.from_regex(r"[a-zA-Z][a-zA-Z0-9_]{0,10}", fullmatch=True)
b64 = st.binary(min_size=1, max_size=24).map(lambda b: base64.b64encode(b).decode("ascii"))
json_args = st.dictionaries(
    names,
    st.none() | st.booleans() | st.integers(-1000, 1000) | texts | st.lists(st.integers(0, 9), max_size=3),
    max_size=3,
)
# argument text as models write it: compact, spaced, indented
arg_texts = st.tuples(json_args, st.sampled_from([None, (",", ":"), (", ", ": ")]), st.sampled_from([None, 2])).map(
    lambda t: json.dumps(t[0], separators=t[1], indent=t[2])
)
openai_ids = st.from_regex(r"call_[a-zA-Z0-9]{1,12}", fullmatch=True)
anthropic_ids = st.from_regex(r"toolu_[a-zA-Z0-9_-]{1,12}", fullmatch=True)


def unique(ids: st.SearchStrategy[str], n: int) -> st.SearchStrategy[list[str]]:
    """
    *n* distinct ids.
    """
    return st.lists(ids, min_size=n, max_size=n, unique=True)


# -- OpenAI Chat Completions ------------------------------------------------------------

chat_text_parts = st.lists(st.builds(lambda t: {"type": "text", "text": t}, texts), min_size=1, max_size=2)
chat_image = st.builds(
    lambda url, detail: {
        "type": "image_url",
        "image_url": {"url": url} | ({} if detail is None else {"detail": detail}),
    },
    st.sampled_from(["https://example.com/a.png", "https://example.com/b.jpg"])
    | b64.map(lambda d: f"data:image/png;base64,{d}"),
    st.sampled_from([None, "low", "high", "auto"]),
)
chat_audio = st.builds(
    lambda d, f: {"type": "input_audio", "input_audio": {"data": d, "format": f}}, b64, st.sampled_from(["wav", "mp3"])
)
chat_file = st.one_of(
    st.builds(lambda i: {"type": "file", "file": {"file_id": i}}, st.from_regex(r"file-[a-z0-9]{4}", fullmatch=True)),
    st.builds(
        lambda d, n: {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{d}", "filename": n}},
        b64,
        names.map(lambda n: n + ".pdf"),
    ),
)
chat_user_content = texts | st.lists(
    st.builds(lambda t: {"type": "text", "text": t}, texts) | chat_image | chat_audio | chat_file,
    min_size=1,
    max_size=3,
)
chat_solid_parts = st.lists(st.builds(lambda t: {"type": "text", "text": t}, solid), min_size=1, max_size=2)
chat_portable_content = solid | st.lists(
    st.builds(lambda t: {"type": "text", "text": t}, solid) | chat_image | chat_file,
    min_size=1,
    max_size=3,
).filter(lambda parts: any(p["type"] == "text" for p in parts))


def chat_call(draw: st.DrawFn, call_id: str, *, custom: bool) -> dict[str, Any]:
    """
    A function call, or with *custom* perhaps a custom tool call (free input
    text), in the shapes of the SDK's ``ChatCompletionMessage*ToolCallParam``.
    """
    if custom and draw(st.booleans()):
        return {"id": call_id, "type": "custom", "custom": {"name": draw(names), "input": draw(texts)}}
    return {"id": call_id, "type": "function", "function": {"name": draw(names), "arguments": draw(arg_texts)}}


@st.composite
def chat_messages(draw: st.DrawFn, *, portable: bool = False, custom: bool = False) -> list[dict[str, Any]]:
    """
    A Chat Completions transcript: system or developer messages, then turns
    with parallel tool calls, each answered; with *custom*, custom tool calls
    among them.
    """
    text = solid if portable else texts
    parts = chat_solid_parts if portable else chat_text_parts
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 2))):
        message: dict[str, Any] = {
            "role": draw(st.sampled_from(["system", "developer"])),
            "content": draw(text | parts),
        }
        if draw(st.booleans()):
            message["name"] = draw(names)
        out.append(message)
    counter = 0
    for _ in range(draw(st.integers(1, 3))):
        content = chat_portable_content if portable else chat_user_content
        user: dict[str, Any] = {"role": "user", "content": draw(content)}
        if draw(st.booleans()):
            user["name"] = draw(names)
        out.append(user)
        for _ in range(draw(st.integers(0, 2))):
            n = draw(st.integers(1, 3))
            ids = [
                f"call_{counter + i}_{s}"
                for i, s in enumerate(draw(unique(st.from_regex(r"[a-zA-Z0-9]{0,6}", fullmatch=True), n)))
            ]
            counter += n
            assistant: dict[str, Any] = {"role": "assistant"}
            form = draw(st.sampled_from(["null", "absent", "empty", "text", "parts"]))
            if form == "null":
                assistant["content"] = None
            elif form == "empty":
                assistant["content"] = ""
            elif form == "text":
                assistant["content"] = draw(text)
            elif form == "parts":
                assistant["content"] = draw(parts)
            assistant["tool_calls"] = [chat_call(draw, i, custom=custom) for i in ids]
            out.append(assistant)
            out.extend({"role": "tool", "tool_call_id": i, "content": draw(texts | chat_text_parts)} for i in ids)
        final: dict[str, Any] = {"role": "assistant", "content": draw(text | parts)}
        if draw(st.booleans()):
            final["refusal"] = draw(texts)
        out.append(final)
    return out


# -- Anthropic Messages -------------------------------------------------------------------

cache_controls = st.sampled_from(
    [
        {},
        {"cache_control": {"type": "ephemeral"}},
        {"cache_control": {"type": "ephemeral", "ttl": "1h"}},
        {"cache_control": {"type": "ephemeral", "ttl": "5m"}},
    ]
)
a_citations = st.sampled_from(
    [
        {},
        {"citations": None},
        {
            "citations": [
                {
                    "type": "char_location",
                    "cited_text": "the sky is blue",
                    "document_index": 0,
                    "document_title": "Notes",
                    "start_char_index": 0,
                    "end_char_index": 15,
                }
            ]
        },
        {
            "citations": [
                {
                    "type": "web_search_result_location",
                    "cited_text": "rain",
                    "encrypted_index": "RW5j",
                    "title": "Weather",
                    "url": "https://example.com/weather",
                }
            ]
        },
    ]
)
"""A text block's citations: none, unset as the SDK's ``model_dump`` writes it, a document's or a search's."""
a_text = st.builds(lambda t, c, cited: {"type": "text", "text": t, **cited, **c}, solid, cache_controls, a_citations)
a_image = st.builds(
    lambda source, c: {"type": "image", "source": source, **c},
    st.builds(
        # labelled as its bytes say when they say a type, as Anthropic wants
        lambda raw, m: {"type": "base64", "media_type": image_type(raw) or m, "data": base64.b64encode(raw).decode()},
        st.binary(min_size=1, max_size=24),
        st.sampled_from(["image/png", "image/jpeg"]),
    )
    | st.just({"type": "url", "url": "https://example.com/a.png"}),
    cache_controls,
)
a_document = st.builds(
    lambda source, title, c: {"type": "document", "source": source, **title, **c},
    st.builds(lambda d: {"type": "base64", "media_type": "application/pdf", "data": d}, b64)
    | st.just({"type": "url", "url": "https://example.com/a.pdf"}),
    st.sampled_from([{}, {"title": "Report"}]),
    cache_controls,
)
a_thinking = st.builds(lambda t, s: {"type": "thinking", "thinking": t, "signature": s}, texts, b64)
a_redacted = st.builds(lambda d: {"type": "redacted_thinking", "data": d}, b64)
a_system = st.none() | solid | st.lists(a_text, min_size=1, max_size=2)


sdk_nulls = st.just({"cache_control": None})
"""An optional key as the SDK's ``model_dump(mode="json")`` writes it when it is unset."""
tool_use_extras = st.sampled_from(
    [{}, {"caller": {"type": "direct"}}, {"toolset_name": None}, {"caller": {"type": "direct"}, "toolset_name": "web"}]
)
"""Keys of a ``ToolUseBlockParam`` workingctx does not model, kept as they came."""


@st.composite
def anthropic_bodies(draw: st.DrawFn) -> dict[str, Any]:
    """
    An Anthropic request body: optional system, turns with interleaved
    thinking and parallel tool use, results (text, images, errors) first in
    the next user turn; text never blank, the final assistant turn without
    trailing whitespace.
    """
    body: dict[str, Any] = {}
    system = draw(a_system)
    if system is not None:
        body["system"] = system
    messages: list[dict[str, Any]] = []
    counter = 0
    for _ in range(draw(st.integers(1, 3))):
        messages.append(
            {
                "role": "user",
                "content": draw(solid | st.lists(a_text | a_image | a_document, min_size=1, max_size=3)),
            }
        )
        for _ in range(draw(st.integers(0, 2))):
            n = draw(st.integers(1, 3))
            ids = [
                f"toolu_{counter + i}_{s}"
                for i, s in enumerate(draw(unique(st.from_regex(r"[a-zA-Z0-9_-]{0,6}", fullmatch=True), n)))
            ]
            counter += n
            content = draw(st.lists(a_thinking | a_redacted, max_size=2)) + draw(st.lists(a_text, max_size=1))
            content += [
                {
                    "type": "tool_use",
                    "id": i,
                    "name": draw(names),
                    "input": draw(json_args),
                    **draw(cache_controls | sdk_nulls),
                    **draw(tool_use_extras),
                }
                for i in ids
            ]
            messages.append({"role": "assistant", "content": content})
            results = []
            for i in ids:
                result: dict[str, Any] = {"type": "tool_result", "tool_use_id": i}
                shape = draw(st.sampled_from(["text", "blocks", "absent"]))
                if shape == "text":
                    result["content"] = draw(solid | st.just(""))
                elif shape == "blocks":
                    result["content"] = draw(st.lists(a_text | a_image, min_size=1, max_size=2))
                error = draw(st.sampled_from([None, True, False]))
                if error is not None:
                    result["is_error"] = error
                result.update(draw(cache_controls | sdk_nulls))
                result.update(draw(st.sampled_from([{}, {"toolset_name": None}, {"toolset_name": "search"}])))
                results.append(result)
            messages.append({"role": "user", "content": results + draw(st.lists(a_text, max_size=1))})
        messages.append(
            {
                "role": "assistant",
                "content": draw(
                    solid | st.lists(a_thinking, max_size=1).map(lambda t: [*t, {"type": "text", "text": "done"}])
                ),
            }
        )
    body["messages"] = messages
    return _at_most_four_breakpoints(body)


def _at_most_four_breakpoints(body: dict[str, Any]) -> dict[str, Any]:
    """
    *body* with ``cache_control`` kept on its first four blocks that carry one
    (in a tool result's content too): Anthropic refuses a request with more.
    """
    seen = 0

    def walk(blocks: Any) -> None:
        nonlocal seen
        if not isinstance(blocks, list):
            return
        for block in blocks:
            if block.get("cache_control") is not None:
                seen += 1
                if seen > 4:
                    del block["cache_control"]
            walk(block.get("content") if block.get("type") == "tool_result" else None)

    walk(body.get("system"))
    for message in body["messages"]:
        walk(message["content"])
    return body


# -- OpenAI Responses ---------------------------------------------------------------------

r_input_text = st.builds(lambda t: {"type": "input_text", "text": t}, texts)
r_image = st.builds(
    lambda src, d: {"type": "input_image", **src, **d},
    st.sampled_from([{"image_url": "https://example.com/a.png"}, {"file_id": "file-abc"}])
    | b64.map(lambda d: {"image_url": f"data:image/jpeg;base64,{d}"}),
    st.sampled_from([{"detail": "auto"}, {"detail": "low"}, {"detail": "high"}]),
)
r_file = st.sampled_from(
    [
        {"type": "input_file", "file_id": "file-xyz"},
        {"type": "input_file", "file_url": "https://example.com/a.pdf"},
        {"type": "input_file", "file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"},
    ]
)
r_output_text = st.builds(lambda t: {"type": "output_text", "text": t, "annotations": []}, texts)


# images Chat Completions takes too (no file id)
r_portable_image = st.builds(
    lambda src, d: {"type": "input_image", **src, **d},
    st.just({"image_url": "https://example.com/a.png"})
    | b64.map(lambda d: {"image_url": f"data:image/jpeg;base64,{d}"}),
    st.sampled_from([{"detail": "auto"}, {"detail": "low"}, {"detail": "high"}]),
)
r_solid_text = st.builds(lambda t: {"type": "input_text", "text": t}, solid)
r_solid_output = st.builds(lambda t: {"type": "output_text", "text": t, "annotations": []}, solid)


@st.composite
def responses_bodies(draw: st.DrawFn, *, portable: bool = False) -> dict[str, Any]:
    """
    A Responses body: instructions, developer items, user parts, reasoning
    items with encrypted content, output messages, parallel function calls and
    their outputs.
    """
    text = solid if portable else texts
    input_text = r_solid_text if portable else r_input_text
    output_text = r_solid_output if portable else r_output_text
    image = r_portable_image if portable else r_image
    body: dict[str, Any] = {}
    if draw(st.booleans()):
        body["instructions"] = draw(texts)
    if draw(st.integers(0, 9)) == 0:
        body["input"] = draw(text)
        return body
    developer = st.sampled_from(
        [
            {"role": "developer", "content": "rules"},
            {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "sys"}]},
        ]
    )
    items: list[dict[str, Any]] = draw(st.lists(developer, max_size=1))
    counter = 0
    for _ in range(draw(st.integers(1, 3))):
        user = st.lists(input_text | image | r_file, min_size=1, max_size=3)
        if portable:
            user = user.filter(lambda parts: any(p["type"] == "input_text" for p in parts))
        items.append({"role": "user", "content": draw(text | user)})
        for _ in range(draw(st.integers(0, 2))):
            counter += 1
            if draw(st.booleans()):
                reasoning: dict[str, Any] = {
                    "type": "reasoning",
                    "id": f"rs_{counter}",
                    "summary": draw(
                        st.lists(st.builds(lambda t: {"type": "summary_text", "text": t}, texts), max_size=2)
                    ),
                }
                if draw(st.booleans()):
                    reasoning["encrypted_content"] = draw(b64)
                items.append(reasoning)
            if draw(st.booleans()):
                items.append(
                    {
                        "type": "message",
                        "id": f"msg_{counter}",
                        "role": "assistant",
                        "status": "completed",
                        "content": draw(st.lists(output_text, min_size=1, max_size=2)),
                    }
                )
            ids = [f"call_{counter}_{i}" for i in range(draw(st.integers(1, 3)))]
            for i in ids:
                call = {"type": "function_call", "call_id": i, "name": draw(names), "arguments": draw(arg_texts)}
                if draw(st.booleans()):
                    call |= {"id": "fc_" + i, "status": "completed"}
                items.append(call)
            items.extend(
                {
                    "type": "function_call_output",
                    "call_id": i,
                    "output": draw(texts | st.lists(r_input_text | image, min_size=1, max_size=2)),
                }
                for i in ids
            )
        if not portable and draw(st.integers(0, 2)) == 0:
            # calls the client runs in kinds of their own, each answered by its own output item
            ids = [f"call_x{len(items)}_{i}" for i in range(draw(st.integers(1, 2)))]
            pairs = [draw(client_call_pairs(i)) for i in ids]
            items.extend(call for call, _ in pairs)
            items.extend(output for _, output in pairs)
        final = f"msg_final{len(items)}"  # OpenAI refuses two items with one id
        items.append(
            draw(
                st.builds(lambda t: {"role": "assistant", "content": t}, text)
                | st.builds(
                    lambda c, i=final: {
                        "type": "message",
                        "id": i,
                        "role": "assistant",
                        "status": "completed",
                        "content": c,
                    },
                    st.lists(output_text, min_size=1, max_size=2),
                )
            )
        )
    body["input"] = items
    return body


def client_call_pairs(call_id: str) -> st.SearchStrategy[tuple[dict[str, Any], dict[str, Any]]]:
    """
    One of :func:`client_call_examples`.
    """
    return st.sampled_from(client_call_examples(call_id))


def client_call_examples(call_id: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """
    Each Responses call the client runs, other than a function call, and the
    item answering it, in the shapes of the SDK's input item types: a custom
    tool, the computer, a local shell, a shell, a patch, an MCP approval.
    """
    screenshot = {"type": "computer_screenshot", "image_url": "data:image/png;base64,iVBORw0KGgo="}
    shell_out = {"stdout": "a b", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
    patch = {"type": "update_file", "path": "a.py", "diff": "@@ -1 +1 @@\n-a\n+b\n"}
    return [
        (
            {"type": "custom_tool_call", "call_id": call_id, "name": "grammar", "input": "SELECT 1"},
            {"type": "custom_tool_call_output", "call_id": call_id, "output": "1"},
        ),
        (
            {
                "type": "computer_call",
                "id": "cu_" + call_id,
                "call_id": call_id,
                "action": {"type": "click", "button": "left", "x": 10, "y": 20},
                "pending_safety_checks": [],
                "status": "completed",
            },
            {"type": "computer_call_output", "call_id": call_id, "output": screenshot},
        ),
        (
            {
                "type": "local_shell_call",
                "id": "lsh_" + call_id,
                "call_id": call_id,
                "action": {"type": "exec", "command": ["ls"], "env": {}},
                "status": "completed",
            },
            {"type": "local_shell_call_output", "id": call_id, "output": "a b"},
        ),
        (
            {"type": "shell_call", "call_id": call_id, "action": {"commands": ["ls"]}, "status": "completed"},
            {"type": "shell_call_output", "call_id": call_id, "output": [shell_out]},
        ),
        (
            {"type": "apply_patch_call", "call_id": call_id, "operation": patch, "status": "completed"},
            {"type": "apply_patch_call_output", "call_id": call_id, "status": "completed"},
        ),
        (
            {
                "type": "mcp_approval_request",
                "id": call_id,
                "name": "fetch",
                "arguments": "{}",
                "server_label": "docs",
            },
            {"type": "mcp_approval_response", "approval_request_id": call_id, "approve": True},
        ),
    ]


# -- Google Gen AI ------------------------------------------------------------------------

g_b64 = st.binary(min_size=1, max_size=24).map(lambda b: base64.urlsafe_b64encode(b).decode("ascii"))
g_text = st.builds(
    lambda t, s: {"text": t, **s},
    st.text(min_size=1, max_size=20),
    st.just({}) | g_b64.map(lambda s: {"thought_signature": s}),
)
g_thought = st.builds(lambda t, s: {"text": t, "thought": True, "thought_signature": s}, texts, g_b64)
g_media = st.one_of(
    st.builds(
        lambda d, m: {"inline_data": {"data": d, "mime_type": m}},
        g_b64,
        st.sampled_from(["image/png", "application/pdf", "audio/wav"]),
    ),
    st.builds(
        lambda m: {
            "file_data": {"file_uri": "https://generativelanguage.googleapis.com/v1beta/files/abc", "mime_type": m}
        },
        st.sampled_from(["image/jpeg", "video/mp4", "application/pdf"]),
    ),
)


g_solid = st.builds(lambda t, s: {"text": t, **s}, solid, st.just({}) | g_b64.map(lambda s: {"thought_signature": s}))
g_portable_media = st.one_of(
    st.builds(lambda d: {"inline_data": {"data": d, "mime_type": "image/png"}}, g_b64),
    st.just({"file_data": {"file_uri": "https://example.com/a.pdf", "mime_type": "application/pdf"}}),
)


@st.composite
def google_bodies(draw: st.DrawFn, *, portable: bool = False) -> dict[str, Any]:
    """
    A Gemini body in the SDK's dump form: system instruction, user parts with
    media, thoughts with signatures, parallel calls (with or without ids) and
    their responses in one user turn. Portable bodies keep to images and
    documents and to text that is not blank.
    """
    text, media = (g_solid, g_portable_media) if portable else (g_text, g_media)
    body: dict[str, Any] = {}
    if draw(st.booleans()):
        body["system_instruction"] = {
            "parts": draw(
                st.lists(st.builds(lambda t: {"text": t}, st.text(min_size=1, max_size=9)), min_size=1, max_size=2)
            )
        }
    contents: list[dict[str, Any]] = []
    counter = 0
    for _ in range(draw(st.integers(1, 3))):
        user = st.lists(text | media, min_size=1, max_size=3)
        if portable:
            user = user.filter(lambda parts: any("text" in p for p in parts))
        contents.append({"role": "user", "parts": draw(user)})
        for _ in range(draw(st.integers(0, 2))):
            with_ids = draw(st.booleans())
            n = draw(st.integers(1, 3))
            calls = []
            for i in range(n):
                counter += 1
                call: dict[str, Any] = {"name": f"f{counter}", "args": draw(json_args)}
                if with_ids:
                    call = {"id": f"c{counter}", **call}
                part: dict[str, Any] = {"function_call": call}
                if i == 0:
                    part["thought_signature"] = draw(g_b64)
                calls.append(part)
            contents.append({"role": "model", "parts": draw(st.lists(g_thought, max_size=1)) + calls})
            responses = []
            for part in calls:
                call = part["function_call"]
                response: dict[str, Any] = {"name": call["name"], "response": {"output": draw(texts)}}
                if with_ids:
                    response = {"id": call["id"], **response}
                responses.append({"function_response": response})
            contents.append({"role": "user", "parts": responses})
        contents.append(
            {
                "role": "model",
                "parts": [*draw(st.lists(g_thought, max_size=1)), {"text": draw(solid)}],
            }
        )
    body["contents"] = contents
    return body
