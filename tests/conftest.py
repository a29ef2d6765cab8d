"""
Hypothesis settings profiles: ``default`` for CI, ``quick`` for local runs
(``HYPOTHESIS_PROFILE=quick``), ``thorough`` for a long hunt.

Under ``CI=true`` a test marked ``server`` or ``browser`` that skipped (no
PostgreSQL or Redis server, or no Chromium, to run against) fails instead:
CI must run the store suite on real servers and the site in a real browser.

The fixtures every store test shares: ``stores`` (each kind of store in turn),
``persistent`` (each kind but the one in memory) and ``scratch_dir``.
"""

from __future__ import annotations

import builtins
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.stores import PERSISTENT, Stores, kind_params

settings.register_profile("default", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("quick", max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:  # noqa: ARG001  # pytest passes it by name
    """
    Turn a skipped server or browser test into a failure when ``CI=true``.
    """
    report = yield
    needs = next((m for m in ("server", "browser") if item.get_closest_marker(m) is not None), None)
    if report.skipped and os.environ.get("CI") == "true" and needs is not None:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"a {needs} test skipped under CI=true, which must run it: {reason}"
    return report


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """
    One line for every skipped test, grouped by reason, instead of one line
    each (``-rfE`` in the options leaves skips out of the short summary): the
    server tests skipped without a server would otherwise fill the last screen
    and hide the line that says whether the suite passed.
    """
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    reasons: dict[str, int] = {}
    for report in skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    grouped = "; ".join(
        f"{count} {_shorter(reason)}" for reason, count in sorted(reasons.items(), key=lambda item: -item[1])
    )
    terminalreporter.write_line(f"{len(skipped)} skipped: {grouped} (pytest -rs lists them)")


def _shorter(text: str, width: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """
    Threads switch every microsecond, so races show within a short run.
    """
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


@pytest.fixture(scope="module")
def scratch_dir() -> Iterator[Path]:
    """
    A directory of the test module's own, removed after its last test.
    """
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


@pytest.fixture(params=kind_params())
def stores(request: pytest.FixtureRequest, scratch_dir: Path) -> Iterator[Stores]:
    """
    Makes fresh stores of each kind in turn (in memory, SQLite, PostgreSQL,
    Redis), and removes what they wrote when the test ends.
    """
    made = Stores(request.param, scratch_dir)
    yield made
    made.close()


@pytest.fixture(params=kind_params(PERSISTENT))
def persistent(request: pytest.FixtureRequest, scratch_dir: Path) -> Iterator[Stores]:
    """
    The same for the stores that keep their checkpoints outside the process (SQLite, PostgreSQL, Redis).
    """
    made = Stores(request.param, scratch_dir)
    yield made
    made.close()


@pytest.fixture
def without_genai_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    """
    Imports of genai-prices fail from here on, as in a process without the ``prices`` extra.
    """
    real_import = builtins.__import__

    def refuse(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "genai_prices" or name.startswith("genai_prices."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refuse)
