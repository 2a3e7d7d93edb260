"""The suite's xdist scheduler: the tests that hold the box go to one worker, after all others.

pytest-xdist's `loadgroup` would send an `xdist_group("heavy")` to one worker, but with pytest
9.2 the group is silently ignored (xdist renames `item._nodeid`, which pytest no longer reads),
so the heavy tests were spread over every worker and only the file lock (conftest.heavy_lock)
kept them apart. This scheduler is xdist's `worksteal` for every other test; the heavy ones are
held back until nothing else is left to share out, then the first idle worker gets all of
them, in their order. On one worker, one after another, the heavy tests of a module can share
what they start (a module-scoped fixture: its scripts run only while that module's tests do).

Heavy tests that may run two at a time (conftest: the `pairs` marker, each using about one
core and timed against itself) go last, half to the heavy worker and half to another, once
every other test, the heavy ones included, has ended: they then run beside each other only.

Which tests are heavy is decided where the items are, in the workers (conftest.holds_the_box):
each worker writes their IDs to a file the controller names in its `workerinput`, before it
reports its collection; the scheduler reads the file once every collection is in.
"""

from __future__ import annotations

import json
import os
import pathlib
import time
from collections.abc import Sequence
from typing import Any

from xdist.scheduler import WorkStealingScheduling
from xdist.scheduler.worksteal import MIN_PENDING

INPUT_KEY = "gputop_dl_heavy_ids"  # the file's path, in each worker's workerinput


def write_heavy_ids(path: str, ids: Sequence[str], pairs: Sequence[str] = ()) -> None:
    """Every worker writes the same lists (`pairs`: those of `ids` that may run two at a
    time); each replaces the file whole (rename)."""
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"heavy": list(ids), "pairs": list(pairs)}, f)
    os.replace(tmp, path)


def pairs_flag(ids_path: str) -> str:
    """The file whose existence lets the pairs run (the scheduler writes it)."""
    return f"{ids_path}.pairs"


def wait_for_pairs(ids_path: str, within_s: float = 3600.0) -> None:
    """A pair test's wait for the flag: the heavy tests that run alone are done."""
    deadline = time.monotonic() + within_s
    while not os.path.exists(pairs_flag(ids_path)):
        if time.monotonic() > deadline:
            raise TimeoutError("the tests that run alone did not end in time")
        time.sleep(0.05)


class BoxScheduling(WorkStealingScheduling):
    """xdist's `worksteal` for the tests that share the box; the heavy ones to one worker, last.

    `worksteal` gives each worker a contiguous share of the collection (each starts at another
    place: the process tests of one module run beside another module's quick ones, and a
    module's tests stay on one worker), and a worker that runs out takes half of the longest
    queue left. xdist's `load` did the first and not the second: a module of long tests was
    once the tail of one worker's queue while the others waited (47 s). Handing out a few
    tests at a time did the second and not the first: three workers on the same module's
    process tests at once ran them 10 % slower, and the others ended later."""

    def __init__(self, config: Any, log: Any, ids_path: str) -> None:
        super().__init__(config, log)
        self.ids_path = ids_path
        self.held: list[int] = []  # the heavy tests' indices, not yet handed out
        self.held_pairs: list[int] = []  # those that run two at a time, not yet handed out
        # the workers that run them (the first: the heavy ones, then half of the pairs; the
        # second: the other half); no one steals from them
        self.box_nodes: list[Any] = []
        self.pairs: set[int] | None = None  # the pairs' indices, once the heavy tests are
        # handed out; None before that and once the flag is written

    def _heavy_ids(self) -> tuple[set[str], set[str]]:
        try:
            with open(self.ids_path, encoding="utf-8") as f:
                doc = json.load(f)
            return set(doc["heavy"]), set(doc["pairs"])
        except (OSError, ValueError, KeyError, TypeError):  # none written: nothing held back
            return set(), set()

    @property
    def tests_finished(self) -> bool:
        return not self.held and not self.held_pairs and super().tests_finished

    @property
    def has_pending(self) -> bool:
        return bool(self.held or self.held_pairs) or super().has_pending

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is not None:  # a worker added later: hand it work as to the others
            self.check_schedule()
            return
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        self.collection = list(next(iter(self.node2collection.values())))
        heavy, pairs = self._heavy_ids()
        self.pending[:] = [i for i, t in enumerate(self.collection) if t not in heavy]
        self.held = [i for i, t in enumerate(self.collection) if t in heavy and t not in pairs]
        self.held_pairs = [i for i, t in enumerate(self.collection) if t in pairs]
        self.check_schedule()

    def check_schedule(self) -> None:
        """`worksteal`'s, but where it would shut an idle worker down with nothing left to
        steal, the first such worker gets every heavy test, then the pairs go to two workers;
        no one steals from them."""
        self._open_pairs()
        up = [(n, p) for n, p in self.node2pending.items() if not n.shutting_down]
        idle = [n for n, p in up if len(p) < MIN_PENDING]
        if not idle:
            return
        if self.pending:
            for i, node in enumerate(idle):
                self._send_tests(node, len(self.pending) // (len(idle) - i))
            idle = [n for n, p in up if len(p) < MIN_PENDING]
            if not idle:
                return
        if self.steal_requested_from_node is not None:  # one steal at a time
            return
        sharing = [(n, p) for n, p in up if n not in self.box_nodes]
        steal_from = max(sharing, key=lambda np: len(np[1]), default=None)
        n_steal = 0 if steal_from is None else min(len(steal_from[1]) // 2,
                                                    max(0, len(steal_from[1]) - MIN_PENDING))
        if n_steal:
            steal_from[0].send_steal(steal_from[1][-n_steal:])
            self.steal_requested_from_node = steal_from[0]
            return
        for node in idle:  # nothing left to share out
            if self.held or self.held_pairs:  # the pairs' second worker: the least busy other
                rest = sorted((n for n, _ in up if n is not node),
                              key=lambda n: len(self.node2pending[n]))
                self._hand_out_heavy(node, rest)
                return
            node.shutdown()

    def _hand_out_heavy(self, node: Any, others: list[Any]) -> None:
        """The heavy tests to `node`, then half of the pairs; the other half to a second
        worker, whose pairs wait for the flag (`_open_pairs`); every other worker ends once
        its queue is done."""
        held, self.held = self.held, []
        pairs, self.held_pairs = self.held_pairs, []
        self.pairs = set(pairs)
        self.box_nodes = [node, *others[:1]]
        parts = [held + pairs[::2], pairs[1::2]] if others else [held + pairs]
        for n, part in zip(self.box_nodes, parts):
            if part:
                self.node2pending[n].extend(part)
                n.send_runtest_some(part)
        for n in others[1:]:
            n.shutdown()
        self._open_pairs()

    def _open_pairs(self) -> None:
        """The flag the pairs wait for (pairs_flag): written once no worker has a test left
        but pairs. The heavy worker's tests that run alone are not enough: another worker's
        last few tests (fewer than worksteal steals) may still run after them (a pair once
        started 3 ms before another worker's last test ended)."""
        if self.pairs is None or any(set(p) - self.pairs for p in self.node2pending.values()):
            return
        self.pairs = None
        pathlib.Path(pairs_flag(self.ids_path)).touch()
