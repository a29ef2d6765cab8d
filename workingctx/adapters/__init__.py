"""
Provider adapters: wire formats in and out of workingctx, losslessly.

One module per format, each with the same five functions (``read``, ``write``,
``read_response``, ``check``, ``request_key``): :mod:`~workingctx.adapters.openai_chat`,
:mod:`~workingctx.adapters.openai_responses`, :mod:`~workingctx.adapters.anthropic`,
:mod:`~workingctx.adapters.google` and :mod:`~workingctx.adapters.langchain`.
They work on plain data and accept SDK objects by duck typing; no SDK is needed
at run time (``langchain`` imports ``langchain_core`` when called).
"""

from __future__ import annotations

from workingctx.adapters._common import Problem, ProviderError

__all__ = ["Problem", "ProviderError"]
