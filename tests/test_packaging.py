"""
Tests of what users install: the sdist and the wheel hold every module and data
file, the version has one source, and the suite imports the installed package.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

import workingctx

ROOT = Path(__file__).resolve().parents[1]


def _shipped_files() -> set[str]:
    """
    Every module and data file of the package in the checkout, as paths relative
    to the checkout (``workingctx/scopes/_algebra.py``).
    """
    package = ROOT / "workingctx"
    return {
        path.relative_to(ROOT).as_posix()
        for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """
    The sdist and the wheel built from it, as ``python -m build`` makes them.
    """
    if not (ROOT / "pyproject.toml").is_file():
        pytest.skip(f"no checkout beside the tests at {ROOT}")
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert 0 == result.returncode, result.stdout + result.stderr
    (sdist,) = out.glob("workingctx-*.tar.gz")
    (wheel,) = out.glob("workingctx-*.whl")
    return sdist, wheel


class TestDistributions:
    def test_wheel_holds_every_module_and_data_file(self, built):
        """
        Every file under ``workingctx/`` (modules of every subpackage, ``py.typed``,
        the sample data) is in the wheel, at the same path.
        """
        _, wheel = built
        names = set(zipfile.ZipFile(wheel).namelist())
        missing = sorted(_shipped_files() - names)
        assert [] == missing

    def test_sdist_holds_every_module_and_data_file(self, built):
        """
        The sdist holds the same files under its top directory, so a wheel built
        from it (as pip does) is complete too.
        """
        sdist, _ = built
        with tarfile.open(sdist) as archive:
            top = archive.getnames()[0].split("/")[0]
            names = {name.removeprefix(f"{top}/") for name in archive.getnames()}
        missing = sorted(_shipped_files() - names)
        assert [] == missing

    def test_wheel_version_is_the_package_version(self, built):
        """
        The version is written once (``workingctx/_version.py``): the wheel's
        metadata carries the same one the package reports.
        """
        _, wheel = built
        assert wheel.name.startswith(f"workingctx-{workingctx.__version__}-")


class TestInstalledPackage:
    def test_metadata_version_matches(self):
        """
        The installed distribution's metadata and ``workingctx.__version__`` agree.
        """
        assert metadata.version("workingctx") == workingctx.__version__

    @pytest.mark.skipif(
        "WORKINGCTX_TESTS_INSTALLED" not in os.environ,
        reason="scripts/test sets WORKINGCTX_TESTS_INSTALLED when it runs the suite against the installed wheel",
    )
    def test_suite_imports_the_installed_wheel(self):
        """
        Under ``scripts/test`` the package under test is the one installed in the
        test environment, not the checkout's source tree.
        """
        venv = Path(os.environ["WORKINGCTX_TESTS_INSTALLED"]).resolve()
        where = Path(workingctx.__file__).resolve()
        assert where.is_relative_to(venv), where
        assert not where.is_relative_to(ROOT), where

    def test_program_runs_from_the_installed_package(self, tmp_path):
        """
        ``python -m workingctx`` works from a directory that holds no checkout.
        """
        result = subprocess.run(
            [sys.executable, "-m", "workingctx"],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            cwd=tmp_path,
        )
        assert 0 == result.returncode, result.stderr
        assert "snapshot digest:" in result.stdout


def test_the_all_extra_holds_every_feature_extra():
    """
    ``pip install ".[all]"`` installs every optional feature: the ``all`` extra
    names every extra but the tool sets (``dev``, ``bench``, ``docs``), and the
    README's install table lists every extra.
    """
    import tomllib  # noqa: PLC0415

    if not (ROOT / "pyproject.toml").is_file():
        pytest.skip(f"no checkout beside the tests at {ROOT}")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    (everything,) = extras["all"]
    named = set(everything.removeprefix("workingctx[").removesuffix("]").split(","))
    assert set(extras) - {"all", "dev", "bench", "docs"} == named
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for extra in extras:
        assert f"| `{extra}` |" in readme, extra
