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

A format may also cap an id's length (OpenAI Chat Completions takes ids of at
most 40 characters, the Responses API at most 64): a longer id is written under
a name of exactly that length, its head and a digest of the whole id, the
same in every request, so a call and its results still meet and the prompt
cache still sees the same bytes.

>>> short_call_ids(["call_1", "chatcmpl-tool-5f3a9c1e8b2d4f6a9e0c7b1d3f5a8c2e"], 40)
{'chatcmpl-tool-5f3a9c1e8b2d4f6a9e0c7b1d3f5a8c2e': 'chatcmpl-tool-5f3-cnoFMCTF-A2SJ7vZfpJtRC'}
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Container, Iterable

__all__ = ["SEPARATOR", "fresh_call_id", "short_call_ids"]

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


_DIGEST = 22
"""Characters of an id's digest in its short name: 132 bits of its sha256, base64url."""


def short_call_ids(ids: Iterable[str], limit: int) -> dict[str, str]:
    """
    A name of exactly *limit* characters for each of *ids* longer than that
    (the ids of one request): its first ``limit - 23`` characters, ``-`` and
    22 characters of the base64url sha256 of the whole id. A name another id
    of the request already holds is skipped for the next one (the digest of
    ``"2:" + id``, and so on), so the result depends only on the ids, not on
    their order.
    """
    if limit <= _DIGEST + 1:
        msg = f"an id limit must leave room for a digest, got {limit!r}; use at least {_DIGEST + 2}"
        raise ValueError(msg)
    every = ids if isinstance(ids, list) else list(ids)
    long = sorted({call_id for call_id in every if len(call_id) > limit})
    if not long:  # the usual request: nothing to rename, no set of every id
        return {}
    taken = set(every).difference(long)
    names: dict[str, str] = {}
    for call_id in long:
        n = 1
        while (name := _short(call_id, limit, n)) in taken:
            n += 1
        taken.add(name)
        names[call_id] = name
    return names


def _short(call_id: str, limit: int, n: int) -> str:
    seed = call_id if n == 1 else f"{n}:{call_id}"
    digest = hashlib.sha256(seed.encode("utf-8", "surrogatepass")).digest()
    return f"{call_id[: limit - _DIGEST - 1]}{SEPARATOR}{base64.urlsafe_b64encode(digest).decode('ascii')[:_DIGEST]}"
