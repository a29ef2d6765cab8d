"""
Call ids are local names.

A tool call's id means one thing: "the result that answers this call". Providers
and frameworks reuse ids freely (OpenAI-compatible servers number calls
``call_0``, ``call_1`` in every response; two sub-agents forked from one parent
both start at ``call_0``), so when two different calls meet under one name, one
of them is given a new name. The new name is deterministic, so digests, request
keys and cache plans stay the same in every process; readable, so a person can
still see which call it was; and made only of ``[a-zA-Z0-9_-]`` added to the old
name, so it fits every provider's id alphabet whenever the old name did.

>>> fresh_call_id("call_0", {"call_0"})
'call_0-2'
>>> fresh_call_id("call_0", {"call_0", "call_0-2", "call_0-3"})
'call_0-4'
>>> fresh_call_id("toolu_01A", set())
'toolu_01A-2'
"""

from __future__ import annotations

from collections.abc import Container

__all__ = ["SEPARATOR", "fresh_call_id"]

SEPARATOR = "-"
"""What joins an id and its number in a new name (``call_0`` -> ``call_0-2``)."""


def fresh_call_id(call_id: str, taken: Container[str]) -> str:
    """
    The new name for *call_id*: the first of ``call_id-2``, ``call_id-3``, ...
    that is not in *taken*.

    The result depends only on *call_id* and on what *taken* holds, so the same
    inputs give the same name in every process. *call_id* itself is never
    returned, taken or not: callers ask only when the name is already used by
    another call.
    """
    if not isinstance(call_id, str) or not call_id:
        msg = f"a call id is a non-empty string, got {call_id!r}"
        raise TypeError(msg)
    n = 2
    while (candidate := f"{call_id}{SEPARATOR}{n}") in taken:
        n += 1
    return candidate
