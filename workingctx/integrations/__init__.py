"""
Agent runtimes, each in its own module and behind its own extra; importing
``workingctx`` imports none of them.

* :mod:`workingctx.integrations.langchain`: LangChain v1 agent middleware
  (``create_agent(..., middleware=[ContextMiddleware(manager)])``), extra ``[langchain]``.
"""

__all__: list[str] = []
