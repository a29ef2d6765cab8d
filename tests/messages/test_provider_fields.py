"""
How images in the provider fields of a message count in token estimates: a screenshot
inside a tool result, and an image sent with detail="low".
"""

from __future__ import annotations

import base64

from workingctx import Message
from workingctx.messages import ImageBlock, MediaRef, TextBlock, ToolResultBlock
from workingctx.tokens import estimate_message_tokens

SCREENSHOT = base64.b64encode(bytes(range(256)) * 400).decode("ascii")


def test_screenshot_in_a_tool_result_counts_as_an_image():
    """
    A screenshot returned inside a tool result counts as one image, not as its base64 text.
    """
    image = ImageBlock(MediaRef(kind="data", data_base64=SCREENSHOT, mime_type="image/png"))
    as_blocks = Message("user", [ToolResultBlock("c1", content=[TextBlock("done"), image])])
    as_text = Message("user", [ToolResultBlock("c1", output=SCREENSHOT)])
    blocks_tokens = estimate_message_tokens([as_blocks])
    assert blocks_tokens < 1_000
    assert estimate_message_tokens([as_text]) > 20 * blocks_tokens


def test_low_detail_image_counts_85():
    """
    An image sent with detail="low" counts as the 85-token base, whatever its size.
    """
    high = ImageBlock(MediaRef(url="https://example.com/a.png", width=2048, height=2048))
    low = ImageBlock(MediaRef(url="https://example.com/a.png", width=2048, height=2048), detail="low")
    assert estimate_message_tokens([Message("user", [low])]) < estimate_message_tokens([Message("user", [high])])
