"""Live rates against the box's measured peaks: the dataset disk's read rate, each GPU link's copies.

Pure functions. `peaks_from_profile` keeps, from a stored machine profile (`gputop-dl
machine`, schema `gputop-dl.machine/1`, docs/machine.md), what the live verdict compares
with: each measured filesystem's sequential and random 128 KiB O_DIRECT read rates (and the
device number its paths are on now, from `dev_of`), and each GPU's measured pinned H2D and
D2H copy rates from its own CPUs with the link's theoretical peak beside them.
`with_box_peaks` adds to a verdict:

- **disk**: per device the judged jobs read from (each at least MIN_READ_BPS), what they read
  together now, what they would read at solo speed (each one's rate times its slowdown, where
  the verdict has one) and the device's measured peak. A line on an io-bound or memory-bound
  verdict, or where the reads reach PEAK_NEAR of the peak;
- **PCIe**: per GPU a judged job uses whose throughput NVML gives, H2D (the GPU's rx) and D2H
  (its tx) against the link's measured copy rates (its theoretical peak where the profile has
  no copies, said so);
- **no profile**: the evidence says so once, with how to make one; no peak is made up.

None of it changes the verdict's kind or any estimate. The evidence is `box_peaks`
(docs/verdict.md, docs/contracts.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, TypedDict

from gputop_dl.analyse.live.io_share import MIN_READ_BPS
from gputop_dl.analyse.verdict_types import Verdict
from gputop_dl.snapshot import GpuProcess, GpuSample, JobSample

__all__ = ["BoxPeaks", "BoxPeaksEvidence", "DiskPeak", "DiskRate", "LinkPeak", "LinkRate", "NO_PROFILE", "PEAK_NEAR", "Peaks",
           "box_peaks_evidence", "measured_when", "peaks_from_profile", "with_box_peaks"]

PEAK_NEAR = 0.5  # reads at this share of the disk's measured peak or more: a line on any verdict
NO_PROFILE = ("no machine profile of this host: live disk and PCIe rates are not compared with "
              "what the box can give; `gputop-dl machine` measures them (about 20 s, stored; "
              "`--data DIR` for the dataset's disk)")
_BOUND = ("io-bound", "memory-bound")


class DiskPeak(TypedDict):
    """One measured filesystem of the profile."""

    dev: int | None  # st_dev of its paths now (None: none of them is there any more)
    mount: str | None
    name: str | None  # the block device
    paths: list[str]
    seq_bps: float | None
    rand_bps: float | None
    bypassed: bool | None  # read with O_DIRECT (False: cache rates, no disk peak)


class LinkPeak(TypedDict):
    """One GPU of the profile: its measured pinned copies from its own CPUs."""

    gpu: int
    uuid: str | None
    h2d_bps: float | None
    d2h_bps: float | None
    peak_bps: float | None  # the link's theoretical peak per direction when profiled


class BoxPeaks(TypedDict):
    created: float
    host: str
    quick: bool
    disks: list[DiskPeak]
    links: list[LinkPeak]


class DiskRate(TypedDict):
    """Evidence: the judged jobs reading from one device, against its measured peak."""

    device: str
    jobs: list[str]
    read_bps: int
    solo_read_bps: int | None
    seq_bps: float | None
    rand_bps: float | None
    share: float | None


class LinkRate(TypedDict):
    """Evidence: one GPU's live PCIe throughput against its link's peak."""

    gpu: int
    jobs: list[str]
    h2d_bps: int | None
    d2h_bps: int | None
    h2d_peak_bps: float | None
    d2h_peak_bps: float | None
    peak: str | None  # "measured" | "theoretical"
    h2d_share: float | None
    d2h_share: float | None


class ProfileRef(TypedDict):
    host: str
    created: float
    quick: bool


class BoxPeaksEvidence(TypedDict):
    """The verdict's evidence `box_peaks`."""

    profile: ProfileRef | None
    note: str | None
    disks: list[DiskRate]
    links: list[LinkRate]


@dataclass(frozen=True)
class Peaks:
    """What the live verdict compares with: `box` None when this host has no stored profile."""

    box: BoxPeaks | None


def _num(x: object) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def peaks_from_profile(p: Mapping[str, Any], dev_of: Callable[[str], int | None]) -> BoxPeaks:
    """The peaks of a stored profile; `dev_of(path)`: the device number a path is on now."""
    disks: list[DiskPeak] = []
    for s in p.get("storage") or ():
        paths = [str(x) for x in s.get("paths") or ()]
        dev = next((d for d in (dev_of(x) for x in paths + [str(s.get("mount") or "")] if x)
                    if d is not None), None)
        disks.append({"dev": dev, "mount": s.get("mount"), "name": s.get("name"), "paths": paths,
                      "seq_bps": _num(s.get("seq_bps")), "rand_bps": _num(s.get("rand_bps")),
                      "bypassed": s.get("page_cache_bypassed")})
    links: list[LinkPeak] = []
    for g in p.get("gpus") or ():
        near: Mapping[str, Any] = next((c for c in g.get("copies") or ()
                                        if c.get("from") == "near" and "error" not in c), {})
        links.append({"gpu": int(g.get("index") or 0), "uuid": g.get("uuid"),
                      "h2d_bps": _num(near.get("h2d_pinned_bps")),
                      "d2h_bps": _num(near.get("d2h_pinned_bps")),
                      "peak_bps": _num(g.get("link_peak_bps"))})
    return {"created": float(p.get("created") or 0.0), "host": str(p.get("host") or ""),
            "quick": bool(p.get("quick")), "disks": disks, "links": links}


def measured_when(created: float) -> str:
    """"measured 2026-11-26 13:40 UTC"."""
    return "measured " + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(created))


def _mb(bps: float) -> str:
    return f"{bps / 1e6:.0f} MB/s" if bps >= 10e6 else f"{bps / 1e6:.1f} MB/s"


def _gb(bps: float) -> str:
    return f"{bps / 1e9:.1f} GB/s" if bps >= 1e8 else f"{bps / 1e9:.2f} GB/s"


def _share(x: float | None, peak: float | None) -> float | None:
    return round(x / peak, 3) if x is not None and peak else None


def _disk(v: Verdict, jobs: Sequence[JobSample], box: BoxPeaks | None,
          lines: list[str]) -> list[DiskRate]:
    slow = {j.name: j.slowdown for j in v.jobs}
    groups: dict[int, list[JobSample]] = {}
    for j in jobs:
        r = j.io_read_bytes_per_s
        if j.io_device is not None and r is not None and r >= MIN_READ_BPS:
            groups.setdefault(j.io_device, []).append(j)
    out: list[DiskRate] = []
    for dev, readers in sorted(groups.items()):
        names = [j.name for j in readers]
        read = float(sum(j.io_read_bytes_per_s or 0 for j in readers))
        ask = float(sum((j.io_read_bytes_per_s or 0) * max(1.0, slow.get(j.name) or 1.0)
                        for j in readers))
        asks_known = all(slow.get(n) is not None for n in names)
        peak = next((d for d in box["disks"] if d["dev"] == dev), None) if box else None
        seq = peak["seq_bps"] if peak and peak["bypassed"] else None
        rand = peak["rand_bps"] if peak and peak["bypassed"] else None
        label = readers[0].io_device_label or f"device {dev >> 8}:{dev & 0xff}"
        out.append({"device": label, "jobs": names, "read_bps": round(read),
                    "solo_read_bps": round(ask) if asks_known else None,
                    "seq_bps": seq, "rand_bps": rand, "share": _share(read, seq)})
        if box is None or not (v.kind in _BOUND or (seq and read >= PEAK_NEAR * seq)):
            continue
        who = (f"{' and '.join(names)} read" if len(names) == 2 else f"{', '.join(names)} read"
               if len(names) > 2 else f"{names[0]} reads")
        together = " together" if len(names) > 1 else ""
        if peak is None or not peak["seq_bps"]:
            lines.append(f"disk: {who} {_mb(read)} from {label}{together}, a disk the machine "
                         "profile did not measure: `gputop-dl machine --data DIR` (a folder on "
                         "it) measures its read rate")
        elif seq is None:
            lines.append(f"disk: {who} {_mb(read)} from {label}{together}; the machine profile "
                         f"read {peak['mount'] or label} through the page cache (O_DIRECT "
                         "refused): no disk peak to compare with")
        else:
            solo = (f", ≈ {_mb(ask)} at solo speed (each one's rate × its slowdown)"
                    if asks_known and len(names) > 1 and ask > read * 1.05 else "")
            rnd = f", {_mb(rand)} in random 128 KiB reads" if rand else ""
            lines.append(f"disk: {label} reads {_mb(seq)} at most{rnd} ({measured_when(box['created'])}); "
                         f"{who} {_mb(read)}{together} now, {read / seq:.0%} of that{solo}")
    return out


def _job_gpus(jobs: Sequence[JobSample], gprocs: Sequence[GpuProcess]) -> dict[int, list[str]]:
    users: dict[int, list[str]] = {}
    for j in jobs:
        pids = set(j.pids) | ({j.pid} if j.pid is not None else set())
        for i in sorted({p.gpu_index for p in gprocs if p.pid in pids}):
            users.setdefault(i, []).append(j.name)
    return users


def _pcie(jobs: Sequence[JobSample], gprocs: Sequence[GpuProcess], gpus: Sequence[GpuSample],
          box: BoxPeaks | None, lines: list[str]) -> list[LinkRate]:
    by_index = {g.index: g for g in gpus if not g.error}
    out: list[LinkRate] = []
    for i, names in sorted(_job_gpus(jobs, gprocs).items()):
        g = by_index.get(i)
        if g is None or (g.pcie_rx_bytes_per_s is None and g.pcie_tx_bytes_per_s is None):
            continue
        link = None
        if box is not None:
            link = next((x for x in box["links"] if g.uuid and x["uuid"] == g.uuid), None) or \
                next((x for x in box["links"] if x["gpu"] == i and not (g.uuid and x["uuid"])), None)
        measured = link is not None and (link["h2d_bps"] or link["d2h_bps"])
        h2d_peak = (link["h2d_bps"] if measured else link["peak_bps"]) if link else None
        d2h_peak = (link["d2h_bps"] if measured else link["peak_bps"]) if link else None
        h2d, d2h = g.pcie_rx_bytes_per_s, g.pcie_tx_bytes_per_s
        out.append({"gpu": i, "jobs": names, "h2d_bps": h2d, "d2h_bps": d2h,
                    "h2d_peak_bps": h2d_peak, "d2h_peak_bps": d2h_peak,
                    "peak": "measured" if measured else "theoretical" if h2d_peak else None,
                    "h2d_share": _share(h2d, h2d_peak), "d2h_share": _share(d2h, d2h_peak)})
        if box is None:
            continue
        if link is None:
            lines.append(f"GPU {i} ({', '.join(names)}): the machine profile has no GPU {i}: "
                         "`gputop-dl machine` measures its link")
            continue

        def part(what: str, x: int | None, peak: float | None) -> str:
            if x is None:
                return f"{what} –"
            return f"{what} {_gb(x)}" + (f", {x / peak:.0%} of {_gb(peak)}" if peak else "")

        where = (f"the link's measured pinned copies ({measured_when(box['created'])})" if measured
                 else "the link's theoretical peak (its copies were not measured: `gputop-dl "
                      "machine` without --quick)" if h2d_peak else "no peak known")
        lines.append(f"GPU {i} ({', '.join(names)}): PCIe {part('H2D', h2d, h2d_peak)}; "
                     f"{part('D2H', d2h, d2h_peak)}, against {where}")
    return out


def box_peaks_evidence(v: Verdict, jobs: Sequence[JobSample], gprocs: Sequence[GpuProcess],
                       gpus: Sequence[GpuSample], peaks: Peaks) -> tuple[BoxPeaksEvidence, list[str]]:
    """The verdict's `box_peaks` evidence and its lines."""
    box = peaks.box
    lines: list[str] = []
    disks = _disk(v, jobs, box, lines)
    links = _pcie(jobs, gprocs, gpus, box, lines)
    profile: ProfileRef | None = None if box is None else {
        "host": box["host"], "created": box["created"], "quick": box["quick"]}
    ev: BoxPeaksEvidence = {"profile": profile, "note": NO_PROFILE if box is None else None,
          "disks": disks, "links": links}
    if box is None and (links or (disks and v.kind in _BOUND)):
        lines.append(NO_PROFILE)
    return ev, lines


def with_box_peaks(v: Verdict, jobs: Sequence[JobSample], gprocs: Sequence[GpuProcess],
                   gpus: Sequence[GpuSample], peaks: Peaks | None) -> Verdict:
    """The verdict with `box_peaks` in its evidence (peaks None: not looked up, unchanged)."""
    if peaks is None:
        return v
    ev, lines = box_peaks_evidence(v, jobs, gprocs, gpus, peaks)
    return v.replace(evidence={**v.evidence, "box_peaks": ev},
                     evidence_lines=v.evidence_lines + tuple(lines))
