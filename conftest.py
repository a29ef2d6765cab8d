"""
Collects the examples in README.md, docs/*.md and the package's docstrings as tests,
so no example can go stale.
"""

from __future__ import annotations

from doctest import ELLIPSIS, NORMALIZE_WHITESPACE

from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser
from sybil.parsers.rest import DocTestParser

_FLAGS = ELLIPSIS | NORMALIZE_WHITESPACE

_markdown = Sybil(
    parsers=[PythonCodeBlockParser(doctest_optionflags=_FLAGS)],
    patterns=["README.md", "docs/*.md", "docs/**/*.md"],
)
_docstrings = Sybil(
    parsers=[DocTestParser(optionflags=_FLAGS)],
    patterns=["workingctx/*.py", "workingctx/**/*.py"],
    excludes=["workingctx/__main__.py"],
)

pytest_collect_file = (_markdown + _docstrings).pytest()


def pytest_xdist_make_scheduler(config: object, log: object) -> object:
    """
    Distribute the suite file by file under ``pytest -n N``, whatever ``--dist``
    says short of another explicit mode: the examples of one document share a
    namespace (an example uses names an earlier one defined), so a document must
    run whole on one worker.
    """
    from xdist.scheduler import LoadFileScheduling  # noqa: PLC0415  # only under pytest-xdist

    if getattr(getattr(config, "option", None), "dist", "load") != "load":
        return None
    return LoadFileScheduling(config, log)
