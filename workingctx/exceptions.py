"""
The exceptions workingctx raises.

Every error derives from :class:`WorkingCtxError` and also from the built-in
exception a generic caller would expect (``TypeError`` for a value of the wrong
kind, ``ValueError`` for a value of the right kind but wrong content), so
``except ValueError`` keeps working around workingctx calls.

An error about one argument (a constructor's parameter, a field, a function's
argument) keeps the evidence as attributes, so callers need not parse the text:
``argument`` is the parameter's name and ``value`` the refused value (see
``docs/values.md``).
"""

from __future__ import annotations

import inspect
import pickle
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from workingctx.validity import Problem

__all__ = [
    "ArgumentTypeError",
    "ArgumentValueError",
    "CacheRuleError",
    "CheckpointError",
    "FinishedError",
    "FrozenPayloadError",
    "HeadConflictError",
    "HistoryError",
    "InvalidMessageError",
    "MediaError",
    "MergeError",
    "PayloadError",
    "PayloadTypeError",
    "PendingCallsError",
    "PositionalScopeError",
    "PricingError",
    "ProviderError",
    "ScopeError",
    "SerializationError",
    "StoreUnavailableError",
    "WorkingCtxError",
]


class WorkingCtxError(Exception):
    """
    The common base of every error workingctx raises on purpose.

    Attributes:
        argument: The name of the argument (parameter or field) whose value was
            refused, such as ``"max_messages"``; ``None`` when the error is not
            about one argument.
        value: The refused value (``None`` when *argument* is ``None``).
    """

    argument: str | None = None
    value: object = None

    def __init__(self, *args: object, argument: str | None = None, value: object = None) -> None:
        super().__init__(*args)
        if argument is not None:
            self.argument = argument
            self.value = value

    def _keywords(self) -> dict[str, object]:
        """
        The keyword arguments that rebuild this error: its constructor's
        keyword-only parameters, read back from the attributes of the same name.
        """
        keywords = {}
        for parameter in inspect.signature(type(self).__init__).parameters.values():
            if parameter.kind is parameter.KEYWORD_ONLY:
                value = getattr(self, parameter.name, parameter.default)
                if parameter.default is parameter.empty or value is not parameter.default:
                    keywords[parameter.name] = value
        return keywords

    def __repr__(self) -> str:
        parts = [*map(repr, self.args), *(f"{name}={value!r}" for name, value in self._keywords().items())]
        return f"{type(self).__name__}({', '.join(parts)})"

    def __reduce__(self) -> tuple[Any, ...]:
        keywords = self._keywords()
        for name, value in list(keywords.items()):
            try:
                pickle.dumps(value)
            except Exception:  # noqa: BLE001  # a refused value that cannot cross: the error crosses without it
                del keywords[name]
        return (_rebuild_error, (type(self), self.args, keywords))


class ArgumentTypeError(WorkingCtxError, TypeError):
    """
    An argument is of the wrong type (a str where a count goes, ``True`` where
    an int goes, a dict where a message goes).

    Attributes:
        argument: The argument's name.
        value: The refused value.
        expected: What the argument takes, in words (``"an int"``).
    """

    expected: str = ""

    def __init__(self, *args: object, argument: str | None = None, value: object = None, expected: str = "") -> None:
        super().__init__(*args, argument=argument, value=value)
        self.expected = expected


class ArgumentValueError(WorkingCtxError, ValueError):
    """
    An argument has the right type and a value that makes no sense (a negative
    count, an empty id, a float that is not finite).

    Domain errors that are also about one argument (:class:`ScopeError`,
    :class:`InvalidMessageError`, :class:`PricingError`, ...) carry the same
    ``argument`` and ``value`` attributes.
    """


class FrozenPayloadError(WorkingCtxError, TypeError):
    """
    A frozen payload (a :class:`~workingctx.frozen.FrozenDict` or
    :class:`~workingctx.frozen.FrozenList`) was asked to change in place.
    """


class InvalidMessageError(WorkingCtxError, ValueError):
    """
    A message, tool call or content block was built from invalid data.

    Wrong *types* raise :class:`TypeError` directly; this error covers values
    of the right type that make no sense (an unknown role, a tool call id on a
    user message, ...).
    """


class PayloadError(WorkingCtxError, ValueError):
    """
    A payload (tool arguments, a tool's output, metadata, a journal entry, a
    note) cannot be kept as a value: nested too deep, cyclic, a float that is
    not finite, or an int too long to write.

    Attributes:
        path: Where in the payload the problem is, such as ``"metadata['a'][2]"``.
        problem: What is wrong there, without the path.
    """

    def __init__(self, message: str, *, path: str = "", problem: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.problem = problem or message

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_payload_error, (type(self), str(self), self.path, self.problem))


class PayloadTypeError(PayloadError, TypeError):
    """
    A payload holds something that is not JSON data (a set, an object of your
    own, a key that is not a str) where only JSON data can be kept.
    """


class ScopeError(WorkingCtxError, ValueError):
    """
    A scope was built from, or applied to, something it cannot work with.
    """


class PositionalScopeError(ScopeError, TypeError):
    """
    ``matches()`` was called on a positional scope.

    A positional scope (such as :class:`~workingctx.LastNTurns`) decides over the
    whole message list, so a single message cannot be judged alone. Use
    :func:`~workingctx.scopes.surviving_indices` instead.
    """


class MergeError(WorkingCtxError, ValueError):
    """
    Two contexts cannot be merged the way that was asked.

    Attributes:
        ids: The tool-call ids that made the merge impossible (a duplicate
            call, an orphaned result, a call that is not pending), if any.
    """

    def __init__(self, message: str, *, ids: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.ids: tuple[str, ...] = tuple(ids)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_merge_error, (type(self), str(self), self.ids))


class ProviderError(WorkingCtxError, ValueError):
    """
    A conversation breaks rules a provider enforces, or a provider is unknown.

    Attributes:
        problems: Every :class:`~workingctx.validity.Problem` found, in order
            of position (empty when the provider name itself was wrong).
        provider: The provider whose rules were applied (``None``: all of them).
    """

    def __init__(self, message: str, *, problems: Sequence[Problem] = (), provider: str | None = None) -> None:
        super().__init__(message)
        self.problems: tuple[Problem, ...] = tuple(problems)
        self.provider = provider

    @classmethod
    def from_problems(cls, problems: Sequence[Problem], *, provider: str | None = None) -> ProviderError:
        """
        The error listing *problems*, one per line, each with its position, rule and fix.
        """
        rules = "every provider's" if provider is None else provider
        lines = [f"the conversation breaks {len(problems)} {rules} rule(s):"]
        lines.extend(f"  {problem}" for problem in problems)
        return cls("\n".join(lines), problems=problems, provider=provider)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_provider_error, (type(self), str(self), self.problems, self.provider))


class HistoryError(WorkingCtxError, ValueError):
    """
    A recorded context refused a change, or a history cannot be replayed.
    """


class FinishedError(HistoryError):
    """
    An append or a merge on a context that :meth:`~workingctx.WorkingContext.finish` ended.
    """


class PendingCallsError(HistoryError):
    """
    A restore, a summary or a clear while tool calls are pending.

    Attributes:
        calls: The ids of the pending calls.
    """

    def __init__(self, message: str, *, calls: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.calls = calls

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_pending, (str(self), self.calls))


def _rebuild_error(cls: type[WorkingCtxError], args: tuple[object, ...], keywords: dict[str, Any]) -> WorkingCtxError:
    return cls(*args, **keywords)


def _rebuild_pending(message: str, calls: tuple[str, ...]) -> PendingCallsError:
    return PendingCallsError(message, calls=calls)


class SerializationError(WorkingCtxError, ValueError):
    """
    Data could not be turned back into workingctx values.

    Attributes:
        path: Where in the data the first problem is, such as
            ``"$.messages[2].tool_calls[0].arguments"``.
        problems: Every problem found, as ``(path, description)`` pairs.
    """

    def __init__(self, message: str, *, path: str = "$", problems: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.path = path
        self.problems = problems or ((path, message),)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_serialization_error, (type(self), str(self), self.path, self.problems))


class PricingError(WorkingCtxError, ValueError):
    """
    A model has no known price, or a price was built from invalid numbers.

    The message names the model and says how to add a price.
    """


class CacheRuleError(WorkingCtxError, ValueError):
    """
    A cache plan breaks a provider's caching rules (too many breakpoints, a
    breakpoint on a block that cannot carry one, below the minimum, one-hour
    breakpoints after five-minute ones), or no rules are known for a provider.
    """


class CheckpointError(SerializationError):
    """
    A checkpoint could not be saved or loaded: damaged, truncated, foreign, or
    written by a newer schema version. The store is left as it was.
    """


class MediaError(WorkingCtxError, ValueError):
    """
    A media store cannot give the bytes a :class:`~workingctx.messages.MediaRef` names:
    they are missing, or what is stored no longer matches the ref's sha256.

    Attributes:
        ref: The reference that could not be served.
        reason: ``"missing"``, ``"damaged"``, ``"not stored"`` (a ref that is
            not of kind ``"store"``) or ``"unavailable"`` (the store cannot be
            used: closed, or its file locked or unreadable).
    """

    def __init__(self, message: str, *, ref: object, reason: str) -> None:
        super().__init__(message)
        self.ref = ref
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_media_error, (type(self), str(self), self.ref, self.reason))


def _rebuild_media_error(cls: type[MediaError], message: str, ref: object, reason: str) -> MediaError:
    return cls(message, ref=ref, reason=reason)


class HeadConflictError(CheckpointError):
    """
    A save to a thread lost a race: the thread's head is no longer the parent
    of the checkpoint being saved (another writer moved it first). Nothing was
    written; load the new head, continue from it, and save again.

    Attributes:
        thread: The thread.
        expected: The head the save expected (the checkpoint's parent).
        actual: The head the thread has.
    """

    def __init__(
        self,
        message: str,
        *,
        thread: str = "",
        expected: str | None = None,
        actual: str | None = None,
        path: str = "$.parent",
        problems: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(message, path=path, problems=problems)
        self.thread = thread
        self.expected = expected
        self.actual = actual

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_head_conflict,
            (str(self), self.thread, self.expected, self.actual, self.path, self.problems),
        )


def _rebuild_head_conflict(
    message: str,
    thread: str,
    expected: str | None,
    actual: str | None,
    path: str,
    problems: tuple[tuple[str, str], ...],
) -> HeadConflictError:
    return HeadConflictError(message, thread=thread, expected=expected, actual=actual, path=path, problems=problems)


class StoreUnavailableError(CheckpointError):
    """
    The store's server could not be reached, or the connection was lost in the
    middle of an operation. Nothing was half-written: a save either committed
    whole or not at all, so saving the same checkpoint again is safe.
    """


def _rebuild_serialization_error(
    cls: type[SerializationError], message: str, path: str, problems: tuple[tuple[str, str], ...]
) -> SerializationError:
    return cls(message, path=path, problems=problems)


def _rebuild_provider_error(
    cls: type[ProviderError], message: str, problems: tuple[Problem, ...], provider: str | None
) -> ProviderError:
    return cls(message, problems=problems, provider=provider)


def _rebuild_merge_error(cls: type[MergeError], message: str, ids: tuple[str, ...]) -> MergeError:
    return cls(message, ids=ids)


def _rebuild_payload_error(cls: type[PayloadError], message: str, path: str, problem: str) -> PayloadError:
    return cls(message, path=path, problem=problem)
