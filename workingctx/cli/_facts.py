"""
The facts each command prints, as plain data (what ``--json`` prints), and
their tables: ``inspect``, ``check``, ``trim``, ``diff`` and ``replay``.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from workingctx import cache
from workingctx.cli._files import (
    ADAPTERS,
    PROVIDERS,
    Document,
    InputError,
    UsageError,
    call_item,
    places,
    position,
    readable,
)
from workingctx.cli._output import Table, describe, progress, shown_path
from workingctx.context import WorkingContext
from workingctx.exceptions import CacheRuleError, PricingError
from workingctx.managers import TokenBudgetContextManager
from workingctx.messages import ROLES, Message, Usage
from workingctx.pricing import cost
from workingctx.scopes import AnyOf, RoleFilter, ScopeReport, Tagged
from workingctx.snapshot import common_prefix_length
from workingctx.tokens import ApproxTokenCounter, TiktokenCounter
from workingctx.validity import check_messages

__all__ = [
    "check_facts",
    "check_window",
    "diff_facts",
    "inspect_facts",
    "replay_facts",
    "show_check",
    "show_diff",
    "show_inspect",
    "show_replay",
    "show_trim",
    "strategy_rows",
    "trim_facts",
]


def _counter(exact: bool) -> ApproxTokenCounter | TiktokenCounter:
    return TiktokenCounter() if exact else ApproxTokenCounter()


_WRITER_OF = {"openai": "openai_chat", "anthropic": "anthropic", "gemini": "google"}
"""The format of the adapter that writes requests for each provider."""


def _money(value: Decimal) -> str:
    return f"{value:.4f}"


# -- inspect ---------------------------------------------------------------------------


def _format(doc: Document, number: int = -1) -> str:
    """
    The format of request *number* of *doc*.
    """
    return doc.formats[number] if doc.formats else doc.format


def _where(doc: Document, number: int = -1) -> tuple[str, ...]:
    """
    The JSON path in the file of each message of request *number* (assembled), see :func:`places`.
    """
    return places(doc.payloads[number], _format(doc, number), doc.requests[number])


def _rows(problems: Sequence[Any], where: Sequence[str]) -> list[dict[str, Any]]:
    """
    Problems at positions of the assembled context, each named where the file holds its message.
    """
    rows = []
    for p in problems:
        path = None if p.index is None else where[p.index]
        rows.append({"index": position(path), "where": path, "rule": p.rule, "message": p.message, "ids": list(p.ids)})
    return rows


def _problems(ctx: WorkingContext, provider: str | None, where: Sequence[str]) -> list[dict[str, Any]]:
    return _rows(check_messages(ctx.assembled(), provider=provider), where)  # type: ignore[arg-type]


def _breakpoints(
    doc: Document, provider: str | None, model: str | None, counter: Any, where: Sequence[str]
) -> list[dict[str, Any]]:
    """
    The cache breakpoints a plan sets on the last request of *doc*.

    Raises:
        InputError: the request already carries more breakpoints than the provider allows.
    """
    ctx = doc.last
    if provider is None or model is None:
        return []
    try:
        made = cache.plan(ctx, provider=provider, model=model, counter=counter)
    except CacheRuleError as exc:  # the provider and its rules are known: the request's own breakpoints break them
        reason = str(exc)
        if _format(doc) == "anthropic":  # the file's name for a block's breakpoint
            reason = reason.replace("remove cache= from", "remove cache_control from")
        raise InputError(doc.path, reason, line=doc.lines[-1]) from None
    return [
        {
            "message": _label(where[b.message], f"P{b.message}"),
            "block": b.block,
            "ttl": b.ttl,
            "tokens": b.tokens,
        }
        for b in made.breakpoints
    ]


def inspect_facts(
    doc: Document, *, provider: str | None, model: str | None, exact: bool, unpriced: bool = False
) -> dict[str, Any]:
    """
    The facts ``workingctx inspect`` prints: per-message tokens, totals,
    problems under the provider's rules (those ``check`` reports on the
    request), the cache breakpoints a plan would set and, with a model, the
    request's input cost. With *unpriced*, a model without a price (one the
    file names, such as a fine-tuned model) leaves the cost out (None) instead
    of raising :class:`PricingError`.
    """
    ctx = doc.last
    counter = _counter(exact)
    where = _where(doc)
    rows: list[dict[str, Any]] = []
    numbered: list[tuple[str, Message]] = [("prefix", m) for m in ctx.prefix.as_messages()]
    numbered += [("tail", m) for m in ctx.messages]
    with progress("counting", len(numbered)) as advance:
        for path, (part, message) in zip(where, numbered, strict=True):
            rows.append(
                {
                    "index": _label(path, "P"),
                    "part": part,
                    "role": message.role,
                    "tokens": counter.count_message(message),
                    "text": describe(message),
                }
            )
            advance()
    prefix_tokens = sum(r["tokens"] for r in rows if r["part"] == "prefix")
    tail_tokens = sum(r["tokens"] for r in rows if r["part"] == "tail")
    facts: dict[str, Any] = {
        "file": doc.path,
        "format": doc.format,
        "requests": len(doc.requests),
        "provider": provider,
        "counter": counter.name,
        "exact": counter.exact,
        "messages": rows,
        "totals": {
            "prefix_messages": len(ctx.prefix.as_messages()),
            "tail_messages": ctx.size(),
            "prefix_tokens": prefix_tokens,
            "tail_tokens": tail_tokens,
            "tokens": prefix_tokens + tail_tokens,
        },
        "digest": ctx.freeze().digest(),
        "problems": _file_problems(doc.payloads[-1], _format(doc), ctx, provider, where),
        "breakpoints": _breakpoints(doc, provider, model, counter, where),
        "model": model,
        "cost": None,
    }
    if model is not None:
        try:
            facts["cost"] = {"input_uncached": _money(cost(model, Usage(input_tokens=prefix_tokens + tail_tokens)))}
        except PricingError:
            if not unpriced:
                raise
    return facts


def _label(path: str, outside: str) -> int | str:
    """
    A message's number in a table: its index in the body's array, or *outside* when the file holds it elsewhere.
    """
    index = position(path)
    return outside if index is None else index


def show_inspect(facts: dict[str, Any]) -> list[Table | str]:
    rows = tuple((r["index"], r["role"], r["tokens"], r["text"]) for r in facts["messages"])
    totals = facts["totals"]
    marked = " (marked P)" if any(r["index"] == "P" for r in facts["messages"]) else ""
    out: list[Table | str] = [
        Table(f"messages of {shown_path(facts['file'])} ({facts['format']})", ("#", "role", "tokens", "text"), rows),
        (
            f"prefix: {totals['prefix_messages']} messages{marked}, {totals['prefix_tokens']} tokens; "
            f"tail: {totals['tail_messages']} messages, {totals['tail_tokens']} tokens; "
            f"total {totals['tokens']} ({facts['counter']})"
        ),
        f"digest: {facts['digest']}",
    ]
    if facts["requests"] > 1:
        out.insert(0, f"a log of {facts['requests']} requests; the last one:")
    out.extend(_show_problems(facts["problems"], facts["provider"]))
    if facts["breakpoints"]:
        out.append(
            Table(
                f"cache breakpoints a plan sets for {facts['provider']} {facts['model']}",
                ("message", "block", "ttl", "tokens before"),
                tuple((b["message"], b["block"], b["ttl"], b["tokens"]) for b in facts["breakpoints"]),
            )
        )
    if facts["cost"] is not None:
        out.append(f"input cost without cache on {facts['model']}: ${facts['cost']['input_uncached']}")
    elif facts["model"] is None:
        out.append("the file names no model: give --model for the cost and the cache breakpoints")
    else:
        out.append(
            f"no price for the file's model {facts['model']}: give --model with a model of known prices for the cost"
        )
    return out


def _show_problems(problems: Sequence[dict[str, Any]], provider: str | None) -> list[Table | str]:
    rules = f"{provider}'s rules" if provider else "every provider's rules"
    if not problems:
        return [f"valid under {rules}"]
    rows = tuple((p["where"] or "", p["rule"], p["message"]) for p in problems)
    return [Table(f"{len(problems)} problems under {rules}", ("message", "rule", "what and how to fix"), rows)]


# -- check -----------------------------------------------------------------------------


def _file_problems(
    payload: Any, fmt: str, ctx: WorkingContext, provider: str | None, where: Sequence[str]
) -> list[dict[str, Any]]:
    """
    The problems of one request: for a request to its own provider, what its
    adapter's ``check`` reports on the body as written (not on the context the
    reader made of it, which may have repaired it); for another provider, what
    that provider's adapter would refuse to write; for workingctx JSON without
    a provider, every provider's rules (LangChain messages: their adapter's).
    """
    if fmt in ADAPTERS and provider in {None, PROVIDERS.get(fmt)}:
        rows = _rows(ADAPTERS[fmt].check(readable(payload, fmt)), where)
    elif provider is None:
        rows = _problems(ctx, None, where)
    else:
        rows = _rows(ADAPTERS[_WRITER_OF[provider]].check(ctx), where)
    for row in rows:  # a problem of calls points at the item holding them (a Responses run holds several)
        row["where"] = call_item(payload, fmt, row["where"], row["ids"])
    return rows


def check_facts(doc: Document, *, provider: str | None) -> dict[str, Any]:
    """
    The facts ``workingctx check`` prints: every problem of every request, as
    written in the file, under *provider*'s rules, or each under its own
    provider's (a log may mix them) when *provider* is None.
    """
    requests = []
    formats = doc.formats or (doc.format,) * len(doc.requests)
    for number, (line, ctx, payload, fmt) in enumerate(
        zip(doc.lines, doc.requests, doc.payloads, formats, strict=True)
    ):
        problems = _file_problems(payload, fmt, ctx, provider, _where(doc, number))
        requests.append({"line": line, "provider": provider or PROVIDERS.get(fmt), "problems": problems})
    rules = {r["provider"] for r in requests}
    return {
        "file": doc.path,
        "format": doc.format,
        "provider": rules.pop() if len(rules) == 1 else None,
        "valid": not any(r["problems"] for r in requests),
        "requests": requests,
        "_formats": list(formats),  # of each request: a log may mix them
    }


def show_check(facts: dict[str, Any]) -> list[Table | str]:
    requests = facts["requests"]
    if len(requests) == 1:
        return _show_problems(requests[0]["problems"], facts["provider"])
    out: list[Table | str] = []
    for request in requests:
        shown = _show_problems(request["problems"], request["provider"])
        if isinstance(shown[0], str):
            out.append(f"line {request['line']}: {shown[0]}")
        else:
            out.append(f"line {request['line']}:")
            out.extend(shown)
    return out


# -- trim ------------------------------------------------------------------------------


def _pin(specs: Sequence[str]) -> Any:
    scopes: list[Any] = []
    for spec in specs:
        kind, _, value = spec.partition(":")
        if kind == "role" and value not in ROLES and value:
            roles = ", ".join(f"role:{role}" for role in sorted(ROLES))
            msg = f"--pin {spec!r}: {value!r} is no role; a message's role is one of {roles} (lower case)"
            raise UsageError(msg)
        if kind == "role" and value:
            scopes.append(RoleFilter({value}))
        elif kind == "tag" and value:
            scopes.append(Tagged(value))
        else:
            msg = f"--pin {spec!r}: use role:ROLE (e.g. role:user) or tag:NAME (a message's name)"
            raise UsageError(msg)
    if not scopes:
        return None
    return scopes[0] if len(scopes) == 1 else AnyOf(scopes)


def _kept(messages: Sequence[Message], out: Sequence[Message]) -> list[int]:
    """
    The indices of *messages* that a manager's result *out* (a subsequence of
    them) holds: the very messages it kept, else (a manager that rebuilt
    them) equal ones matched from the newest, as a window keeps the newest. A
    match of equal messages from the oldest took a repeated exchange early in
    the file for the newest one kept.
    """
    kept: list[int] = []
    for index, message in enumerate(messages):
        if len(kept) < len(out) and out[len(kept)] is message:
            kept.append(index)
    if len(kept) == len(out):
        return kept
    kept = []
    for index in reversed(range(len(messages))):
        if len(kept) < len(out) and out[len(out) - 1 - len(kept)] == messages[index]:
            kept.append(index)
    return kept[::-1]


def trim_facts(doc: Document, *, budget: int, low: int | None, pin: Sequence[str], exact: bool) -> dict[str, Any]:
    """
    The facts ``workingctx trim`` prints: what the token-budget manager keeps and
    drops on the last request, and what that saves. The cut keeps as much as
    fits *budget*; with *low*, it goes down to that low watermark instead.
    """
    ctx = doc.last
    counter = _counter(exact)
    pinned = _pin(pin)
    options: dict[str, Any] = {} if pinned is None else {"pin": pinned}
    manager = _manager(budget, budget if low is None else low, counter=counter, **options)
    trimmed = manager.trim_context(ctx.fork())
    kept = _kept(ctx.messages, trimmed.messages)
    dropped = [i for i in range(ctx.size()) if i not in set(kept)]
    counts = [counter.count_message(m) for m in ctx.messages]
    kept_tokens = sum(counts[i] for i in kept)
    # each message named by its index in the body's array, as the file numbers it
    tail = _where(doc)[len(ctx.prefix.as_messages()) :]
    numbers = [position(path) or 0 for path in tail]
    cache_break = numbers[dropped[0]] if dropped else None
    report = ScopeReport(
        scope=manager,
        total=ctx.size(),
        kept=tuple(numbers[i] for i in kept),
        dropped=tuple(numbers[i] for i in dropped),
        kept_tokens=kept_tokens,
        saved_tokens=sum(counts) - kept_tokens,
        cache_break=cache_break,
        cached_tokens=kept_tokens if not dropped else sum(counts[: dropped[0]]),
        prefix_tokens=counter.count(ctx.prefix.as_messages()),
    )
    before = counter.count(ctx.assembled())
    after = counter.count(trimmed.assembled())
    return {
        "file": doc.path,
        "format": doc.format,
        "budget": budget,
        "low": low,
        "scope": repr(manager),
        "kept": list(report.kept),
        "dropped": list(report.dropped),
        "tokens_before": before,
        "tokens_after": after,
        "fits": after <= budget,
        "cache_break": cache_break,
        "prefix_tokens": report.prefix_tokens,
        "explain": str(report),
        "messages": [{"index": numbers[i], "role": m.role, "text": describe(m)} for i, m in enumerate(ctx.messages)],
        "_trimmed": trimmed,
        # where the file holds each message of the trimmed request (assembled), to name its problems
        "_where": (*_where(doc)[: len(ctx.prefix.as_messages())], *(tail[i] for i in kept)),
    }


def _manager(window: int, low: int | None, **options: Any) -> TokenBudgetContextManager:
    """
    The token-budget manager of *window* tokens cutting down to *low*; a usage error when they cannot be.
    """
    try:
        return TokenBudgetContextManager(window, low_watermark=low, **options)
    except (ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from None


def check_window(window: int | None, low: int | None) -> None:
    """
    Refuse a ``--low`` that cannot apply: without ``--window``, or above it.
    """
    if window is None and low is not None:
        msg = f"--low {low} needs --window: the low watermark is what a cut of the window goes down to"
        raise UsageError(msg)
    if window is not None:
        _manager(window, low)


def show_trim(facts: dict[str, Any]) -> list[Table | str]:
    kept = set(facts["kept"])
    rows = tuple(
        (m["index"], "kept" if m["index"] in kept else "dropped", m["role"], m["text"]) for m in facts["messages"]
    )
    return [
        Table(f"trim of {shown_path(facts['file'])} to {facts['budget']} tokens", ("#", "", "role", "text"), rows),
        facts["explain"],
        f"tokens with the prefix: {facts['tokens_before']} -> {facts['tokens_after']}"
        + ("" if facts["fits"] else f" (over the budget of {facts['budget']}: the newest exchange alone is larger)"),
    ]


# -- diff ------------------------------------------------------------------------------


def diff_facts(a: Document, b: Document, *, exact: bool) -> dict[str, Any]:
    """
    The facts ``workingctx diff`` prints: what changed from A's last request to
    B's, and how much of B's request a prompt cache filled by A can serve.
    """
    old, new = a.last, b.last
    change = new.diff(old)
    counter = _counter(exact)
    shared = common_prefix_length(old.freeze(), new.freeze())
    assembled = new.assembled()
    return {
        "a": a.path,
        "b": b.path,
        "prefix_changed": change.prefix_changed,
        "messages_added": [{"role": m.role, "text": describe(m)} for m in change.messages_added],
        "messages_removed": [{"role": m.role, "text": describe(m)} for m in change.messages_removed],
        "notes_changed": sorted(change.scratchpad_changes),
        "notes_removed": sorted(change.scratchpad_removed),
        "shared_prefix_messages": shared,
        "shared_prefix_tokens": counter.count(assembled[:shared]),
        "b_tokens": counter.count(assembled),
    }


def show_diff(facts: dict[str, Any]) -> list[Table | str]:
    rows = tuple(("+", m["role"], m["text"]) for m in facts["messages_added"])
    rows += tuple(("-", m["role"], m["text"]) for m in facts["messages_removed"])
    title = f"from {shown_path(facts['a'])} to {shown_path(facts['b'])}"
    out: list[Table | str] = [Table(title, ("", "role", "text"), rows)]
    out.append(f"prefix: {'changed' if facts['prefix_changed'] else 'unchanged'}")
    if facts["notes_changed"] or facts["notes_removed"]:
        changed = ", ".join(facts["notes_changed"]) or "-"
        removed = ", ".join(facts["notes_removed"]) or "-"
        out.append(f"notes changed: {changed}; removed: {removed}")
    out.append(
        f"shared prefix: {facts['shared_prefix_messages']} messages, {facts['shared_prefix_tokens']} of "
        f"{facts['b_tokens']} tokens a prompt cache filled by A can serve"
    )
    return out


# -- replay ----------------------------------------------------------------------------


class _Cuts:
    """
    A manager that records the requests at which it cut the context.
    """

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self.request = 0
        self.cuts: list[int] = []

    def trim_context(self, ctx: WorkingContext) -> WorkingContext:
        before = ctx.size()
        out = self.manager.trim_context(ctx)
        if ctx.size() < before:
            self.cuts.append(self.request)
        self.request += 1
        return out  # type: ignore[no-any-return]


def _strategies(window: int | None, low: int | None, counter: Any) -> list[tuple[str, Any, cache.Strategy]]:
    out: list[tuple[str, Any, cache.Strategy]] = [("whole history, planned breakpoints", None, "plan")]
    if window is not None:
        every_turn = _manager(window, window, counter=counter)
        out.append(("trim to the window every turn, one breakpoint on the last block", every_turn, "last"))
        out.append(("watermarks, planned breakpoints", _manager(window, low, counter=counter), "plan"))
    return out


def _request_row(number: int, request: Any, *, at: float, **sent: str) -> dict[str, Any]:
    """
    The row of one request replayed (a :func:`cache.report` or a request of a :func:`cache.simulate` run).
    """
    usage = request.usage
    return {
        "request": number,
        "at": at,
        "input_tokens": usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "fresh_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cost": _money(request.cost),
        "uncached_cost": _money(request.uncached_cost),
        "expired_tokens": request.expired_tokens,
        **sent,
    }


_LONGEST = 10.0**15 - 1
"""The longest wait between two requests :func:`cache.report` takes, in seconds (no entry lives that long)."""


def _as_logged(doc: Document, *, lines: Sequence[tuple[str, str]], counter: Any, wait: float) -> dict[str, Any]:
    """
    The log *doc* replayed as it was sent, *wait* seconds apart, each request
    sent to its provider and model in *lines*: against the cache the last
    request to the same provider and model left (a prompt cache is the
    model's own: a request to another model neither reads nor fills it).
    """
    reports = []
    last: dict[tuple[str, str], tuple[int, WorkingContext]] = {}
    with progress("replaying", len(doc.requests)) as advance:
        for number, (ctx, (provider, model)) in enumerate(zip(doc.requests, lines, strict=True)):
            before, previous = last.get((provider, model), (number, WorkingContext()))
            elapsed = min((number - before) * wait, _LONGEST)
            made = cache.report(previous, ctx, provider=provider, model=model, counter=counter, elapsed=elapsed)
            reports.append(made)
            last[provider, model] = (number, ctx)
            advance()
    read = sum(r.usage.cache_read_tokens for r in reports)
    tokens = sum(r.input_tokens for r in reports)
    return {
        "_costs": [r.cost for r in reports],
        "name": "as logged",
        "requests": [
            _request_row(number, made, at=number * wait, provider=provider, model=model)
            for number, (made, (provider, model)) in enumerate(zip(reports, lines, strict=True))
        ],
        "cuts": [],
        "cost": _money(sum((r.cost for r in reports), Decimal(0))),
        "uncached_cost": _money(sum((r.uncached_cost for r in reports), Decimal(0))),
        "cached_share": round(read / tokens, 4) if tokens else 0.0,
        "lookback_misses": sum(1 for r in reports if r.lookback_miss_tokens),
        "expiry_misses": sum(1 for r in reports if r.expired_tokens),
    }


def replay_facts(
    doc: Document,
    *,
    provider: str,
    model: str,
    window: int | None,
    low: int | None,
    exact: bool,
    gap: float | None = None,
    lines: Sequence[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """
    The facts ``workingctx replay`` prints.

    A ``.jsonl`` log is replayed as it was sent: each request against the cache
    the last request to its provider and model left. A single transcript is replayed as the run that
    built it, one request before each assistant message, under each strategy
    (the whole history; trimming to the window every turn; the watermark
    manager), with the provider's cache rules. With *gap*, that many seconds
    pass between two requests, and cache entries older than their lifetime
    are written again (``simulate(..., gaps=...)``); without it no time passes.
    *lines* gives the provider and the model of each request of a log (a log
    may mix them); without it every request goes to *provider* and *model*.
    """
    counter = _counter(exact)
    strategies: list[dict[str, Any]] = []
    facts: dict[str, Any] = {"file": doc.path, "format": doc.format, "provider": provider, "model": model}
    facts |= {"window": window, "low": low, "gap": gap, "strategies": strategies}
    # the exact cost of each request of each strategy (the rows show it rounded), for the report's running totals
    costs: list[list[Decimal]] = []
    facts["_costs"] = costs
    if len(doc.requests) > 1:
        sent = [(provider, model)] * len(doc.requests) if lines is None else lines
        logged = _as_logged(doc, lines=sent, counter=counter, wait=gap or 0.0)
        costs.append(logged.pop("_costs"))
        strategies.append(logged)
        return facts
    ctx = doc.last
    for name, manager, strategy in _strategies(window, low, counter):
        recorder = _Cuts(manager) if manager is not None else None
        run = cache.simulate(
            ctx.messages,
            provider=provider,
            model=model,
            manager=recorder,
            context=WorkingContext(prefix=ctx.prefix, counter=counter),
            cache=strategy,
            counter=counter,
            gaps=gap,
        )
        costs.append([r.cost for r in run.requests])
        strategies.append(
            {
                "name": name,
                "requests": [_request_row(number, r, at=r.at) for number, r in enumerate(run.requests)],
                "cuts": recorder.cuts if recorder is not None else [],
                "cost": _money(run.cost),
                "uncached_cost": _money(run.uncached_cost),
                "cached_share": round(run.cached_share, 4),
                "lookback_misses": run.lookback_misses,
                "expiry_misses": run.expiry_misses,
            }
        )
    return facts


def show_replay(facts: dict[str, Any]) -> list[Table | str]:
    main_strategy = facts["strategies"][-1]
    timed = facts["gap"] is not None
    requests = main_strategy["requests"]
    mixed = len({(r.get("provider"), r.get("model")) for r in requests}) > 1  # a log sent to several models
    head: tuple[str, ...] = ("request", "input", "cache read", "cache write", "fresh", "output", "$", "$ uncached")
    keys = ("request", "input_tokens", "cache_read_tokens", "cache_write_tokens", "fresh_tokens", "output_tokens")
    rows = tuple(
        (
            *(r[key] for key in (*keys, "cost", "uncached_cost")),
            *((_seconds(r["at"]), r["expired_tokens"]) if timed else ()),
            *((f"{r['provider']} {r['model']}",) if mixed else ()),
        )
        for r in requests
    )
    sent = "each line's provider and model" if mixed else f"{facts['provider']} {facts['model']}"
    title = f"replay of {shown_path(facts['file'])} on {sent}: {main_strategy['name']}"
    if timed:
        title += f", {_seconds(facts['gap'])} s between requests"
        head += ("at s", "expired")
    if mixed:
        head += ("sent to",)
    out: list[Table | str] = [Table(title, head, rows)]
    columns = ("strategy", "requests", "cached", "lookback misses", *(("expiry misses",) if timed else ()), "$")
    out.append(Table("strategies", (*columns, "$ uncached"), strategy_rows(facts)))
    return out


def strategy_rows(facts: dict[str, Any]) -> tuple[tuple[Any, ...], ...]:
    """
    One row per strategy of ``replay`` facts: its name, requests, cached
    share, lookback misses, expiry misses (when a gap was given), cost and
    cost without a cache. The command's table and the report page show these.
    """
    timed = facts["gap"] is not None
    return tuple(
        (
            s["name"],
            len(s["requests"]),
            f"{s['cached_share']:.1%}",
            s["lookback_misses"],
            *((s["expiry_misses"],) if timed else ()),
            s["cost"],
            s["uncached_cost"],
        )
        for s in facts["strategies"]
    )


def _seconds(seconds: float) -> int | float:
    """
    Seconds without a needless fraction: ``600`` for 600.0, ``2.5`` for 2.5.
    """
    return int(seconds) if seconds.is_integer() and abs(seconds) < 1e15 else seconds
