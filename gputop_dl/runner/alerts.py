"""Delivering alerts: a job that became stuck or failed, to a command and to a webhook, once.

`Alerter` subscribes to an engine's snapshots (`serve`, `launch`); `present/alert_events.py`
says which events are new, and a thread of its own delivers them, so a slow hook never holds
the engine's tick. `--alert-command CMD` runs CMD (split as a shell would, never through one)
with the event as JSON on its stdin and as GPUTOP_DL_* environment variables, killed after
`timeout_s`. `--alert-webhook URL` POSTs the event as JSON (its `text` field is what Slack's
and Mattermost's incoming webhooks show), retried `tries` times with a growing pause. A hook
that fails is one line in the log (`say`) and never stops the monitor.
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from gputop_dl.child import die_with_parent
from gputop_dl.engine import Engine
from gputop_dl.errors import UsageError
from gputop_dl.present.alert_events import AlertEvent, AlertEvents
from gputop_dl.snapshot import Snapshot

COMMAND_TIMEOUT_S = 30.0
WEBHOOK_TIMEOUT_S = 10.0
WEBHOOK_TRIES = 3
RETRY_PAUSE_S = 1.0  # before the second try; doubled before each next one


def parse_command(cmd: str) -> list[str]:
    """`--alert-command`'s words (a shell's quoting, no shell); UsageError when empty or bad."""
    try:
        argv = shlex.split(cmd)
    except ValueError as exc:
        raise UsageError(f"--alert-command {cmd!r}: {exc}") from None
    if not argv:
        raise UsageError("--alert-command: expected a command, got nothing")
    return argv


def check_webhook(url: str) -> str:
    """`--alert-webhook`: an http:// or https:// URL; UsageError otherwise."""
    if not url.startswith(("http://", "https://")) or len(url) < 10:
        raise UsageError(f"--alert-webhook {url!r}: expected an http:// or https:// URL")
    return url


def event_env(ev: AlertEvent) -> dict[str, str]:
    """The event's GPUTOP_DL_* environment variables."""
    st = ev.get("stuck") or {}
    env = {"GPUTOP_DL_EVENT": ev["event"], "GPUTOP_DL_JOB": ev["job"],
           "GPUTOP_DL_PID": "" if ev.get("pid") is None else str(ev["pid"]),
           "GPUTOP_DL_HOST": ev["host"], "GPUTOP_DL_TEXT": ev["text"],
           "GPUTOP_DL_WHERE": str(st.get("where") or ""), "GPUTOP_DL_FRAME": str(st.get("frame") or "")}
    return {k: v.replace("\0", "") for k, v in env.items()}


def run_command(argv: list[str], ev: AlertEvent, timeout_s: float = COMMAND_TIMEOUT_S) -> str | None:
    """Run the alert command with the event; None when it exited 0, else why not."""
    try:
        p = subprocess.run(argv, input=json.dumps(ev).encode(), stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=timeout_s, check=False,
                           env={**os.environ, **event_env(ev)}, preexec_fn=die_with_parent)
    except subprocess.TimeoutExpired:
        return f"killed after {timeout_s:g} s"
    except OSError as exc:
        return str(exc)
    if p.returncode != 0:
        tail = p.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"exit {p.returncode}" + (f": {tail[-1][:200]}" if tail else "")
    return None


def post_webhook(url: str, ev: AlertEvent, tries: int = WEBHOOK_TRIES,
                 pause_s: float = RETRY_PAUSE_S, timeout_s: float = WEBHOOK_TIMEOUT_S) -> str | None:
    """POST the event as JSON; None once a try got a 2xx answer, else the last try's error."""
    body = json.dumps(ev).encode()
    err: str | None = None
    for i in range(max(1, tries)):
        if i:
            time.sleep(pause_s * 2 ** (i - 1))
        req = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json",
                                              "User-Agent": "gputop-dl"})
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as r:  # noqa: S310 - the user's URL
                if 200 <= r.status < 300:
                    return None
                err = f"HTTP {r.status}"
        except urllib.error.HTTPError as exc:
            err = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError) as exc:
            err = str(getattr(exc, "reason", exc))
    return f"{err} after {max(1, tries)} tries"


class Alerter:
    """An engine subscriber that hands each new alert event to a command and a webhook."""

    def __init__(self, command: list[str] | None = None, webhook: str | None = None, *,
                 say: Callable[[str], None] = lambda _m: None, host: str | None = None,
                 command_timeout_s: float = COMMAND_TIMEOUT_S, tries: int = WEBHOOK_TRIES,
                 pause_s: float = RETRY_PAUSE_S) -> None:
        self.command, self.webhook, self.say = command, webhook, say
        self.command_timeout_s, self.tries, self.pause_s = command_timeout_s, tries, pause_s
        self.events = AlertEvents(host)
        self._q: queue.Queue[AlertEvent | None] = queue.Queue()
        self.sent = 0  # events delivered to every hook
        self._thread = threading.Thread(target=self._deliver, name="gputop-dl-alerts", daemon=True)
        self._thread.start()

    def __call__(self, snap: Snapshot) -> None:  # engine thread: no I/O here
        for ev in self.events.update(snap):
            self._q.put(ev)

    def _deliver(self) -> None:
        while True:
            ev = self._q.get()
            if ev is None:
                return
            ok = True
            if self.command:
                err = run_command(self.command, ev, self.command_timeout_s)
                if err:
                    ok = False
                    self.say(f"alert command failed ({ev['event']} {ev['job']}): {err}")
            if self.webhook:
                err = post_webhook(self.webhook, ev, self.tries, self.pause_s)
                if err:
                    ok = False
                    self.say(f"alert webhook failed ({ev['event']} {ev['job']}): {err}")
            self.sent += ok

    def close(self, timeout: float = 5.0) -> None:
        """Deliver what is queued (up to `timeout` s), then stop."""
        self._q.put(None)
        self._thread.join(timeout)


def attach_alerts(engine: Engine, command: list[str] | None, webhook: str | None,
                  say: Callable[[str], None] | None = None) -> Alerter | None:
    """An `Alerter` subscribed to `engine` (None without a hook); a failed hook is said in the
    engine's log (and through `say` where given)."""
    if not command and not webhook:
        return None

    def told(msg: str) -> None:
        engine.say(msg)
        if say is not None:
            say(msg)
    alerter = Alerter(command, webhook, say=told)
    engine.subscribe(alerter)
    return alerter
