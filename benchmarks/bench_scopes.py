"""
Scope benchmarks on tool-heavy transcripts (``benchmarks._data.tool_heavy``).

Rows:

* ``slice`` of a context through a scope composed three levels deep
  (``WholeExchanges((LastNTurns(200) & ~RoleFilter({'system'})) | Tagged('search_docs'))``)
  at 100 / 1,000 / 10,000 messages, to show the cost grows linearly;
* ``TokenBudget(start_on="user")`` against LangChain's
  ``trim_messages(strategy="last", token_counter=count_tokens_approximately, start_on="human", include_system=True)``
  on the same transcript with a budget of 25% and 50% of its tokens (each side's
  own count), at 100 / 1,000 / 10,000 messages: warm (every count cached, as in
  an agent loop) and cold (fresh message objects, nothing cached), the cold one
  twice: a context built from the fresh messages then sliced, and the scope
  over the bare list. Both sides return the kept messages;
* quality over 500 seeded random transcripts and budgets: how often each side
  keeps nothing but the system message although the newest whole exchange would
  have fit.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import attrs

from benchmarks._data import to_langchain, tool_heavy
from benchmarks._harness import Table, measure
from workingctx import ApproxTokenCounter, LastNTurns, Message, RoleFilter, TokenBudget, WholeExchanges
from workingctx.context import WorkingContext
from workingctx.scopes import Tagged, surviving_indices

GROUP = "scopes"
PEER = "langchain trim_messages(last, human, system)"
QUALITY_RUNS = 500


def _composed() -> Any:
    return WholeExchanges((LastNTurns(200) & ~RoleFilter({"system"})) | Tagged("search_docs"))


def _kept(scope: Any, messages: Sequence[Message]) -> list[Message]:
    """
    What ``slice`` does with a scope's answer: the kept messages, in order.
    """
    return [messages[i] for i in sorted(surviving_indices(scope, messages))]


def _number(seconds_hint: float) -> int:
    """
    Calls per timed round so that a round lasts about 100 ms.
    """
    return max(1, min(1_000, int(0.1 / max(seconds_hint, 1e-6))))


def _rounds(n: int) -> int:
    return 3 if n >= 10_000 else 5


def _peer(trim: Callable[..., Any], count: Callable[[Any], int], messages: list[Any], budget: int) -> list[Any]:
    result: list[Any] = trim(
        messages, max_tokens=budget, strategy="last", token_counter=count, start_on="human", include_system=True
    )
    return result


def run(table: Table, quick: bool) -> None:
    from langchain_core.messages import trim_messages  # noqa: PLC0415  # a peer, bench extra
    from langchain_core.messages.utils import count_tokens_approximately  # noqa: PLC0415

    sizes = [100, 1_000] if quick else [100, 1_000, 10_000]
    counter = ApproxTokenCounter()
    for n in sizes:
        messages = tool_heavy(n)
        ctx = WorkingContext(messages=messages)
        scope = _composed()
        hint = measure(partial(ctx.slice, scope), repeat=1)
        seconds = measure(partial(ctx.slice, scope), repeat=7, number=_number(hint))
        table.add(
            GROUP,
            "slice, scope three levels deep",
            n,
            seconds,
            note=f"{seconds / n * 1e6:.2f} µs per message; {len(ctx.slice(scope).messages)} kept",
        )

    for n in sizes:
        messages = tool_heavy(n)
        langchain_messages = to_langchain(messages)
        ours_total = counter.count(messages)
        peer_total = count_tokens_approximately(langchain_messages)
        for share in (0.25, 0.5):
            _budget_rows(table, n, share, messages, langchain_messages, ours_total, peer_total, trim_messages)

    _quality(table, 100 if quick else QUALITY_RUNS, trim_messages, count_tokens_approximately)


def _budget_rows(
    table: Table,
    n: int,
    share: float,
    messages: list[Message],
    langchain_messages: list[Any],
    ours_total: int,
    peer_total: int,
    trim: Callable[..., Any],
) -> None:
    from langchain_core.messages.utils import count_tokens_approximately  # noqa: PLC0415

    peer_budget = int(peer_total * share)
    scope = TokenBudget(int(ours_total * share), start_on="user")

    def peer_call() -> list[Any]:
        return _peer(trim, count_tokens_approximately, langchain_messages, peer_budget)

    peer_hint = measure(peer_call, repeat=1)
    peer = measure(peer_call, repeat=_rounds(n), number=_number(peer_hint))

    # Warm: a context counted before, as in an agent loop (counts cached on the
    # messages, system positions known to the context's tail view).
    # ctx.slice(scope) returns a new context holding the kept messages.
    ctx = WorkingContext(messages=messages)
    ctx.count_tokens()
    assert list(ctx.slice(scope).messages) == _kept(scope, messages)
    warm_hint = measure(lambda: ctx.slice(scope), repeat=1)
    warm_number = _number(warm_hint)
    warm = measure(lambda: ctx.slice(scope), repeat=7, number=warm_number)

    # Cold, as a user converting a transcript pays it: fresh message objects
    # per call (nothing cached), then either a context built from them and
    # sliced, or the scope over the bare list.
    cold_number = max(1, min(10, warm_number // 4))
    fresh: list[list[Message]] = []

    def rebuild() -> None:
        fresh[:] = [[attrs.evolve(m) for m in messages] for _ in range(cold_number)]

    def cold_context() -> WorkingContext:
        return WorkingContext(messages=fresh.pop()).slice(scope)

    cold = measure(cold_context, repeat=_rounds(n), number=cold_number, setup=rebuild)
    bare = measure(lambda: _kept(scope, fresh.pop()), repeat=_rounds(n), number=cold_number, setup=rebuild)

    kept = len(_kept(scope, messages))
    label = f"TokenBudget({int(share * 100)}% of tokens, start_on='user')"
    target = " target >= 300x" if n >= 10_000 else ""
    cold_target = "; target >= 10x" if n >= 10_000 else ""
    table.add(
        GROUP,
        f"{label}, warm: ctx.slice(scope)",
        n,
        warm,
        baseline=PEER,
        baseline_seconds=peer,
        note=f"{kept} kept, {warm / max(kept, 1) * 1e6:.2f} µs per kept message;{target}",
    )
    table.add(
        GROUP,
        f"{label}, cold: WorkingContext(messages=fresh).slice(scope)",
        n,
        cold,
        baseline=PEER,
        baseline_seconds=peer,
        note="fresh messages, nothing cached; the context is built in the timing" + cold_target,
    )
    table.add(
        GROUP,
        f"{label}, cold: surviving_indices over a bare list",
        n,
        bare,
        baseline=PEER,
        baseline_seconds=peer,
        note="fresh messages, nothing cached" + cold_target,
    )


def _newest_exchange_start(messages: list[Message]) -> int:
    """
    Where the newest whole exchange starts: the last cut that leaves no result apart from its call.
    """
    for start in range(len(messages) - 1, 0, -1):
        if _whole_at(messages, start):
            return start
    return 0


def _whole_at(messages: list[Message], start: int) -> bool:
    asked = {call for m in messages[:start] for call in m.call_ids}
    return not any(answered in asked for m in messages[start:] for answered in m.result_ids)


def _quality(table: Table, runs: int, trim: Callable[..., Any], count: Callable[[Any], int]) -> None:
    """
    Random transcripts and budgets: how often is nothing but the system message
    kept although the newest whole exchange (and the system message) would fit?
    """
    rng = random.Random(20_240_601)
    counter = ApproxTokenCounter()
    peer_bad = ours_bad = ours_user = ours_fallback = 0
    for seed in range(runs):
        messages = tool_heavy(rng.randint(12, 240), seed)
        share = rng.uniform(0.01, 0.4)
        start = _newest_exchange_start(messages)

        lc = to_langchain(messages)
        peer_budget = int(count(lc) * share)
        peer_fits = count([lc[0], *lc[start:]]) <= peer_budget
        peer_out = _peer(trim, count, lc, peer_budget)
        if peer_fits and len(peer_out) <= 1:
            peer_bad += 1

        ours_budget = int(counter.count(messages) * share)
        ours_fits = counter.count([messages[0], *messages[start:]]) <= ours_budget
        kept = _kept(TokenBudget(ours_budget, start_on="user"), messages)
        if ours_fits and len(kept) <= 1:
            ours_bad += 1
        if len(kept) > 1:
            if kept[1].role == "user":
                ours_user += 1
            else:
                ours_fallback += 1
    table.add(
        GROUP,
        "keeps only the system message although the newest exchange fits",
        f"{runs} transcripts",
        None,
        note=(
            f"trim_messages: {peer_bad} ({peer_bad / runs:.1%}); TokenBudget(start_on='user'): {ours_bad} "
            f"({ours_bad / runs:.1%}); ours starts on a user turn in {ours_user}, "
            f"keeps the newest whole exchanges instead in {ours_fallback}"
        ),
    )
