"""
Tests for the documentation site: ``mkdocs build --strict`` builds it, and the
built site, served over HTTP on 127.0.0.1, works in headless Chromium: every
page renders, search finds the algebra's operations, and no internal link or
anchor is broken.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not (ROOT / "mkdocs.yml").is_file(), reason=f"no checkout with mkdocs.yml at {ROOT}"),
    pytest.mark.skipif(
        shutil.which("mkdocs") is None and not (Path(sys.executable).parent / "mkdocs").exists(),
        reason="mkdocs is not installed (the docs extra: pip install '.[docs]')",
    ),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """
    The site as ``mkdocs build --strict`` builds it, in a temporary directory.
    """
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": str(Path(sys.executable).parent)},
    )
    assert 0 == result.returncode, result.stderr[-5000:]
    return out


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    """
    The built site served over HTTP on 127.0.0.1 (a free port) by a server in
    a process of its own (a thread of the test's process would share its
    interpreter with the browser driver's waits); yields its address.
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(  # this interpreter, serving the built site
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(site)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.terminate()
        server.wait(10)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """
    Headless Chromium from the system, driven by Playwright.
    """
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the docs extra)")
    with playwright_api.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    """
    A fresh page that records every failed or refused request it makes.
    """
    opened = browser.new_page()  # type: ignore[attr-defined]
    opened.failures = []

    def record(response: object) -> None:
        if response.status >= 400:  # type: ignore[attr-defined]
            opened.failures.append(f"{response.url}: {response.status}")  # type: ignore[attr-defined]

    def local_only(request: object) -> None:
        if urlparse(request.url).hostname not in {"127.0.0.1", None}:  # type: ignore[attr-defined]
            opened.failures.append(f"{request.url}: a request outside the site")  # type: ignore[attr-defined]

    opened.on("requestfailed", lambda request: opened.failures.append(f"{request.url}: {request.failure}"))
    opened.on("response", record)
    opened.on("request", local_only)
    try:
        yield opened
    finally:
        opened.close()


def test_the_site_builds_strict_with_every_page(site):
    """
    The strict build writes a page for every markdown file of docs/ (the cookbook,
    the integrations and the API reference included) and a search index.
    """
    sources = [p for p in (ROOT / "docs").rglob("*.md") if "_hooks" not in p.parts]
    for source in sources:
        relative = source.relative_to(ROOT / "docs").with_suffix("")
        built = site / (relative.parent if relative.name == "index" else relative) / "index.html"
        assert built.is_file(), source
    assert (site / "search" / "search_index.json").is_file()


def test_every_page_renders_and_no_internal_link_is_broken(served, page):
    """
    Crawling from the home page, every internal page loads with its assets,
    shows a heading and text, and every link to it (anchors included) lands on
    a page that exists and an element with that id.
    """
    seen: set[str] = set()
    queue = [served]
    anchors: dict[str, set[str]] = {}
    links: list[tuple[str, str]] = []
    while queue:
        url = queue.pop()
        if url in seen:
            continue
        seen.add(url)
        response = page.goto(url, wait_until="networkidle")  # every asset loaded before the crawl moves on
        assert response is not None
        assert 200 == response.status, url
        assert page.locator("article h1").first.is_visible(), url
        assert len(page.locator("article").first.inner_text()) > 40, url
        anchors[url] = set(page.eval_on_selector_all("[id]", "nodes => nodes.map(n => n.id)"))
        for href in page.eval_on_selector_all("a[href]", "nodes => nodes.map(n => n.href)"):
            target, _ = urldefrag(href)
            if urlparse(href).netloc != urlparse(served).netloc:
                continue
            links.append((url, href))
            if target.endswith("/") and target not in seen:
                queue.append(target)
    assert not page.failures
    assert len(seen) >= 35
    for source, href in links:
        target, fragment = urldefrag(href)
        if not target.endswith("/"):  # a file: the search index, a sitemap, an asset
            continue
        assert target in anchors, f"{source} links to {href}, which is not a page"
        if fragment:
            assert fragment in anchors[target], f"{source} links to {href}: no such anchor"


@pytest.mark.parametrize(
    ("term", "page_expected"),
    [("fork", "context/"), ("merge", "context/"), ("TokenBudget", "scopes/")],
)
def test_search_finds_the_operations(served, page, term, page_expected):
    """
    Typing an operation's name in the search box lists results, among them
    the page that documents it; following the first result opens a page.
    """
    page.goto(served)
    page.locator("label.md-search__icon, .md-search__input").first.click()
    box = page.locator("input.md-search__input")
    results = page.locator(".md-search-result__item a")
    # A query typed before the search worker has built its index is dropped (the
    # box keeps saying "Type to start searching"), as it is for a person who
    # types that fast: type it again until the worker answers.
    deadline = time.monotonic() + 60
    while True:
        box.fill("")
        box.press_sequentially(term)
        try:
            results.first.wait_for(timeout=2_000)
            break
        except Exception:  # Playwright's TimeoutError: not answered yet
            if time.monotonic() > deadline:
                raise
    hrefs = results.evaluate_all("nodes => nodes.map(n => n.href)")
    assert any(urljoin(served, page_expected) in href for href in hrefs), hrefs
    text = page.locator(".md-search-result").inner_text().lower()
    assert term.lower() in text
    results.first.click()
    page.wait_for_load_state()
    assert page.locator("article h1").first.is_visible()
    assert not page.failures


def test_the_api_reference_documents_the_algebra(served, page):
    """
    The API reference shows WorkingContext with its operations, the scopes
    with TokenBudget, and the examples as code blocks, not as text.
    """
    page.goto(urljoin(served, "reference/context/"))
    article = page.locator("article").first.inner_text()
    for name in ("WorkingContext", "fork", "merge", "freeze", "diff"):
        assert name in article
    # each operation has its own entry, those mixed in from beside the class included
    for name in ("fork", "merge", "freeze", "finish", "cost", "apply_locked", "pending_calls"):
        assert page.locator(f'[id="workingctx.context.WorkingContext.{name}"]').count() == 1, name
    assert page.locator("article pre code").count() > 10
    assert ":class:" not in article
    page.goto(urljoin(served, "reference/scopes/"))
    assert "TokenBudget" in page.locator("article").first.inner_text()


def test_examples_are_fenced_and_roles_shown_as_code():
    """
    The API reference's docstring hook shows each run of ``>>>`` lines as a
    ``pycon`` block (at its indentation, leaving fenced code alone) and a
    cross-reference role as the code it names.
    """
    import importlib.util  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location("doctest_fences", ROOT / "docs" / "_hooks" / "doctest_fences.py")
    assert spec is not None
    assert spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    text = "Sum.\n\n    >>> f(\n    ...   1)\n    ['a']\n\n```\n>>> kept\n```\nSee :class:`~workingctx.Usage`."
    fenced = "Sum.\n\n    ```pycon\n    >>> f(\n    ...   1)\n    ['a']\n    ```\n\n"
    assert fenced + "```\n>>> kept\n```\nSee :class:`~workingctx.Usage`." == hooks.fence(text)
    assert "See `Usage`." == hooks.unrole("See :class:`~workingctx.Usage`.")
    assert "`workingctx.cache.plan`" == hooks.unrole(":func:`workingctx.cache.plan`")
