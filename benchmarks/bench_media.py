"""
Media benchmarks: a context of 100 photos, kept as store references or inline as base64.

Each photo is a 320 x 240 PNG of random pixels (about 230 kB: it does not
compress), made with the standard library. The same context is built twice:
once with ``Message.with_image`` over a ``FileMediaStore`` (the message keeps a
reference), once with ``Message.image_message(image_base64=...)`` (the baseline:
the bytes travel in the transcript). Measured:

* bytes: the checkpoint's JSON, and a ``SQLiteStore`` file holding it;
* time: ``Checkpoint.capture`` + save to a fresh ``SQLiteStore``, and the
  snapshot digest of a fresh copy of the messages;
* ``resolve_media`` writing the request back with the bytes inline.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import itertools
import struct
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from benchmarks._harness import Table, measure
from workingctx import Checkpoint, Message, SQLiteStore, WorkingContext
from workingctx.media import FileMediaStore, resolve_media
from workingctx.serialization import from_json, to_json

GROUP = "media"


def noise_png(width: int, height: int, seed: int) -> bytes:
    """
    A valid RGB PNG of random pixels, different for every seed.
    """

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    pixels = hashlib.shake_256(seed.to_bytes(4, "big")).digest(width * height * 3)
    rows = b"".join(b"\x00" + pixels[y * width * 3 : (y + 1) * width * 3] for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def _file_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def _save_fresh(root: Path, name: str, ctx: WorkingContext, saves: Iterator[int]) -> None:
    """
    Capture *ctx* and save it to a new SQLite file.
    """
    with SQLiteStore(root / f"{name}-{next(saves)}.db") as checkpoints:
        checkpoints.save(Checkpoint.capture(ctx))


def run(table: Table, *, quick: bool) -> None:
    count = 20 if quick else 100
    images = [noise_png(320, 240, seed) for seed in range(count)]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = FileMediaStore(root / "media")
        stored = WorkingContext()
        inline = WorkingContext()
        for n, data in enumerate(images):
            stored.append(asyncio.run(Message.with_image(data, "image/png", store, text=f"photo {n}")))
            inline.append(Message.image_message(image_base64=base64.b64encode(data).decode(), text=f"photo {n}"))

        size = f"{count} photos, {sum(map(len, images)) / 1e6:.1f} MB"
        json_sizes = {}
        db_sizes = {}
        save_times = {}
        digest_times = {}
        for name, ctx in (("stored", stored), ("inline", inline)):
            json_sizes[name] = len(to_json(Checkpoint.capture(ctx)).encode("utf-8"))
            save_times[name] = measure(functools.partial(_save_fresh, root, name, ctx, itertools.count()), repeat=3)
            db_sizes[name] = _file_size(root / f"{name}-0.db")
            text = to_json(list(ctx.messages))

            def digest(text: str = text) -> str:
                return WorkingContext().append(*from_json(text, list[Message])).freeze().digest()

            digest_times[name] = measure(digest, repeat=3)

        table.add(
            GROUP,
            "checkpoint JSON bytes",
            size,
            None,
            baseline="images inline (base64)",
            note=(
                f"references {json_sizes['stored']:,} B vs inline {json_sizes['inline']:,} B: "
                f"{json_sizes['stored'] / json_sizes['inline']:.3%}"
            ),
        )
        table.add(
            GROUP,
            "SQLiteStore file bytes",
            size,
            None,
            baseline="images inline (base64)",
            note=(
                f"references {db_sizes['stored']:,} B vs inline {db_sizes['inline']:,} B: "
                f"{db_sizes['stored'] / db_sizes['inline']:.3%}"
            ),
        )
        table.add(
            GROUP,
            "capture + save to a new SQLiteStore",
            size,
            save_times["stored"],
            baseline="images inline (base64)",
            baseline_seconds=save_times["inline"],
        )
        table.add(
            GROUP,
            "load messages + snapshot digest",
            size,
            digest_times["stored"],
            baseline="images inline (base64)",
            baseline_seconds=digest_times["inline"],
        )
        messages = list(stored.messages)
        table.add(
            GROUP,
            "resolve_media (read, check, base64)",
            size,
            measure(lambda: resolve_media(messages, store), repeat=3),
            note="writing a request from the stored context",
        )
