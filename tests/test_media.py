"""
Tests for workingctx.media: image headers, store references, the three stores,
Message.with_image / with_file, resolve_media, and checkpoints that keep only references.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import os
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from workingctx import Checkpoint, Message, SQLiteStore, WorkingContext, media
from workingctx.exceptions import InvalidMessageError, MediaError, WorkingCtxError
from workingctx.media import (
    STORE_URL_PREFIX,
    FileMediaStore,
    InMemoryMediaStore,
    MediaStore,
    image_size,
    pdf_pages,
    resolve_media,
    store_ref,
)
from workingctx.messages import (
    AudioBlock,
    DataBlock,
    DocumentBlock,
    ImageBlock,
    MediaRef,
    TextBlock,
    ToolResultBlock,
    VideoBlock,
)
from workingctx.persistence import SQLiteMediaStore
from workingctx.serialization import from_json, to_json


def encode(width: int, height: int, fmt: str, mode: str = "RGB", **options: Any) -> bytes:
    """
    A real image file of the given size, encoded by Pillow.
    """
    out = io.BytesIO()
    Image.new(mode, (width, height), "red").save(out, fmt, **options)
    return out.getvalue()


def noise_png(width: int, height: int, seed: int) -> bytes:
    """
    A PNG of random pixels (it does not compress), different for every seed.
    """
    pixels = hashlib.shake_256(seed.to_bytes(4, "big")).digest(width * height * 3)
    out = io.BytesIO()
    Image.frombytes("RGB", (width, height), pixels).save(out, "PNG")
    return out.getvalue()


FORMATS: dict[str, Callable[[int, int], bytes]] = {
    "png": lambda w, h: encode(w, h, "PNG"),
    "jpeg": lambda w, h: encode(w, h, "JPEG"),
    "progressive jpeg": lambda w, h: encode(w, h, "JPEG", progressive=True),
    "gif": lambda w, h: encode(w, h, "GIF", mode="P"),
    "webp lossy": lambda w, h: encode(w, h, "WEBP"),
    "webp lossless": lambda w, h: encode(w, h, "WEBP", lossless=True),
    "webp extended": lambda w, h: encode(w, h, "WEBP", exif=b"Exif\x00\x00MM\x00*\x00\x00\x00\x08\x00\x00"),
}


@pytest.fixture(params=["memory", "files", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MediaStore]:
    """
    Each store kind, fresh.
    """
    if request.param == "memory":
        yield InMemoryMediaStore()
    elif request.param == "files":
        yield FileMediaStore(tmp_path / "media")
    else:
        with SQLiteMediaStore(tmp_path / "media.db") as sqlite_store:
            yield sqlite_store


# -- headers ------------------------------------------------------------------------


class TestImageSize:
    @pytest.mark.parametrize("fmt", sorted(FORMATS))
    @given(width=st.integers(1, 300), height=st.integers(1, 300))
    def test_reads_the_size_pillow_wrote(self, fmt: str, width: int, height: int) -> None:
        """
        The size read from the header is the size of the image Pillow encoded, in every format.
        """
        assert (width, height) == image_size(FORMATS[fmt](width, height))

    @pytest.mark.parametrize("fmt", sorted(FORMATS))
    def test_large_sizes(self, fmt: str) -> None:
        """
        Sizes beyond one byte per side (and beyond 2**14 for the lossless WebP field split) read right.
        """
        size = (2000, 3) if fmt.startswith("webp") else (5000, 7)
        assert size == image_size(FORMATS[fmt](*size))

    @pytest.mark.parametrize("fmt", sorted(FORMATS))
    def test_truncated_headers_give_none_or_the_size(self, fmt: str) -> None:
        """
        Every prefix of a real file reads as None or as the right size, never raises.
        """
        data = FORMATS[fmt](33, 17)
        for end in range(min(len(data), 400)):
            assert image_size(data[:end]) in {None, (33, 17)}

    @given(st.binary(max_size=64))
    def test_arbitrary_bytes_never_raise(self, data: bytes) -> None:
        """
        Bytes that are no image read as None (or a size), never an exception.
        """
        found = image_size(data)
        assert found is None or (found[0] > 0 and found[1] > 0)

    @given(st.binary(max_size=40))
    def test_damaged_jpeg_segments_never_raise(self, tail: bytes) -> None:
        """
        A JPEG start followed by anything reads as None or a positive size.
        """
        found = image_size(b"\xff\xd8" + tail)
        assert found is None or min(found) > 0

    def test_jpeg_markers_before_the_frame(self) -> None:
        """
        Standalone markers and fill bytes before the frame header are skipped; a scan before it gives None.
        """
        frame = b"\xff\xc0\x00\x11\x08\x00\x07\x00\x05"
        assert (5, 7) == image_size(b"\xff\xd8\xff\xd0\xff\xff\xe0\x00\x04ab" + frame)
        assert image_size(b"\xff\xd8\xff\xda\x00\x02" + frame) is None
        assert image_size(b"\xff\xd8\x00") is None
        assert image_size(b"\xff\xd8\xff\xff") is None

    def test_zero_size_is_none(self) -> None:
        """
        A header claiming a zero side gives None rather than a size no provider would accept.
        """
        assert image_size(b"GIF89a\x00\x00\x05\x00") is None

    def test_other_formats_are_none(self) -> None:
        """
        A BMP or a PDF has no size here.
        """
        assert image_size(encode(4, 4, "BMP")) is None
        assert image_size(b"%PDF-1.7\n") is None


DATA = Path(__file__).parent / "data"


def _pillow_pdf(pages: int) -> bytes:
    """
    A PDF of *pages* pages, as Pillow writes one (a page an image).
    """
    images = [Image.new("RGB", (8, 8), (page * 40 % 256, 90, 160)) for page in range(pages)]
    out = io.BytesIO()
    images[0].save(out, "PDF", save_all=True, append_images=images[1:])
    return out.getvalue()


class TestPdfPages:
    @given(st.integers(1, 40))
    @settings(max_examples=15, deadline=None)
    def test_reads_the_pages_pillow_wrote(self, pages: int) -> None:
        """
        The pages read from the page tree are the pages Pillow wrote.
        """
        assert pdf_pages(_pillow_pdf(pages)) == pages

    @pytest.mark.parametrize(
        ("name", "pages"),
        [
            ("five-pages-chromium.pdf", 5),  # Chromium's print to PDF (Skia): a tree beside structure elements
            ("seven-pages-object-streams.pdf", 7),  # qpdf --object-streams=generate: the tree in a compressed stream
        ],
    )
    def test_reads_the_pages_of_documents_other_programs_wrote(self, name: str, pages: int) -> None:
        """
        Documents written by other programs read as many pages as qpdf
        counts in them (``qpdf --show-npages``), the page tree kept in a
        compressed object stream included.
        """
        data = (DATA / name).read_bytes()
        assert pdf_pages(data) == pages
        assert (b"/ObjStm" in data) == (name == "seven-pages-object-streams.pdf")

    def test_the_root_counts_and_leaves_count_without_one(self) -> None:
        """
        A tree node's count is the pages under it, so the root's (the node
        with no parent) is the document's; with no count, the page nodes are
        counted; with neither, or in bytes that are no PDF, None.
        """
        tree = b"%PDF-1.4\n1 0 obj << /Type /Pages /Kids [2 0 R 3 0 R] /Count 9 >> endobj\n"
        tree += b"2 0 obj << /Kids [4 0 R] /Count 4 /Type /Pages /Parent 1 0 R /Resources << /Font << >> >> >> endobj\n"
        assert pdf_pages(tree) == 9
        assert pdf_pages(b"\x00" * 10 + tree[tree.index(b"%") :]) == 9  # a header after other bytes
        leaves = b"%PDF-1.4\n" + b"<< /Type /Page /Parent 1 0 R >>\n" * 3
        for count in (b"5 0 R", b"12 0 R", b"123 0 R"):  # a count held by reference is not read
            assert pdf_pages(leaves + b"<< /Type /Pages /Kids [] /Count " + count + b" >>") == 3
        assert pdf_pages(b"%PDF-1.7\n<< /Type /Pages /Kids [] /Count 0 >>") is None
        assert pdf_pages(b"%PDF-1.7\n%%EOF") is None
        assert pdf_pages(b"%PDF-1.7 << /Type /Catalog >>") is None
        assert pdf_pages(b"<< /Type /Pages /Kids [] /Count 3 >>") is None  # no PDF header

    def test_only_a_nodes_own_entries_count(self) -> None:
        """
        A count is read from a ``/Pages`` node's own entries: not from a
        dictionary nested in it, nor from a dictionary that only names
        ``/Type /Pages`` in a string (an outline's title), which has no kids.
        """
        nested = b"%PDF-1.4\n<< /Type /Pages /Kids [] /Foo << /Count 999 >> /Count 3 >>"
        assert pdf_pages(nested) == 3
        titled = b"%PDF-1.4\n<< /Type /Outlines /Count 40 /Title (/Type /Pages) >> << /Type /Pages /Kids [] /Count 3 >>"
        assert pdf_pages(titled) == 3

    def test_the_root_an_update_appended_counts(self) -> None:
        """
        An update appended to a file that deleted pages replaces the root:
        the root written last is the document's.
        """
        first = b"%PDF-1.4\n1 0 obj << /Type /Pages /Kids [3 0 R 4 0 R 5 0 R 6 0 R] /Count 4 >> endobj\n%%EOF\n"
        update = b"1 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj\n%%EOF\n"
        assert pdf_pages(first) == 4
        assert pdf_pages(first + update) == 1

    def test_object_streams_are_read_only_when_whole_and_flate_encoded(self) -> None:
        """
        An object stream is read when it is stored or Flate-encoded and ends
        (``endstream``); one cut short or encoded otherwise is not.
        """
        tree = b"<< /Type /Pages /Kids [] /Count 12 >>"
        flate = b"%PDF-1.5\n<< /Type /ObjStm /Filter /FlateDecode /DecodeParms << /Columns 1 >> >>\nstream\n"
        flate += zlib.compress(tree)
        assert pdf_pages(flate + b"\nendstream") == 12
        assert pdf_pages(flate) is None  # cut short
        stored = b"%PDF-1.5\n<< /Type /ObjStm /N 1 >>\nstream\n1 0 " + tree
        assert pdf_pages(stored + b"\nendstream") == 12  # read from the bytes as they are
        other = b"%PDF-1.5\n<< /Type /ObjStm /Filter /LZWDecode >>\nstream\n" + zlib.compress(tree) + b"endstream"
        assert pdf_pages(other) is None

    def test_every_prefix_of_a_document_reads_none_or_its_pages(self) -> None:
        """
        A document cut anywhere reads as None or as some of its pages, never raises.
        """
        for name, pages in (("five-pages-chromium.pdf", 5), ("seven-pages-object-streams.pdf", 7)):
            data = (DATA / name).read_bytes()
            for end in range(0, len(data), 97):
                found = pdf_pages(data[:end])
                assert found is None or 1 <= found <= pages  # a cut document may lose the root's count

    @given(st.binary(max_size=200))
    def test_arbitrary_bytes_never_raise(self, tail: bytes) -> None:
        """
        Anything after a PDF header reads as None or a positive count, never an exception.
        """
        found = pdf_pages(b"%PDF-1.4\n" + tail)
        assert found is None or found > 0


# -- references ---------------------------------------------------------------------


class TestStoreRef:
    def test_fields(self) -> None:
        """
        A store reference names the content by its sha256, in the URL too, with size and image size.
        """
        data = encode(64, 48, "PNG")
        ref = store_ref(data, "image/png", filename="a.png")
        digest = hashlib.sha256(data).hexdigest()
        assert ("store", STORE_URL_PREFIX + digest, digest) == (ref.kind, ref.url, ref.sha256)
        assert (len(data), 64, 48, "a.png", "image/png") == (
            ref.size_bytes,
            ref.width,
            ref.height,
            ref.filename,
            ref.mime_type,
        )

    def test_mime_types_are_case_insensitive(self) -> None:
        """
        ``IMAGE/PNG`` is an image type too: its size is read, and the MIME type kept as given.
        """
        ref = store_ref(encode(3, 5, "PNG"), "IMAGE/PNG")
        assert ("IMAGE/PNG", 3, 5) == (ref.mime_type, ref.width, ref.height)

    def test_no_image_size_for_other_types(self) -> None:
        """
        Bytes declared as a document get no width or height even when they are a PNG.
        """
        ref = store_ref(encode(3, 3, "PNG"), "application/octet-stream")
        assert (None, None) == (ref.width, ref.height)

    @pytest.mark.parametrize("data", ["text", 3, None])
    def test_data_must_be_bytes(self, data: object) -> None:
        """
        Text or numbers instead of bytes are a TypeError naming the value.
        """
        with pytest.raises(TypeError, match="media data must be bytes"):
            store_ref(data, "image/png")  # type: ignore[arg-type]

    @pytest.mark.parametrize("mime", ["png", "image/", "/png", "image/ png", "", "image/p\x00ng", "image/\u200bpng"])
    def test_mime_type_must_be_type_slash_subtype(self, mime: str) -> None:
        """
        A malformed MIME type is a ValueError showing it.
        """
        with pytest.raises(ValueError, match=r"type/subtype"):
            store_ref(b"x", mime)

    def test_mime_type_must_be_a_str(self) -> None:
        """
        A MIME type that is not a str is a TypeError.
        """
        with pytest.raises(TypeError, match="mime_type must be a str"):
            store_ref(b"x", None)  # type: ignore[arg-type]

    def test_filename_must_be_a_str(self) -> None:
        """
        A file name that is not a str is a TypeError.
        """
        with pytest.raises(TypeError, match="filename must be a str"):
            store_ref(b"x", "text/plain", filename=Path("a"))  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        ("fields", "match"),
        [
            ({"url": STORE_URL_PREFIX + "a" * 64, "sha256": "b" * 64}, "does not name its sha256"),
            ({"url": STORE_URL_PREFIX + "A" * 64, "sha256": "A" * 64}, "lower-case hex"),
            ({"url": STORE_URL_PREFIX + "abc", "sha256": "abc"}, "64 lower-case hex"),
            ({"url": STORE_URL_PREFIX + "a" * 64}, "needs sha256"),
            ({"sha256": "a" * 64}, r"needs url="),
        ],
    )
    def test_inconsistent_store_refs_are_refused(self, fields: dict[str, str], match: str) -> None:
        """
        A store reference whose URL and sha256 disagree, or are malformed, cannot be built.
        """
        with pytest.raises(InvalidMessageError, match=match):
            MediaRef(kind="store", **fields)  # type: ignore[arg-type]

    @given(st.binary(max_size=64))
    def test_json_round_trip(self, data: bytes) -> None:
        """
        A store reference survives the converter, in a message, equal.
        """
        message = Message("user", [ImageBlock(store_ref(data, "image/png"), detail="low")])
        assert message == from_json(to_json(message), Message)

    def test_image_detail_is_checked(self) -> None:
        """
        An image's detail is one of OpenAI's three values, or None.
        """
        ref = store_ref(b"x", "image/png")
        assert "auto" == ImageBlock(ref, detail="auto").detail
        with pytest.raises(InvalidMessageError, match="'auto', 'low', 'high' or None, got 'medium'"):
            ImageBlock(ref, detail="medium")  # type: ignore[arg-type]

    def test_damaged_json_store_ref_is_refused(self) -> None:
        """
        Loading a store reference whose URL was edited fails instead of pointing at other bytes.
        """
        text = to_json(Message("user", [ImageBlock(store_ref(b"x", "image/png"))]))
        edited = text.replace(STORE_URL_PREFIX, STORE_URL_PREFIX + "0")
        with pytest.raises(WorkingCtxError, match="does not name its sha256"):
            from_json(edited, Message)


# -- stores -------------------------------------------------------------------------


class TestStores:
    @settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # one store serves every example
    @given(data=st.binary(max_size=2048))
    def test_round_trip(self, store: MediaStore, data: bytes) -> None:
        """
        What is put is what is got, and the store says it has it.
        """
        ref = store.put(data, "application/octet-stream")
        assert data == store.get(ref)
        assert store.has(ref)

    def test_same_bytes_same_ref(self, store: MediaStore) -> None:
        """
        Putting the same bytes twice gives equal references; other bytes another one.
        """
        first = store.put(b"abc", "text/plain")
        assert first == store.put(b"abc", "text/plain")
        assert first.sha256 != store.put(b"abd", "text/plain").sha256

    @pytest.mark.parametrize(
        ("data", "expected"),
        [
            (memoryview(b"abcdef")[::2], b"ace"),  # not contiguous
            (memoryview(b"abcdef").cast("B", (2, 3)), b"abcdef"),  # two dimensions
            (bytearray(b"xyz"), b"xyz"),
        ],
    )
    def test_every_bytes_like_value(self, store: MediaStore, data: Any, expected: bytes) -> None:
        """
        Every store keeps what ``bytes(data)`` gives for the bytes-like values ``put`` takes.
        """
        ref = store.put(data, "application/octet-stream")
        assert (expected, len(expected)) == (store.get(ref), ref.size_bytes)

    def test_bytes_changed_after_the_call_are_not_stored(
        self, store: MediaStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """
        A bytearray another thread changes while ``put`` runs: the store keeps
        the bytes the reference names, never a mix that fails its check.
        """
        data = bytearray(b"original bytes")
        real = media.store_ref

        def then_changed(*args: Any, **kwargs: Any) -> MediaRef:
            ref = real(*args, **kwargs)
            data[:] = b"changed meanwhile"
            return ref

        monkeypatch.setattr(media, "store_ref", then_changed)
        ref = store.put(data, "application/octet-stream")
        assert b"original bytes" == store.get(ref)

    def test_is_a_media_store(self, store: MediaStore) -> None:
        """
        Every store satisfies the protocol.
        """
        assert isinstance(store, MediaStore)

    def test_missing_bytes_name_the_ref(self, store: MediaStore) -> None:
        """
        Bytes never stored (or deleted) raise MediaError naming the reference's URL, a ValueError too.
        """
        ref = store_ref(b"never stored", "text/plain", filename="notes.txt")
        with pytest.raises(MediaError, match=r"no bytes for workingctx://media/[0-9a-f]{64} \(notes.txt\)") as caught:
            store.get(ref)
        assert (ref, "missing") == (caught.value.ref, caught.value.reason)
        assert isinstance(caught.value, ValueError)
        assert not store.has(ref)

    def test_delete(self, store: MediaStore) -> None:
        """
        A deleted item is gone; deleting again is harmless.
        """
        ref = store.put(b"abc", "text/plain")
        store.delete(ref)
        assert not store.has(ref)
        store.delete(ref)
        with pytest.raises(MediaError, match="no bytes"):
            store.get(ref)

    @pytest.mark.parametrize(
        "ref",
        [MediaRef(url="https://example.com/a.png"), MediaRef(kind="data", data_base64="eA==")],
    )
    def test_refs_of_other_kinds_are_refused(self, store: MediaStore, ref: MediaRef) -> None:
        """
        A URL or inline reference is not something a store holds: MediaError says so.
        """
        for operation in (store.get, store.has, store.delete):
            with pytest.raises(MediaError, match="holds only references of kind 'store'"):
                operation(ref)

    def test_non_refs_are_a_type_error(self, store: MediaStore) -> None:
        """
        A string where a reference belongs is a TypeError.
        """
        with pytest.raises(TypeError, match="takes a MediaRef"):
            store.get("workingctx://media/abc")  # type: ignore[arg-type]

    def test_repr_names_the_store(self, store: MediaStore) -> None:
        """
        A store's repr says which kind it is.
        """
        assert type(store).__name__ in repr(store)

    def test_media_error_pickles(self) -> None:
        """
        A MediaError crosses a process boundary with its reference and reason.
        """
        import pickle  # noqa: PLC0415

        error = MediaError("gone", ref=store_ref(b"x", "text/plain"), reason="missing")
        copy = pickle.loads(pickle.dumps(error))  # our own object
        assert (str(error), error.ref, "missing") == (str(copy), copy.ref, copy.reason)


class TestFileMediaStore:
    def test_sharded_layout_without_leftovers(self, tmp_path: Path) -> None:
        """
        Each content is one file named by its sha256 under a two-digit shard; no temporary file stays.
        """
        store = FileMediaStore(tmp_path)
        refs = [store.put(bytes([n]) * 10, "application/octet-stream") for n in range(20)]
        files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
        assert sorted(f"{ref.sha256[:2]}/{ref.sha256}" for ref in refs) == files  # type: ignore[index]

    def test_sweep_removes_only_stale_leftovers(self, tmp_path: Path) -> None:
        """
        sweep() removes the temporary files of puts killed long ago, keeps a fresh one
        (a put still writing) and every stored file, and counts what it removed.
        """
        store = FileMediaStore(tmp_path)
        ref = store.put(b"kept bytes", "text/plain")
        shard = store.path_of(ref).parent
        stale = [shard / ".put-killed.tmp", tmp_path / "ab" / ".put-other.tmp"]
        (tmp_path / "ab").mkdir(exist_ok=True)
        for path in stale:
            path.write_bytes(b"half")
            os.utime(path, (time.time() - 7_200, time.time() - 7_200))
        fresh = shard / ".put-writing.tmp"
        fresh.write_bytes(b"now")
        assert 2 == store.sweep()
        assert not any(path.exists() for path in stale)
        assert fresh.exists()
        assert b"kept bytes" == store.get(ref)
        assert 1 == store.sweep(older_than=0)
        assert not fresh.exists()
        assert 0 == store.sweep()

    @pytest.mark.parametrize(("older_than", "error"), [(-1, ValueError), (float("nan"), ValueError), ("1h", TypeError)])
    def test_sweep_refuses_a_bad_age(self, tmp_path: Path, older_than: object, error: type[Exception]) -> None:
        """
        A negative, non-finite or non-numeric age is refused, naming the argument; nothing is removed.
        """
        store = FileMediaStore(tmp_path)
        leftover = tmp_path / "ab" / ".put-x.tmp"
        leftover.parent.mkdir()
        leftover.write_bytes(b"half")
        with pytest.raises(error, match="older_than"):
            store.sweep(older_than=older_than)  # type: ignore[arg-type]
        assert leftover.exists()

    @pytest.mark.parametrize(
        "damage",
        [
            lambda data: b"X" + data[1:],
            lambda data: data[:-1],
            lambda data: data + b"!",
            lambda _data: b"",
        ],
        ids=["flipped", "truncated", "extended", "emptied"],
    )
    def test_damaged_bytes_name_the_ref_and_repair(self, tmp_path: Path, damage: Callable[[bytes], bytes]) -> None:
        """
        A file whose bytes changed raises MediaError (reason "damaged") naming the URL and the file;
        putting the original bytes again repairs it.
        """
        store = FileMediaStore(tmp_path)
        data = encode(20, 10, "PNG")
        ref = store.put(data, "image/png")
        path = store.path_of(ref)
        path.write_bytes(damage(data))
        with pytest.raises(MediaError, match=rf"the bytes for {ref.url} in .* are damaged") as caught:
            store.get(ref)
        assert "damaged" == caught.value.reason
        assert str(path) in str(caught.value)
        assert ref == store.put(data, "image/png")
        assert data == store.get(ref)

    def test_missing_file_names_the_path(self, tmp_path: Path) -> None:
        """
        A file removed behind the store's back is reported with its path.
        """
        store = FileMediaStore(tmp_path)
        ref = store.put(b"abc", "text/plain")
        store.path_of(ref).unlink()
        with pytest.raises(MediaError, match=r"no bytes for .* \(file '.*'\)"):
            store.get(ref)

    def test_an_unreadable_file_is_a_media_error(self, tmp_path: Path) -> None:
        """
        A path in the store that cannot be read as a file (here a directory
        where the file should be) raises MediaError naming the file, not a bare OSError.
        """
        store = FileMediaStore(tmp_path)
        ref = store_ref(b"bytes", "text/plain")
        store.path_of(ref).mkdir(parents=True)
        with pytest.raises(MediaError, match=r"cannot read .*Is a directory") as caught:
            store.get(ref)
        assert "unavailable" == caught.value.reason

    def test_has_checks_the_size(self, tmp_path: Path) -> None:
        """
        ``has`` is False for a file whose size is wrong.
        """
        store = FileMediaStore(tmp_path)
        ref = store.put(b"abcdef", "text/plain")
        store.path_of(ref).write_bytes(b"abc")
        assert not store.has(ref)

    def test_a_failed_write_leaves_nothing(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """
        When the rename fails, the temporary file is removed and nothing is stored.
        """
        store = FileMediaStore(tmp_path)

        def refuse(*_args: object) -> None:
            msg = "disk full"
            raise OSError(msg)

        monkeypatch.setattr(Path, "replace", refuse)
        with pytest.raises(OSError, match="disk full"):
            store.put(b"abc", "text/plain")
        assert [] == [p for p in tmp_path.rglob("*") if p.is_file()]

    def test_directory_must_be_a_directory(self, tmp_path: Path) -> None:
        """
        A path to a file is refused.
        """
        (tmp_path / "file").write_bytes(b"")
        with pytest.raises(NotADirectoryError, match="is a file; pass a directory path"):
            FileMediaStore(tmp_path / "file")

    def test_concurrent_threads_store_once(self, tmp_path: Path) -> None:
        """
        Sixteen threads putting the same content at once all get the same reference, and one intact file.
        """
        store = FileMediaStore(tmp_path)
        data = os.urandom(1 << 20)
        start = threading.Barrier(16)

        def put(_: int) -> MediaRef:
            start.wait()
            return store.put(data, "application/octet-stream")

        with ThreadPoolExecutor(16) as pool:
            refs = set(pool.map(put, range(16)))
        assert 1 == len(refs)
        assert data == store.get(refs.pop())
        assert 1 == sum(1 for p in tmp_path.rglob("*") if p.is_file())

    def test_concurrent_processes_store_once(self, tmp_path: Path) -> None:
        """
        Four processes putting the same contents at once leave one intact file per content,
        and every reader in between got intact bytes or nothing.
        """
        script = (
            "import sys\n"
            "from workingctx.exceptions import MediaError\n"
            "from workingctx.media import FileMediaStore\n"
            "store = FileMediaStore(sys.argv[1])\n"
            "blobs = [bytes([n]) * (1 << 18) + b'%d' % n for n in range(8)]\n"
            "for _ in range(5):\n"
            "    for data in blobs:\n"
            "        ref = store.put(data, 'application/octet-stream')\n"
            "        assert store.get(ref) == data\n"
            "print('ok')\n"
        )
        workers = [
            subprocess.Popen(
                [sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            for _ in range(4)
        ]
        outputs = [worker.communicate(timeout=120) for worker in workers]
        assert [(0, b"ok\n")] * 4 == [(w.returncode, out) for w, (out, _err) in zip(workers, outputs, strict=True)]
        files = [p for p in tmp_path.rglob("*") if p.is_file()]
        assert 8 == len(files)
        assert all(hashlib.sha256(p.read_bytes()).hexdigest() == p.name for p in files)


# -- messages -----------------------------------------------------------------------


class TestWithImage:
    def test_keeps_only_a_ref(self) -> None:
        """
        The message holds a store reference with the image's size, and the bytes are in the store.
        """
        store = InMemoryMediaStore()
        data = encode(640, 480, "JPEG")
        message = asyncio.run(Message.with_image(data, "image/jpeg", store, text="What is this?", id="m1"))
        text, image = message.content  # type: ignore[misc]
        assert TextBlock("What is this?") == text
        assert isinstance(image, ImageBlock)
        assert ("store", 640, 480, len(data)) == (
            image.media.kind,
            image.media.width,
            image.media.height,
            image.media.size_bytes,
        )
        assert (data, "user", "m1") == (store.get(image.media), message.role, message.id)
        assert "base64" not in to_json(message)
        assert len(to_json(message)) < 400

    def test_options(self) -> None:
        """
        Role, alt text and detail reach the message and its block; without text there is only the image.
        """
        message = asyncio.run(
            Message.with_image(
                encode(4, 4, "PNG"), "image/png", InMemoryMediaStore(), role="tool", alt_text="a dot", detail="low"
            )
        )
        (image,) = message.content  # type: ignore[misc]
        assert ("tool", "a dot", "low") == (message.role, image.alt_text, image.detail)

    def test_not_an_image_type(self) -> None:
        """
        A non-image MIME type is refused with a pointer to with_file, and nothing is stored.
        """
        store = InMemoryMediaStore()
        with pytest.raises(InvalidMessageError, match=r"use Message\.with_file"):
            asyncio.run(Message.with_image(b"%PDF", "application/pdf", store))
        assert 0 == len(store)

    def test_data_must_be_bytes(self) -> None:
        """
        A base64 string instead of bytes is a TypeError.
        """
        with pytest.raises(TypeError, match="needs the image as bytes"):
            asyncio.run(Message.with_image("iVBORw0KGgo=", "image/png", InMemoryMediaStore()))  # type: ignore[arg-type]

    def test_store_must_be_a_store(self) -> None:
        """
        Something without put() is a TypeError naming the stores to use.
        """
        with pytest.raises(TypeError, match="FileMediaStore or InMemoryMediaStore"):
            asyncio.run(Message.with_image(b"x", "image/png", {}))  # type: ignore[arg-type]

    def test_put_must_return_a_ref(self) -> None:
        """
        A store of your own whose put() returns something else is a TypeError.
        """

        class Broken:
            def put(self, _data: bytes, _mime_type: str, *, filename: str | None = None) -> str:  # noqa: ARG002
                return "ref"

        with pytest.raises(TypeError, match=r"Broken.put returned 'ref'"):
            asyncio.run(Message.with_image(b"x", "image/png", Broken()))  # type: ignore[arg-type]

    def test_tiny_png_counts_as_a_tiny_image(self) -> None:
        """
        A 1x1 PNG counts one tile under OpenAI's rule and one token under Anthropic's, not 765.
        """
        from workingctx import ApproxTokenCounter  # noqa: PLC0415

        message = asyncio.run(Message.with_image(encode(1, 1, "PNG"), "image/png", InMemoryMediaStore()))
        assert 4 + 85 + 170 == ApproxTokenCounter().count_message(message)
        assert 4 + 1 == ApproxTokenCounter(images="anthropic").count_message(message)


class TestWithFile:
    @pytest.mark.parametrize(
        ("name", "mime", "block"),
        [
            ("photo.png", None, ImageBlock),
            ("voice.mp3", None, AudioBlock),
            ("clip.mp4", None, VideoBlock),
            ("report.pdf", None, DocumentBlock),
            ("data.unknownext", None, DocumentBlock),
            ("photo.bin", "image/webp", ImageBlock),
        ],
    )
    def test_block_type_from_mime_type(self, tmp_path: Path, name: str, mime: str | None, block: type[Any]) -> None:
        """
        The block type follows the MIME type, given or guessed from the name.
        """
        path = tmp_path / name
        path.write_bytes(b"0123456789")
        message = asyncio.run(Message.with_file(path, InMemoryMediaStore(), mime_type=mime))
        (found,) = message.content  # type: ignore[misc]
        assert isinstance(found, block)
        assert ("store", name, 10) == (found.media.kind, found.media.filename, found.media.size_bytes)

    def test_unknown_extension_is_octet_stream(self, tmp_path: Path) -> None:
        """
        Without a MIME type or a known extension, the type is application/octet-stream.
        """
        path = tmp_path / "blob.unknownext"
        path.write_bytes(b"x")
        message = asyncio.run(Message.with_file(path, InMemoryMediaStore()))
        assert "application/octet-stream" == message.content[0].media.mime_type  # type: ignore[union-attr]

    def test_image_file_gets_its_size(self, tmp_path: Path) -> None:
        """
        An image file's reference carries its width and height, and the same sha256 as with_image gives.
        """
        data = encode(31, 7, "GIF", mode="P")
        path = tmp_path / "a.gif"
        path.write_bytes(data)
        store = InMemoryMediaStore()
        from_file = asyncio.run(Message.with_file(str(path), store, text="see"))
        from_bytes = asyncio.run(Message.with_image(data, "image/gif", store))
        ref = from_file.content[1].media  # type: ignore[union-attr]
        assert (31, 7) == (ref.width, ref.height)
        assert from_bytes.content[0].media.sha256 == ref.sha256  # type: ignore[union-attr]
        assert 1 == len(store)

    def test_missing_file(self, tmp_path: Path) -> None:
        """
        A path that does not exist raises FileNotFoundError and stores nothing.
        """
        store = InMemoryMediaStore()
        with pytest.raises(FileNotFoundError):
            asyncio.run(Message.with_file(tmp_path / "nope.png", store))
        assert 0 == len(store)

    def test_only_regular_files(self, tmp_path: Path) -> None:
        """
        A FIFO (whose read would wait forever for a writer) and a directory are
        refused with InvalidMessageError naming the path, and nothing is stored.
        """
        fifo = tmp_path / "pipe.png"
        os.mkfifo(fifo)
        program = (
            "import asyncio, sys\n"
            "from workingctx import Message\n"
            "from workingctx.media import InMemoryMediaStore\n"
            "asyncio.run(Message.with_file(sys.argv[1], InMemoryMediaStore()))\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", program, str(fifo)], capture_output=True, text=True, check=False, timeout=60
        )
        assert 1 == result.returncode
        assert f"InvalidMessageError: Message.with_file() reads regular files only; {str(fifo)!r} is a FIFO" in (
            result.stderr
        )
        store = InMemoryMediaStore()
        with pytest.raises(InvalidMessageError, match="is a directory"):
            asyncio.run(Message.with_file(tmp_path, store))
        assert 0 == len(store)

    @pytest.mark.parametrize("method", ["with_file", "from_file"])
    def test_an_image_named_as_another_type_gets_its_own_type(self, tmp_path: Path, method: str) -> None:
        """
        A GIF saved as ``photo.png`` is sent as ``image/gif`` (providers refuse
        an image whose bytes are not of its declared type); a MIME type given
        by the caller is kept as given.
        """
        path = tmp_path / "photo.png"
        path.write_bytes(encode(4, 2, "GIF", mode="P"))

        def made(**options: Any) -> MediaRef:
            if method == "with_file":
                message = asyncio.run(Message.with_file(path, InMemoryMediaStore(), **options))
            else:
                message = Message.from_file(path, **options)
            (block,) = message.content  # type: ignore[misc]
            assert isinstance(block, ImageBlock)
            return block.media

        assert "image/gif" == made().mime_type
        assert "image/png" == made(mime_type="image/png").mime_type
        path.write_bytes(b"not an image at all")  # no known signature: the name's type stands
        assert "image/png" == made().mime_type

    def test_same_blocks_as_from_file(self, tmp_path: Path) -> None:
        """
        with_file and from_file build the same block type and text; only the reference differs.
        """
        path = tmp_path / "a.wav"
        path.write_bytes(b"RIFF0000WAVE")
        stored = asyncio.run(Message.with_file(path, InMemoryMediaStore(), text="listen"))
        inline = Message.from_file(path, text="listen")
        assert [type(b) for b in inline.content] == [type(b) for b in stored.content]
        assert inline.content[1].media.data_base64 == base64.b64encode(path.read_bytes()).decode()  # type: ignore[union-attr]


# -- resolving ----------------------------------------------------------------------


def refs_in(messages: list[Message]) -> list[MediaRef]:
    """
    Every MediaRef in the messages' blocks, in order.
    """
    found: list[MediaRef] = []
    for message in messages:
        for block in message.content:
            pair = (getattr(block, "media", None), getattr(block, "thumbnail", None))
            found.extend(value for value in pair if isinstance(value, MediaRef))
            if isinstance(block, ToolResultBlock):
                found.extend(item.media for item in block.content if isinstance(item, ImageBlock | DocumentBlock))
    return found


class TestResolveMedia:
    def setup_method(self) -> None:
        """
        A store and a transcript with store references in every place they can be.
        """
        self.store = InMemoryMediaStore()
        self.image = self.store.put(encode(10, 10, "PNG"), "image/png", filename="a.png")
        self.pdf = self.store.put(b"%PDF-1.7", "application/pdf")
        self.thumb = self.store.put(encode(2, 2, "GIF", mode="P"), "image/gif")
        self.messages = [
            Message.system("look"),
            Message("user", [TextBlock("see"), ImageBlock(self.image, detail="high"), DocumentBlock(self.pdf)]),
            Message("user", [VideoBlock(MediaRef(url="https://example.com/v.mp4"), thumbnail=self.thumb)]),
            Message("user", [DataBlock("application/pdf", media=self.pdf), ImageBlock(self.image)]),
            Message(
                "tool",
                [ToolResultBlock("c1", content=(ImageBlock(self.image), DocumentBlock(self.pdf)))],
                tool_call_id="c1",
            ),
        ]

    def test_inline_by_default(self) -> None:
        """
        Every store reference becomes inline base64 of its bytes, keeping type, sha256, size and image size.
        """
        resolved = resolve_media(self.messages, self.store)
        before, after = refs_in(self.messages), refs_in(resolved)
        assert len(before) == len(after) == 8
        for old, new in zip(before, after, strict=True):
            if old.kind != "store":
                assert old is new
                continue
            assert "data" == new.kind
            assert self.store.get(old) == base64.b64decode(new.data_base64)  # type: ignore[arg-type]
            assert (old.mime_type, old.sha256, old.size_bytes, old.width, old.height, old.filename) == (
                new.mime_type,
                new.sha256,
                new.size_bytes,
                new.width,
                new.height,
                new.filename,
            )
        assert "high" == resolved[1].content[1].detail  # type: ignore[union-attr]

    def test_input_unchanged_and_untouched_messages_kept(self) -> None:
        """
        The input keeps its references; a message without any is returned as the same object.
        """
        before = list(self.messages)
        resolved = resolve_media(self.messages, self.store)
        assert before == self.messages
        assert resolved[0] is self.messages[0]
        assert all(ref.kind != "store" for ref in refs_in(resolved))
        assert any(ref.kind == "store" for ref in refs_in(self.messages))

    def test_upload_hook_once_per_ref(self) -> None:
        """
        The upload hook sees each distinct reference once, with its bytes; its file id lands in the request.
        """
        calls: list[tuple[MediaRef, bytes]] = []

        def upload(ref: MediaRef, data: bytes) -> str:
            calls.append((ref, data))
            return f"file-{len(calls)}"

        resolved = resolve_media(self.messages, self.store, upload=upload)
        assert [self.image, self.pdf, self.thumb] == [ref for ref, _ in calls]
        assert all(self.store.get(ref) == data for ref, data in calls)
        ids = [ref.file_id for ref in refs_in(resolved) if ref.kind == "file_id"]
        assert ["file-1", "file-2", "file-3", "file-2", "file-1", "file-1", "file-2"] == ids

    def test_blocks_inside_tool_results(self) -> None:
        """
        An image returned inside a tool result's content blocks is resolved like any other.
        """
        result = ToolResultBlock("c2", content=(TextBlock("screenshot"), ImageBlock(self.image)))
        message = Message("tool", [result], tool_call_id="c2")
        (resolved,) = resolve_media([message], self.store)
        media = resolved.content[0].content[1].media  # type: ignore[union-attr]
        assert ("data", self.image.sha256) == (media.kind, media.sha256)
        assert "screenshot" == resolved.content[0].output_text()  # type: ignore[union-attr]

    def test_upload_hook_may_return_a_ref(self) -> None:
        """
        A hook returning a whole MediaRef (a URL, say) puts it in the request as is.
        """
        url = MediaRef(url="https://cdn.example.com/x", mime_type="image/png")
        resolved = resolve_media(self.messages[1:2], self.store, upload=lambda _ref, _data: url)
        assert url is resolved[0].content[1].media  # type: ignore[union-attr]

    @pytest.mark.parametrize("result", [None, "", 42])
    def test_upload_hook_must_return_an_id(self, result: object) -> None:
        """
        A hook returning nothing usable is a TypeError naming the reference.
        """
        with pytest.raises(TypeError, match=r"the upload hook returned .* for workingctx://media/"):
            resolve_media(self.messages, self.store, upload=lambda _ref, _data: result)  # type: ignore[arg-type,return-value]

    def test_upload_hook_must_not_return_a_store_ref(self) -> None:
        """
        A hook handing back the store reference it was given (nothing a
        provider can read) is an error naming the hook, not a request that
        fails later with no word of the hook.
        """
        with pytest.raises(ValueError, match=r"the upload hook returned the reference of kind 'store' .* for work"):
            resolve_media(self.messages, self.store, upload=lambda ref, _data: ref)

    def test_missing_bytes(self) -> None:
        """
        A reference whose bytes are gone raises MediaError naming it.
        """
        self.store.delete(self.pdf)
        with pytest.raises(MediaError, match=self.pdf.url):  # type: ignore[arg-type]
            resolve_media(self.messages, self.store)

    def test_metadata_is_not_resolved(self) -> None:
        """
        A reference kept in a message's own metadata (never sent; JSON data,
        such as the reference's url) stays as it is.
        """
        message = Message("user", "hi", metadata={"ref": {"kind": "store", "url": self.image.url}})
        assert message is resolve_media([message], self.store)[0]

    def test_not_a_message(self) -> None:
        """
        A dict in the list is a TypeError naming its position.
        """
        with pytest.raises(TypeError, match="at 1"):
            resolve_media([Message.user("a"), {"role": "user"}], self.store)  # type: ignore[list-item]


# -- checkpoints --------------------------------------------------------------------


def test_checkpoint_of_100_images_is_under_one_percent_of_inline(tmp_path: Path) -> None:
    """
    A context of 100 distinct images checkpoints (as JSON and in SQLite) in under 1% of the
    size the same context takes with the images inline as base64; digests do not read the bytes.
    """
    store = FileMediaStore(tmp_path / "media")
    images = [noise_png(320, 240, seed) for seed in range(100)]  # about 230 kB each, like a photo
    stored = WorkingContext()
    inline = WorkingContext()
    for n, data in enumerate(images):
        stored = stored.append(asyncio.run(Message.with_image(data, "image/png", store, text=f"frame {n}")))
        inline = inline.append(Message.image_message(image_base64=base64.b64encode(data).decode(), text=f"frame {n}"))
    stored_json = len(to_json(Checkpoint.capture(stored)).encode())
    inline_json = len(to_json(Checkpoint.capture(inline)).encode())
    sizes = {}
    for name, ctx in (("stored", stored), ("inline", inline)):
        with SQLiteStore(tmp_path / f"{name}.db") as checkpoints:
            checkpoints.save(Checkpoint.capture(ctx))
        sizes[name] = sum(p.stat().st_size for p in tmp_path.glob(f"{name}.db*"))
    assert stored_json < inline_json / 100
    assert sizes["stored"] < sizes["inline"] / 100
    # The digest of the stored context is computed without the store: deleting the bytes changes nothing.
    digest = stored.freeze().digest()
    for path in (tmp_path / "media").rglob("*"):
        if path.is_file():
            path.unlink()
    assert digest == stored.freeze().digest()
