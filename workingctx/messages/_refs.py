"""
References: where media lives (``MediaRef``), the source of a citation
(``AnnotationRef``) and a prompt-cache breakpoint (``CacheBreakpoint``).
"""

from __future__ import annotations

from typing import Literal

import attrs

from workingctx.exceptions import InvalidMessageError
from workingctx.messages._fields import _one_of, _opt_int, _opt_str

__all__ = ["STORE_URL_PREFIX", "AnnotationRef", "CacheBreakpoint", "MediaRef", "image_type"]


@attrs.frozen(cache_hash=True)
class MediaRef:
    """
    A pointer to binary media: by URL, by a provider's file id, inline base64,
    or in a media store.

    ``kind`` says which of ``url``, ``file_id`` or ``data_base64`` holds it, and
    that field must be set. A ``"store"`` reference names bytes kept in a
    :mod:`workingctx.media` store by their content: its ``url`` is
    ``workingctx://media/<sha256>`` and its ``sha256`` is that same hex digest;
    make one with a store's ``put``, never by hand.

    >>> MediaRef(kind="url", url="https://example.com/a.png", mime_type="image/png").kind
    'url'
    """

    kind: Literal["url", "file_id", "data", "store"] = attrs.field(
        default="url", validator=_one_of("url", "file_id", "data", "store")
    )
    url: str | None = attrs.field(default=None, validator=_opt_str)
    file_id: str | None = attrs.field(default=None, validator=_opt_str)
    data_base64: str | None = attrs.field(default=None, validator=_opt_str)
    mime_type: str | None = attrs.field(default=None, validator=_opt_str)
    size_bytes: int | None = attrs.field(default=None, validator=_opt_int)
    sha256: str | None = attrs.field(default=None, validator=_opt_str)
    filename: str | None = attrs.field(default=None, validator=_opt_str)
    width: int | None = attrs.field(default=None, validator=_opt_int)
    height: int | None = attrs.field(default=None, validator=_opt_int)
    duration_ms: int | None = attrs.field(default=None, validator=_opt_int)
    page: int | None = attrs.field(default=None, validator=_opt_int)

    def __attrs_post_init__(self) -> None:
        field = {"url": "url", "file_id": "file_id", "data": "data_base64", "store": "url"}.get(self.kind)
        if field is None:
            msg = f"MediaRef kind must be 'url', 'file_id', 'data' or 'store', got {self.kind!r}"
            raise InvalidMessageError(msg)
        if getattr(self, field) is None:
            msg = (
                f"MediaRef(kind={self.kind!r}) needs {field}=...; "
                "set it, or pick the kind that matches the field you have"
            )
            raise InvalidMessageError(msg)
        if self.kind == "store":
            _check_store_ref(self)


_IMAGE_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", 0, "image/png"),
    (b"\xff\xd8\xff", 0, "image/jpeg"),
    (b"GIF87a", 0, "image/gif"),
    (b"GIF89a", 0, "image/gif"),
    (b"WEBP", 8, "image/webp"),  # after "RIFF" and the size
)


def image_type(data: bytes) -> str | None:
    """
    The MIME type the signature of *data* says, for the image types every
    provider takes (PNG, JPEG, GIF, WebP); None for other bytes. A provider
    refuses an image labelled with another type than its bytes'.

    >>> image_type(b"GIF89a"), image_type(b"%PDF-1.7")
    ('image/gif', None)
    """
    for signature, offset, kind in _IMAGE_SIGNATURES:
        if data[offset : offset + len(signature)] == signature and (offset == 0 or data.startswith(b"RIFF")):
            return kind
    return None


STORE_URL_PREFIX = "workingctx://media/"
"""The URL scheme and path of a ``MediaRef`` of kind ``"store"``: the sha256 follows it."""

_HEX = frozenset("0123456789abcdef")


def _check_store_ref(ref: MediaRef) -> None:
    sha = ref.sha256
    if sha is None or len(sha) != 64 or not _HEX.issuperset(sha):  # a sha256 has 64 hex digits
        msg = (
            f"MediaRef(kind='store') needs sha256= the 64 lower-case hex digits of the content, got {sha!r}; "
            "make store references with a media store's put()"
        )
        raise InvalidMessageError(msg)
    if ref.url != STORE_URL_PREFIX + sha:
        msg = (
            f"MediaRef(kind='store') has url={ref.url!r}, which does not name its sha256 {sha!r}; "
            f"the url must be {STORE_URL_PREFIX + sha!r}"
        )
        raise InvalidMessageError(msg)


@attrs.frozen(cache_hash=True)
class AnnotationRef:
    """
    The source of a citation or note.

    >>> AnnotationRef(url="https://arxiv.org/abs/2303.08774", page=1).page
    1
    """

    url: str | None = attrs.field(default=None, validator=_opt_str)
    file_id: str | None = attrs.field(default=None, validator=_opt_str)
    page: int | None = attrs.field(default=None, validator=_opt_int)
    index: int | None = attrs.field(default=None, validator=_opt_int)
    title: str | None = attrs.field(default=None, validator=_opt_str)


@attrs.frozen(cache_hash=True)
class CacheBreakpoint:
    """
    A prompt-cache breakpoint set on a content block: the provider caches the
    request up to and including this block (Anthropic's ``cache_control``).

    ``ttl`` is ``"5m"`` or ``"1h"``, or None to leave the provider's default
    (five minutes) unstated.

    >>> CacheBreakpoint("1h").ttl
    '1h'
    """

    ttl: Literal["5m", "1h"] | None = attrs.field(default=None, validator=_one_of("5m", "1h", None))
