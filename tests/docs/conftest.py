"""Fixtures of the documentation-site tests: the built site, a local server and Chromium.

The site is what ``make docs`` (or ``make docs-fresh``) wrote to ``docs/_build/html``; these
tests read it and do not build it. Under ``make test`` (and so in CI), which builds the site
first and installs Chromium, ``BAYESMKL_SITE_TESTS=required`` is set and a missing site or
browser **fails** these tests; a bare ``pytest`` run elsewhere skips them with the reason.
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
from pathlib import Path

import pytest
from chromium import BrowserError, Chromium, find_chromium

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "docs" / "_build" / "html"


def required() -> bool:
    """Whether a missing site or browser is a failure (make test, CI) rather than a skip."""
    return os.environ.get("BAYESMKL_SITE_TESTS") == "required" or bool(os.environ.get("CI"))


def unavailable(reason: str):
    if required():
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def site() -> Path:
    """The built site (``docs/_build/html``)."""
    if not (SITE / "index.html").is_file():
        unavailable(f"no built site at {SITE}: run `make docs` first")
    return SITE


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@pytest.fixture(scope="session")
def server(site):
    """``site`` served on 127.0.0.1 (a free port); yields the base URL, ending in ``/``."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the session (Debian's ``/usr/bin/chromium``)."""
    if find_chromium() is None:
        unavailable("Chromium not found: apt-get install -y chromium (make test installs it)")
    try:
        with Chromium() as chromium:
            yield chromium
    except BrowserError as exc:  # pragma: no cover - a browser that does not start
        pytest.fail(f"Chromium did not start: {exc}", pytrace=False)
