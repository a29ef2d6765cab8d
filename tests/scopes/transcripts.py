"""
The reference transcript of the scope tests, and the slow, obvious checks of
what a scope keeps: which messages must stay together, and whether a kept set
splits any of them.
"""

from __future__ import annotations

from typing import Any

from workingctx import Message, ToolCall
from workingctx.context import WorkingContext
from workingctx.scopes import surviving_indices
from workingctx.scopes._exchanges import is_reasoning_only


def house() -> list[Message]:
    """
    The reference's transcript: a system message and three question/answer turns.
    """
    out = [Message("system", "House rules.")]
    for i in range(3):
        out += [Message("user", f"q{i}"), Message("assistant", f"a{i}")]
    return out


def house_ctx() -> WorkingContext:
    ctx = WorkingContext()
    ctx.append(Message("system", "House rules."))
    for i in range(3):
        ctx.append(Message("user", f"q{i}"), Message("assistant", f"a{i}"))
    return ctx


def kept(scope: Any, messages: list[Message]) -> list[Any]:
    return [messages[i].content for i in sorted(surviving_indices(scope, messages))]


def call(call_id: str, name: str = "lookup") -> ToolCall:
    return ToolCall(call_id, name, {"q": call_id})


def links(messages: list[Message]) -> list[tuple[int, int]]:
    """
    Every pair of indices that must stay together, found the slow, obvious way:
    a result and the latest earlier call with its id; a reasoning-only
    assistant message and the calling message right after it.
    """
    out = []
    for p, message in enumerate(messages):
        for answered in message.result_ids:
            callers = [q for q in range(p) if answered in messages[q].call_ids]
            if callers:
                out.append((callers[-1], p))
        if message.call_ids and p > 0 and is_reasoning_only(messages[p - 1]):
            out.append((p - 1, p))
    return out


def units(messages: list[Message]) -> list[int]:
    """
    The component of each index under links(), by repeated relabelling.
    """
    label = list(range(len(messages)))
    pairs = links(messages)
    changed = True
    while changed:
        changed = False
        for a, b in pairs:
            low = min(label[a], label[b])
            if label[a] != low or label[b] != low:
                label[a] = label[b] = low
                changed = True
    return label


def orphans(messages: list[Message]) -> set[int]:
    return {
        p
        for p, m in enumerate(messages)
        if any(not any(a in messages[q].call_ids for q in range(p)) for a in m.result_ids)
    }


def assert_whole(messages: list[Message], kept_set: frozenset[int]) -> None:
    """
    No kept result without its call, no kept call without its later results,
    no reasoning-only message apart from its call, no orphan kept.
    """
    for a, b in links(messages):
        assert (a in kept_set) == (b in kept_set), (a, b, sorted(kept_set))
    assert not (orphans(messages) & kept_set)
