"""
Tests for the page ``workingctx report`` writes: self-contained, with its
tokens and cost charts, the problems of every request, and expiry misses.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.cli.commands import MODELS, run, run_json, sample


class _Page(HTMLParser):
    """
    Collects the tags, ids and classes of an HTML page, and every external reference.
    """

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


class TestReport:
    @pytest.fixture
    def page(self, capsys, tmp_path) -> Path:
        """
        The report page of the Anthropic sample with a window that makes the manager cut.
        """
        path = sample("anthropic")
        tokens = run_json(capsys, "inspect", path)["totals"]["tokens"]
        out = tmp_path / "report.html"
        status, _, err = run(
            capsys, "report", path, "--model", MODELS["anthropic"], "--window", str(tokens // 2), "-o", str(out)
        )
        assert 0 == status, err
        return out

    def test_page_is_self_contained_with_both_charts(self, page):
        """
        The page holds the tokens chart (one stacked bar per request) and the
        cost chart (one line per strategy), and refers to nothing outside itself.
        """
        parser = _Page()
        parser.feed(page.read_text(encoding="utf-8"))
        ids = {a.get("id") for _, a in parser.tags}
        assert {"tokens-chart", "cost-chart"} <= ids
        assert any(t == "rect" and "bar" in (a.get("class") or "") for t, a in parser.tags)
        assert 3 == sum(1 for t, a in parser.tags if t == "polyline" and a.get("class") == "cost")
        assert not [t for t, _ in parser.tags if t in {"script", "link", "img", "iframe"}]
        refs = [v for _, a in parser.tags for k, v in a.items() if k in {"src", "href"}]
        assert [] == refs

    def test_page_with_a_gap_counts_expiry_misses(self, capsys, tmp_path):
        """
        ``report --gap`` says how far apart the requests were and how many paid for expired entries.
        """
        out = tmp_path / "report.html"
        argv = ["--model", MODELS["anthropic"], "--window", "1700", "--gap", "400", "-o", str(out)]
        status, _, err = run(capsys, "report", sample("anthropic"), *argv)
        assert 0 == status, err
        text = out.read_text(encoding="utf-8")
        assert "400 seconds between requests" in text
        assert "<th>expiry misses</th>" in text

    def test_the_problems_of_a_log_are_those_of_every_request(self, capsys, tmp_path):
        """
        The page of a log lists the problems ``check`` finds in each of its
        requests, with the line of each; it showed those of the last request
        only, and so said "No problem" of a log that ``check`` refuses.
        """
        calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
        dangling = [{"role": "user", "content": "Hi"}, {"role": "assistant", "tool_calls": calls}]
        requests = [{"model": "gpt-4.1", "messages": [*dangling, {"role": "user", "content": "Go on"}]}]
        requests.append({"model": "gpt-4.1", "messages": [{"role": "user", "content": "Hi"}]})
        log = tmp_path / "requests.jsonl"
        log.write_text("".join(json.dumps(r) + "\n" for r in requests), encoding="utf-8")
        checked = run_json(capsys, "check", str(log))
        assert [["dangling-call"], []] == [[p["rule"] for p in r["problems"]] for r in checked["requests"]]
        out = tmp_path / "report.html"
        status, _, err = run(capsys, "report", str(log), "-o", str(out))
        assert 0 == status, err
        text = out.read_text(encoding="utf-8")
        assert 'id="no-problems"' not in text
        assert '<td class="n">1</td><td>$.messages[1]</td><td>dangling-call</td>' in text
        log.write_text(json.dumps(requests[1]) + "\n" + json.dumps(requests[1]) + "\n", encoding="utf-8")
        assert 0 == run(capsys, "report", str(log), "-o", str(out))[0]
        assert 'id="no-problems"' in out.read_text(encoding="utf-8")

    @pytest.mark.parametrize(
        ("fmt", "model"),
        [
            ("google", "gemini-2.0-flash-lite"),
            ("openai_chat", "gpt-4.1-nano"),
            ("anthropic", "claude-3-haiku-20240307"),
        ],
    )
    def test_each_cost_line_ends_at_the_cost_in_the_table(self, capsys, tmp_path, fmt, model):
        """
        The cost chart's line of each strategy ends at that strategy's cost as
        ``replay`` gives it (and the page's table shows): its running total
        adds up the exact cost of each request, not the amounts rounded to
        four places (on gemini-2.0-flash-lite those ended the line at $0.0008,
        below the $0.0010 in the table).
        """
        argv = ["--model", model, "--window", "1700"]
        replayed = run_json(capsys, "replay", sample(fmt), *argv)
        out = tmp_path / "report.html"
        status, _, err = run(capsys, "report", sample(fmt), *argv, "-o", str(out))
        assert 0 == status, err
        ends = re.findall(r'<polyline class="cost"[^>]*><title>(.*?): \$([0-9.]+)</title>', out.read_text("utf-8"))
        assert [(s["name"], s["cost"]) for s in replayed["strategies"]] == ends

    @pytest.mark.skipif(shutil.which("chromium") is None, reason="no headless chromium on this machine")
    def test_page_renders_in_a_headless_browser(self, page):
        """
        Headless Chromium loads the page and its DOM holds both charts' SVG.
        """
        result = subprocess.run(
            [
                shutil.which("chromium") or "chromium",
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--no-first-run",
                f"--user-data-dir={page.parent / 'profile'}",
                "--dump-dom",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert 0 == result.returncode, result.stderr[-2000:]
        assert 'id="tokens-chart"' in result.stdout
        assert 'id="cost-chart"' in result.stdout
        assert "<rect" in result.stdout
