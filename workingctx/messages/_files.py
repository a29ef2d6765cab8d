"""
Files and media read into content blocks: the bytes of a regular file (never
a FIFO or a device), their MIME type, the block they go in, and media kept in
a media store. ``Message.from_file``, ``image_message``, ``with_image`` and
``with_file`` build their messages from the blocks made here.
"""

from __future__ import annotations

import asyncio
import base64
import mimetypes
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from workingctx import _checks
from workingctx.exceptions import ArgumentTypeError, InvalidMessageError
from workingctx.messages._blocks import AudioBlock, ContentBlock, DocumentBlock, ImageBlock, TextBlock, VideoBlock
from workingctx.messages._refs import MediaRef, image_type

if TYPE_CHECKING:
    from workingctx.media import MediaStore  # a layer above: for annotations only

__all__ = ["MAX_INLINE_FILE_BYTES", "file_blocks", "image_blocks", "stored_file_blocks", "stored_image_blocks"]

MAX_INLINE_FILE_BYTES = 32 * 1024 * 1024
"""The default limit of :meth:`Message.from_file`: 32 MiB, more than any provider accepts inline."""


def _read_regular_file(path: Path, max_bytes: int | None, caller: str = "Message.from_file()") -> bytes:
    """
    The bytes of a regular file of at most *max_bytes* (None: any size),
    checked on the open file itself (a path swapped for a FIFO after a check
    cannot block the read).
    """
    if max_bytes is not None:
        _checks.check_count(max_bytes, "max_bytes", error=InvalidMessageError)
    # O_NONBLOCK: opening a FIFO without a writer returns at once instead of waiting.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = "special file"
        if stat.S_ISDIR(info.st_mode):
            kind = "directory"
        elif stat.S_ISFIFO(info.st_mode):
            kind = "FIFO"
        msg = f"{caller} reads regular files only; {str(path)!r} is a {kind}"
        raise InvalidMessageError(msg)
    if max_bytes is None:
        with os.fdopen(fd, "rb") as handle:
            return handle.read()
    too_big = (
        f"{str(path)!r} holds more than {max_bytes:,} bytes, the limit of an inline file; "
        "pass max_bytes=... to raise it, or keep the file in a media store with Message.with_file()"
    )
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > max_bytes:
            raise InvalidMessageError(too_big)
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:  # it grew while it was read
        raise InvalidMessageError(too_big)
    return data


def image_blocks(
    image_url: str | None, image_base64: str | None, mime_type: str, text: str | None
) -> tuple[ContentBlock, ...]:
    """
    The blocks of :meth:`Message.image_message`: an optional text block and one
    image, by URL or inline base64.
    """
    if image_url is not None:
        media = MediaRef(kind="url", url=image_url, mime_type=mime_type)
    elif image_base64 is not None:
        media = MediaRef(kind="data", data_base64=image_base64, mime_type=mime_type)
    else:
        msg = "image_message needs image_url=... or image_base64=..."
        raise InvalidMessageError(msg)
    return _with_text(text, ImageBlock(media))


def file_blocks(
    file_path: str | Path, mime_type: str | None, text: str | None, max_bytes: int
) -> tuple[ContentBlock, ...]:
    """
    The blocks of :meth:`Message.from_file`: the file inline (base64), after
    an optional text block.
    """
    path = Path(file_path)
    data = _read_regular_file(path, max_bytes)
    mime = mime_type or _guess_mime(path, data)
    media = MediaRef(
        kind="data",
        data_base64=base64.b64encode(data).decode("ascii"),
        mime_type=mime,
        size_bytes=len(data),
        filename=path.name,
    )
    return _with_text(text, _media_block(mime, media))


async def stored_image_blocks(
    data: bytes,
    mime_type: str,
    store: MediaStore,
    text: str | None,
    alt_text: str | None,
    detail: Literal["auto", "low", "high"] | None,
) -> tuple[ContentBlock, ...]:
    """
    The blocks of :meth:`Message.with_image`: the image put in *store*, after
    an optional text block.
    """
    _checks.check_instance(
        data,
        "data",
        (bytes, bytearray, memoryview),
        "bytes",
        owner="Message.with_image",
        fix="with_image needs the image as bytes: decode base64 text with base64.b64decode() first",
    )
    if not isinstance(mime_type, str) or not mime_type.startswith("image/"):
        msg = (
            f"with_image needs an image MIME type such as 'image/png', got {mime_type!r}; "
            "for audio, video or documents use Message.with_file"
        )
        raise InvalidMessageError(msg)
    media = await _put(store, bytes(data), mime_type, None)
    return _with_text(text, ImageBlock(media, alt_text=alt_text, detail=detail))


async def stored_file_blocks(
    file_path: str | Path, store: MediaStore, mime_type: str | None, text: str | None
) -> tuple[ContentBlock, ...]:
    """
    The blocks of :meth:`Message.with_file`: the file put in *store* (read in a
    worker thread), after an optional text block.
    """
    path = Path(file_path)
    data = await asyncio.to_thread(_read_regular_file, path, None, "Message.with_file()")
    mime = mime_type or _guess_mime(path, data)
    media = await _put(store, data, mime, path.name)
    return _with_text(text, _media_block(mime, media))


def _guess_mime(path: Path, data: bytes) -> str:
    """
    The MIME type of a file, from its name; for a name saying image, the
    type its bytes' signature says when they are another image type (a GIF
    saved as ``.png``), since providers refuse an image of another type.
    """
    guessed = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    if guessed.startswith("image/"):
        return image_type(data) or guessed
    return guessed


def _media_block(mime: str, media: MediaRef) -> ContentBlock:
    """
    The block a file of type *mime* goes in.
    """
    if mime.startswith("image/"):
        return ImageBlock(media)
    if mime.startswith("audio/"):
        return AudioBlock(media)
    if mime.startswith("video/"):
        return VideoBlock(media)
    return DocumentBlock(media)


def _with_text(text: str | None, block: ContentBlock) -> tuple[ContentBlock, ...]:
    return (block,) if text is None else (TextBlock(text), block)


async def _put(store: MediaStore, data: bytes, mime_type: str, filename: str | None) -> MediaRef:
    put = getattr(store, "put", None)
    if not callable(put):
        msg = (
            f"store must be a media store (with put(data, mime_type, filename=...)), got {store!r} "
            f"of type {type(store).__name__}; use workingctx.media.FileMediaStore or InMemoryMediaStore"
        )
        raise ArgumentTypeError(msg, argument="store", value=store, expected="a media store")
    media = await asyncio.to_thread(put, data, mime_type, filename=filename)
    if not isinstance(media, MediaRef):
        msg = f"{type(store).__name__}.put returned {media!r} of type {type(media).__name__}; it must return a MediaRef"
        raise ArgumentTypeError(
            msg, argument="store", value=store, expected="a media store whose put returns a MediaRef"
        )
    return media
