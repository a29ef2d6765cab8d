"""
Shared Hypothesis strategies for workingctx values.

Every new field or value type gets a strategy here, so every property test sees it.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
from hypothesis import strategies as st

from workingctx.frozen import MAX_DEPTH
from workingctx.media import store_ref
from workingctx.messages import (
    AnnotationBlock,
    AnnotationRef,
    AudioBlock,
    CacheBreakpoint,
    DataBlock,
    DocumentBlock,
    ErrorBlock,
    ImageBlock,
    MediaRef,
    Message,
    ProviderBlock,
    ReasoningBlock,
    RemoteToolCallBlock,
    Role,
    TextBlock,
    ToolCall,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
    VideoBlock,
)
from workingctx.prefix import PrefixContext

# -- plain data -----------------------------------------------------------------

edge_texts = st.sampled_from(
    ["", "__set__", "__mapping__", "__repr__", "__int__", "\ud83d", "cut \udc00", "\x00", "é", "1", "true", "null"]
)
"""Texts that tell encodings apart: markers of the canonical form, lone surrogates, look-alikes of other JSON."""
texts = st.text(max_size=40) | edge_texts
short_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)
ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=10)
small_ints = st.integers(min_value=0, max_value=10_000)

edge_ints = st.sampled_from([0, 1, -1, 2**53, 2**53 + 1, 2**63, -(2**63) - 1, 2**64, 10**4299, -(10**4299)])
"""Ints at the edges: beyond float precision, beyond 64 bits, the longest ``str()`` writes by default."""
edge_floats = st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.1, 1e16, 2.0**53, 1.7976931348623157e308, 5e-324, -5e-324])
"""Floats at the edges: integral ones (``1.0`` is not ``1``), negative zero, the largest and the smallest."""

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | edge_ints
    | st.floats(allow_nan=False, allow_infinity=False)
    | edge_floats
    | texts
)


def json_values(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """
    Nested JSON-compatible data: dicts with str keys, lists, scalars.
    """
    return st.recursive(
        json_scalars,
        lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
        max_leaves=max_leaves,
    )


def _nest(levels: int, leaf: Any, as_list: bool) -> Any:
    for _ in range(levels):
        leaf = [leaf] if as_list else {"k": leaf}
    return leaf


deep_json_values = st.builds(_nest, st.integers(1, MAX_DEPTH - 4), json_scalars, st.booleans())
"""JSON data nested nearly as deep as a payload may be (room left for three enclosing levels)."""

json_objects = st.dictionaries(texts, json_values() | deep_json_values, max_size=5)
"""A JSON object: what tool arguments and metadata hold."""

nested_payloads = st.recursive(
    json_scalars | st.frozensets(st.integers(), max_size=3),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(texts, children, max_size=4)
        | st.sets(st.integers(), max_size=3).map(set)
    ),
    max_leaves=15,
)
"""Nested payloads beyond JSON: also sets and frozensets, for deep freezing."""

scratchpads = st.dictionaries(short_names, json_values(6), max_size=5)

# -- references and blocks ---------------------------------------------------------

opt_texts = st.none() | texts
opt_ints = st.none() | small_ints | edge_ints

media_refs = st.one_of(
    st.builds(MediaRef, kind=st.just("url"), url=texts, mime_type=opt_texts, width=opt_ints, height=opt_ints),
    st.builds(MediaRef, kind=st.just("file_id"), file_id=texts, mime_type=opt_texts, page=opt_ints),
    st.builds(
        MediaRef, kind=st.just("data"), data_base64=texts, mime_type=opt_texts, size_bytes=opt_ints, sha256=opt_texts
    ),
    st.builds(store_ref, st.binary(max_size=16), st.sampled_from(["image/png", "application/pdf"])),
)
annotation_refs = st.builds(
    AnnotationRef, url=opt_texts, file_id=opt_texts, page=opt_ints, index=opt_ints, title=opt_texts
)

unparsable_arguments: st.SearchStrategy[str] = st.one_of(
    st.sampled_from(['{"path": "/tmp/a', "[1,2]", "null", "", '"text"', "{", "1"]),
    json_objects.map(json.dumps).map(lambda raw: raw[:-1]),
)
"""Tool-call argument texts that are not the text of a JSON object."""

provider_datas: st.SearchStrategy[dict[str, Any]] = st.just({}) | st.dictionaries(
    st.sampled_from(["openai", "anthropic", "google"]), json_objects, max_size=2
)
caches = st.none() | st.builds(CacheBreakpoint, st.sampled_from([None, "5m", "1h"]))

tool_calls = st.one_of(
    st.builds(ToolCall, id=ids, name=short_names, arguments=json_objects, provider_data=provider_datas),
    json_objects.map(json.dumps).flatmap(
        lambda raw: st.builds(ToolCall, id=ids, name=short_names, arguments_json=st.just(raw))
    ),
    # text that is not a JSON object (a reply cut off by max_tokens, a list, null) is kept as data
    st.builds(ToolCall, id=ids, name=short_names, arguments_json=unparsable_arguments),
)

text_blocks = st.builds(
    TextBlock, text=texts, annotations=st.lists(annotation_refs, max_size=2), cache=caches, provider_data=provider_datas
)
image_blocks = st.builds(
    ImageBlock,
    media=media_refs,
    alt_text=opt_texts,
    bbox=st.none() | st.lists(small_ints | st.floats(allow_nan=False, allow_infinity=False), max_size=4),
    detail=st.sampled_from([None, "low", "high", "auto"]),
    cache=caches,
)
blocks = st.one_of(
    text_blocks,
    image_blocks,
    st.builds(AudioBlock, media=media_refs, transcript=opt_texts, sample_rate=opt_ints, channels=opt_ints),
    st.builds(VideoBlock, media=media_refs, thumbnail=st.none() | media_refs),
    st.builds(
        DocumentBlock,
        media=media_refs,
        text=opt_texts,
        pages=st.none() | st.lists(small_ints, max_size=3),
        excerpt=opt_texts,
    ),
    st.builds(DataBlock, mime_type=texts, data_base64=opt_texts, media=st.none() | media_refs),
    st.builds(ToolCallBlock, id=ids, name=short_names, args=json_objects, tool_type=opt_texts, cache=caches),
    st.builds(RemoteToolCallBlock, id=ids, name=short_names, args=json_objects),
    st.builds(
        ToolResultBlock,
        call_id=ids,
        output=json_values(6) | deep_json_values,
        is_error=st.booleans(),
        status=st.sampled_from([None, "completed", "failed"]),
        cache=caches,
    ),
    st.builds(
        ToolResultBlock,
        call_id=ids,
        content=st.lists(text_blocks | image_blocks, max_size=3),
        is_error=st.booleans(),
    ),
    st.builds(
        ReasoningBlock,
        summary=texts,
        details=st.none() | st.lists(texts, max_size=3),
        signature=opt_texts,
        encrypted=opt_texts,
        redacted=st.booleans(),
        provider=st.sampled_from([None, "anthropic", "openai", "google"]),
    ),
    st.builds(ProviderBlock, provider=short_names, data=json_objects),
    st.builds(
        AnnotationBlock,
        kind=st.sampled_from(["citation", "note"]),
        refs=st.lists(annotation_refs, max_size=2),
        spans=st.none() | st.lists(st.tuples(small_ints, small_ints), max_size=2),
    ),
    st.builds(ErrorBlock, message=texts, code=opt_texts, data=st.none() | json_objects),
)

usages = st.builds(
    Usage.from_cache_writes,
    input_tokens=small_ints,
    output_tokens=small_ints | st.just(10**4299),
    cache_read_tokens=small_ints,
    cache_write_5m_tokens=small_ints,
    cache_write_1h_tokens=small_ints,
    reasoning_tokens=small_ints,
)

contents = texts | st.lists(blocks, max_size=3).map(tuple)

# -- messages ----------------------------------------------------------------------


@st.composite
def messages(draw: st.DrawFn, *, with_tool_calls: bool | None = None) -> Message:
    """
    Any valid message. ``with_tool_calls=True`` forces an assistant message
    with tool calls, ``False`` forbids tool calls, ``None`` allows both.
    """
    roles: list[Role] = ["system", "user", "assistant", "tool"]
    role: Role = "assistant" if with_tool_calls else draw(st.sampled_from(roles))
    calls: list[ToolCall] = []
    if role == "assistant" and with_tool_calls is not False:
        calls = draw(st.lists(tool_calls, min_size=1 if with_tool_calls else 0, max_size=3))
    return Message(
        role,
        draw(contents),
        name=draw(st.none() | short_names),
        tool_call_id=draw(ids) if role == "tool" and draw(st.booleans()) else None,
        tool_calls=tuple(calls),
        id=draw(st.none() | ids | small_ints | edge_ints),
        metadata=draw(st.dictionaries(short_names | edge_texts, json_values(4) | deep_json_values, max_size=2)),
        usage=draw(st.none() | usages),
        delta=draw(st.booleans()) if role == "assistant" else False,
        provider_data=draw(provider_datas),
    )


simple_messages = st.builds(Message, role=st.sampled_from(["system", "user", "assistant"]), content=texts)
"""Plain text messages without tools: cheap, for laws that do not care about tools."""

prefixes = st.builds(
    PrefixContext,
    system_prompt=opt_texts,
    grounding=st.lists(simple_messages, max_size=2),
    schema_block=opt_texts,
    cache_hint=st.booleans(),
)


@st.composite
def exchanges(draw: st.DrawFn, *, call_prefix: str, final: bool = True) -> list[Message]:
    """
    One tool exchange: an assistant message asking for 1-3 parallel calls
    (sometimes with a reasoning block), every result (in any order), and,
    when *final*, the assistant's answer.
    """
    count = draw(st.integers(1, 3))
    calls = tuple(
        ToolCall(f"{call_prefix}-{n}", draw(short_names), draw(st.dictionaries(short_names, texts, max_size=2)))
        for n in range(count)
    )
    content: str | tuple[Any, ...] = draw(texts)
    if draw(st.booleans()):
        content = (ReasoningBlock(draw(texts)),)
    out = [Message("assistant", content, tool_calls=calls)]
    results = [Message("tool", draw(texts), tool_call_id=call.id, name=call.name) for call in calls]
    out.extend(draw(st.permutations(results)))
    if final:
        out.append(Message("assistant", draw(texts)))
    return out


@st.composite
def transcripts(draw: st.DrawFn, *, max_turns: int = 6, allow_pending: bool = True) -> list[Message]:
    """
    A valid tool-heavy transcript: optional system messages, then turns of a
    user message followed by plain answers and complete tool exchanges. The
    very last exchange may be pending (calls without all results yet).
    """
    out: list[Message] = [Message("system", draw(texts)) for _ in range(draw(st.integers(0, 2)))]
    if draw(st.booleans()):
        out.append(Message("assistant", "Hello, how can I help?"))
    turns = draw(st.integers(0, max_turns))
    for turn in range(turns):
        out.append(Message("user", draw(texts)))
        for step in range(draw(st.integers(0, 2))):
            if draw(st.booleans()):
                out.extend(draw(exchanges(call_prefix=f"t{turn}s{step}")))
            else:
                out.append(Message("assistant", draw(texts)))
        if draw(st.integers(0, 9)) == 0:
            out.append(Message("system", draw(texts)))
    if allow_pending and turns and draw(st.booleans()):
        pending = draw(exchanges(call_prefix="pending", final=False))
        answered = draw(st.integers(0, len(pending) - 2))
        out.extend(pending[: 1 + answered])
    return out


call_id_pool = st.sampled_from(["call_0", "call_1", "call_0-2"])
"""Call ids as OpenAI-compatible and local servers number them in every response
(and one that looks like a re-keyed name already)."""


@st.composite
def reused_id_exchanges(draw: st.DrawFn, *, tag: str, final: bool = True) -> list[Message]:
    """
    One tool exchange whose ids every response reuses (:data:`call_id_pool`):
    an assistant message asking for one or two calls, as ``tool_calls`` with a
    tool message per result (Chat Completions) or as tool-call blocks with one
    user message of result blocks (Anthropic); then, when *final*, an answer.
    Not *final*: the calls wait for their results (some of them, in Chat form).
    Texts carry *tag*, so two agents' exchanges differ in what they found.
    """
    count = draw(st.integers(1, 2))
    call_ids = draw(st.lists(call_id_pool, min_size=count, max_size=count, unique=True))
    names = [draw(st.sampled_from(["search", "weather"])) for _ in call_ids]
    args = [{"q": draw(st.sampled_from(["a", "b"]))} for _ in call_ids]
    if draw(st.booleans()):
        calls = tuple(ToolCall(i, n, a) for i, n, a in zip(call_ids, names, args, strict=True))
        out = [Message("assistant", "", tool_calls=calls)]
        results = [Message("tool", f"{tag} {i}", tool_call_id=i) for i in call_ids]
        out.extend(results if final else results[: draw(st.integers(0, count - 1))])
    else:
        blocks = tuple(ToolCallBlock(i, n, a) for i, n, a in zip(call_ids, names, args, strict=True))
        out = [Message("assistant", (TextBlock("Looking."), *blocks))]
        if final:
            out.append(Message("user", tuple(ToolResultBlock(i, f"{tag} {i}") for i in call_ids)))
    if final:
        out.append(Message("assistant", f"{tag} answered"))
    return out


@st.composite
def reused_id_forks(
    draw: st.DrawFn, *, children: int = 2, pending: bool = True
) -> tuple[list[Message], list[list[Message]]]:
    """
    A parent transcript and what each of its *children* sub-agents appends
    after forking from it, every one numbering its calls from the same pool
    (the parent too, so a fork's shared history reuses them). The last
    child's work may end with calls still waiting (*pending*).
    """
    parent = [Message("user", "Research both.")]
    if draw(st.booleans()):
        parent.extend(draw(reused_id_exchanges(tag="parent")))
    work: list[list[Message]] = []
    for child in range(children):
        own: list[Message] = []
        if draw(st.booleans()):
            own.append(Message("user", f"child {child}: go"))
        steps = draw(st.integers(1, 3))
        for step in range(steps):
            last = child == children - 1 and step == steps - 1
            final = not (pending and last and draw(st.booleans()))
            own.extend(draw(reused_id_exchanges(tag=f"child {child} step {step}", final=final)))
        work.append(own)
    return parent, work


# -- scopes ---------------------------------------------------------------------------


@st.composite
def scope_transcripts(draw: st.DrawFn, *, broken: bool = False) -> list[Message]:
    """
    A tool-heavy transcript from :func:`transcripts`, where some calling
    assistant messages get a reasoning-only assistant message just before
    them, and some tool results are tagged. With *broken*, random messages are
    then deleted, so calls lose results and results lose calls (orphans).
    """
    out: list[Message] = []
    for message in draw(transcripts()):
        if message.tool_calls and draw(st.integers(0, 3)) == 0:
            out.append(Message("assistant", (ReasoningBlock(draw(texts)),)))
        if message.role == "tool" and draw(st.integers(0, 3)) == 0:
            message = Message("tool", message.content, tool_call_id=message.tool_call_id, name="lookup")  # noqa: PLW2901  # rebuilt, tagged
        out.append(message)
    if broken and out:
        gone = draw(st.sets(st.integers(0, len(out) - 1), max_size=max(1, len(out) // 3)))
        out = [m for i, m in enumerate(out) if i not in gone]
    return out


def predicate_scopes() -> st.SearchStrategy[Any]:
    """
    Built-in predicate scopes: role filters, tags and ``Since``.
    """
    from workingctx.scopes import RoleFilter, Since, Tagged  # noqa: PLC0415  # appended section keeps imports local

    roles = st.sets(st.sampled_from(["system", "user", "assistant", "tool"]), max_size=3)
    return st.one_of(
        st.builds(RoleFilter, roles),
        st.builds(Tagged, st.sampled_from(["lookup", "other"])),
        st.builds(Since, st.integers(0, 12)),
    )


def positional_scopes() -> st.SearchStrategy[Any]:
    """
    Built-in positional leaf scopes: windows, budgets and completed tool sequences.
    """
    from workingctx.scopes import CompletedToolSequences, LastNTurns, PendingCalls, TokenBudget  # noqa: PLC0415  # see above

    return st.one_of(
        st.builds(LastNTurns, st.integers(0, 4)),
        st.builds(
            TokenBudget,
            st.integers(0, 300),
            start_on=st.sampled_from(["exchange", "user", "user_only"]),
            include_system=st.booleans(),
        ),
        st.just(CompletedToolSequences()),
        st.just(PendingCalls()),
    )


def scope_trees(*, positional: bool = True, max_leaves: int = 6) -> st.SearchStrategy[Any]:
    """
    Random scope trees built with ``AllOf``, ``AnyOf``, ``Not`` and (when
    *positional*) ``WholeExchanges``, over predicate leaves and, when
    *positional*, positional ones too.
    """
    from workingctx.scopes import AllOf, AnyOf, Newest, Not, ValidRequest, WholeExchanges  # noqa: PLC0415  # see above

    leaves = predicate_scopes() | positional_scopes() if positional else predicate_scopes()

    def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        combined: st.SearchStrategy[Any] = (
            st.builds(Not, children)
            | st.builds(AllOf, st.lists(children, max_size=3))
            | st.builds(AnyOf, st.lists(children, max_size=3))
        )
        if positional:
            combined |= st.builds(WholeExchanges, children, mode=st.sampled_from(["expand", "drop"]))
            combined |= st.builds(Newest, st.integers(0, 5), children)
            combined |= st.builds(ValidRequest, children, user_first=st.booleans())
        return combined

    return st.recursive(leaves, extend, max_leaves=max_leaves)


def bounded_scopes(budget: Any, *, max_leaves: int = 4) -> st.SearchStrategy[Any]:
    """
    Scope trees that *budget* (a ``TokenBudget``) bounds: the budget, ``&``
    with any scope tree, and the wrappers that only take away
    (``ValidRequest(..., user_first=False)``, ``WholeExchanges(..., mode="drop")``).
    """
    from workingctx.scopes import AllOf, ValidRequest, WholeExchanges  # noqa: PLC0415  # see above

    others = scope_trees(max_leaves=3)

    def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(
            st.builds(lambda bound, other: AllOf((bound, other)), children, others),
            st.builds(lambda other, bound: AllOf((other, bound)), others, children),
            st.builds(lambda bound: ValidRequest(bound, user_first=False), children),
            st.builds(lambda bound: WholeExchanges(bound, mode="drop"), children),
        )

    return st.recursive(st.just(budget), extend, max_leaves=max_leaves)


@st.composite
def block_transcripts(draw: st.DrawFn, *, broken: bool = False) -> list[Message]:
    """
    A :func:`scope_transcripts` transcript where some tool results arrive as
    ``ToolResultBlock`` content, in the Anthropic shape: user messages that carry
    the results, sometimes several results (even of different calls) in one message.
    """
    out: list[Message] = []
    for message in draw(scope_transcripts(broken=broken)):
        answered = message.tool_call_id
        if message.role != "tool" or answered is None or not draw(st.booleans()):
            out.append(message)
            continue
        block = ToolResultBlock(answered, message.text())
        previous = out[-1] if out else None
        if previous is not None and previous.role == "user" and previous.result_ids and draw(st.booleans()):
            out[-1] = Message("user", (*previous.content, block))
        else:
            out.append(Message("user", (block,)))
    return out


# -- live contexts (persistence) ------------------------------------------------------


@st.composite
def working_contexts(draw: st.DrawFn, *, max_turns: int = 4) -> Any:
    """
    A live WorkingContext: any prefix, a valid tool-heavy tail, JSON notes and
    journal entries, some of them recorded after the last commit.
    """
    from workingctx.context import WorkingContext  # noqa: PLC0415  # keeps this module importable alone

    ctx = WorkingContext(prefix=draw(prefixes), messages=draw(transcripts(max_turns=max_turns)))
    ctx.update_scratchpad(draw(scratchpads))
    for entry in draw(st.lists(json_objects, max_size=3)):
        ctx.journal.record(entry)
    if draw(st.booleans()):
        ctx.journal.mark_committed()
    for entry in draw(st.lists(json_objects, max_size=2)):
        ctx.journal.record(entry)
    return ctx


def calls_moved_back(draw: st.DrawFn, msgs: list[Message], roles: tuple[str, ...]) -> tuple[list[Message], int] | None:
    """
    *msgs* with the calls of one call-only assistant message written, as call
    blocks, into the message before it (one of *roles*), that assistant message
    left out; with the moved message's index. None when no message has calls
    to move.
    """
    movable = [i for i, m in enumerate(msgs) if i and m.tool_calls and not m.content and msgs[i - 1].role in roles]
    if not movable:
        return None
    at = draw(st.sampled_from(movable)) - 1
    before, caller = msgs[at], msgs[at + 1]
    blocks = tuple(ToolCallBlock(c.id, c.name, c.arguments) for c in caller.tool_calls)
    content = (TextBlock(before.content),) if isinstance(before.content, str) else before.content
    moved = Message(before.role, (*content, *blocks), tool_call_id=before.tool_call_id, name=before.name)
    return [*msgs[:at], moved, *msgs[at + 2 :]], at


# -- checks ---------------------------------------------------------------------------


def assert_identical(expected: Any, actual: Any, path: str = "$") -> None:
    """
    Fail unless *actual* equals *expected* with the same types at every depth:
    ``True`` is not ``1``, ``1`` is not ``1.0``, a ``FrozenDict`` is not a ``dict``.
    """
    assert type(expected) is type(actual), f"{path}: {expected!r} is {type(expected)}, {actual!r} is {type(actual)}"
    if isinstance(expected, dict):
        assert list(expected) == list(actual) or set(expected) == set(actual), f"{path}: keys differ"
        for key, item in expected.items():
            assert_identical(item, actual[key], f"{path}[{key!r}]")
    elif isinstance(expected, list | tuple):
        assert len(expected) == len(actual), f"{path}: lengths differ"
        for index, (left, right) in enumerate(zip(expected, actual, strict=True)):
            assert_identical(left, right, f"{path}[{index}]")
    elif attrs.has(type(expected)):
        for field in attrs.fields(type(expected)):
            if field.eq and not field.name.startswith("_"):
                name = field.name
                assert_identical(getattr(expected, name), getattr(actual, name), f"{path}.{name}")
    elif isinstance(expected, float) and expected == 0.0:
        assert str(expected) == str(actual), f"{path}: {expected!r} != {actual!r}"
    else:
        assert expected == actual, f"{path}: {expected!r} != {actual!r}"


trim_runs = st.one_of(transcripts(max_turns=8), scope_transcripts(broken=True), block_transcripts(broken=True))
"""Transcripts of every kind a trim meets: whole turns, broken exchanges, content blocks."""

system_heads = st.lists(
    st.sampled_from([Message("system", "Be brief."), Message("system", "Cite sources.")]), max_size=2
)
"""The few system messages a trim may keep before the newest messages."""
