"""
The shipped samples, the ``--json`` schemas and the ``workingctx`` command run
in-process, for the command line's tests.
"""

from __future__ import annotations

import json
from importlib import resources

import jsonschema

from workingctx.cli import main

SAMPLES = resources.files("workingctx").joinpath("data/samples")
SCHEMAS = json.loads(resources.files("workingctx").joinpath("data/cli_schema.json").read_text(encoding="utf-8"))
MODELS = {"openai": "gpt-4.1", "anthropic": "claude-sonnet-4-6", "gemini": "gemini-2.5-flash"}


def sample(fmt: str, suffix: str = "json") -> str:
    """
    The path of the shipped sample in format *fmt*.
    """
    return str(SAMPLES.joinpath(f"incident.{fmt}.{suffix}"))


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """
    Run the command in-process; return its exit status, standard output and standard error.
    """
    try:
        status = main(list(argv))
    except SystemExit as exc:
        status = int(exc.code or 0)
    out = capsys.readouterr()
    return status, out.out, out.err


def run_json(capsys, command: str, *argv: str) -> dict:
    """
    Run a command with ``--json``, check its output against the command's schema and return it.
    """
    status, out, err = run(capsys, command, *argv, "--json")
    assert status in {0, 1}, err
    facts = json.loads(out)
    jsonschema.validate(facts, SCHEMAS[command])
    return facts
