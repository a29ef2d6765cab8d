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
LangChain messages (model_dump(), dumpd or messages_to_dict) or workingctx
JSON (detected; --format forces one); a .jsonl (or .ndjson) file is a log of
requests, one body per line. FILE - (or A or B -) reads standard input:
a log when it holds one body per line. The model is the one the file names
(a body's "model", a Gemini model path or model_version, each line's own in
a log); --model overrides it.
--json prints the same facts as JSON for scripts; --version prints the
installed version of workingctx.
Exit status: 0 done, 1 bad input (the file, line and JSON path are named) or a
failed check, 2 bad usage.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from workingctx._version import __version__
from workingctx.cli._demo import demo
from workingctx.cli._facts import (
    check_facts,
    check_window,
    diff_facts,
    inspect_facts,
    replay_facts,
    show_check,
    show_diff,
    show_inspect,
    show_replay,
    show_trim,
    trim_facts,
)
from workingctx.cli._files import (
    FORMATS,
    LOG_SUFFIXES,
    PROVIDERS,
    Document,
    InputError,
    UsageError,
    read_file,
    require_messages,
    write_context,
    write_text,
)
from workingctx.cli._output import STDIN, Table, emit, printable, shown_path
from workingctx.cli._report import render
from workingctx.exceptions import CacheRuleError, PricingError, ProviderError, WorkingCtxError

__all__ = ["main"]

PROVIDER_CHOICES = ("openai", "anthropic", "gemini")


_MODEL_FAMILIES = {"anthropic": ("claude",), "openai": ("gpt-", "chatgpt", "o1", "o3", "o4"), "gemini": ("gemini",)}
"""Each provider, and the prefixes of the names of the models its cache serves."""


def model_provider(model: str) -> str | None:
    """
    The provider a model name belongs to, by its family (``claude-...`` is
    Anthropic's, ``gpt-...`` and ``o3...`` OpenAI's, ``gemini-...`` Gemini's),
    with or without a provider prefix; None for a name of no known family.
    """
    name = model.lower().rpartition("/")[2].rpartition(":")[2]
    return next((provider for provider, prefixes in _MODEL_FAMILIES.items() if name.startswith(prefixes)), None)


def _model(args: argparse.Namespace, doc: Document) -> str | None:
    """
    The model to price with: ``--model``, else the one the file names (the last request's, for a log).
    """
    given: str | None = getattr(args, "model", None)
    return given if given is not None else doc.model


def _provider(args: argparse.Namespace, doc: Document) -> str | None:
    given: str | None = getattr(args, "provider", None)
    if given is not None:
        if args.command in {"replay", "report"} and len(doc.requests) == 1:  # a log's lines: see _log_lines
            _same_provider(args, doc, given)
        return given
    if not hasattr(args, "model"):  # check, trim, diff: the file's own format says whose rules apply
        return doc.provider
    model = _model(args, doc)
    owner = None if model is None else model_provider(model)
    if doc.provider is not None and owner is not None and owner != doc.provider:
        named = f"--model {model}" if getattr(args, "model", None) is not None else f"the file's model {model}"
        under = f"replay it under {owner}'s cache" if args.command != "inspect" else f"inspect it under {owner}'s rules"
        msg = (
            f"{named} is a model of {owner}, but {shown_path(args.file)} is a request to {doc.provider}; "
            f"pass --provider {owner} to {under}, or --model with a model of {doc.provider}"
        )
        raise UsageError(msg)
    return doc.provider


def _same_provider(args: argparse.Namespace, doc: Document, provider: str) -> None:
    """
    Refuse to replay under ``--provider``'s cache a model of another provider
    (``--model`` or the file's own): that would price one provider's model
    under another's cache rules.
    """
    model = _model(args, doc)
    owner = None if model is None else model_provider(model)
    if owner is None or owner == provider:
        return
    named = f"--model {model}" if args.model is not None else f"the file's model {model}"
    msg = (
        f"{named} is a model of {owner}, but --provider {provider} replays {shown_path(args.file)} under "
        f"{provider}'s cache; pass --model with a model of {provider}, or --provider {owner}"
    )
    raise UsageError(msg)


def _log_lines(args: argparse.Namespace, doc: Document, model: str) -> list[tuple[str, str]]:
    """
    The provider and the model each request of a log is replayed under: its
    own (its format's provider; the model it names, else *model*), unless
    ``--provider`` or ``--model`` says. A log may mix providers and models.
    """
    providers = [args.provider or PROVIDERS.get(fmt) for fmt in doc.formats]
    models = [args.model or named or model for named in doc.models]
    none = [line for line, provider in zip(doc.lines, providers, strict=True) if provider is None]
    if none:
        msg = (
            f"{shown_path(args.file)}, {_numbers(none)}: workingctx JSON or LangChain messages, sent to no "
            "provider of their own; say whose cache to replay them with with --provider"
        )
        raise UsageError(msg)
    wrong = [
        (line, provider, name)
        for line, provider, name in zip(doc.lines, providers, models, strict=True)
        if model_provider(name) not in {None, provider}
    ]
    if wrong:
        _, provider, name = wrong[0]
        if args.provider is not None:
            fix = f"pass --model with a model of {provider}, or replay without --provider (each line under its own)"
        elif args.model:
            fix = "replay without --model (each line with the model it names), or pass --provider"
        else:
            fix = "name their own model, or pass --provider"
        msg = (
            f"{shown_path(args.file)}, {_numbers([w[0] for w in wrong])}: a request to {provider} priced with "
            f"{name}, a model of {model_provider(name)}; {fix}"
        )
        raise UsageError(msg)
    return list(zip(providers, models, strict=True))  # type: ignore[arg-type]  # none is None, as checked


def _numbers(lines: Sequence[int]) -> str:
    """
    Lines named in a message: ``line 3``, ``lines 2, 5``, the first few and how many more.
    """
    shown = ", ".join(map(str, lines[:5])) + ("" if len(lines) <= 5 else f" and {len(lines) - 5} more")
    return f"line {shown}" if len(lines) == 1 else f"lines {shown}"


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
    parser.add_argument("--version", action="version", version=f"workingctx {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=text, description=text)
        sub.add_argument("--json", action="store_true", help="print the facts as JSON")
        sub.add_argument("--exact", action="store_true", help="count with cl100k (tiktoken) instead of the estimate")
        return sub

    def file_command(name: str, text: str) -> argparse.ArgumentParser:
        sub = command(name, text)
        sub.add_argument("file", help="a request body (.json) or a log of them (.jsonl, .ndjson); - for standard input")
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


def _same_file(a: str, b: str) -> bool:
    """
    Whether the paths *a* and *b* name one existing file (through links too).
    """
    if STDIN in {a, b}:  # standard input is no file
        return False
    try:
        return Path(a).samefile(b)
    except OSError:  # one of them does not exist (yet)
        return False


def _stdin_once(args: argparse.Namespace) -> None:
    """
    Refuse what ``-`` (standard input) cannot do: be read twice (``diff - -``) or be written (``-o -``).
    """
    if getattr(args, "output", None) == STDIN:
        msg = f"-o -: {args.command} writes a file, not standard output; give -o the path of one"
        raise UsageError(msg)
    if args.command == "diff" and args.a == args.b == STDIN:
        msg = "diff - -: standard input is read once; give one of A and B as a file"
        raise UsageError(msg)


YOUNG_OBJECTS = 10_000
"""How many new objects make the garbage collector run while a command runs (Python's default: 700)."""


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    """
    Let the garbage collector run less often while a command runs. A replay
    makes millions of small objects that live to its end, and every full
    collection walks all of them again: replaying 10,000 turns without a
    window, full collections took 16% of the time with a collection every
    700 new objects, 6% with one every 10,000 (the replay 11% faster). The
    thresholds are set back at the end, for a caller that runs the command
    in its own process.
    """
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], YOUNG_OBJECTS), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def _run(args: argparse.Namespace) -> int:
    exact = getattr(args, "exact", False)
    if args.command in {None, "demo"}:
        return demo(getattr(args, "file", None), getattr(args, "format", None))
    _stdin_once(args)
    if args.command == "diff":
        facts = diff_facts(read_file(args.a, args.format), read_file(args.b, args.format), exact=exact)
        return _finish(args, facts, show_diff)
    doc = read_file(args.file, args.format)
    if args.command in {"trim", "replay", "report"}:  # inspect and check name the problem of an empty request
        require_messages(doc, args.command)
    if args.command == "report" and _same_file(args.file, args.output):
        msg = (
            f"-o {shown_path(args.output)} is the transcript the page reports on; "
            "give the page another name, such as report.html"
        )
        raise UsageError(msg)
    provider = _provider(args, doc)
    model = _model(args, doc)
    if args.command == "inspect":  # the file's own model may have no price (a fine-tuned model): the rest still shows
        facts = inspect_facts(doc, provider=provider, model=model, exact=exact, unpriced=args.model is None)
        return _finish(args, facts, show_inspect)
    if args.command == "check":  # each request of a log under its own provider's rules, unless --provider says
        facts = check_facts(doc, provider=args.provider)
        _finish(args, facts, show_check)
        return 0 if facts["valid"] else 1
    if args.command == "trim":
        if args.output and len(doc.requests) > 1 and _same_file(args.file, args.output):
            msg = (
                f"-o {shown_path(args.output)} is the log trim reads, of {len(doc.requests)} requests: it would be "
                "replaced by its last request trimmed; write the trimmed request to another file"
            )
            raise UsageError(msg)
        facts = trim_facts(doc, budget=args.budget, low=args.low, pin=args.pin, exact=exact)
        if args.output:
            try:
                write_context(doc, facts["_trimmed"], args.output)
            except ProviderError as exc:  # the kept window breaks the provider's rules: named as the file numbers it
                raise InputError(args.file, _refused(exc, facts["_where"], args.output), line=doc.lines[-1]) from None
        return _finish(args, facts, show_trim)
    if provider is None:
        kind = "LangChain messages" if doc.format == "langchain" else "workingctx JSON"
        msg = f"{shown_path(args.file)} is {kind}: say whose cache to replay with --provider"
        raise UsageError(msg)
    if model is None:  # a log's line naming none is priced with the last model the log names, as the others are
        model = next((name for name in reversed(doc.models) if name is not None), None)
    if model is None:
        msg = (
            f"{shown_path(args.file)} names no model (no 'model' field): "
            "give the model whose prices and cache rules apply with --model, such as --model gpt-4.1"
        )
        raise UsageError(msg)
    check_window(args.window, args.low)
    if args.window is not None and len(doc.requests) > 1:
        msg = (
            f"--window {args.window}: {shown_path(args.file)} is a log of {len(doc.requests)} requests, "
            "replayed as they were sent; the window applies to one transcript, whose run replay trims with the managers"
        )
        raise UsageError(msg)
    lines = _log_lines(args, doc, model) if len(doc.requests) > 1 else None
    facts = replay_facts(
        doc, provider=provider, model=model, window=args.window, low=args.low, exact=exact, gap=args.gap, lines=lines
    )
    if args.command == "replay":
        return _finish(args, facts, show_replay)
    # the problems of every request of a log, as check finds them, not of the last one only
    page = render(
        facts, inspect_facts(doc, provider=provider, model=model, exact=exact), check_facts(doc, provider=args.provider)
    )
    size = write_text(args.output, page)
    if args.json:
        _print_json({"file": args.file, "output": args.output, "bytes": size})
    else:
        emit([f"wrote {shown_path(args.output)} ({size} bytes)"])
    return 0


def _refused(exc: ProviderError, where: Sequence[str], output: str) -> str:
    """
    Why ``trim -o`` wrote nothing, on one line: each problem of the trimmed
    request at the JSON path of its message in the file read (*where*).
    """
    rules = "every provider's" if exc.provider is None else f"{exc.provider}'s"
    found = "; ".join(
        f"{'' if p.index is None or p.index >= len(where) else where[p.index] + ': '}{p.rule}: {p.message}"
        for p in exc.problems
    )
    return f"the trimmed request breaks {rules} rules, so -o {shown_path(output)} was not written: {found or exc}"


def _finish(
    args: argparse.Namespace, facts: dict[str, Any], show: Callable[[dict[str, Any]], list[Table | str]]
) -> int:
    if args.json:
        _print_json(facts)
    else:
        emit(show(facts))
    return 0


class _Warnings(logging.Handler):
    """
    The library's warnings as the command shows them: each kind once, on one
    line after ``warning:``, and at the end how many more of each kind came (a
    replay warns at every request a manager cannot cut down to its watermark).
    """

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.more: dict[tuple[str, object], int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        kind = (record.name, record.msg)
        if kind in self.more:
            self.more[kind] += 1
            return
        self.more[kind] = 0
        print(f"warning: {printable(' '.join(record.getMessage().split()))}", file=sys.stderr)

    def close(self) -> None:
        for count in self.more.values():
            if count:
                print(f"warning: and {count} more like it", file=sys.stderr)
        self.more.clear()
        super().close()


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
    if argv and argv[0] not in commands and argv[0].lower().endswith((".json", *LOG_SUFFIXES)):
        argv = ["demo", *argv]  # `python -m workingctx FILE.json`, as before the subcommands
    args = _parser().parse_args(argv)
    warnings = _Warnings()
    library = logging.getLogger("workingctx")
    library.addHandler(warnings)
    try:
        with _fewer_collections():
            return _run(args)
    except InputError as exc:
        _fail(1, str(exc))
    except UsageError as exc:
        _fail(2, str(exc))
    except (PricingError, CacheRuleError) as exc:  # a model without prices or cache rules: bad usage
        _fail(2, str(exc))
    except WorkingCtxError as exc:
        _fail(1, str(exc))
    except KeyboardInterrupt:
        _fail(130, "interrupted")
    except BrokenPipeError:  # the reader went away (`| head`): nobody left to tell
        _silence_stdout()
        return 1
    except Exception as exc:
        if os.environ.get("WORKINGCTX_DEBUG"):
            raise
        _fail(1, f"{type(exc).__name__}: {exc} (set WORKINGCTX_DEBUG=1 for the traceback)")
    finally:
        library.removeHandler(warnings)
        warnings.close()
