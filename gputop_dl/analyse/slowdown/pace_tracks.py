"""Each job's readings alone and beside the other jobs, tick by tick, and whose it may borrow.

The live judge (analyse/live/passive.py) feeds `OwnPace.update` each tick; it keeps every job's
track (analyse/slowdown/pace.py: its loader's rates, step times and loop counter alone and
beside the others), lends a job's readings alone to its twins and takes those stored from an
earlier run (engine/pace_refs.py), and asks the meters for each job's `Pace`.

Under way: SETTLE seconds after its process started (ticks after it was first seen, where its
start is not read: a job older than the monitor is not starting), once its loader's workers
run, or where it has none (yet: they start with its first batch), SETTLE_NO_WORKERS after. A
newcomer's start-up (torch, its CUDA context, its workers' spawn) takes no share of what the
others run on, so their ticks beside it count neither as alone nor as beside.

A reading counts once, when it changes (a new burst): the value a job shows on its first
ticks beside others is its last reading alone, which is not its pace beside them. A reading
that comes within STRADDLE_S of the job starting or ending to run alone counts for neither
side: its burst (up to 32 s) may have begun before the change. A job slowed so far that a
burst counts fewer than 4 steps shows none until its longer bursts read one (collect/pyspy/stall_sampler.py
`LONGER`).

A job that never ran alone here (started beside others) borrows the reference of its twin: a
job of the same user, in the same directory and container, with the same command line but for
where it writes, its name, seed, optimizer figures or length (analyse/slowdown/twins.py) that ran alone
REF_MIN readings or more (one still running, or one that ended within TWIN_MAX_AGE_S): a copy
started by hand beside the first makes the same batches, so its loader's pace alone is the
first's (`twin_pid` names it, `twin_args` what differs). Without a running twin, a stored run
of its command lent to it (`lend_stored`: engine/pace_refs.py reads and keeps them, by the
job's fingerprint) is its reference, up to STORED_MAX_AGE_S after its last reading
(`stored_age_s`); a stored loop counter alone paces it where its own counter has the same name.
Its own readings beside the others count once it is under way (its workers'
start-up is not its pace). Without either it has no reference: its estimate stays
the CPU-wait model's until the others end; once it has run alone REF_MIN readings after them,
its pace alone over its last window beside them says how much slower it ran then (`earlier`).
Outside load while it ran alone is in its reference (it makes the ratio smaller). Only
numbers, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gputop_dl.analyse.slowdown import twins
from gputop_dl.analyse.slowdown.pace import (LOOP_WARM_PAIRS, NOW_MIN, Lent, Pace, Track,
                                             enough, has_ref, loop_seconds, pace, ref_until)
from gputop_dl.snapshot import JobSample

SETTLE = 10  # seconds after a job started (ticks after it was first seen, where its
SETTLE_NO_WORKERS = 30  # start is not read) before it is under way; ... with no loader worker
STRADDLE_S = 35.0  # the monitor's longest py-spy burst (32 s, collect/pyspy/stall_sampler.py) and its tick

TWIN_MAX_AGE_S = 3600.0  # a twin's reference alone is lent this long after its last tick alone
STORED_MAX_AGE_S = 7 * 86400.0  # a stored reference (engine/pace_refs.py) is lent this long
TWINS_KEPT = 64  # references kept by command line (the oldest dropped)

# what twins share: the command line's key (analyse/slowdown/twins.py), directory, user and container
# (two users' `python train.py` in /workspace of two containers read different data)
TwinKey = tuple[tuple[str, ...], str | None, str | None, str | None]

Key = int | str  # a job's PID (its name where it has none): a found job is renamed when a twin
# starts beside it ("train.py" becomes "train.py (4242)"), which must not lose its pace alone


@dataclass(frozen=True)
class Reference:
    """A job's readings alone, as kept between gputop-dl runs (engine/pace_refs.py): its
    loader's cores and write calls a second, its step times, its loop counter's name and
    pairs of dumps (steps, seconds), and the time of its last."""

    command: str
    until: float
    cores: tuple[float, ...] = ()
    writes: tuple[float, ...] = ()
    steps: tuple[float, ...] = ()
    pid: int | None = None  # the job that read them (None: read back from the store)
    loop: str | None = None
    loop_pairs: tuple[tuple[int, float], ...] = ()

    def usable(self) -> bool:
        """Enough readings of one kind to pace a job by (as a twin's reference)."""
        return enough(len(self.cores), len(self.writes), len(self.steps),
                       loop_seconds(self.loop_pairs) if self.loop else 0.0)


@dataclass
class OwnPace:
    """Each job's loader pace alone and beside others, tick by tick (jobs gone are forgotten,
    their references alone lent to twins for TWIN_MAX_AGE_S)."""

    _tracks: dict[Key, Track] = field(default_factory=dict)
    _twins: dict[TwinKey, Lent] = field(default_factory=dict)
    _stored: dict[Key, Lent] = field(default_factory=dict)  # lent from the store, by job

    def lend_stored(self, key: Key, ref: Reference) -> None:
        """Lend job `key` a stored reference alone (engine/pace_refs.py): it paces the job
        where neither its own readings alone nor a running twin's do."""
        track = Track(alone_until=ref.until, loop_name=ref.loop)
        for rate, xs in ((track.cores, ref.cores), (track.writes, ref.writes)):
            rate.alone.extend(xs)
        track.steps_alone.extend(ref.steps)
        if ref.loop:
            track.loop_alone.extend(ref.loop_pairs)
        self._stored[key] = Lent(None, ref.command, track, stored=True)

    def references(self) -> list[Reference]:
        """The references alone read here, by the job that read them (its own, lent to twins;
        those of jobs gone are kept TWIN_MAX_AGE_S): what engine/pace_refs.py stores."""
        out = []
        for ref in self._twins.values():
            tr, until = ref.track, ref_until(ref.track)
            if until is not None:
                out.append(Reference(ref.command, until, tuple(tr.cores.alone),
                                     tuple(tr.writes.alone), tuple(tr.steps_alone), ref.pid,
                                     tr.loop_name if tr.loop_alone else None,
                                     tuple(tr.loop_alone) if tr.loop_name else ()))
        return out

    def update(self, jobs: Sequence[JobSample], t: float) -> dict[str, Pace]:
        keys = {_key(j) for j in jobs}
        for key in [k for k in self._tracks if k not in keys]:
            del self._tracks[key]
        for key in [k for k in self._stored if k not in keys]:
            del self._stored[key]
        alone = len(jobs) == 1
        tracks = []
        for j in jobs:
            tr = self._tracks.setdefault(_key(j), Track())
            tr.seen += 1
            tr.under_way = tr.under_way or _under_way(j, tr.seen)
            tracks.append(tr)
        under_way = sum(tr.under_way for tr in tracks)
        out = {}
        for j, tr in zip(jobs, tracks):
            c, w = j.cpu_cores_workers, j.loader_writes_per_s
            tr.workers = tr.workers or c is not None or w is not None
            if tr.was_alone is not None and tr.was_alone != alone:
                tr.since = t
            tr.was_alone = alone
            s = j.step_time_s
            if s is not None and s != tr.last_step and t - tr.since > STRADDLE_S:
                if alone and tr.seen > SETTLE:
                    tr.steps_alone.append(s)
                elif not alone and tr.seen > SETTLE:
                    tr.step_now, tr.step_over, tr.step_now_t = s, None, t
            over = j.step_time_over_s
            if over is not None and not alone and (tr.step_now is None or over > tr.step_now):
                tr.step_now, tr.step_over = None, over  # its newest burst: longer than that
            tr.last_step = s if s is not None else tr.last_step
            rates = ((tr.cores, c), (tr.writes, w))
            tr.others_starting = not alone and under_way == tr.under_way
            _count(j, tr, "alone" if alone else "starting" if tr.others_starting else "beside", t)
            if alone:
                if any(len(r.now) >= NOW_MIN for r, _ in rates):  # the others are gone: keep
                    for r, _ in rates:  # how it ran beside them
                        r.beside = r.recent()
                    tr.beside_until, tr.alone_since = tr.beside_t, 0
                for r, _ in rates:
                    r.now.clear()
                tr.step_now = tr.step_over = None
                if (c is not None or w is not None) and tr.under_way:
                    for r, x in rates:
                        if x is not None:
                            r.alone.append(x)
                    tr.alone_until = t
                    tr.alone_since += 1
                tr.last_alone = t
                self._lend(j, tr)
            elif not tr.others_starting:  # another job under way beside it
                tr.beside_t = t
                for r, x in rates:
                    if x is not None and tr.under_way:
                        r.now.append(x)
            twin = None if alone or has_ref(tr) else self._twin(j, t)
            out[j.name] = pace(tr, alone, t, twin, j.command)
        return out

    def _lend(self, j: JobSample, tr: Track) -> None:
        """Lend a job's readings alone to its twins, once they are a reference."""
        if not j.command or not has_ref(tr):
            return
        key = _twin_key(j, j.command)
        lent = self._twins.get(key)
        if lent is not None and lent.track is tr:
            return  # lent already: its track's deques are read where they are
        self._twins[key] = Lent(j.pid, j.command, tr)
        while len(self._twins) > TWINS_KEPT:  # the one alone longest ago goes
            del self._twins[min(self._twins, key=lambda k: ref_until(self._twins[k].track) or 0.0)]

    def _twin(self, j: JobSample, t: float) -> Lent | None:
        """The reference alone lent by a twin of `j` (analyse/slowdown/twins.py) in its directory, else
        a stored one lent to it (`lend_stored`)."""
        ref = self._twins.get(_twin_key(j, j.command)) if j.command else None
        until = None if ref is None else ref_until(ref.track)
        if ref is not None and ref.pid != j.pid and until is not None and t - until <= TWIN_MAX_AGE_S:
            return ref
        ref = self._stored.get(_key(j))
        until = None if ref is None else ref_until(ref.track)
        return ref if until is not None and t - until <= STORED_MAX_AGE_S else None


def _twin_key(j: JobSample, command: str) -> TwinKey:
    return twins.key(command), j.cwd, j.user, j.container


def _under_way(j: JobSample, seen: int) -> bool:
    """Whether a job seen on `seen` ticks is past its start-up (see the module docstring): its
    age is its process's where read (a job older than the monitor is not starting), else the
    ticks it was seen on."""
    age = j.elapsed_s if j.elapsed_s is not None else seen
    if age <= SETTLE:
        return False
    # a loader's workers start with its first batch, after the model and its CUDA context: a
    # job without any (yet) may still be starting
    workers = j.cpu_cores_workers is not None or j.loader_writes_per_s is not None
    return workers or age > SETTLE_NO_WORKERS


def _key(j: JobSample) -> Key:
    return j.pid if j.pid is not None else j.name


def _count(j: JobSample, tr: Track, side: str, t: float) -> None:
    """Take a job's new loop-counter reading (analyse/slowdown/pace.py): the pair of dumps
    since its last one goes to its side, where the whole pair lies within that side."""
    if not tr.under_way:  # its start-up is not its pace: pairs count from when it is under way
        side = "its start-up"
    if side != tr.side:
        tr.side, tr.side_since = side, t
    name, steps, span, at = j.loop_counter, j.loop_steps, j.loop_span_s, j.loop_read_t
    if name is None or steps is None or span is None or at is None:
        return
    if name != tr.loop_name:  # another counter: the readings so far count something else
        tr.loop_name, tr.loop_last, tr.loop_warm = name, (at, steps, span), LOOP_WARM_PAIRS
        tr.loop_alone.clear()
        tr.loop_now.clear()
        return
    last = tr.loop_last
    if last is None or at <= last[0]:
        tr.loop_last = last or (at, steps, span)
        return
    tr.loop_last = (at, steps, span)
    d_steps, d_span = steps - last[1], span - last[2]
    if d_span <= 0 or d_steps < 0:
        return  # not a pair (a new epoch)
    if tr.loop_warm > 0:  # its loop's warm-up
        tr.loop_warm -= 1
        return
    if last[0] < tr.side_since:
        return  # across a change of side
    if side == "alone":
        tr.loop_alone.append((d_steps, d_span))
    elif side == "beside":
        tr.loop_now.append((d_steps, d_span))
