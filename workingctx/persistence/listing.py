"""
What a store's listings return: the records it could read, and the ids of those it could not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from workingctx.exceptions import CheckpointError
from workingctx.frozen import FrozenDict

__all__ = ["Listing"]

logger = logging.getLogger("workingctx.persistence")

_T = TypeVar("_T")


class Listing(list[_T]):
    """
    What a store's ``list()``, ``lineage()`` and ``list_contexts()`` return:
    a list of the descriptors it could read, in order, and :attr:`damaged`,
    the ids of the records it could not read.

    One damaged record never hides the others: it is left out of the list
    and named in :attr:`damaged`, with the
    :class:`~workingctx.exceptions.CheckpointError` that says what is wrong
    (the error ``load()`` or ``load_context()`` raises for that id). Each
    listing with damaged records also logs a warning on the
    ``workingctx.persistence`` logger. A listing compares equal to a plain
    list of the same descriptors.

    Attributes:
        damaged: The ids that could not be read, each with its error; empty when all could.

    >>> from workingctx.exceptions import CheckpointError
    >>> listing = Listing(["a", "b"], damaged={"c": CheckpointError("the row does not match its seal")})
    >>> listing == ["a", "b"], sorted(listing.damaged)
    (True, ['c'])
    """

    __slots__ = ("damaged",)

    def __init__(self, items: Iterable[_T] = (), damaged: Mapping[str, CheckpointError] | None = None) -> None:
        super().__init__(items)
        self.damaged: FrozenDict = FrozenDict(damaged or {})

    def __repr__(self) -> str:
        # a listing with nothing damaged is shown as the plain list it is equal to
        if not self.damaged:
            return list.__repr__(self)
        return f"Listing({list.__repr__(self)}, damaged={dict(self.damaged)!r})"

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (list(self), dict(self.damaged)))


def listed(items: Iterable[_T], damaged: Mapping[str, CheckpointError], what: str, where: str) -> Listing[_T]:
    """
    The listing of *items*, naming *damaged*; logs a warning when there are damaged records.
    """
    if damaged:
        logger.warning(
            "%s: left out %d %s%s that cannot be read (%s); load each id to see what is wrong",
            where,
            len(damaged),
            what,
            "" if len(damaged) == 1 else "s",
            ", ".join(repr(name) for name in damaged),
        )
    return Listing(items, damaged)


def listed_rows(
    rows: Iterable[Sequence[object]], read: Callable[[Sequence[object]], _T], what: str, where: str
) -> Listing[_T]:
    """
    The listing of what *read* makes of each row (its first column the id),
    naming each row *read* refuses with :class:`CheckpointError`.
    """
    items: list[_T] = []
    damaged: dict[str, CheckpointError] = {}
    for row in rows:
        try:
            items.append(read(row))
        except CheckpointError as exc:
            damaged[shown(row[0])] = exc
    return listed(items, damaged, what, where)


def shown(key: object) -> str:
    """
    A stored id as text: itself when it is text, its UTF-8 decoding (invalid
    bytes as ``\\x..`` escapes) when it is bytes, its repr otherwise.
    """
    if isinstance(key, str):
        return key
    if isinstance(key, bytes | bytearray | memoryview):
        return bytes(key).decode("utf-8", "backslashreplace")
    return repr(key)
