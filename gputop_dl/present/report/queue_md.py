"""The report's "Queue" section: a queue run's policy and figures, per job its arrival, start,
end, wait and JCT and why it waited, and the simulator's prediction beside what happened
(docs/scheduling.md). From a `session_json` dict's `queue` and jobs; "" for any other run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TYPE_CHECKING

from gputop_dl.text.fmt import DASH, num, pct, secs
from gputop_dl.text.markdown import md_cell, md_text, table

if TYPE_CHECKING:
    from gputop_dl.present.report.document import JobDoc, SessionDoc


def _s1(x: float | None) -> str:
    return num(x, ".1f")


def queue_section(data: SessionDoc) -> str:
    """A queue run: its policy and means, then per job arrival, start, end, wait, run time, JCT
    (seconds from the session start) and why it waited."""
    q = data.get("queue")
    if not q:
        return ""
    unit = q.get("unit") or "slot"
    admission = ("CPU-aware admission" if q.get("cpu_aware") else "no CPU-aware admission")
    out = ["## Queue", "",
           f"Policy **{md_text(q.get('policy'))}** on {q.get('slots')} {md_text(unit)}s, {admission}. "
           f"{q.get('jobs_ended')} of {len(data['jobs'])} jobs ended: makespan "
           f"{secs(q.get('makespan_s'))}, mean JCT {secs(q.get('mean_jct_s'))}, mean wait "
           f"{secs(q.get('mean_wait_s'))}, {md_text(unit)}s busy {pct(q.get('slot_busy_fraction'))} "
           + ("over the makespan (measured GPU utilisation)." if q.get("slot_busy_measure") == "gpu-util"
              else "of the makespan (held by a job, not a utilisation)."), ""]
    rows = []
    jobs = sorted(data["jobs"], key=lambda j: (j.get("arrival_s") is None, j.get("arrival_s") or 0))
    for j in jobs:
        extra = j.get("queue") or {}
        rows.append([md_cell(j["name"]), md_cell(j.get("status")), str(extra.get("gpus") or DASH),
                     _s1(j.get("arrival_s")), _s1(j.get("start_s")), _s1(j.get("end_s")),
                     _s1(j.get("wait_s")), _s1(extra.get("run_s")), _s1(j.get("jct_s")),
                     _s1(extra.get("expected_s")), md_cell(extra.get("waited_because") or DASH)])
    out.append(table(["job", "status", f"{unit}s", "arrival s", "start s", "end s", "wait s",
                      "run s", "JCT s", "expected s", "waited because"], rows, "ll" + "r" * 8 + "l"))
    out += _prediction_lines(q.get("prediction"), jobs)
    return "\n".join(out)


def _prediction_lines(p: Mapping[str, Any] | None, jobs: list[JobDoc]) -> list[str]:
    """The simulator's prediction for the same jobs, arrivals and policy, beside what happened."""
    if not p:
        return []
    tick = p.get("tick_s")
    out = ["", "### Simulated beside what happened", "",
           f"The simulator (policy **{md_text(p.get('policy'))}**, the recorded arrivals and expected "
           "durations" + (f", acting at the queue's {tick:g} s ticks" if tick else "")
           + f", CPU interference {p.get('cpu_interference'):g}, shared-GPU factor {p.get('gpu_share'):g}) "
           f"predicts mean JCT {secs(p.get('mean_jct_s'))} and mean wait {secs(p.get('mean_wait_s'))}; "
           f"mean absolute error of the predicted JCT over {p.get('jobs_compared')} jobs that ended: "
           f"**{pct(p.get('jct_mae'))}** ({secs(p.get('jct_mae_s'))}).", ""]
    rows = []
    for j in jobs:
        pj = (p.get("jobs") or {}).get(j["name"], {})
        real, pred = j.get("jct_s"), pj.get("jct_s")
        err = pct(abs(pred - real) / real) if real and pred is not None else DASH
        rows.append([md_cell(j["name"]), _s1(j.get("wait_s")), _s1(pj.get("wait_s")), _s1(real), _s1(pred), err])
    out.append(table(["job", "wait s", "predicted wait s", "JCT s", "predicted JCT s", "error"], rows,
                     "l" + "r" * 5))
    return out
