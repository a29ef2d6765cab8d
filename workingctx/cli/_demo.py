"""
``workingctx demo`` (and ``python -m workingctx`` with no command): build a
context from a transcript and report on it.

With no file it uses the sample incident transcript shipped in the package; a
file may be a request body of OpenAI Chat, OpenAI Responses, Anthropic or
Gemini, LangChain messages serialized as JSON, or workingctx JSON (``{"prefix": {...}, "messages": [...],
"scratchpad": {...}}``, as :mod:`workingctx.serialization` writes it); of a
``.jsonl`` log, the last request.
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from typing import Any

from workingctx.cli._files import InputError, load_context, read_file, require_messages
from workingctx.cli._output import describe, printable, shown_path
from workingctx.context import WorkingContext
from workingctx.exceptions import SerializationError
from workingctx.managers import TokenBudgetContextManager
from workingctx.scopes import explain
from workingctx.tokens import ApproxTokenCounter, TiktokenCounter

__all__ = ["demo", "report"]


def _sample() -> dict[str, Any]:
    text = resources.files("workingctx").joinpath("data/samples/incident.workingctx.json").read_text(encoding="utf-8")
    return dict(json.loads(text))


def report(ctx: WorkingContext) -> str:
    """
    A plain-text report: every message of the request with its token count,
    the totals under both counters, and the snapshot's stable digest.

    Tail messages are numbered from 0, as every scope and dry run numbers them;
    the prefix's messages, sent before them, are marked ``P``.
    """
    approx = ApproxTokenCounter()
    exact = TiktokenCounter()
    lines = [f"{'#':>3}  {'role':<9} {'approx':>6} {'cl100k':>6}  text"]
    numbered = [("P", m) for m in ctx.prefix.as_messages()] + [(str(i), m) for i, m in enumerate(ctx.messages)]
    for label, message in numbered:
        lines.append(
            f"{label:>3}  {message.role:<9} {approx.count_message(message):>6} "
            f"{exact.count_message(message):>6}  {describe(message)}"
        )
    label = "cl100k" if exact.exact else "cl100k unavailable, approximated"
    lines += [
        "",
        f"prefix messages: {len(ctx.prefix.as_messages())} (marked P), tail messages: {ctx.size()} (numbered from 0)",
        f"tokens: {ctx.count_tokens()} approximate, {exact.count(ctx.assembled())} {label}",
        f"snapshot digest: {ctx.freeze().digest()}",
        f"scratchpad: {json.dumps(ctx.scratchpad, sort_keys=True)}",
    ]

    # Fit the request into a smaller window, on a fork so the original stays whole.
    # The window holds the prefix and three quarters of the tail; a cut goes down to two thirds of it.
    prefix_tokens = ctx.counter.count(ctx.prefix.as_messages())
    tail_tokens = ctx.count_tokens() - prefix_tokens
    window = prefix_tokens + max(tail_tokens * 3 // 4, 1)
    manager = TokenBudgetContextManager(window, low_watermark=prefix_tokens + max(tail_tokens * 2 // 3, 1))
    trimmed = manager.trim_context(ctx.fork())
    lines += ["", f"fitted to a {window}-token window with {manager!r}:"]
    lines.append(f"  {explain(manager.scope_for(ctx), ctx)}".replace("\n", "\n  "))
    lines.append(
        f"  kept {trimmed.size()} of {ctx.size()} tail messages, {trimmed.count_tokens()} tokens with the prefix; "
        f"roles: {' '.join(m.role for m in trimmed.messages)}"
    )
    return "\n".join(lines)


def demo(path: str | None = None, fmt: str | None = None) -> int:
    """
    Print the report on the sample transcript, or on the file at *path* (any
    format the command line reads, detected unless *fmt* names it); returns the exit status.
    """
    source = "the shipped sample" if path is None else shown_path(path)
    try:
        if path is None:
            ctx = load_context(_sample())
            print("workingctx: the sample incident transcript shipped in the package\n")
        else:
            doc = read_file(path, fmt)
            require_messages(doc, "report on")
            ctx = doc.last
        text = report(ctx)
    except InputError as exc:
        error = str(exc)
    except (SerializationError, ValueError, TypeError) as exc:
        # Every error of ours is also a ValueError or a TypeError; its text names the JSON path.
        error = f"{source}: {exc}"
    except RecursionError:
        error = f"{source}: the transcript is nested too deeply to read"
    else:
        print(printable(text))
        return 0
    print(f"error: {error}", file=sys.stderr)
    return 1
