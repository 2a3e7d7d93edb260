"""The session store's reads of recorded samples and steps: per tick, per job, and summarised in SQL.

Reports summarise a 24-hour session in SQL (means per time bucket), not in Python.
`SampleReads` is a part of `record/store.py`'s `Store`.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from gputop_dl.record.store_keys import StoreKeys
from gputop_dl.record.store_write import PHASE_COLS

# The rows these reads return, column by column as the docstrings name them (None: not recorded)
# t, cpu_busy, load1, psi_some10, throttled, mem_used
HostRow = tuple[float, float | None, float | None, float | None, float | None, int | None]
# t, gpu, util, mem_used, mem_total, temp_c, power_w, throttle reasons ("a,b")
GpuRow = tuple[float, int, float | None, int | None, int | None, float | None, float | None,
               str | None]
# t, job, phase, cpu_cores, rss, nprocs, gpu_mem, stall, step_time, samples_per_s
JobSampleRow = tuple[float, str, str | None, float | None, int | None, int | None, int | None,
                     float | None, float | None, float | None]
CpuWaitRow = tuple[float, float | None, float | None, float | None, float | None]
# means of cpu_wait, trainer, workers, throttled; max cpu_wait; samples with a figure (> 0)
CpuWaitMeans = tuple[float, float | None, float | None, float | None, float, int]
DiskRow = tuple[float, float | None, float | None, float | None]  # t, io_read, io_wait, majflt
# mean and max io_read, mean io_wait, mean major faults, samples with a read figure (> 0)
DiskMeans = tuple[float, float, float | None, float | None, int]
MemoryRow = tuple[float, float | None, float | None]  # t, mem_refault, mem_wait
# mean and max refaults, mean memory wait, samples with a refault figure (> 0)
MemoryMeans = tuple[float, float, float | None, int]
# phase, joules of its run (the last), mean power W, J/step, J/epoch, samples/J, 1 if an
# estimate, samples with a figure (analyse/live/energy.py)
EnergyRow = tuple[str | None, float, float | None, float | None, float | None, float | None,
                  float | None, int]
# k, mean t, cpu_busy, load1, psi_some10, throttled, mem_used, n
HostBucket = tuple[int, float, float | None, float | None, float | None, float | None,
                   float | None, int]
# k, gpu, mean t, util, mem_used, max mem_total, temp_c, power_w, n
GpuBucket = tuple[int, int, float, float | None, float | None, int | None, float | None,
                  float | None, int]
# k, job, mean t, cpu_cores, stall, step_time, samples_per_s, max rss, max gpu_mem, n
JobBucket = tuple[int, str, float, float | None, float | None, float | None, float | None,
                  int | None, int | None, int]
# mean cpu_cores (t >= t_from), max rss, max gpu_mem, mean stall
JobStats = tuple[float | None, int | None, int | None, float | None]
StepRow = tuple[float | None, float | None, float | None, int | None]  # t, t_step, t_data, samples


class PhaseRow(TypedDict):
    """A recorded step with its phases (`phase_rows`), as a step event."""

    t: float | None
    t_step: float | None
    t_data: float | None
    ph: NotRequired[dict[str, float]]  # phase -> seconds, where the step's phases were recorded


def unpack_per_cpu(blob: bytes | None) -> tuple[float, ...]:
    return tuple(b / 100 for b in blob) if blob else ()


class SampleReads(StoreKeys):
    """Host, GPU and job samples and the steps of a session (a part of `Store`)."""

    def host_samples(self, sid: str) -> list[HostRow]:
        return self.db.execute("SELECT t, cpu_busy, load1, psi_some10, throttled, mem_used"
                               " FROM host_samples WHERE sk=? ORDER BY t",
                               (self._sk(sid),)).fetchall()

    def per_cpu_samples(self, sid: str) -> list[tuple[float, tuple[float, ...]]]:
        """(t, per-core busy fractions) of every host sample."""
        return [(t, unpack_per_cpu(b)) for t, b in self.db.execute(
            "SELECT t, per_cpu FROM host_samples WHERE sk=? ORDER BY t", (self._sk(sid),))]

    def gpu_samples(self, sid: str) -> list[GpuRow]:
        return self.db.execute("SELECT t, gpu, util, mem_used, mem_total, temp_c, power_w, throttle"
                               " FROM gpu_samples WHERE sk=? ORDER BY t, gpu",
                               (self._sk(sid),)).fetchall()

    def job_samples(self, sid: str, job: str | None = None) -> list[JobSampleRow]:
        """(t, job, phase, cpu_cores, rss, nprocs, gpu_mem, stall, step_time, samples_per_s)."""
        names = self._names_of(sid, job)
        out = []
        for jk, name in names.items():
            out += [(t, name, *rest) for t, *rest in self.db.execute(
                "SELECT t, phase, cpu_cores, rss, nprocs, gpu_mem, stall, step_time,"
                " samples_per_s FROM job_samples WHERE jk=?", (jk,))]
        out.sort(key=lambda r: r[0])
        return out

    # CPU wait ------------------------------------------------------
    def job_cpu_wait(self, sid: str, job: str) -> list[CpuWaitRow]:
        """(t, cpu_wait, trainer, workers, throttled) of a job's samples, in time order; [] for a
        database recorded before CPU wait was (no such columns)."""
        if not self.has_column("job_samples", "cpu_wait"):
            return []
        jk = self._jk(sid, job)
        if jk is None:
            return []
        return self.db.execute(
            "SELECT t, cpu_wait, cpu_wait_trainer, cpu_wait_workers, cpu_throttled FROM job_samples"
            " WHERE jk=? ORDER BY t", (jk,)).fetchall()

    def job_cpu_wait_means(self, sid: str, job: str) -> CpuWaitMeans | None:
        """(mean cpu_wait, trainer, workers, throttled, max cpu_wait, samples with a figure) of a
        job's samples; None for a database without the columns or a job with no figure."""
        if not self.has_column("job_samples", "cpu_wait"):
            return None
        jk = self._jk(sid, job)
        if jk is None:
            return None
        r = self.db.execute(
            "SELECT AVG(cpu_wait), AVG(cpu_wait_trainer), AVG(cpu_wait_workers),"
            " AVG(cpu_throttled), MAX(cpu_wait), COUNT(cpu_wait) FROM job_samples WHERE jk=?",
            (jk,)).fetchone()
        return None if r is None or not r[5] else tuple(r)

    def job_disk(self, sid: str, job: str) -> list[DiskRow]:
        """(t, io_read, io_wait, major_faults) of a job's samples, in time order; []
        for a database recorded before the disk was (no such columns)."""
        if not self.has_column("job_samples", "io_read"):
            return []
        jk = self._jk(sid, job)
        if jk is None:
            return []
        return self.db.execute(
            "SELECT t, io_read, io_wait, major_faults FROM job_samples WHERE jk=? ORDER BY t",
            (jk,)).fetchall()

    def job_disk_means(self, sid: str, job: str) -> DiskMeans | None:
        """(mean io_read, max io_read, mean io_wait, mean major_faults, samples with a read
        figure) of a job's samples; None for a database without the columns or a
        job with no figure."""
        if not self.has_column("job_samples", "io_read"):
            return None
        jk = self._jk(sid, job)
        if jk is None:
            return None
        r = self.db.execute(
            "SELECT AVG(io_read), MAX(io_read), AVG(io_wait), AVG(major_faults), COUNT(io_read)"
            " FROM job_samples WHERE jk=?", (jk,)).fetchone()
        return None if r is None or not r[4] else tuple(r)

    def job_memory(self, sid: str, job: str) -> list[MemoryRow]:
        """(t, mem_refault, mem_wait) of a job's samples, in time order; [] for a
        database recorded before memory was (no such columns)."""
        if not self.has_column("job_samples", "mem_refault"):
            return []
        jk = self._jk(sid, job)
        if jk is None:
            return []
        return self.db.execute("SELECT t, mem_refault, mem_wait FROM job_samples WHERE jk=? "
                               "ORDER BY t", (jk,)).fetchall()

    def job_memory_means(self, sid: str, job: str) -> MemoryMeans | None:
        """(mean refaults, max refaults, mean memory wait, samples with a refault figure) of a
        job's samples; None without the columns or with no figure."""
        if not self.has_column("job_samples", "mem_refault"):
            return None
        jk = self._jk(sid, job)
        if jk is None:
            return None
        r = self.db.execute("SELECT AVG(mem_refault), MAX(mem_refault), AVG(mem_wait), "
                            "COUNT(mem_refault) FROM job_samples WHERE jk=?", (jk,)).fetchone()
        return None if r is None or not r[3] else tuple(r)

    def job_energy_ticks(self, sid: str, job: str) -> list[tuple[float, float | None, float | None,
                                                                  float | None, float | None]]:
        """(t, energy, energy_w, energy_step, samples_per_j) of a job's samples with a figure,
        in time order; [] without the columns."""
        if not self.has_column("job_samples", "energy"):
            return []
        jk = self._jk(sid, job)
        if jk is None:
            return []
        return self.db.execute("SELECT t, energy, energy_w, energy_step, samples_per_j FROM"
                               " job_samples WHERE jk=? AND energy IS NOT NULL ORDER BY t",
                               (jk,)).fetchall()

    def job_energy(self, sid: str, job: str) -> list[EnergyRow]:
        """A job's energy per phase (baseline, co-run, monitor: a run each): the joules its run
        reached, its mean power, joules per step and per epoch, samples per joule, whether a
        shared GPU was split (an estimate); [] without the columns or with no figure."""
        if not self.has_column("job_samples", "energy"):
            return []
        jk = self._jk(sid, job)
        if jk is None:
            return []
        return self.db.execute(
            "SELECT phase, MAX(energy), AVG(energy_w), AVG(energy_step), AVG(energy_epoch),"
            " AVG(samples_per_j), MAX(energy_est), COUNT(energy) FROM job_samples"
            " WHERE jk=? AND energy IS NOT NULL GROUP BY phase ORDER BY MIN(t)", (jk,)).fetchall()

    # --- aggregated reads (reports: a 24-hour session is summarised in SQL, not in Python) ----
    def sample_span(self, sid: str) -> tuple[float, float, int] | None:
        """(first t, last t, count) of the session's host samples (one per tick), or None."""
        r = self.db.execute("SELECT MIN(t), MAX(t), COUNT(*) FROM host_samples WHERE sk=?",
                            (self._sk(sid),)).fetchone()
        return None if r is None or r[0] is None else (r[0], r[1], r[2])

    def host_series(self, sid: str, t0: float, width: float, every_s: int = 1) -> list[HostBucket]:
        """Host samples averaged per time bucket [t0 + k*width, t0 + (k+1)*width).

        Rows (k, mean t, cpu_busy, load1, psi_some10, throttled, mem_used, n), ordered by k;
        a mean over no known values is None; empty buckets have no row. `every_s` > 1 reads
        only the samples of every `every_s`-th second (long sessions: means of a subsample)."""
        return self.db.execute(
            "SELECT CAST((t - ?) / ? AS INTEGER) AS k, AVG(t), AVG(cpu_busy), AVG(load1),"
            " AVG(psi_some10), AVG(throttled), AVG(mem_used), COUNT(*) FROM host_samples"
            " WHERE sk=? AND CAST(t - ? AS INTEGER) % ? = 0 GROUP BY k ORDER BY k",
            (t0, width, self._sk(sid), t0, max(1, int(every_s)))).fetchall()

    def gpu_series(self, sid: str, t0: float, width: float, every_s: int = 1) -> list[GpuBucket]:
        """GPU samples averaged per time bucket and GPU (see `host_series`).

        Rows (k, gpu, mean t, util, mem_used, max mem_total, temp_c, power_w, n), by k, gpu."""
        return self.db.execute(
            "SELECT CAST((t - ?) / ? AS INTEGER) AS k, gpu, AVG(t), AVG(util), AVG(mem_used),"
            " MAX(mem_total), AVG(temp_c), AVG(power_w), COUNT(*) FROM gpu_samples"
            " WHERE sk=? AND CAST(t - ? AS INTEGER) % ? = 0 GROUP BY k, gpu"
            " ORDER BY k, gpu", (t0, width, self._sk(sid), t0, max(1, int(every_s)))).fetchall()

    def job_series(self, sid: str, t0: float, width: float, every_s: int = 1) -> list[JobBucket]:
        """Job samples averaged per time bucket and job (see `host_series`).

        Rows (k, job, mean t, cpu_cores, stall, step_time, samples_per_s, max rss, max gpu_mem,
        n), ordered by k, job."""
        out = []
        for jk, name in self._jks_of(sid).items():
            out += [(k, name, *rest) for k, *rest in self.db.execute(
                "SELECT CAST((t - ?) / ? AS INTEGER) AS k, AVG(t), AVG(cpu_cores), AVG(stall),"
                " AVG(step_time), AVG(samples_per_s), MAX(rss), MAX(gpu_mem), COUNT(*)"
                " FROM job_samples WHERE jk=? AND CAST(t - ? AS INTEGER) % ? = 0"
                " GROUP BY k", (t0, width, jk, t0, max(1, int(every_s))))]
        out.sort(key=lambda r: (r[0], r[1]))
        return out

    def job_sample_stats(self, sid: str, job: str, phase: str,
                         t_from: float | None = None) -> JobStats:
        """(mean cpu_cores over samples at t >= t_from, max rss, max gpu_mem, mean stall) of a
        job's samples in `phase` (unknown values skipped; None where none is known)."""
        row: JobStats = self.db.execute(
            "SELECT AVG(CASE WHEN t >= ? THEN cpu_cores END), MAX(rss), MAX(gpu_mem), AVG(stall)"
            " FROM job_samples WHERE jk=? AND phase=?",
            (-1e300 if t_from is None else t_from, self._jk(sid, job), phase)).fetchone()
        return row

    def step_count(self, sid: str, job: str, phase: str) -> int:
        """Number of the job's step events in `phase`."""
        return int(self.db.execute("SELECT COUNT(*) FROM steps WHERE jk=? AND phase=?",
                                   (self._jk(sid, job), phase)).fetchone()[0])

    def step_rows(self, sid: str, job: str, phase: str, offset: int = 0,
                  every: int = 1) -> list[StepRow]:
        """(t, t_step, t_data, samples) of a job's step events in `phase`, in order, skipping
        the first `offset` and then keeping every `every`-th."""
        rows = self.db.execute(
            "SELECT t, t_step, t_data, samples FROM steps WHERE jk=? AND phase=? ORDER BY rowid"
            " LIMIT -1 OFFSET ?", (self._jk(sid, job), phase, offset))
        if every <= 1:
            return rows.fetchall()
        return [r for i, r in enumerate(rows) if i % every == 0]

    def phase_rows(self, sid: str, job: str, phase: str, offset: int = 0,
                   every: int = 1) -> list[PhaseRow]:
        """A job's steps in `phase` with their phases, as step events (t, t_step, t_data, and
        `ph` when the step's phases were recorded), skipping the first `offset` and then
        keeping every `every`-th; [] in a database without the columns."""
        if not self.has_column("steps", "ph_cuda"):
            return []
        out: list[PhaseRow] = []
        for i, (t, t_step, t_data, cuda, *vals) in enumerate(self.db.execute(
                f"SELECT t, t_step, t_data, ph_cuda, {', '.join(PHASE_COLS)} FROM steps"
                " WHERE jk=? AND phase=? ORDER BY rowid LIMIT -1 OFFSET ?",
                (self._jk(sid, job), phase, offset))):
            if i % every:
                continue
            d: PhaseRow = {"t": t, "t_step": t_step, "t_data": t_data}
            if cuda is not None:
                d["ph"] = {c[3:]: v for c, v in zip(PHASE_COLS, vals) if v is not None}
            out.append(d)
        return out
