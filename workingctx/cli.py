"""
The workingctx command: look inside transcripts, check them against a
provider's rules, trim them, compare them, and replay a run's cost under the
provider's prompt cache.

    workingctx demo [FILE]                             # the report on the shipped sample, or on FILE
    workingctx inspect FILE [--model M]                # tokens per message, problems, cache breakpoints, cost
    workingctx check FILE [--provider P]               # the file as written, under a provider's rules
    workingctx trim FILE --budget N [--low N] [--pin role:user] [-o OUT]  # what fits N tokens
    workingctx diff A B                                # what changed, and the prefix a cache serves
    workingctx replay FILE [--model M] [--window N] [--gap SECONDS]  # cost and cache reuse per request
    workingctx report FILE [--model M] -o report.html  # all of it on one self-contained page

FILE is a request body of OpenAI Chat, OpenAI Responses, Anthropic or Gemini,
or workingctx JSON (detected; --format forces one); a .jsonl file is a log of
requests, one body per line. The model is the one the file names (a body's
"model", a Gemini model path or model_version, each line's own in a log);
--model overrides it. --json prints the same facts as JSON for scripts.
Exit status: 0 done, 1 bad input (the file, line and JSON path are named) or a
failed check, 2 bad usage.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, NoReturn

from workingctx._files import FORMATS, PROVIDERS, Document, InputError, read_file, write_text
from workingctx._output import Table, emit, printable, progress, shown_path
from workingctx.cache import Strategy
from workingctx.context import WorkingContext
from workingctx.exceptions import WorkingCtxError
from workingctx.messages import Message, ToolCallBlock
from workingctx.tokens import ApproxTokenCounter, TiktokenCounter

__all__ = ["main"]

PROVIDER_CHOICES = ("openai", "anthropic", "gemini")


class UsageError(Exception):
    """
    A command line that asks for something impossible (exit status 2).
    """


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def describe(message: Message, width: int = 60) -> str:
    """
    One line for a message: its text, and the tools it calls.
    """
    calls = [(c.name, c.arguments) for c in message.tool_calls]
    if not isinstance(message.content, str):
        calls += [(b.name, b.args) for b in message.content if isinstance(b, ToolCallBlock)]
    if calls:
        shown = ", ".join(f"{name}({json.dumps(args, sort_keys=True, default=str)})" for name, args in calls)
        return _short(f"{message.text()} → {shown}".strip(" →"), width)
    return _short(message.text(), width)


def _counter(exact: bool) -> Any:
    return TiktokenCounter() if exact else ApproxTokenCounter()


_MODEL_FAMILIES: tuple[tuple[str, str], ...] = (
    ("claude", "anthropic"),
    ("gpt-", "openai"),
    ("chatgpt", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("gemini", "gemini"),
)
"""Model name prefixes and the provider whose cache serves them."""


def model_provider(model: str) -> str | None:
    """
    The provider a model name belongs to, by its family (``claude-...`` is
    Anthropic's, ``gpt-...`` and ``o3...`` OpenAI's, ``gemini-...`` Gemini's),
    with or without a provider prefix; None for a name of no known family.
    """
    name = model.lower().rpartition("/")[2].rpartition(":")[2]
    return next((provider for prefix, provider in _MODEL_FAMILIES if name.startswith(prefix)), None)


def _model(args: argparse.Namespace, doc: Document) -> str | None:
    """
    The model to price with: ``--model``, else the one the file names (the last request's, for a log).
    """
    given: str | None = getattr(args, "model", None)
    return given if given is not None else doc.model


def _provider(args: argparse.Namespace, doc: Document) -> str | None:
    given: str | None = getattr(args, "provider", None)
    if given is not None:
        return given
    model = _model(args, doc)
    owner = None if model is None else model_provider(model)
    if doc.provider is not None and owner is not None and owner != doc.provider:
        named = f"--model {model}" if getattr(args, "model", None) is not None else f"the file's model {model}"
        msg = (
            f"{named} is a model of {owner}, but {shown_path(args.file)} is a request to {doc.provider}; "
            f"pass --provider {owner} to replay it under {owner}'s cache, or --model with a model of {doc.provider}"
        )
        raise UsageError(msg)
    return doc.provider


_ADAPTER_OF = {"openai": "openai_chat", "anthropic": "anthropic", "gemini": "google"}
"""The adapter that writes requests for each provider."""


def _money(value: Decimal) -> str:
    return f"{value:.4f}"


# -- inspect ---------------------------------------------------------------------------


def _problems(ctx: WorkingContext, provider: str | None) -> list[dict[str, Any]]:
    from workingctx.validity import check_messages  # noqa: PLC0415  # loaded only by commands that check

    return [
        {"index": p.index, "rule": p.rule, "message": p.message, "ids": list(p.ids)}
        for p in check_messages(ctx.messages, provider=provider)  # type: ignore[arg-type]
    ]


def _breakpoints(ctx: WorkingContext, provider: str | None, model: str | None, counter: Any) -> list[dict[str, Any]]:
    if provider is None or model is None:
        return []
    from workingctx.cache import plan  # noqa: PLC0415  # loaded only by commands that price

    made = plan(ctx, provider=provider, model=model, counter=counter)
    prefix = made.prefix_messages
    return [
        {
            "message": b.message - prefix if b.message >= prefix else f"P{b.message}",
            "block": b.block,
            "ttl": b.ttl,
            "tokens": b.tokens,
        }
        for b in made.breakpoints
    ]


def inspect_facts(doc: Document, *, provider: str | None, model: str | None, exact: bool) -> dict[str, Any]:
    """
    The facts ``workingctx inspect`` prints: per-message tokens, totals,
    problems under the provider's rules, the cache breakpoints a plan would set
    and, with a model, the request's input cost.
    """
    ctx = doc.last
    counter = _counter(exact)
    rows: list[dict[str, Any]] = []
    numbered: list[tuple[str | int, str, Message]] = [("P", "prefix", m) for m in ctx.prefix.as_messages()]
    numbered += [(i, "tail", m) for i, m in enumerate(ctx.messages)]
    with progress("counting", len(numbered)) as advance:
        for label, part, message in numbered:
            rows.append(
                {
                    "index": label,
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
        "counter": counter.name if hasattr(counter, "name") else type(counter).__name__,
        "exact": bool(getattr(counter, "exact", False)),
        "messages": rows,
        "totals": {
            "prefix_messages": len(ctx.prefix.as_messages()),
            "tail_messages": ctx.size(),
            "prefix_tokens": prefix_tokens,
            "tail_tokens": tail_tokens,
            "tokens": prefix_tokens + tail_tokens,
        },
        "digest": ctx.freeze().digest(),
        "problems": _problems(ctx, provider),
        "breakpoints": _breakpoints(ctx, provider, model, counter),
        "model": model,
        "cost": None,
    }
    if model is not None:
        from workingctx.messages import Usage  # noqa: PLC0415
        from workingctx.pricing import cost  # noqa: PLC0415  # loaded only by commands that price

        facts["cost"] = {"input_uncached": _money(cost(model, Usage(input_tokens=prefix_tokens + tail_tokens)))}
    return facts


def _show_inspect(facts: dict[str, Any]) -> list[Table | str]:
    rows = tuple((r["index"], r["role"], r["tokens"], r["text"]) for r in facts["messages"])
    totals = facts["totals"]
    out: list[Table | str] = [
        Table(f"messages of {shown_path(facts['file'])} ({facts['format']})", ("#", "role", "tokens", "text"), rows),
        (
            f"prefix: {totals['prefix_messages']} messages (marked P), {totals['prefix_tokens']} tokens; "
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
    return out


def _show_problems(problems: Sequence[dict[str, Any]], provider: str | None) -> list[Table | str]:
    rules = f"{provider}'s rules" if provider else "every provider's rules"
    if not problems:
        return [f"valid under {rules}"]
    rows = tuple(("" if p["index"] is None else p["index"], p["rule"], p["message"]) for p in problems)
    return [Table(f"{len(problems)} problems under {rules}", ("message", "rule", "what and how to fix"), rows)]


# -- check -----------------------------------------------------------------------------


def _as_rows(problems: Sequence[Any]) -> list[dict[str, Any]]:
    return [{"index": p.index, "rule": p.rule, "message": p.message, "ids": list(p.ids)} for p in problems]


def _file_problems(payload: Any, fmt: str, ctx: WorkingContext, provider: str | None) -> list[dict[str, Any]]:
    """
    The problems of one request: for a request to its own provider, what its
    adapter's ``check`` reports on the body as written (not on the context the
    reader made of it, which may have repaired it); for another provider, what
    that provider's adapter would refuse to write; for workingctx JSON without
    a provider, every provider's rules.
    """
    own = PROVIDERS.get(fmt)
    if own is not None and provider in {None, own}:
        return _as_rows(importlib.import_module(f"workingctx.adapters.{fmt}").check(payload))
    if provider is None:
        return _problems(ctx, None)
    return _as_rows(importlib.import_module(f"workingctx.adapters.{_ADAPTER_OF[provider]}").check(ctx))


def check_facts(doc: Document, *, provider: str | None) -> dict[str, Any]:
    """
    The facts ``workingctx check`` prints: every problem of every request, as
    written in the file, under the provider's rules.
    """
    requests = []
    formats = doc.formats or (doc.format,) * len(doc.requests)
    for line, ctx, payload, fmt in zip(doc.lines, doc.requests, doc.payloads, formats, strict=True):
        requests.append({"line": line, "problems": _file_problems(payload, fmt, ctx, provider)})
    return {
        "file": doc.path,
        "format": doc.format,
        "provider": provider,
        "valid": not any(r["problems"] for r in requests),
        "requests": requests,
    }


def _show_check(facts: dict[str, Any]) -> list[Table | str]:
    requests = facts["requests"]
    if len(requests) == 1:
        return _show_problems(requests[0]["problems"], facts["provider"])
    out: list[Table | str] = []
    for request in requests:
        shown = _show_problems(request["problems"], facts["provider"])
        if isinstance(shown[0], str):
            out.append(f"line {request['line']}: {shown[0]}")
        else:
            out.append(f"line {request['line']}:")
            out.extend(shown)
    return out


# -- trim ------------------------------------------------------------------------------


def _pin(specs: Sequence[str]) -> Any:
    from workingctx.scopes import AnyOf, RoleFilter, Tagged  # noqa: PLC0415

    scopes: list[Any] = []
    for spec in specs:
        kind, _, value = spec.partition(":")
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


def trim_facts(doc: Document, *, budget: int, low: int | None, pin: Sequence[str], exact: bool) -> dict[str, Any]:
    """
    The facts ``workingctx trim`` prints: what the token-budget manager keeps and
    drops on the last request, and what that saves. The cut keeps as much as
    fits *budget*; with *low*, it goes down to that low watermark instead.
    """
    from workingctx.managers import TokenBudgetContextManager  # noqa: PLC0415
    from workingctx.scopes import ScopeReport  # noqa: PLC0415

    ctx = doc.last
    counter = _counter(exact)
    pinned = _pin(pin)
    options: dict[str, Any] = {"low_watermark": budget if low is None else low, "counter": counter}
    if pinned is not None:
        options["pin"] = pinned
    try:
        manager = TokenBudgetContextManager(budget, **options)
    except (ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from None
    trimmed = manager.trim_context(ctx.fork())
    # What the manager kept, read off its result (a subsequence of the tail).
    out = trimmed.messages
    kept: list[int] = []
    for index, message in enumerate(ctx.messages):
        if len(kept) < len(out) and out[len(kept)] == message:
            kept.append(index)
    dropped = [i for i in range(ctx.size()) if i not in set(kept)]
    counts = [counter.count_message(m) for m in ctx.messages]
    kept_tokens = sum(counts[i] for i in kept)
    cache_break = dropped[0] if dropped else None
    report = ScopeReport(
        scope=manager,
        total=ctx.size(),
        kept=tuple(kept),
        dropped=tuple(dropped),
        kept_tokens=kept_tokens,
        saved_tokens=sum(counts) - kept_tokens,
        cache_break=cache_break,
        cached_tokens=kept_tokens if cache_break is None else sum(counts[:cache_break]),
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
        "kept": kept,
        "dropped": dropped,
        "tokens_before": before,
        "tokens_after": after,
        "fits": after <= budget,
        "cache_break": cache_break,
        "prefix_tokens": report.prefix_tokens,
        "explain": str(report),
        "messages": [{"index": i, "role": m.role, "text": describe(m)} for i, m in enumerate(ctx.messages)],
        "_trimmed": trimmed,
    }


def _show_trim(facts: dict[str, Any]) -> list[Table | str]:
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
    from workingctx.snapshot import common_prefix_length  # noqa: PLC0415

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


def _show_diff(facts: dict[str, Any]) -> list[Table | str]:
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


def _strategies(window: int | None, low: int | None, counter: Any) -> list[tuple[str, Any, Strategy]]:
    from workingctx.managers import TokenBudgetContextManager  # noqa: PLC0415

    out: list[tuple[str, Any, Strategy]] = [("whole history, planned breakpoints", None, "plan")]
    if window is not None:
        out.append(
            (
                "trim to the window every turn, one breakpoint on the last block",
                TokenBudgetContextManager(window, low_watermark=window, counter=counter),
                "last",
            )
        )
        out.append(
            (
                "watermarks, planned breakpoints",
                TokenBudgetContextManager(window, low_watermark=low, counter=counter),
                "plan",
            )
        )
    return out


def _request_row(
    number: int, usage: Any, cost: Decimal, uncached: Decimal, *, at: float, expired: int
) -> dict[str, Any]:
    total = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    return {
        "request": number,
        "at": at,
        "input_tokens": total,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "fresh_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cost": _money(cost),
        "uncached_cost": _money(uncached),
        "expired_tokens": expired,
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
    models: Sequence[str] | None = None,
) -> dict[str, Any]:
    """
    The facts ``workingctx replay`` prints.

    A ``.jsonl`` log is replayed as it was sent: each request against the cache
    the one before it left. A single transcript is replayed as the run that
    built it, one request before each assistant message, under each strategy
    (the whole history; trimming to the window every turn; the watermark
    manager), with the provider's cache rules. With *gap*, that many seconds
    pass between two requests, and cache entries older than their lifetime
    are written again (``simulate(..., gaps=...)``); without it no time passes.
    *models* prices each request of a log with its own model (the one its
    line names); without it every request is priced with *model*.
    """
    from workingctx import cache  # noqa: PLC0415  # loaded only by commands that price

    counter = _counter(exact)
    strategies: list[dict[str, Any]] = []
    if len(doc.requests) > 1:
        rows = []
        reports = []
        with progress("replaying", len(doc.requests)) as advance:
            previous = None
            for number, ctx in enumerate(doc.requests):
                wait = gap or 0.0
                priced = model if models is None else models[number]
                if previous is None:
                    made = cache.report(WorkingContext(), ctx, provider=provider, model=priced, counter=counter)
                else:
                    made = cache.report(previous, ctx, provider=provider, model=priced, counter=counter, elapsed=wait)
                reports.append(made)
                at = number * wait
                row = _request_row(
                    number, made.usage, made.cost, made.uncached_cost, at=at, expired=made.expired_tokens
                )
                rows.append(row)
                previous = ctx
                advance()
        total = sum((r.cost for r in reports), Decimal(0))
        uncached = sum((r.uncached_cost for r in reports), Decimal(0))
        read = sum(r.usage.cache_read_tokens for r in reports)
        tokens = sum(r.input_tokens for r in reports)
        strategies.append(
            {
                "name": "as logged",
                "requests": rows,
                "cuts": [],
                "cost": _money(total),
                "uncached_cost": _money(uncached),
                "cached_share": round(read / tokens, 4) if tokens else 0.0,
                "lookback_misses": sum(1 for r in reports if r.lookback_miss_tokens),
                "expiry_misses": sum(1 for r in reports if r.expired_tokens),
            }
        )
    else:
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
            strategies.append(
                {
                    "name": name,
                    "requests": [
                        _request_row(i, r.usage, r.cost, r.uncached_cost, at=r.at, expired=r.expired_tokens)
                        for i, r in enumerate(run.requests)
                    ],
                    "cuts": recorder.cuts if recorder is not None else [],
                    "cost": _money(run.cost),
                    "uncached_cost": _money(run.uncached_cost),
                    "cached_share": round(run.cached_share, 4),
                    "lookback_misses": run.lookback_misses,
                    "expiry_misses": run.expiry_misses,
                }
            )
    return {
        "file": doc.path,
        "format": doc.format,
        "provider": provider,
        "model": model,
        "window": window,
        "low": low,
        "gap": gap,
        "strategies": strategies,
    }


def _show_replay(facts: dict[str, Any]) -> list[Table | str]:
    main_strategy = facts["strategies"][-1]
    timed = facts["gap"] is not None
    head: tuple[str, ...] = ("request", "input", "cache read", "cache write", "fresh", "output", "$", "$ uncached")
    rows = tuple(
        (
            r["request"],
            r["input_tokens"],
            r["cache_read_tokens"],
            r["cache_write_tokens"],
            r["fresh_tokens"],
            r["output_tokens"],
            r["cost"],
            r["uncached_cost"],
            *((_seconds(r["at"]), r["expired_tokens"]) if timed else ()),
        )
        for r in main_strategy["requests"]
    )
    title = f"replay of {shown_path(facts['file'])} on {facts['provider']} {facts['model']}: {main_strategy['name']}"
    if timed:
        title += f", {_seconds(facts['gap'])} s between requests"
        head += ("at s", "expired")
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


# -- the program -----------------------------------------------------------------------


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        msg = f"{text!r} is not a whole number of tokens"
        raise argparse.ArgumentTypeError(msg) from None
    if value <= 0:
        msg = f"{value} tokens: give a positive number"
        raise argparse.ArgumentTypeError(msg)
    return value


_FOREVER = 10**15
"""The longest gap ``simulate`` takes, in seconds."""


def _gap(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        msg = f"{text!r} is not a number of seconds"
        raise argparse.ArgumentTypeError(msg) from None
    if not math.isfinite(value) or value < 0 or value >= _FOREVER:
        msg = f"{text} seconds: give a finite number of seconds, zero or more (below 10**15)"
        raise argparse.ArgumentTypeError(msg)
    return value


def _parser() -> argparse.ArgumentParser:
    doc = __doc__ or ""
    parser = argparse.ArgumentParser(
        prog="workingctx",
        description=doc.strip().split("\n\n")[0],
        epilog=doc.strip().split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=text, description=text)
        sub.add_argument("--json", action="store_true", help="print the facts as JSON")
        sub.add_argument("--exact", action="store_true", help="count with cl100k (tiktoken) instead of the estimate")
        return sub

    def file_command(name: str, text: str) -> argparse.ArgumentParser:
        sub = command(name, text)
        sub.add_argument("file", help="a request body (.json) or a log of them (.jsonl)")
        sub.add_argument("--format", choices=FORMATS, help="read the file as this format instead of detecting it")
        return sub

    demo = commands.add_parser("demo", help="the report on the shipped sample transcript, or on FILE")
    demo.add_argument(
        "file", nargs="?", help="a request body in any format the other commands read (default: the shipped sample)"
    )
    demo.add_argument("--format", choices=FORMATS, help="read the file as this format instead of detecting it")

    sub = file_command("inspect", "tokens per message, problems, cache breakpoints and cost of a request")
    sub.add_argument("--provider", choices=PROVIDER_CHOICES, help="whose rules (default: the file's format's)")
    sub.add_argument(
        "--model", help="price the request and plan its cache breakpoints for this model (default: the file's)"
    )

    sub = file_command("check", "check requests against a provider's rules; exit status 1 on a problem")
    sub.add_argument("--provider", choices=PROVIDER_CHOICES, help="whose rules (default: the file's format's)")

    sub = file_command("trim", "what a token budget keeps and drops, never splitting a tool exchange")
    sub.add_argument("--budget", type=_positive, required=True, help="the window, in tokens (the prefix counts)")
    sub.add_argument("--low", type=_positive, help="cut down to this many tokens (default: keep as much as fits)")
    sub.add_argument("--pin", action="append", default=[], help="always keep: role:ROLE or tag:NAME (repeatable)")
    sub.add_argument("-o", "--output", help="write the trimmed request here, in the file's format")

    sub = command("diff", "what changed from A to B, and how much of B a prompt cache filled by A serves")
    sub.add_argument("a")
    sub.add_argument("b")
    sub.add_argument("--format", choices=FORMATS, help="read both files as this format")

    for name, text in (
        ("replay", "cost and cache reuse request by request, under several trimming strategies"),
        ("report", "a self-contained HTML page with charts of tokens, cuts and cost"),
    ):
        sub = file_command(name, text)
        sub.add_argument("--provider", choices=PROVIDER_CHOICES, help="whose cache (default: the file's format's)")
        sub.add_argument(
            "--model", help="the model whose prices and cache minimums apply (default: the one the file names)"
        )
        sub.add_argument("--window", type=_positive, help="the context window the managers keep to, in tokens")
        sub.add_argument("--low", type=_positive, help="the low watermark the manager cuts down to")
        sub.add_argument(
            "--gap",
            type=_gap,
            metavar="SECONDS",
            help="seconds between two requests: cache entries older than their lifetime expire (default: none pass)",
        )
        if name == "report":
            sub.add_argument("-o", "--output", required=True, help="the HTML file to write")
    return parser


def _print_json(facts: dict[str, Any]) -> None:
    print(json.dumps({k: v for k, v in facts.items() if not k.startswith("_")}, indent=2, default=str))


_MESSAGE_FIELDS = {
    "workingctx": {"prefix", "messages", "scratchpad"},
    "openai_chat": {"messages"},
    "openai_responses": {"input", "instructions"},
    "anthropic": {"system", "messages"},
    "google": {"contents", "system_instruction", "systemInstruction"},
}
"""The fields of a file that hold its context: what ``trim -o`` writes anew; the others are kept."""


def _write_trimmed(doc: Document, trimmed: WorkingContext, path: str) -> None:
    if doc.format == "workingctx":
        from workingctx.serialization import unstructure  # noqa: PLC0415

        payload: Any = {
            "prefix": unstructure(trimmed.prefix),
            "messages": [unstructure(m) for m in trimmed.messages],
            "scratchpad": dict(trimmed.scratchpad),
        }
    else:
        import importlib  # noqa: PLC0415

        payload = importlib.import_module(f"workingctx.adapters.{doc.format}").write(trimmed)
    original = doc.payloads[-1]
    if isinstance(original, dict):  # keep the file's other fields (model, tools, ...) where they were
        owned = _MESSAGE_FIELDS[doc.format]
        kept = {key: payload.get(key, value) for key, value in original.items() if key in payload or key not in owned}
        payload = kept | payload
    write_text(path, json.dumps(payload, indent=2, ensure_ascii=False) + "\n")


def _check_window(window: int | None, low: int | None) -> None:
    """
    Refuse a ``--low`` that cannot apply: without ``--window``, or above it.
    """
    if window is None:
        if low is not None:
            msg = f"--low {low} needs --window: the low watermark is what a cut of the window goes down to"
            raise UsageError(msg)
        return
    from workingctx.managers import TokenBudgetContextManager  # noqa: PLC0415

    try:
        TokenBudgetContextManager(window, low_watermark=low)
    except (ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from None


def _same_file(a: str, b: str) -> bool:
    """
    Whether the paths *a* and *b* name one existing file (through links too).
    """
    try:
        return Path(a).samefile(b)
    except OSError:  # one of them does not exist (yet)
        return False


def _run(args: argparse.Namespace) -> int:
    exact = getattr(args, "exact", False)
    if args.command in {None, "demo"}:
        from workingctx.__main__ import demo  # noqa: PLC0415  # the report python -m workingctx has always printed

        return demo(getattr(args, "file", None), getattr(args, "format", None))
    if args.command == "diff":
        facts = diff_facts(read_file(args.a, args.format), read_file(args.b, args.format), exact=exact)
        return _finish(args, facts, _show_diff)
    doc = read_file(args.file, args.format)
    if args.command == "report" and _same_file(args.file, args.output):
        msg = (
            f"-o {shown_path(args.output)} is the transcript the page reports on; "
            "give the page another name, such as report.html"
        )
        raise UsageError(msg)
    provider = _provider(args, doc)
    model = _model(args, doc)
    if args.command == "inspect":
        return _finish(args, inspect_facts(doc, provider=provider, model=model, exact=exact), _show_inspect)
    if args.command == "check":
        facts = check_facts(doc, provider=provider)
        _finish(args, facts, _show_check)
        return 0 if facts["valid"] else 1
    if args.command == "trim":
        facts = trim_facts(doc, budget=args.budget, low=args.low, pin=args.pin, exact=exact)
        if args.output:
            _write_trimmed(doc, facts["_trimmed"], args.output)
        return _finish(args, facts, _show_trim)
    if provider is None:
        msg = f"{shown_path(args.file)} is workingctx JSON: say whose cache to replay with --provider"
        raise UsageError(msg)
    if model is None:
        msg = (
            f"{shown_path(args.file)} names no model (no 'model' field): "
            "give the model whose prices and cache rules apply with --model, such as --model gpt-4.1"
        )
        raise UsageError(msg)
    _check_window(args.window, args.low)
    if args.window is not None and len(doc.requests) > 1:
        msg = (
            f"--window {args.window}: {shown_path(args.file)} is a log of {len(doc.requests)} requests, "
            "replayed as they were sent; the window applies to one transcript, whose run replay trims with the managers"
        )
        raise UsageError(msg)
    models = None
    if args.model is None and len(doc.requests) > 1:  # a log: each line priced with the model it names
        models = [line_model or model for line_model in doc.models]
    facts = replay_facts(
        doc, provider=provider, model=model, window=args.window, low=args.low, exact=exact, gap=args.gap, models=models
    )
    if args.command == "replay":
        return _finish(args, facts, _show_replay)
    from workingctx._report import render  # noqa: PLC0415  # only the report command draws a page

    page = render(facts, inspect_facts(doc, provider=provider, model=model, exact=exact))
    size = write_text(args.output, page)
    if args.json:
        _print_json({"file": args.file, "output": args.output, "bytes": size})
    else:
        emit([f"wrote {shown_path(args.output)} ({size} bytes)"])
    return 0


def _finish(
    args: argparse.Namespace, facts: dict[str, Any], show: Callable[[dict[str, Any]], list[Table | str]]
) -> int:
    if args.json:
        _print_json(facts)
    else:
        emit(show(facts))
    return 0


def _fail(status: int, text: str) -> NoReturn:
    print(f"error: {printable(text)}", file=sys.stderr)
    raise SystemExit(status)


def _silence_stdout() -> None:
    """
    Point standard output at the null device, so the interpreter's last flush
    does not fail again on a pipe whose reader has gone.
    """
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (captured output)
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, descriptor)
    os.close(null)


def main(argv: Sequence[str] | None = None) -> int:
    """
    Run the ``workingctx`` command; returns the exit status.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"demo", "inspect", "check", "trim", "diff", "replay", "report"}
    if argv and argv[0] not in commands and argv[0].lower().endswith((".json", ".jsonl")):
        argv = ["demo", *argv]  # `python -m workingctx FILE.json`, as before the subcommands
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except InputError as exc:
        _fail(1, str(exc))
    except UsageError as exc:
        _fail(2, str(exc))
    except WorkingCtxError as exc:
        name = type(exc).__name__
        status = 2 if name in {"PricingError", "CacheRuleError"} else 1
        _fail(status, str(exc))
    except KeyboardInterrupt:
        _fail(130, "interrupted")
    except BrokenPipeError:  # the reader went away (`| head`): nobody left to tell
        _silence_stdout()
        return 1
    except Exception as exc:
        if os.environ.get("WORKINGCTX_DEBUG"):
            raise
        _fail(1, f"{type(exc).__name__}: {exc} (set WORKINGCTX_DEBUG=1 for the traceback)")


if __name__ == "__main__":
    raise SystemExit(main())
