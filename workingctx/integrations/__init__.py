"""
Agent runtimes, each in its own module and behind its own extra; importing
``workingctx`` imports none of them.

* :mod:`workingctx.integrations.langgraph`: ``ContextSaver``, a LangGraph checkpointer over any
  workingctx store (``graph.compile(checkpointer=ContextSaver(store))``), extra ``[langgraph]``.
* :mod:`workingctx.integrations.langchain`: LangChain v1 agent middleware
  (``create_agent(..., middleware=[ContextMiddleware(manager)])``), extra ``[langchain]``.
* :mod:`workingctx.integrations.openai_agents`: an OpenAI Agents SDK session over any
  workingctx store (``Runner.run(agent, input, session=ContextSession(id, store))``) and a
  ``call_model_input_filter`` built from a manager (``input_filter(manager)``), extra ``[openai-agents]``.
* :mod:`workingctx.integrations.pydantic_ai`: a pydantic-ai history processor
  (``Agent(model, capabilities=[ProcessHistory(trim_history(manager))])``), extra ``[pydantic-ai]``.
"""

__all__: list[str] = []
