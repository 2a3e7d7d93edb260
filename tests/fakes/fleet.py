"""A fixed fleet for the fleet view's tests: three nodes (one unreachable), jobs, and one
distributed job (torchrun, world size 4) with a rank on the unreachable node missing.

`fleet_snapshot()` builds the snapshot from real Node values through `group_distributed`;
`FakeFleetSource` has the poller's thread-facing API and hands snapshots on `emit`.
"""

from __future__ import annotations

from gputop_dl.analyse.live.distributed import group_distributed
from gputop_dl.collect.fleet.nodes import Node, NodeJob
from gputop_dl.collect.fleet.poll import FleetSnapshot

T0 = 1_763_750_000.0
GiB = 1 << 30


def gpus(utils, used, total=80):
    return [{"index": str(i), "util": u, "mem_used": m * GiB, "mem_total": total * GiB}
            for i, (u, m) in enumerate(zip(utils, used))]


def ranks(*pairs):
    return [{"rank": r, "local_rank": lr, "rank_pid": pid} for r, lr, pid in pairs]


def fleet_nodes(step: float = 0.41) -> list[Node]:
    a = Node("gpu-a:9402", True, hostname="gpu-a", mode="serve", age_s=0.4, cpus=32,
             cpu_busy=0.62, load1=18.2, gpus=gpus((0.93, 0.88), (61.0, 58.5)),
             jobs=[NodeJob("torchrun train.py", 5100, "running", None, 3.1, 0.08, step,
                           slowdown=1.64, slowdown_source="measured", gpu_mem=119.0 * GiB,
                           run_id="rdzv-7f3a", world_size=4,
                           ranks=ranks((0, 0, 5101), (1, 1, 5102))),
                   NodeJob("eval.py", 6100, "running", None, 0.9, 0.45, 0.120,
                           slowdown_at_least=2.4, slowdown_source="own pace", gpu_mem=2.0 * GiB)],
             verdict="cpu-bound", confidence=0.8, name="rack1-a")
    b = Node("gpu-b:9402", False, "unreachable (Connection refused)")
    c = Node("gpu-c:9402", True, hostname="gpu-c", mode="serve", age_s=14.0, cpus=32,
             cpu_busy=0.21, load1=4.0, gpus=gpus((0.71, 0.02), (60.2, 0.4)),
             jobs=[NodeJob("torchrun train.py", 7100, "running", None, 1.4, 0.05, 0.52,
                           gpu_mem=60.0 * GiB, run_id="rdzv-7f3a", world_size=4,
                           ranks=ranks((2, 0, 7101)))])
    return [a, b, c]


def fleet_snapshot(t: float = 0.0, last_seen: dict | None = None) -> FleetSnapshot:
    nodes = fleet_nodes()
    seen = {("rdzv-7f3a", 3): "gpu-b:9402"} if last_seen is None else last_seen
    return FleetSnapshot(time=T0 + t, nodes=nodes, distributed=group_distributed(nodes, seen),
                         poll_s=0.012, source="nodes", last_ok={"gpu-b:9402": T0 + t - 12,
                                                               "gpu-a:9402": T0 + t,
                                                               "gpu-c:9402": T0 + t})


class FakeFleetSource:
    interval = 2.0
    source = "nodes"
    session_id = None

    def __init__(self):
        self.subs = []
        self.started = self.stopped = False
        self.polled_now = 0

    def subscribe(self, fn):
        self.subs.append(fn)

    def start(self):
        self.started = True

    def emit(self, snap):
        for fn in self.subs:
            fn(snap)

    def poll_now(self):
        self.polled_now += 1

    def request_stop(self, reason="interrupted"):
        self.stopped = True

    def live_jobs(self):
        return []

    @property
    def running(self):
        return self.started and not self.stopped

    def join(self, timeout=None):
        return True
