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
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, NoReturn, cast

import attrs

from workingctx._canonical import EMPTY_CHAIN, canonical_json, chain_step
from workingctx.exceptions import CheckpointError, SerializationError
from workingctx.frozen import FrozenDict
from workingctx.messages import Message
from workingctx.persistence.checkpoint import Checkpoint
from workingctx.persistence.stores import CheckpointInfo
from workingctx.prefix import PrefixContext
from workingctx.serialization import converter, from_json, to_json
from workingctx.snapshot import Chain, FrozenContext

FORMAT = "workingctx.checkpoints"
"""The format name a workingctx store carries in its marker."""

JOURNAL_ROOT = hashlib.sha256(b"workingctx/journal-chain/v1").hexdigest()
"""The chain digest of an empty journal."""

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


def entry_digest(entry: Any) -> str:
    return sha256("journal-entry:" + canonical_json(entry))


def checksum(key: str, data: str) -> str:
    """
    Binds a stored item's text to its key: any change to either shows on load,
    without recomputing the item's own digest.
    """
    return sha256(f"{key}\n{data}")


def journal_step(previous: str, digest: str) -> str:
    return hashlib.sha256(f"{previous}:{digest}".encode("ascii")).hexdigest()


def scratchpad_digest(notes: dict[str, Any]) -> str:
    return sha256("scratchpad:" + canonical_json(notes))


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


def parse_all(texts: dict[str, str | None]) -> dict[str, Any]:
    """
    Parse many JSON texts in one call; a text that does not parse is left out
    (its reader reports it, with a path).

    Only texts that passed their checksum come here: each was written by
    ``to_json`` as one JSON value, so joining them cannot shift values between keys.
    """
    keys = [key for key, text in texts.items() if text is not None]
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


def intact(found: Iterable[Sequence[Any]]) -> dict[str, str | None]:
    """
    Stored items as ``(key, data, checksum)``: each key's text, or None for a
    text that fails its checksum.
    """
    texts: dict[str, str | None] = {}
    for key, data, check in found:
        ok = isinstance(key, str) and isinstance(data, str) and isinstance(check, str) and checksum(key, data) == check
        texts[str(key)] = data if ok else None
    return texts


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


class JournalDigests:
    """
    Each journal entry's digest and the journal's chain digests, reusing those
    of the entries the last journal shared (a journal never rewrites one).
    """

    def __init__(self) -> None:
        self._seen: tuple[list[Any], list[str]] = ([], [])

    def __call__(self, journal: tuple[Any, ...]) -> tuple[list[str], list[str]]:
        """
        ``(digests, chain)``; a digest is ``""`` for an entry the last journal
        shared (it is stored already, and never written again).
        """
        seen_entries, seen_chain = self._seen
        reuse = 0
        for mine, theirs in zip(journal, seen_entries, strict=False):
            if mine is not theirs:
                break
            reuse += 1
        chain = seen_chain[:reuse]
        digests: list[str] = []
        previous = chain[-1] if chain else JOURNAL_ROOT
        for position, entry in enumerate(journal):
            if position < reuse:
                digests.append("")
                continue
            digest = entry_digest(entry)
            digests.append(digest)
            previous = journal_step(previous, digest)
            chain.append(previous)
        self._seen = (list(journal), chain)
        return digests, chain


@attrs.frozen
class Encoded:
    """
    What a store writes for one checkpoint, besides its messages and entries.

    Attributes:
        row: The checkpoint row without its seal (the first eleven fields of :data:`ROW_FIELDS`).
        seal: The row's seal.
        notes_text: The scratchpad's JSON, stored under ``row[6]``.
        entry_digests: Each journal entry's digest (``""`` where stored already).
        journal_chain: The journal's chain digests, one per entry.
    """

    row: tuple[Any, ...]
    seal: str
    notes_text: str
    entry_digests: list[str]
    journal_chain: list[str]

    @property
    def prefix_key(self) -> str:
        return cast("str", self.row[5])

    @property
    def notes_key(self) -> str:
        return cast("str", self.row[6])


def encode(checkpoint: Checkpoint, journal_digests: JournalDigests, key: bytes | None = None) -> Encoded:
    """
    The row and the blobs of *checkpoint*, the row sealed with *key* when given.

    Raises:
        CheckpointError: The scratchpad or the metadata is not JSON data.
    """
    snapshot = checkpoint.snapshot
    notes = dict(snapshot.scratchpad)
    notes_text = payload(notes, "$.snapshot.scratchpad", checkpoint)
    metadata_text = payload(checkpoint.metadata, "$.metadata", checkpoint)
    digests, chain = journal_digests(snapshot.journal)
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
        chain[-1] if chain else JOURNAL_ROOT,
        len(snapshot.journal),
    )
    return Encoded(row=row, seal=seal(row, key), notes_text=notes_text, entry_digests=digests, journal_chain=chain)


def new_messages(snapshot: FrozenContext, start: int) -> Iterable[tuple[int, str, str, Message]]:
    """
    ``(position, chain digest, previous chain digest, message)`` for every
    message from *start* on: the links a store adds when it holds the first *start*.
    """
    previous = snapshot.chain_digest(start)
    for position in range(start, len(snapshot.messages)):
        chain = snapshot.chain_digest(position + 1)
        yield position, chain, previous, snapshot.messages[position]
        previous = chain


def new_entries(encoded: Encoded, journal: tuple[Any, ...], start: int) -> Iterable[tuple[int, str, str, str, Any]]:
    """
    ``(position, chain digest, previous chain digest, entry digest, entry)`` for
    every journal entry from *start* on.
    """
    chain = encoded.journal_chain
    previous = chain[start - 1] if start else JOURNAL_ROOT
    for position in range(start, len(journal)):
        digest = encoded.entry_digests[position] or entry_digest(journal[position])
        yield position, chain[position], previous, digest, journal[position]
        previous = chain[position]


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
    The links of a chain read from its root to its head, as ``(chain, prev,
    item, position)``, checked for order and length: ``(chain digest, item digest)`` pairs.
    """
    if len(rows) != count:
        damage(f"expected {count} links, found {len(rows)} ({table}, truncated or damaged)", path)
    previous = root
    for position, (link, prev, digest, stored_position) in enumerate(rows):
        if prev != previous or stored_position != position or not isinstance(link, str):
            damage(f"link {link!r} is out of place ({table}, damaged)", f"{path}[{position}]")
        if not isinstance(digest, str):
            damage(f"link {link!r} names no item ({table}, damaged)", f"{path}[{position}]")
        previous = link
    return [(link, digest) for link, _, digest, _ in rows]


def decode_messages(
    links: Sequence[tuple[str, str]],
    texts: dict[str, str | None],
    cache: dict[str, Message],
    *,
    items: str = "table messages",
    link_table: str = "table message_links",
) -> tuple[list[Message], list[str]]:
    """
    The messages of a checked chain, and its chain digests.

    *texts* holds the stored text of every message not in *cache* (None where
    its checksum failed); each message read is checked against its link and
    remembered in *cache*.
    """
    parsed = parse_all(texts)
    hook = converter.get_structure_hook(Message)
    messages: list[Message] = []
    chain: list[str] = []
    previous = EMPTY_CHAIN
    for position, (link, digest) in enumerate(links):
        message = cache.get(digest)
        if message is None:
            path = f"$.snapshot.messages[{position}]"
            text = texts.get(digest)
            if text is None:
                what = "does not match its checksum" if digest in texts else "is missing"
                damage(f"message {digest!r} {what} ({items})", path)
            try:
                message = hook(parsed[digest], Message)
            except Exception:  # noqa: BLE001  # read it again the slow way, for an error with a path
                message = decode_json(text, Message, path, items, digest)
            # The checksum only shows accidents: whoever can write the file can
            # write a matching one. The message's own digest is what it is.
            if message.digest() != digest:
                damage(f"message {digest!r} does not match its digest ({items}, forged or damaged)", path)
            remember(cache, digest, message)
        if chain_step(previous, message) != link:
            damage(
                f"the link does not match its message ({link_table}, key {link!r})",
                f"$.snapshot.messages[{position}]",
            )
        messages.append(message)
        chain.append(link)
        previous = link
    return messages, chain


def decode_journal(
    links: Sequence[tuple[str, str]],
    texts: dict[str, str | None],
    cache: dict[str, Any],
    *,
    items: str = "table journal_entries",
    link_table: str = "table journal_links",
) -> list[Any]:
    """
    The entries of a checked journal chain (*texts* as for :func:`decode_messages`).
    """
    entries: list[Any] = []
    previous = JOURNAL_ROOT
    for position, (link, digest) in enumerate(links):
        path = f"$.snapshot.journal[{position}]"
        if digest in cache:
            entry = cache[digest]
        else:
            text = texts.get(digest)
            if text is None:
                what = "does not match its checksum" if digest in texts else "is missing"
                damage(f"journal entry {digest!r} {what} ({items})", path)
            entry = decode_json(text, Any, path, items, digest)
            if entry_digest(entry) != digest:
                damage(f"journal entry {digest!r} does not match its digest ({items}, forged or damaged)", path)
            remember(cache, digest, entry)
        if journal_step(previous, digest) != link:
            damage(f"the link does not match its entry ({link_table}, key {link!r})", path)
        entries.append(entry)
        previous = link
    return entries


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
    journal: list[Any],
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


def stored_length(present: Callable[[str], bool], chain_at: Callable[[int], str], count: int) -> int:
    """
    How many leading items of a chain are stored already, given
    ``present(chain digest) -> bool`` (links are only ever stored with all their
    ancestors, so presence is monotone: binary search).
    """
    if count == 0 or present(chain_at(count)):
        return count
    low, high = 0, count - 1
    while low < high:
        middle = (low + high + 1) // 2
        if present(chain_at(middle)):
            low = middle
        else:
            high = middle - 1
    return low


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
    if not isinstance(version, str) or not version.isdigit():
        msg = f"{where} has a damaged schema version {version!r}; expected {newest}"
        raise CheckpointError(msg, path="workingctx_store.schema_version")
    if int(version) > newest:
        msg = (
            f"{where} was written by a newer workingctx (schema version {version}; this one reads "
            f"up to {newest}): upgrade workingctx to read it. Nothing was changed"
        )
        raise CheckpointError(msg, path="workingctx_store.schema_version")
