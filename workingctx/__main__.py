"""
python -m workingctx: build a context from a transcript and report on it.

With no argument it uses the sample incident transcript shipped in the package.
"python -m workingctx path/to/transcript.json" reads your own file: a request
body of OpenAI Chat, OpenAI Responses, Anthropic or Gemini, or workingctx JSON
({"prefix": {...}, "messages": [...], "scratchpad": {...}}, as the
workingctx.serialization module writes it); a .jsonl log's last request.
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from typing import Any

from workingctx._files import InputError, read_file
from workingctx._output import printable, shown_path
from workingctx.cli import describe
from workingctx.context import WorkingContext
from workingctx.exceptions import SerializationError
from workingctx.managers import TokenBudgetContextManager
from workingctx.messages import Message
from workingctx.prefix import PrefixContext
from workingctx.scopes import explain
from workingctx.serialization import structure
from workingctx.tokens import ApproxTokenCounter, TiktokenCounter

__all__ = ["load_context", "main"]


def load_context(data: dict[str, Any]) -> WorkingContext:
    """
    Build a context from ``{"prefix": ..., "messages": [...], "scratchpad": {...}}``.

    Raises:
        SerializationError: the data does not describe a context.
    """
    if not isinstance(data, dict):
        msg = f"a transcript file holds a JSON object, got {type(data).__name__} at $"
        raise SerializationError(msg, path="$")
    prefix = _part(data, "prefix", {}, PrefixContext)
    messages = _part(data, "messages", [], tuple[Message, ...])
    notes = data.get("scratchpad")
    if notes is None:
        notes = {}
    if not isinstance(notes, dict):
        msg = f"the scratchpad is a JSON object of notes, got {type(notes).__name__} at $.scratchpad"
        raise SerializationError(msg, path="$.scratchpad")
    return WorkingContext(prefix=prefix, messages=messages, scratchpad=notes)


def _part(data: dict[str, Any], key: str, default: Any, kind: Any) -> Any:
    """
    Structure ``data[key]``, reporting errors at their path in the whole file.
    """
    try:
        return structure(data.get(key, default), kind)
    except SerializationError as exc:
        path = f"$.{key}{exc.path.removeprefix('$')}"
        problems = tuple((f"$.{key}{where.removeprefix('$')}", what) for where, what in exc.problems)
        msg = f"{problems[0][1] if problems else exc} at {path}"
        raise SerializationError(msg, path=path, problems=problems) from exc


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
    total_exact = exact.count(ctx.assembled())
    label = "cl100k" if exact.exact else "cl100k unavailable, approximated"
    lines.append("")
    lines.append(
        f"prefix messages: {len(ctx.prefix.as_messages())} (marked P), tail messages: {ctx.size()} (numbered from 0)"
    )
    lines.append(f"tokens: {ctx.count_tokens()} approximate, {total_exact} {label}")
    snapshot = ctx.freeze()
    lines.append(f"snapshot digest: {snapshot.digest()}")
    lines.append(f"scratchpad: {json.dumps(ctx.scratchpad, sort_keys=True)}")

    # Fit the request into a smaller window, on a fork so the original stays whole.
    # The window holds the prefix and three quarters of the tail; a cut goes down to two thirds of it.
    prefix_tokens = ctx.counter.count(ctx.prefix.as_messages())
    tail_tokens = ctx.count_tokens() - prefix_tokens
    window = prefix_tokens + max(tail_tokens * 3 // 4, 1)
    manager = TokenBudgetContextManager(window, low_watermark=prefix_tokens + max(tail_tokens * 2 // 3, 1))
    trimmed = manager.trim_context(ctx.fork())
    lines.append("")
    lines.append(f"fitted to a {window}-token window with {manager!r}:")
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
            ctx = read_file(path, fmt).last
        text = report(ctx)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (SerializationError, ValueError, TypeError) as exc:
        # Every error of ours is also a ValueError or a TypeError; its text names the JSON path.
        print(f"error: {source}: {exc}", file=sys.stderr)
        return 1
    except RecursionError:
        print(f"error: {source}: the transcript is nested too deeply to read", file=sys.stderr)
        return 1
    print(printable(text))
    return 0


def main(argv: list[str] | None = None) -> int:
    """
    Run the ``workingctx`` command (see :mod:`workingctx.cli`); returns the exit status.
    """
    from workingctx.cli import main as run  # noqa: PLC0415  # the command imports this module for demo()

    return run(argv)


if __name__ == "__main__":
    raise SystemExit(main())
