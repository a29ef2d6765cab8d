"""
Prompt-cache economics of real requests: what ``ContextMiddleware`` sends an Anthropic model.

The 300-turn tool-heavy run of the cache benchmark (``bench_cache.py``: a
20,000-token system prompt, a 30,000-token window), driven through
``workingctx.integrations.langchain.ContextMiddleware`` with
``TokenBudgetContextManager(30_000, low_watermark=25_000)``, as LangChain's
``create_agent`` calls it: before every assistant message, the middleware gets
the agent's whole state and hands its request to the model. The model is a
``ChatAnthropic`` that never reaches the network: the request is captured as
``ChatAnthropic._get_request_payload`` builds it (the body the Anthropic SDK
would send), read back with ``workingctx.adapters.anthropic.read``, and
replayed request by request with ``workingctx.cache.simulate`` under
Anthropic's rules, with exactly the breakpoints the body carries.

The row reports the share of input tokens read from the cache, the input
cost against the lowest any cache plan could reach for the same requests
(``best_input_cost``) and against the requests of ``bench_cache.py``'s
strategy (c) (the same manager and ``plan()``, without LangChain), and the
most breakpoints one request carried.

    python -m benchmarks middleware
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs

from benchmarks._data import to_langchain
from benchmarks._harness import Table
from benchmarks.bench_cache import LOW, MODELS, PREFIX_TOKENS, WINDOW, _prefix_text, _turns, run_strategy
from workingctx import Message, TokenBudgetContextManager, WorkingContext
from workingctx.adapters import anthropic
from workingctx.cache import CachePlan, Simulation, plan, simulate

GROUP = "cache"
MODEL = MODELS["anthropic"]


class MiddlewareRequests:
    """
    A ``simulate`` manager whose request is the one ``ContextMiddleware`` sends
    ``ChatAnthropic``, as its request body, read back.
    """

    def __init__(self, flat: list[Message]) -> None:
        from langchain_anthropic import ChatAnthropic  # noqa: PLC0415  # the bench extra's peer
        from langchain_core.messages import SystemMessage  # noqa: PLC0415

        from workingctx.integrations.langchain import ContextMiddleware  # noqa: PLC0415  # imports langchain

        self.state = to_langchain(flat)
        self.calls: Iterator[int] = (i for i, m in enumerate(flat) if m.role == "assistant")
        self.model = ChatAnthropic(model=MODEL, api_key="offline")  # type: ignore[call-arg]  # never sent
        self.system = SystemMessage(_prefix_text())
        self.middleware = ContextMiddleware(TokenBudgetContextManager(WINDOW, low_watermark=LOW))
        self.bodies: list[dict[str, Any]] = []

    def trim_context(self, ctx: WorkingContext) -> WorkingContext:
        from langchain.agents.middleware.types import ModelRequest, ModelResponse  # noqa: PLC0415

        end = next(self.calls)

        def capture(request: Any) -> Any:
            sent = [request.system_message, *request.messages]
            self.bodies.append(request.model._get_request_payload(sent))  # noqa: SLF001  # the body it would send
            return ModelResponse(result=[self.state[end]])

        request = ModelRequest(model=self.model, messages=self.state[:end], system_message=self.system)
        self.middleware.wrap_model_call(request, capture)
        return ctx.replace_tail(anthropic.read(self.bodies[-1]).assembled())


def as_sent(ctx: WorkingContext, _previous: CachePlan | None) -> CachePlan:
    """
    The request's plan with no breakpoint of its own: only those its blocks carry.
    """
    return attrs.evolve(plan(ctx, provider="anthropic", model=MODEL), breakpoints=())


def breakpoints(body: dict[str, Any]) -> int:
    """
    The ``cache_control`` breakpoints of a request body (system, messages, top level).
    """
    blocks = [*body.get("system", [])] if isinstance(body.get("system"), list) else []
    blocks += [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
    return sum("cache_control" in b for b in blocks) + ("cache_control" in body)


def middleware_run(count: int) -> tuple[Simulation, list[dict[str, Any]]]:
    """
    The middleware's requests over *count* turns, simulated, with the request bodies.
    """
    flat = [m for turn in _turns(count) for m in turn]
    requests = MiddlewareRequests(flat)
    sim = simulate(flat, provider="anthropic", model=MODEL, manager=requests, cache=as_sent)
    return sim, requests.bodies


def run(table: Table, quick: bool) -> None:
    count = 60 if quick else 300
    size = f"{count} turns, {PREFIX_TOKENS:,}-token prefix, {WINDOW:,}-token window"
    sim, bodies = middleware_run(count)
    planned = run_strategy("c", "anthropic", _turns(count))
    table.add(
        GROUP,
        "anthropic ContextMiddleware requests (ChatAnthropic request bodies)",
        size,
        None,
        note=(
            f"{len(sim.requests)} requests, {sim.cached_share:.1%} of {sim.input_tokens:,} input tokens read from "
            f"cache; input ${sim.input_cost:.2f} on {MODEL}, {sim.input_cost / sim.best_input_cost:.1%} of the best "
            f"any plan reaches (${sim.best_input_cost:.2f}); (c) plan() without LangChain: "
            f"{planned.cached_share:.1%}, {planned.input_cost / planned.best_input_cost:.1%} of its best; "
            f"at most {max(map(breakpoints, bodies))} breakpoints a request; {sim.lookback_misses} lookback misses"
        ),
    )
