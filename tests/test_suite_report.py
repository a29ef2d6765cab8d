"""
Tests for the suite's own report: skipped tests are summarized in one line,
so the last screen of a run ends with whether it passed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_skips_are_summarized_in_one_line(tmp_path):
    """
    Under the project's pytest options and tests/conftest.py, 40 tests
    skipped for two reasons print no ``SKIPPED`` line each but one line
    counting them by reason, and the pass/fail line stays the last.
    """
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "tests").mkdir()
    for name in ("conftest.py", "stores.py", "sqlite_rows.py"):  # the conftest, and the store fixtures it defines
        shutil.copy(ROOT / "tests" / name, tmp_path / "tests" / name)
    (tmp_path / "tests" / "test_some.py").write_text(
        "import pytest\n"
        "@pytest.mark.parametrize('n', range(30))\n"
        "def test_server(n):\n"
        "    pytest.skip('NO REDIS SERVER: set WORKINGCTX_REDIS_URL')\n"
        "@pytest.mark.parametrize('n', range(10))\n"
        "def test_other(n):\n"
        "    pytest.skip('no chromium')\n"
        "def test_passes():\n"
        "    assert True\n",
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "tests", "-p", "no:xdist", "-p", "no:randomly"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    lines = result.stdout.strip().splitlines()
    assert 0 == result.returncode, result.stdout
    assert not [line for line in lines if line.startswith("SKIPPED")]
    assert "40 skipped: 30 NO REDIS SERVER: set WORKINGCTX_REDIS_URL; 10 no chromium (pytest -rs lists them)" in lines
    assert "1 passed, 40 skipped" in lines[-1]
