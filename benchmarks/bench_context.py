"""
WorkingContext benchmarks: freeze + hash, digest after an append, fork, merge(union).

Each row is compared with a plain-Python baseline measured in the same run:

* freeze + hash: a tuple of per-message ``json.dumps(..., sort_keys=True)`` strings, hashed;
* digest after one append: sha256 over the whole transcript's canonical JSON;
* fork: ``list(messages)`` + ``copy.deepcopy(scratchpad)``;
* merge(union): a set of per-message JSON keys of one side, filtering the other.

The notes rows take a 1,000-message context with a 10-key, 5 KB nested
scratchpad (``notes_5kb()``, the shape of an agent's plan, findings and
settings). ``hash(freeze())`` and ``digest()`` with notes that did not change
since the last call are compared with the same call on the context without
notes (the target is 10 µs: the notes cost nothing when they did not change);
writing one note and digesting is compared with the same on the context without
notes; a fork with one append and one note is compared with the same step on
pyrsistent structures (a ``pvector`` of messages and a ``pmap`` of frozen notes).

The scaling rows take the same fork step at 1,000, 10,000 and 40,000 messages
(quick: 1,000 and 10,000) with scratchpads of 10, 1,000 and 10,000 small nested
notes (``many_notes(k)``): a fork shares the parent's notes, so the step should
cost the same at every size, as the pyrsistent step does.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections import Counter
from typing import Any

import pyrsistent

from benchmarks._data import tool_heavy
from benchmarks._harness import Table, measure
from workingctx import Message, WorkingContext
from workingctx.serialization import unstructure

GROUP = "context"


def _json_key(message: Message) -> str:
    return json.dumps(unstructure(message), sort_keys=True)


def _scratchpad() -> dict[str, object]:
    return {
        f"note_{k}": {"steps": [f"step {i}" for i in range(5)], "meta": {"owner": "agent", "n": k, "tags": ["a", "b"]}}
        for k in range(10)
    }


def notes_5kb() -> dict[str, Any]:
    """
    A realistic 10-key scratchpad of about 5 KB of nested JSON data.
    """
    findings = [
        {"host": f"api-{i}.example.com", "status": "expired" if i % 3 == 0 else "ok", "checked": f"2026-08-0{i + 1}"}
        for i in range(16)
    ]
    return {
        "plan": {"goal": "rotate the expired certificates", "steps": [f"step {i}: check host {i}" for i in range(12)]},
        "findings": findings,
        "owner": {"team": "sre", "oncall": ["ana", "bo", "chen"], "escalation": {"after_minutes": 30}},
        "ticket": {
            "id": "ENG-4412",
            "labels": ["tls", "incident", "p1"],
            "links": [f"https://tracker.example.com/{i}" for i in range(5)],
        },
        "budget": {"tokens": 120_000, "spent": 48_211, "per_turn": [812, 1204, 930, 1502, 2210, 640]},
        "tools": {name: {"calls": 3, "errors": 0, "last": "ok"} for name in ("dns", "openssl", "sql", "http", "ssh")},
        "history": [
            {"turn": t, "summary": f"turn {t}: looked at host {t}, read its certificate chain and found nothing new"}
            for t in range(20)
        ],
        "settings": {"model": "claude-sonnet-4-6", "temperature": 0.2, "max_tokens": 4096, "stream": True},
        "scratch": {"draft": "The certificates of three hosts expired; " * 12, "todo": ["notify", "rotate", "verify"]},
        "stage": "act",
    }


def many_notes(keys: int) -> dict[str, Any]:
    """
    A scratchpad of *keys* small nested notes (about 60 bytes of JSON each).
    """
    return {f"note_{k:05d}": {"step": k, "tags": ["a", "b"], "done": k % 2 == 0} for k in range(keys)}


def _fork_step_rows(table: Table, n: int, keys: int, notes: dict[str, Any] | None = None, label: str = "") -> None:
    """
    ``ctx.fork().append(msg).note("stage", "verify")`` against the same step on
    pyrsistent (``pvector.append`` + ``pmap.set`` on a pmap of frozen notes).
    """
    messages = tool_heavy(n)
    notes = many_notes(keys) if notes is None else notes
    ctx = WorkingContext(messages=messages, scratchpad=notes)
    extra = Message("user", "and one more?")

    def fork_step() -> WorkingContext:
        return ctx.fork().append(extra).note("stage", "verify")

    state = pyrsistent.pmap({"messages": pyrsistent.pvector(messages), "notes": pyrsistent.freeze(notes)})

    def peer_step(state: Any = state) -> Any:
        return state.set("messages", state["messages"].append(extra)).set(
            "notes", state["notes"].set("stage", "verify")
        )

    fork_step()
    peer_step()
    table.add(
        GROUP,
        "fork() + append(1) + note(1 key)",
        label or f"{n} msgs + {keys:,} note keys",
        measure(fork_step, repeat=9, number=200),
        baseline="pyrsistent pvector.append + pmap.set",
        baseline_seconds=measure(peer_step, repeat=9, number=200),
        note="target: ratio >= 1",
    )


def _notes_rows(table: Table, n: int) -> None:
    messages = tool_heavy(n)
    notes = notes_5kb()
    size = len(json.dumps(notes))
    ctx = WorkingContext(messages=messages, scratchpad=notes)
    bare = WorkingContext(messages=messages)
    label = f"{n} msgs + {size:,} B notes"
    for each in (ctx, bare):
        hash(each.freeze())
        each.digest()
    number = 200

    table.add(
        GROUP,
        "hash(freeze()), notes unchanged",
        label,
        measure(lambda: hash(ctx.freeze()), repeat=9, number=number),
        baseline="the same without notes",
        baseline_seconds=measure(lambda: hash(bare.freeze()), repeat=9, number=number),
        note="target <= 10 µs",
    )
    table.add(
        GROUP,
        "digest(), notes unchanged",
        label,
        measure(ctx.digest, repeat=9, number=number),
        baseline="the same without notes",
        baseline_seconds=measure(bare.digest, repeat=9, number=number),
        note="target <= 10 µs",
    )
    steps = iter(range(10**9))

    def note_digest(target: WorkingContext) -> str:
        return target.note("stage", f"act {next(steps)}").digest()

    table.add(
        GROUP,
        "note(1 key) + digest()",
        label,
        measure(lambda: note_digest(ctx), repeat=9, number=number),
        baseline="the same without other notes",
        baseline_seconds=measure(lambda: note_digest(bare), repeat=9, number=number),
        note="a changed note costs that note",
    )

    _fork_step_rows(table, n, len(notes), notes, label)


def _freeze_hash(table: Table, sizes: list[int]) -> None:
    for n in sizes:
        messages = tool_heavy(n)
        ctx = WorkingContext(messages=messages, scratchpad={"stage": "act", "ticket": "ENG-4412"})
        keys = [_json_key(m) for m in messages]

        def baseline(keys: list[str] = keys) -> int:
            return hash(tuple(keys))

        def cold_baseline(messages: list[Message] = messages) -> int:
            return hash(tuple(json.dumps(unstructure(m), sort_keys=True) for m in messages))

        holder: list[WorkingContext] = []

        def fresh(n: int = n, holder: list[WorkingContext] = holder) -> None:
            holder[:] = [WorkingContext(messages=tool_heavy(n))]  # new message objects: nothing cached

        def first_freeze(holder: list[WorkingContext] = holder) -> int:
            return hash(holder[0].freeze())

        cold = measure(first_freeze, repeat=3 if n >= 10_000 else 5, setup=fresh)
        hash(ctx.freeze())  # the chain is built once; later freezes reuse it

        def again(ctx: WorkingContext = ctx) -> int:
            return hash(ctx.freeze())

        warm = measure(again, repeat=7, number=max(1, 2000 // max(n // 10, 1)))
        base_cold = measure(cold_baseline, repeat=3 if n >= 10_000 else 5)
        base_warm = measure(baseline, repeat=7, number=10)
        table.add(
            GROUP,
            "freeze()+hash(), first time",
            n,
            cold,
            baseline="json.dumps per message, hashed",
            baseline_seconds=base_cold,
            note="hashes every message once",
        )
        table.add(
            GROUP,
            "freeze()+hash(), again",
            n,
            warm,
            baseline="hash(tuple) of cached json strings",
            baseline_seconds=base_warm,
            note="chain and tuple reused",
        )

        extra = Message("user", "and one more?")

        def append_freeze(ctx: WorkingContext = ctx, extra: Message = extra) -> int:
            ctx.append(extra)
            return hash(ctx.freeze())

        grown = measure(append_freeze, repeat=7, number=20)
        table.add(
            GROUP,
            "append(1)+freeze()+hash()",
            n,
            grown,
            baseline="json.dumps per message, hashed",
            baseline_seconds=base_cold,
            note="an agent loop's step",
        )


def _digest_after_append(table: Table, n: int) -> None:
    messages = tool_heavy(n)
    ctx = WorkingContext(messages=messages, scratchpad={"stage": "act", "ticket": "ENG-4412"})
    ctx.digest()
    counter = iter(range(10**9))

    def step() -> str:
        ctx.append(Message("user", f"follow-up {next(counter)}"))
        return ctx.digest()

    ours = measure(step, repeat=7, number=20)
    transcript = list(messages)

    def naive() -> str:
        body = json.dumps([unstructure(m) for m in transcript], sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()

    base = measure(naive, repeat=3)
    table.add(
        GROUP,
        "digest() after append(1)",
        n,
        ours,
        baseline="sha256 of whole transcript JSON",
        baseline_seconds=base,
        note="target < 50 µs",
    )


def _fork(table: Table, n: int) -> None:
    messages = tool_heavy(n)
    ctx = WorkingContext(messages=messages, scratchpad=_scratchpad())
    ours = measure(ctx.fork, repeat=9, number=20)
    scratch = _scratchpad()
    base = measure(lambda: (list(messages), copy.deepcopy(scratch)), repeat=9, number=20)
    table.add(
        GROUP,
        "fork(), 10-key nested scratchpad",
        n,
        ours,
        baseline="list(msgs)+deepcopy(scratchpad)",
        baseline_seconds=base,
        note="target: ratio >= 1",
    )


def _merge_union(table: Table, n: int) -> None:
    left = tool_heavy(n, seed=1)
    right = left[: n // 2] + tool_heavy(n - n // 2, seed=2)

    def ours() -> int:
        return WorkingContext(messages=left).merge(WorkingContext(messages=right), mode="union").size()

    def naive() -> int:
        # a multiset union, as merge(union) is: each message as often as on the fuller side
        seen = Counter(_json_key(m) for m in left)
        added = 0
        for key in map(_json_key, right):
            if seen[key] > 0:
                seen[key] -= 1
            else:
                added += 1
        return len(left) + added

    assert ours() == naive()
    table.add(
        GROUP,
        "merge(union) of two contexts",
        f"{n}+{n}",
        measure(ours, repeat=5),
        baseline="set of per-message JSON keys",
        baseline_seconds=measure(naive, repeat=3),
        note="half shared",
    )


def run(table: Table, quick: bool) -> None:
    sizes = [10, 100, 1_000] if quick else [10, 100, 1_000, 10_000]
    _freeze_hash(table, sizes)
    _digest_after_append(table, 1_000 if quick else 10_000)
    _fork(table, 1_000 if quick else 10_000)
    _merge_union(table, 500 if quick else 5_000)
    _notes_rows(table, 1_000)
    for n in (1_000, 10_000) if quick else (1_000, 10_000, 40_000):
        for keys in (10, 1_000) if quick else (10, 1_000, 10_000):
            _fork_step_rows(table, n, keys)
