"""
The Redis store: checkpoints in a Redis server, on redis-py, with core data types only.

Layout, every key under ``<namespace>:``:

- ``store``: a hash with the format name and the schema version;
- ``m:<digest>`` and ``e:<digest>``: one string per distinct message and
  journal entry: a checksum (64 hex digits), then its JSON;
- ``ml:<chain>`` and ``el:<chain>``: one string per link,
  ``"<previous chain> <item digest> <position>"``;
- ``ms:<chain>`` and ``es:<chain>``: at every 64th link, a *segment*: a
  header line ``"<previous chain> <lowest position> <position>"``, then
  ``\\0`` and the zlib stream of its body: the item digests of that link and
  of the 63 before it, one a line, head first, then for each ``\\0``, its
  item's checksum (only when its text has a layout), ``\\0`` and its item's
  text (a chain saved before segments existed has none, and is read link by
  link; a segment saved before their bodies were compressed holds the links'
  values instead of their digests, and every checksum, as it is; a damaged
  one is read past);
- ``b:<digest>``: prefixes and scratchpads;
- ``cp:<id>``: a checkpoint's sealed row (JSON), and ``order``, a sorted set of
  ids by creation time;
- ``head:<thread>``: a thread's latest checkpoint id;
- ``h:<chain>``: one string per distinct recorded-history prefix,
  ``"<previous chain> <position> <entry JSON>"``; ``ctx:<id>``: a saved
  context's sealed row (JSON), and ``contexts``, the set of their ids;
- ``gc``: how many garbage collections ran, and ``saves``: how many saves.

A save is one ``MULTI``/``EXEC`` transaction under ``WATCH`` (of the thread's
head, of ``gc`` and of the checkpoint's row): it is applied whole or not at all,
and a save that raced a delete or another writer of its thread is run again
(or, for the thread, refused with :class:`~workingctx.exceptions.HeadConflictError`).
A load is one round trip, two for a chain long enough to have segments: a
Lua script reads the row, walks both chains (a segment at a time where it can,
reading only its header) and reads the items of the links it read one by one,
atomically, replying with those in a few MessagePack strings; then one
``MGET`` reads the segments it named, whose bodies are inflated here.
Everything read is then checked here against the row's digests, as before.

Needs the ``redis`` extra: ``pip install 'workingctx[redis]'``.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import json
import re
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from workingctx import _checks
from workingctx.checkpoint import Checkpoint
from workingctx.exceptions import ArgumentValueError, CheckpointError, SerializationError, StoreUnavailableError
from workingctx.messages import Message
from workingctx.persistence import _codec, _items, histories
from workingctx.persistence._codec import FORMAT, JOURNAL, MESSAGES, Damage, checksum, damage
from workingctx.persistence._engine import StoreEngine, head_allows, head_conflict
from workingctx.persistence.histories import ContextInfo
from workingctx.persistence.listing import Listing, listed, shown
from workingctx.persistence.stores import CheckpointInfo
from workingctx.prefix import PrefixContext

if TYPE_CHECKING:
    import redis as redis_py

    from workingctx.context import WorkingContext

__all__ = ["SCHEMA_VERSION", "RedisStore"]

SCHEMA_VERSION = 1
"""The schema version this workingctx writes in Redis, and the newest it reads."""

_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,100}")
_ATTEMPTS = 50

_SEGMENT = 64
"""
How many links a segment holds: at every link whose position is one less than
a multiple of it, a save also writes ``ms:<chain>`` (``es:`` for the journal),
that link and the ones before it down to the last segment, with their items,
so that a load reads a long chain in few keys (at the cost of a second copy
of its items, compressed). A chain saved without them (by an older workingctx)
is read link by link.
"""

_LEVEL = 6
"""The zlib level of a segment's body (its JSON texts and hex digests shrink to about a quarter of their size)."""

# Follows a chain from its head for at most ARGV[3] links; returns key, value pairs,
# head first. ARGV[4] is which space-separated field of a value holds its position:
# each step must go exactly one position down, so a damaged or crafted chain (a
# cycle, a huge count) costs no more than the links actually stored.
_WALK = """
local prefix = ARGV[1]
local key = ARGV[2]
local n = tonumber(ARGV[3])
local field = tonumber(ARGV[4])
local out = {}
local expected = nil
for i = 1, n do
  local value = redis.call('GET', prefix .. key)
  if not value then break end
  local parts = {}
  for token in string.gmatch(value, '%S+') do
    parts[#parts + 1] = token
    if #parts >= field then break end
  end
  local position = tonumber(parts[field])
  if position == nil or (expected ~= nil and position ~= expected) then break end
  out[#out + 1] = key
  out[#out + 1] = value
  if position <= 0 or parts[1] == nil then break end
  expected = position - 1
  key = parts[1]
end
return out
"""


class _Retry(Exception):  # noqa: N818  # internal: the transaction is run again
    """
    A watched key changed before ``EXEC``.
    """


# A checkpoint read in one atomic script (then one MGET of the segments it names):
# the marker, the gc count and the row of checkpoint ARGV[2]; then, from the row
# (decoded here only to know what to read: Python reads it again and checks
# everything), the links of its transcript and of its journal, walked from their
# heads as _WALK walks (each step exactly one position down, at most the row's count
# of links), a segment at a time where one is stored (its header, read alone, must
# say it holds the next positions); the items named by the links read one by one
# (each once, in the order first met, head first); and its prefix and scratchpad
# blobs. With ARGV[3..8] (messages head and count, journal head and count, prefix
# and scratchpad keys) those are walked and read instead of the row's; with
# ARGV[9] = "links", no segment is read.
#
# Returns {marker, gc, row, used, message values, message kinds, journal values,
# journal kinds, packed}: `used`, the six values read from, as text (false when the
# row gives nothing to read: Python says why); each chain's values, head first, a
# link's value or a segment's key (the kinds say which: "l" or "s" for each, so the
# client reads the segments whole, in one MGET, without Lua copying them); `packed`,
# the items of the links read one by one then the two blobs, as MessagePack arrays
# of strings (false for a missing key) made by the server's C code, so that
# thousands of values cost the client one reply to parse, not one each.
_LOAD = """
local SEGMENT = @SEGMENT@
local prefix = ARGV[1]
local marker = redis.call('HGETALL', prefix .. 'store')
local gc = redis.call('GET', prefix .. 'gc')
local row = redis.call('GET', prefix .. 'cp:' .. ARGV[2])
local used = false
if #ARGV >= 8 then
  used = {ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]}
elseif row then
  local ok, fields = pcall(cjson.decode, row)
  if ok and type(fields) == 'table' then
    used = {fields[8], fields[9], fields[10], fields[11], fields[6], fields[7]}
    for i = 1, 6 do
      local kind = type(used[i])
      if kind == 'number' then
        used[i] = tostring(used[i])
      elseif kind ~= 'string' then
        used = false
        break
      end
    end
  end
end
if not used then
  return {marker, gc, row, false, false, false, false, false, false}
end
local segments = ARGV[9] ~= 'links'
local function get(key)
  local value = redis.pcall('GET', prefix .. key)
  if type(value) == 'string' then return value end
  return false
end
local keys = {}
local function walk(space, key, n, items)
  local values = {}
  local kinds = {}
  local seen = {}
  local count = 0
  local expected = nil
  while count < n do
    local taken = false
    local at = expected or (n - 1)
    if segments and at % SEGMENT == SEGMENT - 1 and n - count >= SEGMENT then
      local name = space:sub(1, 1) .. 's:' .. key
      local header = redis.pcall('GETRANGE', prefix .. name, 0, 199)
      if type(header) == 'string' then
        local previous, low, high = string.match(header, '^(%S+) (%d+) (%d+)\\n')
        if tonumber(high) == at and tonumber(low) == at - SEGMENT + 1 then
          values[#values + 1] = name
          kinds[#kinds + 1] = 's'
          count = count + SEGMENT
          expected = tonumber(low) - 1
          key = previous
          taken = true
          if expected < 0 then break end
        end
      end
    end
    if not taken then
      local value = get(space .. key)
      if not value then break end
      local previous, item, third = string.match(value, '^%s*(%S+)%s+(%S+)%s+(%S+)')
      local position = tonumber(third)
      if position == nil or (expected ~= nil and position ~= expected) then break end
      values[#values + 1] = value
      kinds[#kinds + 1] = 'l'
      if not seen[item] then
        seen[item] = true
        keys[#keys + 1] = prefix .. items .. item
      end
      count = count + 1
      if position <= 0 then break end
      expected = position - 1
      key = previous
    end
  end
  return values, table.concat(kinds)
end
local message_values, message_kinds = walk('ml:', used[1], tonumber(used[2]) or 0, 'm:')
local journal_values, journal_kinds = walk('el:', used[3], tonumber(used[4]) or 0, 'e:')
local arrays = {}
local i = 1
while i <= #keys do
  local last = math.min(#keys, i + 999)
  local values = redis.pcall('MGET', unpack(keys, i, last))
  if type(values) ~= 'table' or values.err then values = {} end
  arrays[#arrays + 1] = values
  i = last + 1
end
arrays[#arrays + 1] = {get('b:' .. used[5]), get('b:' .. used[6])}
local packed = cmsgpack.pack(unpack(arrays))
return {marker, gc, row, used, message_values, message_kinds, journal_values, journal_kinds, packed}
""".replace("@SEGMENT@", str(_SEGMENT))


class RedisStore(StoreEngine):
    """
    A checkpoint store in a Redis server, shared by every process that opens
    it: content-addressed, each save one atomic transaction, safe for
    concurrent writers.

    Args:
        url: A Redis URL, such as ``"redis://127.0.0.1:6379/0"``.
        namespace: The prefix of every key the store writes (letters, digits,
            ``_``, ``.``, ``-``); several stores can share one database under
            different namespaces.
        timeout: Seconds to wait for the server on each call.

    Raises:
        ImportError: redis-py is not installed.
        ValueError: *namespace* or *timeout* is not valid.
        StoreUnavailableError: The server cannot be reached.
        CheckpointError: The namespace holds keys that are not a workingctx
            store, or a store of a newer schema version. Nothing is changed.
    """

    def __init__(self, url: str, *, namespace: str = "workingctx", timeout: float = 30.0) -> None:
        _checks.check_instance(url, "url", str, "a Redis URL")
        _checks.check_match(namespace, "namespace", _NAME, "1 to 100 letters, digits, '_', '.' or '-'")
        if _checks.check_number(timeout, "timeout") <= 0:
            raise _checks.wrong_value(timeout, "timeout", "must be a positive number of seconds")
        try:
            import redis  # noqa: PLC0415  # the redis extra is optional
        except ImportError as exc:
            msg = f"RedisStore needs redis-py ({exc}): pip install 'workingctx[redis]'"
            raise ImportError(msg) from exc
        self._redis = redis
        self.namespace = namespace
        self._p = f"{namespace}:"
        try:
            self._client: redis_py.Redis = redis.Redis.from_url(
                url, decode_responses=True, socket_timeout=timeout, socket_connect_timeout=timeout
            )
        except ValueError as exc:
            msg = f"url must be a Redis URL such as 'redis://127.0.0.1:6379/0', got {url!r} ({exc})"
            raise ArgumentValueError(msg, argument="url", value=url) from None
        kwargs = self._client.connection_pool.connection_kwargs
        self._where = (
            f"namespace {namespace!r} of Redis db {kwargs.get('db', 0)} on {kwargs.get('host')}:{kwargs.get('port')}"
        )
        self._place = f"the Redis store {self._where}"
        self._walk_script = self._client.register_script(_WALK)
        self._load_script = self._client.register_script(_LOAD)
        self._messages: dict[str, Message] = {}
        self._entries: dict[str, Any] = {}
        self._prefixes: dict[str, PrefixContext] = {}
        self._local = threading.Lock()
        self._call(self._prepare)

    # -- plumbing -----------------------------------------------------------------

    def _call(self, body: Callable[[], Any]) -> Any:
        """
        Run *body*, again when a watched key changed under it; connection
        failures become StoreUnavailableError, other server errors CheckpointError.
        """
        errors = self._redis.exceptions
        for _ in range(_ATTEMPTS):
            try:
                return body()
            except (_Retry, errors.WatchError):
                continue
            except (errors.ConnectionError, errors.TimeoutError) as exc:
                msg = (
                    f"lost the connection to the Redis server of {self._where} ({exc}); "
                    "a save is applied whole or not at all, so saving again is safe"
                )
                raise StoreUnavailableError(msg) from None
            except errors.RedisError as exc:
                msg = f"the checkpoint store {self._where} failed ({exc}); it was left as it was"
                raise CheckpointError(msg) from None
            except UnicodeDecodeError as exc:
                msg = (
                    f"the checkpoint store {self._where} holds a key or value that is not UTF-8 text "
                    f"(damaged: {exc.object[max(0, exc.start - 20) : exc.end + 20]!r}); it was left as it was"
                )
                raise CheckpointError(msg) from None
        msg = f"the checkpoint store {self._where} stayed busy after {_ATTEMPTS} attempts; nothing was written"
        raise CheckpointError(msg)

    def _prepare(self) -> None:
        marker = self._p + "store"
        with self._client.pipeline() as pipe:
            pipe.watch(  # type: ignore[no-untyped-call]  # redis-py leaves watch untyped
                marker
            )
            if not pipe.exists(marker):
                other = self._any_key(pipe)
                if other is not None:
                    msg = (
                        f"{self._where} holds keys that are not a workingctx checkpoint store "
                        f"(such as {other!r}, and no {marker!r}); use another namespace=. Nothing was changed"
                    )
                    raise CheckpointError(msg, path="workingctx_store")
                pipe.multi()
                pipe.hset(marker, mapping={"format": FORMAT, "schema_version": str(SCHEMA_VERSION)})
                pipe.execute()
        self._check_format(_raw(self._client, "HGETALL", marker))

    def _any_key(self, pipe: Any) -> str | None:
        """
        A key of the namespace, or None when it has none: SCAN until the
        server's cursor comes back to 0 (one SCAN call looks at only a slice
        of the database, so one call finding nothing proves nothing).
        """
        cursor = 0
        while True:
            cursor, found = _raw(pipe, "SCAN", cursor, "MATCH", self._p + "*", "COUNT", 10_000)
            if found:
                return shown(found[0])
            if int(cursor) == 0:
                return None

    def _scan(self, pattern: str) -> Iterator[bytes]:
        """
        Every key matching *pattern*, as bytes (a key that is not UTF-8 text included).
        """
        cursor = 0
        while True:
            cursor, found = _raw(self._client, "SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
            yield from found
            if int(cursor) == 0:
                return

    def _check_format(self, found: Any) -> None:
        if not found:
            msg = f"{self._where} holds no workingctx checkpoint store (its marker key is gone). Nothing was changed"
            raise CheckpointError(msg, path="workingctx_store")
        # read as bytes: a field that is not UTF-8 is a damaged marker, not a UnicodeDecodeError
        marker = {_decoded(key): _decoded(value, value) for key, value in dict(found).items()}
        _codec.check_marker(marker, self._where, SCHEMA_VERSION)

    # -- saving -------------------------------------------------------------------

    def _save(self, checkpoint: Checkpoint, thread: str | None) -> None:
        encoded = _codec.encode(checkpoint)
        replaced: bool = self._call(lambda: self._save_once(checkpoint, encoded, thread))
        if replaced:
            self._tidy()
        with self._local:
            for message in checkpoint.snapshot.messages[-64:]:
                _codec.remember(self._messages, message.digest(), message)

    def _save_once(self, checkpoint: Checkpoint, encoded: _codec.Encoded, thread: str | None) -> bool:
        p = self._p
        row_key = p + "cp:" + checkpoint.id
        head_key = None if thread is None else p + "head:" + thread
        with self._client.pipeline() as pipe:
            pipe.watch(  # type: ignore[no-untyped-call]  # redis-py leaves watch untyped
                p + "gc", row_key, *([] if head_key is None else [head_key])
            )
            self._check_format(_raw(pipe, "HGETALL", p + "store"))
            if thread is not None and head_key is not None:
                current = _text(pipe.get(head_key))
                if not head_allows(current, checkpoint):
                    raise head_conflict(thread, checkpoint, current)
            existing = _text(pipe.get(row_key))
            same = existing is not None and _stored_seal(existing) == encoded.seal
            writes: list[Callable[[Any], Any]] = []
            if not same:
                writes = self._writes(checkpoint, encoded)
            pipe.multi()
            for write in writes:
                write(pipe)
            if head_key is not None:
                pipe.set(head_key, checkpoint.id)
            pipe.incr(p + "saves")
            pipe.execute()
        return existing is not None and not same

    def _writes(self, checkpoint: Checkpoint, encoded: _codec.Encoded) -> list[Callable[[Any], Any]]:
        """
        The commands that store what the server lacks of *checkpoint* (read
        while its keys are watched; queued after ``MULTI``).
        """
        p = self._p
        snapshot = checkpoint.snapshot
        writes: list[Callable[[Any], Any]] = []
        for kind, items, links in ((MESSAGES, "m:", "ml:"), (JOURNAL, "e:", "el:")):
            count = len(kind.items(snapshot))
            chain_at = kind.chain(checkpoint)
            start = self._stored_length(links, chain_at, count)
            new = list(_codec.new_links(kind, checkpoint, start))
            missing = self._absent(items, {digest for _, _, _, digest, _ in new})
            stored: dict[str, str] = {}  # the values of items written here, for their segments
            for position, link, previous, digest, item in new:
                if digest in missing:
                    missing.discard(digest)
                    text = kind.text(item, position, checkpoint)
                    stored[digest] = checksum(digest, text) + text
                    writes.append(_setter(p + items + digest, stored[digest]))
                writes.append(_setter(p + links + link, f"{previous} {digest} {position}"))
                if position % _SEGMENT == _SEGMENT - 1:
                    segment = _segment(kind, checkpoint, chain_at, position, stored)
                    writes.append(_setter(p + links[0] + "s:" + link, segment))
        if not self._client.exists(p + "b:" + encoded.prefix_key):
            prefix_text = _codec.payload(snapshot.prefix, "$.snapshot.prefix", checkpoint, typed=True)
            writes.append(_setter(p + "b:" + encoded.prefix_key, prefix_text))
        writes.append(_setter(p + "b:" + encoded.notes_key, encoded.notes_text))
        seq = self._client.incr(p + "seq")
        ts = checkpoint.created_at.timestamp()
        row = json.dumps([*encoded.row, encoded.seal, ts, seq], ensure_ascii=False)
        writes.append(lambda pipe: pipe.set(p + "cp:" + checkpoint.id, row))
        writes.append(lambda pipe: pipe.zadd(p + "order", {checkpoint.id: ts}))
        return writes

    def _stored_length(self, kind: str, chain_at: Callable[[int], str], count: int) -> int:
        """
        How many leading items of a chain are stored already: a few rounds of probes, one round trip each.
        """

        def ask(positions: list[int]) -> list[int]:
            with self._client.pipeline(transaction=False) as pipe:
                for position in positions:
                    pipe.exists(self._p + kind + chain_at(position))
                found = pipe.execute()
            return [position for position, hit in zip(positions, found, strict=True) if hit]

        return _codec.stored_length(count, ask, last=1)  # each position asked is a command to send

    def _absent(self, kind: str, digests: set[str]) -> set[str]:
        if not digests:
            return set()
        ordered = sorted(digests)
        with self._client.pipeline(transaction=False) as pipe:
            for digest in ordered:
                pipe.exists(self._p + kind + digest)
            found = pipe.execute()
        return {digest for digest, hit in zip(ordered, found, strict=True) if not hit}

    # -- loading ------------------------------------------------------------------

    def _load(self, checkpoint_id: str) -> Checkpoint:
        result: Checkpoint = self._call(lambda: self._load_once(checkpoint_id))
        return result

    def _load_once(self, checkpoint_id: str) -> Checkpoint:
        reply = self._read(checkpoint_id)
        marker, generation, text = reply[0], reply[1], reply[2]
        self._check_format(dict(zip(marker[::2], marker[1::2], strict=True)))
        if text is None:
            raise self._missing(checkpoint_id)
        failures = (Damage, SerializationError, ValueError, TypeError, KeyError, IndexError, AttributeError)
        row = None
        try:
            row = self._row(text)
            return self._build(checkpoint_id, row, reply)
        except failures as exc:
            error = exc
        if row is not None and (b"s" in (reply[5] or b"") or b"s" in (reply[7] or b"")):
            try:  # a segment may be what is damaged: read the links and items themselves
                return self._build(checkpoint_id, row, reply, links_only=True)
            except failures as exc:
                error = exc
        if self._client.get(self._p + "gc") != _decoded(generation):
            raise _Retry from None  # a delete collected garbage while we read: read again
        raise self._failure(checkpoint_id, error) from None

    def _failure(self, checkpoint_id: str, exc: Exception) -> CheckpointError:
        """
        The error a load that failed with *exc* raises.
        """
        if isinstance(exc, UnicodeDecodeError):
            bad = exc.object[exc.start : exc.end + 8]
            what = f"a message, link or blob it uses is not UTF-8 text ({bad!r}, damaged)"
            return self._error(checkpoint_id, what, "$")
        return super()._failure(checkpoint_id, exc)

    def _read(self, checkpoint_id: str, *given: str) -> list[Any]:
        """
        The reply of the load script (``_LOAD``) for *checkpoint_id*, its
        values as bytes: what the row names, or what *given* names.
        """
        args = (self._p, checkpoint_id, *given)
        try:
            reply: list[Any] = _raw(self._client, "EVALSHA", self._load_script.sha, 0, *args)
        except self._redis.exceptions.NoScriptError:  # a server that has not seen it yet (or was flushed)
            reply = _raw(self._client, "EVAL", _LOAD, 0, *args)
        return reply

    @staticmethod
    def _row(text: object) -> list[Any]:
        """
        A stored checkpoint row: the fields of ``ROW_FIELDS``, then the creation timestamp and the save number.
        """
        if isinstance(text, bytes):
            decoded = _decoded(text)
            if decoded is None:
                damage("the checkpoint row is not UTF-8 text (key cp:, damaged)", "$")
            text = decoded
        try:
            row = json.loads(str(text))
        except ValueError:
            damage("the checkpoint row is not JSON (key cp:, damaged)", "$")
        if not isinstance(row, list) or len(row) != len(_codec.ROW_FIELDS) + 2:
            damage("the checkpoint row is not a row (key cp:, damaged)", "$")
        return row

    def _build(
        self, checkpoint_id: str, row: Sequence[Any], reply: list[Any], *, links_only: bool = False
    ) -> Checkpoint:
        """
        The checkpoint of a row read by the load script, every part checked;
        with *links_only*, read again without segments.
        """
        fields = row[: len(_codec.ROW_FIELDS)]
        info = _codec.read_info(fields, "key cp:")
        (_, _, _, _, digest, prefix_key, notes_key, messages_head, _, journal_head, journal_count, _) = fields
        message_count = _codec.check_count(info.message_count, messages_head, MESSAGES.root, MESSAGES.path, "key cp:")
        journal_length = _codec.check_count(journal_count, journal_head, JOURNAL.root, JOURNAL.path, "key cp:")
        named = [str(messages_head), str(message_count), str(journal_head), str(journal_length)]
        named += [str(prefix_key), str(notes_key)]
        if links_only or reply[3] is None or [_decoded(value) for value in reply[3]] != named:
            # the script could not read the row as this does: read what this reads
            again = self._read(checkpoint_id, *named, *(["links"] if links_only else []))
            if again[2] != reply[2]:
                raise _Retry  # the row changed in between: read it again
            reply = again
        message_links, journal_links = self._segments(reply)
        chain, digests, segment_items, singles, steps = _links(
            message_links, messages_head, message_count, MESSAGES, "ml:"
        )
        journal_chain, entry_digests, segment_entries, single_entries, journal_steps = _links(
            journal_links, journal_head, journal_length, JOURNAL, "el:"
        )
        values = _unpacked(reply[8])
        message_values = dict(zip(singles, values, strict=False))
        entry_values = dict(zip(single_entries, values[len(singles) :], strict=False))
        if len(values) != len(singles) + len(single_entries) + 2:
            message_values, entry_values = {}, {}  # links the script read otherwise: their checks name them
        prefix_text, notes_text = (_utf8(value) for value in values[-2:])
        with self._local:
            prefix = self._prefixes.get(prefix_key) if isinstance(prefix_key, str) else None
            texts = _found(message_values, segment_items, self._messages)
            entry_texts = _found(entry_values, segment_entries, self._entries)
        try:
            if prefix is None:
                if prefix_text is None:
                    damage(f"blob {prefix_key!r} is missing (key b:)", "$.snapshot.prefix")
                with self._local:
                    prefix = _codec.decode_prefix(prefix_text, prefix_key, self._prefixes, "key b:")
            if notes_text is None:
                damage(f"blob {notes_key!r} is missing (key b:)", "$.snapshot.scratchpad")
            notes = _codec.decode_notes(notes_text, notes_key, "key b:")
            if not steps:
                _codec.check_steps(MESSAGES, list(zip(chain, digests, strict=True)), "key ml:")
            if not journal_steps:
                _codec.check_steps(JOURNAL, list(zip(journal_chain, entry_digests, strict=True)), "key el:")
            with self._local:
                messages = _codec.decode_items(MESSAGES, digests, texts, self._messages, items="key m:")
                entries = _codec.decode_items(JOURNAL, entry_digests, entry_texts, self._entries, items="key e:")
            return _codec.assemble(info, digest, prefix, notes, (messages, chain), entries, "key cp:")
        except Exception:
            # an item that is not UTF-8 text is named as such, whatever else it broke
            for _, data, check in (*texts, *entry_texts):
                (check.encode("latin-1") + data).decode("utf-8")
            raise

    def _segments(self, reply: list[Any]) -> tuple[list[bytes], list[bytes]]:
        """
        The values of both chains as the load script read them, head first,
        each segment it named (by its header) read whole, its body inflated:
        one more round trip, when there are any. One deleted since, or whose
        body does not inflate, reads as empty, which the checks of the links name.
        """
        chains: list[list[bytes]] = [list(reply[4] or ()), list(reply[6] or ())]
        kinds = (bytes(reply[5] or b""), bytes(reply[7] or b""))
        named = [(side, at) for side in (0, 1) for at, kind in enumerate(kinds[side]) if kind == ord("s")]
        if named:
            keys = [self._p.encode() + chains[side][at] for side, at in named]
            for (side, at), value in zip(named, _raw(self._client, "MGET", *keys), strict=True):
                chains[side][at] = b"" if value is None else _inflated(value)
        return chains[0], chains[1]

    # -- listing, threads and deleting --------------------------------------------

    def _rows(self) -> tuple[dict[str, list[Any]], dict[str, CheckpointError]]:
        """
        Every checkpoint row that reads, by id, and the error of each that
        does not (an id or a row that is not UTF-8 text, a row that is not a
        JSON row), by id as text.
        """
        p = self._p
        with self._client.pipeline(transaction=False) as pipe:
            _raw(pipe, "HGETALL", p + "store")
            _raw(pipe, "ZRANGE", p + "order", 0, -1)
            marker, ids = pipe.execute()
        self._check_format(marker)
        rows: dict[str, list[Any]] = {}
        damaged: dict[str, CheckpointError] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            texts = _raw(self._client, "MGET", *[p.encode() + b"cp:" + bytes(i) for i in chunk])
            for member, text in zip(chunk, texts, strict=True):
                if text is None:
                    continue  # deleted between the two reads
                checkpoint_id = _decoded(member)
                if checkpoint_id is None:
                    what = "its id in the key order is not UTF-8 text (key order, damaged)"
                    damaged[shown(member)] = self._error(shown(member), what, "$.id")
                    continue
                try:
                    rows[checkpoint_id] = self._row(text)
                except Damage as exc:
                    damaged[checkpoint_id] = self._error(checkpoint_id, exc.what, exc.path)
        return rows, damaged

    def _checked_info(self, checkpoint_id: str, row: Sequence[Any]) -> CheckpointInfo:
        try:
            info = _codec.read_info(row[: len(_codec.ROW_FIELDS)], "key cp:")
        except Damage as exc:
            raise self._error(checkpoint_id, exc.what, exc.path) from None
        if info.id != checkpoint_id:
            raise self._error(checkpoint_id, f"the row is checkpoint {info.id!r}'s (key cp:, damaged)", "$.id")
        return info

    def _list(self) -> Listing[CheckpointInfo]:

        def body() -> Listing[CheckpointInfo]:
            rows, damaged = self._rows()
            ordered = sorted(rows.items(), key=lambda item: (_number(item[1][-2]), _number(item[1][-1])))
            infos: builtins.list[CheckpointInfo] = []
            for checkpoint_id, row in ordered:
                try:
                    infos.append(self._checked_info(checkpoint_id, row))
                except CheckpointError as exc:
                    damaged[checkpoint_id] = exc
            return listed(infos, damaged, "checkpoint row", self._place)

        result: Listing[CheckpointInfo] = self._call(body)
        return result

    def _lineage(self, checkpoint_id: str) -> Listing[CheckpointInfo]:
        def stored(current: str) -> tuple[str, Any] | None:
            text = _raw(self._client, "GET", self._p + "cp:" + current)
            return None if text is None else (current, text)

        def read(found: tuple[str, Any]) -> CheckpointInfo:
            current, text = found
            try:
                row = self._row(text)
            except Damage as exc:
                raise self._error(current, exc.what, exc.path) from None
            return self._checked_info(current, row)

        def body() -> Listing[CheckpointInfo]:
            self._check_format(_raw(self._client, "HGETALL", self._p + "store"))
            return self._lineage_of(stored, checkpoint_id, read)

        result: Listing[CheckpointInfo] = self._call(body)
        return result

    def _head(self, thread: str) -> str | None:
        def body() -> str | None:
            with self._client.pipeline(transaction=False) as pipe:
                _raw(pipe, "HGETALL", self._p + "store")
                _raw(pipe, "GET", self._p + "head:" + thread)
                marker, found = pipe.execute()
            self._check_format(marker)
            if found is None:
                return None
            head: str | None = _decoded(found)
            if head is None:
                msg = f"the head of thread {thread!r} in {self._where} is not UTF-8 text ({found[:40]!r}, damaged)"
                raise CheckpointError(msg, path="$.head")
            return head

        result: str | None = self._call(body)
        return result

    def _delete(self, checkpoint_id: str) -> None:
        self._call(lambda: self._collect_garbage(checkpoint_id))

    def _collect_garbage(self, checkpoint_id: str | None = None) -> None:
        """
        Delete *checkpoint_id* (when given), and every item, link and blob no
        checkpoint left uses: marked by walking every chain, swept in one
        transaction that fails (and runs again) if any save ran meanwhile.
        """
        p = self._p
        with self._client.pipeline() as pipe:
            pipe.watch(  # type: ignore[no-untyped-call]  # redis-py leaves watch untyped
                p + "saves", p + "gc"
            )
            self._check_format(_raw(pipe, "HGETALL", p + "store"))
            parent: str | None = None
            if checkpoint_id is not None:
                found = _raw(pipe, "GET", p + "cp:" + checkpoint_id)
                if found is None:
                    raise self._missing(checkpoint_id)
                text = _decoded(found, "")  # a row that is not UTF-8 names no parent
                with_parent = json.loads(text) if _is_json_list(text) else [None, None]
                parent = with_parent[1] if isinstance(with_parent[1], str) else None
            # a row that does not read (named by list()) names nothing, so keeps nothing alive
            rows = {i: row for i, row in self._rows()[0].items() if i != checkpoint_id}
            live: set[str] = set()
            for key in self._context_heads():
                flat = self._walk_script(args=[p + "h:", key, 1_000_000_000, 2])
                live.update(p + "h:" + flat[index] for index in range(0, len(flat) - 1, 2))
            for row in rows.values():
                live.add(p + "b:" + str(row[5]))
                live.add(p + "b:" + str(row[6]))
                for kind, item, head, count in (("ml:", "m:", row[7], row[8]), ("el:", "e:", row[9], row[10])):
                    if not isinstance(count, int) or count <= 0:
                        continue
                    flat = self._walk_script(args=[p + kind, str(head), count, 3])
                    for index in range(0, len(flat) - 1, 2):
                        live.add(p + kind + flat[index])
                        live.add(p + kind[0] + "s:" + flat[index])  # its segment, when it ends one
                        parts = str(flat[index + 1]).split(" ")
                        if len(parts) == 3:
                            live.add(p + item + parts[1])
            # keys read as bytes: one that is not UTF-8 text is no key of ours, and no checkpoint uses it
            dead = [
                key
                for kind in ("ml:", "ms:", "m:", "el:", "es:", "e:", "b:", "h:")
                for key in self._scan(p + kind + "*")
                if _decoded(key) not in live
            ]
            heads = [
                head_key
                for head_key in self._scan(p + "head:*")
                if checkpoint_id is not None and _raw(self._client, "GET", head_key) == checkpoint_id.encode()
            ]
            pipe.multi()
            if checkpoint_id is not None:
                pipe.delete(p + "cp:" + checkpoint_id)
                pipe.zrem(p + "order", checkpoint_id)
            for head_key in heads:
                if parent is not None and parent in rows:
                    pipe.set(head_key, parent)
                else:
                    pipe.delete(head_key)
            for start in range(0, len(dead), 500):
                pipe.delete(*dead[start : start + 500])
            pipe.incr(p + "gc")
            pipe.execute()

    # -- recorded contexts --------------------------------------------------------

    def _context_heads(self) -> builtins.list[str]:
        """
        The head of every saved context's history.
        """
        ids = sorted(bytes(i) for i in _raw(self._client, "SMEMBERS", self._p + "contexts"))
        heads = []
        for start in range(0, len(ids), 500):
            keys = [self._p.encode() + b"ctx:" + i for i in ids[start : start + 500]]
            for text in _raw(self._client, "MGET", *keys):
                row = _json_list(_decoded(text))
                if row is not None and len(row) > 1 and isinstance(row[1], str):
                    heads.append(row[1])
        return heads

    def _save_context(self, ctx: WorkingContext) -> str:
        context_id = ContextInfo.of(ctx).id
        p = self._p

        def body() -> str:
            with self._client.pipeline() as pipe:
                pipe.watch(  # type: ignore[no-untyped-call]  # redis-py leaves watch untyped
                    p + "gc", p + "ctx:" + context_id
                )
                self._check_format(_raw(pipe, "HGETALL", p + "store"))
                saved_row = _json_list(_text(pipe.get(p + "ctx:" + context_id)))
                saved = None if saved_row is None or len(saved_row) < 3 else (saved_row[1], saved_row[2])

                def held(chains: list[str]) -> list[str]:
                    with self._client.pipeline(transaction=False) as probe:
                        for chain in chains:
                            probe.exists(p + "h:" + chain)
                        found = probe.execute()
                    return [chain for chain, hit in zip(chains, found, strict=True) if hit]

                stored = lambda chain: histories.stored_entries(chain, held, last=1)  # noqa: E731
                rows, row = histories.plan_save(ctx, saved, stored, self._where)
                pipe.multi()
                for chain, previous, position, data in rows:
                    pipe.set(p + "h:" + chain, f"{previous} {position} {data}", nx=True)
                pipe.set(p + "ctx:" + context_id, json.dumps(list(row), ensure_ascii=False))
                pipe.sadd(p + "contexts", context_id)
                pipe.incr(p + "saves")
                pipe.execute()
            return context_id

        result: str = self._call(body)
        return result

    def _load_context(self, context_id: str) -> WorkingContext:
        def walk(head: object, count: int) -> builtins.list[tuple[Any, ...]]:
            flat = self._walk_script(args=[self._p + "h:", str(head), count, 2])
            rows: builtins.list[tuple[Any, ...]] = []
            for index in range(0, len(flat) - 1, 2):
                parts = str(flat[index + 1]).split(" ", 2)
                if len(parts) == 3 and parts[1].isdigit():
                    rows.append((flat[index], parts[0], int(parts[1]), parts[2]))
                else:
                    rows.append((flat[index], parts[0], -1, None))
            rows.reverse()
            return rows

        def body() -> WorkingContext:
            with self._client.pipeline(transaction=False) as pipe:
                _raw(pipe, "HGETALL", self._p + "store")
                pipe.get(self._p + "gc")
                _raw(pipe, "GET", self._p + "ctx:" + context_id)
                marker, generation, text = pipe.execute()
            self._check_format(marker)
            if text is None:
                raise histories.missing(context_id, self._where)
            row = _json_list(_decoded(text))
            try:
                return histories.read_context(row if row is not None else [], walk, context_id, self._where, "key")
            except CheckpointError:
                if self._client.get(self._p + "gc") != generation:
                    raise _Retry from None  # a delete collected garbage while we read: read again
                raise

        result: WorkingContext = self._call(body)
        return result

    def _list_contexts(self) -> Listing[ContextInfo]:

        def body() -> Listing[ContextInfo]:
            self._check_format(_raw(self._client, "HGETALL", self._p + "store"))
            ids = sorted(bytes(i) for i in _raw(self._client, "SMEMBERS", self._p + "contexts"))
            rows = []
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                texts = _raw(self._client, "MGET", *[self._p.encode() + b"ctx:" + i for i in chunk])
                for member, text in zip(chunk, texts, strict=True):
                    if text is not None:
                        # an id or a row that is not UTF-8 text is a row that does not read
                        context_id = _decoded(member)
                        row = _json_list(_decoded(text)) if context_id is not None else None
                        rows.append(row if row is not None else [shown(member)])
            return histories.read_infos(rows, self._where, "key")

        result: Listing[ContextInfo] = self._call(body)
        return result

    def _delete_context(self, context_id: str) -> None:
        p = self._p

        def body() -> None:
            with self._client.pipeline() as pipe:
                pipe.watch(  # type: ignore[no-untyped-call]  # redis-py leaves watch untyped
                    p + "ctx:" + context_id
                )
                self._check_format(_raw(pipe, "HGETALL", p + "store"))
                if not pipe.exists(p + "ctx:" + context_id):
                    raise histories.missing(context_id, self._where)
                pipe.multi()
                pipe.delete(p + "ctx:" + context_id)
                pipe.srem(p + "contexts", context_id)
                pipe.execute()

        self._call(body)
        self._tidy()

    def _tidy(self) -> None:
        """
        Collect the garbage a replaced checkpoint or a deleted context left; when
        other writers keep it from finishing, the next delete collects it instead.
        """
        with contextlib.suppress(CheckpointError):
            self._call(self._collect_garbage)

    # -- the rest -----------------------------------------------------------------

    def drop(self) -> None:
        """
        Remove every key of the store's namespace, for good (tests, clean-ups).
        """

        def body() -> None:
            keys = list(self._scan(self._p + "*"))
            for start in range(0, len(keys), 500):
                self._client.delete(*keys[start : start + 500])

        self._call(body)

    def close(self) -> None:
        """
        Close the store's connections.
        """
        self._client.close()

    def __len__(self) -> int:
        result: int = self._call(lambda: self._client.zcard(self._p + "order"))
        return result

    def _contains(self, checkpoint_id: str) -> bool:
        result: bool = self._call(lambda: bool(self._client.exists(self._p + "cp:" + checkpoint_id)))
        return result

    def __repr__(self) -> str:
        return f"<RedisStore {self._where}>"


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _raw(target: Any, *command: Any) -> Any:
    """
    Run (or, on a pipeline, queue) *command* with its reply left as bytes, so
    that a key or value that is not UTF-8 text reaches the store as data to
    refuse, never as a UnicodeDecodeError from the client.
    """
    return target.execute_command(*command, NEVER_DECODE=True)


def _decoded(value: object, default: Any = None) -> Any:
    """
    *value* read as bytes, as text; *default* when it is None or not UTF-8.
    """
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return default
    return default if value is None else value


def _json_list(text: object) -> builtins.list[Any] | None:
    if not isinstance(text, str):
        return None
    try:
        row = json.loads(text)
    except ValueError:
        return None
    return row if isinstance(row, list) else None


def _segment(
    kind: _codec.Kind, checkpoint: Checkpoint, chain_at: Callable[[int], str], position: int, stored: dict[str, str]
) -> bytes:
    """
    The segment of the :data:`_SEGMENT` links ending at *position*: a header
    line ``"<previous chain> <lowest position> <position>"``, then
    :data:`~workingctx.persistence._codec.PACKED` and the zlib stream of its
    body: the item digests of its links, one a line, head first, then for
    each ``\\0``, its item's checksum when its text has a layout (a text
    without one is checked by its own sha256: see
    :func:`~workingctx.persistence._codec.decode_items`), ``\\0`` and its
    item's text (JSON text never holds a ``\\0``). Its chain digests are
    those of the digests, from the header's on. *stored* holds the values of
    items already made, as their keys hold them (the checksum, then the text).
    """
    items = kind.items(checkpoint.snapshot)
    low = position - _SEGMENT + 1
    digests = []
    values = []
    for at in range(position, low - 1, -1):
        digest = kind.digest(items[at])
        digests.append(digest)
        value = stored.get(digest)
        if value is None:
            text = kind.text(items[at], at, checkpoint)
            value = stored[digest] = checksum(digest, text) + text
        values.append(value)
    body = "\n".join(digests) + "".join(
        f"\0{value[:64] if _items.SEPARATOR in value[64:] else ''}\0{value[64:]}" for value in values
    )
    header = f"{chain_at(low)} {low} {position}\n"
    return header.encode() + _codec.PACKED + zlib.compress(body.encode("utf-8"), _LEVEL)


def _inflated(segment: bytes) -> bytes:
    """
    A segment as read, with its body inflated (see :func:`_segment`). A
    segment written before bodies were compressed is its own inflated form
    (its lines are whole links, ``"<previous chain> <item digest>
    <position>"``, each item with its checksum); one whose stream does not
    inflate (damaged) reads as empty, which the checks of the links name.
    """
    end = segment.find(b"\n") + 1
    if segment[end : end + 1] != _codec.PACKED:
        return segment
    try:
        return segment[:end] + zlib.decompress(segment[end + 1 :])
    except zlib.error:
        return b""


def _segment_lines(head: str) -> list[str] | None:
    """
    The links of a segment, head first, from the text before its first
    ``\\0``: its lines, or, for a segment holding only its item digests,
    the links those make from its header's chain digest on; None when it is
    neither (damaged).
    """
    header, *lines = head.split("\n")
    fields = header.split(" ")
    if len(lines) != _SEGMENT or len(fields) != 3 or not fields[1].isdigit():
        return None
    if all(" " in line for line in lines):
        return lines
    previous, low = fields[0], int(fields[1])
    made = []
    for position, digest in enumerate(reversed(lines), low):
        made.append(f"{previous} {digest} {position}")
        previous = _codec.step(previous, digest)
    return made[::-1]


def _setter(key: str, value: str | bytes) -> Callable[[Any], Any]:
    return lambda pipe: pipe.set(key, value, nx=True)


def _stored_seal(text: str) -> object:
    try:
        row = json.loads(text)
    except ValueError:
        return None
    return row[11] if isinstance(row, list) and len(row) > 11 else None


def _is_json_list(text: str) -> bool:
    try:
        row = json.loads(text)
    except ValueError:
        return False
    return isinstance(row, list) and len(row) > 1


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _unpacked(data: bytes) -> list[bytes | None]:
    """
    The strings of the load script's MessagePack arrays, one after another (None for false or nil).
    """
    values: list[bytes | None] = []
    append = values.append
    at, end = 0, len(data)
    while at < end:
        tag = data[at]
        if tag == 0xD9:  # str 8
            size = data[at + 1]
            at += 2
        elif tag == 0xDA:  # str 16
            size = data[at + 1] << 8 | data[at + 2]
            at += 3
        elif 0xA0 <= tag <= 0xBF:  # fixstr
            size = tag - 0xA0
            at += 1
        elif tag == 0xDB:  # str 32
            size = int.from_bytes(data[at + 1 : at + 5], "big")
            at += 5
        elif tag in (0xC0, 0xC2):  # nil, false: a missing key
            append(None)
            at += 1
            continue
        elif 0x90 <= tag <= 0x9F:  # fixarray: its strings follow
            at += 1
            continue
        elif tag in (0xDC, 0xDD):  # array 16, array 32
            at += 3 if tag == 0xDC else 5
            continue
        else:
            msg = f"the load script replied with MessagePack tag {tag:#x} at byte {at}"
            raise ValueError(msg)
        append(data[at : at + size])
        at += size
    return values


def _links(
    values: Sequence[bytes] | None, head: object, count: int, kind: _codec.Kind, space: str
) -> tuple[list[str], list[str], dict[str, tuple[bytes, bytes]], list[str], bool]:
    """
    A chain as the load script read it, head first: links (``"<previous
    chain> <item digest> <position>"``) and segments, inflated (see
    :func:`_segment` and :func:`_inflated`).

    Returns the chain digests and the item digests, root first; the items
    the segments hold, by digest, as their text and checksum, unchecked; the digests the links read one
    by one name, each once, in the order the script read their items; and
    whether every chain digest was checked (:func:`~workingctx.persistence._codec.check_steps`).

    Each chain digest is computed from the previous one and the item digest
    its link names, from the root, and the last must be *head* (which the
    sealed row names): the chain is then the one that head was made from,
    whatever else the links say. When it is not, the links are read again
    one field at a time and checked for order and length
    (:func:`~workingctx.persistence._codec.check_links`), which names what is
    wrong, and their steps are left for the caller to check.
    """
    digests: list[str] = []
    held: dict[str, tuple[bytes, bytes]] = {}
    named: dict[str, None] = {}
    for value in values or ():
        if b"\0" in value:
            parts = value.split(b"\0")
            fields = parts[0].decode("utf-8").split()
            # after the header, each line's digest: a line of its own, or the second field of a whole link
            found = fields[3:] if len(fields) == 3 + _SEGMENT else fields[4::3]
            if len(found) != _SEGMENT or len(found) * 2 != len(parts) - 1:
                break
            digests += found
            held.update(zip(found, zip(parts[2::2], parts[1::2], strict=True), strict=True))
        else:
            fields = value.decode("utf-8").split(" ")
            if len(fields) != 3:
                break
            digests.append(fields[1])
            named.setdefault(fields[1])
    else:
        if len(digests) == count:
            digests.reverse()
            chain: list[str] = []
            add = chain.append
            new_hash = hashlib.sha256
            previous = kind.root
            for digest in digests:
                previous = new_hash(f"{previous}:{digest}".encode()).hexdigest()  # _codec.step(), inline
                add(previous)
            if previous == head:
                return chain, digests, held, list(named), True
    return _read_links(values or (), head, count, kind, space)


def _read_links(
    values: Sequence[bytes], head: object, count: int, kind: _codec.Kind, space: str
) -> tuple[list[str], list[str], dict[str, tuple[bytes, bytes]], list[str], bool]:
    """
    :func:`_links`, one field at a time: the links checked for order and length, their steps left unchecked.
    """
    rows: list[tuple[Any, ...]] = []
    held: dict[str, tuple[bytes, bytes]] = {}
    named: dict[str, None] = {}
    key = str(head)
    for value in values:
        if b"\0" in value:
            parts = value.split(b"\0")
            lines = _segment_lines(parts[0].decode("utf-8")) or [""]
            items: Sequence[tuple[bytes, bytes]] = ()
            if len(parts) == 2 * len(lines) + 1:
                items = list(zip(parts[2::2], parts[1::2], strict=True))
        else:
            lines, items = [value.decode("utf-8")], ()
        for index, line in enumerate(lines):
            fields = line.split(" ")
            position = int(fields[2]) if len(fields) == 3 and fields[2].isdigit() else -1
            item = fields[1] if len(fields) == 3 else None
            rows.append((key, fields[0], item, position))
            key = fields[0]
            if item is not None:
                if items:
                    held.setdefault(item, items[index])
                else:
                    named.setdefault(item, None)
    rows.reverse()
    pairs = _codec.check_links(rows, count, kind.root, kind.path, f"key {space}")
    return [chain for chain, _ in pairs], [digest for _, digest in pairs], held, list(named), False


def _found(
    values: dict[str, bytes | None], held: dict[str, tuple[bytes, bytes]], cache: dict[str, Any]
) -> list[_codec.Row]:
    """
    The stored items that *cache* lacks, as ``(key, text, checksum)``,
    unchecked: those the segments hold (*held*, a text and its checksum by
    digest), then those of *values* (by digest, a checksum then the text) that
    no segment holds; a missing one left out.
    """
    found: list[_codec.Row] = [
        (digest, text, check.decode("latin-1")) for digest, (text, check) in held.items() if digest not in cache
    ]
    for digest, value in values.items():
        if value is None or digest in cache or digest in held:
            continue
        if len(value) >= 64:
            found.append((digest, value[64:], value[:64].decode("latin-1")))
        else:
            found.append((digest, value, ""))
    return found


def _utf8(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8")
