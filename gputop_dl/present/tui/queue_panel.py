"""Queue panel (`gputop-dl queue`): how many jobs run, wait, are still to arrive; each waiting job's wait and why.

Fed by `Snapshot.queue` (engine/queue_plan.py `QueuePlan.queue_state`): the policy and slots,
and per job its state (pending: not arrived yet; waiting; running; ended), its times and, while
it waits, the policy's reason ("GPU 2 free, but 1.8 cores short"). Waiting jobs are listed in
the policy's order, the next to start first. Hidden unless the snapshot has a queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from textual.content import Content

from gputop_dl.present.tui.base import Panel, set_border
from gputop_dl.text.fmt import secs

STATES = (("running", "running", "$text-success"), ("waiting", "waiting", "$text-warning"),
          ("pending", "to arrive", "$text-muted"), ("ended", "ended", "$text-accent"))


def queue_subtitle(q: Mapping[str, Any]) -> str:
    unit = q.get("unit") or "slot"
    if q.get("policy") == "lyapunov":
        cpu = f"CPU overcommit weighed, v = {q.get('v', 1):g}"
    elif q.get("cpu_aware"):
        cpu = f"CPU-aware, {q.get('cpus', 0):g} cores"
    else:
        cpu = "not CPU-aware"
    return f"{q.get('policy')} · {q.get('slots')} {unit}s · {cpu}"


def queue_lines(q: Mapping[str, Any]) -> list[list[tuple[str, str]]]:
    """The panel's lines as (text, style) runs."""
    jobs = q.get("jobs") or []
    counts = {s: sum(j.get("state") == s for j in jobs) for s, _, _ in STATES}
    head: list[tuple[str, str]] = []
    for s, label, style in STATES:
        if counts[s] or s in ("running", "waiting"):
            head += [(" · ", "$text-muted")] if head else []
            head.append((f"{counts[s]} {label}", style if counts[s] else "$text-muted"))
    lines = [head]
    width = max((len(j["name"]) for j in jobs), default=4)
    for j in (j for j in jobs if j.get("state") == "waiting"):
        lines.append([(f"{j['name']:<{width}} ", "bold"), (f"{secs(j.get('waited_s')):>7}  ", ""),
                      (j.get("reason") or "waiting", "$text-warning")])
    elapsed = q.get("elapsed_s") or 0.0
    for j in (j for j in jobs if j.get("state") == "pending"):
        lines.append([(f"{j['name']:<{width}} ", "bold"),
                      (f"arrives in {secs(max(0.0, j['arrival_s'] - elapsed))}", "$text-muted")])
    return lines


class QueuePanel(Panel):
    """The queue: counts, then the waiting jobs (wait, reason), then those still to arrive."""

    DEFAULT_CSS = """
    QueuePanel { height: 1fr; }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(Content.styled("no queue", "$text-muted"), **kw)
        self.border_title = "queue"

    def show(self, q: Mapping[str, Any]) -> None:
        set_border(self, subtitle=queue_subtitle(q))
        self.set(Content("\n").join(Content.assemble(*line) for line in queue_lines(q)))
