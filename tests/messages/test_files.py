"""
Messages built from images and files: the blocks made from a URL or a file's bytes and MIME type,
and the refusal of what is not a regular file or holds more than the limit.
"""

from __future__ import annotations

import base64
import os

import pytest

from workingctx import Message
from workingctx.exceptions import InvalidMessageError
from workingctx.messages import ImageBlock


class TestConstructors:
    def test_image_message(self):
        """
        image_message builds a text block and an image block; without an image it refuses.
        """
        message = Message.image_message(image_url="https://example.com/a.png", text="What is this?")
        assert "What is this?" == message.text()
        assert isinstance(message.content[1], ImageBlock)
        with pytest.raises(InvalidMessageError, match="image_url"):
            Message.image_message(text="no image")

    def test_from_file(self, tmp_path):
        """
        from_file picks the block type from the MIME type and embeds the bytes.
        """
        path = tmp_path / "report.pdf"
        path.write_bytes(b"%PDF-1.4")
        message = Message.from_file(path, text="Summarise")
        block = message.content[1]
        assert "document" == block.type
        assert b"%PDF-1.4" == base64.b64decode(block.media.data_base64)
        assert "application/pdf" == block.media.mime_type
        with pytest.raises(FileNotFoundError):
            Message.from_file(tmp_path / "missing.png")

    def test_from_file_refuses_what_is_not_a_regular_file(self, tmp_path):
        """
        A directory or a FIFO is refused at once (reading a FIFO with no writer
        would wait forever), with an error naming the path and what it is.
        """
        with pytest.raises(InvalidMessageError, match=r"reads regular files only; .* is a directory"):
            Message.from_file(tmp_path)
        fifo = tmp_path / "pipe"
        os.mkfifo(fifo)
        with pytest.raises(InvalidMessageError, match=r"reads regular files only; .* is a FIFO"):
            Message.from_file(fifo, mime_type="image/png")

    def test_from_file_refuses_a_file_over_the_limit(self, tmp_path):
        """
        A file over the limit (MAX_INLINE_FILE_BYTES by default, or max_bytes)
        is refused before it is read whole; one at the limit is read.
        """
        from workingctx.messages import MAX_INLINE_FILE_BYTES  # noqa: PLC0415

        path = tmp_path / "scan.png"
        path.write_bytes(b"\x89PNG" + b"\0" * 96)
        with pytest.raises(InvalidMessageError, match="holds more than 99 bytes, the limit of an inline file"):
            Message.from_file(path, max_bytes=99)
        assert 100 == Message.from_file(path, max_bytes=100).content[0].media.size_bytes
        big = tmp_path / "big.bin"
        with big.open("wb") as handle:
            handle.truncate(MAX_INLINE_FILE_BYTES + 1)  # sparse: no disk used
        with pytest.raises(InvalidMessageError, match=r"max_bytes=\.\.\."):
            Message.from_file(big)
        with pytest.raises(TypeError, match="max_bytes must be an int"):
            Message.from_file(path, max_bytes="100")  # type: ignore[arg-type]
