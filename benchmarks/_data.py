"""
Deterministic sample transcripts for the benchmarks, and a converter to LangChain messages.

``tool_heavy(n)`` is the normal agentic shape: a system prompt, then turns of a
user question, one or two assistant messages asking for 1-3 parallel tool calls
with realistic JSON arguments, a tool result of a few hundred characters per
call, and a final answer. Every call has its result, so the transcript is valid
for any provider; the same ``(n, seed)`` always gives equal messages.
"""

from __future__ import annotations

import random
from typing import Any

from workingctx.frozen import thaw
from workingctx.messages import Message, Role, ToolCall

__all__ = ["to_langchain", "tool_heavy"]

_SYSTEM = (
    "You are a careful site-reliability assistant. Use the tools to check facts before answering; "
    "cite the tool output you relied on, and say so when a tool fails."
)

_HOSTS = ["api.example.com", "auth.example.com", "cdn.example.net", "db-01.internal", "queue.internal"]
_CITIES = ["Lisbon", "Osaka", "Toronto", "Nairobi", "Reykjavik", "Santiago"]
_TABLES = ["orders", "invoices", "customers", "shipments", "refunds"]
_WORDS = (  # noqa: SIM905  # one readable line of sample vocabulary
    "certificate expiry latency error budget deploy rollback region replica quorum timeout retry "
    "pricing invoice refund customer shipment queue backlog throughput cache miss warm cold shard"
).split()


def _sentence(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(_WORDS) for _ in range(words))
    return text[0].upper() + text[1:] + "."


def _call(rng: random.Random, call_id: str) -> tuple[ToolCall, str]:
    """
    One tool call with realistic arguments, and the text of its result.
    """
    kind = rng.randrange(5)
    if kind == 0:
        host = rng.choice(_HOSTS)
        args: dict[str, Any] = {"host": host, "port": rng.choice([443, 8443]), "checks": ["expiry", "chain", "sni"]}
        result = (
            f"subject=CN={host}\nissuer=C=US, O=Let's Encrypt, CN=R11\n"
            f"notBefore=2026-0{rng.randint(1, 9)}-1{rng.randint(0, 9)} 00:00:00 GMT\n"
            f"notAfter=2026-1{rng.randint(0, 2)}-0{rng.randint(1, 9)} 23:59:59 GMT\n"
            "verify return code: 0 (ok)\nchain depth=2, all certificates valid; OCSP stapling enabled; "
            f"handshake {rng.randint(20, 400)} ms"
        )
        return ToolCall(call_id, "openssl_check", args), result
    if kind == 1:
        table = rng.choice(_TABLES)
        args = {
            "database": "analytics",
            # Sample text of a tool call's arguments; never executed.
            "query": f"SELECT status, count(*) AS n, avg(amount) FROM {table} "  # noqa: S608  # sample text, never run
            f"WHERE created_at >= now() - interval '{rng.randint(1, 30)} days' GROUP BY status ORDER BY n DESC",
            "timeout_s": 30,
        }
        rows = "\n".join(
            f"{status:<10} | {rng.randint(10, 90000):>6} | {rng.uniform(5, 900):>8.2f}"
            for status in ("paid", "pending", "failed", "refunded", "disputed")
        )
        header = "status     |      n |  avg\n-----------+--------+---------"
        result = f"{header}\n{rows}\n(5 rows, {rng.randint(3, 900)} ms)"
        return ToolCall(call_id, "run_sql", args), result
    if kind == 2:
        args = {"query": _sentence(rng, rng.randint(4, 9)).rstrip("."), "max_results": rng.choice([3, 5, 10])}
        hits = "\n".join(
            f"{i + 1}. https://docs.example.org/{rng.choice(_WORDS)}/{rng.randint(100, 999)} — {_sentence(rng, 12)}"
            for i in range(3)
        )
        return ToolCall(call_id, "search_docs", args), hits
    if kind == 3:
        host = rng.choice(_HOSTS)
        args = {
            "url": f"https://{host}/v1/health?verbose=true",
            "method": "GET",
            "headers": {"Accept": "application/json", "X-Request-Id": f"req-{rng.getrandbits(48):012x}"},
        }
        result = (
            '{"status": "degraded", "checks": {"db": {"ok": true, "latency_ms": '
            f"{rng.randint(1, 80)}"
            '}, "cache": {"ok": false, "error": "connection refused"}, "queue": {"ok": true, "depth": '
            f"{rng.randint(0, 5000)}"
            '}}, "version": "2.'
            f'{rng.randint(0, 40)}.{rng.randint(0, 9)}", "region": "eu-west-1", "uptime_s": {rng.randint(1, 10**6)}}}'
        )
        return ToolCall(call_id, "http_get", args), result
    city = rng.choice(_CITIES)
    args = {"city": city, "units": rng.choice(["metric", "imperial"]), "days": rng.randint(1, 5)}
    days = "; ".join(
        f"day {d + 1}: {rng.randint(-5, 35)}°, {rng.choice(['rain', 'sun', 'cloud', 'wind'])}, "
        f"humidity {rng.randint(20, 99)}%"
        for d in range(args["days"])
    )
    return ToolCall(call_id, "get_weather", args), f"Forecast for {city}: {days}. Source: national weather service."


def _turn(rng: random.Random, turn: int, prefix: str = "call_") -> list[Message]:
    """
    One user turn: a question, one or two tool exchanges, a final answer.
    """
    out = [Message("user", _sentence(rng, rng.randint(6, 18)).rstrip(".") + "?")]
    for step in range(rng.randint(1, 2)):
        pairs = [_call(rng, f"{prefix}{turn}_{step}_{k}") for k in range(rng.randint(1, 3))]
        thought = _sentence(rng, rng.randint(3, 10)) if rng.random() < 0.4 else ""
        out.append(Message("assistant", thought, tool_calls=tuple(call for call, _ in pairs)))
        out.extend(Message("tool", result, tool_call_id=call.id, name=call.name) for call, result in pairs)
    out.append(Message("assistant", " ".join(_sentence(rng, rng.randint(8, 20)) for _ in range(rng.randint(1, 4)))))
    return out


def tool_heavy(n: int, seed: int = 0) -> list[Message]:
    """
    Exactly *n* messages of a valid, tool-heavy transcript; deterministic in (*n*, *seed*).

    Whole turns are kept; when the next turn would not fit, the rest is filled
    with plain user/assistant exchanges, so no tool call is left without its result.
    Call ids are unique per seed (transcripts of two seeds can be merged).
    """
    if n <= 0:
        return []
    rng = random.Random(seed)
    out = [Message("system", _SYSTEM)]
    turn = 0
    while True:
        nxt = _turn(rng, turn, f"call_s{seed}_" if seed else "call_")
        if len(out) + len(nxt) > n:
            break
        out.extend(nxt)
        turn += 1
    while len(out) < n:
        role: Role = "user" if out[-1].role != "user" else "assistant"
        out.append(Message(role, _sentence(rng, rng.randint(5, 15))))
    return out


def to_langchain(messages: list[Message]) -> list[Any]:
    """
    The same transcript as LangChain messages (System/Human/AI with tool calls/Tool).

    Content blocks are flattened to their text; only string content appears in
    the benchmark transcripts.
    """
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage  # noqa: PLC0415

    out: list[Any] = []
    for message in messages:
        text = message.text()
        if message.role == "system":
            out.append(SystemMessage(text, name=message.name))
        elif message.role == "user":
            out.append(HumanMessage(text, name=message.name))
        elif message.role == "assistant":
            calls = [{"name": c.name, "args": thaw(c.arguments), "id": c.id} for c in message.tool_calls]
            out.append(AIMessage(text, tool_calls=calls, name=message.name))
        else:
            out.append(ToolMessage(text, tool_call_id=message.tool_call_id or "", name=message.name))
    return out
