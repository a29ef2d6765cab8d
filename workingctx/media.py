"""
Media stores: image, audio and document bytes kept out of the transcript.

A media store keeps bytes by their content (their sha256) and hands back a
:class:`~workingctx.messages.MediaRef` of kind ``"store"``: a URL
``workingctx://media/<sha256>``, the sha256, the size, the MIME type and, for
PNG, JPEG, GIF and WebP images, the width and height. Messages, snapshots,
digests and checkpoints carry only that reference; :func:`resolve_media` puts
the bytes back (inline base64, or a provider file id from your upload hook)
when a request is written.

Three stores share the :class:`MediaStore` protocol: :class:`FileMediaStore`
(a directory, safe for several threads and processes), :class:`InMemoryMediaStore`
(tests and short runs) and :class:`SQLiteMediaStore` (a table in a SQLite
file, such as the checkpoint database).

>>> store = InMemoryMediaStore()
>>> ref = store.put(b"%PDF-1.7 ...", "application/pdf", filename="report.pdf")
>>> ref.kind, ref.size_bytes, ref.url == "workingctx://media/" + ref.sha256
('store', 12, True)
>>> store.get(ref)
b'%PDF-1.7 ...'
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import hashlib
import itertools
import os
import re
import struct
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import attrs

from workingctx import _checks
from workingctx.exceptions import ArgumentTypeError, ArgumentValueError, MediaError
from workingctx.frozen import FrozenDict, FrozenList
from workingctx.messages import STORE_URL_PREFIX, MediaRef, Message

__all__ = [
    "STORE_URL_PREFIX",
    "FileMediaStore",
    "InMemoryMediaStore",
    "MediaStore",
    "Uploader",
    "image_size",
    "pdf_pages",
    "resolve_media",
    "store_ref",
]


# -- references ---------------------------------------------------------------------


def image_size(data: bytes) -> tuple[int, int] | None:
    """
    The ``(width, height)`` of a PNG, JPEG, GIF or WebP image, read from its
    header with the standard library; None for any other or a truncated file.

    The size is the stored one: a JPEG's EXIF orientation is not applied.

    >>> image_size(bytes.fromhex("47494638396102000300"))  # a GIF header
    (2, 3)
    >>> image_size(b"not an image") is None
    True
    """
    try:
        if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR":
            size = struct.unpack(">II", data[16:24])
        elif data[:6] in {b"GIF87a", b"GIF89a"}:
            size = struct.unpack("<HH", data[6:10])
        elif data.startswith(b"\xff\xd8"):
            found = _jpeg_size(data)
            if found is None:
                return None
            size = found
        elif data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            found = _webp_size(data)
            if found is None:
                return None
            size = found
        else:
            return None
    except struct.error:  # truncated header
        return None
    width, height = int(size[0]), int(size[1])
    return (width, height) if width > 0 and height > 0 else None


# Start-of-frame markers (they carry the size): C0-CF except DHT (C4), JPG (C8) and DAC (CC).
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# Markers with no length field: TEM, RST0-7, SOI, EOI.
_JPEG_STANDALONE = frozenset({0x01, *range(0xD0, 0xDA)})


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    position = 2
    end = len(data)
    while position < end:
        if data[position] != 0xFF:  # a marker starts with 0xFF
            return None
        while position < end and data[position] == 0xFF:  # fill bytes
            position += 1
        if position >= end:
            return None
        marker = data[position]
        position += 1
        if marker in _JPEG_STANDALONE:
            continue
        if marker == 0xDA:  # start of scan: the frame header should have come first
            return None
        (length,) = struct.unpack(">H", data[position : position + 2])
        if marker in _JPEG_SOF:
            height, width = struct.unpack(">HH", data[position + 3 : position + 7])
            return width, height
        position += length
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and data[20:21] == b"\x2f":  # the lossless signature byte
        b0, b1, b2, b3 = struct.unpack("4B", data[21:25])
        return 1 + (b0 | (b1 & 0x3F) << 8), 1 + (b1 >> 6 | b2 << 2 | (b3 & 0x0F) << 10)
    if chunk == b"VP8X":
        raw = data[24:30]
        if len(raw) < 6:  # two 24-bit fields
            return None
        return 1 + int.from_bytes(raw[:3], "little"), 1 + int.from_bytes(raw[3:], "little")
    return None


_NAME_END = rb"(?![^\s/<>\[\]()%{}])"
_PAGES = re.compile(rb"/Type\s*/Pages" + _NAME_END)
_PAGE = re.compile(rb"/Type\s*/Page" + _NAME_END)
_KIDS = re.compile(rb"/Kids" + _NAME_END)
_PARENT = re.compile(rb"/Parent" + _NAME_END)
_COUNT = re.compile(rb"/Count\s+(\d+)(?!\d)(?!\s+\d+\s+R)")
_OBJECT_STREAM = re.compile(rb"/Type\s*/ObjStm" + _NAME_END)
_BRACKETS = re.compile(rb"<<|>>")
_ENDSTREAM = re.compile(rb"endstream")
_FLATE = re.compile(rb"/Filter\s*(\[\s*)?/FlateDecode\s*\]?\s*(/|>>)")
_INFLATED_AT_MOST = 16 * 1024 * 1024
"""The most bytes the object streams of one PDF are inflated to, all together, when its pages are counted."""
_NODES_AT_MOST = 1024
"""The most ``/Pages`` nodes (and object streams) of one PDF read (a page tree of 600 pages has about 100)."""
_BRACKETS_AT_MOST = 300_000
"""The most dictionary brackets of one PDF followed (a file of 10,000 objects holds some 50,000)."""


def pdf_pages(data: bytes) -> int | None:
    """
    The pages of a PDF document, read from its page tree with the standard
    library: the ``/Count`` of its root ``/Pages`` node (the one written last,
    as an update appended to the file replaces the tree), or of its largest
    node, or else the number of its ``/Page`` nodes; the nodes kept in
    compressed object streams included. None for anything that is not a PDF,
    or one whose page tree cannot be read (an encrypted one).

    The count is read, not rendered, in bounded time: at most 1,024 tree
    nodes and object streams are read, 300,000 dictionary brackets
    followed, and 16 MiB inflated.
    """
    if not isinstance(data, bytes) or b"%PDF-" not in data[:1024]:  # readers take a header after other bytes
        return None
    parts = [(0, data), *_object_streams(data)]
    roots: list[tuple[int, int]] = []  # (where in the file, count) of each node with no parent
    counts: list[int] = []
    for at, part in parts:
        for position, node in _pages_nodes(part):
            count = _COUNT.search(node)
            if count is None or len(count.group(1)) > 9:
                continue
            counts.append(int(count.group(1)))
            if _PARENT.search(node) is None:
                roots.append((at or position, counts[-1]))
    found = max(roots)[1] if roots else max(counts, default=0)
    if found:
        return found
    leaves = sum(len(_PAGE.findall(part)) for _, part in parts)
    return leaves or None


def _pages_nodes(data: bytes) -> list[tuple[int, bytes]]:
    """
    Each ``/Pages`` node of *data* (a dictionary holding ``/Type /Pages`` and
    ``/Kids`` among its own entries), where it starts and its own entries,
    the dictionaries nested in it left out; found in one pass over the
    dictionaries' brackets.
    """
    hits = [found.start() for found in itertools.islice(_PAGES.finditer(data), _NODES_AT_MOST)]
    if not hits:
        return []
    spans: dict[int, tuple[int, list[tuple[int, int]]]] = {}  # start -> end, nested dictionaries
    stack: list[tuple[int, bool, list[tuple[int, int]]]] = []  # start, holds a hit, nested dictionaries
    upcoming = iter(hits)
    hit = next(upcoming, None)
    for bracket in itertools.islice(_BRACKETS.finditer(data), _BRACKETS_AT_MOST):
        position = bracket.start()
        while hit is not None and hit < position:
            if stack and not stack[-1][1]:
                stack[-1] = (stack[-1][0], True, stack[-1][2])
            hit = next(upcoming, None)
        if bracket.group() == b"<<":
            stack.append((position, False, []))
        elif stack:
            begin, holds, nested = stack.pop()
            if holds:
                spans[begin] = (position + 2, nested)
            if stack:
                stack[-1][2].append((begin, position + 2))
        if hit is None and not stack:
            break
    nodes: list[tuple[int, bytes]] = []
    for begin, (end, nested) in sorted(spans.items()):
        pieces, cursor = [], begin + 2
        for low, high in nested:
            pieces.append(data[cursor:low])
            cursor = high
        pieces.append(data[cursor : end - 2])
        own = b" ".join(pieces)
        if _PAGES.search(own) and _KIDS.search(own):
            nodes.append((begin, own))
    return nodes


_STREAM_AFTER = re.compile(rb">>\s*stream\r?\n")


def _object_streams(data: bytes) -> list[tuple[int, bytes]]:
    """
    Where each object stream of *data* is (where a PDF 1.5 or later keeps
    most of its dictionaries) and its contents, inflated as far as they
    inflate: at most :data:`_NODES_AT_MOST` streams, and
    :data:`_INFLATED_AT_MOST` bytes read and as many inflated.
    """
    out: list[tuple[int, bytes]] = []
    view = memoryview(data)
    read = room = _INFLATED_AT_MOST
    ends: list[int] | None = None  # where each stream ends, found once
    for found in itertools.islice(_OBJECT_STREAM.finditer(data), _NODES_AT_MOST):
        begins = _STREAM_AFTER.search(data, found.end(), found.end() + 4096)
        if begins is None:
            continue  # not a stream
        if ends is None:
            ends = [end.start() for end in _ENDSTREAM.finditer(data)]
        after = bisect.bisect_left(ends, begins.end())
        if after == len(ends):
            continue  # a stream cut short
        head, body = data[max(found.start() - 4096, 0) : begins.start()], view[begins.end() : ends[after]]
        head = head[head.rfind(b"obj") + 1 :]  # from the object's start, as far as it shows
        read -= len(body)
        if read < 0:
            break
        if b"/Filter" not in head:
            out.append((found.start(), bytes(body)))
            continue
        if not _FLATE.search(head + b">>"):
            continue  # a filter this reader does not undo
        try:
            inflated = zlib.decompressobj().decompress(body, room)
        except zlib.error:
            continue
        out.append((found.start(), inflated))
        room -= len(inflated)
        if room <= 0:
            break
    return out


def store_ref(data: bytes, mime_type: str, *, filename: str | None = None) -> MediaRef:
    """
    The :class:`~workingctx.messages.MediaRef` of kind ``"store"`` that names *data*:
    what every store's ``put`` returns, for stores of your own to return too.

    Args:
        data: The bytes.
        mime_type: Their MIME type, such as ``"image/png"``.
        filename: The original file name, kept on the reference.

    Returns:
        The reference, with the sha256, the size and, for images whose header
        :func:`image_size` reads, the width and height.

    Raises:
        TypeError: *data* is not bytes, or *mime_type* or *filename* is not a str.
        ValueError: *mime_type* is not of the form ``type/subtype``.

    >>> store_ref(b"hello", "text/plain").sha256[:12]
    '2cf24dba5fb0'
    """
    _checks.check_instance(data, "data", (bytes, bytearray, memoryview), "bytes", label="media data")
    _checks.check_instance(mime_type, "mime_type", str, "a str such as 'image/png'")
    kind, slash, subtype = mime_type.partition("/")
    # ASCII letters, digits and punctuation only: no space, control character or other script
    if (
        not kind
        or not slash
        or not subtype
        or not mime_type.isascii()
        or not mime_type.isprintable()
        or " " in mime_type
    ):
        raise _checks.wrong_value(mime_type, "mime_type", "must look like 'type/subtype' (such as 'image/png')")
    if filename is not None:
        _checks.check_instance(filename, "filename", str, "a str or None")
    data = bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    size = image_size(data) if kind.lower() == "image" else None  # MIME types ignore case
    return MediaRef(
        kind="store",
        url=STORE_URL_PREFIX + digest,
        mime_type=mime_type,
        size_bytes=len(data),
        sha256=digest,
        filename=filename,
        width=None if size is None else size[0],
        height=None if size is None else size[1],
    )


def stored_media(data: bytes, mime_type: str, filename: str | None) -> tuple[MediaRef, bytes]:
    """
    The reference of *data* and a copy of the bytes it names, taken before
    hashing: a bytearray changed meanwhile (by another thread) cannot make a
    store keep bytes other than those its reference names.
    """
    _checks.check_instance(data, "data", (bytes, bytearray, memoryview), "bytes", label="media data")
    copy = data if type(data) is bytes else bytes(data)
    return store_ref(copy, mime_type, filename=filename), copy


def media_key(ref: object, store: object) -> str:
    """
    The sha256 of *ref*, checked to be a reference a store can serve.
    """
    ref = _checks.check_instance(ref, "ref", MediaRef, "a MediaRef", label="a media store", verb="takes")
    if ref.kind != "store":
        msg = (
            f"{type(store).__name__} holds only references of kind 'store', got kind={ref.kind!r} ({ref!r}); "
            "a url, file_id or data reference carries its media itself"
        )
        raise MediaError(msg, ref=ref, reason="not stored")
    return ref.sha256  # type: ignore[return-value]  # a store ref always has a sha256 (MediaRef checks it)


def missing_media(ref: MediaRef, where: str) -> MediaError:
    msg = (
        f"no bytes for {ref.url} ({ref.filename or ref.mime_type}) in {where}; "
        "put() them again, or point at the store they were saved in"
    )
    return MediaError(msg, ref=ref, reason="missing")


def checked_media(ref: MediaRef, data: bytes, where: str) -> bytes:
    """
    *data* if it is what *ref* names, else a MediaError saying how it differs.
    """
    found = hashlib.sha256(data).hexdigest()
    if found != ref.sha256 or (ref.size_bytes is not None and ref.size_bytes != len(data)):
        msg = (
            f"the bytes for {ref.url} in {where} are damaged: {len(data)} bytes hashing to {found}, "
            f"expected {ref.size_bytes} bytes hashing to {ref.sha256}; put() the original bytes again to repair it"
        )
        raise MediaError(msg, ref=ref, reason="damaged")
    return data


# -- the protocol -------------------------------------------------------------------


@runtime_checkable
class MediaStore(Protocol):
    """
    Where media bytes are kept, by their sha256.

    ``put`` is idempotent: the same bytes give the same reference and are
    stored once. ``get`` checks the bytes against the reference's sha256.
    Stores of your own can build their references with :func:`store_ref`.
    """

    def put(self, data: bytes, mime_type: str, *, filename: str | None = None) -> MediaRef:
        """
        Keep *data* and return the reference of kind ``"store"`` that names it.
        """
        ...

    def get(self, ref: MediaRef) -> bytes:
        """
        The bytes *ref* names, checked against its sha256.

        Raises :class:`~workingctx.exceptions.MediaError` when they are
        missing or damaged.
        """
        ...

    def has(self, ref: MediaRef) -> bool:
        """
        Whether the store holds bytes for *ref* (without reading them all).
        """
        ...

    def delete(self, ref: MediaRef) -> None:
        """
        Forget the bytes *ref* names; nothing happens when they are not there.
        """
        ...


# -- in memory ----------------------------------------------------------------------


class InMemoryMediaStore:
    """
    A media store in this process's memory, for tests and short runs.
    Safe to share between threads.

    >>> store = InMemoryMediaStore()
    >>> ref = store.put(b"abc", "application/octet-stream")
    >>> store.put(b"abc", "application/octet-stream") == ref, len(store)
    (True, 1)
    """

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def put(self, data: bytes, mime_type: str, *, filename: str | None = None) -> MediaRef:
        """
        Keep *data* and return its reference.

        Raises:
            TypeError: *data* is not bytes, or *mime_type* is not a str.
            ValueError: *mime_type* is not of the form ``type/subtype``.
        """
        ref, data = stored_media(data, mime_type, filename)
        key = media_key(ref, self)
        with self._lock:
            self._blobs[key] = data
        return ref

    def get(self, ref: MediaRef) -> bytes:
        """
        The bytes *ref* names.

        Raises:
            TypeError: *ref* is not a :class:`~workingctx.messages.MediaRef`.
            MediaError: They are not here, or *ref* is not of kind ``"store"``.
        """
        key = media_key(ref, self)
        with self._lock:
            data = self._blobs.get(key)
        if data is None:
            raise missing_media(ref, "this InMemoryMediaStore")
        return checked_media(ref, data, "this InMemoryMediaStore")

    def has(self, ref: MediaRef) -> bool:
        """
        Whether bytes for *ref* are here.
        """
        key = media_key(ref, self)
        with self._lock:
            return key in self._blobs

    def delete(self, ref: MediaRef) -> None:
        """
        Forget the bytes *ref* names (nothing happens when they are not here).
        """
        key = media_key(ref, self)
        with self._lock:
            self._blobs.pop(key, None)

    def __len__(self) -> int:
        return len(self._blobs)

    def __repr__(self) -> str:
        return f"<InMemoryMediaStore items={len(self._blobs)}>"


# -- a directory --------------------------------------------------------------------


class FileMediaStore:
    """
    A media store in a directory: one file per distinct content, named by its
    sha256 under a two-hex-digit shard (``ab/abcdef...``).

    A ``put`` writes a temporary file in the shard, flushes it to disk and
    renames it into place, so a reader never sees half a file and several
    threads or processes may store the same bytes at once. Every ``get``
    hashes what it read and raises :class:`~workingctx.exceptions.MediaError`
    when the file is missing or its bytes no longer match; putting the same
    bytes again repairs a damaged file.

    Args:
        directory: The store's directory, created when missing.

    Raises:
        NotADirectoryError: *directory* exists and is not a directory.

    >>> import tempfile
    >>> store = FileMediaStore(tempfile.mkdtemp())
    >>> ref = store.put(b"hello", "text/plain")
    >>> store.path_of(ref).relative_to(store.directory).parts[0]
    '2c'
    >>> store.get(ref)
    b'hello'
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        if self.directory.exists() and not self.directory.is_dir():
            msg = f"a FileMediaStore needs a directory, but {str(self.directory)!r} is a file; pass a directory path"
            raise NotADirectoryError(msg)
        self.directory.mkdir(parents=True, exist_ok=True)

    def path_of(self, ref: MediaRef) -> Path:
        """
        The file the bytes of *ref* are (or would be) kept in.

        Raises:
            TypeError: *ref* is not a :class:`~workingctx.messages.MediaRef`.
            MediaError: *ref* is not of kind ``"store"``.
        """
        sha = media_key(ref, self)
        return self.directory / sha[:2] / sha

    def put(self, data: bytes, mime_type: str, *, filename: str | None = None) -> MediaRef:
        """
        Keep *data* and return its reference. Bytes already stored intact are
        not written again.

        Raises:
            TypeError: *data* is not bytes, or *mime_type* is not a str.
            ValueError: *mime_type* is not of the form ``type/subtype``.
            OSError: The directory cannot be written.
        """
        ref, data = stored_media(data, mime_type, filename)
        target = self.path_of(ref)
        if self._intact(target, ref):
            return ref
        target.parent.mkdir(exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".put-", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            Path(temporary).replace(target)
        except BaseException:
            with contextlib.suppress(OSError):
                Path(temporary).unlink()
            raise
        _sync_directory(target.parent)
        return ref

    @staticmethod
    def _intact(target: Path, ref: MediaRef) -> bool:
        try:
            if target.stat().st_size != ref.size_bytes:
                return False
            return hashlib.sha256(target.read_bytes()).hexdigest() == ref.sha256
        except FileNotFoundError:
            return False

    def get(self, ref: MediaRef) -> bytes:
        """
        The bytes *ref* names, checked against its sha256 and size.

        Raises:
            TypeError: *ref* is not a :class:`~workingctx.messages.MediaRef`.
            MediaError: The file is missing, damaged or unreadable, or *ref* is not of kind ``"store"``.
        """
        target = self.path_of(ref)
        where = f"the FileMediaStore {str(self.directory)!r} (file {str(target)!r})"
        try:
            data = target.read_bytes()
        except FileNotFoundError:
            raise missing_media(ref, where) from None
        except OSError as exc:
            msg = f"cannot read the bytes for {ref.url} in {where}: {exc.strerror or exc}"
            raise MediaError(msg, ref=ref, reason="unavailable") from exc
        return checked_media(ref, data, where)

    def has(self, ref: MediaRef) -> bool:
        """
        Whether a file of the right size is kept for *ref* (its bytes are checked by :meth:`get`).
        """
        try:
            size = self.path_of(ref).stat().st_size
        except FileNotFoundError:
            return False
        return ref.size_bytes is None or size == ref.size_bytes

    def delete(self, ref: MediaRef) -> None:
        """
        Remove the file kept for *ref* (nothing happens when there is none).
        """
        with contextlib.suppress(FileNotFoundError):
            self.path_of(ref).unlink()

    def sweep(self, *, older_than: float = 3600.0) -> int:
        """
        Remove the temporary files of puts that never finished (a process killed
        while writing), last changed more than *older_than* seconds ago, and
        return how many were removed. Stored files are never touched, and a put
        still writing is left alone as long as it is younger than *older_than*.

        Raises:
            TypeError: *older_than* is not a number.
            ValueError: *older_than* is negative or not finite.
        """
        limit = _checks.check_number(older_than, "older_than", minimum=0, owner="sweep()")
        cutoff = time.time() - limit
        removed = 0
        for temporary in self.directory.glob("??/.put-*.tmp"):
            with contextlib.suppress(FileNotFoundError):
                if temporary.stat().st_mtime < cutoff:
                    temporary.unlink()
                    removed += 1
        return removed

    def __repr__(self) -> str:
        return f"<FileMediaStore directory={str(self.directory)!r}>"


def _sync_directory(directory: Path) -> None:
    """
    Make a rename in *directory* durable (POSIX; a no-op where directories cannot be opened).
    """
    try:
        handle = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover  # Windows cannot open a directory
        return
    try:
        os.fsync(handle)
    except OSError:  # pragma: no cover  # some file systems refuse fsync on a directory
        pass
    finally:
        os.close(handle)


# -- writing requests ---------------------------------------------------------------

Uploader = Callable[[MediaRef, bytes], "str | MediaRef"]
"""
An upload hook for :func:`resolve_media`: given a store reference and its
bytes, it uploads them to the provider and returns the provider's file id
(or a whole :class:`~workingctx.messages.MediaRef`, such as one of kind ``"url"``).
"""


def resolve_media(messages: Iterable[Message], store: MediaStore, *, upload: Uploader | None = None) -> list[Message]:
    """
    *messages* ready to send: every reference of kind ``"store"`` replaced by
    its bytes inline (kind ``"data"``, base64) or, with *upload*, by what the
    hook returns (a provider file id becomes a reference of kind ``"file_id"``).

    The replacement keeps the reference's MIME type, sha256, size, file name
    and image size. References anywhere in a message are resolved: in image,
    audio, video (and thumbnail), document and data blocks, and in tool
    results. Each distinct reference is read (and uploaded) once per call.
    Messages without store references are returned as they are (the same
    objects); the input is never changed.

    Args:
        messages: The messages to send.
        store: The store the references were made by.
        upload: An optional hook ``upload(ref, data) -> file_id | MediaRef``.

    Returns:
        The messages, in order.

    Raises:
        MediaError: The bytes of a reference are missing or damaged.
        TypeError: *upload* returned something other than a str or a MediaRef.
        ValueError: *upload* returned a reference of kind ``"store"``.

    >>> from workingctx import Message
    >>> from workingctx.messages import ImageBlock
    >>> store = InMemoryMediaStore()
    >>> ref = store.put(b"GIF89a\\x01\\x00\\x01\\x00", "image/gif")
    >>> message = Message("user", [ImageBlock(ref)])
    >>> resolve_media([message], store)[0].content[0].media.data_base64
    'R0lGODlhAQABAA=='
    >>> resolve_media([message], store, upload=lambda ref, data: "file-123")[0].content[0].media.file_id
    'file-123'
    """
    done: dict[MediaRef, MediaRef] = {}

    def resolve(ref: MediaRef) -> MediaRef:
        found = done.get(ref)
        if found is None:
            data = store.get(ref)
            found = _inline(ref, data) if upload is None else _uploaded(ref, upload(ref, data))
            done[ref] = found
        return found

    out: list[Message] = []
    for position, message in enumerate(messages):
        if not isinstance(message, Message):
            msg = f"resolve_media needs Message values, got {_checks.described(message)} at {position}"
            raise ArgumentTypeError(msg, argument=f"messages[{position}]", value=message, expected="a Message")
        out.append(_walk(message, resolve))
    return out


def _carried(ref: MediaRef) -> dict[str, Any]:
    return {
        "mime_type": ref.mime_type,
        "size_bytes": ref.size_bytes,
        "sha256": ref.sha256,
        "filename": ref.filename,
        "width": ref.width,
        "height": ref.height,
        "duration_ms": ref.duration_ms,
        "page": ref.page,
    }


def _inline(ref: MediaRef, data: bytes) -> MediaRef:
    return MediaRef(kind="data", data_base64=base64.b64encode(data).decode("ascii"), **_carried(ref))


def _uploaded(ref: MediaRef, result: object) -> MediaRef:
    if isinstance(result, MediaRef):
        if result.kind == "store":
            msg = (
                f"the upload hook returned the reference of kind 'store' {result.url} for {ref.url}; "
                "no provider can read it: return the provider's file id, or a MediaRef of kind 'file_id' or 'url'"
            )
            raise ArgumentValueError(msg, argument="upload", value=result)
        return result
    if isinstance(result, str) and result:
        return MediaRef(kind="file_id", file_id=result, **_carried(ref))
    msg = (
        f"the upload hook returned {result!r} of type {type(result).__name__} for {ref.url}; "
        "it must return the provider's file id (a non-empty str) or a MediaRef"
    )
    raise ArgumentTypeError(msg, argument="upload", value=result, expected="a file id (a non-empty str) or a MediaRef")


def _walk(value: Any, resolve: Callable[[MediaRef], MediaRef]) -> Any:
    """
    *value* with every store reference resolved; the same object when there is none.
    """
    if isinstance(value, MediaRef):
        return resolve(value) if value.kind == "store" else value
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return value
    if attrs.has(type(value)):
        changes = {}
        for field in attrs.fields(type(value)):
            if not field.init or (field.name == "metadata" and isinstance(value, Message)):  # never sent
                continue
            old = getattr(value, field.name)
            new = _walk(old, resolve)
            if new is not old:
                changes[field.alias] = new
        return attrs.evolve(value, **changes) if changes else value
    if isinstance(value, FrozenDict):
        items = {key: _walk(item, resolve) for key, item in value.items()}
        same = all(items[key] is item for key, item in value.items())
        return value if same else FrozenDict(items)
    if isinstance(value, tuple | FrozenList):
        walked = [_walk(item, resolve) for item in value]
        if all(new is old for new, old in zip(walked, value, strict=True)):
            return value
        return tuple(walked) if isinstance(value, tuple) else FrozenList(walked)
    return value
