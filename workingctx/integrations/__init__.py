"""
Framework integrations: one module per framework, each an optional extra that
imports its framework only when the module itself is imported.

- :mod:`workingctx.integrations.langgraph`: ``ContextSaver``, a LangGraph
  checkpointer over any workingctx store (extra ``[langgraph]``).
- :mod:`workingctx.integrations.openai_agents`: a session for the OpenAI Agents
  SDK (extra ``[openai-agents]``).
- :mod:`workingctx.integrations.pydantic_ai`: a history processor for
  pydantic-ai (extra ``[pydantic-ai]``).
- :mod:`workingctx.integrations.langchain`: a middleware for LangChain's
  ``create_agent`` (extra ``[langchain]``).

``import workingctx`` imports none of them.
"""

__all__: list[str] = []
