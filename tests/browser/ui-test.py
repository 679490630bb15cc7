#!/usr/bin/env python3
"""The dashboard in a real browser: headless Chromium, driven over
WebDriver (tests/browser/webdriver.py), against a running delayqd with the
dashboard on.  tests/browser-ui.sh starts Redis and delayqd and runs this;
this script owns the scenario (the jobs it enqueues and what a user must
see):

  1. the login page; a wrong token is refused on the page, the right one
     logs in;
  2. the overview shows each queue's counts, state and workers, refreshes
     them by itself (no page load) when a job is added, and draws charts;
  3. the queue page's dead tab lists the dead job; its job page shows it
     dead with its error, attempts and payload;
  4. with the handler's flag file gone, "requeue" runs the job (the
     handler's record file shows the run) and the dead count drops to 0;
  5. pause: the state says paused and a due job waits; resume: it runs;
  6. search by id finds a delayed job, and "run now" runs it;
  7. logout ends the session.

Screenshots of the overview, the queue page and the job page go to
--shots; on failure also failure.png and failure.html (the page's source).
Exit 0 when every step saw what it expected, 1 with one message naming the
step and what was seen otherwise.
"""

import argparse
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import webdriver  # noqa: E402

# Every wait for something the user should see (a count refreshed from
# the supervisor's one-second cache, a page refreshing every 3 s, a job
# run by a worker) gives up after this long.
WAIT_S = 15.0
# The whole test, from the first page to the last.
TOTAL_S = 100


class Failed(Exception):
    """A step did not see what a user should."""


class Scenario:
    def __init__(self, opts, browser):
        self.o = opts
        self.b = browser
        self.url = opts.url.rstrip("/")
        self.step = "start"
        self.main, self.main_workers = opts.queue[0]
        self.other, self.other_workers = opts.queue[1]

    # ---- helpers ---------------------------------------------------------
    def begin(self, step):
        self.step = step
        print("browser-ui: " + step, flush=True)

    def cli(self, *args):
        """Run the delayq CLI against the test's Redis; its stdout."""
        cmd = [self.o.delayq, "-s", self.o.redis_socket] + list(args)
        res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, timeout=20)
        if res.returncode != 0:
            raise Failed("delayq %s: exit %d: %s" % (" ".join(args), res.returncode,
                                                     res.stderr.strip()))
        return res.stdout

    def text(self, selector):
        """The text of the first element matching `selector` in the page,
        or None.  Read in one script call, so a live refresh replacing the
        element in between cannot make the read fail."""
        return self.b.script(
            "var e = document.querySelector(arguments[0]);"
            "return e ? e.textContent.trim() : null;", selector)

    def exists(self, selector):
        return self.b.script("return document.querySelector(arguments[0]) !== null;",
                             selector)

    def wait_text(self, selector, want, what):
        """Wait until the text of `selector` is `want` (or satisfies it,
        when `want` is a function); fail naming `what` and the last text
        seen."""
        deadline = time.monotonic() + WAIT_S
        while True:
            got = self.text(selector)
            ok = want(got) if callable(want) else got == want
            if ok:
                return got
            if time.monotonic() > deadline:
                shown = "no element %s" % selector if got is None else repr(got)
                raise Failed("%s: expected %s, the page shows %s after %.0f s"
                             % (what, "a matching text" if callable(want) else repr(want),
                                shown, WAIT_S))
            time.sleep(0.25)

    def wait_for(self, selector, what):
        deadline = time.monotonic() + WAIT_S
        while not self.exists(selector):
            if time.monotonic() > deadline:
                raise Failed("%s: no %s on %s after %.0f s" % (what, selector, self.b.url(),
                                                               WAIT_S))
            time.sleep(0.2)

    def click(self, selector, what):
        """Click the first element matching `selector` (retried when a live
        refresh replaced it between finding and clicking)."""
        for attempt in range(3):
            el = self.b.find(selector)
            if el is None:
                raise Failed("%s: no %s on %s" % (what, selector, self.b.url()))
            try:
                el.click()
                return
            except webdriver.WebDriverError as e:
                if "stale element" not in str(e) or attempt == 2:
                    raise

    def wait_page(self, path_part, what):
        """Wait until the browser's URL contains `path_part` and the page has
        loaded."""
        deadline = time.monotonic() + WAIT_S
        while True:
            url = self.b.url()
            ready = self.b.script("return document.readyState;")
            if path_part in url and ready == "complete":
                return url
            if time.monotonic() > deadline:
                raise Failed("%s: expected a page at ...%s, the browser is at %s"
                             % (what, path_part, url))
            time.sleep(0.1)

    def shot(self, name):
        path = os.path.join(self.o.shots, name)
        self.b.screenshot(path)
        print("browser-ui: screenshot %s" % path, flush=True)

    def record_lines(self, job_id):
        """The handler's record lines for `job_id`: (attempt, what)."""
        try:
            with open(self.o.record) as f:
                lines = [ln.split() for ln in f]
        except FileNotFoundError:
            return []
        return [(int(ln[1]), ln[3]) for ln in lines if len(ln) >= 5 and ln[0] == job_id]

    def wait_record(self, job_id, ends, what):
        """Wait until the record file shows `ends` finished runs of
        `job_id`."""
        deadline = time.monotonic() + WAIT_S
        while sum(1 for _, w in self.record_lines(job_id) if w == "end") < ends:
            if time.monotonic() > deadline:
                raise Failed("%s: the handler's record (%s) shows %s for %s, expected %d "
                             "finished runs" % (what, self.o.record,
                                                self.record_lines(job_id) or "no runs",
                                                job_id, ends))
            time.sleep(0.2)

    def row(self, queue, cell):
        return 'table#queues tr[data-queue="%s"] td.%s' % (queue, cell)

    def open_overview(self):
        self.click("a#nav-overview", "the overview link")
        self.wait_page("/ui/", "the overview")
        self.wait_for("table#queues", "the overview")

    def open_queue(self, queue):
        self.open_overview()
        self.click('table#queues tr[data-queue="%s"] a.queue' % queue,
                   "the link to queue %s" % queue)
        self.wait_page("/ui/queues/" + queue, "queue page")
        self.wait_text("h1#queue-name", queue, "the queue page's title")

    # ---- the steps -----------------------------------------------------------
    def wait_daemon(self):
        """The dashboard answers (401 without a login) before the browser
        starts on it."""
        self.begin("waiting for the dashboard at %s/" % self.url)
        err = webdriver.wait_login_page(self.url + "/", WAIT_S)
        if err:
            raise Failed(err)

    def enqueue(self):
        """Three delayed jobs and one that dies at once in the main queue,
        two delayed in the other; wait until the dying one has run."""
        self.begin("enqueueing jobs with the delayq CLI")
        for i, delay in enumerate(("1h", "2h", "1d"), 1):
            self.cli("add", "-q", self.main, "-t", "report", "-d", delay,
                     "--id", "later-%d" % i, "ok")
        for i in (1, 2):
            self.cli("add", "-q", self.other, "-t", "welcome", "-d", "30m",
                     "--id", "mail-%d" % i, "ok")
        with open(self.o.flag, "w") as f:
            f.write("the job fails while this file exists\n")
        self.payload = "fail-while:" + self.o.flag
        self.cli("add", "-q", self.main, "-t", "charge", "--id", self.o.dead_id,
                 "--max-attempts", "1", self.payload)
        self.wait_record(self.o.dead_id, 1, "the failing job's first run")

    def login(self):
        self.begin("login page")
        self.b.get(self.url + "/")
        self.wait_for("form#login", "the login page")
        if self.exists("table#queues"):
            raise Failed("the overview is shown without a login")
        self.b.find("input#token").type("not-the-token-0123456789")
        self.click("button#login-submit", "the login button")
        self.wait_for("p#login-error", "a wrong token")
        if self.exists("table#queues"):
            raise Failed("a wrong token logged in")
        self.begin("logging in with the token")
        with open(self.o.token_file) as f:
            token = f.read().strip()
        self.b.find("input#token").type(token)
        self.click("button#login-submit", "the login button")
        self.wait_for("table#queues", "the overview after logging in")

    def overview(self):
        self.begin("overview counts")
        want = {
            self.main: {"delayed": "3", "due": "0", "processing": "0", "dead": "1",
                        "state": "running",
                        "workers": "%d/%d" % (self.main_workers, self.main_workers)},
            self.other: {"delayed": "2", "due": "0", "processing": "0", "dead": "0",
                         "state": "running",
                         "workers": "%d/%d" % (self.other_workers, self.other_workers)},
        }
        for q, cells in want.items():
            for cell, value in cells.items():
                self.wait_text(self.row(q, cell), value, "overview, queue %s, %s" % (q, cell))
        if self.exists("script:not([src])") or self.exists("[style]"):
            raise Failed("the overview has inline script or style")
        self.begin("charts")
        self.wait_for("section#charts .chart svg", "the charts")
        if self.exists("#content #charts"):
            raise Failed("the charts are inside #content (the live refresh would redraw them)")
        for series in ("done", "failed", "lateness"):
            if not self.exists('section#charts .chart[data-series="%s"]' % series):
                raise Failed("no chart of %s on the overview" % series)
        self.shot("overview.png")

        self.begin("live refresh of the overview")
        self.b.script("window.dqProbe = 42;")
        self.cli("add", "-q", self.other, "-t", "welcome", "-d", "30m", "--id", "mail-3", "ok")
        self.wait_text(self.row(self.other, "delayed"), "3",
                       "overview, %s, delayed after adding a job (live refresh)" % self.other)
        if self.b.script("return window.dqProbe;") != 42:
            raise Failed("the overview was reloaded to show the new count, "
                         "not refreshed in place")

    def dead_job(self):
        self.begin("queue page, dead tab")
        self.click('table#queues tr[data-queue="%s"] a.queue' % self.main,
                   "the link to queue %s" % self.main)
        self.wait_page("/ui/queues/" + self.main, "queue page")
        self.wait_text("h1#queue-name", self.main, "the queue page's title")
        self.wait_text("span#queue-state", "running", "the queue's state")
        self.wait_text("dl#queue-counts dd.dead", "1", "the queue page's dead count")
        self.click("a#tab-dead", "the dead tab")
        self.wait_page("tab=dead", "the dead tab")
        if "current" not in (self.b.find("a#tab-dead").attr("class") or ""):
            raise Failed("the dead tab is open but a#tab-dead is not marked current")
        row = 'table#jobs tr[data-job="%s"]' % self.o.dead_id
        self.wait_for(row, "the dead job in the dead tab")
        self.wait_for("form#requeue-all", "the dead tab's requeue-all form")
        self.shot("queue.png")

        self.begin("job page of the dead job")
        self.click(row + " a.job", "the dead job's link")
        self.wait_page("/jobs/" + self.o.dead_id, "the job page")
        self.wait_text("dd#job-id", self.o.dead_id, "the job's id")
        self.wait_text("dd#job-state", "dead", "the job's state")
        self.wait_text("dd#job-type", "charge", "the job's type")
        self.wait_text("dd#job-attempts", "1 of 1", "the job's attempts")
        err = "fail-while: %s exists" % self.o.flag
        self.wait_text("dd#job-error", lambda t: t is not None and err in t,
                       "the job's last error (%r)" % err)
        self.wait_text("pre#job-payload", self.payload, "the job's payload")
        self.wait_for("form#requeue", "the requeue button of a dead job")
        self.wait_for("form#delete", "the delete button of a dead job")
        if self.exists("form#run-now") or self.exists("form#cancel"):
            raise Failed("a dead job offers run-now or cancel")
        self.shot("job.png")

    def requeue(self):
        self.begin("requeue the dead job (its flag file removed)")
        os.unlink(self.o.flag)
        self.click("form#requeue button", "the requeue button")
        self.wait_page("done=requeued", "the answer to requeue")
        self.wait_text("p#flash", lambda t: bool(t), "the requeue's message")
        self.wait_record(self.o.dead_id, 2, "the requeued job's run")
        self.begin("the requeued job ran and is gone")
        deadline = time.monotonic() + WAIT_S
        while True:
            self.b.get("%s/queues/%s/jobs/%s" % (self.url, self.main, self.o.dead_id))
            if self.text("dd#job-state") == "notfound":
                break
            if time.monotonic() > deadline:
                raise Failed("the job page still shows the requeued job as %r after it ran"
                             % self.text("dd#job-state"))
            time.sleep(0.5)
        self.open_overview()
        self.wait_text(self.row(self.main, "dead"), "0", "overview, dead after the requeue")

    def pause_resume(self):
        self.begin("pause")
        self.open_queue(self.main)
        if self.exists("form#resume"):
            raise Failed("a running queue offers resume")
        self.click("form#pause button", "the pause button")
        self.wait_page("done=paused", "the answer to pause")
        self.wait_text("span#queue-state", "paused", "the queue's state after pause")
        self.wait_for("form#resume", "the resume button of a paused queue")
        if self.exists("form#pause"):
            raise Failed("a paused queue still offers pause")
        self.cli("add", "-q", self.main, "-t", "report", "--id", "while-paused", "ok")
        self.open_overview()
        self.wait_text(self.row(self.main, "state"), "paused", "overview, state after pause")
        self.wait_text(self.row(self.main, "due"), "1", "overview, due while paused")
        if self.record_lines("while-paused"):
            raise Failed("a job ran while its queue was paused")
        self.shot("overview-paused.png")

        self.begin("resume")
        self.open_queue(self.main)
        self.click("form#resume button", "the resume button")
        self.wait_page("done=resumed", "the answer to resume")
        self.wait_text("span#queue-state", "running", "the queue's state after resume")
        self.wait_record("while-paused", 1, "the job held by the pause, after resume")
        self.open_overview()
        self.wait_text(self.row(self.main, "state"), "running", "overview, state after resume")
        self.wait_text(self.row(self.main, "due"), "0", "overview, due after resume")

    def search_run_now(self):
        self.begin("search by id, then run a delayed job now")
        self.open_queue(self.main)
        self.b.find('form#search input[name="id"]').type("later-2")
        self.click("form#search button", "the search button")
        self.wait_page("/jobs/later-2", "the job page found by id")
        self.wait_text("dd#job-id", "later-2", "the found job's id")
        self.wait_text("dd#job-state", "delayed", "the found job's state")
        self.wait_for("form#cancel", "the cancel button of a delayed job")
        if self.exists("form#requeue"):
            raise Failed("a delayed job offers requeue")
        self.click("form#run-now button", "the run-now button")
        self.wait_page("done=ran-now", "the answer to run-now")
        self.wait_record("later-2", 1, "the job run now")
        self.open_overview()
        self.wait_text(self.row(self.main, "delayed"), "2",
                       "overview, delayed after one was run now")

    def logout(self):
        self.begin("logout")
        self.click("form#logout button", "the logout button")
        self.wait_for("form#login", "the login page after logout")
        self.b.get(self.url + "/")
        self.wait_for("form#login", "the overview after logout")
        if self.exists("table#queues"):
            raise Failed("the overview is shown after logout")

    def console_errors(self):
        """Script errors and Content-Security-Policy refusals the browser
        logged (the 401 of the login page and a missing favicon are not)."""
        try:
            entries = self.b.cmd("POST", "/se/log", {"type": "browser"}) or []
        except webdriver.WebDriverError:
            return []
        bad = []
        for e in entries:
            msg = e.get("message", "")
            if e.get("source") in ("javascript", "security") or \
                    "Content Security Policy" in msg:
                bad.append(msg)
        return bad

    def run(self):
        self.wait_daemon()
        self.enqueue()
        self.login()
        self.overview()
        self.dead_job()
        self.requeue()
        self.pause_resume()
        self.search_run_now()
        errors = self.console_errors()
        if errors:
            raise Failed("the browser's console shows errors:\n  " + "\n  ".join(errors))
        self.logout()


def queue_arg(text):
    name, _, workers = text.partition("=")
    if not name or not workers.isdigit():
        raise argparse.ArgumentTypeError("expected NAME=WORKERS, got %r" % text)
    return name, int(workers)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--url", required=True, help="the dashboard, http://HOST:PORT/ui")
    p.add_argument("--token-file", required=True)
    p.add_argument("--queue", type=queue_arg, action="append", required=True,
                   help="NAME=WORKERS, twice: the main queue, then another")
    p.add_argument("--delayq", required=True, help="the delayq CLI")
    p.add_argument("--redis-socket", required=True)
    p.add_argument("--record", required=True, help="the test handler's record file")
    p.add_argument("--flag", required=True, help="the failing job's flag file (made here)")
    p.add_argument("--dead-id", default="charge-42")
    p.add_argument("--shots", required=True, help="directory for the screenshots")
    p.add_argument("--work", required=True, help="directory for the browser's files")
    opts = p.parse_args()
    if len(opts.queue) != 2:
        p.error("--queue: give exactly two")
    return opts


def on_deadline(signum, frame):
    raise Failed("the test took longer than %d s" % TOTAL_S)


def on_term(signum, frame):
    raise SystemExit("browser-ui: stopped by signal %d" % signum)


def main():
    opts = parse_args()
    os.makedirs(opts.shots, exist_ok=True)
    signal.signal(signal.SIGALRM, on_deadline)
    signal.signal(signal.SIGTERM, on_term)
    signal.alarm(TOTAL_S)
    started = time.monotonic()
    scenario = None
    try:
        with webdriver.Browser(opts.work) as b:
            scenario = Scenario(opts, b)
            try:
                scenario.run()
            except (Failed, webdriver.WebDriverError) as e:
                try:
                    b.screenshot(os.path.join(opts.shots, "failure.png"))
                    with open(os.path.join(opts.shots, "failure.html"), "w") as f:
                        f.write(b.source())
                    where = b.url()
                except (webdriver.WebDriverError, OSError):
                    where = "?"
                print("browser-ui: FAILED at step '%s' (page %s): %s"
                      % (scenario.step, where, e), file=sys.stderr)
                print("browser-ui: screenshots and the failing page in %s" % opts.shots,
                      file=sys.stderr)
                return 1
    except (Failed, webdriver.WebDriverError) as e:
        step = scenario.step if scenario else "browser start"
        print("browser-ui: FAILED at step '%s': %s" % (step, e), file=sys.stderr)
        return 1
    finally:
        signal.alarm(0)
    print("browser-ui: passed in %.1f s; screenshots in %s"
          % (time.monotonic() - started, opts.shots), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
