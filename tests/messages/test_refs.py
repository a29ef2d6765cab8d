"""
MediaRef and CacheBreakpoint: a media reference needs the field of its kind, and a cache
breakpoint's ttl is 5m, 1h or unstated.
"""

from __future__ import annotations

import pytest

from workingctx.exceptions import InvalidMessageError
from workingctx.messages import CacheBreakpoint, MediaRef, TextBlock


class TestValidation:
    def test_media_ref_needs_its_field(self):
        """
        A MediaRef whose kind's field is missing is refused.
        """
        with pytest.raises(InvalidMessageError, match=r"needs url="):
            MediaRef(kind="url")
        with pytest.raises(InvalidMessageError, match="kind must be"):
            MediaRef(kind="ftp", url="x")  # type: ignore[arg-type]


def test_cache_breakpoint_ttl_checked():
    """
    A cache breakpoint's ttl is 5m, 1h or unstated.
    """
    assert CacheBreakpoint().ttl is None
    with pytest.raises(InvalidMessageError, match="'5m', '1h' or None"):
        CacheBreakpoint("2h")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        TextBlock("x", cache="5m")  # type: ignore[arg-type]
