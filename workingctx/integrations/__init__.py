"""
Framework integrations: workingctx inside the agent runtimes people already use.

Each module is an optional extra and imports its framework only when used:

- :mod:`workingctx.integrations.openai_agents` (``workingctx[openai-agents]``):
  ``ContextSession``, an OpenAI Agents SDK session over any workingctx store,
  and ``input_filter``, a ``call_model_input_filter`` built from a manager.
- :mod:`workingctx.integrations.pydantic_ai` (``workingctx[pydantic-ai]``):
  ``trim_history``, a history processor for pydantic-ai's ``ProcessHistory``.
"""

__all__: list[str] = []  # each integration is imported by its own module name
