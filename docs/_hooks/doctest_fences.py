"""
A griffe extension for the API reference: each run of ``>>>`` example lines in
a docstring (the prompts, their continuation lines and the output after them)
is shown as a ``pycon`` code block, as the test suite runs it, instead of being
read as Markdown, where ``['a', 'b']`` in an output looks like a link; and a
cross-reference role (``:class:`~workingctx.Usage```) is shown as the code it names.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj):`(~?)([^`]+)`")


def _code(found: re.Match[str]) -> str:
    short, name = found.groups()
    return f"`{name.rpartition('.')[2] if short else name}`"


def unrole(text: str) -> str:
    """
    *text* with each Sphinx cross-reference role written as inline code.

    >>> unrole("a :class:`~workingctx.Usage` and :func:`workingctx.pricing.cost`")
    'a `Usage` and `workingctx.pricing.cost`'
    """
    return _ROLE.sub(_code, text)


def fence(text: str) -> str:
    """
    *text* with every run of doctest lines inside a fenced ``pycon`` block of the same indentation.

    >>> print(fence("Summary.\\n\\n>>> [1, 2]\\n[1, 2]\\n\\nAfter."))
    Summary.
    <BLANKLINE>
    ```pycon
    >>> [1, 2]
    [1, 2]
    ```
    <BLANKLINE>
    After.
    """
    out: list[str] = []
    lines = text.splitlines()
    position = 0
    inside_fence = False
    while position < len(lines):
        line = lines[position]
        stripped = line.lstrip()
        if stripped.startswith("```"):
            inside_fence = not inside_fence
        if inside_fence or not stripped.startswith(">>>"):
            out.append(line)
            position += 1
            continue
        indent = line[: len(line) - len(stripped)]
        out.append(f"{indent}```pycon")
        while position < len(lines) and lines[position].strip():
            out.append(lines[position])
            position += 1
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    """
    Fence the doctest examples of every docstring griffe loads.
    """

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:  # noqa: ARG002  # griffe passes more by name
        """
        Fence the examples of *obj*'s docstring.
        """
        if obj.docstring is not None:
            obj.docstring.value = unrole(fence(obj.docstring.value))
