"""
The chain codec every content-addressed store shares (SQLite, PostgreSQL, Redis).

A checkpoint is written as:

- one *row*: id, parent, creation time, metadata, the snapshot's digest, the
  keys of its prefix and scratchpad blobs, the head and length of its message
  chain and of its journal chain, and a *seal* (a digest over the row);
- *items*: each distinct message (and journal entry) once, keyed by its
  digest, with a checksum binding its JSON text to that key;
- *links*: one per distinct transcript prefix, keyed by its chain digest,
  naming the previous link and the item that extends it;
- *blobs*: prefixes and scratchpads, keyed by their digests.

This module turns checkpoints into those parts and checks them on the way back;
the stores only move them. Everything read back is checked against a digest,
and anything wrong raises :class:`Damage` (what, and where in the checkpoint),
which each store turns into a :class:`~workingctx.exceptions.CheckpointError`
naming itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import re
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, NoReturn, cast

import attrs

from workingctx._canonical import EMPTY_CHAIN, EMPTY_ENTRIES, ENTRY_TAG, MESSAGE_TAG, canonical_json, entry_digest
from workingctx.checkpoint import Checkpoint, journal_chain
from workingctx.exceptions import CheckpointError, SerializationError
from workingctx.frozen import FrozenDict
from workingctx.messages import Message
from workingctx.persistence import _items
from workingctx.persistence.stores import CheckpointInfo
from workingctx.prefix import PrefixContext
from workingctx.serialization import converter, from_json, structure, to_json
from workingctx.snapshot import Chain, FrozenContext

FORMAT = "workingctx.checkpoints"
"""The format name a workingctx store carries in its marker."""

JOURNAL_ROOT = EMPTY_ENTRIES
"""The chain digest of an empty journal (``MutationJournal().digest()``)."""

CACHE_LIMIT = 200_000
"""How many verified items a store keeps in memory, by digest, before it starts again."""

ROW_FIELDS = (
    "id",
    "parent",
    "created_at",
    "metadata",
    "digest",
    "prefix",
    "scratchpad",
    "messages_head",
    "message_count",
    "journal_head",
    "journal_count",
    "seal",
)
"""The fields of a checkpoint row, in the order :func:`seal` and :func:`read_info` take them."""


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def storable(text: str) -> str:
    """
    JSON text a database can store: a lone surrogate (a streamed emoji cut in
    half) has no UTF-8 form, so such text is written with ASCII escapes instead.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(json.loads(text), ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text


def checksum(key: str, data: str) -> str:
    """
    Binds a stored item's text to its key: any change to either shows on load,
    without recomputing the item's own digest.
    """
    return sha256(f"{key}\n{data}")


def step(previous: str, digest: str) -> str:
    """
    A chain's digest one item on: the sha256 of the previous chain digest, a
    colon and the item's digest. Transcripts (``FrozenContext.chain_digest``)
    and journals (``MutationJournal.digest``) are both chained this way.
    """
    return hashlib.sha256(f"{previous}:{digest}".encode("ascii")).hexdigest()


def scratchpad_digest(notes: dict[str, Any]) -> str:
    return sha256("scratchpad:" + canonical_json(notes))


_VERSION = re.compile(r"[0-9]{1,18}")
"""A schema version as a marker holds it: a whole number in ASCII digits, small enough to read."""

KEYED = "hmac-sha256:"
"""How a seal made with a key starts (a seal without one is a bare hex sha256)."""


def seal(row: Sequence[Any], key: bytes | None = None) -> str:
    """
    The digest over a checkpoint row's fields (every field of :data:`ROW_FIELDS`
    but the seal): a sha256, or with *key* an HMAC-SHA256 marked :data:`KEYED`.
    """
    body = "checkpoint-row/v1:" + json.dumps([str(field) for field in row[:11]], ensure_ascii=False)
    if key is None:
        return sha256(body)
    return KEYED + hmac.new(key, body.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def check_seal(row: Sequence[Any], key: bytes | None, table: str) -> None:
    """
    Refuse a row whose seal is not the one *key* (or no key) gives.
    """
    found = row[11]
    if not isinstance(found, str):
        damage(f"the checkpoint row has no seal ({table}, damaged)", "$")
    if key is None and found.startswith(KEYED):
        damage(f"the checkpoint row is sealed with a key ({table}); open the store with key=... to read it", "$")
    if key is not None and not found.startswith(KEYED):
        damage(f"the checkpoint row is not sealed with this store's key ({table}, unkeyed or forged)", "$")
    if not hmac.compare_digest(seal(row, key), found):
        damage(f"the checkpoint row does not match its seal ({table}, damaged or forged)", "$")


def parse_all(texts: Mapping[str, object]) -> dict[str, Any]:
    """
    Parse many JSON texts in one call; a text that does not parse (or is not
    text) is left out, for its reader to report with a path.

    Joining them cannot shift values between keys when each is one JSON
    value; a text that is not (damage) makes the join fail or come out at
    another length, and the texts are then parsed one by one.
    """
    keys = [key for key, text in texts.items() if isinstance(text, str)]
    try:
        values = json.loads("[" + ",".join(cast("str", texts[key]) for key in keys) + "]")
    except ValueError:
        values = None
    if isinstance(values, list) and len(values) == len(keys):
        return dict(zip(keys, values, strict=True))
    parsed: dict[str, Any] = {}
    for key in keys:
        with contextlib.suppress(ValueError):
            parsed[key] = json.loads(cast("str", texts[key]))
    return parsed


PACKED = b"\x00"
"""How a compressed payload starts (UTF-8 JSON text never does); zlib's stream of the text follows."""

PACK_FROM = 512
"""The length in bytes from which a store that compresses payloads tries to (shorter ones gain nothing)."""


def pack(text: str) -> str | bytes:
    """
    *text* as a store that compresses writes it: :data:`PACKED` and the
    zlib stream of its UTF-8 form, when that is shorter; else the text itself.
    The checksums and digests stay those of the text, so a read checks it as before.
    """
    raw = text.encode("utf-8")
    if len(raw) < PACK_FROM:
        return text
    packed = PACKED + zlib.compress(raw, 6)
    return packed if len(packed) < len(raw) else text


def unpack(data: object) -> object:
    """
    A payload as read: a compressed one as the UTF-8 bytes of its text;
    anything else (a stream that does not inflate included: damage, which
    the checks then name) as it is.
    """
    if type(data) is bytes and data[:1] == PACKED:
        with contextlib.suppress(zlib.error):
            return zlib.decompress(data[1:])
    return data


def unpacked(rows: Iterable[Row]) -> list[Row]:
    """
    Stored items ``(key, data, checksum)`` with compressed texts inflated.
    """
    return [(key, unpack(data), check) for key, data, check in rows]


Stored = tuple[object, object]
"""An item as a store holds it: its JSON text and its checksum, not checked yet."""


Row = Sequence[Any]
"""An item as a store reads it: ``(key, data, checksum)``, not checked yet."""

Text = str | bytes
"""JSON text as a store reads it: str, or its UTF-8 bytes."""


def as_text(data: object) -> object:
    """
    Stored text read as UTF-8 bytes, as str; anything else (bytes that are
    not UTF-8 included) as it is, for its reader to refuse.
    """
    if type(data) is bytes:
        with contextlib.suppress(UnicodeDecodeError):
            return data.decode("utf-8")
    return data


def stored(found: Iterable[Row]) -> dict[str, Stored]:
    """
    Stored items read as ``(key, data, checksum)`` rows, by key, their texts as str.
    """
    return {str(key): (as_text(data), check) for key, data, check in found}


def intact(key: str, item: Stored) -> bool:
    """
    Whether a stored item's text still matches its checksum.
    """
    data, check = item
    return isinstance(data, str) and isinstance(check, str) and hmac.compare_digest(checksum(key, data), check)


class Damage(Exception):  # noqa: N818  # internal: always turned into CheckpointError
    """
    Something read back is wrong: what, and where in the checkpoint.
    """

    def __init__(self, what: str, path: str = "$") -> None:
        super().__init__(what)
        self.what = what
        self.path = path


def damage(what: str, path: str = "$") -> NoReturn:
    raise Damage(what, path)


def remember(cache: dict[str, Any], key: str, value: Any) -> None:
    if len(cache) >= CACHE_LIMIT:
        cache.clear()
    cache[key] = value


# -- writing ----------------------------------------------------------------------------


def payload(value: Any, path: str, checkpoint: Checkpoint, *, typed: bool = False) -> str:
    """
    The JSON text a store writes for *value*, or CheckpointError naming where it is.
    """
    try:
        return storable(to_json(value) if typed else to_json(value, Any))
    except SerializationError as exc:
        where = path + exc.path[1:]
        msg = f"cannot save checkpoint {checkpoint.id!r}: {exc.problems[0][1]} at {where}; nothing was written"
        raise CheckpointError(msg, path=where) from None


@attrs.frozen
class Kind:
    """
    One of the two chains a checkpoint's snapshot is stored as: its messages
    (:data:`MESSAGES`) or its journal entries (:data:`JOURNAL`). Both are
    written, linked, read and checked by the same code; only this differs.

    Attributes:
        noun: What an item is called in errors.
        root: The chain digest of no items.
        path: Where the items are in a checkpoint, for errors.
        cls: The type items are read as.
        items: The items of a snapshot.
        chain: ``chain(checkpoint)(n)``: the chain digest after the first *n* items.
        digest: An item's digest, the key it is stored under.
        tag: What an item's digest hashes before its canonical text, when
            items are stored as that text (:mod:`~workingctx.persistence._items`).
        canonical: The text stored for an item: its canonical text (and
            layout), or None to store its ``to_json`` text.
        build: An item of parsed canonical data, with its digest, or None
            when the converter should build it.
        seed: Gives an item built by the converter its digest, known from its verified text.
        untagged: Whether canonical text is taken only when it holds no
            tagged form (:data:`~workingctx.persistence._items.TAGGED`), which plain data would read otherwise.
    """

    noun: str
    root: str
    path: str
    cls: Any
    items: Callable[[FrozenContext], Sequence[Any]]
    chain: Callable[[Checkpoint], Callable[[int], str]]
    digest: Callable[[Any], str]
    tag: str | None = None
    canonical: Callable[[Any], str | None] | None = None
    build: Callable[[Any, str], Any] | None = None
    seed: Callable[[Any, str], None] | None = None
    untagged: bool = False

    def text(self, item: Any, position: int, checkpoint: Checkpoint) -> str:
        """
        The text stored for the item at *position*, or CheckpointError naming where it is.
        """
        if self.canonical is not None:
            text = self.canonical(item)
            if text is not None:
                return text
        return payload(item, f"{self.path}[{position}]", checkpoint, typed=self.cls is not Any)


def _journal_chain_at(checkpoint: Checkpoint) -> Callable[[int], str]:
    chain = journal_chain(checkpoint)
    return lambda n: chain[n - 1] if n else JOURNAL_ROOT


def _seed_digest(message: Message, digest: str) -> None:
    object.__setattr__(message, "_digest", digest)


MESSAGES = Kind(
    noun="message",
    root=EMPTY_CHAIN,
    path="$.snapshot.messages",
    cls=Message,
    items=lambda snapshot: snapshot.messages,
    chain=lambda checkpoint: checkpoint.snapshot.chain_digest,
    digest=Message.digest,
    tag=MESSAGE_TAG,
    canonical=_items.message_item,
    build=_items.build_message,
    seed=_seed_digest,
)
"""A snapshot's transcript: messages keyed by :meth:`Message.digest`, chained as ``FrozenContext.chain_digest``."""

JOURNAL = Kind(
    noun="journal entry",
    root=JOURNAL_ROOT,
    path="$.snapshot.journal",
    cls=Any,
    items=lambda snapshot: snapshot.journal,
    chain=_journal_chain_at,
    digest=entry_digest,
    tag=ENTRY_TAG,
    canonical=_items.entry_item,
    build=_items.build_entry,
    untagged=True,
)
"""A snapshot's journal: entries keyed by their digest, chained as ``MutationJournal.digest``."""


@attrs.frozen
class Encoded:
    """
    What a store writes for one checkpoint, besides its messages and entries.

    Attributes:
        row: The checkpoint row without its seal (the first eleven fields of :data:`ROW_FIELDS`).
        seal: The row's seal.
        notes_text: The scratchpad's JSON, stored under ``row[6]``.
    """

    row: tuple[Any, ...]
    seal: str
    notes_text: str

    @property
    def prefix_key(self) -> str:
        return cast("str", self.row[5])

    @property
    def notes_key(self) -> str:
        return cast("str", self.row[6])


def encode(checkpoint: Checkpoint, key: bytes | None = None) -> Encoded:
    """
    The row and the blobs of *checkpoint*, the row sealed with *key* when given.

    Raises:
        CheckpointError: The scratchpad or the metadata is not JSON data.
    """
    snapshot = checkpoint.snapshot
    notes = dict(snapshot.scratchpad)
    notes_text = payload(notes, "$.snapshot.scratchpad", checkpoint)
    metadata_text = payload(checkpoint.metadata, "$.metadata", checkpoint)
    entries = journal_chain(checkpoint)
    row = (
        checkpoint.id,
        checkpoint.parent,
        checkpoint.created_at.isoformat(),
        metadata_text,
        snapshot.digest(),
        snapshot.prefix.digest(),
        scratchpad_digest(notes),
        snapshot.chain_digest(),
        len(snapshot.messages),
        entries[-1] if entries else JOURNAL_ROOT,
        len(entries),
    )
    return Encoded(row=row, seal=seal(row, key), notes_text=notes_text)


def new_links(kind: Kind, checkpoint: Checkpoint, start: int) -> Iterable[tuple[int, str, str, str, Any]]:
    """
    ``(position, chain digest, previous chain digest, item digest, item)`` for
    every item of *kind* from *start* on: the links a store adds when it holds the first *start*.
    """
    items = kind.items(checkpoint.snapshot)
    chain_at = kind.chain(checkpoint)
    previous = chain_at(start)
    for position in range(start, len(items)):
        link = chain_at(position + 1)
        item = items[position]
        yield position, link, previous, kind.digest(item), item
        previous = link


# -- reading ----------------------------------------------------------------------------


def decode_json(text: object, kind: Any, path: str, table: str, key: str | None = None) -> Any:
    where = f"{table}" + ("" if key is None else f", key {key!r}")
    if not isinstance(text, str):
        damage(f"expected JSON text, found {type(text).__name__} ({where})", path)
    try:
        return from_json(text, kind)
    except SerializationError as exc:
        inner = "" if exc.path == "$" else exc.path[1:]
        damage(f"{exc.problems[0][1]} ({where})", path + inner)


def read_info(row: Sequence[Any], table: str = "table checkpoints", key: bytes | None = None) -> CheckpointInfo:
    """
    The descriptor of a checkpoint row (the fields of :data:`ROW_FIELDS`), after
    checking its seal (made with *key*, when the store has one).
    """
    if len(row) != len(ROW_FIELDS):
        damage(f"the checkpoint row has {len(row)} fields, expected {len(ROW_FIELDS)} ({table}, damaged)", "$")
    (checkpoint_id, parent, created_at, metadata, digest, _, _, _, message_count, _, _, _) = row
    check_seal(row, key, table)
    if not isinstance(checkpoint_id, str) or (parent is not None and not isinstance(parent, str)):
        damage(f"the checkpoint row holds ids that are not text ({table})", "$.id")
    if not isinstance(message_count, int) or isinstance(message_count, bool) or message_count < 0:
        damage(f"message count {message_count!r} is not a count ({table})", "$.snapshot.messages")
    try:
        when = datetime.fromisoformat(created_at)
    except (TypeError, ValueError):
        damage(f"creation time {created_at!r} is not an ISO 8601 time ({table})", "$.created_at")
    if when.tzinfo is None:
        damage(f"creation time {created_at!r} has no time zone ({table})", "$.created_at")
    return CheckpointInfo(
        id=checkpoint_id,
        parent=parent,
        created_at=when,
        message_count=message_count,
        digest=str(digest),
        metadata=decode_json(metadata, FrozenDict, "$.metadata", table),
    )


def galloped_length(count: int, holds: Callable[[int], bool]) -> int:
    """
    How many leading items of a chain of *count* items a store in this
    process holds, where ``holds(n)`` tells whether it holds the chain of the
    first *n* items: one lookup an ask and no round trip, so one position at
    a time. What a store holds is a prefix (see :func:`stored_length`): a
    search back from the end, in steps that double (a chain saved again
    mostly continues a stored one by a few items: two or three asks), then a
    binary search of the range it found.
    """
    if count == 0 or holds(count):
        return count
    low, high, step = 0, count - 1, 1
    while step < count:
        if holds(count - step):
            low = count - step
            break
        high = count - step - 1
        step *= 2
    while low < high:
        middle = (low + high + 1) // 2
        if holds(middle):
            low = middle
        else:
            high = middle - 1
    return low


def probes(count: int, last: int = 16) -> list[int]:
    """
    The positions :func:`stored_length` asks first of a chain of *count*
    items: the *last* ones, then every power of two of *last* back from the
    end (a chain saved again mostly continues one stored before by a few
    items), 40 at most. A store that pays for each position asked takes
    ``last=1``; one that asks them all in one statement, more.
    """
    positions = list(range(count, max(count - last, 0), -1))
    step = 2 * last
    while count - step + 1 > 0 and len(positions) < 40:  # at most 40 asks in the first round
        positions.append(count - step + 1)
        step *= 2
    return positions


def stored_length(
    count: int, ask: Callable[[list[int]], Iterable[int]], first: Iterable[int] | None = None, *, last: int = 16
) -> int:
    """
    How many leading items of a chain of *count* items a store on a server
    holds, where ``ask(positions)`` gives those of *positions* it holds
    (position *n*: the chain of the first *n* items), in one round trip.
    Links are only ever stored with their ancestors, so what it holds is a
    prefix: the first round asks ``probes(count, last)`` (*first* is the
    answer, when the caller sent them already), and each round after it up
    to 64 positions spread over the range still unknown, until none is left.
    """
    if count == 0:
        return 0
    positions = probes(count, last)
    held = set(ask(positions) if first is None else first)
    low, high = 0, count + 1  # held up to low; not held from high
    while True:
        low = max([low, *held])
        high = min([high, *[position for position in positions if position not in held and position > low]])
        gap = high - low - 1
        if gap <= 0:
            return low
        positions = list(range(low + 1, high, -(-gap // 64)))  # at most 64 of them
        held = set(ask(positions))


def check_count(count: object, head: object, root: str, path: str, table: str) -> int:
    """
    A chain's stored length, checked; an empty chain must name the root.
    """
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        damage(f"count {count!r} is not a count ({table})", path)
    if count == 0 and head != root:
        damage(f"an empty chain has head {head!r} ({table})", path)
    return count


def check_links(rows: Sequence[Sequence[Any]], count: int, root: str, path: str, table: str) -> list[tuple[str, str]]:
    """
    The links of a chain read from its root to its head, as rows starting
    ``(chain, prev, item, position)``, checked for order and length:
    ``(chain digest, item digest)`` pairs.
    """
    if len(rows) != count:
        damage(f"expected {count} links, found {len(rows)} ({table}, truncated or damaged)", path)
    previous = root
    for position, row in enumerate(rows):
        link, prev, digest, stored_position = row[0], row[1], row[2], row[3]
        if prev != previous or stored_position != position or not isinstance(link, str):
            damage(f"link {link!r} is out of place ({table}, damaged)", f"{path}[{position}]")
        if not isinstance(digest, str):
            damage(f"link {link!r} names no item ({table}, damaged)", f"{path}[{position}]")
        previous = link
    return [(row[0], row[2]) for row in rows]


def walk(links: Mapping[object, Sequence[Any]], head: object, count: int) -> list[Sequence[Any]]:
    """
    The link rows ``(chain, prev, item, position)`` of the chain ending at
    *head*, root first, from *links* (every row of a table, by chain digest):
    each step must go one position down, and at most *count* steps are taken,
    as the stores' recursive queries walk. :func:`check_links` checks the result.
    """
    rows: list[Sequence[Any]] = []
    row = links.get(head)
    while row is not None and len(rows) < count:
        rows.append(row)
        position = row[3]
        if not isinstance(position, int) or position <= 0:
            break
        row = links.get(row[1])
        if row is not None and row[3] != position - 1:
            break
    rows.reverse()
    return rows


def by_position(row: Sequence[Any]) -> int:
    """
    A sort key for link rows ``(chain, prev, item, position, ...)``; a damaged position sorts first.
    """
    position = row[3]
    return position if isinstance(position, int) and not isinstance(position, bool) else -1


_UNREAD = object()


def check_steps(kind: Kind, links: Sequence[tuple[str, str]], link_table: str) -> None:
    """
    Check each link of a chain read root first, as ``(chain digest, item
    digest)`` pairs: its chain digest must be the sha256 of the previous one
    and its item digest (:func:`step`), from *kind*'s root up.
    """
    new_hash = hashlib.sha256
    previous = kind.root
    for position, (link, digest) in enumerate(links):
        if new_hash(f"{previous}:{digest}".encode()).hexdigest() != link:  # step(), inline
            damage(f"the link does not match its {kind.noun} ({link_table}, key {link!r})", f"{kind.path}[{position}]")
        previous = link


def follow(
    kind: Kind, links: Mapping[object, Sequence[Any]], head: object, count: int, link_table: str
) -> tuple[list[str], list[str]]:
    """
    The chain of *kind* ending at *head*, checked: its chain digests and its
    item digests, root first, from *links* (every link row ``(chain, prev,
    item, position)`` of a table, by chain digest).

    One walk from the head down checks every link as it goes: its position
    is one below the last one's, it names an item, and its key is the sha256
    of the previous chain digest and that item's digest (:func:`step`); the
    last link must follow the root. These are the checks of :func:`walk`,
    :func:`check_links` and :func:`check_steps` together, made in the other
    direction: when one fails, the chain is read again by those three, which
    say what is wrong and where.
    """
    chains: list[str] = []
    digests: list[str] = []
    add_chain = chains.append
    add_digest = digests.append
    get = links.get
    new_hash = hashlib.sha256
    expected = count - 1
    link: Any = head
    row = get(head)
    while row is not None and expected >= 0:
        _, prev, digest, position = row
        if (
            position != expected
            or type(digest) is not str
            # step(), inline; a prev that is not a str makes no chain digest (nor the root)
            or new_hash(f"{prev}:{digest}".encode()).hexdigest() != link
        ):
            break
        add_chain(link)
        add_digest(digest)
        expected -= 1
        link = prev
        row = get(prev)
    if expected == -1 and link == kind.root:
        chains.reverse()
        digests.reverse()
        return chains, digests
    pairs = check_links(walk(links, head, count), count, kind.root, kind.path, link_table)
    check_steps(kind, pairs, link_table)
    return [chain for chain, _ in pairs], [digest for _, digest in pairs]


def decode_items(
    kind: Kind, digests: Sequence[str], found: Sequence[Row], cache: dict[str, Any], *, items: str
) -> list[Any]:
    """
    The items named by *digests*, the item digests of a checked chain of *kind*.

    *found* holds stored items, among them those not in *cache*.
    Verification is complete and eager: every item is checked before this
    returns, and nothing unchecked is returned or cached. The links were
    checked first (:func:`follow`, or :func:`check_links` and
    :func:`check_steps`): each chain digest is computed from the previous one
    and the item digest its link names, and compared with the link's key,
    from the root up to the head the (sealed) checkpoint row names. The item
    digests are therefore the ones that head was made from: changing one
    means finding a sha256 preimage. Then, in one pass over what was read:

    - Items stored as their canonical text (:mod:`~workingctx.persistence._items`,
      how items are written now): the sha256 of *kind*'s tag and the text
      (without its layout) must equal the item's key. The key *is* that sha256,
      so the text is the very text the digest was made from (another text
      with that sha256 would be a collision); no text whose sha256 is not its
      key is ever taken this way. The texts are parsed in one call and each
      item is built with its constructor's checks (the fast builders make the
      same checks as the converter, a tested law), and is not encoded again:
      the canonical text of a message reads back as an identical message (a
      tested law), whose digest is therefore its key, so the message is given
      its key as its cached digest. An item with a layout (the order of its
      payloads' keys, which no digest covers) must also match its checksum,
      which binds the layout to the item, and the layout may only reorder
      keys. A journal entry is taken this way only when its text holds no
      tagged form, which plain data would read otherwise.
    - Other items (written as ``to_json`` text before stores wrote canonical
      text, or escaped because a database cannot hold their text): parsed,
      built, and their digest computed again from what was built and
      compared with the key, as before.

    What the canonical path trusts is that a text whose sha256 is its key was
    written by :func:`~workingctx.persistence._items.message_item` (or
    ``entry_item``): against accidents that holds (damage does not keep a
    sha256), and in a keyed store the key itself is authenticated by the row's
    HMAC through the links. Whoever can write an unkeyed store can make it hold
    anything, and the persistence docs say so: such a forger could also write
    a text of a valid message that is not its canonical text under that text's
    own sha256, and the loaded message's cached digest would then be that
    sha256 rather than the one computing it gives.

    An item that fails is read again by :func:`_diagnose`, which says whether
    it is missing, damaged (its checksum no longer matches), not an item, or
    rewritten whole, and where. The checked items read are remembered in *cache*.
    """
    built = _decode_found(kind, found) if found else {}
    try:
        values = list(map((built or cache).__getitem__, digests))
    except KeyError:
        values = []
        append = values.append
        for position, digest in enumerate(digests):
            value = built.get(digest, _UNREAD)
            if value is _UNREAD:
                value = cache.get(digest, _UNREAD)
                if value is _UNREAD:
                    where = f"{kind.path}[{position}]"
                    value = built[digest] = _diagnose(kind, digest, stored(found), where, items)
            append(value)
    if built:
        if len(cache) + len(built) >= CACHE_LIMIT:
            cache.clear()
        cache.update(built)
    return values


def _decode_found(kind: Kind, found: Iterable[Row]) -> dict[str, Any]:
    """
    The stored items that check, by key (see :func:`decode_items`); one
    that does not is left out, for :func:`_diagnose`. Texts may be read as
    str or as their UTF-8 bytes (which are hashed as they are).
    """
    keys: list[str] = []
    texts: list[Text] = []
    laid_keys: list[str] = []
    laid_texts: list[Text] = []
    layouts: list[Text] = []
    rest: dict[str, object] = {}
    tag = kind.tag
    tagged = _items.TAGGED.encode("ascii") if kind.untagged else None
    new_hash = hashlib.sha256
    tagged_hash = new_hash((tag or "").encode("ascii")).copy  # the hash after the tag, for each text
    for digest, data, check in found:
        if tag is None:
            rest[digest] = as_text(data)
            continue
        if type(data) is bytes:
            raw = data
        elif type(data) is str:
            raw = data.encode("utf-8", "surrogatepass")
        else:
            rest[digest] = data
            continue
        if b"\n" not in raw:  # no layout
            hashed = tagged_hash()  # as _items.canonical_item(data, tag, digest), inline
            hashed.update(raw)
            if hashed.hexdigest() == digest and (tagged is None or tagged not in raw):
                keys.append(digest)
                texts.append(data)
                continue
        else:
            hashed = tagged_hash()
            head_raw = raw.partition(b"\n")[0]
            hashed.update(head_raw)
            if (
                hashed.hexdigest() == digest
                and (tagged is None or tagged not in head_raw)
                # its checksum binds the layout to it: intact(digest, item), inline
                and new_hash((digest + "\n").encode("utf-8", "surrogatepass") + raw).hexdigest() == check
            ):
                head, _, layout = data.partition(b"\n" if type(data) is bytes else "\n")
                laid_keys.append(digest)
                laid_texts.append(head)
                layouts.append(layout)
                continue
        rest[digest] = data if type(data) is str else as_text(data)
    built: dict[str, Any] = {}
    if keys:
        _build_canonical(kind, keys, parse_list(texts), built)
    if laid_keys:
        _build_laid(kind, laid_keys, laid_texts, layouts, built)
    if rest:
        _build_rest(kind, rest, built)
    return built


def _build_laid(kind: Kind, keys: list[str], texts: list[Text], layouts: list[Text], built: dict[str, Any]) -> None:
    """
    Build the items of verified canonical texts with layouts into *built*
    (see :func:`_build_canonical`), each in the order of its layout.
    """
    parsed = parse_list(texts)
    distinct = dict.fromkeys(layouts)  # items of one shape share a layout: each is parsed once
    orders = dict(zip(distinct, parse_list(list(distinct)), strict=True))
    roots = {layout: _items.root_order(order) for layout, order in orders.items()}
    ordered: list[Any] = []
    append = ordered.append
    for data, layout in zip(parsed, layouts, strict=True):
        order = roots[layout]
        try:
            append(_items.apply_layout(data, orders[layout]) if order is None else _items.apply_order(data, order))
        except _items.LayoutError:
            append(_UNREAD)
    _build_canonical(kind, keys, ordered, built)


def _build_rest(kind: Kind, rest: Mapping[str, object], built: dict[str, Any]) -> None:
    """
    Build the items of other stored texts into *built*: each built value's
    digest is computed and must be its key.
    """
    hook = converter.get_structure_hook(kind.cls)
    item_digest = kind.digest
    for digest, data in parse_all(rest).items():
        try:
            value = hook(data, kind.cls)
        except Exception:  # noqa: BLE001, S112  # read again in order, for an error with a path
            continue
        if item_digest(value) == digest:
            built[digest] = value


def parse_list(texts: list[Text]) -> list[Any]:
    """
    Many JSON texts (str, or UTF-8 bytes) parsed in one call, in order; a
    text that does not parse gives :data:`_UNREAD` (see :func:`parse_all`).
    """
    values: Any = None
    if not texts:
        return []
    with contextlib.suppress(ValueError, TypeError):  # TypeError: str and bytes mixed
        # one array of them all; the brackets go on the first and the last
        # text, so that the whole text is copied only once, by the join
        edges = list(texts)
        if type(texts[0]) is bytes:
            edges[0] = b"[" + cast("bytes", edges[0])
            edges[-1] = cast("bytes", edges[-1]) + b"]"
            values = json.loads(b",".join(cast("list[bytes]", edges)))
        else:
            edges[0] = "[" + cast("str", edges[0])
            edges[-1] = cast("str", edges[-1]) + "]"
            values = json.loads(",".join(cast("list[str]", edges)))
    if isinstance(values, list) and len(values) == len(texts):
        return values
    parsed: list[Any] = []
    for text in texts:
        try:
            parsed.append(json.loads(text))
        except ValueError:
            parsed.append(_UNREAD)
    return parsed


def _build_canonical(kind: Kind, keys: list[str], parsed: list[Any], built: dict[str, Any]) -> None:
    """
    Build the items of verified canonical data (:data:`_UNREAD` for a text
    that did not parse) into *built*, by key, each given its key as its
    digest; one that does not build is left out, for :func:`_diagnose`.
    """
    cls = kind.cls
    hook = converter.get_structure_hook(cls)
    build = kind.build
    seed = kind.seed
    for digest, data in zip(keys, parsed, strict=True):
        if data is _UNREAD:
            continue
        try:
            value = None if build is None else build(data, digest)
            if value is None:
                value = hook(data, cls)
                if seed is not None:
                    seed(value, digest)
        except Exception:  # noqa: BLE001, S112  # read again in order, for an error with a path
            continue
        built[digest] = value


def _diagnose(kind: Kind, digest: str, found: Mapping[str, Stored], path: str, items: str) -> Any:
    """
    An item that did not read, or read as another item than its key says:
    what is wrong with it (missing, damaged, not an item, rewritten), and where.
    """
    item = found.get(digest)
    if item is None:
        damage(f"{kind.noun} {digest!r} is missing ({items})", path)
    if not intact(digest, item):
        damage(f"{kind.noun} {digest!r} does not match its checksum ({items})", path)
    text = cast("str", item[0])
    head, _, layout = text.partition(_items.SEPARATOR)
    where = f"{items}, key {digest!r}"
    if not layout:
        value = decode_json(head, kind.cls, path, items, digest)
    else:
        try:
            data = _items.apply_layout(json.loads(head), json.loads(layout))
        except ValueError:
            damage(f"{kind.noun} {digest!r} is not canonical JSON text and a layout ({where})", path)
        value = decode_data(data, kind.cls, path, where)
    if kind.digest(value) != digest:
        # The checksum only shows accidents: whoever can write the file can
        # write a matching one. The item's own digest is what it is.
        damage(f"{kind.noun} {digest!r} does not match its digest ({items}, forged or damaged)", path)
    return value


def decode_data(data: Any, kind: Any, path: str, where: str) -> Any:
    try:
        return structure(data, kind)
    except SerializationError as exc:
        inner = "" if exc.path == "$" else exc.path[1:]
        damage(f"{exc.problems[0][1]} ({where})", path + inner)


def decode_prefix(
    text: object, key: object, cache: dict[str, PrefixContext], table: str = "table blobs"
) -> PrefixContext:
    prefix: PrefixContext = decode_json(text, PrefixContext, "$.snapshot.prefix", table, str(key))
    if prefix.digest() != key:
        damage(f"the prefix does not match its digest ({table}, key {key!r})", "$.snapshot.prefix")
    remember(cache, prefix.digest(), prefix)
    return prefix


def decode_notes(text: object, key: object, table: str = "table blobs") -> FrozenDict:
    notes: FrozenDict = decode_json(text, FrozenDict, "$.snapshot.scratchpad", table, str(key))
    if scratchpad_digest(dict(notes)) != key:
        damage(f"the scratchpad does not match its digest ({table}, key {key!r})", "$.snapshot.scratchpad")
    return notes


def assemble(
    info: CheckpointInfo,
    digest: object,
    prefix: PrefixContext,
    notes: FrozenDict,
    messages: tuple[list[Message], list[str]],
    journal: Sequence[Any],
    table: str = "table checkpoints",
) -> Checkpoint:
    """
    The checkpoint of checked parts, after checking the whole snapshot against its digest.
    """
    snapshot = FrozenContext(prefix, messages[0], notes, journal, _chain=Chain(messages[1]))
    if snapshot.digest() != digest:
        damage(f"the snapshot does not match its digest ({table}, damaged)", "$.snapshot")
    return Checkpoint(
        id=info.id, snapshot=snapshot, created_at=info.created_at, parent=info.parent, metadata=info.metadata
    )


def check_marker(found: Mapping[Any, Any], where: str, newest: int) -> None:
    """
    Refuse a store whose marker (``format`` and ``schema_version``) is not
    workingctx's, is damaged, or was written by a newer schema than *newest*.

    Raises:
        CheckpointError: naming *where*, the marker found and the fix; nothing is changed.
    """
    if found.get("format") != FORMAT:
        msg = (
            f"{where} is not a workingctx checkpoint store: its format is {found.get('format')!r}, "
            f"expected {FORMAT!r}. Nothing was changed"
        )
        raise CheckpointError(msg, path="workingctx_store.format")
    version = found.get("schema_version")
    # ASCII digits only ("²".isdigit() holds, and int() refuses it), and few
    # enough of them for int(): the limit on digits raises a builtin ValueError
    if not isinstance(version, str) or _VERSION.fullmatch(version) is None:
        shown = (
            f"{version[:40]!r}... ({len(version)} characters)"
            if isinstance(version, str) and len(version) > 40
            else repr(version)
        )
        msg = (
            f"{where} has a damaged schema version {shown}: expected a whole number such as {newest}. "
            "Nothing was changed"
        )
        raise CheckpointError(msg, path="workingctx_store.schema_version")
    if int(version) > newest:
        msg = (
            f"{where} was written by a newer workingctx (schema version {version}; this one reads "
            f"up to {newest}): upgrade workingctx to read it. Nothing was changed"
        )
        raise CheckpointError(msg, path="workingctx_store.schema_version")
