"""
The structure of a transcript that scopes must respect: turns and exchanges.

A **turn** starts at a user message; a user message that carries tool results
(the Anthropic shape) answers a call and does not start a turn.

An **exchange** is what a provider refuses to see split: an assistant message
asking for tool calls (parallel calls included), every message answering one
of those calls, and an assistant message holding only reasoning immediately
before the call. Results link to the latest earlier call with their id, so
exchanges are found in one pass. A result whose call is not earlier in the
list is an *orphan*: no slice can make it valid. A tool message without a call
id links to nothing and is a unit on its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workingctx.messages import ReasoningBlock

if TYPE_CHECKING:
    from collections.abc import Sequence

    from workingctx.messages import Message

__all__ = [
    "call_ids",
    "completed_tool_sequences",
    "exchange_units",
    "is_reasoning_only",
    "result_ids",
    "starts_turn",
]

_NONE: tuple[str, ...] = ()


def call_ids(message: Message) -> tuple[str, ...]:
    """
    The ids of the calls *message* asks for (a fast path for plain-text messages).
    """
    if type(message.content) is str:
        calls = message.tool_calls
        if not calls:
            return _NONE
        if len(calls) == 1:
            return (calls[0].id,)
    return message.call_ids


def result_ids(message: Message) -> tuple[str, ...]:
    """
    The ids of the calls *message* answers (a fast path for plain-text messages).
    """
    if type(message.content) is str:
        answered = message.tool_call_id
        return _NONE if answered is None else (answered,)
    return message.result_ids


def starts_turn(message: Message) -> bool:
    """
    Whether *message* opens a turn: a user message that answers no tool call.
    """
    return message.role == "user" and (type(message.content) is str or not message.result_ids)


def is_reasoning_only(message: Message) -> bool:
    """
    Whether *message* is an assistant message holding nothing but reasoning blocks.
    """
    content = message.content
    return (
        message.role == "assistant"
        and not message.tool_calls
        and type(content) is not str
        and bool(content)
        and all(isinstance(block, ReasoningBlock) for block in content)
    )


def exchange_units(messages: Sequence[Message]) -> tuple[list[int], set[int]]:
    """
    The exchange each message belongs to, and the orphaned results.

    Returns:
        ``(unit, orphans)``: ``unit[i]`` is the same number for every message
        of one exchange (a message outside any exchange is its own unit), and
        ``orphans`` holds the indices of messages answering a call id that no
        earlier message asked for.
    """
    # Every link points back (a result to its call, a call to the reasoning
    # just before it), so one forward pass labels each message with its
    # exchange, unless one message answers calls of two different exchanges:
    # then the exchanges merge, and the general pass below takes over.
    label = list(range(len(messages)))
    latest_call: dict[str, int] = {}
    orphans: set[int] = set()
    previous_reasoning = False
    for i, message in enumerate(messages):
        if message.content.__class__ is str:
            if message.role == "tool":
                answered = message.tool_call_id
                if answered is not None:
                    caller = latest_call.get(answered)
                    if caller is None:
                        orphans.add(i)
                    else:
                        label[i] = label[caller]
            else:
                calls = message.tool_calls
                if calls:
                    for call in calls:
                        latest_call[call.id] = i
                    if previous_reasoning:
                        label[i] = label[i - 1]
            previous_reasoning = False
            continue
        joined: set[int] = set()
        for answered in result_ids(message):
            caller = latest_call.get(answered)
            if caller is None:
                orphans.add(i)
            else:
                joined.add(label[caller])
        asked = call_ids(message)
        if asked and previous_reasoning:
            joined.add(label[i - 1])
        if len(joined) > 1:
            return _merged_units(messages)
        if joined:
            label[i] = joined.pop()
        for call_id in asked:
            latest_call[call_id] = i
        previous_reasoning = is_reasoning_only(message)
    return label, orphans


def _merged_units(messages: Sequence[Message]) -> tuple[list[int], set[int]]:
    """
    :func:`exchange_units` by union-find, for transcripts where exchanges merge.
    """
    parent = list(range(len(messages)))

    def find(i: int) -> int:
        root = i
        while parent[root] != root:
            root = parent[root]
        while parent[i] != root:
            parent[i], i = root, parent[i]
        return root

    def union(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    latest_call: dict[str, int] = {}
    orphans: set[int] = set()
    previous_reasoning = False
    for i, message in enumerate(messages):
        for answered in result_ids(message):
            caller = latest_call.get(answered)
            if caller is None:
                orphans.add(i)
            else:
                union(i, caller)
        asked = call_ids(message)
        if asked:
            for call in asked:
                latest_call[call] = i
            if previous_reasoning:
                union(i, i - 1)
        previous_reasoning = is_reasoning_only(message)
    return [find(i) for i in range(len(messages))], orphans


def completed_tool_sequences(messages: Sequence[Message]) -> frozenset[int]:
    """
    The indices of every completed tool sequence.

    A sequence starts at an assistant message asking for tool calls (with the
    reasoning-only assistant message just before it, if any) and runs through
    the messages answering its calls, further calling assistant messages and
    reasoning-only ones, and tool messages without a call id, up to the first
    other assistant message: the final answer. It is complete when that answer
    exists and every call in the sequence has been answered before it. Any
    other message (a user turn, a system message, the end of the list) ends
    the sequence incomplete.
    """
    kept: list[int] = []
    n = len(messages)
    i = 0
    while i < n:
        asked = call_ids(messages[i])
        if not asked or messages[i].role != "assistant":
            i += 1
            continue
        start = i - 1 if i > 0 and is_reasoning_only(messages[i - 1]) else i
        open_calls = set(asked)
        j = i + 1
        complete = False
        while j < n:
            message = messages[j]
            answered = result_ids(message)
            more = call_ids(message)
            if answered:
                open_calls.difference_update(answered)
            elif more and message.role == "assistant":
                open_calls.update(more)
            elif message.role == "tool" or is_reasoning_only(message):
                pass
            elif message.role == "assistant":
                complete = not open_calls
                break
            else:
                break
            j += 1
        if complete:
            kept.extend(range(start, j + 1))
            i = j + 1
        else:
            i = max(j, i + 1)
    return frozenset(kept)
