"""
Messages, tool calls, content blocks and token usage: the values of a transcript.

Every class here is a frozen attrs value. Two values built from the same data
are equal and hash equal in every process: there are no random ids and no
timestamps, so a transcript can serve as a cache key.

>>> from workingctx import Message, ToolCall
>>> Message("user", "hi") == Message.user("hi")
True
>>> call = ToolCall("c1", "lookup", {"q": "cert"})
>>> Message.assistant(tool_calls=(call,)).tool_calls[0].arguments
{'q': 'cert'}
"""

import typing

# Re-exported "as" themselves and kept out of __all__: BLOCK_TYPES, STORE_URL_PREFIX, _as_tuple, asked_id,
# answered_id, item_call_ids, calls_of, tool_answers, check_messages and image_type serve the rest of workingctx.
from workingctx.messages._blocks import (
    BLOCK_TYPES as BLOCK_TYPES,
)
from workingctx.messages._blocks import (
    AnnotationBlock,
    AudioBlock,
    ContentBlock,
    DataBlock,
    DocumentBlock,
    ErrorBlock,
    ImageBlock,
    ProviderBlock,
    ReasoningBlock,
    RemoteToolCallBlock,
    TextBlock,
    ToolCall,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)
from workingctx.messages._blocks import answered_id as answered_id
from workingctx.messages._blocks import asked_id as asked_id
from workingctx.messages._blocks import item_call_ids as item_call_ids
from workingctx.messages._fields import _as_tuple as _as_tuple
from workingctx.messages._files import MAX_INLINE_FILE_BYTES
from workingctx.messages._message import ROLES, Message, Role
from workingctx.messages._message import calls_of as calls_of
from workingctx.messages._message import check_messages as check_messages
from workingctx.messages._message import tool_answers as tool_answers
from workingctx.messages._refs import STORE_URL_PREFIX as STORE_URL_PREFIX
from workingctx.messages._refs import AnnotationRef, CacheBreakpoint, MediaRef
from workingctx.messages._refs import image_type as image_type
from workingctx.messages._usage import Usage

__all__ = [
    "MAX_INLINE_FILE_BYTES",
    "ROLES",
    "AnnotationBlock",
    "AnnotationRef",
    "AudioBlock",
    "CacheBreakpoint",
    "ContentBlock",
    "DataBlock",
    "DocumentBlock",
    "ErrorBlock",
    "ImageBlock",
    "MediaRef",
    "Message",
    "ProviderBlock",
    "ReasoningBlock",
    "RemoteToolCallBlock",
    "Role",
    "TextBlock",
    "ToolCall",
    "ToolCallBlock",
    "ToolResultBlock",
    "Usage",
    "VideoBlock",
]

# Every class above is defined in a private module: say where users import it
# from, so reprs, docs, pickles and digests name ``workingctx.messages`` (a
# message's digest names the classes of its blocks, so it must not change when
# the private modules move). The annotations are evaluated first, in the module
# that wrote them, so typing.get_type_hints (and cattrs) still read them here.
for _name in __all__:
    _value = globals()[_name]
    if isinstance(_value, type) and _value.__module__.startswith(f"{__name__}._"):
        _value.__annotations__ = typing.get_type_hints(_value)
        _value.__module__ = __name__
del _name, _value
