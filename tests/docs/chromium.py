"""A small driver for headless Chromium over the DevTools protocol, with the standard library.

Why not Playwright or Selenium: the site tests need four things from a real browser (open a
page, wait for it and its images to load, evaluate an expression in it, take a screenshot),
which the DevTools protocol gives directly. Chromium started with ``--remote-debugging-pipe``
reads protocol commands on file descriptor 3 and writes replies and events on 4, each a JSON
object ended by a NUL byte: no WebSocket, no port, no driver binary, no browser download and no
Python dependency. The browser is Debian's ``chromium`` package (``/usr/bin/chromium``), which
``make test`` installs when it is missing.

Usage::

    with Chromium() as browser:
        page = browser.open("http://127.0.0.1:8000/index.html")
        value = page.evaluate("document.title")
        png = page.screenshot()
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

#: Where Debian's package puts it; ``$CHROMIUM`` overrides.
DEFAULT_BINARY = "/usr/bin/chromium"
#: Flags that work as root in this closed network: without the background-networking ones
#: Chromium keeps opening connections that the network refuses.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)

#: Resolves when the document, every <img> in it (lazy ones too) and its fonts have loaded;
#: an image that fails to load counts as settled (the tests check ``naturalWidth``).
_LOADED = """new Promise(resolve => {
  const settled = img => new Promise(done => {
    img.addEventListener('load', done);
    img.addEventListener('error', done);
  });
  const eager = img => { img.loading = 'eager'; return img; };  // lazy ones load off-screen too
  const images = () => Promise.all(Array.from(document.images, eager).map(
    i => i.complete || settled(i)));
  const ready = () => images().then(() => document.fonts.ready).then(() => resolve(true));
  if (document.readyState === 'complete') ready(); else addEventListener('load', ready);
})"""


class BrowserError(RuntimeError):
    """Chromium could not be started, or answered a command with an error."""


def find_chromium() -> str | None:
    """The Chromium binary: ``$CHROMIUM``, ``/usr/bin/chromium`` or ``chromium`` on PATH."""
    for candidate in (os.environ.get("CHROMIUM"), DEFAULT_BINARY, shutil.which("chromium")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


class Page:
    """One browser tab, attached with its own protocol session."""

    def __init__(self, browser: Chromium, session: str, target: str):
        self.browser, self.session, self.target = browser, session, target

    def send(self, method: str, params: dict | None = None, timeout: float = 60.0) -> dict:
        return self.browser.send(method, params, session=self.session, timeout=timeout)

    def goto(self, url: str, timeout: float = 60.0) -> None:
        """Navigate and wait until the page and its images have loaded."""
        self.browser.drop_events("Page.loadEventFired", self.session)
        self.send("Page.navigate", {"url": url}, timeout=timeout)
        self.browser.wait_event("Page.loadEventFired", self.session, timeout=timeout)
        self.evaluate(_LOADED, timeout=timeout)

    def evaluate(self, expression: str, timeout: float = 60.0):
        """The value of a JavaScript expression (a promise is awaited), as JSON."""
        reply = self.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
            timeout=timeout,
        )
        if "exceptionDetails" in reply:
            raise BrowserError(f"{expression!r} raised: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def screenshot(self, full_page: bool = False) -> bytes:
        """A PNG of the viewport (or of the whole page)."""
        params = {"format": "png", "captureBeyondViewport": full_page}
        return base64.b64decode(self.send("Page.captureScreenshot", params)["data"])


class Chromium:
    """Headless Chromium with a fresh profile, driven over ``--remote-debugging-pipe``."""

    def __init__(self, binary: str | None = None, width: int = 1280, height: int = 900):
        self.binary = binary or find_chromium()
        if self.binary is None:
            raise BrowserError(
                "Chromium not found ($CHROMIUM, /usr/bin/chromium, PATH); on Debian: "
                "apt-get install -y chromium (make test installs it)"
            )
        self.width, self.height = width, height
        self._next_id = 0
        self._buffer = b""
        self._events: list[dict] = []
        self.proc = None

    # -- process ---------------------------------------------------------------------------
    def __enter__(self) -> Chromium:
        self.profile = tempfile.mkdtemp(prefix="bayesmkl-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        args = [
            self.binary,
            *FLAGS,
            f"--user-data-dir={self.profile}",
            f"--window-size={self.width},{self.height}",
            "about:blank",
        ]
        # bash puts the two pipe ends on descriptors 3 and 4, then becomes Chromium (bash, not
        # sh: Debian's dash cannot redirect descriptors above 9, which a test process has)
        script = f'exec "$@" 3<&{to_browser_r} 4>&{from_browser_w}'
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            ["bash", "-c", script, "bash", *args],
            pass_fds=(to_browser_r, from_browser_w),
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
            start_new_session=True,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        try:
            self.send("Browser.getVersion", timeout=60.0)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.proc is None:
            return
        try:
            self._write({"id": -1, "method": "Browser.close"})
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)
        self.proc = None

    def stderr_tail(self, n: int = 2000) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-n:]

    # -- protocol --------------------------------------------------------------------------
    def _write(self, message: dict) -> None:
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("no reply from Chromium in time")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise BrowserError(f"Chromium exited:\n{self.stderr_tail()}")
                self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(raw)

    def send(self, method: str, params=None, session: str | None = None, timeout=60.0) -> dict:
        """Send one command and return its result; events that arrive meanwhile are kept."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self._write(message)
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self._events.append(reply)

    def wait_event(self, method: str, session: str | None, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self._events):
                if event["method"] == method and event.get("sessionId") == session:
                    return self._events.pop(i)
            reply = self._read(deadline)
            if "method" in reply:
                self._events.append(reply)

    def drop_events(self, method: str, session: str | None) -> None:
        self._events = [
            e for e in self._events if not (e["method"] == method and e.get("sessionId") == session)
        ]

    def new_page(self) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        page = Page(self, session, target)
        page.send("Page.enable")
        page.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
        )
        return page

    def close_page(self, page: Page) -> None:
        self.send("Target.closeTarget", {"targetId": page.target})

    def open(self, url: str, timeout: float = 60.0) -> Page:
        page = self.new_page()
        page.goto(url, timeout=timeout)
        return page
