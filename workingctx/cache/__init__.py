"""
Prompt caching: the providers' rules as data, plans that hit, and what a run costs.

A provider serves the start of a request from its cache when an earlier request
began the same way. The rules that decide whether it does differ by provider and
model, and breaking one costs money silently:

* **Anthropic** caches up to *breakpoints* the client marks on content blocks:
  at most four per request, the automatic (top-level) one included; a
  breakpoint below the model's minimum prefix caches nothing; the cache looks
  for an earlier entry only about twenty blocks back from each breakpoint;
  one-hour breakpoints must come before five-minute ones; writes cost 1.25x
  (five minutes) or 2x (one hour) the input price, reads 0.1x.
* **OpenAI** caches automatically from 1,024 tokens in steps of 128 tokens;
  ``prompt_cache_key`` routes requests that share a prefix to the same cache.
* **Gemini** caches implicitly above a per-model minimum.

:data:`RULES` holds these facts (checked on :data:`RULES_AS_OF`); :func:`plan`
places breakpoints that obey them, :func:`report` says in tokens and dollars
what the next request will read, write and cost, and :func:`simulate` replays a
whole run request by request, with time passing if you say so: an entry older
than its lifetime (:attr:`CacheRules.lifetimes`) is gone and written again.

>>> from workingctx import Message, PrefixContext, WorkingContext
>>> ctx = WorkingContext(prefix=PrefixContext(system_prompt="Rules. " * 2_000))
>>> _ = ctx.append(Message("user", "First question?"))
>>> first = plan(ctx, provider="anthropic", model="claude-sonnet-4-6")
>>> [(b.message, b.block, b.ttl) for b in first.breakpoints]
[(0, 0, '1h'), (1, 0, '5m')]
"""

import typing

import attrs

from workingctx.cache._layout import Position as _Position
from workingctx.cache._layout import cache_blocks, can_carry_breakpoint
from workingctx.cache._plan import Breakpoint, CachePlan, plan, prompt_cache_key
from workingctx.cache._report import CacheReport, report
from workingctx.cache._rules import RULES, RULES_AS_OF, TTL, CacheRules
from workingctx.cache._simulate import SimulatedRequest, Simulation, simulate
from workingctx.cache._simulate import Strategy as Strategy  # a cache strategy of simulate(), outside __all__

__all__ = [
    "RULES",
    "RULES_AS_OF",
    "TTL",
    "Breakpoint",
    "CachePlan",
    "CacheReport",
    "CacheRules",
    "SimulatedRequest",
    "Simulation",
    "cache_blocks",
    "can_carry_breakpoint",
    "plan",
    "prompt_cache_key",
    "report",
    "simulate",
]

# Every class and function above is defined in a private module: say where users
# import it from, so reprs, docs and pickles name ``workingctx.cache`` and a
# stored plan still loads after the private modules move. A class's annotations
# are evaluated first, where their names are, so typing.get_type_hints and cattrs
# (to_json, structure) still read them once the class names this module.
for _name in __all__:
    _value = globals()[_name]
    if getattr(_value, "__module__", "").startswith(f"{__name__}._"):
        if attrs.has(_value):
            _value.__annotations__ = typing.get_type_hints(_value)
        _value.__module__ = __name__
del _name, _value

# A plan's layout pickles and prints its positions as it always has, as
# ``workingctx.cache._Position``, so a stored plan loads here and in earlier versions.
_Position.__module__, _Position.__qualname__ = __name__, "_Position"
