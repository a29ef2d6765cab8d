"""
Tests for the ``workingctx`` command's arguments and runs: bad usage reported
with exit status 2, the provider and model each request is priced under,
``--help`` against docs/cli.md, and the program run in a process of its own.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from anthropic.types import MessageParam
from google.genai import types
from openai.types.chat import ChatCompletionMessageParam
from pydantic import TypeAdapter

import workingctx
import workingctx.cli as cli_module
from tests.cli.commands import MODELS, run, run_json, sample
from workingctx.cli import main, model_provider
from workingctx.cli._files import FORMATS, read_file


class TestBadUsage:
    @pytest.mark.parametrize(
        "argv",
        [
            ["frobnicate"],
            ["trim", "x.json"],
            ["trim", "x.json", "--budget", "-5"],
            ["trim", "x.json", "--budget", "ten"],
            ["replay", sample("anthropic")],
            ["check", "x.json", "--provider", "acme"],
            ["inspect", "x.json", "--format", "yaml"],
        ],
    )
    def test_status_2(self, capsys, argv):
        """
        A command line that asks for something impossible exits with status 2 and says why.
        """
        status, _, err = run(capsys, *argv)
        assert 2 == status
        assert "error:" in err

    @pytest.mark.parametrize("command", ["replay", "report"])
    def test_a_window_on_a_log(self, capsys, tmp_path, command):
        """
        --window on a log of requests (replayed as sent, never trimmed) is a usage error naming the log's size.
        """
        extra = ["-o", str(tmp_path / "page.html")] if command == "report" else []
        log = sample("openai_chat", "jsonl")
        status, out, err = run(capsys, command, log, "--model", MODELS["openai"], "--window", "2000", *extra)
        assert (2, "") == (status, out)
        assert "--window 2000" in err
        assert "is a log of 8 requests" in err
        assert not (tmp_path / "page.html").exists()

    @pytest.mark.parametrize("command", ["replay", "inspect"])
    def test_a_model_of_another_provider(self, capsys, command):
        """
        A model of another provider than the file's is a usage error naming both and the fix;
        --provider says whose cache to replay it under.
        """
        status, out, err = run(capsys, command, sample("anthropic"), "--model", "gpt-4.1")
        assert (2, "") == (status, out)
        assert "--model gpt-4.1 is a model of openai" in err
        assert "is a request to anthropic" in err
        verb = {"replay": "replay it under openai's cache", "inspect": "inspect it under openai's rules"}[command]
        assert f"pass --provider openai to {verb}, or --model with a model of anthropic" in err
        facts = run_json(capsys, command, sample("anthropic"), "--model", "gpt-4.1", "--provider", "openai")
        assert "openai" == facts["provider"]

    @pytest.mark.parametrize(
        ("model", "provider"),
        [
            ("claude-sonnet-4-6", "anthropic"),
            ("anthropic/claude-haiku-4-5", "anthropic"),
            ("gpt-5", "openai"),
            ("openai:gpt-4.1-mini", "openai"),
            ("o3-mini", "openai"),
            ("gemini-2.5-pro", "gemini"),
            ("GPT-5", "openai"),
            ("my-finetune", None),
            ("", None),
        ],
    )
    def test_model_families(self, model, provider):
        """
        A model's provider is read from its family, with or without a provider prefix; unknown names have none.
        """
        assert provider == model_provider(model)

    @pytest.mark.parametrize(
        ("gap", "expected"),
        [("-1", "zero or more"), ("nan", "finite"), ("soon", "'soon'"), ("1e308", "1e308 seconds: give")],
    )
    def test_a_bad_gap(self, capsys, gap, expected):
        """
        A negative, non-finite or non-numeric ``--gap`` is a usage error naming the value.
        """
        status, _, err = run(capsys, "replay", sample("anthropic"), "--model", MODELS["anthropic"], "--gap", gap)
        assert 2 == status
        assert "--gap" in err
        assert expected in err

    @pytest.mark.parametrize("command", ["replay", "report"])
    def test_a_low_watermark_that_cannot_apply(self, capsys, tmp_path, command):
        """
        ``--low`` above ``--window``, or without one, is a usage error naming
        the values (exit status 2), as it is for ``trim``; no page is written.
        """
        page = tmp_path / "r.html"
        output = ["-o", str(page)] if command == "report" else []
        base = [command, sample("anthropic"), "--model", MODELS["anthropic"], *output]
        status, _, err = run(capsys, *base, "--window", "100", "--low", "500")
        assert (2, True) == (status, "low_watermark=500 is above max_tokens=100" in err)
        status, _, err = run(capsys, *base, "--low", "500")
        assert (2, True) == (status, "--low 500 needs --window" in err)
        assert not page.exists()

    def test_unknown_model_and_pin(self, capsys):
        """
        An unknown model and a pin that is no scope are usage errors (status 2), named.
        """
        status, _, err = run(capsys, "replay", sample("anthropic"), "--model", "no-such-model-1")
        assert 2 == status
        assert "no-such-model-1" in err
        status, _, err = run(capsys, "trim", sample("anthropic"), "--budget", "100", "--pin", "first")
        assert 2 == status
        assert "--pin 'first'" in err

    @pytest.mark.parametrize("role", ["User", "human", "developer", "model"])
    def test_a_pin_of_no_role_is_bad_usage(self, capsys, role):
        """
        ``--pin role:ROLE`` of a role no message has (a capital, LangChain's
        "human", OpenAI's "developer", Gemini's "model") is bad usage (status
        2) naming the option and the roles there are; it was reported as bad
        input (status 1) without naming ``--pin``.
        """
        status, out, err = run(capsys, "trim", sample("anthropic"), "--budget", "100", "--pin", f"role:{role}")
        assert (2, "") == (status, out)
        assert err.startswith(f"error: --pin 'role:{role}': '{role}' is no role; ")
        assert "role:user" in err
        assert 1 == err.count("\n")


def test_trim_of_a_log_onto_itself_is_refused_and_the_log_kept(capsys, tmp_path):
    """
    ``trim LOG.jsonl -o LOG.jsonl`` is bad usage (status 2) and leaves the log
    as it was: it wrote the last request, trimmed, over the log of every
    request. A single request body may still be trimmed in place.
    """
    log = tmp_path / "requests.jsonl"
    shutil.copyfile(sample("openai_chat", "jsonl"), log)
    before = log.read_bytes()
    status, out, err = run(capsys, "trim", str(log), "--budget", "1500", "-o", str(log))
    assert (2, "") == (status, out)
    assert err.startswith(f"error: -o {log} is the log trim reads, of 8 requests: ")
    assert before == log.read_bytes()
    body = tmp_path / "request.json"
    shutil.copyfile(sample("openai_chat"), body)
    status, _, _ = run(capsys, "trim", str(body), "--budget", "1500", "-o", str(body))
    assert 0 == status
    assert read_file(str(body)).last.size() < read_file(sample("openai_chat")).last.size()


def program(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """
    ``python -m workingctx ARGV`` run in a process of its own, from *cwd*.
    """
    return subprocess.run(
        [sys.executable, "-m", "workingctx", *argv], capture_output=True, text=True, check=False, timeout=120, cwd=cwd
    )


class TestProgram:
    def test_console_script_and_module_agree(self, tmp_path):
        """
        ``python -m workingctx check FILE`` runs the same command as the console script.
        """
        result = program(tmp_path, "check", sample("openai_chat"), "--json")
        assert 0 == result.returncode, result.stderr
        assert json.loads(result.stdout)["valid"]

    @pytest.mark.parametrize("entry", ["module", "script"])
    def test_version_prints_the_installed_version(self, tmp_path, entry):
        """
        ``workingctx --version`` and ``python -m workingctx --version`` print
        the version of workingctx and exit 0; ``--version`` was an unknown option.
        """
        script = Path(sys.executable).with_name("workingctx")
        command = [sys.executable, "-m", "workingctx"] if entry == "module" else [str(script)]
        result = subprocess.run(
            [*command, "--version"], capture_output=True, text=True, check=False, timeout=120, cwd=tmp_path
        )
        assert (0, f"workingctx {workingctx.__version__}\n", "") == (result.returncode, result.stdout, result.stderr)

    @pytest.mark.parametrize(
        ("argv", "status"),
        [
            (["replay", "openai_chat", "--model", "gpt-4.1", "--window", "2000"], 0),
            (["check", "anthropic"], 0),
            (["replay", "workingctx"], 2),  # refused once the file is read: no provider to replay with
        ],
    )
    @pytest.mark.parametrize("young", [700, 50_000])
    def test_a_command_run_in_process_leaves_the_garbage_collector_as_it_found_it(self, capsys, argv, status, young):
        """
        A command lets the garbage collector run less often while it runs (at
        10,000 new objects, or the caller's threshold when it is higher) and
        sets the thresholds back when it ends, failing or not.
        """
        argv = [argv[0], sample(argv[1]), *argv[2:]]
        during: list[tuple[int, int, int]] = []
        provider = cli_module._provider  # noqa: SLF001  # a step every command takes once its file is read

        def seen(*args: object) -> str | None:
            during.append(gc.get_threshold())
            return provider(*args)  # type: ignore[arg-type]

        before = gc.get_threshold()
        try:
            gc.set_threshold(young, 11, 12)
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(cli_module, "_provider", seen)
                assert status == run(capsys, *argv)[0]
            after = gc.get_threshold()
        finally:
            gc.set_threshold(*before)
        assert ((max(young, cli_module.YOUNG_OBJECTS), 11, 12), (young, 11, 12)) == (during[0], after)

    def test_a_warning_repeated_at_every_request_is_shown_once(self, tmp_path):
        """
        ``replay`` with a window below the prefix, where the managers warn at
        every request that they cannot cut down to their watermark, shows the
        warning once after ``warning:`` and then how many more came; it showed
        sixteen bare lines, one per request of each trimming strategy.
        """
        argv = ["replay", sample("openai_chat"), "--model", "gpt-4.1", "--window", "100", "--low", "10"]
        result = program(tmp_path, *argv)
        assert 0 == result.returncode, result.stderr
        lines = result.stderr.splitlines()
        assert 2 == len(lines), result.stderr
        assert lines[0].startswith("warning: TokenBudgetContextManager: the context holds ")
        assert "warning: and 15 more like it" == lines[1]

    def test_demo_is_the_default(self, capsys):
        """
        With no command the program prints the demo report on the shipped sample.
        """
        status, out, _ = run(capsys)
        assert 0 == status
        assert "snapshot digest:" in out

    def test_trim_output_of_workingctx_json_keeps_other_fields(self, capsys, tmp_path):
        """
        Fields of a workingctx file other than its prefix, messages and notes are kept by ``trim -o``.
        """
        source = tmp_path / "in.json"
        body = json.loads(Path(sample("workingctx")).read_text(encoding="utf-8"))
        source.write_text(json.dumps({"run": "r-17", **body, "labels": ["a"]}), encoding="utf-8")
        out_file = tmp_path / "out.json"
        run_json(capsys, "trim", str(source), "--budget", "1500", "-o", str(out_file))
        written = json.loads(out_file.read_text(encoding="utf-8"))
        assert ["run", *body, "labels"] == list(written)
        assert ("r-17", ["a"]) == (written["run"], written["labels"])

    def test_trim_output_of_workingctx_json_reads_back(self, capsys, tmp_path):
        """
        A trimmed workingctx file keeps the prefix and notes, and reads back as the trimmed context.
        """
        out_file = tmp_path / "t.json"
        tokens = run_json(capsys, "inspect", sample("workingctx"))["totals"]["tokens"]
        run_json(capsys, "trim", sample("workingctx"), "--budget", str(tokens // 2), "-o", str(out_file))
        original = read_file(sample("workingctx")).last
        trimmed = read_file(str(out_file)).last
        assert original.prefix == trimmed.prefix
        assert original.scratchpad == trimmed.scratchpad
        assert set(trimmed.messages) <= set(original.messages)


def test_samples_are_what_the_adapters_write():
    """
    Every shipped sample in a provider format is exactly what that format's
    ``write`` gives for the workingctx sample, so the samples cannot go stale.
    """
    reference = read_file(sample("workingctx")).last
    for fmt in FORMATS[1:]:
        written = importlib.import_module(f"workingctx.adapters.{fmt}").write(reference)
        if fmt == "langchain":  # messages, serialized with their model_dump()
            written = json.loads(json.dumps([m.model_dump() for m in written]))
        assert written == json.loads(Path(sample(fmt)).read_text(encoding="utf-8")), fmt


def _with_model(tmp_path, fmt: str, **fields) -> str:
    """
    The shipped sample of *fmt* with *fields* (a model, ...) added to its body, written to a file.
    """
    body = json.loads(Path(sample(fmt)).read_text(encoding="utf-8"))
    path = tmp_path / f"named.{fmt}.json"
    path.write_text(json.dumps({**fields, **body}), encoding="utf-8")
    return str(path)


class TestModelFromTheFile:
    @pytest.mark.parametrize("model", ["ft:gpt-4o-mini-2024-07-18:acme:support:9abc", "my-azure-deployment"])
    def test_inspect_of_a_file_naming_a_model_without_a_price_leaves_the_cost_out(self, capsys, tmp_path, model):
        """
        ``inspect`` of a body naming a model no price table knows (a fine-tuned
        model, a deployment's name) shows everything but the cost, and says
        how to get it; it refused the whole file (status 2). Naming that model
        with ``--model`` is still bad usage.
        """
        body = json.loads(Path(sample("openai_chat")).read_text(encoding="utf-8"))
        path = tmp_path / "request.json"
        path.write_text(json.dumps({"model": model, **body}), encoding="utf-8")
        facts = run_json(capsys, "inspect", str(path))
        assert (model, None) == (facts["model"], facts["cost"])
        assert facts["totals"]["tokens"] == read_file(sample("openai_chat")).last.count_tokens()
        status, out, err = run(capsys, "inspect", str(path))
        assert (0, "") == (status, err)
        assert f"no price for the file's model {model}: give --model" in out
        status, _, err = run(capsys, "inspect", str(path), "--model", model)
        assert 2 == status
        assert f"no price for model '{model}'" in err

    @pytest.mark.parametrize(
        ("fmt", "fields", "model"),
        [
            ("openai_chat", {"model": "gpt-4.1"}, "gpt-4.1"),
            ("openai_responses", {"model": "gpt-4o"}, "gpt-4o"),
            ("anthropic", {"model": "claude-haiku-4-5"}, "claude-haiku-4-5"),
            ("google", {"model": "models/gemini-2.5-pro"}, "gemini-2.5-pro"),
            ("google", {"model_version": "gemini-2.5-flash"}, "gemini-2.5-flash"),
            ("google", {"modelVersion": "gemini-2.5-flash"}, "gemini-2.5-flash"),
        ],
    )
    def test_every_command_takes_the_model_the_file_names(self, capsys, tmp_path, fmt, fields, model):
        """
        ``inspect``, ``replay`` and ``report`` price a file with the model it
        names (a body's ``model``, a Gemini model path or ``model_version``),
        giving what ``--model`` with that name gives; no ``--model`` is needed.
        """
        path = _with_model(tmp_path, fmt, **fields)
        named = run_json(capsys, "inspect", path)
        given = run_json(capsys, "inspect", sample(fmt), "--model", model)
        assert model == named["model"]
        assert given["cost"] == named["cost"]
        assert given["breakpoints"] == named["breakpoints"]
        replayed = run_json(capsys, "replay", path, "--window", "1700")
        assert model == replayed["model"]
        assert run_json(capsys, "replay", sample(fmt), "--model", model, "--window", "1700") == {
            **replayed,
            "file": sample(fmt),
        }
        page = tmp_path / "page.html"
        status, _, err = run(capsys, "report", path, "-o", str(page))
        assert 0 == status, err
        assert model in page.read_text(encoding="utf-8")

    def test_model_overrides_the_file(self, capsys, tmp_path):
        """
        ``--model`` wins over the model the file names.
        """
        path = _with_model(tmp_path, "anthropic", model="claude-haiku-4-5")
        facts = run_json(capsys, "inspect", path, "--model", "claude-sonnet-4-6")
        assert "claude-sonnet-4-6" == facts["model"]
        assert run_json(capsys, "inspect", sample("anthropic"), "--model", "claude-sonnet-4-6")["cost"] == facts["cost"]

    @pytest.mark.parametrize("gap", [None, 200])  # 200 s apart: each model's requests 400 s, past a 5m entry
    def test_a_log_prices_each_line_with_its_own_model(self, capsys, tmp_path, gap):
        """
        In a ``.jsonl`` log each request is priced with the model its line
        names, against that model's own prompt cache: a log whose lines
        alternate two models costs, line by line, what the lines of each model
        cost replayed alone (twice as far apart), as a request to one model
        neither reads nor fills another's cache.
        """
        lines = Path(sample("openai_chat", "jsonl")).read_text(encoding="utf-8").splitlines()
        names = ["gpt-4o" if number % 2 else "gpt-4.1-mini" for number in range(len(lines))]

        def log(name: str, models: list[str]) -> str:
            path = tmp_path / name
            sent = [json.dumps({"model": m, **json.loads(line)}) + "\n" for m, line in zip(models, lines, strict=True)]
            path.write_text("".join(line for m, line in zip(models, sent, strict=True) if m), encoding="utf-8")
            return str(path)

        timed = [] if gap is None else ["--gap", str(gap)]
        mixed = run_json(capsys, "replay", log("mixed.jsonl", names), *timed)["strategies"][0]["requests"]
        assert names == [r["model"] for r in mixed]
        for model in set(names):
            mine = [name if name == model else "" for name in names]
            timed = [] if gap is None else ["--gap", str(2 * gap)]
            alone = run_json(capsys, "replay", log(f"{model}.jsonl", mine), *timed)["strategies"][0]["requests"]
            assert [{**r, "request": 0, "at": 0} for r in alone] == [
                {**r, "request": 0, "at": 0} for r in mixed if r["model"] == model
            ]
            assert (gap is None) == any(r["cache_read_tokens"] for r in alone)
        assert len({r["cost"] for r in mixed}) > 1
        assert "gpt-4o" == run_json(capsys, "inspect", log("mixed.jsonl", names))["model"]  # the last line's

    def test_a_file_naming_a_model_of_another_provider(self, capsys, tmp_path):
        """
        An Anthropic body naming an OpenAI model is refused (status 2) with the
        file's model named as such, and the fixes: ``--provider`` or ``--model``.
        """
        path = _with_model(tmp_path, "anthropic", model="gpt-4.1")
        status, _, err = run(capsys, "replay", path)
        assert 2 == status
        assert "the file's model gpt-4.1 is a model of openai" in err
        assert "--provider openai" in err
        assert "--model with a model of anthropic" in err
        assert 0 == run(capsys, "replay", path, "--model", "claude-sonnet-4-6")[0]

    def test_a_file_without_a_model_asks_for_one(self, capsys):
        """
        ``replay`` and ``report`` of a file that names no model exit 2 saying
        to give ``--model``; ``inspect`` says the cost needs it.
        """
        for argv in (["replay", sample("anthropic")], ["report", sample("anthropic"), "-o", "page.html"]):
            status, _, err = run(capsys, *argv)
            assert 2 == status
            assert "names no model" in err
            assert "--model" in err
        status, out, _ = run(capsys, "inspect", sample("anthropic"))
        assert 0 == status
        assert "the file names no model: give --model for the cost" in out


def _documented_synopsis() -> list[str]:
    """
    The lines of the first ``sh`` block of docs/cli.md: one per command.
    """
    text = (Path(__file__).parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


class TestHelpAndDocsAgree:
    def test_the_synopsis_is_in_the_help(self, capsys):
        """
        Every line of the synopsis in docs/cli.md is printed by ``--help`` as it is written.
        """
        with pytest.raises(SystemExit):
            main(["--help"])
        shown = [line.strip() for line in capsys.readouterr().out.splitlines()]
        for line in _documented_synopsis():
            assert line in shown

    def test_required_and_optional_options_agree(self):
        """
        For each command, the options docs/cli.md writes bare are exactly the
        ones the parser requires, those in brackets exist and are optional,
        and every command of the parser is documented.
        """
        from workingctx.cli import _parser  # noqa: PLC0415

        parser = _parser()
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices  # noqa: SLF001
        documented = {}
        for line in _documented_synopsis():
            usage = line.split("#", 1)[0].split()
            assert "workingctx" == usage[0]
            documented[usage[1]] = usage[2:]
        assert set(commands) == set(documented)
        for name, words in documented.items():
            sub = commands[name]
            options = {o: a for a in sub._actions for o in a.option_strings}  # noqa: SLF001
            required = {a.option_strings[0] for a in sub._actions if a.required and a.option_strings}  # noqa: SLF001
            positional = [a for a in sub._actions if not a.option_strings]  # noqa: SLF001
            bare = {w for w in words if w.startswith("-")}
            bracketed = {w.strip("[]") for w in words if w.startswith("[-")}
            assert {options[o].option_strings[0] for o in bare} == required, name
            for option in bracketed:
                assert option in options, (name, option)
                assert not options[option].required, (name, option)
            shown_positional = [w for w in words if w in {"FILE", "[FILE]", "A", "B"}]
            assert len(positional) == len(shown_positional), name


def test_trim_output_refused_names_the_message_where_the_file_holds_it(capsys, tmp_path):
    """
    ``trim -o`` of a request whose kept window breaks the provider's rules (a
    prefill ending in a space) writes nothing and says so on one line, naming
    the message by its JSON path in the file read, not by its position in the
    trimmed context (``message 4``, with the system prompt counted).
    """
    turns = []
    for i in range(6):
        turns += [
            {"role": "user", "content": f"question {i} " * 20},
            {"role": "assistant", "content": f"answer {i} " * 20},
        ]
    turns[-1]["content"] = "Sure "
    TypeAdapter(list[MessageParam]).validate_python(turns)
    path = tmp_path / "request.jsonl"
    path.write_text(json.dumps({"model": "claude-sonnet-4-6", "system": "Be brief.", "messages": turns}) + "\n")
    out = tmp_path / "trimmed.jsonl"
    status, _, err = run(capsys, "trim", str(path), "--budget", "200", "-o", str(out))
    assert (1, False) == (status, out.exists())
    assert 1 == len(err.strip().splitlines())
    assert "request.jsonl:1: the trimmed request breaks anthropic's rules, so -o " in err
    assert "was not written: $.messages[11]: trailing-whitespace: " in err


def test_a_log_mixing_providers_checks_and_replays_each_line_under_its_own(capsys, tmp_path):
    """
    A log whose lines go to different providers is checked and replayed line
    by line under each line's own provider and model, not under the last
    line's: a Chat Completions request opening with an assistant turn (which
    OpenAI takes and Gemini refuses) is valid. ``--provider`` still puts every
    line under one; a line going to no provider of its own is refused by number.
    Its report says it is a log of both formats (it named the last line's
    format, "google"), and that the sizes it gives are the last request's.
    """
    chat = {
        "model": "gpt-4.1",
        "messages": TypeAdapter(list[ChatCompletionMessageParam]).validate_python(
            [{"role": "assistant", "content": "Hello! How can I help?"}, {"role": "user", "content": "Hi"}]
        ),
    }
    contents = [types.Content(role="user", parts=[types.Part(text="Hi")]).model_dump(mode="json", exclude_none=True)]
    gemini = {"model": "gemini-2.5-flash", "contents": contents}
    path = tmp_path / "mixed.jsonl"
    path.write_text(f"{json.dumps(chat)}\n{json.dumps(gemini)}\n", encoding="utf-8")
    facts = run_json(capsys, "check", str(path))
    assert (True, None) == (facts["valid"], facts["provider"])
    assert ["openai", "gemini"] == [r["provider"] for r in facts["requests"]]
    assert "line 1: valid under openai's rules" in run(capsys, "check", str(path))[1]
    forced = run_json(capsys, "check", str(path), "--provider", "gemini")
    assert ["first-not-user"] == [p["rule"] for p in forced["requests"][0]["problems"]]
    rows = run_json(capsys, "replay", str(path))["strategies"][0]["requests"]
    assert [("openai", "gpt-4.1"), ("gemini", "gemini-2.5-flash")] == [(r["provider"], r["model"]) for r in rows]
    assert "sent to" in run(capsys, "replay", str(path))[1]
    page = tmp_path / "report.html"
    assert 0 == run(capsys, "report", str(path), "-o", str(page))[0]
    text = page.read_text(encoding="utf-8")
    # a log, not the format of its last line; the sizes are the last request's, and said so
    assert "<p>a log of 2 requests (openai_chat, google) on openai gpt-4.1, gemini gemini-2.5-flash;" in text
    assert "the last request's prefix 0 tokens, tail 1 messages" in text
    path.write_text(f'{json.dumps(chat)}\n{{"messages": []}}\n{json.dumps(gemini)}\n', encoding="utf-8")
    status, _, err = run(capsys, "replay", str(path))
    assert 2 == status
    assert "mixed.jsonl, line 2: workingctx JSON or LangChain messages, sent to no provider of their own" in err
    path.write_text(f"{json.dumps(gemini)}\n{json.dumps(chat)}\n", encoding="utf-8")
    status, _, err = run(capsys, "replay", str(path), "--model", "gpt-4.1")
    assert 2 == status
    assert "mixed.jsonl, line 1: a request to gemini priced with gpt-4.1, a model of openai" in err


@pytest.mark.parametrize("command", ["replay", "report"])
def test_provider_and_a_model_of_another_provider_are_refused(capsys, tmp_path, command):
    """
    ``--provider P`` with a model of another provider (``--model``, the
    file's own, or a log line's) is refused (status 2) naming the model, the
    lines of a log, and the fixes, as ``--model`` of another provider than the
    file's is: it priced Claude under OpenAI's cache rules ("openai
    claude-sonnet-4-5"), and a log's GPT lines under Anthropic's.
    """
    page = ["-o", str(tmp_path / "page.html")] if command == "report" else []
    status, _, err = run(
        capsys, command, sample("anthropic"), "--provider", "openai", "--model", "claude-sonnet-4-6", *page
    )
    assert 2 == status
    assert "--model claude-sonnet-4-6 is a model of anthropic, but --provider openai replays" in err
    assert "pass --model with a model of openai, or --provider anthropic" in err
    path = _with_model(tmp_path, "anthropic", model="claude-sonnet-4-6")
    status, _, err = run(capsys, command, path, "--provider", "openai", *page)
    assert (2, True) == (status, "the file's model claude-sonnet-4-6 is a model of anthropic" in err)
    chat = {"model": "gpt-4.1", "messages": [{"role": "user", "content": "Hi"}]}
    claude = {"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "Hi"}]}
    log = tmp_path / "mixed.jsonl"
    log.write_text(f"{json.dumps(chat)}\n{json.dumps(claude)}\n{json.dumps(chat)}\n", encoding="utf-8")
    status, _, err = run(capsys, command, str(log), "--provider", "anthropic", *page)
    assert 2 == status
    assert "mixed.jsonl, lines 1, 3: a request to anthropic priced with gpt-4.1, a model of openai" in err
    assert "pass --model with a model of anthropic, or replay without --provider" in err
    assert not (tmp_path / "page.html").exists()
    status, _, err = run(capsys, command, str(log), "--provider", "anthropic", "--model", "claude-sonnet-4-6", *page)
    assert (0, "") == (status, err)


def test_a_mixed_log_whose_last_line_names_no_model_is_replayed(capsys, tmp_path):
    """
    A log mixing providers whose last line names no model is replayed, that
    line priced with the last model the log names, as a line naming none
    before the last is: it was refused for naming no model, and the
    ``--model`` it asked for was refused too (one model for every line of a
    log going to two providers), so no command could replay it.
    """
    claude = {"model": "claude-sonnet-4-6", "max_tokens": 100, "messages": [{"role": "user", "content": "Hi"}]}
    TypeAdapter(list[MessageParam]).validate_python(claude["messages"])
    chat = {"model": "gpt-4.1", "messages": [{"role": "user", "content": "Hi"}]}
    unnamed = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(f"{json.dumps(body)}\n" for body in (claude, chat, unnamed)), encoding="utf-8")
    rows = run_json(capsys, "replay", str(path))["strategies"][0]["requests"]
    assert [("anthropic", "claude-sonnet-4-6"), ("openai", "gpt-4.1"), ("openai", "gpt-4.1")] == [
        (r["provider"], r["model"]) for r in rows
    ]
    assert 0 == run(capsys, "report", str(path), "-o", str(tmp_path / "report.html"))[0]
    path.write_text("".join(f"{json.dumps(body)}\n" for body in (chat, claude, unnamed)), encoding="utf-8")
    status, _, err = run(capsys, "replay", str(path))
    assert 2 == status
    assert "mixed.jsonl, line 3: a request to openai priced with claude-sonnet-4-6, a model of anthropic" in err
