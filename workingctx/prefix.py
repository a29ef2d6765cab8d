"""
The prefix: the frozen, cache-stable head of every request.

>>> from workingctx import Message, PrefixContext
>>> prefix = PrefixContext(
...     system_prompt="You are a careful research assistant.",
...     grounding=(Message("system", "Q3 pricing: input $3/Mtok."),),
... )
>>> [m.role for m in prefix.as_messages()]
['system', 'system']
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from workingctx import _checks
from workingctx._canonical import prefix_digest
from workingctx.messages import Message

__all__ = ["PrefixContext"]


def _grounding(value: object) -> tuple[Message, ...]:
    if isinstance(value, Message | str | bytes) or not isinstance(value, Iterable):
        raise _checks.wrong_type(
            value, "grounding", "a sequence of Message values", fix="wrap a single message in a tuple"
        )
    return _checks.check_items(value, "grounding", Message, "a Message", fix="wrap text as Message('system', text)")


_opt_str = _checks.text(optional=True)


@attrs.frozen(cache_hash=True)
class PrefixContext:
    """
    The system prompt, grounding messages and schema block sent first on every call.

    Frozen: assigning a field raises ``attrs.exceptions.FrozenInstanceError``,
    and no mutator of :class:`~workingctx.WorkingContext` can reach it. Changing
    the prefix means building a new one, which is exactly when the provider's
    prompt cache is lost. Equality and hash are structural.

    Args:
        system_prompt: Rendered first, as a system message; left out when None.
        grounding: Messages rendered after the system prompt, in order.
        schema_block: Rendered last, as a system message named ``schema``.
        cache_hint: Ask the provider adapters to cache the prefix when a
            request names no cache plan: ``anthropic.write`` puts a
            breakpoint on its last block, ``openai_chat.write`` and
            ``openai_responses.write`` set ``prompt_cache_key`` from its
            digest. Gemini and LangChain requests carry no such mark.
    """

    system_prompt: str | None = attrs.field(default=None, validator=_opt_str)
    grounding: tuple[Message, ...] = attrs.field(default=(), converter=_grounding)
    schema_block: str | None = attrs.field(default=None, validator=_opt_str)
    cache_hint: bool = attrs.field(default=False, validator=_checks.flag())
    _digest: str | None = attrs.field(init=False, default=None, eq=False, repr=False)

    def as_messages(self) -> list[Message]:
        """
        Render the prefix: system prompt, grounding in order, schema block.

        Returns a new list on every call, so a caller that changes it cannot
        reach the prefix.
        """
        rendered: list[Message] = []
        if self.system_prompt is not None:
            rendered.append(Message("system", self.system_prompt))
        rendered.extend(self.grounding)
        if self.schema_block is not None:
            rendered.append(Message("system", self.schema_block, name="schema"))
        return rendered

    def digest(self) -> str:
        """
        The hex sha256 of the prefix's canonical encoding, stable across processes.
        """
        if self._digest is None:
            object.__setattr__(self, "_digest", prefix_digest(self))
        return self._digest  # type: ignore[return-value]  # set just above
