"""A small W3C WebDriver client for Debian's headless Chromium.

Python 3 standard library only: it starts /usr/bin/chromedriver on a free
loopback port, talks the W3C WebDriver protocol to it over HTTP (JSON), and
stops it (and the browser it started) by its process group, which it made.
Used by tests/browser/ui-test.py (the dashboard's browser test) and
bench/ui-load.py (what open dashboard tabs cost).

Chromium runs with the flags this kind of machine needs: headless, no
sandbox (tests may run as root), no GPU, and none of the background
connections to Google's hosts that a closed network refuses.
"""

import base64
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from ports import free_port  # noqa: E402  (tests/python/ports.py)

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

# The W3C key under which an element reference comes back.
ELEMENT_KEY = "element-6066-11e4-a52e-4f735466cecf"

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
    "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
    "--window-size=1280,900",
]


class WebDriverError(Exception):
    """A command the driver refused or could not run (its message says)."""


def wait_login_page(url, timeout, alive=lambda: True):
    """Wait until the dashboard at `url` answers 401 (its login page, for
    a browser with no session) or 200; returns None, or a message saying
    what was last seen when `timeout` seconds passed or alive() turned
    false (the server's process exited)."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while alive():
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return None
        except urllib.error.HTTPError as e:
            if e.code == 401:
                return None
            last = "HTTP %d" % e.code
        except OSError as e:
            last = str(e)
        if time.monotonic() > deadline:
            return "no login page at %s after %.0f s (last: %s)" % (url, timeout, last)
        time.sleep(0.2)
    return "the server exited before answering at %s (last: %s)" % (url, last)


class Element:
    """A reference to an element of the current page, and its selector
    (for messages)."""

    def __init__(self, browser, ref, selector):
        self.browser = browser
        self.ref = ref
        self.selector = selector

    def _path(self, what=""):
        return "/element/%s%s" % (self.ref, what)

    def text(self):
        """The element's rendered text, stripped."""
        return self.browser.cmd("GET", self._path("/text")).strip()

    def attr(self, name):
        """The attribute or property `name`, or None."""
        return self.browser.cmd("GET", self._path("/attribute/" + name))

    def click(self):
        self.browser.cmd("POST", self._path("/click"), {})

    def clear(self):
        self.browser.cmd("POST", self._path("/clear"), {})

    def type(self, text):
        """Type `text` into the element (after clearing it)."""
        self.clear()
        self.browser.cmd("POST", self._path("/value"), {"text": text})

    def find(self, selector):
        """The first element under this one matching the CSS selector, or
        None."""
        found = self.browser.cmd("POST", self._path("/elements"),
                                 {"using": "css selector", "value": selector})
        if not found:
            return None
        return Element(self.browser, found[0][ELEMENT_KEY],
                       self.selector + " " + selector)


class Browser:
    """One chromedriver process and one Chromium session in it.

    Use as a context manager: leaving the block ends the session and stops
    chromedriver and its Chromium by the process group this object made,
    also when the block raised.  log_dir gets chromedriver.log and the
    browser's profile (a fresh --user-data-dir)."""

    def __init__(self, log_dir, timeout=20.0):
        self.log_dir = log_dir
        self.timeout = timeout
        self.proc = None
        self.session = None
        self.base = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        """Start chromedriver, wait for it to answer, open a session."""
        port = free_port()
        self.base = "http://127.0.0.1:%d" % port
        log = os.path.join(self.log_dir, "chromedriver.log")
        self.proc = subprocess.Popen(
            [CHROMEDRIVER, "--port=%d" % port, "--log-path=" + log],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                if self._request("GET", "/status", None, 2.0).get("ready"):
                    break
            except (OSError, WebDriverError):
                pass
            if self.proc.poll() is not None:
                raise WebDriverError("chromedriver exited (status %d) at start: see %s"
                                     % (self.proc.returncode, log))
            if time.monotonic() > deadline:
                raise WebDriverError("chromedriver did not answer on %s within %.0f s: see %s"
                                     % (self.base, self.timeout, log))
            time.sleep(0.1)
        profile = tempfile.mkdtemp(prefix="profile.", dir=self.log_dir)
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "pageLoadStrategy": "normal",
            # The console's messages, for /se/log (script errors, CSP).
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": CHROMIUM_ARGS + ["--user-data-dir=" + profile],
            },
        }}}
        value = self._request("POST", "/session", caps, 60.0)
        self.session = value["sessionId"]

    def stop(self):
        """End the session and stop chromedriver's process group; quiet
        about failures (it runs on the way out of a failed test)."""
        if self.session:
            try:
                self._request("DELETE", "/session/" + self.session, None, 10.0)
            except (OSError, WebDriverError):
                pass
            self.session = None
        if self.proc and self.proc.poll() is None:
            pgid = self.proc.pid     # start_new_session: its own group
            try:
                os.killpg(pgid, signal.SIGTERM)
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(pgid, signal.SIGKILL)
                self.proc.wait()
            except ProcessLookupError:
                pass
        self.proc = None

    def _request(self, method, path, body, timeout):
        """One HTTP request to chromedriver; returns the reply's "value".
        Raises WebDriverError with the driver's own message on an error
        reply."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                reply = json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as e:
            try:
                value = json.loads(e.read()).get("value", {})
                msg = "%s: %s" % (value.get("error"), value.get("message", "").split("\n")[0])
            except ValueError:
                msg = "HTTP %d" % e.code
            raise WebDriverError("%s %s: %s" % (method, path, msg)) from None
        return reply.get("value")

    def cmd(self, method, path, body=None):
        """A command in this session (path relative to /session/ID)."""
        return self._request(method, "/session/%s%s" % (self.session, path), body,
                             self.timeout + 10)

    # ---- navigation and pages ------------------------------------------
    def get(self, url):
        self.cmd("POST", "/url", {"url": url})

    def url(self):
        return self.cmd("GET", "/url")

    def title(self):
        return self.cmd("GET", "/title")

    def source(self):
        return self.cmd("GET", "/source")

    def script(self, js, *args):
        """Run `js` (a function body) in the page; returns its value."""
        return self.cmd("POST", "/execute/sync", {"script": js, "args": list(args)})

    def screenshot(self, path):
        """Save the visible page as PNG to `path`."""
        png = base64.b64decode(self.cmd("GET", "/screenshot"))
        with open(path, "wb") as f:
            f.write(png)
        return path

    def find(self, selector):
        """The first element matching the CSS selector, or None."""
        found = self.cmd("POST", "/elements", {"using": "css selector", "value": selector})
        if not found:
            return None
        return Element(self, found[0][ELEMENT_KEY], selector)

    def find_all(self, selector):
        found = self.cmd("POST", "/elements", {"using": "css selector", "value": selector})
        return [Element(self, f[ELEMENT_KEY], selector) for f in found]

    # ---- windows (tabs) ---------------------------------------------------
    def new_tab(self):
        """Open a new tab and switch to it; returns its handle."""
        handle = self.cmd("POST", "/window/new", {"type": "tab"})["handle"]
        self.cmd("POST", "/window", {"handle": handle})
        return handle

    def switch_to(self, handle):
        self.cmd("POST", "/window", {"handle": handle})

    def tabs(self):
        return self.cmd("GET", "/window/handles")
