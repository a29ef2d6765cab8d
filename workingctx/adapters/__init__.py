"""
Provider adapters: wire formats in and out of workingctx, losslessly.

One module per format, each with the same five functions (``read``, ``write``,
``read_response``, ``check``, ``request_key``): :mod:`~workingctx.adapters.openai_chat`,
:mod:`~workingctx.adapters.openai_responses`, :mod:`~workingctx.adapters.anthropic`,
:mod:`~workingctx.adapters.google` and :mod:`~workingctx.adapters.langchain`.
They work on plain data and accept SDK objects by duck typing; no SDK is needed
at run time (``langchain`` imports ``langchain_core`` when called).

What ``write(..., repair=True)`` does is here for any list of messages, for
code that sends messages on its own way (a middleware handing a framework its
state's messages): :func:`data_problems` finds what no format can carry,
:func:`repair_messages` repairs a transcript, :func:`scrub_text` replaces only
the text UTF-8 cannot encode.
"""

from __future__ import annotations

from workingctx.adapters._common import Problem, ProviderError, data_problems, repair_messages, scrub_text

__all__ = ["Problem", "ProviderError", "data_problems", "repair_messages", "scrub_text"]
