"""
The providers' own SDK types, as pydantic adapters, that the adapters' tests validate written bodies with.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from anthropic.types import MessageParam
from google.genai import types as gtypes
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputParam
from pydantic import TypeAdapter

from workingctx.adapters import anthropic, google, openai_chat, openai_responses

CHAT = TypeAdapter(list[ChatCompletionMessageParam])
ANTHROPIC = TypeAdapter(list[MessageParam])
RESPONSES = TypeAdapter(ResponseInputParam)
GEMINI = TypeAdapter(list[gtypes.Content])

VALID: dict[ModuleType, Callable[[dict[str, Any]], object]] = {
    openai_chat: lambda body: CHAT.validate_python(body["messages"]),
    openai_responses: lambda body: RESPONSES.validate_python(body["input"]),
    anthropic: lambda body: ANTHROPIC.validate_python(body["messages"]),
    google: lambda body: GEMINI.validate_python(body["contents"]),
}
"""Each provider module's check of a body it wrote, with that provider's SDK types."""
