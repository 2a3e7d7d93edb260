"""A job's and a GPU's energy where they show: the Prometheus counters, the jobs table's column
(TUI and console), the details screen's line; unknown is "–" with the reason, never 0 J."""

from __future__ import annotations

import pytest

from gputop_dl.present.energy_text import energy_line
from gputop_dl.present.headless import jobs_table
from gputop_dl.present.prometheus import SnapshotCollector
from gputop_dl.present.tui.jobs_table import COLUMN_KEYS, Palette, job_row
from gputop_dl.snapshot import GpuSample, JobSample, Snapshot
from gputop_dl.text.fmt import DASH, joules
from tests.test_serve import one, render

GPU = GpuSample(0, name="H100", uuid="GPU-x", power_w=300.0, energy_j=1234.5, energy_since=100.0,
                energy_source="counter", energy_scope="gpu")
MEASURED = JobSample("a", 7, True, pids=(7,), energy_j=900.0, energy_w=300.0,
                     energy_per_step_j=30.0, energy_per_epoch_j=3000.0, samples_per_joule=2.1,
                     energy_estimate=False, energy_source="counter")
SHARED = JobSample("b", 8, False, pids=(8,), energy_j=450.0, energy_w=150.0, energy_estimate=True,
                   energy_source="counter", energy_note="split by SM shares")
UNKNOWN = JobSample("c", 9, False, pids=(9,), energy_note="no GPU energy: NVML status no-driver")


def test_serve_has_the_gpu_and_job_energy_counters():
    c = SnapshotCollector(hostname="n")
    c.feed(Snapshot(time=110.0, gpu_status="ok", gpus=(GPU, GpuSample(1, error="GPU is lost")),
                    jobs=(MEASURED, SHARED, UNKNOWN)))
    m = render(c)
    assert one(m, "gputop_dl_gpu_energy_joules_total", gpu="0") == 1234.5
    assert one(m, "gputop_dl_gpu_energy_joules_created", gpu="0") == 100.0
    assert [lab["gpu"] for lab, _ in m["gputop_dl_gpu_energy_joules_total"]] == ["0"]  # lost: none
    assert one(m, "gputop_dl_gpu_energy_source_info", gpu="0", source="counter", scope="gpu") == 1
    assert one(m, "gputop_dl_job_energy_joules_total", job_name="a") == 900.0
    assert one(m, "gputop_dl_job_energy_joules_total", job_name="b") == 450.0
    assert not [lab for lab, _ in m["gputop_dl_job_energy_joules_total"] if lab["job_name"] == "c"]
    assert one(m, "gputop_dl_job_power_watts", job_name="a") == 300.0
    assert one(m, "gputop_dl_job_energy_per_step_joules", job_name="a") == 30.0
    assert one(m, "gputop_dl_job_samples_per_joule", job_name="a") == 2.1
    assert one(m, "gputop_dl_job_energy_estimate", job_name="a") == 0.0
    assert one(m, "gputop_dl_job_energy_estimate", job_name="b") == 1.0


def test_the_jobs_table_has_an_energy_column_marked_for_an_estimate():
    p = Palette()
    i = COLUMN_KEYS.index("energy")
    assert job_row(MEASURED, p).cells[i].text == joules(900.0)
    assert job_row(SHARED, p).cells[i].text.startswith("~")
    assert job_row(UNKNOWN, p).cells[i].text == DASH
    snap = Snapshot(time=1.0, gpu_status="ok", jobs=(MEASURED, UNKNOWN))
    cols = [c.header for c in jobs_table(snap).columns]
    assert "energy" in cols
    none = Snapshot(time=1.0, gpu_status="no-driver", jobs=(UNKNOWN,))
    assert "energy" not in [c.header for c in jobs_table(none).columns]  # nothing known: left out


def test_the_energy_line_has_each_figure_or_the_reason():
    line = energy_line(MEASURED) or ""
    for figure in (joules(900.0), joules(30.0), joules(3000.0), "300 W", "2.1"):
        assert figure in line
    assert (energy_line(UNKNOWN) or "").startswith(DASH)
    assert "no-driver" in (energy_line(UNKNOWN) or "")
    assert "0 J" not in (energy_line(UNKNOWN) or "")
    assert (energy_line(SHARED) or "").startswith("~")
    assert energy_line(JobSample("d", 1, False)) is None  # nothing said: no line


def test_the_details_screen_shows_the_energy_line():
    from gputop_dl.present.tui.job_detail import job_detail_lines

    text = job_detail_lines(MEASURED, None).plain
    row = next(line for line in text.splitlines() if line.startswith("energy"))
    assert joules(30.0) in row and joules(900.0) in row
    assert not any(line.startswith("energy") for line in
                   job_detail_lines(JobSample("d", 1, False), None).plain.splitlines())


@pytest.mark.parametrize("x,want", [(0.5, "0.50 J"), (850.0, "850 J"), (999.9, "1.00 kJ"),
                                    (12_345.0, "12.3 kJ"), (4.56e6, "4.56 MJ")])
def test_joules_text(x, want):
    assert joules(x) == want
